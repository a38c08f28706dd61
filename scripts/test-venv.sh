#!/usr/bin/env bash
# A Python venv for the tests' Python clients (tests/python/requirements-serve.txt:
# the official openai client), kept outside the repository in
# $TXC_TEST_VENV, else $HOME/.cache/txc/venv-test, and reused while the
# requirements file is unchanged (its sha256 is stamped in the venv).
# Prints the venv's python on stdout. Exit status: 0; 77 when pip cannot
# reach its index (offline: the caller skips); 1 on any other failure.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/tests/python/requirements-serve.txt
venv=${TXC_TEST_VENV:-${HOME:-/tmp}/.cache/txc/venv-test}
want=$(sha256sum "$req" | cut -d' ' -f1)
mkdir -p "$(dirname "$venv")"
# one creator at a time (tests run side by side)
exec 9>"$venv.lock"
flock 9
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements-sha256" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "test-venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
log=$(mktemp)
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req" >"$log" 2>&1; then
  cat "$log" >&2
  if grep -qiE 'NewConnectionError|Temporary failure in name resolution|Network is unreachable|Failed to establish|ConnectTimeout|ReadTimeout|Could not fetch URL|No matching distribution found|ProxyError|SSLError' "$log"; then
    rm -f "$log"
    rm -rf "$venv"
    echo "test-venv: pip cannot reach its index (offline?)" >&2
    exit 77
  fi
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "$want" >"$venv/.requirements-sha256"
echo "$venv/bin/python"
