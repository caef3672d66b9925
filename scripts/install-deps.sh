#!/usr/bin/env bash
# Installs what the tests and the lab rehearsal need, when it is missing: Debian's
# docker-registry (Distribution 2.8, the real registry the tests run), skopeo (the interop peer),
# apache2-utils (htpasswd for Basic auth), openssl, and xorriso (the lab's installer stand-in
# writes the agent ISO with it; tests read ISOs with it), kubernetes-client (kubectl, the cluster
# API stand-in's protocol peer), iproute2 (the lab site's network
# namespaces), dnsmasq-base and chrony (the lab site's DNS and NTP servers), openssh-server, openssh-client and sudo (the lab's SSH hosts and their user `core`),
# the user `core` with password-less sudo, python3-venv, and the lab venv with sushy-tools (the
# Redfish emulator `bootstrap-lab up` runs) and ansible-core (ansible-playbook, which must run the
# shipped playbooks too) at ${BOOTSTRAP_LAB_VENV:-$HOME/.cache/bootstrap/lab-venv}. Safe to run again; does
# nothing when all is there. Needs root (or sudo) only when something must be installed.
set -euo pipefail

need=()
command -v docker-registry >/dev/null 2>&1 || [ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v sha256sum >/dev/null 2>&1 || need+=(coreutils)
command -v xorriso >/dev/null 2>&1 || need+=(xorriso)
# kubectl: the protocol peer of the lab's cluster API stand-in (the wait stage's tests).
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# The lab's SSH hosts: a real OpenSSH sshd per node (lab/src/site/hosts.rs), the client the tests
# log in with, and sudo for the `core` user's become.
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
# The lab site's DNS and NTP servers on its bridge (lab/src/site/dns_ntp.rs): dnsmasq and chronyd,
# run with their own configuration under the lab's state dir (no system file is used).
[ -x /usr/sbin/dnsmasq ] || need+=(dnsmasq-base)
[ -x /usr/sbin/chronyd ] || need+=(chrony)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v sudo >/dev/null 2>&1 || need+=(sudo)

if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Debian's package starts a registry service on :5000 where an init system runs; the tests
# start their own on ephemeral ports and do not need it.
for tool in docker-registry skopeo htpasswd openssl xorriso kubectl ip python3 ssh sudo; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing after install: $tool" >&2; exit 1; }
done
# The lab's BMC emulator: sushy-tools from PyPI in a venv of its own (its fake driver needs no
# libvirt). Made once; pip runs again only when sushy-emulator is missing.
lab_venv="${BOOTSTRAP_LAB_VENV:-$HOME/.cache/bootstrap/lab-venv}"
if [ ! -x "$lab_venv/bin/sushy-emulator" ]; then
  echo "making the lab venv with sushy-tools: $lab_venv" >&2
  mkdir -p "$(dirname "$lab_venv")"
  python3 -m venv "$lab_venv"
  "$lab_venv/bin/pip" install -q --disable-pip-version-check sushy-tools
  [ -x "$lab_venv/bin/sushy-emulator" ] || { echo "missing after install: $lab_venv/bin/sushy-emulator" >&2; exit 1; }
fi
for daemon in /usr/sbin/sshd /usr/sbin/dnsmasq /usr/sbin/chronyd; do
  [ -x "$daemon" ] || { echo "missing after install: $daemon" >&2; exit 1; }
done
# The lab nodes' login user, as RHCOS has it: `core`, key login only (the password field `*`
# matches no password but leaves the account unlocked, which sshd needs under UsePAM no), and
# password-less sudo for become.
if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  id core >/dev/null 2>&1 || $sudo useradd -m -s /bin/bash core
  [ "$($sudo getent shadow core | cut -d: -f2)" = '*' ] || $sudo usermod -p '*' core
  if [ "$($sudo cat /etc/sudoers.d/core 2>/dev/null)" != 'core ALL=(ALL) NOPASSWD: ALL' ]; then
    echo 'core ALL=(ALL) NOPASSWD: ALL' | $sudo tee /etc/sudoers.d/core.tmp >/dev/null
    $sudo chmod 0440 /etc/sudoers.d/core.tmp
    $sudo visudo -cqf /etc/sudoers.d/core.tmp
    $sudo mv /etc/sudoers.d/core.tmp /etc/sudoers.d/core
  fi
fi
# ansible-playbook, the peer the shipped playbooks must also run under, in the lab venv.
if [ ! -x "$lab_venv/bin/ansible-playbook" ]; then
  echo "installing ansible-core into the lab venv: $lab_venv" >&2
  "$lab_venv/bin/pip" install -q --disable-pip-version-check ansible-core
  [ -x "$lab_venv/bin/ansible-playbook" ] || { echo "missing after install: $lab_venv/bin/ansible-playbook" >&2; exit 1; }
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
