#!/usr/bin/env bash
# End-to-end tests of `txc bench`: the table on the real stories260K, the
# JSON object on the synthetic stories260k, compilations per mode (jit-static
# compiles decode once, jit-dynamic once per step), tokens agreeing across
# modes, and bad input giving one line on stderr and exit status 2. No
# timing is asserted.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TXC_SYNTHETIC_DIR=$tmp/syn # the synthetic model's temporary files go here (checked empty)
mkdir "$tmp/syn"
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error
cli_quiet_errors=1

# --- the table on a real model ------------------------------------------------
"$TXC" bench --model "$MODEL" --new-tokens 32 >"$tmp/table" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$tmp/err" ]; then ok "bench --model (rc 0, quiet stderr)"; else bad "bench --model: rc $rc $(cat "$tmp/err")"; fi
grep -q "^model: .*stories260K, 260,032 parameters" "$tmp/table" && ok "header: model" || bad "header: model"
grep -q "^dtype: float32 weights in the files; in memory: float32" "$tmp/table" && ok "header: dtype" \
  || bad "header: dtype"
grep -q "^threads: [0-9]*; machine: .*, [0-9]* cores" "$tmp/table" && ok "header: threads, machine" \
  || bad "header: machine"
grep -q '^prompt: "Once upon a time" (5 tokens); 32 new tokens per mode' "$tmp/table" && ok "header: prompt" \
  || bad "header: prompt"
grep -q "^mode  *new tokens  *total s  *prefill ms  *decode tok/s  *compilations  *compile ms  *vs eager-dynamic  *tokens match" \
  "$tmp/table" && ok "column header" || bad "column header"
for mode in eager-none eager-dynamic eager-static jit-static jit-dynamic; do
  grep -q "^$mode  *32 " "$tmp/table" && ok "row $mode: 32 tokens" || bad "row $mode: $(grep "^$mode" "$tmp/table")"
done
grep -q "^eager-dynamic .* 1.00x  yes$" "$tmp/table" && ok "eager-dynamic is the speed-up base" \
  || bad "speed-up base: $(grep '^eager-dynamic' "$tmp/table")"
# jit-static: 1 prefill + 1 decode compilation; jit-dynamic: 1 + one per decode step (31).
grep -q "^jit-static .* 2 (1+1) " "$tmp/table" && ok "jit-static compiles decode once" \
  || bad "jit-static compilations: $(grep '^jit-static' "$tmp/table")"
grep -q "^jit-dynamic .* 32 (1+31) " "$tmp/table" && ok "jit-dynamic compiles every step" \
  || bad "jit-dynamic compilations: $(grep '^jit-dynamic' "$tmp/table")"
grep -q "^eager-none .* reference$" "$tmp/table" && ok "first row is the reference" || bad "reference row"
grep -q "^tokens: all modes agree (32 new tokens)$" "$tmp/table" && ok "tokens agree (table)" \
  || bad "tokens: $(grep '^tokens' "$tmp/table")"
! grep -q " NO" "$tmp/table" && ok "no row disagrees" || bad "a row disagrees"

# --prompt and --modes
"$TXC" bench --model "$MODEL" --new-tokens 8 --prompt "Lily and Ben" --modes jit-static,eager-static >"$tmp/t2" 2>&1
if [ $? -eq 0 ] && grep -q '^prompt: "Lily and Ben"' "$tmp/t2" && [ "$(grep -cE '^(eager|jit)-' "$tmp/t2")" -eq 2 ] \
  && grep -q "^jit-static .* -  reference$" "$tmp/t2" && grep -q "^eager-static .* -  yes$" "$tmp/t2"; then
  ok "--prompt, --modes (no eager-dynamic: no speed-up)"
else
  bad "--prompt/--modes: $(cat "$tmp/t2")"
fi

