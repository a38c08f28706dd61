/*
 * txc/chat_template.h — chat templates: the Jinja template in a model's
 * tokenizer_config.json ("chat_template"), rendered for a conversation the
 * way transformers' PreTrainedTokenizerBase.apply_chat_template(tokenize=False)
 * renders it: a Jinja2 ImmutableSandboxedEnvironment with trim_blocks=True,
 * lstrip_blocks=True and the loopcontrols extension; variables `messages`,
 * `add_generation_prompt`, the tokenizer's special tokens (`bos_token`,
 * `eos_token`, `unk_token`, `pad_token` as strings) and the functions
 * `raise_exception(msg)` and `strftime_now(format)`.
 *
 * The rendered text already holds the special tokens the template writes
 * (e.g. `<|begin_of_text|>`): it is tokenized WITHOUT the post-processor's
 * special tokens (transformers: add_special_tokens=False), so a prompt has
 * exactly one BOS.
 *
 *   txc_chat_template *t;
 *   txc_chat_template_load("models/Qwen3-0.6B", &t);
 *   txc_chat_message m[] = {{"system", "Be brief."}, {"user", "Hi"}};
 *   char *text; size_t len;
 *   txc_chat_template_render(t, m, 2, true, &text, &len);
 *   // "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi..."
 *   txc_tokenizer_encode(tok, text, len, false, &ids, &n);  // add_special_tokens off
 *
 * The Jinja subset (src/chat/chat_template_parse.c, chat_template_eval.c) is
 * what the chat templates of common open models use, checked byte for byte
 * against jinja2 3.1 / transformers (tests/test_chat_template.c):
 *   syntax     {{ }}, {% %}, {# #}, whitespace control -/+ on every tag,
 *              trim_blocks, lstrip_blocks, one trailing newline dropped
 *   statements if/elif/else, for (tuple targets, `if` filter, else, loop.index
 *              /index0/revindex/revindex0/first/last/length/previtem/nextitem
 *              /cycle), break, continue, set (names, tuples, namespace
 *              attributes, block set with filters), macro (defaults,
 *              keyword arguments, recursion), with, filter blocks, generation
 *   expressions literals (str with Python escapes, int, float, list, tuple,
 *              dict, true/false/none), . and [] (dict keys, negative indices,
 *              slices with steps), calls, |filters, is-tests, not/and/or,
 *              == != < <= > >= (chained), in / not in, + - * / // % **, ~,
 *              x if c else y
 *   globals    raise_exception, strftime_now, range (sandbox's MAX_RANGE),
 *              namespace, dict
 *   filters    trim length count first last upper lower capitalize title
 *              replace tojson (transformers': ensure_ascii, indent,
 *              separators, sort_keys) join default/d items selectattr
 *              rejectattr select reject map list string int float abs round
 *              indent safe escape/e reverse sort dictsort unique sum min max
 *   tests      defined undefined none boolean true false integer float number
 *              string mapping iterable sequence callable sameas in odd even
 *              divisibleby eq ne lt le gt ge (and ==...) lower upper escaped
 *   methods    str: strip lstrip rstrip split rsplit splitlines startswith
 *              endswith upper lower title capitalize replace find rfind count
 *              join isdigit isalpha isspace isupper islower removeprefix
 *              removesuffix; dict: get items keys values
 * Values behave as Python's (str()/repr(), truthiness, floor division, code
 * point indexing) and undefined names as jinja2.Undefined. Anything else
 * ({% include %}, {% call %}, {% raw %}, varargs/kwargs/caller in macros, recursive loops,
 * str.format, '%' formatting, other filters/tests/methods, integers past 64
 * bits, Markup arithmetic) is TXC_ERR_UNSUPPORTED naming the construct and
 * its line, never a silently different text. Known differences: case
 * mappings follow utf8proc's Unicode version plus Python's special cases
 * (ß, ligatures, İ, final sigma; the Greek iota-subscript letters are
 * refused); messages of errors other than raise_exception are worded
 * differently from jinja2's; message content is a string (no multimodal
 * content lists). Guards: macro calls nest at most 64 deep, templates at
 * most 200 levels, values at most 200 levels; the output at most 64 MiB,
 * a render's memory at most 512 MiB and its steps at most
 * TXC_CHAT_TEMPLATE_MAX_STEPS (txc_chat_template_set_max_steps)
 * (TXC_ERR_CAPACITY). |unique hashes (a list or dict item is a TypeError,
 * as in Python) and |sort merges: both fast on 100k items.
 *
 * strftime_now reads the clock (local time, as datetime.now()); a template
 * that honours `date_string` (Llama 3.1/3.2) can be given a fixed date with
 * txc_chat_template_set_var_json(t, "date_string", "\"26 Jul 2024\"").
 */
#ifndef TXC_CHAT_TEMPLATE_H
#define TXC_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One message of a conversation: role "system", "user", "assistant" (or any
 * string the template accepts) and its text content (UTF-8, NUL-terminated).
 * content NULL: the message has no "content" key (transformers drops keys
 * whose value is None before rendering). */
