#!/usr/bin/env bash
# Tensor-parallel runs as a user meets them: an error every rank shares
# (a --tp the heads do not divide by, a bad bench flag) is printed once, by
# rank 0; a prompt read from stdin (--prompt -, --prompt-file -), which
# mpirun hands to rank 0 alone and in-process devices would read once each,
# gives the tokens of one process; a rank whose own load fails (its copy
# of the weights truncated) ends the job at once, not at the collectives'
# deadline.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh"
. "$(dirname "$0")/lib_mpi.sh"

# once NAME N NEEDLE COMMAND...: under mpirun -np N, nonzero, exactly one "txc:" line, holding NEEDLE
once() {
  local name=$1 n=$2 needle=$3
  shift 3
  mpi "$n" "$@" >"$tmp/o" 2>"$tmp/e"
  local rc=$? k
  k=$(grep -c "^txc:" "$tmp/e")
  if [ $rc -ne 0 ] && [ "$k" -eq 1 ] && grep -q -- "$needle" "$tmp/e" && [ ! -s "$tmp/o" ]; then
    ok "$name"
  else
    bad "$name: rc $rc, $k txc lines: $(grep '^txc:' "$tmp/e" | head -5)"
  fi
}
once "mpirun -np 3 generate --tp 3: the heads' error once" 3 "num_attention_heads 8 does not divide by 3" \
  "$TXC" generate --model "$MODEL" --prompt x -n 4 --threads 1 --tp 3
once "mpirun -np 3 serve --tp 3: once" 3 "num_attention_heads 8 does not divide by 3" \
  "$TXC" serve --model "$MODEL" --tp 3 --threads 1 --port 0
once "mpirun -np 2 bench --tp 2 --modes bogus: once" 2 "unknown mode 'bogus'" \
  "$TXC" bench --model "$MODEL" --tp 2 --threads 1 -n 4 --modes bogus
once "mpirun -np 4 bench --synthetic qwen2.5-0.5b --tp 4: once" 4 "num_attention_heads 14 does not divide by 4" \
  "$TXC" bench --synthetic qwen2.5-0.5b --tp 4 --threads 1 -n 4 --modes eager-static

# stdin prompts
P="Once upon a time"
printf 'Once upon a time\nThe little dog\n\nLily and Ben\n' >"$tmp/prompts"
"$TXC" generate --model "$MODEL" --prompt "$P" -n 24 --threads 1 --no-compile-cache >"$tmp/one" 2>/dev/null
"$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompts" -n 16 --threads 1 --no-compile-cache \
  >"$tmp/onef" 2>/dev/null
same() { # NAME WANT RC: the output in $tmp/got equals WANT, exit 0
  if [ "$3" -eq 0 ] && [ -s "$2" ] && cmp -s "$2" "$tmp/got"; then
    ok "$1"
  else
    bad "$1 (rc $3): $(head -c 200 "$tmp/got") / $(head -3 "$tmp/ge")"
  fi
}
export TXC_COLLECTIVE_TIMEOUT=20
printf '%s\n' "$P" | timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$TXC" generate --model "$MODEL" \
  --prompt - -n 24 --threads 1 --tp 2 --no-compile-cache >"$tmp/got" 2>"$tmp/ge"
same "mpirun -np 2 generate --tp 2 --prompt -: the bytes of one process" "$tmp/one" $?
timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$TXC" generate --model "$MODEL" --prompt-file - -n 16 \
  --threads 1 --tp 2 --no-compile-cache <"$tmp/prompts" >"$tmp/got" 2>"$tmp/ge"
same "mpirun -np 2 generate --tp 2 --prompt-file -: the bytes of one process" "$tmp/onef" $?
timeout 60 "$TXC" generate --model "$MODEL" --prompt-file - -n 16 --threads 2 --devices cpu:2 --tp 2 \
  --no-compile-cache <"$tmp/prompts" >"$tmp/got" 2>"$tmp/ge"