# --- JSON on a synthetic model -------------------------------------------------------
"$TXC" bench --synthetic stories260k --json --new-tokens 24 >"$tmp/json" 2>"$tmp/err"
rc=$?
json=$(cat "$tmp/json")
if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/json")" -eq 1 ] && [ "${json:0:1}" = "{" ] && [ "${json: -1}" = "}" ]; then
  ok "--json: one object on one line"
else
  bad "--json: rc $rc: $json $(cat "$tmp/err")"
fi
if command -v python3 >/dev/null && python3 -c 'import json,sys; json.load(sys.stdin)' <"$tmp/json" 2>/dev/null; then
  ok "--json parses (python3)"
elif ! command -v python3 >/dev/null; then
  ok "--json parse check skipped (no python3)"
else
  bad "--json does not parse"
fi
for field in '"model":"stories260k"' '"source":"synthetic"' '"machine":{"cpu":"' '"cores":' '"threads":' \
  '"parameters":260032' '"weights_in_memory":"float32"' '"tokens_agree":true' '"prompt_tokens":8' '"new_tokens":24'; do
  grep -qF "$field" "$tmp/json" && ok "json field $field" || bad "json field $field missing"
done
grep -o '{"mode":[^}]*}' "$tmp/json" >"$tmp/rows"
[ "$(wc -l <"$tmp/rows")" -eq 5 ] && ok "json: 5 rows" || bad "json rows: $(cat "$tmp/rows")"
while read -r row; do
  mode=$(sed -E 's/^\{"mode":"([^"]*)".*/\1/' <<<"$row")
  missing=""
  for f in new_tokens total_s prefill_ms decode_tok_s compilations compile_ms tokens_match \
    speedup_vs_eager_dynamic prefill_compilations decode_compilations; do
    grep -qF "\"$f\":" <<<"$row" || missing="$missing $f"
  done
  if [ -z "$missing" ] && grep -qF '"new_tokens":24,' <<<"$row" && grep -qF '"tokens_match":true' <<<"$row"; then
    ok "json row $mode"
  else
    bad "json row $mode (missing:$missing): $row"
  fi
done <"$tmp/rows"
grep '"mode":"jit-static"' "$tmp/rows" | grep -qF '"prefill_compilations":1,"decode_compilations":1,' \
  && ok "json: jit-static 1 decode compilation" || bad "json jit-static: $(grep jit-static "$tmp/rows")"
grep '"mode":"jit-dynamic"' "$tmp/rows" | grep -qF '"prefill_compilations":1,"decode_compilations":23,' \
  && ok "json: jit-dynamic 23 decode compilations (one per step)" || bad "json jit-dynamic: $(grep jit-dynamic "$tmp/rows")"
grep '"mode":"eager-static"' "$tmp/rows" | grep -qF '"compilations":0,' && ok "json: eager compiles nothing" \
  || bad "json eager-static compilations"
[ -z "$(ls -A "$tmp/syn")" ] && ok "synthetic model leaves no temporary files" || bad "left: $(ls -A "$tmp/syn")"

# Synthetic bf16: says what is in memory; the same seed gives the same tokens.
"$TXC" bench --synthetic stories260k --dtype bf16 --new-tokens 8 --modes eager-static,jit-static >"$tmp/bf" 2>&1
if [ $? -eq 0 ] && grep -q "^dtype: bfloat16 weights generated; in memory: " "$tmp/bf" \
  && grep -q "^tokens: all modes agree" "$tmp/bf"; then
  ok "--dtype bf16"
else
  bad "--dtype bf16: $(cat "$tmp/bf")"
