#!/usr/bin/env bash
# The main job on a fresh machine: install the Debian packages, build txc,
# and generate text with the default model (../shared/models/stories260K).
# Extra arguments go to `txc generate` (e.g. --prompt "Lily and Ben").
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
if [ $# -eq 0 ]; then
  set -- --prompt "Once upon a time" --max-new-tokens 200 --verbose
fi
exec ./build/txc generate "$@"
