#!/usr/bin/env bash
# Install at site size (issue 31, point 4): brings the lab up with 3 and with 24 nodes (a
# sushy-tools BMC, a network namespace and an sshd host each) and times `bootstrap install`'s
# boot, wait and prep stages on each, with boot.parallel and prep.forks at the node count; prints
# one Markdown table (each stage's seconds, wall, CPU and peak RSS, the 24-to-3 ratio against the
# goal of 1.5x). examples/bench_install_scale.rs says what it does. Needs root (network
# namespaces) and the lab venv (scripts/install-deps.sh). BENCH_NODES (default 3,24), BENCH_STEP
# (the lab's --step, default 1s), BENCH_FORKS (prep.forks, default the node count),
# BENCH_DIR (keep the files). BOOTSTRAP_BIN / BOOTSTRAP_LAB_BIN measure other binaries. Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lab-env.sh
cargo run --locked --release --quiet --example bench_install_scale