same "generate --devices cpu:2 --tp 2 --prompt-file -: the bytes of one process" "$tmp/onef" $?
printf '%s\n' "$P" | timeout 60 "$TXC" generate --model "$MODEL" --prompt - -n 24 --threads 2 --devices cpu:2 --tp 2 \
  --no-compile-cache >"$tmp/got" 2>"$tmp/ge"
same "generate --devices cpu:2 --tp 2 --prompt -: the bytes of one process" "$tmp/one" $?

cli_error_once() { # NAME COMMAND...: exit 2, one line, naming the empty stdin
  "${@:2}" </dev/null >"$tmp/o" 2>"$tmp/e"
  local rc=$? k
  k=$(grep -c "^txc:" "$tmp/e")
  if [ $rc -ne 0 ] && [ "$k" -eq 1 ] && grep -q "'-' has no prompt" "$tmp/e"; then ok "$1"; else bad "$1: rc $rc, $k lines: $(head -3 "$tmp/e")"; fi
}
cli_error_once "--devices cpu:2 --prompt-file - on an empty stdin: once" timeout 60 "$TXC" generate --model "$MODEL" \
  --prompt-file - -n 4 --threads 2 --devices cpu:2 --tp 2
cli_error_once "mpirun -np 2 --prompt-file - on an empty stdin: once" timeout 60 mpirun --allow-run-as-root \
  --oversubscribe -np 2 "$TXC" generate --model "$MODEL" --prompt-file - -n 4 --threads 1 --tp 2

# a rank whose own copy of the weights is truncated: its error, and the job ends long before the deadline
mkdir -p "$tmp/trunc"
cp "$MODEL"/*.json "$tmp/trunc/"
head -c 500000 "$MODEL/model.safetensors" >"$tmp/trunc/model.safetensors"
cat >"$tmp/rank1_trunc.sh" <<EOF
#!/bin/sh
m="$MODEL"; [ "\$OMPI_COMM_WORLD_RANK" = 1 ] && m="$tmp/trunc"
exec "$TXC" generate --model "\$m" --prompt x -n 8 --threads 1 --tp 2 --no-compile-cache
EOF
chmod +x "$tmp/rank1_trunc.sh"
start=$(date +%s)
TXC_COLLECTIVE_TIMEOUT=30 timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$tmp/rank1_trunc.sh" \
  >"$tmp/o" 2>"$tmp/e"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -lt 20 ] && grep -q "^txc: .*extends past the end" "$tmp/e" && ! grep -q "timed out" "$tmp/e"; then
  ok "a rank whose load fails: its line, the job ends after ${took} s (rc $rc)"
else
  bad "a rank whose load fails: rc $rc after ${took} s: $(grep '^txc:' "$tmp/e" | head -3)"
fi

# bench --tp --json: the tensor-parallel figures of the text table (per-rank weights, all_reduce, collectives)
tp_json() { # NAME: $tmp/bj holds the JSON
  if [ "$2" -eq 0 ] && python3 - "$tmp/bj" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tensor_parallel"]
assert t["tp"] == 2 and 0.45 < t["weights_fraction"] < 0.55, t
assert t["weights_bytes"] > 0 and t["whole_model_bytes"] > t["weights_bytes"] and t["all_reduce_us"] > 0, t
for r in d["rows"]:
    assert r["collective_calls_per_token"] > 0 and r["collective_ms_per_token"] >= 0, r
PY
    ok "$1: tensor_parallel and the rows' collectives in the JSON"
  else
    bad "$1 (rc $2): $(head -c 600 "$tmp/bj") $(grep '^txc:' "$tmp/be" | head -3)"
  fi
}
mpi 2 "$TXC" bench --model "$MODEL" --tp 2 --threads 1 -n 8 --modes eager-static,jit-static --no-compile-cache --json \
  >"$tmp/bj" 2>"$tmp/be"
tp_json "mpirun -np 2 bench --tp 2 --json" $?
"$TXC" bench --model "$MODEL" --devices cpu:2 --tp 2 --threads 2 -n 8 --modes eager-static --no-compile-cache --json \
  >"$tmp/bj" 2>"$tmp/be"
tp_json "bench --devices cpu:2 --tp 2 --json" $?

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
