#!/usr/bin/env bash
# Builds ordo and runs its main job on the CPU backend: `ordo demo`, a
# three-stage multi-stream pipeline ordered automatically from buffer
# accesses, verified against a serial computation. Extra arguments go to
# `ordo demo` (e.g. --chunks 1000, --trace demo.json); `build/bin/ordo bench`
# runs the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
exec build/bin/ordo demo "$@"
