#!/usr/bin/env bash
# The Python frontend's tests: the cached torch venv (scripts/test-venv.sh torch),
# `pip install ./python` into it (scikit-build-core over the repository's CMake;
# an incremental build folder under python/build/), then pytest python/tests.
# Exit status: pytest's; 77 when the venv cannot be made offline.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
py=$("$here/scripts/test-venv-torch.sh")
rc=$?
[ $rc -eq 0 ] || exit $rc
"$py" -m pip install --disable-pip-version-check -q --no-build-isolation "$here/python" || exit 1
cd "$here/python/tests" || exit 1
TXC_SHARED_DIR=${TXC_SHARED_DIR:-$(cd "$here/.." && pwd)/shared} \
  timeout 600 "$py" -m pytest -q -p no:cacheprovider "$here/python/tests"
