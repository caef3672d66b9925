# Sourced by the lab benchmarks (install-scale.sh, prep-ansible.sh) from the repository root:
# GNU time, release builds of bootstrap and bootstrap-lab (unless BOOTSTRAP_BIN names one), and
# the variables their examples read (BOOTSTRAP_BIN, BOOTSTRAP_LAB_BIN, BOOTSTRAP_LAB_VENV).
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }
if [ -z "${BOOTSTRAP_BIN:-}" ]; then
    cargo build --locked --release --bin bootstrap --bin bootstrap-lab
    BOOTSTRAP_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/bootstrap"
fi
export BOOTSTRAP_BIN
export BOOTSTRAP_LAB_BIN="${BOOTSTRAP_LAB_BIN:-$(dirname "$BOOTSTRAP_BIN")/bootstrap-lab}"
export BOOTSTRAP_LAB_VENV="${BOOTSTRAP_LAB_VENV:-$HOME/.cache/bootstrap/lab-venv}"
uptime
