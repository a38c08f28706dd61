#!/usr/bin/env bash
# --no-batch-invariant (txc_ops_set_batch_invariant(false): a batch's linears
# of 2..32 rows take the GEMM of longer prompts, whose summation order is not
# the one-row GEMV's): txc bench --batch says which mode its rows ran in
# (the table's header, "batch_invariant" in --json) and txc serve says it at
# the start; both run. The serve listens on 127.0.0.1 on a free port.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }
tmp=$(mktemp -d)
PID=
trap 'serve_kill_all; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh"   # ok, bad
. "$(dirname "$0")/lib_serve.sh" # serve_start, serve_stop_ok

for flag in "" --no-batch-invariant; do
  want=$([ -n "$flag" ] && echo False || echo True)
  "$TXC" bench --model "$MODEL" --batch 1,2 --new-tokens 6 --json --no-compile-cache $flag >"$tmp/j" 2>"$tmp/e"
  got=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["batch_invariant"], len(d["batch_rows"]))' "$tmp/j" 2>&1)
  [ "$got" = "$want 2" ] && ok "bench --batch ${flag:-(default)}: batch_invariant $want, 2 rows" \
    || bad "bench --batch $flag: $got $(cat "$tmp/e")"
done
"$TXC" bench --model "$MODEL" --batch 2 --new-tokens 4 --no-compile-cache --no-batch-invariant >"$tmp/o" 2>"$tmp/e"
grep -q "batch invariance off (--no-batch-invariant)$" "$tmp/o" && ok "bench table: the mode in its header" \
  || bad "bench table header: $(head -3 "$tmp/o") $(cat "$tmp/e")"

serve_start inv --model "$MODEL" --parallel 2 --max-cache-len 128 --no-compile-cache --no-batch-invariant || exit 1
grep -q "batch invariance off)$" "$tmp/inv.err" && ok "serve: the start line says batch invariance is off" \
  || bad "serve start line: $(cat "$tmp/inv.err")"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" \
  -d '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}')
[ "$code" = 200 ] && ok "serve --no-batch-invariant answers" || bad "serve: $code $(cat "$tmp/b")"
serve_stop_ok inv

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