fi
"$TXC" bench --synthetic stories260k --json --new-tokens 8 --modes jit-static --seed 5 >"$tmp/s1" 2>&1
"$TXC" bench --synthetic stories260k --json --new-tokens 8 --modes jit-static --seed 5 >"$tmp/s2" 2>&1
"$TXC" bench --synthetic stories260k --json --new-tokens 8 --modes jit-static --seed 6 >"$tmp/s3" 2>&1
ids() { grep -o '"reference_ids":\[[0-9,]*\]' "$1"; }
if [ -n "$(ids "$tmp/s1")" ] && [ "$(ids "$tmp/s1")" = "$(ids "$tmp/s2")" ] && [ "$(ids "$tmp/s1")" != "$(ids "$tmp/s3")" ]; then
  ok "--seed: same seed, same tokens; another seed, other tokens"
else
  bad "--seed: $(ids "$tmp/s1") / $(ids "$tmp/s2") / $(ids "$tmp/s3")"
fi
# --profile: the compiled decode step's kernel time by op, for the jit rows only (7 decode steps of
# a 5-layer model: q/k/v and gate/up run as 2 groups of sibling linears per layer, 70 calls).
"$TXC" bench --synthetic stories260k --new-tokens 8 --modes eager-static,jit-static --profile --json >"$tmp/prof" 2>&1
rc=$?
if ! command -v python3 >/dev/null; then
  ok "--profile check skipped (no python3)"
elif [ $rc -eq 0 ] && python3 - "$tmp/prof" <<'PY'
import json, sys
rows = {r["mode"]: r for r in json.load(open(sys.argv[1]))["rows"]}
assert "decode_profile" not in rows["eager-static"]
p = rows["jit-static"]["decode_profile"]
assert 0 < len(p) <= 8, p
assert all(e["calls"] > 0 and e["ms"] >= 0 and 0 <= e["share"] <= 1 for e in p), p
assert sum(e["share"] for e in p) <= 1.001, p
assert [e["ms"] for e in p] == sorted((e["ms"] for e in p), reverse=True), p
calls = {e["op"]: e["calls"] for e in p}
assert calls.get("linear group", 70) == 70 and calls.get("txc::causal_attention", 35) == 35, p
assert "linear group" in calls or "aten::linear" in calls, p
PY
then
  ok "--profile --json: jit rows only, shares sorted and summing to at most 1, 70 grouped calls"
else
  bad "--profile --json: rc $rc $(cat "$tmp/prof")"
fi
# --profile's prefill step (one call for a 40-token prompt, padded to the bucket of 64 rows): by op,
# and its GEMMs by shape (q/k/v as a group of 3 linears of 64 x (64+32+32) x 64 per layer, 5 calls;
# the head once for the last row: 1 x 512 x 64).
"$TXC" bench --synthetic stories260k --new-tokens 4 --prompt-tokens 40 --max-cache-len 100 --modes eager-static,jit-static --profile \
  --json >"$tmp/pprof" 2>&1
rc=$?
if ! command -v python3 >/dev/null; then
  ok "--profile prefill check skipped (no python3)"
elif [ $rc -eq 0 ] && python3 - "$tmp/pprof" <<'PY'
import json, sys
rows = {r["mode"]: r for r in json.load(open(sys.argv[1]))["rows"]}
assert "prefill_profile" not in rows["eager-static"] and "prefill_profile_gemm" not in rows["eager-static"]
r = rows["jit-static"]
p, g = r["prefill_profile"], r["prefill_profile_gemm"]
assert 0 < len(p) <= 8 and 0 < len(g) <= 12, (p, g)
assert [e["ms"] for e in p] == sorted((e["ms"] for e in p), reverse=True), p
assert [e["ms"] for e in g] == sorted((e["ms"] for e in g), reverse=True), g
assert sum(e["share"] for e in p) <= 1.001 and sum(e["share"] for e in g) <= 1.001, (p, g)
calls = {e["op"]: e["calls"] for e in p}
assert calls.get("txc::causal_attention") == 5, p
shapes = {(e["op"], e["M"], e["N"], e["K"], e["parts"]): e for e in g}
qkv = shapes.get(("linear group", 64, 128, 64, 3))
assert qkv and qkv["calls"] == 5, g
head = shapes.get(("aten::linear", 1, 512, 64, 1))
assert head and head["calls"] == 1, g
assert all(e["gflops"] >= 0 and (e["peak_fraction"] is None or e["peak_fraction"] >= 0) for e in g), g
assert len(r["decode_profile_gemm"]) > 0, r
PY
then
  ok "--profile --json: the prefill step by op and its GEMMs by shape (a 3-linear group of 64 rows, the head's one row)"
