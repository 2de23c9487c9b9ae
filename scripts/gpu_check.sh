#!/usr/bin/env bash
# Runs every check of the CUDA backend that needs a GPU, in one go, and
# keeps each step's output:
#   - the build with the CUDA backend, its kernels (nvcc) and the tests;
#   - test_cuda with points observed by events and by stream memory
#     operations (ORDO_CUDA_POINTS=memops), requiring the GPU
#     (ORDO_TEST_CUDA_REQUIRE=1: a skip for want of a capability fails);
#   - the conformance suites on cuda:0: the HAL's and the core's
#     (ordering, memory, barrier, waiter, coordinator, stalls, traces,
#     metrics), with tests/conformance_skips.h's list of what CUDA skips;
#   - compute-sanitizer (memcheck, racecheck, synccheck) over test_cuda's
#     sanitizer-safe subset (ORDO_TEST_CUDA_SANITIZER_SAFE=1: without the
#     deliberate out-of-memory and fault tests, which the sanitizers
#     report);
#   - `ordo demo --backend cuda` at three sizes;
#   - `ordo bench cuda` (JSON lines, with the device's name).
# Every step is bounded by `timeout` (exit 124 when it runs out); a step
# that fails is reported and the next one still runs, but for the
# configure, the build and the CUDA backend's presence, without which
# nothing after could pass (the run stops there). The steps run most
# telling first (the CUDA tests and the conformance suites, then one demo
# and the benchmarks, then the sanitizers and the other demos), so that a
# run cut short by its machine's time still reports the first. The exit
# status is the number of failed steps (0: all passed); bad usage (an
# unknown argument, a DIR missing, not writable, or without packages)
# exits 64 before any step. About 3 minutes on
# an H100 with 16 cores without the sanitizers, build included.
#
# usage: scripts/gpu_check.sh [--out DIR] [--debs DIR] [--build DIR]
#        scripts/gpu_check.sh --fetch DIR
#
#   --out DIR    where the logs go (default: BUILD/gpu-check; on a lent
#                machine whose $OUT comes back, $OUT or a folder in it)
#   --build DIR  the build tree (default: build-gpu)
#   --fetch DIR  on a machine with Debian's package registry: download the
#                packages the test build needs (cmocka, pkgconf) into DIR
#                and stop
#   --debs DIR   on a GPU machine without a registry: unpack the packages
#                fetched into DIR in a private prefix and build against them
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# Bad usage exits 64, apart from the count of failed steps.
usage_error() { echo "gpu_check: $*" >&2; exit 64; }
out="" build="build-gpu" fetch="" debs=""
while (($#)); do
  case "$1" in
  --out | --build | --fetch | --debs)
    (($# >= 2)) && [ -n "$2" ] || usage_error "'$1' needs a DIR"
    case "$1" in
    --out) out=$2 ;;
    --build) build=$2 ;;
    --fetch) fetch=$2 ;;
    --debs) debs=$2 ;;
    esac
    shift 2
    ;;
  *) usage_error "unknown argument '$1'" ;;
  esac
done

if [ -n "$fetch" ]; then
  mkdir -p "$fetch" || usage_error "cannot create '$fetch'"
  (cd "$fetch" && apt-get download libcmocka0 libcmocka-dev pkgconf pkgconf-bin libpkgconf3) ||
    { echo "gpu_check: could not download the packages" >&2; exit 1; }
  ls "$fetch"
  exit 0
fi

# The CUDA toolkit's usual place, for nvcc and compute-sanitizer.
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"
out=${out:-$build/gpu-check}
mkdir -p "$out" && [ -w "$out" ] || usage_error "cannot write the logs to '$out'"
failed=0
summary="$out/summary.txt"
: >"$summary"

# Runs one step for at most LIMIT seconds, its output in $out/NAME.log; a
# line per step in the summary.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  echo "=== $name (at most ${limit} s): $*"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  ((rc == 124 || rc == 137)) && echo "timed out after ${limit} s" >>"$out/$name.log"
  local verdict=passed
  ((rc == 0)) || { verdict="FAILED (exit $rc)"; failed=$((failed + 1)); }
  echo "$name: $verdict in $((SECONDS - start)) s" | tee -a "$summary"
  tail -n 5 "$out/$name.log"
}

