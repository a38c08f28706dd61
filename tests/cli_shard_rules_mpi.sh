#!/usr/bin/env bash
# Sharding propagation across processes: tests/test_shard_rules (every
# rule against the unsharded op, the missing-rule error, the implicit
# all-gather, shard_map, a jitted function over sharded inputs) under
# `mpirun -np 2`, each rank one device talking over MPI; every rank must
# pass. Run alone, the same test runs on in-process devices.
set -u
TXC=${TXC_BIN:?set by ctest}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SHARED=${TXC_SHARED_DIR:?set by ctest}
. "$(dirname "$0")/lib_cli.sh"
. "$(dirname "$0")/lib_mpi.sh"

TEST=$(dirname "$TXC")/test_shard_rules
if [ ! -x "$TEST" ]; then
  echo "skipped: $TEST is not built"
  exit 77
fi
mpi 2 "$TEST" >"$tmp/out" 2>&1
rc=$?
passed=$(grep -c "PASSED" "$tmp/out")
if [ $rc -eq 0 ] && [ "$passed" -eq 2 ] && ! grep -q "FAILED" "$tmp/out"; then
  ok "test_shard_rules on 2 MPI ranks"
else
  bad "test_shard_rules on 2 ranks (rc $rc): $(grep -E "ERROR|FAIL" "$tmp/out" | head -5)"
fi
# the implicit all-gather's line is printed by the ranks (once per op), nothing else on stderr
if [ "$(grep -c "^txc: implicit all-gather: no sharding rule for aten::matmul with P('tp', None) x P('tp', None)" \
  "$tmp/out")" -eq 2 ]; then
  ok "the implicit all-gather says so once per rank"
else
  bad "implicit all-gather lines: $(grep -c "implicit all-gather" "$tmp/out")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