else
  bad "--profile --json prefill: rc $rc $(cat "$tmp/pprof")"
fi
"$TXC" bench --synthetic stories260k --new-tokens 8 --modes jit-static --profile >"$tmp/prof" 2>&1
grep -qE "^jit-static decode step, kernel time by op \([0-9.]+ ms over 7 steps; the [1-8] largest\): [a-z]" "$tmp/prof" \
  && grep -qE "^jit-static prefill step, kernel time by op \([0-9.]+ ms over 1 call for 8 prompt tokens; the [1-8] largest\): [a-z]" "$tmp/prof" \
  && grep -qE "^jit-static prefill step, GEMM kernel time by shape M x N x K \([0-9.]+ ms, [0-9.]+% of the step's; the [0-9]+ largest\):" "$tmp/prof" \
  && grep -qE "^  linear group +8x128x64 +5 calls +[0-9.]+ ms +[0-9.]+% +[0-9.]+ GFLOP/s \([0-9.]+ of peak\), 3 linears" "$tmp/prof" \
  && ok "--profile table lines (prefill and decode)" || bad "--profile table: $(cat "$tmp/prof")"
# --membw with the copied weights: the read bandwidth, the fresh-memory copy reference, each row's fraction
# (1 GiB buffers: a few seconds).
"$TXC" bench --model "$MODEL" --no-mmap --modes jit-static --new-tokens 4 --membw --json >"$tmp/bw" 2>&1
rc=$?
if ! command -v python3 >/dev/null; then
  ok "--membw check skipped (no python3)"
elif [ $rc -eq 0 ] && python3 - "$tmp/bw" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d["machine"]
assert m["membw_gbps"] > 0 and m["fresh_copy_gbps"] > 0, m
r = d["rows"][0]
# the JSON rounds each figure to 3 decimals: allow that rounding's effect on the ratio
q = r["decode_gbps"] / m["membw_gbps"]
tol = 1e-3 + q * (5e-4 / r["decode_gbps"] + 5e-4 / m["membw_gbps"]) * 1.01
assert r["bw_fraction"] > 0 and abs(r["bw_fraction"] - q) < tol, (r, tol)
PY
then
  ok "--membw --json: membw_gbps, fresh_copy_gbps, bw_fraction = decode_gbps / membw_gbps"
else
  bad "--membw --json: rc $rc $(cat "$tmp/bw")"
fi
"$TXC" bench --model "$MODEL" --no-mmap --modes jit-static --new-tokens 4 --membw >"$tmp/bw" 2>&1
grep -qE "^weights: copy, .*GB/s, (huge|small) pages, [0-9.]+ of a memcpy into fresh memory\); load" "$tmp/bw" \
  && grep -qE "^memory: a memcpy of 1 GiB into freshly allocated huge-page memory [0-9.]+ GB/s" "$tmp/bw" \
  && ok "--membw table: the copy against a fresh-memory memcpy" || bad "--membw table: $(cat "$tmp/bw")"
"$TXC" bench --synthetic stories260k --new-tokens 4 --modes eager-static --profile >"$tmp/prof" 2>&1
grep -q "^note: --profile: no row ran a compiled decode step" "$tmp/prof" && ok "--profile without a compiled row says so" \
  || bad "--profile eager only: $(cat "$tmp/prof")"
