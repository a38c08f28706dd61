#!/usr/bin/env bash
# txc serve as a new OpenAI-API user meets it: one server-sent event per
# generated token (not what piled up since the last write), a temperature
# too small to divide float32 logits by (OpenAI's range allows it: greedy,
# its limit, never an error after a stream's 200), error objects that are
# UTF-8 JSON when the request's bytes are not (a URL, a model name), and
# GET /v1/models/{model} (the openai client's models.retrieve), a request
# that must arrive whole within --timeout (a client trickling a byte at a
# time is closed), a request head over 64 KiB (OpenAI's error object with
# 431, not libmicrohttpd's HTML page), messages without content (a 400 as
# OpenAI's, but for an assistant's tool calls, which are refused), and a
# note for the compile-cache flags the batch does not use. The servers listen on 127.0.0.1 on a free port (--port 0).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
tmp=$(mktemp -d)
PID=
trap 'serve_kill_all; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad
. "$(dirname "$0")/lib_serve.sh" # serve_start, serve_stop_ok

# stories260K with Mistral-Instruct's template beside its files (as tests/cli_serve.sh)
model_links "$tmp/stories260K"
mistral_template "$tmp/stories260K"
serve_start main --model "$tmp/stories260K" --parallel 2 --max-cache-len 256 --no-compile-cache || exit 1
U=http://127.0.0.1:$PORT
# py FILE EXPR: EXPR over the JSON text of FILE decoded as UTF-8 (strictly)
py() { python3 -c 'import json,sys; d=json.loads(open(sys.argv[1], "rb").read().decode("utf-8")); print(eval(sys.argv[2]))' "$1" "$2" 2>&1; }

# --- one event per token ----------------------------------------------------------------
# With logprobs every token is an event of its own (an EOS adds no text but
# has its logprob); without, every token that adds text is; then the
# finish_reason chunk, the usage chunk, [DONE].
for n in 40 100; do
  for lp in '"logprobs": 0,' ''; do
    curl -sN "$U/v1/completions" -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": $n, \"temperature\": 0, \"ignore_eos\": true,
      $lp \"stream\": true, \"stream_options\": {\"include_usage\": true}}" >"$tmp/sse${lp:+-lp}"
  done
  got=$(python3 -c '
import json, sys
def events(f):
    ev = [json.loads(e[6:]) for e in open(f).read().split("\n\n") if e.startswith("data: {")]
    assert ev[-1]["choices"] == [] and ev[-2]["choices"][0]["finish_reason"] == "length"
    assert ev[-2]["choices"][0]["text"] == "", ev[-2]
    return ev[-1]["usage"]["completion_tokens"], [c["choices"][0] for c in ev[:-2]]
n, lp = events(sys.argv[1] + "-lp")
m, plain = events(sys.argv[1])
assert all(c["finish_reason"] is None for c in lp + plain)
assert all(len(c["logprobs"]["tokens"]) == 1 for c in lp), "an event with several tokens"
pieces = [c["logprobs"]["tokens"][0] for c in lp]
assert [c["text"] for c in lp] == pieces
assert [c["text"] for c in plain] == [p for p in pieces if p], "not one event per token that adds text"
print(n, m, len(lp))
' "$tmp/sse" 2>&1)
  [ "$got" = "$n $n $n" ] && ok "$n tokens streamed: $n events (logprobs), one per token that adds text (plain)" \
    || bad "$n tokens streamed: $got"
done
curl -sN "$U/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12, "temperature": 0,
  "ignore_eos": true, "stream": true, "logprobs": true}' >"$tmp/sse"
