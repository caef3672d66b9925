#!/usr/bin/env bash
# Render benchmark: times `bootstrap render` (load + validate + render + write) of a generated,
# deterministic 500-node inventory with the release binary. BENCH_NODES, BENCH_RUNS change the
# shape. Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release --bin bootstrap
target="${CARGO_TARGET_DIR:-$PWD/target}"
BOOTSTRAP_BIN="$target/release/bootstrap" cargo run --locked --release --quiet --example bench_render
