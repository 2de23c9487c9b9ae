#!/usr/bin/env bash
# Builds ordo and runs its main job on the CPU: the benchmark suite.
# Extra arguments go to `ordo bench` (e.g. a FILTER or --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
exec build/bin/ordo bench "$@"
