# The same targets a person runs locally are the ones CI runs (.ci/run).
CARGO ?= cargo
STRATA = target/release/strata

.PHONY: deps build demo test test-cli test-crates test-first-run fuzz lint bench bench-full fixture install image test-image

deps:
	./ci/install-deps

build: deps
	$(CARGO) build --workspace --release

demo: build
	$(STRATA) demo

# The binary, its man pages and shell completions (generated from the CLI
# definitions, checked current by crates/cli/tests/docs.rs) under
# $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
install: build
	install -D -m 0755 $(STRATA) $(DESTDIR)$(PREFIX)/bin/strata
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -D -m 0644 completions/strata.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/strata
	install -D -m 0644 completions/_strata $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_strata
	install -D -m 0644 completions/strata.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/strata.fish

# The workspace's tests in two groups side by side: the CLI's end-to-end
# tests, and every other crate's. Most tests wait on one single-threaded
# program (librpm, dracut, qemu's TCG), so two at a time keep both cores
# busy. Built once first; each group's output is printed when it ends.
test: deps
	$(CARGO) test --workspace --no-run
	$(MAKE) --no-print-directory -j2 --output-sync=line test-cli test-crates

test-cli:
	$(CARGO) test -p strata-cli

test-crates:
	$(CARGO) test --workspace --exclude strata-cli

# strata's own OCI image, without a container engine (root): a Debian 12
# userland made by mmdebstrap and the release binary, written by strata's
# OCI code into target/image/oci (tag strata) and
# target/image/strata.ociarchive (crates/image).
image: deps
	$(CARGO) build --release -p strata-cli -p strata-image
	target/release/strata-image

# The image built twice to the same bytes, read by skopeo, and its strata
# running the demo in a sandbox rooted at the unpacked image (ci/sandbox;
# root; about 7 minutes).
test-image: deps
	$(CARGO) build --release -p strata-cli -p strata-image
	./ci/test-image

# install-deps' first run, against fresh state (root; CI runs it).
test-first-run:
	./ci/test-first-run

# The property tests at length (make test runs 64 cases of each):
# manifests, image layers, label values. STRATA_FUZZ_SEED=N replays a run.
FUZZ_CASES ?= 5000
fuzz: deps
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p strata-manifest --test fuzz
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p strata-compose --test fuzz
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p strata-oscontainer --test fuzz

# Every shell script the project ships: ci/ and the fixture's programs.
SHELL_SCRIPTS = .ci/run ci/install-deps ci/test-first-run \
	ci/test-image ci/sandbox \
	manifests/node-layer/coreos-ignition-firstboot-complete \
	manifests/demo/node-layer/coreos-ignition-firstboot-complete \
	$(filter-out %.md %.service %.cil %/kernel-core-modules,$(wildcard crates/testdistro/files/*)) \
	$(filter-out %.service %.conf,$(wildcard crates/disk/live/*))

lint:
	shellcheck $(SHELL_SCRIPTS)
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: build
	$(CARGO) run --release -p strata-bench --bin strata-bench

# The bench on a fixture the size of a real RHCOS base (about 500
# packages, 2.5 GB, 50,000 files; docs/fixture.md): every stage beside its
# baseline, compose and disk at half and full size, one table at the end
# (docs/bench.md). Long: tens of minutes, up to ~50 GB of scratch under
# target/ (what each step is done with is kept until the end).
bench-full: build
	$(CARGO) run --release -p strata-bench --bin strata-bench -- --scale rhcos
