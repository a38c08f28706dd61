#!/usr/bin/env bash
# End-to-end test: txc bench's last-level cache (machine.llc_bytes, what
# "cache-resident" is judged against) is the kernel's report in /sys, the
# highest cache level of cpu0, not glibc's sysconf(_SC_LEVEL3_CACHE_SIZE)
# (256 MiB on an AMD EPYC Zen 3 VM whose L3 is 32 MiB).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

best=0 best_level=0
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
  [ -r "$d/level" ] && [ -r "$d/size" ] || continue
  level=$(cat "$d/level") size=$(cat "$d/size")
  case $size in
  *K) bytes=$((${size%K} * 1024)) ;;
  *M) bytes=$((${size%M} * 1024 * 1024)) ;;
  *) bytes=$size ;;
  esac
  if [ "$level" -ge "$best_level" ] && [ "$bytes" -gt 0 ]; then
    best=$bytes best_level=$level
  fi
done
if [ "$best" -eq 0 ] || ! command -v python3 >/dev/null; then
  echo "skipped: no cache sizes in /sys or no python3"
  exit 77
fi
"$TXC" bench --model "$MODEL" --modes jit-static --new-tokens 2 --json --no-compile-cache >"$tmp/j" 2>"$tmp/e"
got=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["machine"]["llc_bytes"]))' "$tmp/j" 2>&1)
if [ "$got" = "$best" ]; then
  ok "llc_bytes is the L$best_level size /sys reports ($best)"
else
  bad "llc_bytes $got, /sys reports L$best_level $best: $(cat "$tmp/e")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
