#!/usr/bin/env bash
# Installs the Debian packages txc's build and tests need (idempotent).
# Run as root or with sudo available.
set -euo pipefail
# (python3-numpy: tests/cli_bench_compare.sh runs bench/make_model.py;
#  clang, libclang-rt-14-dev: the libFuzzer targets of fuzz/, build-fuzz/;
#  libmicrohttpd-dev: txc serve's HTTP;
#  python3-dev, python3-venv: the Python frontend (python/) and its test venvs;
#  libopenmpi-dev, openmpi-bin: tensor parallelism across processes and hosts, mpirun for its tests;
#  iproute2: the two-host test's network namespaces)
pkgs=(build-essential cmake pkg-config libcjson-dev libcmocka-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev
      python3-numpy clang libclang-rt-14-dev python3-dev python3-venv libopenmpi-dev openmpi-bin iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
