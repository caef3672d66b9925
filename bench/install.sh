#!/usr/bin/env bash
# Install runner benchmark (issue 28, point 7): memory over large outputs. Builds a run directory
# whose validate, render, tools and iso stages are done, with a 1.5 GiB agent ISO and a 600 MiB
# installer (sparse files: what is measured is reading and hashing them), then times
# `bootstrap install --until iso` over it: every stage is skipped, which is what a rerun does
# (the tools' outputs hashed to check them and again as the iso stage's inputs, the ISO hashed to
# check it). Runs twice: with no hash cache (cold) and with the cache the first run left. Prints
# wall time and peak RSS (/usr/bin/time -v) of each. BOOTSTRAP_BIN measures another binary (an
# older build, for a before/after); BENCH_ISO_MIB and BENCH_INSTALLER_MIB change the sizes.
# Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }
if [ -z "${BOOTSTRAP_BIN:-}" ]; then
    cargo build --locked --release --bin bootstrap
    BOOTSTRAP_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/bootstrap"
fi
iso_mib="${BENCH_ISO_MIB:-1536}"
installer_mib="${BENCH_INSTALLER_MIB:-600}"
inv="$PWD/inventory/lab"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run="$tmp/run"

install() { "$BOOTSTRAP_BIN" install --inventory "$inv" --run "$run" "$@"; }

# Marks STAGE done in state.json with its folder's files as its outputs. The stage began once
# (and failed: there is no release or installer here), so state.json holds its real inputs.
done_with_outputs() {
    python3 - "$run" "$1" "$2" <<'EOF'
import hashlib, json, os, sys
run, stage, folder = sys.argv[1:]
outputs = {}
for dirpath, _, names in os.walk(os.path.join(run, folder)):
    for name in names:
        path = os.path.join(dirpath, name)
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        outputs[os.path.relpath(path, run)] = h.hexdigest()
state_path = os.path.join(run, "state.json")
state = json.load(open(state_path))
for rec in state["stages"]:
    if rec["stage"] == stage:
        rec.update(status="done", outputs=outputs, detail="made by bench/install.sh")
json.dump(state, open(state_path, "w"), indent=2)
EOF
}

install --until render >/dev/null
mkdir -p "$run/tools"
truncate -s "${installer_mib}M" "$run/tools/openshift-install"
truncate -s 120M "$run/tools/oc"
echo '{"release": "bench", "installer": {"name": "openshift-install"}}' >"$run/tools/tools.json"
install --until tools >/dev/null 2>&1 || true
done_with_outputs tools tools
work="$run/iso/work"
mkdir -p "$work/auth"
truncate -s "${iso_mib}M" "$work/agent.x86_64.iso"
echo 192.0.2.10 >"$work/rendezvousIP"
echo 'apiVersion: v1' >"$work/auth/kubeconfig"
echo '{}' >"$work/.openshift_install_state.json"
echo '{"iso": "work/agent.x86_64.iso"}' >"$run/iso/iso.json"
install --until iso >/dev/null 2>&1 || true
done_with_outputs iso iso
# On a site the next run comes minutes or days later: past the hash cache's racy window (3 s),
# within which a file just written is never trusted.
sleep 4

measure() {
    /usr/bin/time -v -o "$tmp/time" "$BOOTSTRAP_BIN" install --inventory "$inv" --run "$run" \
        --until iso >"$tmp/out" 2>"$tmp/err"
    grep -q "iso .*skipped" "$tmp/out" || { cat "$tmp/out" >&2; echo "the iso stage was not skipped" >&2; exit 1; }
    local wall rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")
    printf '| %-26s | %9s | %8.1f MiB |\n' "$1" "$wall" "$(echo "$rss / 1024" | bc -l)"
}

echo "bootstrap install --until iso over ${iso_mib} MiB ISO + ${installer_mib} MiB installer, $(nproc) cores ($BOOTSTRAP_BIN)"
echo "| run                        |      wall |     peak RSS |"
echo "|----------------------------|-----------|--------------|"
rm -f "$run/cache/hashes.json"
measure "first run (no hash cache)"
measure "second run"
