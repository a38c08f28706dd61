#!/usr/bin/env python3
"""Reference multi-turn chats for tests/test_chat_session.c and tests/cli_chat.sh.

Needs: python3 -m pip install torch transformers tokenizers jinja2
Run:   python3 scripts/gen_chat_fixtures.py [SHARED_DIR]
       (SHARED_DIR defaults to ../shared beside the checkout)
Writes tests/fixtures/chat_stories260k.json and, for each chat, the
expected stdout of `txc chat` (tests/fixtures/chat_stories260k_<name>.txt).

stories260K (a real trained Llama) has no chat template: each chat gives it
one (TinyLlama's tokenizer_config.json, or Mistral-7B-Instruct-v0.1's
template, which writes BOS). Every turn, as txc chat does it:
  text   = tokenizer.apply_chat_template(conversation, tokenize=False,
                                         add_generation_prompt=True)
  ids    = tokenizer.json's encode(text, add_special_tokens=False) (the
           `tokenizers` package, which txc follows; transformers 5 rebuilds
           Llama-2-style tokenizers and can differ after special tokens)
  new    = LlamaForCausalLM.generate(ids, greedy, max_new_tokens,
           eos_token_id from generation_config.json), a fresh run; the same
           run reusing the previous turn's DynamicCache
           (generate(past_key_values=...)) is checked to agree
  reply  = decode(new, skip_special_tokens=True), the assistant message of
           the next turn.
"""
import copy
import json
import os
import shutil
import sys
import tempfile

import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer, DynamicCache, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared")
MODEL = os.path.join(SHARED, "models", "stories260K")
OUT = os.path.join(ROOT, "tests", "fixtures")
MAX_NEW = 24

# The template of Mistral-7B-Instruct-v0.1 (writes bos_token once).
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}\n"
)

CHATS = [
    ("tinyllama", None, ["Once upon a time", "Lily and Ben went to the park.", "The dog said"]),
    ("mistral", MISTRAL, ["Once upon a time", "Lily and Ben", "The end"]),
]


def model_folder(tmp, name, template):
    d = os.path.join(tmp, name)
    os.mkdir(d)
    for f in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(os.path.join(MODEL, f), os.path.join(d, f))
    if template is None:
        shutil.copy(os.path.join(SHARED, "tokenizers", "tinyllama-1.1b-chat-v1.0", "tokenizer_config.json"), d)
    else:
        shutil.copy(os.path.join(MODEL, "tokenizer_config.json"), d)
        with open(os.path.join(d, "chat_template.jinja"), "w") as f:
            f.write(template)
    return d


def main():
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32).eval()
    crate = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    with open(os.path.join(MODEL, "generation_config.json")) as f:
        eos = json.load(f)["eos_token_id"]
    out = {"model": "stories260K", "max_new_tokens": MAX_NEW, "chats": []}
    tmp = tempfile.mkdtemp()
    try:
        for name, template, users in CHATS:
            tok = AutoTokenizer.from_pretrained(model_folder(tmp, name, template))
            conv, turns, stdout = [], [], ""
            cache = DynamicCache()
            for user in users:
                conv.append({"role": "user", "content": user})
                text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
                ids = crate.encode(text, add_special_tokens=False).ids
                inp = torch.tensor([ids])
                kw = dict(max_new_tokens=MAX_NEW, do_sample=False, eos_token_id=eos, pad_token_id=0)
                with torch.no_grad():
                    fresh = model.generate(inp, **kw)[0, len(ids):].tolist()
                    reused = model.generate(inp, past_key_values=cache, **kw)
                cache_len = cache.get_seq_length()
                assert reused[0, len(ids):].tolist() == fresh, (name, user)
                reply = crate.decode(fresh, skip_special_tokens=True)
                turns.append({"user": user, "prompt": text, "prompt_ids": ids, "new_ids": fresh,
                              "reply": reply, "cache_after": cache_len})
                conv.append({"role": "assistant", "content": reply})
                stdout += reply + "\n"
            out["chats"].append({"name": name, "turns": turns})
            with open(os.path.join(OUT, "chat_stories260k_%s.txt" % name), "w") as f:
                f.write(stdout)
    finally:
        shutil.rmtree(tmp)
    with open(os.path.join(OUT, "chat_stories260k.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
