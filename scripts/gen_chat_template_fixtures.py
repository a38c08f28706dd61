#!/usr/bin/env python3
"""Reference renderings of chat templates for tests/test_chat_template.c.

Needs: python3 -m pip install transformers jinja2   (no torch)
Run:   python3 scripts/gen_chat_template_fixtures.py [SHARED_DIR]
       (SHARED_DIR defaults to ../shared beside the checkout)
Writes tests/fixtures/chat_templates.json:

  "chats": for every tokenizer folder whose tokenizer_config.json has a
    chat_template, a fixed set of conversations rendered with
    tokenizer.apply_chat_template(conv, tokenize=False,
    add_generation_prompt=g, **kwargs): the text, or the exception
    (type and message) when the template rejects the conversation; and
    the ids of apply_chat_template(..., tokenize=True) (the rendered text
    tokenized with add_special_tokens=False), with the tokenizer's BOS.
  "jinja": small templates exercising the Jinja subset, rendered in the
    environment transformers builds (utils.chat_template_utils.
    _compile_jinja_template: ImmutableSandboxedEnvironment, trim_blocks,
    lstrip_blocks, loopcontrols, transformers' tojson), with
    render(messages=, tools=None, documents=None, add_generation_prompt=,
    **vars).

None of these templates calls strftime_now; a template that does (Llama
3.1 reads `date_string` first) gets a fixed date by passing `date_string`
as a variable on both sides (kwargs here, txc_chat_template_set_var_json
in C), never the clock.
"""
import json
import os
import re
import sys

import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import _compile_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared")
OUT = os.path.join(ROOT, "tests", "fixtures", "chat_templates.json")


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    ("system_user", [m("system", "You are a helpful assistant."), m("user", "Hello!")]),
    ("user_only", [m("user", "What is 2+2?")]),
    ("multi_turn", [m("user", "Hi"), m("assistant", "Hello! How can I help?"), m("user", "Tell me a joke.")]),
    ("system_multi_turn", [m("system", "Be brief."), m("user", "Hi"), m("assistant", "Hey."),
                           m("user", "Bye"), m("assistant", "Bye!")]),
    ("unicode", [m("user", "héllo wörld — 日本語 🙂 Ω≈ç√ \u00a0nbsp")]),
    ("newlines", [m("user", "line one\nline two\n\n    indented\n")]),
    ("spaces", [m("system", "  padded system  "), m("user", "   leading and trailing   \n\t")]),
    ("quotes_braces", [m("user", "She said \"hi\" and 'bye' {{ not a tag }} {% nor this %} {# nor #} \\ back\\slash")]),
    ("empty_content", [m("user", "")]),
    ("empty_conversation", []),
    ("non_alternating", [m("user", "one"), m("user", "two")]),
    ("assistant_first", [m("assistant", "I start."), m("user", "ok")]),
    ("thinking", [m("user", "Solve it"), m("assistant", "<think>\nLet me think.\n</think>\n\nThe answer is 4."),
                  m("user", "Thanks")]),
    ("thinking_last", [m("user", "Solve it"), m("assistant", "<think>\nreasoning\n</think>\n\nFour.")]),
    ("tool_turns", [m("user", "Weather?"), m("assistant", "Calling the tool."), m("tool", "sunny"),
                    m("tool", "22C"), m("assistant", "Sunny, 22C."), m("user", "Thanks")]),
    ("multiple_systems", [m("system", "First rule."), m("system", "Second rule."), m("user", "Go")]),
    ("special_token_text", [m("user", "text with <s> and </s> inside")]),
    # a message without a "content" key (an assistant turn of tool calls, as
    # transformers passes it): some templates render it, others fail on it
    ("no_content", [{"role": "user"}]),
    ("assistant_no_content", [m("user", "Weather?"), {"role": "assistant"}, m("user", "Thanks")]),
]
KWARGS = [
    ("", {}),
    ("no_thinking", {"enable_thinking": False}),
]


