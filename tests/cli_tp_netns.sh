#!/usr/bin/env bash
# Two hosts: two ranks in two network namespaces joined by a veth pair
# (10.77.<n>.1 and .2), Open MPI's TCP transport restricted to that subnet
# and shared memory off (btl self,tcp), so every collective crosses the
# link; `txc generate --tp 2` must print the bytes of one process. Where
# `ip netns` is not permitted (not root, no CAP_NET_ADMIN) it says so and
# is skipped.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
. "$(dirname "$0")/lib_cli.sh"
. "$(dirname "$0")/lib_mpi.sh"

if ! command -v ip >/dev/null 2>&1; then
  echo "skipped: no ip command (iproute2)"
  exit 77
fi
net=$((($$ % 200) + 20))
A=txc-a-$$ B=txc-b-$$ VA=txa$$ VB=txb$$
cleanup() {
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
if ! ip netns add "$A" 2>"$tmp/why" || ! ip netns add "$B" 2>>"$tmp/why"; then
  echo "skipped: ip netns is not permitted here ($(head -1 "$tmp/why"))"
  exit 77
fi
if ! { ip link add "$VA" type veth peer name "$VB" && ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" &&
  ip -n "$A" addr add "10.77.$net.1/24" dev "$VA" && ip -n "$B" addr add "10.77.$net.2/24" dev "$VB" &&
  ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up && ip -n "$A" link set lo up &&
  ip -n "$B" link set lo up; } 2>"$tmp/why"; then
  echo "skipped: cannot make a veth pair between the namespaces ($(head -1 "$tmp/why"))"
  exit 77
fi

# the remote shell: "rsh HOST COMMAND..." runs COMMAND in HOST's namespace
cat >"$tmp/rsh" <<RSH
#!/bin/sh
host=\$1
shift
case \$host in
10.77.$net.1) ns=$A ;;
10.77.$net.2) ns=$B ;;
*) echo "rsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns sh -c "\$*"
RSH
chmod +x "$tmp/rsh"

P="Once upon a time"
for jit in --no-jit --jit; do
  "$TXC" generate --model "$MODEL" --prompt "$P" -n 60 $jit --threads 1 --no-compile-cache >"$tmp/one" 2>/dev/null
  # mpirun in namespace A; the host 10.77.$net.2 is reached by a "remote
  # shell" that enters namespace B (as ssh would reach another machine), so
  # its Open MPI daemon runs there and connects back over the veth pair
  OMPI_MCA_btl=self,tcp ip netns exec "$A" mpirun --allow-run-as-root --oversubscribe \
    --mca plm_rsh_agent "$tmp/rsh" --mca oob_tcp_if_include "10.77.$net.0/24" \
    --mca btl_tcp_if_include "10.77.$net.0/24" --host "10.77.$net.1:1,10.77.$net.2:1" -np 2 \
    "$TXC" generate --model "$MODEL" --prompt "$P" -n 60 $jit --threads 1 --tp 2 --no-compile-cache \
    >"$tmp/two" 2>"$tmp/e2"
  rc=$?
  if [ $rc -eq 0 ] && [ -s "$tmp/one" ] && cmp -s "$tmp/one" "$tmp/two"; then
    ok "two ranks in two network namespaces over TCP ($jit): the bytes of one process"
  else
    bad "two namespaces $jit (rc $rc): $(head -c 300 "$tmp/two") $(head -20 "$tmp/e2")"
  fi
done

# the collectives crossed the link: bytes sent each way over the veth pair
tx_a=$(ip netns exec "$A" cat "/sys/class/net/$VA/statistics/tx_bytes")
tx_b=$(ip netns exec "$B" cat "/sys/class/net/$VB/statistics/tx_bytes")
if [ "${tx_a:-0}" -gt 100000 ] && [ "${tx_b:-0}" -gt 100000 ]; then
  ok "the ranks talked over the veth pair ($tx_a bytes from A, $tx_b from B)"
else
  bad "too little traffic over the veth pair: ${tx_a:-?} / ${tx_b:-?} bytes"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
