#!/usr/bin/env bash
# bench/compare_llamacpp.sh — txc next to llama.cpp on the same weights, prompt, dtype and threads.
#
# Builds llama.cpp from the source package on PyPI (llama-cpp-python's vendored copy), writes each
# model once as a Hugging Face folder (for txc) and a GGUF (for llama.cpp) from the same arrays,
# then runs the two alternately, in separate processes, with a bandwidth probe between runs, and
# prints the medians and the median of the pairwise ratios. See bench/README.md.
#
# Usage: bench/compare_llamacpp.sh [--models a,b,...] [--pairs N] [--threads N] [--prompt-tokens N]
#                                  [--new-tokens N] [--json FILE] [--txc PATH] [--shared DIR]
#                                  [--work DIR] [--mmap both|on|off] [--dtype bf16|f32] [--llama-env VAR=VALUE]
#                                  [--setup-only] [--check] [--quant q8_0|q4_0|q4_1|q4_k|...]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
work=${TXC_BENCH_DIR:-$here/.work}
shared=${TXC_SHARED_DIR:-$root/../shared}
txc=$root/build/txc
setup_only=0
pass=()

usage() {
    sed -n '9,12p' "$0" | sed 's/^# \{0,1\}//'
    cat <<'USAGE'

  --models LIST      comma-separated: qwen2.5-0.5b, smollm2-135m, llama-3.2-1b (or tiny-llama3,
                     tiny-qwen2: 2-layer configs for trying the script)
                     (default: qwen2.5-0.5b,smollm2-135m,llama-3.2-1b)
  --pairs N          runs of each side per model, alternated (default 5)
  --threads N        threads for both (default 2)
  --prompt-tokens N  prefill length (default 128)
  --new-tokens N     decode length (default 64)
  --mmap MODE        llama.cpp's weights (llama-bench -lm mmap | none): both (default: one run of each per
                     pair), on or off
  --json FILE        also write every run and the summary as JSON to FILE
  --llama-env V=X    an environment variable for llama-bench's runs (repeatable; V= unsets
                     it); default OMP_WAIT_POLICY=passive (see bench/README.md)
  --txc PATH         the txc binary (default: build/txc)
  --shared DIR       the tokenizers' folder's parent (default: $TXC_SHARED_DIR, else ../shared)
  --work DIR         cache folder: venv, llama.cpp build, models (default: $TXC_BENCH_DIR,
                     else bench/.work)
  --quant TYPE       both sides on one GGUF with TYPE weights written by `txc quantize` from
                     the Hugging Face folder (txc reads the GGUF too; --dtype is then ignored)
  --setup-only       build llama.cpp and write the models, run nothing
  --check            also compare txc's and llama.cpp's greedy tokens on each model (short)
USAGE
}

while [ $# -gt 0 ]; do
    case "$1" in
        --work) work=$2; shift 2 ;;
        --shared) shared=$2; shift 2 ;;
        --txc) txc=$2; shift 2 ;;
        --setup-only) setup_only=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --models|--pairs|--threads|--prompt-tokens|--new-tokens|--mmap|--json|--dtype|--quant|--llama-env)
            [ $# -ge 2 ] || { echo "compare_llamacpp: $1 needs a value" >&2; exit 2; }
            pass+=("$1" "$2"); shift 2 ;;
        --check) pass+=("$1"); shift ;;
        *) echo "compare_llamacpp: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "compare_llamacpp: $*" >&2; }

# ---- 1. the Python environment (gguf, numpy; no torch), 2. llama.cpp (bench/lib/llamacpp.sh) -----
. "$here/lib/llamacpp.sh"
llamacpp_venv
llamacpp_build llama-bench llama-completion
build_dir=$llama_build_dir

# ---- 3. the models, 4. the runs --------------------------------------------------------------------
[ -x "$txc" ] || { echo "compare_llamacpp: $txc not found (build txc first, or give --txc)" >&2; exit 2; }
args=(--work "$work" --shared "$shared" --txc "$txc" --llama-bin "$build_dir/bin")
[ "$setup_only" = 1 ] && args+=(--setup-only)
exec "$py" "$here/compare_llamacpp.py" "${args[@]}" "${pass[@]+"${pass[@]}"}"
