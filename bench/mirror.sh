#!/usr/bin/env bash
# Mirror benchmark (issue 17, point 9; issue 31, points 6 and 7): bootstrap against skopeo (sync
# for mirror to mirror on loopback and over a WAN-shaped link, copy into an OCI layout for mirror
# to disk and to an archive) and against the machine's ceiling (the same blobs moved by plain
# parallel curl), each run into a fresh destination, registries over TLS. The loopback, disk and
# archive comparisons alternate the tools over BENCH_ROUNDS rounds (default 5) and print each
# tool's median and spread and the median ratio; every run also prints the machine's pressure
# stall times and disk write-back around it. Prints wall time, CPU, peak RSS, ratios and a
# Markdown table with the issue's goals. The default is the issue's real shape (about 10 minutes on 2 cores);
# BENCH_SCALE=quick runs a small shape in about a minute. Every knob is listed at the top of
# examples/bench_mirror.rs (BENCH_TLS=0, BENCH_PARTS, BENCH_WAN_*, BENCH_CHUNKS=16,64,256, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }
command -v curl >/dev/null || { apt-get install -y -qq curl >/dev/null; }
cargo build --locked --release --bin bootstrap
BOOTSTRAP_BIN="$PWD/target/release/bootstrap" cargo run --locked --release --quiet --example bench_mirror
