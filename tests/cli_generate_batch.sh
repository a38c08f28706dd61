#!/usr/bin/env bash
# End-to-end tests of `txc generate --prompt-file` (continuous batching over
# slots): outputs in the file's order, each exactly the output of its prompt
# run alone with `txc generate` (greedy and seeded sampling, any
# --batch-size), --json lines, --stop, and bad input giving one line on
# stderr and exit status 2; `txc bench --batch` rows.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

printf 'Once upon a time\nThe cat\nLily and Ben went to the park. They\n\nA big\nTim\n' >"$tmp/prompts"

# each prompt alone, its output on one line as --prompt-file prints it
alone() { # alone FLAGS...
  while IFS= read -r p; do
    "$TXC" generate --model "$MODEL" --prompt "$p" --max-new-tokens 30 --max-cache-len 64 "$@" 2>/dev/null |
      sed 's/\\/\\\\/g' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 } END { print "" }'
  done <"$tmp/prompts"
}
for mode in greedy "do-sample"; do
  flags=()
  [ "$mode" = greedy ] || flags=(--do-sample --seed 7 --temperature 0.9)
  alone "${flags[@]}" >"$tmp/alone-$mode"
  for bs in 1 3 8; do
    "$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --batch-size $bs --max-new-tokens 30 \
      --max-cache-len 64 "${flags[@]}" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 6 ] && cmp -s "$tmp/out" "$tmp/alone-$mode"; then
      ok "--prompt-file --batch-size $bs ($mode): every output that of its prompt alone"
    else
      bad "--prompt-file --batch-size $bs ($mode), rc $rc: $(diff "$tmp/out" "$tmp/alone-$mode" | head -5) $(cat "$tmp/err")"
    fi
  done
done

"$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --batch-size 4 --max-new-tokens 12 --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 6 ] && python3 - "$tmp/out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["index"] for r in rows] == list(range(6)), rows
assert rows[1]["prompt"] == "The cat" and rows[3]["prompt"] == ""
for r in rows:
    assert r["finish_reason"] in ("stop", "length") and r["completion_tokens"] == len(r["token_ids"]) <= 12
    assert r["prompt_tokens"] >= 1
PY
then ok "--json: one object a line, in order"; else bad "--json: $(head -c 300 "$tmp/out") $(cat "$tmp/err")"; fi

"$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --max-new-tokens 30 --stop "Lily" >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 6 ] && ! grep -q "Lily" "$tmp/out"; then
  ok "--stop cuts each output"
else
  bad "--stop: $(cat "$tmp/out" "$tmp/err")"
fi

"$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --max-new-tokens 5 --verbose >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "^batch: 6 prompts, 6 slots" "$tmp/err"; then ok "--verbose batch line"; else bad "--verbose: $(cat "$tmp/err")"; fi