got=$(python3 -c '
import json, sys
ev = [json.loads(e[6:]) for e in open(sys.argv[1]).read().split("\n\n") if e.startswith("data: {")]
tok = [c for c in ev if c["choices"][0]["finish_reason"] is None]
print(len(tok), all(len(c["choices"][0]["logprobs"]["content"]) == 1 for c in tok), ev[0]["choices"][0]["delta"]["role"])
' "$tmp/sse" 2>&1)
[ "$got" = "12 True assistant" ] && ok "chat, 12 tokens streamed with logprobs: 12 events of one token each" \
  || bad "chat stream events: $got"

# --- a temperature below 1e-30: greedy ------------------------------------------------------
greedy=$(curl -s "$U/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}')
printf '%s' "$greedy" >"$tmp/g"
want=$(py "$tmp/g" "d['choices'][0]['text']")
for t in 1e-320 1e-31; do
  code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/completions" -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": $t, \"seed\": 1}")
  [ "$code" = 200 ] && [ "$(py "$tmp/b" "d['choices'][0]['text']")" = "$want" ] && ok "temperature $t: greedy's text" \
    || bad "temperature $t: $code $(cat "$tmp/b")"
  curl -sN "$U/v1/completions" -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": $t, \"stream\": true}" >"$tmp/sse"
  got=$(python3 -c '
import json, sys
ev = [json.loads(e[6:]) for e in open(sys.argv[1]).read().split("\n\n") if e.startswith("data: {")]
print("error" if any("error" in c for c in ev) else "".join(c["choices"][0]["text"] for c in ev))' "$tmp/sse")
  [ "$got" = "$want" ] && ok "temperature $t streamed: greedy's text, no error event" || bad "temperature $t streamed: '$got'"
done

# --- error objects are UTF-8 JSON ------------------------------------------------------------
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/%ff%fe/x")
got=$(py "$tmp/b" "d['error']['code'] + ' ' + d['error']['message']")
[ "$code" = 404 ] && [[ $got == "unknown_url Unknown request URL: GET /v1/"$'\xef\xbf\xbd\xef\xbf\xbd'"/x" ]] \
  && ok "unknown URL with bytes that are not UTF-8: 404, U+FFFD in the message" || bad "non-UTF-8 URL: $code $got"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/completions" --data-binary $'{"model": "m\xff", "prompt": "x"}')
[ "$code" = 400 ] && [ "$(py "$tmp/b" "d['error']['param']")" = model ] && ok "model name not UTF-8: 400, param model" \
  || bad "non-UTF-8 model: $code $(py "$tmp/b" d)"
long=$(python3 -c 'print("\u00e9" * 300)') # a 2-byte character cut by the message's %.200s
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/completions" -d "{\"model\": \"x$long\", \"prompt\": \"x\"}")
[ "$code" = 404 ] && [[ $(py "$tmp/b" "d['error']['code']") == model_not_found ]] \
  && ok "a long model name cut in a character: 404, the message UTF-8" || bad "cut model name: $code $(py "$tmp/b" d)"

# --- fields that would change the output and are not implemented: 400 naming them ---------
for f in '"logit_bias": {"50": 100}|logit_bias' '"response_format": {"type": "json_object"}|response_format' \
  '"tools": [{"type": "function", "function": {"name": "f"}}]|tools' '"functions": [{"name": "f"}]|functions'; do
  code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/chat/completions" \
    -d "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 2, ${f%|*}}")
  [ "$code" = 400 ] && [ "$(py "$tmp/b" "d['error']['param']")" = "${f#*|}" ] && ok "${f#*|} given: 400 naming it" \
    || bad "${f#*|}: $code $(cat "$tmp/b")"
done
for f in '"logit_bias": {}' '"response_format": {"type": "text"}' '"tools": []' '"logit_bias": null' '"user": "u1"'; do
  code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/chat/completions" \
    -d "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 2, $f}")
  [ "$code" = 200 ] && ok "$f: accepted (changes nothing)" || bad "$f: $code $(cat "$tmp/b")"
done

# --- GET /v1/models/{model} ------------------------------------------------------------------
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/models/stories260K")
[ "$code" = 200 ] && [ "$(py "$tmp/b" "d['id'] + ' ' + d['object']")" = "stories260K model" ] && ok "GET /v1/models/stories260K" \
  || bad "models/ID: $code $(cat "$tmp/b")"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/models/gpt-4")
[ "$code" = 404 ] && [ "$(py "$tmp/b" "d['error']['code'] + ' ' + d['error']['param']")" = "model_not_found model" ] \
  && ok "GET /v1/models/gpt-4: 404 model_not_found" || bad "models/other: $code $(cat "$tmp/b")"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' -X DELETE "$U/v1/models/stories260K")
