#!/usr/bin/env bash
# End-to-end tests of `txc serve` with curl: every endpoint, streaming (SSE
# ending with [DONE], include_usage), stop strings, logprobs, each error
# status with OpenAI's error object (400 naming the field, 401, 404, 405,
# 413, 503), a client that disconnects mid-stream (its slot is freed), and
# SIGTERM (exit 0). The server listens on 127.0.0.1 on a free port (--port 0).
# stories260K has no chat template: chat is tested on a folder of links to
# its files plus Mistral-Instruct's template (as tests/cli_chat.sh), whose
# first reply is transformers' (tests/fixtures/chat_stories260k_mistral.txt).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
FIX=${TXC_SOURCE_DIR:?set by ctest}/tests/fixtures
MODEL=$SHARED/models/stories260K
command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
PY=$(python3 -c 'import sys; print(sys.executable)') # (not a version manager's shim: one start per check)
tmp=$(mktemp -d)
cleanup() {
  serve_kill_all
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad
. "$(dirname "$0")/lib_serve.sh" # serve_start, serve_stop_ok

model_links "$tmp/inst"
mistral_template "$tmp/inst"

KEY=sk-test-123
# req METHOD PATH [BODY]: response body in $tmp/body, status in $code
req() {
  local data=()
  [ $# -ge 3 ] && data=(-H 'Content-Type: application/json' --data-binary "$3")
  code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $KEY" "${data[@]}" \
    "http://127.0.0.1:$PORT$2")
}
# py EXPR: evaluate a Python expression over d = the JSON of $tmp/body
py() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$tmp/body" "$1" 2>&1; }
# expect_status NAME STATUS PARAM METHOD PATH BODY: an error object of that status naming PARAM ('' for none)
expect_status() {
  local name=$1 want=$2 param=$3
  shift 3
  req "$@"
  local got
  got=$(py "(d['error']['param'] or '') + '|' + str(bool(d['error']['message'])) + '|' + d['error']['type']")
  if [ "$code" = "$want" ] && [ "${got%%|*}" = "$param" ] && [[ $got == *"|True|"* ]]; then
    ok "$name: $want, param '$param'"
  else
    bad "$name: status $code (want $want), '$got': $(cat "$tmp/body")"
  fi
}

serve_start main --model "$tmp/inst" --parallel 4 --api-key "$KEY" --max-cache-len 256 --timeout 2 --no-compile-cache || exit 1

# --- GET endpoints ---------------------------------------------------------------
req GET /health
[ "$code" = 200 ] && [ "$(py "d['status']")" = ok ] && ok "/health" || bad "/health: $code $(cat "$tmp/body")"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$PORT/health")
[ "$code" = 200 ] && ok "/health needs no API key" || bad "/health without a key: $code"
req GET /v1/models
[ "$code" = 200 ] && [ "$(py "d['object'] + ' ' + d['data'][0]['id'] + ' ' + str(d['data'][0]['meta']['n_ctx'])")" = "list inst 256" ] \
  && ok "/v1/models: the folder's name, n_ctx 256" || bad "/v1/models: $code $(cat "$tmp/body")"

# --- completions: greedy = txc generate's tokens ------------------------------------
want=$("$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 30 --greedy --max-cache-len 256 \
  --no-compile-cache 2>/dev/null)
req POST /v1/completions '{"model": "inst", "prompt": "Once upon a time", "max_tokens": 30, "temperature": 0}'
got=$(py "d['choices'][0]['text']")
if [ "$code" = 200 ] && [ "$got" = "$want" ] && [ "$(py "d['object'] + ' ' + d['choices'][0]['finish_reason']")" = "text_completion length" ] \
  && [ "$(py "[d['usage'][k] for k in ('prompt_tokens', 'completion_tokens', 'total_tokens')]")" = "[5, 30, 35]" ] \
  && [[ $(py "d['id']") == cmpl-* ]]; then
  ok "completion: txc generate's text, finish_reason length, usage 5 + 30"
else
  bad "completion: $code '$got' vs '$want': $(cat "$tmp/body")"
fi
# the prompt as token ids (txc tokenize's, BOS included): the same text
ids=$("$TXC" tokenize --model "$MODEL" --ids "Once upon a time" 2>/dev/null | tr ' ' ',')
req POST /v1/completions "{\"prompt\": [$ids], \"max_tokens\": 30, \"temperature\": 0}"
[ "$code" = 200 ] && [ "$(py "d['choices'][0]['text']")" = "$want" ] && ok "prompt as token ids [$ids]: the same text" \
  || bad "prompt ids [$ids]: $code $(cat "$tmp/body")"
# streamed: the deltas make the same text; usage last; then [DONE]
curl -sN -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/completions" \
  -d '{"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}' >"$tmp/sse"
stream_check='
import json, sys
events = open(sys.argv[1]).read().split("\n\n")
assert events[-1] == "", "no blank line at the end"
events = events[:-1]
assert all(e.startswith("data: ") for e in events), "not SSE data lines"
assert events[-1] == "data: [DONE]", "no [DONE]"
chunks = [json.loads(e[6:]) for e in events[:-1]]
usage = chunks[-1]
assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == int(sys.argv[3]), usage
body = chunks[:-1]
assert all(c["usage"] is None for c in body)
assert all(c["choices"][0]["finish_reason"] is None for c in body[:-1])
assert body[-1]["choices"][0]["finish_reason"] == sys.argv[4], body[-1]
if body[0]["object"] == "chat.completion.chunk":
    assert body[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in body)
else:
    text = "".join(c["choices"][0]["text"] for c in body)
assert len({c["id"] for c in chunks}) == 1
assert text == sys.argv[2], (text, sys.argv[2])
print("ok", len(body))
'
"$PY" -c "$stream_check" "$tmp/sse" "$want" 30 length >"$tmp/chk" 2>&1 \
  && ok "completion streamed: $(cat "$tmp/chk") chunks, the same text, usage then [DONE]" || bad "stream: $(cat "$tmp/chk")"

# --- chat: the template, transformers' first reply ----------------------------------
want_chat=$(head -1 "$FIX/chat_stories260k_mistral.txt")
req POST /v1/chat/completions '{"model": "inst", "messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 24, "temperature": 0}'
if [ "$code" = 200 ] && [ "$(py "d['choices'][0]['message']['content']")" = "$want_chat" ] \
  && [ "$(py "d['object'] + ' ' + d['choices'][0]['message']['role']")" = "chat.completion assistant" ] \
  && [[ $(py "d['id']") == chatcmpl-* ]]; then
  ok "chat: transformers' reply through the template"
else
  bad "chat: $code: $(cat "$tmp/body") (want '$want_chat')"
fi
nchat=$(py "d['usage']['completion_tokens']")
fin=$(py "d['choices'][0]['finish_reason']")
curl -sN -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/chat/completions" \
  -d '{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 24, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}' >"$tmp/sse"
"$PY" -c "$stream_check" "$tmp/sse" "$want_chat" "$nchat" "$fin" >"$tmp/chk" 2>&1 \
  && ok "chat streamed: role first, the same reply, usage, [DONE]" || bad "chat stream: $(cat "$tmp/chk")"
# content as a list of text parts
req POST /v1/chat/completions '{"messages": [{"role": "user", "content": [{"type": "text", "text": "Once upon "}, {"type": "text", "text": "a time"}]}], "max_tokens": 24, "temperature": 0}'
[ "$code" = 200 ] && [ "$(py "d['choices'][0]['message']['content']")" = "$want_chat" ] && ok "chat: content parts joined" \
  || bad "content parts: $code $(cat "$tmp/body")"

# --- stop strings, seeds, logprobs, penalties -----------------------------------------
stop_word=$(printf '%s' "$want" | awk '{print $4}') # a word a few tokens in
req POST /v1/completions "{\"prompt\": \"Once upon a time\", \"max_tokens\": 30, \"temperature\": 0, \"stop\": [\"zzz\", \" $stop_word\"]}"
want_stop=${want%% "$stop_word"*}
[ "$code" = 200 ] && [ "$(py "d['choices'][0]['text']")" = "$want_stop" ] && [ "$(py "d['choices'][0]['finish_reason']")" = stop ] \
  && ok "stop ' $stop_word': the text before it, finish_reason stop" || bad "stop: $(cat "$tmp/body") (want '$want_stop')"
curl -sN -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/completions" \
  -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": 30, \"temperature\": 0, \"stop\": \" $stop_word\", \"stream\": true}" >"$tmp/sse"
"$PY" -c '
import json, sys
ev = [e for e in open(sys.argv[1]).read().split("\n\n") if e]
ch = [json.loads(e[6:]) for e in ev[:-1]]
t = "".join(c["choices"][0]["text"] for c in ch)
assert t == sys.argv[2] and ch[-1]["choices"][0]["finish_reason"] == "stop" and ev[-1] == "data: [DONE]", (t, ch[-1])
' "$tmp/sse" "$want_stop" 2>"$tmp/chk" && ok "stop string streamed: no byte of it sent" || bad "stop streamed: $(cat "$tmp/chk")"
seeded='{"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0.8, "seed": 42}'
req POST /v1/completions "$seeded"
s1=$(py "d['choices'][0]['text']")
req POST /v1/completions "$seeded"
s2=$(py "d['choices'][0]['text']")
[ "$code" = 200 ] && [ "$s1" = "$s2" ] && [ -n "$s1" ] && ok "seed 42 twice: the same text" || bad "seed: '$s1' vs '$s2'"
req POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "temperature": 0, "logprobs": true, "top_logprobs": 3}'
lp=$(py "len(d['choices'][0]['logprobs']['content']) == d['usage']['completion_tokens'] and all(len(t['top_logprobs']) == 3 and t['logprob'] <= 0 and abs(t['top_logprobs'][0]['logprob'] - t['logprob']) < 1e-6 for t in d['choices'][0]['logprobs']['content'])")
[ "$code" = 200 ] && [ "$lp" = True ] && ok "chat logprobs: one per token, 3 top, greedy = the top one" || bad "logprobs: $lp $(cat "$tmp/body")"
req POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "logprobs": 2}'
lp=$(py "len(d['choices'][0]['logprobs']['tokens']) == 5 and all(len(t) == 2 for t in d['choices'][0]['logprobs']['top_logprobs'])")
[ "$code" = 200 ] && [ "$lp" = True ] && ok "completion logprobs: tokens, 2 top each" || bad "completion logprobs: $lp $(cat "$tmp/body")"
req POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0, "frequency_penalty": 2, "presence_penalty": 2}'
pen=$(py "d['choices'][0]['text']")
[ "$code" = 200 ] && [ "$pen" != "$want" ] && ok "frequency/presence penalties change the greedy text" || bad "penalties: $code '$pen'"

