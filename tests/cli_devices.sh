#!/usr/bin/env bash
# Tensor parallelism over in-process CPU devices: `txc generate --devices
# cpu:N --tp N` prints the bytes one device prints (eager and compiled, tp 2
# and 4, the compile cache's plans reused by a second run, sampling with a
# seed), with nothing more on stderr; --prompt-file (text and --json) and
# bench --batch on two devices, printed once; txc bench --devices' lines; the
# errors, each one line (the other devices quiet).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh"

P="Once upon a time"
for jit in --no-jit --jit; do
  "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 $jit --threads 1 --no-compile-cache >"$tmp/one" 2>"$tmp/e1"
  for n in 2 4; do
    for run in 1 2; do # the second compiled run loads its plans from the compile cache
      "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 $jit --threads $n --devices cpu:$n --tp $n \
        --compile-cache "$tmp/cc" >"$tmp/two" 2>"$tmp/e2"
      rc=$?
      if [ $rc -eq 0 ] && [ -s "$tmp/one" ] && cmp -s "$tmp/one" "$tmp/two" && [ ! -s "$tmp/e2" ]; then
        ok "generate --devices cpu:$n --tp $n $jit (run $run): the bytes of one device"
      else
        bad "--devices cpu:$n $jit run $run (rc $rc): $(head -c 300 "$tmp/two") / $(head -c 300 "$tmp/one") $(cat "$tmp/e2")"
      fi
    done
  done
done
"$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --jit --threads 2 --devices cpu:2 --tp 2 \
  --compile-cache "$tmp/cc" --verbose >/dev/null 2>"$tmp/ev"
if grep -q "plans loaded" "$tmp/ev" && ! grep -q " 0 plans loaded" "$tmp/ev" && [ "$(grep -c "^prefill:" "$tmp/ev")" -eq 1 ]; then
  ok "--devices: the compiled plans come back from the compile cache; one device prints --verbose"
else
  bad "compile cache under --devices: $(cat "$tmp/ev")"
fi
"$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 1 --no-compile-cache --do-sample --seed 7 >"$tmp/s1" 2>/dev/null
"$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 2 --devices cpu:2 --tp 2 --no-compile-cache \
  --do-sample --seed 7 >"$tmp/s2" 2>/dev/null
if [ -s "$tmp/s1" ] && cmp -s "$tmp/s1" "$tmp/s2"; then ok "sampling with a seed: the same text on 2 devices"; else bad "sampled text differs on 2 devices"; fi
"$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 1 --no-compile-cache --stop "the" >"$tmp/t1" 2>/dev/null
"$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 2 --devices cpu:2 --tp 2 --no-compile-cache \
  --stop "the" >"$tmp/t2" 2>/dev/null
if [ -s "$tmp/t1" ] && cmp -s "$tmp/t1" "$tmp/t2"; then ok "--stop: every device stops where one device does"; else bad "--stop on 2 devices"; fi
# an uneven --threads split (3 over 2 devices) still gives the same bytes
"$TXC" generate --model "$MODEL" --prompt "$P" -n 40 --threads 3 --devices cpu:2 --tp 2 --no-compile-cache >"$tmp/u" 2>"$tmp/eu"
"$TXC" generate --model "$MODEL" --prompt "$P" -n 40 --threads 1 --no-compile-cache >"$tmp/u1" 2>/dev/null
if [ -s "$tmp/u1" ] && cmp -s "$tmp/u" "$tmp/u1"; then ok "--threads 3 over 2 devices"; else bad "--threads 3 --devices cpu:2: $(cat "$tmp/eu")"; fi

# txc bench --devices cpu:2 --tp 2
"$TXC" bench --model "$MODEL" --devices cpu:2 --tp 2 --threads 2 --no-compile-cache -n 16 \
  --modes eager-static,jit-static >"$tmp/b" 2>"$tmp/be"
