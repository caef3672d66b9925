#!/usr/bin/env bash
# Mirror benchmark: bootstrap against skopeo (sync for mirror-to-mirror, copy into an OCI layout
# for mirror-to-disk) on the same synthetic sets, each with a fresh destination; prints wall time,
# peak RSS and ratios. Shape via BENCH_IMAGES, BENCH_LAYER_MIB, BENCH_BIG_MIB, BENCH_WIDE;
# BENCH_CHUNKS=16,64,256 also times bootstrap per upload chunk size.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }
cargo build --locked --release --bin bootstrap
BOOTSTRAP_BIN="$PWD/target/release/bootstrap" cargo run --locked --release --quiet --example bench_mirror