# --- errors: status and OpenAI's error object ------------------------------------------
C=/v1/completions
expect_status "bad JSON" 400 "" POST $C '{"prompt": "x",'
expect_status "not an object" 400 "" POST $C '[1, 2]'
expect_status "no prompt" 400 prompt POST $C '{"max_tokens": 3}'
expect_status "max_tokens a string" 400 max_tokens POST $C '{"prompt": "x", "max_tokens": "3"}'
expect_status "max_tokens 0" 400 max_tokens POST $C '{"prompt": "x", "max_tokens": 0}'
expect_status "max_completion_tokens 2.5" 400 max_completion_tokens POST /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 2.5}'
expect_status "temperature 3" 400 temperature POST $C '{"prompt": "x", "temperature": 3}'
expect_status "top_p 1.5" 400 top_p POST $C '{"prompt": "x", "top_p": 1.5}'
expect_status "top_k -1" 400 top_k POST $C '{"prompt": "x", "top_k": -1}'
expect_status "min_p true" 400 min_p POST $C '{"prompt": "x", "min_p": true}'
expect_status "seed a string" 400 seed POST $C '{"prompt": "x", "seed": "7"}'
expect_status "stop 5" 400 stop POST $C '{"prompt": "x", "stop": 5}'
expect_status "stop empty" 400 stop POST $C '{"prompt": "x", "stop": [""]}'
expect_status "presence_penalty 3" 400 presence_penalty POST $C '{"prompt": "x", "presence_penalty": 3}'
expect_status "frequency_penalty -2.5" 400 frequency_penalty POST $C '{"prompt": "x", "frequency_penalty": -2.5}'
expect_status "logprobs 6 (completions)" 400 logprobs POST $C '{"prompt": "x", "logprobs": 6}'
expect_status "top_logprobs 21" 400 top_logprobs POST /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}'
expect_status "top_logprobs without logprobs" 400 top_logprobs POST /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}'
expect_status "stream a string" 400 stream POST $C '{"prompt": "x", "stream": "yes"}'
expect_status "stream_options without stream" 400 stream_options POST $C '{"prompt": "x", "stream_options": {"include_usage": true}}'
expect_status "n 2" 400 n POST $C '{"prompt": "x", "n": 2}'
expect_status "prompt id out of the vocabulary" 400 prompt POST $C '{"prompt": [1, 600]}'
expect_status "two prompts" 400 prompt POST $C '{"prompt": ["a", "b"]}'
expect_status "prompt not UTF-8" 400 prompt POST $C "$(printf '{"prompt": "\xff\xfe"}')"
expect_status "message not UTF-8" 400 "messages[0]" POST /v1/chat/completions "$(printf '{"messages": [{"role": "user", "content": "\xc0\xaf"}]}')"
expect_status "a NUL in a string" 400 "" POST $C '{"prompt": "a\u0000b"}'
expect_status "no messages" 400 messages POST /v1/chat/completions '{"messages": []}'
expect_status "message without role" 400 "messages[1].role" POST /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}, {"content": "y"}]}'
expect_status "message content 5" 400 "messages[0].content" POST /v1/chat/completions '{"messages": [{"role": "user", "content": 5}]}'
expect_status "template refuses the roles" 400 messages POST /v1/chat/completions '{"messages": [{"role": "assistant", "content": "x"}]}'
long=$(python3 -c 'print(" ".join(["time"] * 400))')
expect_status "prompt longer than the context" 400 prompt POST $C "{\"prompt\": \"$long\"}"
grep -q "maximum context length is 256 tokens; the prompt has 40[0-9] tokens" "$tmp/body" \
  && ok "prompt too long: the message names both numbers" || bad "too long: $(cat "$tmp/body")"
