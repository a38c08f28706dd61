#!/usr/bin/env bash
# Tensor parallelism across processes: `mpirun -np 2 txc generate --tp 2`
# prints the bytes one process prints (eager and compiled, the compile
# cache's plans reused by a second run), test_shard under 2 and 4 ranks
# (collectives bit for bit, stories260K and the architecture fixtures
# against the unsharded model), txc bench --tp's lines, and the errors.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh"
. "$(dirname "$0")/lib_mpi.sh"

P="Once upon a time"
for jit in --no-jit --jit; do
  "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 $jit --threads 1 --no-compile-cache >"$tmp/one" 2>"$tmp/e1"
  for run in 1 2; do # the second compiled run loads its plans from the compile cache
    mpi 2 "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 $jit --threads 1 --tp 2 \
      --compile-cache "$tmp/cc" >"$tmp/two" 2>"$tmp/e2"
    rc=$?
    if [ $rc -eq 0 ] && [ -s "$tmp/one" ] && cmp -s "$tmp/one" "$tmp/two"; then
      ok "mpirun -np 2 generate --tp 2 $jit (run $run): the bytes of one process"
    else
      bad "generate --tp 2 $jit run $run (rc $rc): $(head -c 300 "$tmp/two") / $(head -c 300 "$tmp/one") $(cat "$tmp/e2")"
    fi
  done
done
mpi 2 "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --jit --threads 1 --tp 2 --compile-cache "$tmp/cc" \
  --verbose >/dev/null 2>"$tmp/ev"
if grep -q "plans loaded" "$tmp/ev" && ! grep -q " 0 plans loaded" "$tmp/ev"; then
  ok "the compiled tensor-parallel plans come back from the compile cache"
else
  bad "compile cache under --tp: $(grep -i "compile cache" "$tmp/ev")"
fi
"$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 1 --no-compile-cache --do-sample --seed 7 >"$tmp/s1" 2>/dev/null
mpi 2 "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 1 --tp 2 --no-compile-cache --do-sample \
  --seed 7 >"$tmp/s2" 2>/dev/null
if cmp -s "$tmp/s1" "$tmp/s2"; then ok "sampling with a seed: the same text under --tp 2"; else bad "sampled text differs under --tp 2"; fi
mpi 4 "$TXC" generate --model "$MODEL" --prompt "$P" -n 80 --threads 1 --tp 4 --no-compile-cache >"$tmp/four" 2>"$tmp/e4"
if cmp -s "$tmp/one" "$tmp/four"; then ok "mpirun -np 4 generate --tp 4"; else bad "--tp 4: $(cat "$tmp/e4")"; fi

# test_shard under 2 and 4 ranks: every rank must pass
TEST_SHARD=$(dirname "$TXC")/test_shard
for n in 2 4; do
  mpi $n "$TEST_SHARD" >"$tmp/ts" 2>&1
  rc=$?
  passed=$(grep -c "PASSED" "$tmp/ts")
  if [ $rc -eq 0 ] && [ "$passed" -eq $n ]; then
    ok "test_shard on $n ranks"
  else
    bad "test_shard on $n ranks (rc $rc): $(grep -E "FAIL|ERROR|LINE" "$tmp/ts" | head -5)"
  fi
done

# txc bench --tp 2
mpi 2 "$TXC" bench --model "$MODEL" --tp 2 --threads 1 --no-compile-cache -n 16 --modes eager-static,jit-static \
  >"$tmp/b" 2>"$tmp/be"
rc=$?
if [ $rc -eq 0 ] && grep -q "^tensor parallel: --tp 2, 2 processes over MPI; rank 0's weights .*(0\.5[0-9]*x)" "$tmp/b" &&
  grep -q "^all_reduce of one hidden-state row (64 float32)" "$tmp/b" && grep -q "^collectives, jit-static" "$tmp/b" &&
  [ "$(grep -c "^tensor parallel" "$tmp/b")" -eq 1 ] && grep -q "^(bound: weights + KV cache + the process's .* MB before the load" "$tmp/b" &&
  ! grep -q " OVER$" "$tmp/b"; then
  ok "bench --tp 2: rank 0 alone prints the per-rank weights, the all_reduce latency, the collectives, rows within the RSS bound"
else
  bad "bench --tp 2 (rc $rc): $(tail -8 "$tmp/b") $(cat "$tmp/be")"
fi

# errors: one process for --tp 2; sizes that do not divide; a fused architecture
expect_error "--tp 2 in one process" "needs 2 processes (mpirun -np 2" \
  "$TXC" generate --model "$MODEL" --prompt x --tp 2
expect_error "--tp 0" "--tp" "$TXC" generate --model "$MODEL" --prompt x --tp 0
expect_error "chat --tp" "txc chat does not run tensor-parallel yet" "$TXC" chat --model "$MODEL" --tp 1
expect_error "serve --tp 2 in one process" "needs 2 processes (mpirun -np 2" "$TXC" serve --model "$MODEL" --tp 2
mpi 3 "$TXC" generate --model "$MODEL" --prompt x --tp 3 >"$tmp/o3" 2>"$tmp/e3"
rc=$?
if [ $rc -ne 0 ] && grep -q "^txc: --tp 3: num_attention_heads 8 does not divide by 3 (tensor-parallel sizes that work: 1, 2, 4)$" "$tmp/e3" &&
  [ ! -s "$tmp/o3" ]; then
  ok "--tp 3 names the sizes that work"
else
  bad "--tp 3 (rc $rc): $(cat "$tmp/e3")"
fi

# under mpirun: an argument error is printed once (by rank 0), every rank exits nonzero; no --tp is refused
mpi_error() { # NAME NEEDLE COMMAND...: nonzero, one "txc:" line holding NEEDLE, nothing on stdout
  local name=$1 needle=$2
  shift 2
  mpi 2 "$@" >"$tmp/mo" 2>"$tmp/me"
  local rc=$? n
  n=$(grep -c "^txc:" "$tmp/me")
  if [ $rc -ne 0 ] && [ "$n" -eq 1 ] && grep -q -- "$needle" "$tmp/me" && [ ! -s "$tmp/mo" ]; then
    ok "$name"
  else
    bad "$name: rc $rc, $n lines: $(cat "$tmp/me") $(head -c 200 "$tmp/mo")"
  fi
}
mpi_error "mpirun -np 2 generate without --tp: refused, once" "without --tp" \
  "$TXC" generate --model "$MODEL" --prompt x -n 4 --threads 1
mpi_error "mpirun -np 2: an unknown option, once" "is unknown" "$TXC" generate --model "$MODEL" --bogus --tp 2
mpi_error "mpirun -np 2: a bad value after --tp, once" "--max-new-tokens" \
  "$TXC" generate --model "$MODEL" --tp 2 --max-new-tokens 0
mpi_error "mpirun -np 2 bench without --tp: refused, once" "without --tp" \
  "$TXC" bench --model "$MODEL" -n 4 --threads 1
mpi_error "mpirun -np 2 tokenize: refused, once" "does not run under mpirun" "$TXC" tokenize --model "$MODEL" x
mpi_error "mpirun -np 2 --devices: refused, once" "under mpirun" \
  "$TXC" generate --model "$MODEL" --prompt x --tp 2 --devices cpu:2 --threads 2

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
