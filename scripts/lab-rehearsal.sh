#!/usr/bin/env bash
# A lab mirror rehearsal on a fresh machine: installs what it needs, builds bootstrap, starts two
# local registries, seeds one with generated images, mirrors to disk, then on to the other, and
# verifies both. Leaves the archive and records in .lab/ for inspection.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --locked --release --bin bootstrap
BOOTSTRAP_BIN="$PWD/target/release/bootstrap" LAB_DIR="$PWD/.lab" \
  cargo run --locked --release --quiet --example lab_rehearsal