def render_chat(tok, crate, conv, gen, kwargs):
    try:
        text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen, **kwargs)
    except Exception as e:  # the template rejected the conversation
        return {"error": type(e).__name__, "message": str(e)}
    out = tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen, **kwargs)
    ids = out["input_ids"] if hasattr(out, "keys") else out
    ids = list(ids)
    again = tok(text, add_special_tokens=False)["input_ids"]
    assert again == ids, (conv, text)
    # tokenizer.json run by the `tokenizers` crate, which txc follows. transformers 5
    # rebuilds Llama-2-style tokenizers (LlamaTokenizer: Metaspace prepend_scheme
    # "first", no normalizer) instead of the file's Prepend+Replace normalizer, so
    # its ids can differ after a special token followed by text.
    crate_ids = crate.encode(text, add_special_tokens=False).ids
    out = {"expected": text, "ids": ids}
    if crate_ids != ids:
        out["crate_ids"] = crate_ids  # absent: the same as "ids"
    return out


def chats():
    out = []
    for name in sorted(os.listdir(os.path.join(SHARED, "tokenizers"))):
        folder = os.path.join(SHARED, "tokenizers", name)
        cfg_path = os.path.join(folder, "tokenizer_config.json")
        if not os.path.isfile(cfg_path):
            continue
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        if not cfg.get("chat_template"):
            out.append({"tokenizer": name, "has_template": False})
            continue
        tok = AutoTokenizer.from_pretrained(folder)
        crate = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        cases = []
        for cname, conv in CONVERSATIONS:
            for kname, kwargs in KWARGS:
                if kname and name != "qwen3":
                    continue  # only Qwen3's template reads enable_thinking
                for gen in (False, True):
                    case = {"name": cname + ("/" + kname if kname else ""), "messages": conv,
                            "add_generation_prompt": gen, "kwargs": kwargs}
                    case.update(render_chat(tok, crate, conv, gen, kwargs))
                    cases.append(case)
        out.append({"tokenizer": name, "has_template": True, "bos_token": tok.bos_token,
                    "bos_id": tok.bos_token_id, "cases": cases})
    return out


