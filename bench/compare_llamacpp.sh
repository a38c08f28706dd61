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

# ---- 1. the Python environment (gguf, numpy; no torch) ---------------------------------------------
venv=$work/venv-llamacpp
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
    log "creating $venv (gguf, numpy from PyPI)"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet gguf numpy
fi
py=$venv/bin/python

# ---- 2. llama.cpp from llama-cpp-python's source package -------------------------------------------
src_dir=$work/llama-cpp-python
build_dir=$work/llama.cpp-build
bench_bin=$build_dir/bin/llama-bench
if [ ! -x "$bench_bin" ] || [ ! -x "$build_dir/bin/llama-completion" ]; then
    sdist=$(ls "$work"/sdist/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$sdist" ]; then
        log "downloading the llama-cpp-python source package from PyPI"
        # --no-binary for this package only: ':all:' would also build its build dependencies from source.
        "$py" -m pip download --quiet --no-deps --no-binary llama-cpp-python llama-cpp-python -d "$work/sdist"
        sdist=$(ls "$work"/sdist/llama_cpp_python-*.tar.gz | sort -V | tail -1)
    fi
    if [ ! -f "$src_dir/.extracted" ]; then
        rm -rf "$src_dir"
        mkdir -p "$src_dir"
        tar xzf "$sdist" -C "$src_dir" --strip-components=1
        basename "$sdist" >"$src_dir/.extracted"
    fi
    log "building llama.cpp $(cat "$src_dir/.extracted") (llama-bench, llama-completion; -j2, takes a while)"
    cmake -S "$src_dir/vendor/llama.cpp" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF >"$work/cmake.log" 2>&1 ||
        { tail -20 "$work/cmake.log" >&2; exit 1; }
    cmake --build "$build_dir" --target llama-bench llama-completion -j2 >"$work/build.log" 2>&1 ||
        { tail -30 "$work/build.log" >&2; exit 1; }
fi

# ---- 3. the models, 4. the runs --------------------------------------------------------------------
[ -x "$txc" ] || { echo "compare_llamacpp: $txc not found (build txc first, or give --txc)" >&2; exit 2; }
args=(--work "$work" --shared "$shared" --txc "$txc" --llama-bin "$build_dir/bin")
[ "$setup_only" = 1 ] && args+=(--setup-only)
exec "$py" "$here/compare_llamacpp.py" "${args[@]}" "${pass[@]+"${pass[@]}"}"
