#!/usr/bin/env bash
# Builds and runs the whole test suite as CI does: the unit and stress tests
# with gcc, then with clang under AddressSanitizer + UndefinedBehaviorSanitizer,
# then with clang under ThreadSanitizer; last, a gcc Release build (-O3, no
# assertions) is built, not run, for the warnings only its optimiser finds
# (-Werror makes them errors).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)

run_suite() {
  local label=$1 dir=$2
  shift 2
  echo "=== ordo tests: ${label} ==="
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

run_suite "gcc" build-test -DCMAKE_C_COMPILER=gcc
run_suite "clang, address+undefined sanitizers" build-asan -DCMAKE_C_COMPILER=clang \
  -DORDO_SANITIZE=address,undefined
run_suite "clang, thread sanitizer" build-tsan -DCMAKE_C_COMPILER=clang -DORDO_SANITIZE=thread
echo "=== ordo build: gcc, Release ==="
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc >/dev/null
cmake --build build-release -j"$jobs"
echo "=== ordo tests: all suites passed ==="