rc=$?
if [ $rc -eq 0 ] &&
  grep -q "^tensor parallel: --tp 2, 2 devices in one process over shared memory (1 thread each); device 0's weights .*(0\.5[0-9]*x)" "$tmp/b" &&
  grep -q "^all_reduce of one hidden-state row (64 float32)" "$tmp/b" && grep -q "^collectives, jit-static" "$tmp/b" &&
  [ "$(grep -c "^tensor parallel" "$tmp/b")" -eq 1 ] && [ "$(grep -c "^threads: 1;" "$tmp/b")" -eq 1 ]; then
  ok "bench --devices cpu:2 --tp 2: one device prints the table, its weights, the all_reduce latency, the collectives"
else
  bad "bench --devices (rc $rc): $(cat "$tmp/b") $(cat "$tmp/be")"
fi

# errors: one line each
expect_error "--devices without --tp" "needs --tp 2" "$TXC" generate --model "$MODEL" --prompt x --devices cpu:2
expect_error "--devices and another --tp" "needs --tp 2" "$TXC" generate --model "$MODEL" --prompt x --devices cpu:2 --tp 4
expect_error "--devices gpu:1" "expects cpu:N" "$TXC" generate --model "$MODEL" --prompt x --devices gpu:1 --tp 1
expect_error "--devices cpu:0" "--devices cpu:N" "$TXC" generate --model "$MODEL" --prompt x --devices cpu:0
expect_error "fewer threads than devices" "fewer than the 2 devices" \
  "$TXC" generate --model "$MODEL" --prompt x --devices cpu:2 --tp 2 --threads 1
expect_error "--tp 2 alone" "or 2 in-process devices (--devices cpu:2)" "$TXC" generate --model "$MODEL" --prompt x --tp 2
expect_error "--tp 3 on 3 devices: the sizes that work, once" \
  "^txc: --tp 3: num_attention_heads 8 does not divide by 3 (tensor-parallel sizes that work: 1, 2, 4)$" \
  "$TXC" generate --model "$MODEL" --prompt x --tp 3 --devices cpu:3 --threads 3
expect_error "bench --tp 3 on 3 devices, once" "does not divide by 3" \
  "$TXC" bench --model "$MODEL" --tp 3 --devices cpu:3 --threads 3 -n 4 --no-compile-cache
expect_error "GPT-2 --tp 3: the sizes that work, once" \
  "gpt2: --tp 3: num_attention_heads 4 does not divide by 3 (tensor-parallel sizes that work: 1, 2, 4)$" \
  "$TXC" bench --model "$TXC_SOURCE_DIR/tests/fixtures/arch/gpt2" --tp 3 --devices cpu:3 --threads 3 -n 4 --no-compile-cache
expect_error "chat --devices" "txc chat does not run tensor-parallel yet" "$TXC" chat --model "$MODEL" --devices cpu:2 --tp 2

# --prompt-file and bench --batch on two devices: the bytes of one device, printed once
printf 'Once upon a time\nThe little dog\nLily and Ben went\n' >"$tmp/prompts"
for fmt in "" --json; do
  "$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" -n 30 --threads 1 --no-compile-cache $fmt \
    >"$tmp/pf1" 2>/dev/null
  "$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" -n 30 --threads 2 --devices cpu:2 --tp 2 \
    --no-compile-cache --batch-size 2 $fmt >"$tmp/pf2" 2>"$tmp/pfe"
  rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/pf2")" -eq 3 ] && cmp -s "$tmp/pf1" "$tmp/pf2"; then
    ok "--prompt-file $fmt on --devices cpu:2 --tp 2: one device's bytes, once"
  else
    bad "--prompt-file $fmt --devices (rc $rc): $(head -c 300 "$tmp/pf2") / $(head -c 300 "$tmp/pf1") $(cat "$tmp/pfe")"
  fi
done
"$TXC" bench --model "$MODEL" --devices cpu:2 --tp 2 --threads 2 --no-compile-cache -n 16 --batch 1,2 >"$tmp/bb" 2>"$tmp/bbe"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c "^batched greedy decode" "$tmp/bb")" -eq 1 ] && grep -qE "^ +2 +[0-9.]+ " "$tmp/bb"; then
  ok "bench --batch on --devices cpu:2 --tp 2: one table"
else
  bad "bench --batch --devices (rc $rc): $(cat "$tmp/bb") $(cat "$tmp/bbe")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
