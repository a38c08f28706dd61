#!/usr/bin/env bash
# Encoding speed of txc against the `tokenizers` package, single-threaded, on a ~1 MB text,
# for every tokenizer folder under $TXC_SHARED_DIR/tokenizers; also checks that both give
# identical ids for the whole text. See bench/README.md.
#
#   bench/tokenizer_speed.sh [--runs N] [--only a,b] [--bytes N] [--work DIR] [--json FILE]
#                            [--batch-fast]
#
# Work folder ($TXC_BENCH_DIR, else bench/.work, git-ignored): a venv with the tokenizers
# package from PyPI (version $TOKENIZERS_VERSION, default 0.23.3: the version the committed
# fixtures come from) and the bench text. txc is $TXC_BIN, else build/txc (built with
# cmake Release when missing). Exit status: 0; 1 when the ids differ for some tokenizer;
# 2 on a usage or setup error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
work=${TXC_BENCH_DIR:-$here/.work}
shared=${TXC_SHARED_DIR:-$root/../shared}
version=${TOKENIZERS_VERSION:-0.23.3}
runs=5 only="" bytes=1000000 json="" fast=""

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=${2:?--runs needs a value}; shift 2 ;;
        --only) only=${2:?--only needs a value}; shift 2 ;;
        --bytes) bytes=${2:?--bytes needs a value}; shift 2 ;;
        --work) work=${2:?--work needs a value}; shift 2 ;;
        --json) json=${2:?--json needs a value}; shift 2 ;;
        --batch-fast) fast=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "tokenizer_speed.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ ! -d "$shared/tokenizers" ]; then
    echo "tokenizer_speed.sh: no tokenizers folder at $shared/tokenizers (set TXC_SHARED_DIR)" >&2
    exit 2
fi

txc=${TXC_BIN:-$root/build/txc}
if [ ! -x "$txc" ]; then
    echo "building $txc" >&2
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$root/build" -j2 --target txc >/dev/null
fi

mkdir -p "$work"
work=$(cd "$work" && pwd)
venv=$work/venv-tokenizers
if ! "$venv/bin/python" -c "import tokenizers, sys; sys.exit(tokenizers.__version__ != '$version')" 2>/dev/null; then
    echo "creating $venv (tokenizers==$version from PyPI)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "tokenizers==$version"
fi

text=$work/tokenizer_bench_$bytes.txt
[ -s "$text" ] || "$venv/bin/python" "$here/tokenizer_speed.py" corpus "$text" --bytes "$bytes" >&2

export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false TXC_THREADS=1
args=(run --txc "$txc" --tokenizers "$shared/tokenizers" --text "$text" --runs "$runs")
[ -n "$only" ] && args+=(--only "$only")
[ -n "$json" ] && args+=(--json "$json")
[ -n "$fast" ] && args+=(--batch-fast)
exec "$venv/bin/python" "$here/tokenizer_speed.py" "${args[@]}"