# jit-none compiles at every step: its prefill GFLOP/s counts the prefill's compilation only (it was 0 or
# far above the peak when every step's compile time was taken off the prefill)
"$TXC" bench --synthetic stories260k --new-tokens 8 --prompt-tokens 64 --modes jit-static,jit-none --no-compile-cache \
  --json >"$tmp/jn" 2>&1
rc=$?
if ! command -v python3 >/dev/null; then
  ok "jit-none prefill check skipped (no python3)"
elif [ $rc -eq 0 ] && python3 - "$tmp/jn" <<'PY'
import json, sys
r = {x["mode"]: x for x in json.load(open(sys.argv[1]))["rows"]}
a, b = r["jit-static"]["prefill_gflops"], r["jit-none"]["prefill_gflops"]
# wide bounds: the two rows run minutes apart on a shared machine; the bug gave 0 or ~30x
assert a > 0 and b > 0 and 0.02 < b / a < 20, (a, b)
PY
then
  ok "jit-none prefill GFLOP/s of the order of jit-static's"
else
  bad "jit-none prefill GFLOP/s: rc $rc $(cat "$tmp/jn")"
fi
"$TXC" bench --synthetic Qwen/Qwen2.5-0.5B --help >/dev/null 2>&1 && ok "--help" || bad "--help"

# The baseline limit: eager-none stops early (after at least 2 tokens) and says so.
"$TXC" bench --synthetic stories260k --new-tokens 500 --baseline-limit 0.001 --modes eager-none,jit-static \
  >"$tmp/limit" 2>&1
if [ $? -eq 0 ] && grep -q "^eager-none: capped at [0-9]* of 500 new tokens (--baseline-limit 0.001 s reached)" "$tmp/limit" \
  && grep -q "^jit-static  *500 .* reference$" "$tmp/limit" && grep -q "^eager-none .* yes (first [0-9]*)$" "$tmp/limit" \
  && grep -q "^tokens: all modes agree (500 new tokens; eager-none checked on its first [0-9]*)$" "$tmp/limit"; then
  ok "--baseline-limit: eager-none capped, compared on its prefix"
else
  bad "--baseline-limit: $(cat "$tmp/limit")"
fi
"$TXC" bench --synthetic stories260k --new-tokens 40 --baseline-limit 0 --modes eager-none,jit-static \
  >"$tmp/nolimit" 2>&1 && grep -q "^eager-none  *40 .* reference$" "$tmp/nolimit" && ! grep -q capped "$tmp/nolimit" \
  && ok "--baseline-limit 0: no cap" || bad "--baseline-limit 0: $(cat "$tmp/nolimit")"

# --- bad input: one line on stderr, exit status 2 ------------------------------------
expect_error "unknown synthetic name lists the known ones" \
  "unknown synthetic model 'gpt-9' (known: smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, stories260k)" \
  "$TXC" bench --synthetic gpt-9
expect_error "unknown mode" "unknown mode 'jit-fast' in --modes (known: eager-none, " \
  "$TXC" bench --synthetic stories260k --modes jit-static,jit-fast
expect_error "mode twice" "listed twice" "$TXC" bench --synthetic stories260k --modes jit-static,jit-static
expect_error "empty mode" "unknown mode ''" "$TXC" bench --synthetic stories260k --modes jit-static,
expect_error "bad --new-tokens" "--new-tokens expects an integer from 1 to 2147483647, got 'ten'" \
  "$TXC" bench --synthetic stories260k --new-tokens ten
expect_error "zero --new-tokens" "--new-tokens 0 is out of range (an integer from 1 to 2147483647)" \
  "$TXC" bench --synthetic stories260k --new-tokens 0
expect_error "--new-tokens near INT64_MAX: a range error" "--new-tokens 9223372036854775807 is out of range" \
  "$TXC" bench --synthetic stories260k --new-tokens 9223372036854775807