# (name, template, vars, messages, add_generation_prompt)
JINJA = [
    ("trim_lstrip", "a  {% if true %}\n  b\n{% endif %}\nc", {}),
    ("minus_both", "  {%- if true -%}  x  {%- endif -%}  y", {}),
    ("for_lines", "{% for i in range(3) %}\n  {{ i }}\n{% endfor %}", {}),
    ("plus_control", "x\n  {%+ if true %}y{% endif +%}\nz", {}),
    ("comments", "a\n  {# c #}\nb {#- c -#} d {#+ e +#}\nf", {}),
    ("trailing_newline", "{{ 'x' }}\n{{ 'y' }}\n", {}),
    ("line_starting", "{% if true %}\n    {% if true %}X{% endif %}\n{% endif %}\n  {% if true %}Y{% endif %}", {}),
    ("var_not_lstripped", "a\n    {{ 'x' }}\n    b", {}),
    ("minus_var", "a \n {{- 'x' -}} \n b", {}),
    ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("loop_vars", "{% for x in xs %}{{ loop.index }}/{{ loop.length }}{{ loop.index0 }}{{ loop.revindex }}"
                  "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.previtem }},{% endfor %}",
     {"xs": ["a", "b", "c"]}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for_if", "{% for x in xs if x != 'b' %}{{ loop.index0 }}{{ x }}{{ loop.length }}{% endfor %}",
     {"xs": ["a", "b", "c"]}),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                       "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
                  "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("scope", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"
              "{% if true %}{% set y = 3 %}{% endif %}{{ y }}", {}),
    ("block_set", "{% set s %}  hi {{ 1 + 2 }}\n{% endset %}[{{ s }}]", {}),
    ("block_set_filter", "{% set s | upper | trim %}  abc {% endset %}[{{ s }}]", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('a') }} {{ greet('b', punct='?') }} {{ greet(name='c') }}", {}),
    ("filters_str", "{{ '  x  ' | trim }}|{{ [1,2,3] | length }}|{{ 'abc' | first }}|{{ [1,2] | last }}|"
                    "{{ 'hello world' | upper }}|{{ 'HeLLo' | lower }}|{{ 'hello World' | capitalize }}|"
                    "{{ 'hello big-world x' | title }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'xx' | count }}|"
                    "{{ 'ab-' | trim('-') }}", {}),
    ("tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ s | tojson }}|{{ [1, 2.5, none, true, 1e20] | tojson }}|"
               "{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ {} | tojson(indent=2) }}",
     {"d": {"b": 1, "a": [1, {"c": "x"}], "e": {}, "f": []},
      "s": "é\u2028\x01\t\"\\/<>&'"}),
    ("join_map_select", "{{ xs | join(', ') }}|{{ users | map(attribute='name') | join('/') }}|"
                        "{{ users | selectattr('admin') | map(attribute='name') | list }}|"
                        "{{ users | rejectattr('admin') | list | length }}|{{ nums | select('odd') | list }}|"
                        "{{ users | selectattr('name', 'equalto', 'bob') | list | length }}|"
                        "{{ nums | map('string') | join }}|{{ nums | reject('even') | list }}|"
                        "{{ users | map(attribute='age', default=0) | list }}",
     {"xs": ["a", "b"], "nums": [1, 2, 3, 4],
      "users": [{"name": "al", "admin": True, "age": 3}, {"name": "bob", "admin": False}]}),
    ("default", "{{ missing | default('dflt') }}|{{ '' | default('e', true) }}|{{ none | default('n') }}|"
                "{{ 0 | d('z', true) }}|{{ x | default('no') }}", {"x": "yes"}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}"
                     "{% endfor %}|{{ d.get('b') }}|{{ d.get('zz', 'none!') }}|{{ d.get('zz') }}|{{ d.keys() | list }}|"
                     "{{ d.values() | list }}|{{ d['a'] }}|{{ d.a }}|{% for k in d %}{{ k }}{% endfor %}",
     {"d": {"a": 1, "b": "two"}}),
    ("tests", "{{ x is defined }}{{ y is defined }}{{ none is none }}{{ 's' is string }}{{ d is mapping }}"
              "{{ xs is sequence }}{{ 1 is number }}{{ true is true }}{{ false is false }}{{ 3 is odd }}"
              "{{ 4 is even }}{{ 'a' in 'abc' }}{{ 'z' not in xs }}{{ 2 is divisibleby 2 }}{{ x is not none }}"
              "{{ y is undefined }}{{ xs is iterable }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}"
              "{{ 'x' is in xs }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ d is string }}{{ 'ab' is lower }}",
     {"x": 1, "d": {"k": 1}, "xs": ["x"]}),
    ("operators", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} "
                  "{{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ 1 < 2 < 3 }} {{ 1 == 1.0 }} "
                  "{{ true == 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 1e-5 }} {{ 10 / 4 }} {{ -3 }} "
                  "{{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ [1] + [2] }} {{ 'b' > 'a' }} {{ [1, 2] == [1, 2] }} "
                  "{{ 1 != 2 }} {{ 3 >= 3 }} {{ 1_000 }}", {}),
    ("and_or", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }} {{ not 0 }} {{ not 'a' and 1 }} "
               "{{ 1 and 0 or 2 }}", {}),
    ("inline_if", "{{ 'y' if x else 'n' }}{{ 'y' if not x }}|{{ 'a' if false }}|{{ 1 if x == 1 else 2 if x else 3 }}",
     {"x": 1}),
    ("slicing", "{{ xs[1:] }}{{ xs[::-1] }}{{ xs[-1] }}{{ 'héllo'[1:3] }}{{ 'héllo'[::-1] }}{{ xs[:-1] }}"
                "{{ 'abc'[5:] }}{{ xs[::2] }}{{ 'héllo'[1] }}{{ xs[-5:2] }}{{ xs[5] }}", {"xs": [1, 2, 3]}),
    ("str_methods", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\na'.lstrip('\\n') }}|"
                    "{{ 'a\\n\\n'.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|"
                    "{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aBc'.upper() }}"
                    "{{ 'aBc'.lower() }}|{{ 'hello wORLD 2nd'.title() }}|{{ 'aaa'.replace('a', 'bb') }}|"
                    "{{ 'a</think>b'.split('</think>')[-1] }}|{{ 'abc'.find('c') }}|{{ 'a b c'.split(' ', 1) }}|"
                    "{{ 'a-b-c'.rsplit('-', 1) }}|{{ '-'.join(['x', 'y']) }}|{{ 'hello'.capitalize() }}|"
                    "{{ 'l1\\nl2\\r\\nl3'.splitlines() }}|{{ 'abc'.count('b') }}|{{ '12'.isdigit() }}", {}),
    ("repr", "{{ [1, 'a', \"it's\", none, true, 1.5, [2], {'k': 'v'}] }}|{{ (1,) }}|{{ {'a': none} }}|"
             "{{ ('a', 2) }}|{{ ['x\\ny', 'tab\\t', 'q\"'] }}|{{ [s] }}", {"s": "é\x01"}),
    ("string_escapes", "{{ 'a\\tb\\\\c\\'d\\x41\\u00e9\\U0001F600' }}|{{ \"q\\\"q\" }}|{{ 'a' 'b' }}|{{ '\\q' }}", {}),
    ("undefined", "[{{ nope }}]{{ nope | length }}{% for x in nope %}x{% endfor %}{{ nope is defined }}"
                  "{{ nope | default('d') }}{{ nope ~ 'c' }}{{ nope | trim }}{{ nope == nope }}{{ not nope }}"
                  "{{ d.missing is defined }}{{ d['missing'] is defined }}", {"d": {}}),
    ("messages", "{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}{{ add_generation_prompt }}"
                 "{{ messages | length }}{{ messages[0]['role'] }}{{ messages[-1].content }}{{ tools }}", {}),
    ("conversions", "{{ '42' | int + 1 }} {{ 'x' | int }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 5 | string ~ 'a' }} "
                    "{{ [1, 2] | string }} {{ -3 | abs }} {{ 'x' | int(7) }} {{ ' 8 ' | int }} {{ true | int }}", {}),
    ("indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(1, blank=true) }}|"
               "{{ 'x\\ny' | indent('> ') }}", {}),
    ("dict_literal", "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}{% set d2 = dict(a=1, b='x') %}{{ d2 }}", {}),
    ("nested_loops", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}"
                     "{{ loop.index }}|{% endfor %}", {}),
    ("float_repr", "{{ 1/3 }} {{ 2.0 * 3 }} {{ 123456789012345678.0 }} {{ -0.0 }} {{ 1e16 }} {{ 1e15 }} "
                   "{{ 0.0001 }} {{ 0.00001234 }} {{ 1.5e300 * 1e10 }} {{ [0.5] }}", {}),
    ("unicode_trim", "[{{ s | trim }}]", {"s": "\u00a0\u3000x y\u2003 \n"}),
    ("reverse_sort", "{{ xs | reverse | list }}{{ 'abc' | reverse }}{{ xs | sort }}{{ ws | sort }}"
                     "{{ ws | sort(reverse=true) }}{{ xs | unique | list }}{{ xs | sum }}{{ xs | min }}{{ xs | max }}",
     {"xs": [3, 1, 2, 3], "ws": ["b", "A", "c"]}),
    ("dictsort", "{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}|{{ d | dictsort(by='value') }}|"
                 "{{ d | dictsort(reverse=true) | first }}|{{ d | dictsort(true) | map('first') | join }}|{{ d | last }}"
                 "{{ d | first }}{{ d | reverse | list }}",
     {"d": {"b": 2, "a": 3, "C": 1}}),
    ("filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", {}),
    ("generation_block", "{% for m in messages %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}", {}),
    ("loop_cycle", "{% for i in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("escape", "{{ '<a href=\"x\">&\\'' | e }}|{{ '<b>' | safe }}", {}),
    ("is_chain", "{{ messages[0].content is string and messages[0].content | length > 2 }}", {}),
    ("elif_chain", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three"
                   "{% else %}many{% endif %} {% endfor %}", {}),
    ("tuple_set", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = (3, 4) %}{{ c[0] }}{{ c | length }}{{ (1, 2)[1] }}", {}),
    ("lstrip_mid_line", "a {% if true %}b{% endif %}\n  c {% if true %}\n  d\n  {% endif %}\n", {}),
    ("var_trim", "{{ 'x' }}\n{{ 'y' -}}\n\n  z\n{{- 'w' }}  \n", {}),
    ("nested_ws", "<\n{%- for m in messages %}\n    {%- if m.role == 'user' %}\n        [{{ m.content }}]\n"
                  "    {%- else %}\n        ({{ m.content }})\n    {%- endif %}\n{%- endfor %}\n>", {}),
    ("messages_filters", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
                         "{{ messages | map(attribute='role') | join(',') }}|{{ messages | rejectattr('role', 'in', "
                         "['user']) | map(attribute='content') | first }}|{{ messages[0] | length }}|"
                         "{{ (messages | last).attr_missing is defined }}", {}),
    ("range_forms", "{{ range(3) | list }}{{ range(1, 10, 3) | list }}{{ range(5, 0, -2) | list }}{{ range(0) | list }}", {}),
    ("none_str", "{{ none | string }}{{ none | lower }}{{ true | string | upper }}{{ {'a': 1} | length }}"
                 "{{ [] | first is defined }}{{ nope | join }}{{ nope | list }}", {}),
    ("loop_next", "{% for x in 'abc' %}{{ loop.previtem is defined }}{{ loop.nextitem | default('-') }}"
                  "{{ loop.revindex0 }}{% endfor %}", {}),
    ("macro_scope", "{% set g = 'G' %}{% macro m(x) %}{{ g }}{{ x }}{% set g = 'L' %}{{ g }}{% endmacro %}"
                    "{{ m(1) }}{{ g }}{% for i in [1] %}{{ m(i) }}{% endfor %}", {}),
    ("ns_in_loop", "{% set ns = namespace(found=false, items=[]) %}{% for m in messages %}{% if m.role == "
                   "'assistant' %}{% set ns.found = true %}{% set ns.items = ns.items + [m.content] %}{% endif %}"
                   "{% endfor %}{{ ns.found }}{{ ns.items }}{{ ns.missing is defined }}", {}),
    ("comparisons", "{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}{{ 2 > 1.5 }}{{ 'a' == 'a' }}{{ 1 == '1' }}{{ none == none }}"
                    "{{ 'abc' != 'abd' }}{{ [1] == (1,) }}{{ 1 in [1.0] }}{{ 'k' in {'k': 1} }}", {}),
    ("str_more", "{{ 'Hello'.endswith('lo') }}{{ ''.split(',') }}{{ 'a b'.split(none, 1) }}{{ ' x '.lstrip() }}|"
                 "{{ 'ABC'.isupper() }}{{ 'aBC'.islower() }}{{ 'x'.replace('', '-') }}{{ 'a-b'.rfind('-') }}"
                 "{{ 'abc'.removeprefix('a') }}{{ 'ßtraße'.upper() }}{{ 'ﬁne'.upper() }}{{ 'ΟΔΟΣ ΣΑ'.lower() }}"
                 "{{ 'İ'.lower() | length }}{{ 'ǆemal'.capitalize() }}{{ 'ǆ x'.title() }}", {}),
    ("tojson_more", "{{ 'a\u00e9\U0001F600\x7f' | tojson }}{{ {'k': [none, false, 0.0, -1]} | tojson(indent=1) }}"
                    "{{ [[]] | tojson(indent='\t') }}{{ 1.0 | tojson }}{{ 'x' | tojson | length }}"
                    "{{ {'é': 'ü😀\n'} | tojson(ensure_ascii=true) }}", {}),
    ("default_chain", "{{ x.y | default('a') if x is defined else 'b' }}{{ d.k | default('dk') }}{{ d.get('k') | default('n', true) }}",
     {"d": {}}),
    ("concat_types", "{{ 1 ~ 2.5 ~ true ~ [1] ~ {'a': 'b'} }}", {}),
    ("int_edge", "{{ -7 // -2 }} {{ 7 % -3 }} {{ 2 ** 62 }} {{ 0 ** 0 }} {{ (-2) ** 3 }} {{ -2 ** 2 }} {{ 1 - -1 }}", {}),
    # INT64_MIN is a literal (2^63 negated); exact results where 64 bits hold them
    ("int64_min", "{{ -9223372036854775808 }} {{ - 9223372036854775808 }} {{ -(9223372036854775808) }} "
                  "{{ -9223372036854775808 + 1 }} {{ -9223372036854775808 is number }} "
                  "{{ -9223372036854775808 // 1 }} {{ -9223372036854775808 % -1 }} {{ [1, 2][-9223372036854775808:] }} "
                  "{{ 9223372036854775807 }} {{ -9223372036854775807 - 1 }}", {}),
    ("attribute_index_past_64_bits",
     "{{ ([{9223372036854775807: 'x'}] | map(attribute='99999999999999999999') | first) is defined }}", {}),
    ("zero_to_negative_power", "{{ 0 ** -1 }}", {}),
    ("float_power_overflow", "{{ 10.0 ** 400 }}", {}),
    ("whitespace_only_lines", "{% if true %}\n\t  \n{% endif %}\n{% for i in [1,2] %}  {{ i }}  \n{% endfor %}", {}),
    ("string_split_empty", "{{ 'abc'.split('') }}", {}),
    ("loop_scope", "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}|"
                   "{% for i in [1, 2] %}{% if i == 1 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% endfor %}|"
                   "{% for i in [1] %}{% for j in [2] %}{% set i = 5 %}{% endfor %}{{ i }}{% endfor %}", {}),
    ("set_messages", "{% set messages = messages[1:] %}{% for m in messages %}{{ m.role }}{% endfor %}"
                     "{% set add_generation_prompt = true %}{{ add_generation_prompt }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}"
                        "{% endmacro %}{{ fact(5) }}|{% macro ws() %}\n  x  \n{% endmacro %}[{{ ws() }}]", {}),
    ("with_block", "{% set a = 1 %}{% with a = 2, b = a %}{{ a }}{{ b }}{% set c = 3 %}{% endwith %}{{ a }}"
                   "{{ c is defined }}{% with %}{% set a = 9 %}{% endwith %}{{ a }}", {}),
    ("raise", "a{{ raise_exception('boom ' ~ 1) }}", {}),
    ("undefined_attr", "{{ nope.attr }}", {}),
    ("type_error", "{{ 1 + 'a' }}", {}),
    ("undefined_call", "{{ nope() }}", {}),
    ("none_method", "{{ d.get('x').strip() }}", {"d": {}}),
    ("range_too_big", "{{ range(200000) | length }}", {}),
]
JINJA_MESSAGES = [m("user", "Hi there"), m("assistant", "Hello")]


def jinja_cases():
    out = []
    for name, src, variables in JINJA:
        for gen in (False,):
            case = {"name": name, "template": src, "vars": variables, "messages": JINJA_MESSAGES,
                    "add_generation_prompt": gen}
            try:
                text = _compile_jinja_template(src).render(messages=JINJA_MESSAGES, tools=None, documents=None,
                                                           add_generation_prompt=gen, **variables)
                case["expected"] = text
            except Exception as e:
                case["error"] = type(e).__name__
                case["message"] = str(e)
            out.append(case)
    return out


# Further templates (tests/fixtures/chat_templates_extra/*.jinja), rendered by
# transformers' render_jinja_template with the special tokens and kwargs given:
#   llama3_2           Llama 3.2 Instruct (date_string passed: never the clock)
#   gpt_oss            gpt-oss (its strftime_now("%Y-%m-%d") replaced by a fixed date)
#   llama2_chat        Llama 2 Chat
#   mistral_instruct   Mistral 7B Instruct v0.1
#   qwen3 (shared)     the Qwen3 template of ../shared/tokenizers/qwen3, with tools
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer", "description": "Forecast days", "default": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "boolean"}},
                     "required": ["x"]},
            "any": {"type": ["string", "number"]},
            "either": {"oneOf": [{"type": "string"}, {"type": "number", "description": "n"}]}},
            "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time — ünïcode \"quoted\".",
                                      "parameters": {"type": "object", "properties": {}}}},
]
EXTRA = [
    ("llama3_2", {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
     [{"date_string": "26 Jul 2024"}, {"date_string": "26 Jul 2024", "tools": TOOLS},
      {"date_string": "26 Jul 2024", "tools": TOOLS, "tools_in_user_message": False}]),
    ("gpt_oss", {"bos_token": "<|startoftext|>", "eos_token": "<|return|>"},
     [{}, {"tools": TOOLS}, {"reasoning_effort": "high", "builtin_tools": ["browser", "python"],
                             "model_identity": "You are a test model."}]),
    ("llama2_chat", {"bos_token": "<s>", "eos_token": "</s>"}, [{}]),
    ("mistral_instruct", {"bos_token": "<s>", "eos_token": "</s>"}, [{}]),
    ("qwen3", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, [{"tools": TOOLS}]),
]
EXTRA_CONVERSATIONS = ["system_user", "multi_turn", "unicode", "spaces", "non_alternating", "tool_turns"]


def extra_cases():
    from transformers.utils.chat_template_utils import render_jinja_template
    convs = dict(CONVERSATIONS)
    out = []
    for name, tokens, kwarg_sets in EXTRA:
        if name == "qwen3":
            with open(os.path.join(SHARED, "tokenizers", "qwen3", "tokenizer_config.json"), encoding="utf-8") as f:
                src = json.load(f)["chat_template"]
            path = None  # the shared folder's tokenizer_config.json
        else:
            path = "tests/fixtures/chat_templates_extra/" + name + ".jinja"
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                src = f.read()
        variants = []
        for kwargs in kwarg_sets:
            cases = []
            for cname in EXTRA_CONVERSATIONS:
                for gen in (False, True):
                    case = {"name": cname, "messages": convs[cname], "add_generation_prompt": gen}
                    kw = dict(kwargs)
                    tools = kw.pop("tools", None)
                    try:
                        rendered, _ = render_jinja_template(conversations=[convs[cname]], chat_template=src,
                                                            tools=tools, add_generation_prompt=gen, **tokens, **kw)
                        case["expected"] = rendered[0]
                    except Exception as e:
                        case["error"] = type(e).__name__
                        case["message"] = str(e)
                    cases.append(case)
            variants.append({"kwargs": kwargs, "cases": cases})
        out.append({"template": name, "file": path, "tokens": tokens, "variants": variants})
    return out


def main():
    data = {
        "generator": "scripts/gen_chat_template_fixtures.py",
        "transformers": transformers.__version__,
        "jinja2": __import__("jinja2").__version__,
        "chats": chats(),
        "jinja": jinja_cases(),
        "extra": extra_cases(),
    }
    text = json.dumps(data, ensure_ascii=False, indent=1)
    # id lists on one line each
    # (indent puts each element of a list on its own line; lists inside strings have no raw newline)
    text = re.sub(r"\[\n\s*(-?\d+(?:,\n\s*-?\d+)*)\n\s*\]", lambda mt: "[" + re.sub(r"\s+", "", mt.group(1)) + "]",
                  text)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    n = sum(len(t.get("cases", [])) for t in data["chats"])
    m = sum(len(v["cases"]) for t in data["extra"] for v in t["variants"])
    print(f"wrote {OUT}: {n} chat cases, {m} extra-template cases, {len(data['jinja'])} jinja cases")


if __name__ == "__main__":
    main()
