#!/usr/bin/env bash
# The load test of txc serve (loopback only, bounded in count and time):
# starts `txc serve` on 127.0.0.1 on a free port over stories260K with a
# chat template added beside its files, runs scripts/serve_load.py (REQUESTS
# requests from CLIENTS concurrent clients: plain and streamed, greedy and
# seeded, cancelled, malformed; every well-formed one must get the text it
# gets alone), then SIGTERM: the server must exit 0, and with an ASan build
# report no error and no leak.
#   scripts/serve_load_test.sh [--txc BIN] [--requests N] [--clients N] [--parallel N] [--deadline S]
# Defaults: build-asan/txc when it exists (else build/txc), 1000 requests,
# 16 clients, 8 slots, 900 s. tests/cli_serve_load.sh runs a short one in CI.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
txc=$here/build-asan/txc
[ -x "$txc" ] || txc=$here/build/txc
requests=1000 clients=16 parallel=8 deadline=900
while [ $# -gt 0 ]; do
  case $1 in
  --txc) txc=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --clients) clients=$2; shift 2 ;;
  --parallel) parallel=$2; shift 2 ;;
  --deadline) deadline=$2; shift 2 ;;
  *) echo "usage: $0 [--txc BIN] [--requests N] [--clients N] [--parallel N] [--deadline S]" >&2; exit 2 ;;
  esac
done
model=${TXC_SHARED_DIR:-$here/../shared}/models/stories260K
[ -d "$model" ] || { echo "no model at $model" >&2; exit 2; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/m"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  ln -s "$model/$f" "$tmp/m/$f"
done
cat >"$tmp/m/chat_template.jinja" <<'TPL'
{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}
TPL
# LeakSanitizer reports at exit; halt_on_error keeps a first error fatal
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1} \
  "$txc" serve --model "$tmp/m" --port 0 --parallel "$parallel" --max-cache-len 256 --no-compile-cache \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
port=
for _ in $(seq 1 900); do
  port=$(sed -n 's/^txc serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/err")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "FAIL - the server did not start: $(cat "$tmp/err")"; exit 1; }
echo "txc serve ($txc) on port $port, $parallel slots"
python3 "$here/scripts/serve_load.py" --port "$port" --requests "$requests" --clients "$clients" --chat \
  --deadline "$deadline"
rc=$?
kill -0 "$pid" 2>/dev/null || { echo "FAIL - the server died: $(tail -20 "$tmp/err")"; exit 1; }
kill -TERM "$pid"
wait "$pid"
src=$?
pid=
if [ $src -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/err"; then
  echo "FAIL - the server's exit: status $src"
  grep -A30 -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/err" | head -60
  exit 1
fi
echo "ok - SIGTERM: exit 0, no sanitizer report"
exit $rc
