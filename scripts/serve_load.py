#!/usr/bin/env python3
"""A load test of a running `txc serve` (loopback only; Python's standard
library, no packages): REQUESTS requests from CLIENTS concurrent clients, a
mix of well-formed completions and chats (plain and streamed, greedy and
seeded), streams the client cancels after a few chunks, and malformed
requests (bad JSON, bad fields, truncated bodies, garbage that is not
HTTP). Every well-formed greedy or seeded request must get exactly the text
it gets alone (batch invariance: the references are taken first, one
request at a time), every malformed one a 4xx with OpenAI's error object,
and at the end the server must have every slot free and an empty queue.

    serve_load.py --port PORT [--requests 1000] [--clients 16] [--seed 1]
                  [--chat] [--deadline 600]

Exit status 0 when every check holds; 1 otherwise (the failures printed).
"""
import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time

PROMPTS = ["Once upon a time", "Lily and Ben went to the park.", "The dog said", "One day, a little girl",
           "Tom had a red ball", "The sun was hot and", "Sara liked to", "There was a big tree",
           "Mom said no", "The cat and the bird"]

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--requests", type=int, default=1000)
p.add_argument("--clients", type=int, default=16)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--chat", action="store_true", help="the model has a chat template: chats too")
p.add_argument("--deadline", type=float, default=600, help="seconds for the whole run")
p.add_argument("--max-tokens", type=int, default=40)
p.add_argument("--api-key", default=None)
args = p.parse_args()
HOST = "127.0.0.1"
rng = random.Random(args.seed)
t_end = time.monotonic() + args.deadline
headers = {"Content-Type": "application/json"}
if args.api_key:
    headers["Authorization"] = "Bearer " + args.api_key


def connect():
    return http.client.HTTPConnection(HOST, args.port, timeout=max(5.0, min(120.0, t_end - time.monotonic())))


def post(path, body):
    """status, parsed JSON (or None)"""
    c = connect()
    try:
        c.request("POST", path, body=body if isinstance(body, bytes) else json.dumps(body).encode(), headers=headers)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, None
    finally:
        c.close()


def stream(path, body, cancel_after=None):
    """status, text of the deltas, finish_reason, saw [DONE]; closes after cancel_after chunks"""
    c = connect()
    try:
        c.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        r = c.getresponse()
        if r.status != 200:
            r.read()
            return r.status, None, None, False
        text, finish, done, n = "", None, False, 0
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            assert line.startswith(b"data: "), line
            payload = line[6:]
            if payload == b"[DONE]":
                done = True
                break
            ev = json.loads(payload)
            if "error" in ev:
                return 500, None, None, False
            for ch in ev["choices"]:
                text += ch["delta"].get("content") or "" if "delta" in ch else ch["text"]
                finish = ch.get("finish_reason") or finish
            n += 1
            if cancel_after is not None and n >= cancel_after:
                return 200, text, "cancelled", False
        return r.status, text, finish, done
    finally:
        c.close()


