# The two commands of the README: `make run` (demo + throughput-vs-streams benchmark) and
# `make test` (cargo test + pytest; installs the `test` and `bench` extras so the baseline
# tests run). Both install what they need with pip first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: install install-test run test test-rust test-py bench loom fmt lint

install:
	$(PIP) install -q -e .

install-test:
	$(PIP) install -q -e '.[test,bench]'

run:
	$(PIP) install -q -e '.[bench]'
	$(PYTHON) -m npurt.demo
	$(PYTHON) -m npurt.bench --quick

test: install-test test-rust test-py

test-rust:
	cargo test --workspace

test-py:
	$(PYTHON) -m pytest -q

bench:
	$(PIP) install -q -e '.[bench]'
	$(PYTHON) -m pytest benches --benchmark-enable -q

loom:
	LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p npurt-core --release --lib loom

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --all-targets
