"""The prompts and the run options that bench/parity_gguf.py (txc against llama.cpp on one GGUF)
and bench/transformers_gguf_check.py (txc against transformers on the GGUF and its dequantized
folder) share, so that both compare the same continuations."""

from __future__ import annotations

import argparse
from typing import Sequence

# Plain text, one topic each (greedy continuations that are not all the same story).
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little girl who",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "In 1969, the first man to walk on the moon was",
    "Here is a list of fruits: apple, banana,",
    "The quick brown fox",
    "Machine learning is a field of study that",
    "To make a cup of tea, first",
]

# The model's own chat format (ChatML, as SmolLM2's template writes it).
CHAT_PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
]


def add_run_args(ap: argparse.ArgumentParser) -> None:
    """--txc BIN (required), --new-tokens N (32), --threads N (2), --json OUT.json."""
    ap.add_argument("--txc", required=True)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")


def common_prefix(x: Sequence, y: Sequence) -> int:
    """How many leading items (characters, token ids) x and y share."""
    n = 0
    while n < len(x) and n < len(y) and x[n] == y[n]:
        n += 1
    return n
