#!/usr/bin/env bash
# `mpirun -np 2 txc serve --tp 2`: rank 0 serves HTTP, rank 1 follows its
# batch steps. Completions (plain, streamed, several at once, sampled with
# a seed) give the tokens of a one-process `txc serve`; rank 1 opens no
# socket; SIGTERM to rank 0 ends both ranks with exit 0 (to mpirun, which
# forwards it: rank 0 stops cleanly); idle past the collectives' deadline
# it still serves (rank 0's heartbeat); a rank killed ends the job.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/lib_cli.sh"
. "$(dirname "$0")/lib_mpi.sh"

. "$(dirname "$0")/lib_serve.sh"
# every server: the model, 4 slots, one thread each (serve_start_with NAME LAUNCHER... -- ARGS...)
SERVE_ARGS=(--model "$MODEL" --parallel 4 --max-cache-len 256 --threads 1 --no-compile-cache)
# complete OUT BODY: POST /v1/completions, the body in $tmp/OUT
complete() {
  curl -s -o "$tmp/$1" -H 'Content-Type: application/json' --data-binary "$2" "http://127.0.0.1:$PORT/v1/completions"
}
# the text of a response, or of a stream's events joined
text() {
  python3 -c '
import json, sys
s = open(sys.argv[1]).read()
if s.startswith("data:"):
    out = ""
    for line in s.splitlines():
        if line.startswith("data: {"):
            d = json.loads(line[6:])
            out += "".join(c.get("text", "") for c in d.get("choices", []))
    print(out)
else:
    d = json.loads(s)
    print(d["choices"][0]["text"] + "|" + d["choices"][0]["finish_reason"] + "|" + str(d["usage"]["completion_tokens"]))
' "$tmp/$1"
}
# requests PREFIX: the same set of requests, texts in $tmp/PREFIX.*
requests() {
  complete "$1.plain" '{"prompt": "Once upon a time", "max_tokens": 40}'
  complete "$1.stream" '{"prompt": "The little dog", "max_tokens": 30, "stream": true}'
  complete "$1.seed" '{"prompt": "Lily and Ben", "max_tokens": 30, "temperature": 0.8, "seed": 11}'
  local c=()
  for i in 1 2 3; do # three at once: one batch
    complete "$1.par$i" "{\"prompt\": \"One day $i\", \"max_tokens\": 24}" &
    c+=($!)
  done
  wait "${c[@]}"
  complete "$1.stop" '{"prompt": "Once upon a time", "max_tokens": 60, "stop": ["."]}'
}

serve_start_with one -- || exit 1
ONE=$PID
requests one
kill -TERM "$ONE"
wait "$ONE"

serve_start_with tp mpirun --allow-run-as-root --oversubscribe -np 2 -- --tp 2 || exit 1
TP=$PID
requests tp
for k in plain stream seed par1 par2 par3 stop; do
  a=$(text "one.$k" 2>&1)
  b=$(text "tp.$k" 2>&1)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then
    ok "serve --tp 2, $k: the text of one process"
  else
    bad "serve --tp 2, $k: '$b' / one process '$a'"
  fi
done
# rank 1 does not listen on the port (rank 0 alone serves HTTP)
rank_pid() { # LAUNCHER RANK: the pid of that rank under mpirun
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
  done
}
r0=$(rank_pid "$TP" 0)
r1=$(rank_pid "$TP" 1)
if command -v ss >/dev/null && [ -n "$r1" ]; then
  ss -ltnp "sport = :$PORT" >"$tmp/ss" 2>&1
  if grep -q "pid=$r0," "$tmp/ss" && ! grep -q "pid=$r1," "$tmp/ss"; then
    ok "rank 0 alone listens on the port"
  else
    bad "the port's listeners: $(cat "$tmp/ss") (rank 0 $r0, rank 1 $r1)"
  fi
fi
if [ -n "$r0" ]; then
  kill -TERM "$r0"
else
  bad "rank 0's process not found under mpirun"
  kill -TERM "$TP"
fi
wait "$TP"
rc=$?
if [ $rc -eq 0 ] && grep -q '^txc serve: stopped$' "$tmp/tp.err"; then
  ok "SIGTERM to rank 0: every rank ends, exit 0"
else
  bad "SIGTERM to rank 0: rc $rc: $(tail -5 "$tmp/tp.err")"
fi

# idle longer than the collective deadline, then a request, then SIGTERM to mpirun
TXC_COLLECTIVE_TIMEOUT=5 serve_start_with tp2 mpirun --allow-run-as-root --oversubscribe -np 2 -- --tp 2 || exit 1
complete tp2.warm '{"prompt": "Once upon a time", "max_tokens": 4}' # (the plans compiled)
sleep 6
complete tp2.plain '{"prompt": "Once upon a time", "max_tokens": 40}'
[ "$(text tp2.plain)" = "$(text one.plain)" ] && ok "idle past the collective deadline, then the same text" ||
  bad "after idle: $(text tp2.plain 2>&1) $(tail -3 "$tmp/tp2.err")"
# (Open MPI's mpirun forwards SIGTERM to the ranks, then ends the job itself: its own status is 1 whatever
# the ranks return, so the check is that rank 0 stopped cleanly and the job ended)
kill -TERM "$PID"
timeout 30 tail --pid="$PID" -f /dev/null
wait "$PID"
if ! kill -0 "$PID" 2>/dev/null && grep -q '^txc serve: stopped$' "$tmp/tp2.err"; then
  ok "SIGTERM to mpirun: forwarded, rank 0 stops cleanly, the job ends"
else
  bad "SIGTERM to mpirun: $(tail -5 "$tmp/tp2.err")"
fi

# a rank killed: the job ends with a nonzero status, not a hang
TXC_COLLECTIVE_TIMEOUT=5 serve_start_with tp3 mpirun --allow-run-as-root --oversubscribe -np 2 -- --tp 2 || exit 1
r1=$(rank_pid "$PID" 1)
[ -n "$r1" ] && kill -9 "$r1"
complete tp3.plain '{"prompt": "Once upon a time", "max_tokens": 40}' &
timeout 60 tail --pid="$PID" -f /dev/null
wait "$PID"
rc=$?
[ $rc -ne 0 ] && ok "rank 1 killed: the job ends (rc $rc)" || bad "rank 1 killed: rc 0"

# errors: --devices; --tp 2 without mpirun
expect_error "serve --devices" "txc serve does not run on --devices yet" \
  "$TXC" serve --model "$MODEL" --devices cpu:2 --tp 2 --threads 2
expect_error "serve --tp 2 alone" "needs 2 processes" "$TXC" serve --model "$MODEL" --tp 2

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
