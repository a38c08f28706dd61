#!/usr/bin/env bash
# txc serve with the official openai Python client (tests/python/serve_openai.py),
# installed by scripts/test-venv.sh into a venv outside the repository
# (reused while tests/python/requirements-serve.txt is unchanged). Exit 77
# (skipped) only when pip cannot reach its index.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
SRC=${TXC_SOURCE_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
py=$("$SRC/scripts/test-venv.sh")
rc=$?
[ $rc -eq 77 ] && { echo "pip is unreachable: skipped"; exit 77; }
[ $rc -ne 0 ] && { echo "FAIL - the test venv could not be made"; exit 1; }
tmp=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/inst"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  ln -s "$MODEL/$f" "$tmp/inst/$f"
done
cat >"$tmp/inst/chat_template.jinja" <<'TPL'
{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}
TPL
want=$("$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 30 --greedy --max-cache-len 512 \
  --no-compile-cache 2>/dev/null)
want_chat=$(head -1 "$SRC/tests/fixtures/chat_stories260k_mistral.txt")
"$TXC" serve --model "$tmp/inst" --port 0 --parallel 4 --api-key sk-openai-test --alias stories >"$tmp/out" 2>"$tmp/err" &
PID=$!
PORT=
for _ in $(seq 1 600); do
  PORT=$(sed -n 's/^txc serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/err")
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { echo "FAIL - the server did not start: $(cat "$tmp/err")"; exit 1; }
"$py" "$SRC/tests/python/serve_openai.py" "$PORT" sk-openai-test stories "$want" "$want_chat"
rc=$?
kill -TERM "$PID"
wait "$PID"
src=$?
PID=
[ $src -eq 0 ] && echo "ok - SIGTERM: exit 0" || { echo "FAIL - SIGTERM: exit $src: $(tail -3 "$tmp/err")"; rc=1; }
exit $rc
