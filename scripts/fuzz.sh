#!/usr/bin/env bash
# Runs one libFuzzer target (fuzz/fuzz_TARGET.c) for SECONDS seconds:
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   scripts/fuzz.sh --smoke TARGET SECONDS      (what scripts/test.sh runs)
#   scripts/fuzz.sh --list
# Builds build-fuzz/ (clang, -DTXC_FUZZ=ON) when needed. The committed seeds
# fuzz/corpus/TARGET/ are read, never written: new inputs go to
# build-fuzz/fuzz-corpus/TARGET/ (kept between runs; --smoke uses a
# throwaway folder instead), crashes, leaks, timeouts and OOMs to
# build-fuzz/fuzz-artifacts/TARGET/ (reproduce one: build-fuzz/fuzz/fuzz_TARGET FILE).
# Exit status: libFuzzer's (0: nothing found). The last line gives the
# executions: "fuzz_TARGET: N runs in S s".
set -uo pipefail
cd "$(dirname "$0")/.."
smoke=0
if [ "${1:-}" = --list ]; then
  for f in fuzz/fuzz_*.c; do n=${f#fuzz/fuzz_}; echo "${n%.c}"; done
  exit 0
fi
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh [--smoke] TARGET SECONDS [libFuzzer flags...] (targets: scripts/fuzz.sh --list)" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
if [ ! -f "fuzz/fuzz_$target.c" ]; then
  echo "fuzz.sh: no target '$target' (fuzz/fuzz_$target.c); targets: $(scripts/fuzz.sh --list | tr '\n' ' ')" >&2
  exit 2
fi
bin=build-fuzz/fuzz/fuzz_$target
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DTXC_FUZZ=ON -DTXC_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
cmake --build build-fuzz --target "fuzz_$target" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null ||
  { cmake --build build-fuzz --target "fuzz_$target" 2>&1 | tail -30; exit 1; }

# Per-target limits: the largest input worth trying, and the time one input
# may take (a chat template's render, a tokenizer's load).
max_len=16384 timeout=10
case $target in
  tokenizer_load) max_len=65536 ;;
  plan) max_len=65536 ;;
  safetensors|safetensors_index) max_len=32768 ;;
  chat_template) max_len=8192 ;;
esac
artifacts=build-fuzz/fuzz-artifacts/$target
mkdir -p "$artifacts"
if [ $smoke = 1 ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
else
  work=build-fuzz/fuzz-corpus/$target
  mkdir -p "$work"
fi
: "${TXC_SHARED_DIR:=$(cd .. && pwd)/shared}"
export TXC_SHARED_DIR
# the targets' scratch files (memfds aside): in memory where there is a tmpfs
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
log=$(mktemp)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  TXC_THREADS=${TXC_THREADS:-1} \
  "$bin" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -max_len="$max_len" \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" "$work" "fuzz/corpus/$target" >"$log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  tail -60 "$log"
  echo "fuzz_$target: FAILED (exit $rc); the input is in $artifacts/"
else
  grep -E '^(INFO: .*(corpus|seed)|#[0-9]+ +DONE)' "$log" | tail -3
  grep -E '^fuzz_' "$log" | tail -3 # what a target reports at exit
fi
runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
took=$(sed -nE 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\2/p' "$log" | tail -1)
echo "fuzz_$target: ${runs:-?} runs in ${took:-$seconds} s"
rm -f "$log"
exit $rc
