# The same targets a person runs locally are the ones CI runs (.ci/run).
CARGO ?= cargo
STRATA = target/release/strata

.PHONY: deps build demo test lint bench fixture

deps:
	./ci/install-deps

build: deps
	$(CARGO) build --workspace --release

demo: build
	$(STRATA) demo

test: deps
	$(CARGO) test --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: build
	$(CARGO) run --release -p strata-bench --bin strata-bench