[ "$code" = 405 ] && ok "DELETE /v1/models/stories260K: 405" || bad "DELETE models/ID: $code"

# --- an integer past int64's range is out of range, not "not an integer" ------------------------
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/completions" -d '{"prompt": "x", "max_tokens": 1, "seed": 18446744073709551615}')
[ "$code" = 400 ] && py "$tmp/b" "d['error']['message']" | grep -q "'seed' must be in \\[" \
  && ok "seed 2^64-1: 400, out of range" || bad "seed 2^64-1: $code $(cat "$tmp/b")"

# --- a request head over the limit (64 KiB): a JSON 431, not the HTTP library's page ------------
big=$(python3 -c 'print("a" * 70000)')
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/completions" -H "X-Big: $big" -d '{"prompt": "x", "max_tokens": 1}')
[ "$code" = 431 ] && [ "$(py "$tmp/b" "d['error']['code'] + ' ' + d['error']['type']")" = \
  "request_header_fields_too_large invalid_request_error" ] && ok "a 70 KB header: 431, OpenAI's error object" \
  || bad "70 KB header: $code $(head -c 300 "$tmp/b")"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/models?q=$big")
[ "$code" = 431 ] && [ "$(py "$tmp/b" "d['error']['code']")" = request_header_fields_too_large ] \
  && ok "a 70 KB query string: 431, OpenAI's error object" || bad "70 KB query: $code $(head -c 300 "$tmp/b")"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/completions" -H "X-Big: ${big:0:8000}" \
  -d '{"prompt": "x", "max_tokens": 1}')
[ "$code" = 200 ] && ok "an 8 KB header: 200" || bad "8 KB header: $code $(head -c 300 "$tmp/b")"

# --- a message's content: required, but for an assistant message with tool calls (which are refused) ---
for m in '[{"role": "user"}]|messages[0].content|missing_required_parameter' \
  '[{"role": "user", "content": null}]|messages[0].content|None' \
  '[{"role": "system"}, {"role": "user", "content": "Hi"}]|messages[0].content|missing_required_parameter' \
  '[{"role": "user", "content": "Hi"}, {"role": "assistant"}, {"role": "user", "content": "Hi"}]|messages[1].content|missing_required_parameter' \
  '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "1"}]|messages[1].tool_calls|None'; do
  IFS='|' read -r msgs param ecode <<<"$m"
  code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/chat/completions" -d "{\"messages\": $msgs, \"max_tokens\": 2}")
  [ "$code" = 400 ] && [ "$(py "$tmp/b" "d['error']['param'] + ' ' + str(d['error']['code'])")" = "$param $ecode" ] \
    && ok "messages $msgs: 400, param $param" || bad "messages $msgs: $code $(cat "$tmp/b")"
done
for msgs in '[{"role": "user", "content": ""}]' \
  '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "", "tool_calls": []}, {"role": "user", "content": "Hi"}]'; do
  code=$(curl -s -o "$tmp/b" -w '%{http_code}' "$U/v1/chat/completions" -d "{\"messages\": $msgs, \"max_tokens\": 2}")
  [ "$code" = 200 ] && ok "messages $msgs: 200" || bad "messages $msgs: $code $(cat "$tmp/b")"
done
serve_stop_ok main

# --- a request must arrive whole within --timeout: a client that trickles bytes is closed ----
serve_start slow --model "$MODEL" --timeout 2 --no-compile-cache || exit 1
python3 - "$PORT" >"$tmp/slow" 2>&1 <<'PY'
import json, socket, sys, time
port = int(sys.argv[1])
def trickle(req, gap):
    # one byte every `gap` s (each well inside the idle timeout): when is it closed?
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    try:
        for ch in req:
            s.sendall(bytes([ch]))
            time.sleep(gap)
            if time.monotonic() - t0 > 15:
                return "open after 15 s"
        return "answered"
    except OSError:
        return "closed %.1f" % (time.monotonic() - t0)
