#!/usr/bin/env bash
# Host prep against ansible-playbook (issue 31, point 5): the shipped playbooks on the lab's SSH
# hosts (3 and 24 of them) by `bootstrap prep` and by `ansible-playbook` (ansible-core from the
# lab venv), with the same inventory file (the one `bootstrap prep` writes for ansible-playbook)
# at forks 1 and 10, the tools alternating; prints one Markdown table (median wall time, CPU and
# peak RSS of each, the ratio, the recap counts both tools gave, the goal of 0.5x at forks 10).
# examples/bench_prep.rs says what it does. Needs root (network namespaces) and the lab venv
# (scripts/install-deps.sh). BENCH_NODES (default 3,24), BENCH_FORKS (default 1,10),
# BENCH_ROUNDS (default 2), BENCH_DIR (keep the files). BOOTSTRAP_BIN / BOOTSTRAP_LAB_BIN
# measure other binaries. Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lab-env.sh
cargo run --locked --release --quiet --example bench_prep
