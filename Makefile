# The two commands of the README: `make run` (demo + throughput-vs-streams benchmark) and
# `make test` (cargo test + pytest; installs the `test`, `bench` and `mpi` extras so the baseline
# and mpirun tests run). Both install what they need with pip first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: install install-test run test test-rust test-py bench loom fmt lint wheel-check

install:
	$(PIP) install -q -e .

install-test:
	$(PIP) install -q -e '.[test,bench,lint,mpi]'

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

# rustfmt (check only), clippy (warnings are errors), ruff, and stubtest: the .pyi checked
# against the built module.
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(PYTHON) -m ruff check python tests benches .ci
	$(PYTHON) -m mypy.stubtest npurt._npurt --allowlist .ci/stubtest-allowlist --ignore-disjoint-bases

# The wheel in a bare venv (only the wheel and the dependencies it declares) imports npurt
# and runs the README's quickstart. Reuses the release build of `pip install -e` (target/).
wheel-check:
	rm -rf target/wheels
	$(PIP) wheel -q --no-deps -w target/wheels .
	$(PYTHON) -m venv --clear target/wheel-venv
	target/wheel-venv/bin/python -m pip install -q --disable-pip-version-check target/wheels/npurt-*.whl
	cd target && wheel-venv/bin/python ../.ci/quickstart.py
