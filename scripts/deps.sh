#!/usr/bin/env bash
# Installs the Debian packages ordo's build and tests need, if any is missing.
set -euo pipefail
packages=(cmake gcc clang libclang-rt-14-dev make pkg-config libcmocka-dev libstarpu-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ordo: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
