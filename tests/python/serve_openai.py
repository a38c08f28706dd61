"""txc serve with the official openai client, unchanged: models, completions
and chat, streaming and not, include_usage, logprobs, and the client's
exceptions for the error statuses. Run by tests/cli_serve_openai.sh:
    serve_openai.py PORT API_KEY MODEL_ID COMPLETION_TEXT CHAT_TEXT
COMPLETION_TEXT: `txc generate --greedy` of "Once upon a time", 30 tokens;
CHAT_TEXT: transformers' greedy reply to "Once upon a time", 24 tokens.
Prints one "ok - ..." line per check; exits 1 on the first failure."""
import sys

import openai
from openai import OpenAI

port, key, model, want_text, want_chat = sys.argv[1:6]
client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=120)


def check(name, cond, detail=""):
    if not cond:
        print(f"FAIL - {name}: {detail}")
        sys.exit(1)
    print(f"ok - {name}")


models = client.models.list()
check("models.list", [m.id for m in models.data] == [model], models)
m = client.models.retrieve(model)
check("models.retrieve", m.id == model and m.object == "model", m)

r = client.completions.create(model=model, prompt="Once upon a time", max_tokens=30, temperature=0)
check("completions.create: txc generate's text", r.choices[0].text == want_text, repr(r.choices[0].text))
check("completions.create: usage and finish_reason",
      r.usage.completion_tokens == 30 and r.usage.total_tokens == r.usage.prompt_tokens + 30
      and r.choices[0].finish_reason == "length" and r.object == "text_completion", r)

text = ""
n = 0
for chunk in client.completions.create(model=model, prompt="Once upon a time", max_tokens=30, temperature=0,
                                       stream=True):
    text += chunk.choices[0].text
    n += 1
check(f"completions stream: {n} chunks, the same text", text == want_text, repr(text))

c = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Once upon a time"}],
                                   max_tokens=24, temperature=0)
check("chat.completions.create: transformers' reply", c.choices[0].message.content == want_chat,
      repr(c.choices[0].message.content))
check("chat: role, object, id", c.choices[0].message.role == "assistant" and c.object == "chat.completion"
      and c.id.startswith("chatcmpl-"), c)

text, usage, roles, finish = "", None, [], None
for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Once upon a time"}],
                                            max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True}):
    if chunk.usage is not None:
        usage = chunk.usage
    for ch in chunk.choices:
        if ch.delta.role:
            roles.append(ch.delta.role)
        text += ch.delta.content or ""
        finish = ch.finish_reason or finish
check("chat stream: the same reply", text == want_chat, repr(text))
check("chat stream: one role, finish_reason, usage last",
      roles == ["assistant"] and finish == c.choices[0].finish_reason
      and usage is not None and usage.completion_tokens == c.usage.completion_tokens, (roles, finish, usage))

lp = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                    temperature=0, logprobs=True, top_logprobs=2)
content = lp.choices[0].logprobs.content
check("chat logprobs", len(content) == lp.usage.completion_tokens
      and all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content), content)

s1 = client.completions.create(model=model, prompt="Lily", max_tokens=20, temperature=0.9, seed=7)
s2 = client.completions.create(model=model, prompt="Lily", max_tokens=20, temperature=0.9, seed=7)
check("seeded sampling: the same text twice", s1.choices[0].text == s2.choices[0].text, (s1, s2))

stopped = client.completions.create(model=model, prompt="Once upon a time", max_tokens=30, temperature=0,
                                    stop=[" was"])
check("stop", stopped.choices[0].text == want_text.split(" was")[0] and stopped.choices[0].finish_reason == "stop",
      stopped)


def raises(name, exc, fn):
    try:
        fn()
    except exc as e:
        check(f"{name}: {exc.__name__} ({e.status_code})", True)
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, f"{type(e).__name__}: {e}")
    check(name, False, "no exception")


raises("temperature 5", openai.BadRequestError,
       lambda: client.completions.create(model=model, prompt="x", temperature=5))
raises("unknown model", openai.NotFoundError, lambda: client.completions.create(model="nope", prompt="x"))
raises("models.retrieve of another model", openai.NotFoundError, lambda: client.models.retrieve("nope"))
bad = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0)
raises("wrong API key", openai.AuthenticationError, lambda: bad.models.list())
raises("prompt longer than the context", openai.BadRequestError,
       lambda: client.completions.create(model=model, prompt="time " * 600))
