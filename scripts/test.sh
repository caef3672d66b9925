#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs them.
# Tests start their own registries, token server and TLS material on 127.0.0.1 and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo test --locked --lib --bins --tests -- --test-threads=4