if [ -n "$debs" ]; then
  shopt -s nullglob
  packages=("$debs"/*.deb)
  shopt -u nullglob
  ((${#packages[@]})) || usage_error "no .deb in '$debs' (fetch them with --fetch)"
  prefix=$(mktemp -d) || exit 1
  trap 'rm -rf "$prefix"' EXIT
  for f in "${packages[@]}"; do
    dpkg -x "$f" "$prefix" || usage_error "cannot unpack '$f'"
  done
  multiarch=""
  for d in "$prefix"/usr/lib/*-linux-gnu; do
    [ -d "$d" ] && { multiarch=$(basename "$d"); break; }
  done
  export PATH="$prefix/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The packages' .pc files name /usr: the sysroot maps them to the prefix.
  export PKG_CONFIG_LIBDIR="$prefix/usr/lib/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$prefix"
  [ -x "$prefix/usr/bin/pkg-config" ] || ln -s pkgconf "$prefix/usr/bin/pkg-config"
fi

{
  echo "date: $(date -u +%FT%TZ)"
  # The commit, and a digest of the sources as they are here: a copy of a
  # working tree may carry changes, or a .git that is not its own.
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "sources: sha256 $(find CMakeLists.txt cmake include src tests tools scripts -type f \
    -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
  # Bounded: a wedged GPU can hang nvidia-smi.
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 ||
    echo "nvidia-smi: not available"
  timeout 20 nvcc --version 2>&1 | tail -n 1 || echo "nvcc: not found"
} | tee -a "$summary"

# Runs a step nothing after can pass without (as step does); stops the
# run when it fails.
must_pass() {
  local before=$failed
  step "$@"
  ((failed == before)) && return
  echo "failed steps: $failed (stopped after '$1': the steps after it need it)" | tee -a "$summary"
  exit "$failed"
}

# Warnings are not errors here: a compiler this machine has and the
# project's CI has not must not cost the one run on the GPU.
must_pass configure 120 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DORDO_WERROR=OFF
must_pass build 240 cmake --build "$build" -j"$(nproc)"
bin="$build/bin"
step info 30 "$bin/ordo" info
# Everything below is meant for a GPU: a backend that is unavailable (the
# tests would only skip) is a failure here, and so is a test that skips for
# want of a capability (ORDO_TEST_CUDA_REQUIRE=1).
must_pass cuda_available 30 bash -o pipefail -c "'$bin/ordo' info | grep -F 'cuda (available)'"
# A context's streams share its hardware work queues (8 by default): a
# stream parked at a gate holds up any stream on its queue. Tests that run
# one stream past another parked one need queues enough for each stream.
export CUDA_DEVICE_MAX_CONNECTIONS=32
export ORDO_TEST_CUDA_REQUIRE=1
step test_cuda 90 "$bin/test_cuda"
# The conformance suites: the HAL's (on every device listed, cuda:0
# among them), then each of the core's suites on cuda:0 (ORDO_TEST_DEVICE;
# what CUDA skips, and why, is in tests/conformance_skips.h). Each suite is
# bounded, and the whole set too: past 240 s the rest are reported as not
# run (and counted as failed).
step test_conformance 90 "$bin/test_conformance"
conformance_start=$SECONDS
# test_graph first: its native replays are CUDA graphs on cuda:0.
for suite in test_graph test_tracker test_tracker_refs test_tracker_model test_submit_host \
  test_memory test_pool test_mem_adaptors test_pool_carve test_barrier test_waiter \
  test_coordinator test_coord_model test_stall test_trace test_metrics; do
  if ((SECONDS - conformance_start > 240)); then
    echo "conformance_${suite#test_}: not run (the conformance steps used their 240 s)" |
      tee -a "$summary"
    failed=$((failed + 1))
    continue
  fi
  step "conformance_${suite#test_}" 60 env ORDO_TEST_DEVICE=cuda:0 "$bin/$suite"
done
step test_cuda_memops 90 env ORDO_CUDA_POINTS=memops "$bin/test_cuda"
unset ORDO_TEST_CUDA_REQUIRE
step demo_small 30 "$bin/ordo" demo --backend cuda --chunks 12 --rows 16 --size 64
# bash, for pipefail: a failing benchmark is not hidden behind tee's status.
step bench_cuda 120 bash -o pipefail -c "'$bin/ordo' bench cuda | tee '$out/bench_cuda.jsonl'"
# compute-sanitizer may not support the machine's device at all (some
# virtualised ones): a probe on a trivial program tells that apart from a
# finding, and the sanitizer steps are then skipped with the reason.
if ! command -v compute-sanitizer >/dev/null; then
  echo "compute-sanitizer: not found" | tee -a "$summary"
  failed=$((failed + 1))
elif ! timeout 60 compute-sanitizer --tool memcheck "$bin/ordo" info >"$out/sanitizer_probe.log" 2>&1; then
  echo "compute-sanitizer: skipped, not counted as failed: it cannot run \`ordo info\` here" \
    "($(tail -n 1 "$out/sanitizer_probe.log"); sanitizer_probe.log)" | tee -a "$summary"
else
  export ORDO_TEST_CUDA_REQUIRE=1
  for tool in memcheck racecheck synccheck; do
    step "sanitizer_$tool" 120 env ORDO_TEST_CUDA_SANITIZER_SAFE=1 \
      compute-sanitizer --tool "$tool" --error-exitcode 1 "$bin/test_cuda"
  done
  unset ORDO_TEST_CUDA_REQUIRE
fi
step demo_edges 30 "$bin/ordo" demo --backend cuda --chunks 7 --rows 37 --size 50
step demo_default 60 "$bin/ordo" demo --backend cuda
echo "failed steps: $failed" | tee -a "$summary"
exit "$failed"