expect_status "unknown model" 404 model POST $C '{"model": "gpt-4", "prompt": "x"}'
[ "$(py "d['error']['code']")" = model_not_found ] && ok "unknown model: code model_not_found" || bad "model code: $(cat "$tmp/body")"
expect_status "unknown route" 404 "" GET /v1/nothing
expect_status "GET on a POST route" 405 "" GET $C
expect_status "POST on a GET route" 405 "" POST /health '{}'
head -c 9000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $KEY" --data-binary @"$tmp/big" "http://127.0.0.1:$PORT$C")
[ "$code" = 413 ] && [ "$(py "d['error']['type']")" = invalid_request_error ] && ok "9 MB body: 413" || bad "413: $code"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -d '{"prompt": "x"}' "http://127.0.0.1:$PORT$C")
[ "$code" = 401 ] && [ "$(py "d['error']['code']")" = invalid_api_key ] && ok "no API key: 401" || bad "401: $code $(cat "$tmp/body")"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer wrong" "http://127.0.0.1:$PORT/v1/models")
[ "$code" = 401 ] && ok "wrong API key: 401" || bad "wrong key: $code"

# --- /metrics ------------------------------------------------------------------------------
req GET /metrics
for m in 'txc_requests_total{endpoint="/v1/completions"} [1-9]' 'txc_http_responses_total{code="400"} [1-9]' \
  'txc_completion_tokens_total [1-9]' 'txc_queue_depth 0' 'txc_slots_busy 0' 'txc_slots_total 4' \
  'txc_decode_tokens_per_second [0-9]' '# TYPE txc_prefill_tokens_per_second gauge'; do
  grep -q "^$m" "$tmp/body" && ok "/metrics: $m" || bad "/metrics: no '$m': $(head -c 600 "$tmp/body")"
