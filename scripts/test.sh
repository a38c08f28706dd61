#!/usr/bin/env bash
# The test command: installs dependencies, then builds and runs every unit and
# end-to-end test twice — a normal build (build/) and an AddressSanitizer +
# UndefinedBehaviorSanitizer build (build-asan/) — then runs each libFuzzer
# target (fuzz/, clang, build-fuzz/) for a short smoke on its committed
# corpus (TXC_FUZZ_SMOKE_SECONDS each, default 20; scripts/fuzz.sh runs one
# longer), runs the Python frontend's pytest suite (scripts/test-python.sh,
# counted as one), and prints one summary line counting tests and fuzz targets.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
total_pass=0 total_fail=0
for variant in normal asan; do
  if [ "$variant" = normal ]; then dir=build; flags=(-DTXC_SANITIZE=OFF)
  else dir=build-asan; flags=(-DTXC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo); fi
  echo "== $variant build ($dir) =="
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null || exit 1
  cmake --build "$dir" -j "$jobs" >/dev/null || { cmake --build "$dir" 2>&1 | tail -50; exit 1; }
  out=$(mktemp)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" 2>&1 | tee "$out"
  # ctest: "100% tests passed, 0 tests failed out of 12"
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$out" | tail -1)
  rm -f "$out"
  if [ -z "$line" ]; then echo "no ctest summary for $variant"; exit 1; fi
  failed=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  n=$(sed -E 's/.* tests failed out of ([0-9]+).*/\1/' <<<"$line")
  total_fail=$((total_fail + failed)); total_pass=$((total_pass + n - failed))
done
echo "== python frontend (python/, pytest in the cached torch venv: scripts/test-python.sh) =="
./scripts/test-python.sh
rc=$?
if [ $rc -eq 0 ]; then total_pass=$((total_pass + 1))
elif [ $rc -eq 77 ]; then echo "python frontend: skipped (no network for the venv)"
else echo "python frontend: FAILED ($rc)"; total_fail=$((total_fail + 1)); fi
echo "== fuzz build (build-fuzz), ${TXC_FUZZ_SMOKE_SECONDS:-20} s per target =="
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DTXC_FUZZ=ON -DTXC_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build build-fuzz -j "$jobs" >/dev/null || { cmake --build build-fuzz 2>&1 | tail -50; exit 1; }
for t in $(scripts/fuzz.sh --list); do
  if out=$(scripts/fuzz.sh --smoke "$t" "${TXC_FUZZ_SMOKE_SECONDS:-20}" 2>&1); then
    tail -1 <<<"$out"
    total_pass=$((total_pass + 1))
  else
    tail -40 <<<"$out"
    total_fail=$((total_fail + 1))
  fi
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
