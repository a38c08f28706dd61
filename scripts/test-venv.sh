#!/usr/bin/env bash
# A Python venv for the tests, kept outside the repository and reused while
# its requirements file is unchanged (the file's sha256 is stamped in the venv):
#   scripts/test-venv.sh          the tests' Python clients
#       (tests/python/requirements-serve.txt: the official openai client), in
#       $TXC_TEST_VENV, else $HOME/.cache/txc/venv-test;
#   scripts/test-venv.sh torch    the Python frontend (python/): torch,
#       transformers, torchax + JAX (CPU), pytest, scikit-build-core
#       (tests/python/requirements-torch.txt), in $TXC_TORCH_VENV, else
#       $HOME/.cache/txc/venv-torch (scripts/test-venv-torch.sh). Only the CUDA
#       build of torch is on PyPI here, several GB with its dependencies: a venv
#       there that this script did not make (no stamp) is adopted when it
#       already satisfies the file, and never deleted when it does not.
# Prints the venv's python on stdout. Exit status: 0; 77 when pip cannot
# reach its index (offline: the caller skips); 1 on any other failure.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-serve} in
  serve) name=test-venv req=$here/tests/python/requirements-serve.txt
         venv=${TXC_TEST_VENV:-${HOME:-/tmp}/.cache/txc/venv-test} adopt=0 ;;
  torch) name=test-venv-torch req=$here/tests/python/requirements-torch.txt
         venv=${TXC_TORCH_VENV:-${HOME:-/tmp}/.cache/txc/venv-torch} adopt=1 ;;
  *) echo "usage: scripts/test-venv.sh [serve|torch]" >&2; exit 2 ;;
esac
want=$(sha256sum "$req" | cut -d' ' -f1)
mkdir -p "$(dirname "$venv")"
# one creator at a time (tests run side by side)
exec 9>"$venv.lock"
flock 9
stamp=$venv/.requirements-sha256
if [ -x "$venv/bin/python" ]; then
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$venv/bin/python"
    exit 0
  fi
  # a venv made by someone else (no stamp) that already satisfies the file: adopt it
  if [ $adopt = 1 ] && [ ! -e "$stamp" ] && "$venv/bin/python" - "$req" >/dev/null 2>&1 <<'PY'
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
if [ $adopt = 1 ] && [ -e "$venv" ] && [ ! -e "$stamp" ]; then
  # not made by this script and not matching: never delete someone's venv
  echo "$name: $venv exists but does not satisfy $req; remove it or point TXC_TORCH_VENV elsewhere" >&2
  exit 1
fi
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "$name: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
log=$(mktemp)
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req" >"$log" 2>&1; then
  cat "$log" >&2
  if grep -qiE 'NewConnectionError|Temporary failure in name resolution|Network is unreachable|Failed to establish|ConnectTimeout|ReadTimeout|Could not fetch URL|No matching distribution found|ProxyError|SSLError' "$log"; then
    rm -f "$log"
    rm -rf "$venv"
    echo "$name: pip cannot reach its index (offline?)" >&2
    exit 77
  fi
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "$want" >"$stamp"
echo "$venv/bin/python"
