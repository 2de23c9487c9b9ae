#!/usr/bin/env bash
# Installs the Debian packages ordo's build and tests need, if any is missing.
# Optional packages (a benchmark peer) are tried, and only reported if they
# cannot be installed: the build leaves out what they would add.
set -euo pipefail
required=(cmake gcc clang libclang-rt-14-dev make pkg-config libcmocka-dev doxygen python3 libopenmpi-dev openmpi-bin)
optional=(libstarpu-dev libtbb-dev)

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
mapfile -t missing < <(missing_of "${required[@]}")
mapfile -t missing_optional < <(missing_of "${optional[@]}")
if ((${#missing[@]} + ${#missing_optional[@]})); then
  $sudo apt-get update -qq
fi
if ((${#missing[@]})); then
  echo "ordo: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ((${#missing_optional[@]})); then
  echo "ordo: installing optional ${missing_optional[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing_optional[@]}" >/dev/null ||
    echo "ordo: could not install ${missing_optional[*]}; their benchmark lines will be left out"
fi