: >"$tmp/empty"
expect_error "empty prompt file" "no prompt" "$TXC" generate --model "$MODEL" --prompt-file "$tmp/empty"
# a FIFO is read as cat reads it: txc waits for a writer (it read a FIFO
# without a writer as empty), then reads to the end; a writer that closes at
# once gives the empty file's error. (timeouts: nothing may wait forever)
mkfifo "$tmp/fifo"
timeout 60 "$TXC" generate --model "$MODEL" --prompt-file "$tmp/fifo" --max-new-tokens 30 --max-cache-len 64 \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
sleep 2
if kill -0 $pid 2>/dev/null; then waiting=yes; else waiting=no; fi
timeout 30 sh -c "cat '$tmp/prompts' >'$tmp/fifo'"
wait $pid
rc=$?
if [ $waiting = yes ] && [ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/alone-greedy"; then
  ok "--prompt-file FIFO: waits for its writer, reads every prompt"
else
  bad "--prompt-file FIFO: waiting $waiting, rc $rc: $(head -c 300 "$tmp/err")"
fi
(sleep 1 && timeout 30 sh -c ": >'$tmp/fifo'") &
expect_error "--prompt-file FIFO whose writer writes nothing" "'$tmp/fifo' has no prompt" \
  timeout 60 "$TXC" generate --model "$MODEL" --prompt-file "$tmp/fifo"
wait
expect_error "missing prompt file" "cannot read" "$TXC" generate --model "$MODEL" --prompt-file "$tmp/nope"
expect_error "--batch-size 0" "batch-size" "$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --batch-size 0
expect_error "--batch-size 33" "1 to 32" "$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --batch-size 33
expect_error "--prompt with --prompt-file" "prompt-file" "$TXC" generate --model "$MODEL" --prompt x --prompt-file "$tmp/prompts"
expect_error "--json without --prompt-file" "prompt-file" "$TXC" generate --model "$MODEL" --json
expect_error "prompt longer than the context" "max_cache_len 4" "$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" --max-cache-len 4

"$TXC" bench --synthetic stories260k --batch 1,2,4 --new-tokens 8 --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && python3 - "$tmp/out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rows = j["batch_rows"]
assert [r["batch"] for r in rows] == [1, 2, 4], rows
for r in rows:
    # the B prompts are prefilled together in the first step (one forward
    # while they fit in 32 rows): the B rows decode together for 7 steps
    assert r["decode_tokens"] == r["batch"] * 7 and r["aggregate_tok_s"] > 0, r
    assert abs(r["per_sequence_tok_s"] * r["batch"] - r["aggregate_tok_s"]) < 1e-6 * r["aggregate_tok_s"] + 1e-9
    # the warm-up ran through the same batch and decoded all its rows once:
    # no plan is compiled inside the timed run
    assert r["compilations"] == 0, r
PY
then ok "bench --batch rows (no compilation in the timed runs)"; else bad "bench --batch: $(cat "$tmp/out" "$tmp/err")"; fi
# --profile: each batch's decode step by op and by GEMM shape, the timed run's 7 steps only (the head
# (512 x 64) once a step for all B rows)
"$TXC" bench --synthetic stories260k --batch 1,2 --new-tokens 8 --profile --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && python3 - "$tmp/out" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["batch_rows"]
for r in rows:
    p, g = r["decode_profile"], r["decode_profile_gemm"]
    assert p and 0 < sum(e["share"] for e in p) <= 1.0001, r
    head = [e for e in g if e["N"] == 512 and e["K"] == 64]
    assert head and head[0]["M"] == r["batch"] and head[0]["calls"] == 7, g
PY
then ok "bench --batch --profile --json: the decode step's GEMMs by shape, M = the batch"
else bad "bench --batch --profile: $(cat "$tmp/out" "$tmp/err")"; fi
"$TXC" bench --synthetic stories260k --batch 2 --new-tokens 8 --profile >"$tmp/out" 2>"$tmp/err"
grep -qE "^batch 2 decode step, kernel time by op \([0-9.]+ ms over 7 steps; the [1-8] largest\): [a-z]" "$tmp/out" \
  && grep -qE "^  aten::linear +2x512x64 +7 calls " "$tmp/out" \
  && ok "bench --batch --profile table lines" || bad "bench --batch --profile table: $(cat "$tmp/out" "$tmp/err")"
# --new-tokens too few for a step of the whole batch: an error, not a row of 0 tok/s
expect_error "bench --batch 4 --new-tokens 1" "needs --new-tokens >= 2" \
  "$TXC" bench --synthetic stories260k --batch 1,4 --new-tokens 1
# prompts longer than one step's prefill_tokens (512): they take more steps than 3 tokens
expect_error "bench --batch 4 --new-tokens 3 --prompt-tokens 300" "no step decoded all 4 rows together" \
  "$TXC" bench --synthetic stories260k --batch 4 --new-tokens 3 --prompt-tokens 300 --max-cache-len 320
# the line at fault is named: the second prompt is longer than --max-cache-len
{ echo "Once upon a time"; python3 -c 'print(" ".join(["time"] * 300))'; } >"$tmp/long"
expect_error "a prompt longer than the context: its line named" "^txc: prompt 2: batch: the prompt has 301 tokens" \
  "$TXC" generate --model "$MODEL" --prompt-file "$tmp/long" --max-cache-len 128
expect_error "bench --batch 0" "--batch" "$TXC" bench --synthetic stories260k --batch 0
expect_error "bench --batch x" "--batch" "$TXC" bench --synthetic stories260k --batch 1,x

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
