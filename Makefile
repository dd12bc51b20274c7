# The same targets a person runs locally are the ones CI runs (.ci/run).
CARGO ?= cargo
STRATA = target/release/strata

.PHONY: deps build demo test test-first-run fuzz lint bench fixture

deps:
	./ci/install-deps

build: deps
	$(CARGO) build --workspace --release

demo: build
	$(STRATA) demo

test: deps
	$(CARGO) test --workspace

# install-deps' first run, against fresh state (root; CI runs it).
test-first-run:
	./ci/test-first-run

# The property tests at length (make test runs 64 cases of each):
# manifests, image layers, label values. STRATA_FUZZ_SEED=N replays a run.
FUZZ_CASES ?= 5000
fuzz: deps
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p strata-manifest --test fuzz
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p strata-oscontainer --test fuzz

# Every shell script the project ships: ci/ and the fixture's programs.
SHELL_SCRIPTS = .ci/run ci/install-deps ci/test-first-run \
	manifests/node-layer/coreos-ignition-firstboot-complete \
	manifests/demo/node-layer/coreos-ignition-firstboot-complete \
	$(filter-out %.md %.service %.cil %/kernel-core-modules,$(wildcard crates/testdistro/files/*))

lint:
	shellcheck $(SHELL_SCRIPTS)
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: build
	$(CARGO) run --release -p strata-bench --bin strata-bench
