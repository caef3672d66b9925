#!/usr/bin/env bash
# Operator catalog benchmark (issue 31, points 2 and 3): a generated catalog of a real index's
# shape (200 packages, 8,000 bundles, 16,000 channel entries, 1.6 M skips, ~130 MiB of JSON) and
# every image it names, seeded into a local Distribution registry; then `bootstrap mirror
# --dry-run` for 5 packages, every package's heads and `full: true`, 5 packages of a catalog 4x
# larger, and a real mirror of 5 packages: wall time, peak RSS and the source registry's requests
# per image, with the issue's goals. Knobs at the top of examples/bench_catalog.rs
# (BENCH_CATALOG_PACKAGES, BENCH_CATALOG_OBJECT_BYTES for olm.bundle.object, BENCH_CATALOG_FACTOR,
# BENCH_CATALOG_PARTS). Seeding pushes ~16,000 small images (a few minutes). Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }
if [ -z "${BOOTSTRAP_BIN:-}" ]; then
    cargo build --locked --release --bin bootstrap
    BOOTSTRAP_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/bootstrap"
fi
BOOTSTRAP_BIN="$BOOTSTRAP_BIN" cargo run --locked --release --quiet --example bench_catalog