a = trickle(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100, 0.2)
body = json.dumps({"prompt": "x" * 120, "max_tokens": 2}).encode()
b = trickle(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body, 0.1)
for r in (a, b):
    assert r.startswith("closed") and 1.5 < float(r.split()[1]) < 4.5, (a, b)
# requests on one kept-alive connection 1.5 s apart: each in time, each answered
s = socket.create_connection(("127.0.0.1", port))
for i in range(3):
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(300).startswith(b"HTTP/1.1 200"), i
    time.sleep(1.5)
print(a, b)
PY
[ $? -eq 0 ] && ok "headers or a body trickled past --timeout 2: closed ($(cat "$tmp/slow") s); kept-alive requests in time answered" \
  || bad "request deadline: $(cat "$tmp/slow")"
serve_stop_ok slow

# --- a stream starved past --timeout (queued behind one busy slot) ends with OpenAI's error event and
# [DONE], not a 200 stream closed with neither: 32 streams of 500 tokens at once for 1 slot (eager, 1
# thread), --timeout 1; the ones served in time are whole; the server still answers after them
serve_start starve --model "$MODEL" --parallel 1 --max-queue 64 --timeout 1 --threads 1 --no-jit --max-cache-len 512 \
  --no-compile-cache || exit 1
python3 - "$PORT" >"$tmp/starve" 2>&1 <<'PY'
import http.client, json, sys, threading
port = int(sys.argv[1])
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": True, "temperature": 0,
                   "stream": True})
out = [None] * 32
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out[i] = (r.status, [l for l in r.read().decode().split("\n") if l])
ts = [threading.Thread(target=one, args=(i,)) for i in range(32)]
for t in ts: t.start()
for t in ts: t.join()
starved = whole = 0
for status, lines in out:
    assert status == 200 and lines and lines[-1] == "data: [DONE]", (status, lines[-3:])
    events = [json.loads(l[6:]) for l in lines[:-1]]
    if "error" in events[-1]:
        e = events[-1]["error"]
        assert e["code"] == "timeout" and e["type"] == "server_error" and "--timeout (1 s)" in e["message"], e
        assert all("error" not in x for x in events[:-1]), events
        starved += 1
    else:
        assert events[-1]["choices"][0]["finish_reason"] == "length", events[-1]
        assert len(events) > 100, len(events)  # (a token that adds no text has no event of its own)
        whole += 1
assert starved > 0 and whole > 0, (starved, whole)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/health")
assert c.getresponse().status == 200
print(starved, whole)
PY
[ $? -eq 0 ] && ok "streams starved past --timeout 1: an error event (503 timeout) then [DONE] ($(cut -d' ' -f1 "$tmp/starve") of 32; $(cut -d' ' -f2 "$tmp/starve") whole)" \
  || bad "starved streams: $(tail -5 "$tmp/starve")"
serve_stop_ok starve

# --- flags the batch does not use are said so, once ----------------------------------------
serve_start cc --model "$MODEL" --compile-cache "$tmp/cc" || exit 1
grep -q "^txc serve: note: --compile-cache and --compile-cache-max-mb are not used here" "$tmp/cc.err" \
  && ok "serve --compile-cache DIR: a note that it is not used" || bad "serve --compile-cache: $(cat "$tmp/cc.err")"
serve_stop_ok cc
printf 'Once upon a time\n' >"$tmp/p.txt"
"$TXC" generate --model "$MODEL" --prompt-file "$tmp/p.txt" --max-new-tokens 3 --compile-cache-max-mb 5 >"$tmp/o" 2>"$tmp/e"
[ $? -eq 0 ] && [ "$(grep -c 'note: --compile-cache' "$tmp/e")" = 1 ] && [ -s "$tmp/o" ] \
  && ok "generate --prompt-file --compile-cache-max-mb: runs, one note" || bad "generate --prompt-file note: $(cat "$tmp/e")"
"$TXC" generate --model "$MODEL" --prompt-file "$tmp/p.txt" --max-new-tokens 3 --no-compile-cache >"$tmp/o" 2>"$tmp/e"
[ $? -eq 0 ] && [ ! -s "$tmp/e" ] && ok "generate --prompt-file --no-compile-cache: no note" || bad "no-compile-cache: $(cat "$tmp/e")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