done

# a client that sends half a request and stalls is closed after --timeout (2 s here)
"$PY" -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
t0 = time.monotonic()
s.settimeout(20)
data = s.recv(100)
dt = time.monotonic() - t0
assert data == b"" and 1.5 < dt < 6, (data, dt)
print("%.1f" % dt)
' "$PORT" >"$tmp/idle" 2>&1 && ok "a stalled client: closed after $(cat "$tmp/idle") s (--timeout 2)" || bad "idle timeout: $(cat "$tmp/idle")"
serve_stop_ok main

# --- a full queue: 503; a client gone mid-stream; SIGTERM while a stream runs ------------
# Eager (--no-jit) and 500 tokens: a stream long enough to act on while it
# runs; 2 threads: the pool's workers must not take the signal.
serve_start small --model "$MODEL" --parallel 1 --max-queue 0 --threads 2 --no-jit --verbose || exit 1
long='{"prompt": "Once upon a time", "max_tokens": 500, "temperature": 0, "stream": true}'
expect_status "no chat template" 400 messages POST /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}]}'
req POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0}'
alone=$(py "d['choices'][0]['text']")
# a client that reads the first event and leaves
"$PY" -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
c.request("POST", "/v1/completions", body=sys.argv[2])
r = c.getresponse()
assert r.status == 200 and r.readline().startswith(b"data: ")
c.sock.close()
' "$PORT" "$long" || bad "the cut client"
freed=no
for _ in $(seq 1 100); do
  req GET /metrics
  grep -q '^txc_requests_cancelled_total 1$' "$tmp/body" && grep -q '^txc_slots_busy 0$' "$tmp/body" && { freed=yes; break; }
  sleep 0.02
