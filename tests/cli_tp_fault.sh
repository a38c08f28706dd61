#!/usr/bin/env bash
# A tensor-parallel job whose peer stops answering or dies ends every rank
# with a nonzero exit within the collectives' deadline, never a hang: a
# stopped rank (SIGSTOP) makes the others' next collective time out with one
# line naming the rank, the host, the op and the deadline
# (TXC_COLLECTIVE_TIMEOUT); a killed rank (SIGKILL) ends the job too.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh"
. "$(dirname "$0")/lib_mpi.sh"

# The pid of rank $2 among the children of mpirun $1 (its environment's
# OMPI_COMM_WORLD_RANK), waiting for it to start.
rank_pid() {
  local mp=$1 want=$2 p
  for _ in $(seq 100); do
    for p in $(pgrep -P "$mp" 2>/dev/null); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$want"; then
        echo "$p"
        return 0
      fi
    done
    sleep 0.1
  done
  return 1
}

# A long job: eager decoding without a cache, 400 tokens (seconds).
long_job() {
  TXC_COLLECTIVE_TIMEOUT=3 mpirun --allow-run-as-root --oversubscribe --quiet -np 2 "$TXC" bench --model "$MODEL" \
    --tp 2 --threads 1 --no-compile-cache -n 400 --modes eager-none >"$tmp/o" 2>"$tmp/e" &
  mp=$!
}

for sig in STOP KILL; do
  long_job
  pid=$(rank_pid "$mp" 1)
  sleep 1
  start=$(date +%s)
  kill -s $sig "$pid"
  # wait at most 30 s for the job to end
  for _ in $(seq 300); do kill -0 "$mp" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$mp" 2>/dev/null; then
    bad "SIG$sig of rank 1: the job still runs after 30 s"
    kill -KILL "$mp" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
    continue
  fi
  wait "$mp"
  rc=$?
  took=$(($(date +%s) - start))
  if [ $sig = STOP ]; then
    # one line per rank at most: rank 0's, and the stopped rank's own when
    # mpirun's abort resumes it (SIGCONT) past its deadline before the kill
    lines=$(grep -c "timed out" "$tmp/e")
    ranks=$(grep "timed out" "$tmp/e" | sed -n 's/^txc: rank \([0-9]*\) .*/\1/p' | sort -u | wc -l)
    if [ $rc -ne 0 ] && [ "$lines" -ge 1 ] && [ "$lines" -eq "$ranks" ] &&
      grep -q "^txc: rank 0 (.*): _c10d_functional::[a-z_]* of [0-9]* bytes timed out after 3 s waiting for its peers" "$tmp/e"; then
      ok "a stopped rank: rank 0 times out with one line ($lines in all, one per rank) and the job exits $rc after ${took} s"
    else
      bad "a stopped rank (rc $rc, $lines lines): $(head -5 "$tmp/e")"
    fi
  else
    if [ $rc -ne 0 ]; then
      ok "a killed rank: the job exits $rc after ${took} s"
    else
      bad "a killed rank: exit 0: $(head -5 "$tmp/e")"
    fi
  fi
  kill -KILL "$pid" 2>/dev/null
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
