#!/usr/bin/env bash
# bench/serve_load.sh — `txc serve` next to llama.cpp's llama-server under the same concurrent load.
#
# llama-server is built from the same source package as bench/compare_llamacpp.sh (llama-cpp-python's
# vendored llama.cpp on PyPI), the model is written once as a Hugging Face folder (txc) and a GGUF
# (llama-server) from the same arrays (bench/make_model.py), both servers get the same threads, slots
# (--parallel = -np; continuous batching on) and context per slot; then bench/serve_load.py sends
# streaming /v1/completions from 1, 4, 8 and 16 concurrent clients, alternating the two servers, and
# prints aggregate tok/s, time to first token p50/p99, inter-token latency p50/p99 and the ratios.
#
# Usage: bench/serve_load.sh [--model qwen2.5-0.5b] [--dtype bf16|f32] [--threads N] [--parallel N]
#                            [--clients 1,4,8,16] [--pairs N] [--requests N] [--max-tokens N]
#                            [--prompt-words N] [--txc PATH] [--llama-server PATH] [--work DIR]
#                            [--shared DIR] [--json FILE] [--setup-only] [--txc-only]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
work=${TXC_BENCH_DIR:-$here/.work}
shared=${TXC_SHARED_DIR:-$root/../shared}
txc=$root/build/txc
model=qwen2.5-0.5b
dtype=bf16
server=
setup_only=0
txc_only=0
pass=()

usage() {
    sed -n '11,14p' "$0" | sed 's/^# \{0,1\}//'
    cat <<'USAGE'

  --model NAME       a bench/make_model.py config (default qwen2.5-0.5b)
  --dtype D          the weights of both (default bf16)
  --threads N        threads of both servers (default 2)
  --parallel N       slots of both (txc --parallel, llama-server -np; default 8)
  --clients LIST     concurrent streaming clients per run (default 1,4,8,16)
  --pairs N          alternated runs of each server per client count (default 3)
  --requests N       requests per client per run (default 2)
  --max-tokens N     tokens per request (default 64)
  --prompt-words N   words of each prompt (default 32)
  --llama-server P   a llama-server binary (default: built in the work folder's
                     llama.cpp-build, as bench/compare_llamacpp.sh's llama.cpp)
  --work DIR         cache folder: venv, llama-server build, models (default: $TXC_BENCH_DIR,
                     else bench/.work)
  --json FILE        also write every run and the summary as JSON
  --setup-only       build llama-server and write the model, run nothing
  --txc-only         no llama-server (nothing built): txc serve alone, and txc generate at 1 client
USAGE
}

while [ $# -gt 0 ]; do
    case "$1" in
        --work) work=$2; shift 2 ;;
        --shared) shared=$2; shift 2 ;;
        --txc) txc=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --dtype) dtype=$2; shift 2 ;;
        --llama-server) server=$2; shift 2 ;;
        --setup-only) setup_only=1; shift ;;
        --txc-only) txc_only=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --threads|--parallel|--clients|--pairs|--requests|--max-tokens|--prompt-words|--json)
            [ $# -ge 2 ] || { echo "serve_load: $1 needs a value" >&2; exit 2; }
            pass+=("$1" "$2"); shift 2 ;;
        *) echo "serve_load: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "serve_load: $*" >&2; }

# ---- 1. the Python environment (gguf, numpy: bench/make_model.py), 2. llama-server -----------------
# built by bench/lib/llamacpp.sh from llama-cpp-python's source package, in the same build folder as
# bench/compare_llamacpp.sh's llama.cpp
. "$here/lib/llamacpp.sh"
llamacpp_venv
if [ "$txc_only" = 1 ]; then
    server=none
elif [ -z "$server" ]; then
    llamacpp_build llama-server
    server=$llama_build_dir/bin/llama-server
fi
[ "$txc_only" = 1 ] || [ -x "$server" ] || { echo "serve_load: $server is not an executable" >&2; exit 2; }

# ---- 3. the model, 4. the runs ---------------------------------------------------------------------
out=$work/models/$model-$dtype
"$py" "$here/make_model.py" "$model" "$out" --dtype "$dtype" --shared "$shared" >&2
[ "$setup_only" = 1 ] && { log "ready: $server, $out"; exit 0; }
[ -x "$txc" ] || { echo "serve_load: $txc not found (build txc first, or give --txc)" >&2; exit 2; }
llama=(--llama-server "$server" --gguf "$out/model.gguf")
[ "$txc_only" = 1 ] && llama=()
exec python3 "$here/serve_load.py" --txc "$txc" --hf "$out/hf" "${llama[@]}" "${pass[@]+"${pass[@]}"}"