done
n_cut=$(sed -n 's/.*: 5 prompt + \([0-9]*\) completion tokens.*(cancelled by the client)$/\1/p' "$tmp/small.err")
[ $freed = yes ] && [ -n "$n_cut" ] && [ "$n_cut" -lt 500 ] && ok "client gone mid-stream: cancelled after $n_cut of 500 tokens, slot free" \
  || bad "disconnect: '$n_cut' $(grep -E 'cancelled|busy' "$tmp/body") $(tail -3 "$tmp/small.err")"
req POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0}'
[ "$(py "d['choices'][0]['text']")" = "$alone" ] && ok "after the disconnect: the same greedy text" || bad "after disconnect: $(cat "$tmp/body")"
# 8 requests at once for 1 slot and no queue: the first is served, the others that
# arrive while it runs get 503 with code queue_full
qpids=()
for i in 1 2 3 4 5 6 7 8; do
  curl -s -o "$tmp/q$i" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" \
    -d '{"prompt": "Once upon a time", "max_tokens": 300, "temperature": 0}' >"$tmp/qc$i" &
  qpids+=($!)
done
wait "${qpids[@]}"
n200=$(cat "$tmp"/qc* | grep -o 200 | wc -l)
n503=$(cat "$tmp"/qc* | grep -o 503 | wc -l)
full=$(grep -l '"code":"queue_full"' "$tmp"/q[1-8] | wc -l)
[ "$n200" -ge 1 ] && [ "$n503" -ge 1 ] && [ $((n200 + n503)) -eq 8 ] && [ "$full" -eq "$n503" ] \
  && ok "1 slot, --max-queue 0, 8 at once: $n200 served, $n503 x 503 queue_full" \
  || bad "queue full: $n200 x 200, $n503 x 503, $full queue_full: $(cat "$tmp"/q1)"
curl -sN "http://127.0.0.1:$PORT/v1/completions" -d "$long" >"$tmp/long" &
cpid=$!
for _ in $(seq 1 500); do [ -s "$tmp/long" ] && break; sleep 0.01; done
serve_stop_ok small
wait "$cpid"
tail -c 200 "$tmp/long" | grep -q 'data: \[DONE\]' && ok "the running stream ended with [DONE] at the stop" \
  || bad "stream at stop: $(tail -c 300 "$tmp/long")"

# --- bad command lines ------------------------------------------------------------------------
expect_error "--parallel 0" "--parallel" "$TXC" serve --parallel 0
expect_error "--parallel 33" "--parallel must be at most 32" "$TXC" serve --parallel 33
expect_error "--port 70000" "--port" "$TXC" serve --port 70000
expect_error "--host nonsense" "--host" "$TXC" serve --model "$MODEL" --host nonsense --port 0
expect_error "unknown option" "unknown" "$TXC" serve --bogus
expect_error "--timeout 0" "--timeout" "$TXC" serve --timeout 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
