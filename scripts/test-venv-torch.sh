#!/usr/bin/env bash
# A Python venv for the Python frontend (python/): torch, transformers, torchax
# + JAX (CPU), pytest, scikit-build-core (tests/python/requirements-torch.txt).
# Only the CUDA build of torch is on PyPI here, several GB with its
# dependencies, so the venv lives outside the clone, in $TXC_TORCH_VENV, else
# $HOME/.cache/txc/venv-torch, and is reused while the requirements file is
# unchanged (its sha256 is stamped in the venv).
# Prints the venv's python on stdout. Exit status: 0; 77 when pip cannot reach
# its index (offline: the caller skips); 1 on any other failure.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/tests/python/requirements-torch.txt
venv=${TXC_TORCH_VENV:-${HOME:-/tmp}/.cache/txc/venv-torch}
want=$(sha256sum "$req" | cut -d' ' -f1)
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
stamp=$venv/.requirements-sha256
if [ -x "$venv/bin/python" ]; then
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$venv/bin/python"
    exit 0
  fi
  # a venv made by someone else (no stamp) that already satisfies the file: adopt it
  if [ ! -e "$stamp" ] && "$venv/bin/python" - "$req" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
from packaging.requirements import Requirement
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    r = Requirement(line)
    try:
        v = version(r.name)
    except PackageNotFoundError:
        sys.exit(1)
    if r.specifier and not r.specifier.contains(v.split("+")[0], prereleases=True):
        sys.exit(1)
PY
  then
    echo "$want" >"$stamp"
    echo "$venv/bin/python"
    exit 0
  fi
fi
if [ -e "$venv" ] && [ ! -e "$stamp" ]; then
  # not made by this script and not matching: never delete someone's venv
  echo "test-venv-torch: $venv exists but does not satisfy $req; remove it or point TXC_TORCH_VENV elsewhere" >&2
  exit 1
fi
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "test-venv-torch: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
log=$(mktemp)
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req" >"$log" 2>&1; then
  cat "$log" >&2
  if grep -qiE 'NewConnectionError|Temporary failure in name resolution|Network is unreachable|Failed to establish|ConnectTimeout|ReadTimeout|Could not fetch URL|No matching distribution found|ProxyError|SSLError' "$log"; then
    rm -f "$log"
    rm -rf "$venv"
    echo "test-venv-torch: pip cannot reach its index (offline?)" >&2
    exit 77
  fi
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "$want" >"$stamp"
echo "$venv/bin/python"
