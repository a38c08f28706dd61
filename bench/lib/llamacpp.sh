# bench/lib/llamacpp.sh — what bench/compare_llamacpp.sh and bench/serve_load.sh share (sourced, not
# run): the Python environment of bench/make_model.py (gguf, numpy from PyPI) and llama.cpp built
# from llama-cpp-python's source package on PyPI (its vendored llama.cpp), one build folder for
# every llama.cpp binary the benchmarks use (llama-bench, llama-completion, llama-server).
# Needs $work (the cache folder, absolute) and a log function; sets $py and $llama_build_dir.

# llamacpp_venv: $work/venv-llamacpp with gguf and numpy; sets py.
llamacpp_venv() {
    local venv=$work/venv-llamacpp
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
        log "creating $venv (gguf, numpy from PyPI)"
        python3 -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet gguf numpy
    fi
    py=$venv/bin/python
}

# llamacpp_build TARGET...: the llama.cpp binaries TARGET... in $llama_build_dir/bin, built unless
# they all are there (one build at a time per $work: a second waits for the first). Needs $py.
llamacpp_build() {
    llama_build_dir=$work/llama.cpp-build
    local t missing=0
    for t in "$@"; do [ -x "$llama_build_dir/bin/$t" ] || missing=1; done
    [ "$missing" = 0 ] && return 0
    exec 9>"$work/.llama.cpp-build.lock"
    flock -n 9 || { log "another llama.cpp build is running in $work; waiting"; flock 9; }
    missing=0
    for t in "$@"; do [ -x "$llama_build_dir/bin/$t" ] || missing=1; done
    if [ "$missing" = 1 ]; then
        local src_dir=$work/llama-cpp-python sdist
        sdist=$(ls "$work"/sdist/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -1 || true)
        if [ -z "$sdist" ]; then
            log "downloading the llama-cpp-python source package from PyPI"
            # --no-binary for this package only: ':all:' would also build its build dependencies from source.
            "$py" -m pip download --quiet --no-deps --no-binary llama-cpp-python llama-cpp-python -d "$work/sdist"
            sdist=$(ls "$work"/sdist/llama_cpp_python-*.tar.gz | sort -V | tail -1)
        fi
        if [ "$(cat "$src_dir/.extracted" 2>/dev/null)" != "$(basename "$sdist")" ]; then
            rm -rf "$src_dir"
            mkdir -p "$src_dir"
            tar xzf "$sdist" -C "$src_dir" --strip-components=1
            basename "$sdist" >"$src_dir/.extracted"
        fi
        log "building llama.cpp $(cat "$src_dir/.extracted") ($*; -j2, takes a while)"
        cmake -S "$src_dir/vendor/llama.cpp" -B "$llama_build_dir" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF >"$work/cmake.log" 2>&1 ||
            { tail -20 "$work/cmake.log" >&2; exit 1; }
        nice cmake --build "$llama_build_dir" --target "$@" -j2 >"$work/build.log" 2>&1 ||
            { tail -30 "$work/build.log" >&2; exit 1; }
    fi
    exec 9>&-
}
