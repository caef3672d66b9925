#!/usr/bin/env bash
# The lab rehearsal on a fresh machine: installs what it needs, builds bootstrap, starts two
# local registries, seeds one with generated images, mirrors to disk, then on to the other, and
# verifies both; then brings up the lab site, runs the read-only `bootstrap preflight` (every
# check green), pushes the site's GitOps repository, runs
# `bootstrap install` (it stops at prep on the two findings the lab plants), repairs them with
# `bootstrap-lab repair`, and runs the same install again: it continues at prep and hands the
# cluster to Argo CD; then day two adds the spare worker-0 (only its BMC reset, its CSRs
# approved) and `bootstrap gather` writes the support bundle: all twelve stages done, every BMC
# reset once (examples/lab_rehearsal.rs). Builds and uses both binaries: `bootstrap` (the site's)
# and `bootstrap-lab` (the lab's). Leaves the archive, records and run in .lab/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --locked --release --bin bootstrap --bin bootstrap-lab
BOOTSTRAP_BIN="$PWD/target/release/bootstrap" BOOTSTRAP_LAB_BIN="$PWD/target/release/bootstrap-lab" \
  LAB_DIR="$PWD/.lab" \
  cargo run --locked --release --quiet --example lab_rehearsal
