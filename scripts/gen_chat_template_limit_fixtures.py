#!/usr/bin/env python3
"""Reference renderings for tests/test_chat_template_limits.c, from jinja2.

Templates at the edges of Python's integers (slice and range steps of
-2**63, ranges spanning all of int64) and |unique / |sort on mixed and large
lists, rendered in the environment transformers uses (an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension) with messages=[{"role": "user", "content": "hi"}].
Writes tests/fixtures/chat_template_limits.json: for each case the text, or
the exception's type and message.

Installs nothing itself. Run it from a virtual environment outside the repo:

    python3 -m venv /tmp/j2venv && /tmp/j2venv/bin/pip install jinja2
    /tmp/j2venv/bin/python scripts/gen_chat_template_limit_fixtures.py
"""
import json
import os

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "chat_template_limits.json")

MIN, MAX = "(-9223372036854775807 - 1)", "9223372036854775807"  # -2**63 is no literal
TEMPLATES = [
    ("list slice step -2**63", "{{ [1, 2, 3][::" + MIN + "] }}"),
    ("str slice step -2**63", "{{ 'abc'[::" + MIN + "] }}|{{ 'abc'[1::" + MIN + "] }}|{{ ''[::" + MIN + "] }}"),
    ("range slice step -2**63", "{{ range(10)[::" + MIN + "] }}|{{ range(10)[::" + MIN + "] | list }}"),
    ("list slice step 2**63-1", "{{ [1, 2, 3][::" + MAX + "] }}|{{ [1, 2, 3][" + MIN + ":" + MAX + ":" + MAX + "] }}"),
    ("range over all of int64", "{{ range(-" + MAX + ", " + MAX + ", 4611686018427387904) | list }}"),
    ("range step -2**63", "{{ range(0, -" + MAX + ", " + MIN + ") | list }}|{{ range(" + MAX + ", " + MIN + ", " + MIN + ") | list }}"),
    ("range too long", "{{ range(" + MIN + ", " + MAX + ") | length }}"),
    ("unique of mixed values",
     "{{ [1, 1.0, true, 'a', 'A', 2, (1, 2), (1, 2), none, none, 0.0, -0.0, false, (1, 'a'), (1, 'A')] | unique | list }}"),
    ("unique case_sensitive", "{{ ['a', 'A', 'b', 'B', 'a'] | unique(case_sensitive=true) | list }}"),
    ("unique attribute", "{{ [{'k': 1, 'v': 'x'}, {'k': 2, 'v': 'y'}, {'k': 1, 'v': 'z'}] | unique(attribute='k') | map(attribute='v') | join(',') }}"),
    ("unique of a list of lists", "{{ [[1], [1]] | unique | list }}"),
    ("unique of a tuple holding a dict", "{{ [(1, {}), 2] | unique | list }}"),
    ("unique of 100k", "{{ range(100000) | list | unique | list | length }}|{{ (range(50000) | list + range(50000) | list) | unique | list | length }}"),
    ("sort stable", "{{ ['b', 'A', 'a', 'B', 'c'] | sort }}|{{ ['b', 'A', 'a', 'B', 'c'] | sort(reverse=true) }}|{{ [3, 1.0, 1, true, 2] | sort }}"),
    ("sort attribute", "{{ [{'k': 2, 'v': 'a'}, {'k': 1, 'v': 'b'}, {'k': 2, 'v': 'c'}, {'k': 1, 'v': 'd'}] | sort(attribute='k', reverse=true) | map(attribute='v') | join }}"),
    ("sort of 100k", "{{ (range(100000) | list | sort(reverse=true))[:3] }}|{{ (range(100000) | list | sort)[-2:] }}"),
    ("sort unorderable", "{{ [1, 'a'] | sort }}"),
]


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    cases = []
    for name, src in TEMPLATES:
        case = {"name": name, "template": src}
        try:
            case["expected"] = env.from_string(src).render(messages=[{"role": "user", "content": "hi"}])
        except Exception as e:  # the exception is the reference
            case["error"] = type(e).__name__
            case["message"] = str(e)
        cases.append(case)
    with open(OUT, "w") as f:
        json.dump({"generator": f"jinja2 {jinja2.__version__}", "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