typedef struct txc_chat_message {
    const char *role;
    const char *content;
} txc_chat_message;

typedef struct txc_chat_template txc_chat_template;

/* Parse a template's source (UTF-8, `len` bytes). Errors: TXC_ERR_FORMAT for
 * a syntax error (message: line and what was expected), TXC_ERR_UNSUPPORTED
 * for a construct outside the subset, TXC_ERR_NOMEM. */
txc_status txc_chat_template_parse(const char *source, size_t len, txc_chat_template **out);

/* Load the template of a model folder: DIR/chat_template.jinja when it
 * exists (newer transformers save it there, and it takes priority as in
 * PreTrainedTokenizerBase.from_pretrained), else "chat_template" of
 * DIR/tokenizer_config.json (a string, or a list of {name, template} whose
 * "default" entry is used), and the special token strings
 * (bos_token/eos_token/unk_token/pad_token: a string or an AddedToken object
 * {"content": ...}) of tokenizer_config.json, replaced by those
 * special_tokens_map.json names when the config has no added_tokens_decoder
 * (PreTrainedTokenizerBase._from_pretrained); null leaves the variable
 * undefined; absent from both files: the default of the tokenizer class, as transformers 5.x's
 * tokenizer __init__ gives it: GPT2Tokenizer bos/eos/unk "<|endoftext|>",
 * LlamaTokenizer "<s>"/"</s>"/"<unk>" (not when tokenizer.json is
 * ByteLevel: AutoTokenizer then loads TokenizersBackend), Qwen2Tokenizer
 * eos/unk/pad "<|endoftext|>", GemmaTokenizer "<bos>"/"<eos>"/"<unk>"/"<pad>",
 * other classes none: undefined). Errors: TXC_ERR_UNSUPPORTED
 * when the folder has no chat template (message: "<dir> has no chat_template
 * in tokenizer_config.json or chat_template.jinja"), TXC_ERR_FORMAT /
 * TXC_ERR_UNSUPPORTED as txc_chat_template_parse, TXC_ERR_IO. */
txc_status txc_chat_template_load(const char *model_dir, txc_chat_template **out);

/* Set a special token string the template sees (`name` is "bos_token",
 * "eos_token", "unk_token" or "pad_token"); NULL leaves it undefined. */
txc_status txc_chat_template_set_token(txc_chat_template *t, const char *name, const char *value);

/* Set a further template variable, as transformers'
 * apply_chat_template(**kwargs) passes them (e.g. "enable_thinking" = "false",
 * "date_string" = "\"26 Jul 2024\"", "tools" = a JSON list of tool
 * schemas): `json` is the value as JSON text; NULL removes the variable.
 * Variables named here replace the default `tools` / `documents` (None).
 * Errors: TXC_ERR_INVALID (not an identifier, a name the render call or
 * set_token owns, JSON that does not parse), TXC_ERR_NOMEM. */
txc_status txc_chat_template_set_var_json(txc_chat_template *t, const char *name, const char *json);

/* Render `messages` (n >= 1: an empty conversation is TXC_ERR_INVALID, as
 * apply_chat_template raises ValueError). add_generation_prompt: append the
 * header that starts the assistant's turn, as transformers. The template
 * also sees `tools` and `documents` as none unless set_var_json set them.
 * *out is malloc'd, NUL-terminated, *out_len bytes (excluding the NUL; may
 * be NULL). Errors: TXC_ERR_INVALID when the template calls raise_exception
 * (the message is exactly the template's) or fails as jinja2 would (an
 * attribute of an undefined value, a type error: "chat template line N:
 * ..."), TXC_ERR_UNSUPPORTED for an operation outside the subset met at
 * render time, TXC_ERR_CAPACITY past a guard, TXC_ERR_NOMEM. On error *out
 * is NULL. A template may be rendered from several threads at once. */
txc_status txc_chat_template_render(const txc_chat_template *t, const txc_chat_message *messages, size_t n,
                                    bool add_generation_prompt, char **out, size_t *out_len);

/* The step budget of a render, by default: a render that takes more steps
 * (each expression evaluated, statement run, and comparison or hash of
 * values counts one) ends with TXC_ERR_CAPACITY ("... took more than N
 * steps ..."). A real chat template takes a few thousand steps per message;
 * the default passes in a few seconds on one core. jinja2 has no such limit
 * (its sandbox bounds range() only). */
#define TXC_CHAT_TEMPLATE_MAX_STEPS ((uint64_t)100000000)

/* Set the step budget of this template's renders (0: the default,
 * TXC_CHAT_TEMPLATE_MAX_STEPS). Errors: TXC_ERR_INVALID for t NULL. */
txc_status txc_chat_template_set_max_steps(txc_chat_template *t, uint64_t max_steps);

void txc_chat_template_free(txc_chat_template *t);

#ifdef __cplusplus
}
#endif
#endif
