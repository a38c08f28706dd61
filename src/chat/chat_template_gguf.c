/*
 * The chat template of a GGUF file: tokenizer.chat_template (what
 * convert_hf_to_gguf.py copies from tokenizer_config.json's chat_template),
 * with bos_token / eos_token / unk_token / pad_token the token strings of
 * tokenizer.ggml.bos_token_id, eos_token_id, unknown_token_id and
 * padding_token_id (transformers' GGUF loading sets the same four).
 */
#include "chat/chat_template_impl.h"
#include "txc/gguf.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

txc_status txc_chat_template_load_gguf(const char *path, txc_chat_template **out)
{
    *out = NULL;
    txc_gguf *g;
    txc_status s = txc_gguf_open(path, &g);
    if (s)
        return s;
    txc_gguf_str src;
    bool bad = false;
    txc_chat_template *t = NULL;
    if (!txc_gguf_get_str(g, "tokenizer.chat_template", &src, &bad)) {
        s = bad ? txc_last_status()
                : txc_error(TXC_ERR_UNSUPPORTED, "%s has no tokenizer.chat_template in its metadata", path);
        goto done;
    }
    if ((s = txc_chat_template_parse(src.data, (size_t)src.len, &t)))
        goto done;
    static const char *const keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    static const char *const names[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    const txc_gguf_value *tok = txc_gguf_find(g, "tokenizer.ggml.tokens");
    for (int k = 0; k < 4 && !s; k++) {
        int64_t id;
        if (!txc_gguf_get_i64(g, keys[k], &id, &bad)) {
            if (bad)
                s = txc_last_status();
            continue;
        }
        if (!tok || tok->type != TXC_GGUF_ARRAY || tok->v.arr.type != TXC_GGUF_STRING || id < 0 ||
            (uint64_t)id >= tok->v.arr.n) {
            s = txc_error(TXC_ERR_FORMAT, "%s: %s %" PRId64 " is not a token id of tokenizer.ggml.tokens", path,
                          keys[k], id);
            break;
        }
        const txc_gguf_str *ts = &tok->v.arr.items[id].v.str;
        char *v = malloc((size_t)ts->len + 1);
        if (!v) {
            s = txc_error(TXC_ERR_NOMEM, "out of memory (chat template)");
            break;
        }
        memcpy(v, ts->data, (size_t)ts->len);
        v[ts->len] = 0;
        s = txc_chat_template_set_token(t, names[k], v);
        free(v);
    }
    if (!s) {
        *out = t;
        t = NULL;
    }
done:
    txc_chat_template_free(t);
    txc_gguf_close(g);
    return s;
}