def well_formed(i):
    """a request that has a reference answer: (path, body)"""
    prompt = PROMPTS[i % len(PROMPTS)]
    max_tokens = 8 + (i * 7) % args.max_tokens
    seeded = i % 3 == 0
    body = {"max_tokens": max_tokens, "temperature": 0.8 if seeded else 0}
    if seeded:
        body["seed"] = 1000 + i % 5
    if args.chat and i % 4 == 1:
        body["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    return "/v1/completions", body


def text_of(d):
    ch = d["choices"][0]
    return ch["message"]["content"] if "message" in ch else ch["text"]


MALFORMED = [
    b'{"prompt": "x",', b"[]", b"null", b'{"prompt": 5}', b'{"prompt": "x", "max_tokens": -1}',
    b'{"prompt": "x", "temperature": "hot"}', b'{"prompt": "x", "top_p": 7}', b'{"prompt": "x", "stop": [1]}',
    b'{"prompt": "x", "n": 3}', b'{"prompt": [99999]}', b'{"prompt": "x", "max_tokens": 1e300}',
    b'{"messages": "hi"}', b'{"messages": [{"role": 1}]}', b"\xff\xfe\x00garbage", b'{"prompt": "\\ud800"}',
    b'{"prompt": "x", "stream": 1}', b'{"prompt": "x", "logprobs": 99}', b'{"prompt": "x", "seed": 1.5}',
    b'{"model": "other", "prompt": "x"}', b'{"prompt": "x", "stream_options": 3, "stream": true}',
    b'{"prompt": "\xff\xfe"}', b'{"messages": [{"role": "user", "content": "\xc0\xaf"}]}',
    b'{"prompt": "a\\u0000b", "max_tokens": 2, "stop": "\xff"}',
]


def raw_garbage():
    """bytes that are not HTTP, or an HTTP request cut short: the server closes or answers 4xx"""
    s = socket.create_connection((HOST, args.port), timeout=10)
    try:
        kind = rng.randrange(3)
        if kind == 0:
            s.sendall(bytes(rng.randrange(256) for _ in range(200)) + b"\r\n\r\n")
        elif kind == 1:  # a body shorter than its Content-Length, then the client leaves
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
        else:  # an absurd header line
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n")
        s.settimeout(10)
        try:
            data = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            data = b""
        return data
    finally:
        s.close()


# ---- references: each well-formed request alone ------------------------------------
n_ref = min(args.requests, 60)
refs = {}
for i in range(n_ref):
    path, body = well_formed(i)
    key = json.dumps([path, body], sort_keys=True)
    if key in refs:
        continue
    st, d = post(path, body)
    if st != 200:
        print(f"FAIL - reference {path} {body}: {st} {d}")
        sys.exit(1)
    refs[key] = text_of(d)
print(f"{len(refs)} references taken alone")

# ---- the load -------------------------------------------------------------------------
lock = threading.Lock()
counts = {"ok": 0, "stream_ok": 0, "cancelled": 0, "malformed_ok": 0, "garbage": 0}
failures = []
next_i = [0]
plan = []
for i in range(args.requests):
    x = rng.random()
    kind = "plain" if x < 0.4 else "stream" if x < 0.7 else "cancel" if x < 0.8 else "malformed" if x < 0.95 \
        else "garbage"
    plan.append((kind, rng.randrange(n_ref), rng.randrange(1, 4), rng.randrange(len(MALFORMED))))


def fail(msg):
    with lock:
        failures.append(msg)


def worker():
    while True:
        with lock:
            if next_i[0] >= len(plan) or time.monotonic() > t_end:
                return
            i = next_i[0]
            next_i[0] += 1
        kind, ref_i, cut, mal = plan[i]
        try:
            if kind in ("plain", "stream", "cancel"):
                path, body = well_formed(ref_i)
                want = refs[json.dumps([path, body], sort_keys=True)]
                if kind == "plain":
                    st, d = post(path, body)
                    if st != 200 or text_of(d) != want:
                        fail(f"request {i} {path} {body}: {st} {d and text_of(d)!r} != {want!r}")
                    else:
                        with lock:
                            counts["ok"] += 1
                else:
                    body = dict(body, stream=True)
                    st, text, finish, done = stream(path, body, cut if kind == "cancel" else None)
                    if kind == "cancel":
                        if st != 200 or not want.startswith(text):
                            fail(f"request {i} (cancelled) {body}: {st} {text!r} not a prefix of {want!r}")
                        else:
                            with lock:
                                counts["cancelled"] += 1
                    elif st != 200 or text != want or not done or finish not in ("stop", "length"):
                        fail(f"request {i} (streamed) {body}: {st} {text!r} != {want!r}, done {done}")
                    else:
                        with lock:
                            counts["stream_ok"] += 1
            elif kind == "malformed":
                path = "/v1/chat/completions" if MALFORMED[mal].startswith(b'{"messages"') else "/v1/completions"
                st, d = post(path, MALFORMED[mal])
                if not (400 <= st < 500 and d and "error" in d and d["error"]["message"]):
                    fail(f"request {i} malformed {MALFORMED[mal]!r}: {st} {d}")
                else:
                    with lock:
                        counts["malformed_ok"] += 1
            else:
                data = raw_garbage()
                if data and not (data.startswith(b"HTTP/1.1 4") or data.startswith(b"HTTP/1.0 4")):
                    fail(f"request {i} garbage: answered {data[:40]!r}")
                else:
                    with lock:
                        counts["garbage"] += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported
            fail(f"request {i} ({kind}): {type(e).__name__}: {e}")


t0 = time.monotonic()
threads = [threading.Thread(target=worker) for _ in range(args.clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - t0
done = sum(counts.values()) + len(failures)
print(f"{done} requests in {elapsed:.1f} s at {args.clients} clients: {counts}, {len(failures)} failures")
if done < args.requests:
    failures.append(f"only {done} of {args.requests} requests ran before the deadline")

# ---- after: every slot free, the queue empty, the server alive --------------------------
idle = False
for _ in range(100):
    c = connect()
    c.request("GET", "/metrics", headers=headers)
    m = c.getresponse().read().decode()
    c.close()
    if "\ntxc_slots_busy 0\n" in m and "\ntxc_queue_depth 0\n" in m:
        idle = True
        break
    time.sleep(0.05)
if not idle:
    failures.append("slots still busy after the load:\n" + m)
for f in failures[:20]:
    print("FAIL -", f)
sys.exit(1 if failures else 0)
