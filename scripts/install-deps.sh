#!/usr/bin/env bash
# Installs what the tests and the lab rehearsal need, when it is missing: Debian's
# docker-registry (Distribution 2.8, the real registry the tests run), skopeo (the interop peer),
# apache2-utils (htpasswd for Basic auth), openssl, and xorriso (the lab's installer stand-in
# writes the agent ISO with it; tests read ISOs with it). Safe to run again; does nothing when all is
# there. Needs root (or sudo) only when something must be installed.
set -euo pipefail

need=()
command -v docker-registry >/dev/null 2>&1 || [ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v sha256sum >/dev/null 2>&1 || need+=(coreutils)
command -v xorriso >/dev/null 2>&1 || need+=(xorriso)

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
for tool in docker-registry skopeo htpasswd openssl xorriso; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing after install: $tool" >&2; exit 1; }
done
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
