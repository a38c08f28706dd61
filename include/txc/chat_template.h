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
 * The Jinja subset implemented is what the chat templates of common open
 * models use (see src/hf/chat_template.c); anything outside it is
 * TXC_ERR_UNSUPPORTED with a message naming the construct and its line.
 */
#ifndef TXC_CHAT_TEMPLATE_H
#define TXC_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
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
 * "default" entry is used), and the special token strings of
 * tokenizer_config.json, else special_tokens_map.json
 * (bos_token/eos_token/unk_token/pad_token: a string or an AddedToken object
 * {"content": ...}; null or absent leaves the variable undefined). Errors: TXC_ERR_UNSUPPORTED
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
 * apply_chat_template raises ValueError). add_generation_prompt: append the header that
 * starts the assistant's turn, as transformers. *out is malloc'd,
 * NUL-terminated, *out_len bytes (excluding the NUL). Errors: TXC_ERR_INVALID
 * when the template calls raise_exception (the message is the template's),
 * TXC_ERR_UNSUPPORTED for an operation outside the subset met at render
 * time, TXC_ERR_NOMEM. On error *out is NULL. */
txc_status txc_chat_template_render(const txc_chat_template *t, const txc_chat_message *messages, size_t n,
                                    bool add_generation_prompt, char **out, size_t *out_len);

void txc_chat_template_free(txc_chat_template *t);

#ifdef __cplusplus
}
#endif
#endif