# --prompt-tokens is checked before anything is sized by it: 2^62 (4 N bytes wraps) and 10^9
# (4 GB; under a 1 GB address-space limit where the build allows one) give the range errors.
expect_error "--prompt-tokens 2^62: a range error" "--prompt-tokens 4611686018427387904 is out of range" \
  "$TXC" bench --synthetic stories260k --prompt-tokens 4611686018427387904
if ldd "$TXC" 2>/dev/null | grep -q libasan; then
  expect_error "--prompt-tokens 10^9: checked first" "exceed max_position_embeddings 512" \
    "$TXC" bench --synthetic stories260k --prompt-tokens 1000000000
else
  expect_error "--prompt-tokens 10^9: checked before any allocation (1 GB limit)" \
    "the prompt + new tokens (1000000256) exceed max_position_embeddings 512" \
    sh -c 'ulimit -v 1000000 && exec "$@"' _ "$TXC" bench --synthetic stories260k --prompt-tokens 1000000000
  expect_error "--prompt-tokens 10^9 with --model: checked before any allocation (1 GB limit)" \
    "the prompt + new tokens (1000000256) exceed max_position_embeddings 512" \
    sh -c 'ulimit -v 1000000 && exec "$@"' _ "$TXC" bench --model "$MODEL" --prompt-tokens 1000000000
fi
expect_error "--threads above TXC_MAX_THREADS" "--threads expects an integer from 1 to 256 (TXC_MAX_THREADS), got '1000'" \
  "$TXC" bench --synthetic stories260k --threads 1000
expect_error "bad --prompt-tokens" "--prompt-tokens -3 is out of range" "$TXC" bench --synthetic stories260k --prompt-tokens -3
expect_error "bad --baseline-limit" "--baseline-limit expects a number of seconds >= 0, got '-1'" \
  "$TXC" bench --synthetic stories260k --baseline-limit -1
expect_error "bad --max-cache-len" "--max-cache-len expects" "$TXC" bench --synthetic stories260k --max-cache-len 1x
expect_error "short --max-cache-len" "is shorter than the prompt + new tokens" \
  "$TXC" bench --synthetic stories260k --new-tokens 32 --max-cache-len 10
expect_error "past max_position_embeddings" "exceed max_position_embeddings 512" \
  "$TXC" bench --synthetic stories260k --new-tokens 600
expect_error "bad --dtype" "--dtype expects f32, bf16 or f16, got 'int8'" \
  "$TXC" bench --synthetic stories260k --dtype int8
"$TXC" bench --model "$MODEL" --dtype bf16 --new-tokens 4 --modes jit-static >"$tmp/mb" 2>&1 \
  && grep -q "in memory: float32+bfloat16;" "$tmp/mb" && ok "--dtype with --model converts at load" \
  || bad "--dtype with --model: $(cat "$tmp/mb")"
expect_error "--prompt with --synthetic" "--prompt needs --model" "$TXC" bench --synthetic stories260k --prompt hi
expect_error "neither model nor synthetic" "exactly one of --model DIR or --synthetic NAME" "$TXC" bench
expect_error "both model and synthetic" "exactly one of" "$TXC" bench --model "$MODEL" --synthetic stories260k
expect_error "missing folder" "does not exist" "$TXC" bench --model "$tmp/no-such-model"
expect_error "unknown option" "option '--fast' is unknown" "$TXC" bench --synthetic stories260k --fast
expect_error "stray argument" "unexpected argument 'extra'" "$TXC" bench --synthetic stories260k extra
mkdir "$tmp/empty"
expect_error "folder without a model" "config.json" "$TXC" bench --model "$tmp/empty"
if [ -w /dev/full ]; then
  "$TXC" bench --model "$MODEL" --new-tokens 2 --modes jit-static --no-compile-cache >/dev/full 2>"$tmp/e"
  rc=$?
  [ $rc -eq 2 ] && grep -q "writing the output failed" "$tmp/e" && ok "a failed write: exit 2" \
    || bad "a failed write: rc $rc $(cat "$tmp/e")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
