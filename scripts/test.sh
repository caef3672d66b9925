#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs them with
# cargo-nextest (the `ci` profile of .config/nextest.toml: every test in its own process, no
# stop at the first failure, hung tests killed) and prints the slowest tests, pass or fail.
# Tests start their own registries, token server and TLS material on 127.0.0.1 and stop them.
# Extra arguments go to nextest, e.g. `scripts/test.sh -E 'test(/^mirror::/)'`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest" >&2
  cargo install --locked cargo-nextest
fi
# Written by the `ci` profile; removed first so that a build failure shows no stale times.
junit="${CARGO_TARGET_DIR:-target}/nextest/ci/junit.xml"
rm -f "$junit"
status=0
cargo nextest run --locked --profile ci --workspace --lib --bins --tests "$@" || status=$?
if [ -f "$junit" ]; then
  python3 scripts/slowest-tests.py "$junit" 15 || true
fi
exit "$status"
