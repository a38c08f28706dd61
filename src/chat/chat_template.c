/* Chat templates: loading a model folder's template and the public API of
 * txc/chat_template.h. The Jinja subset is in chat_template_lex.c and
 * chat_template_parse.c (lexer, parser) and chat_template_eval.c with the
 * files of chat/chat_template_render.h (renderer). */
#include "txc/chat_template.h"
#include "chat/chat_template_impl.h"
#include "txc/gguf.h"
#include "formats/files.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define TEMPLATE_MAX_BYTES (16u << 20)

const char *const ct_token_names[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

txc_status txc_chat_template_parse(const char *source, size_t len, txc_chat_template **out)
{
    *out = NULL;
    if (!source)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_parse: source is NULL");
    txc_chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return txc_error(TXC_ERR_NOMEM, "out of memory");
    txc_status st = ct_parse(t, source, len);
    if (st) {
        txc_chat_template_free(t);
        return st;
    }
    *out = t;
    return TXC_OK;
}

void txc_chat_template_free(txc_chat_template *t)
{
    if (!t)
        return;
    ct_arena_free(&t->arena);
    for (int k = 0; k < 4; k++)
        free(t->tokens[k]);
    for (size_t i = 0; i < t->nvars; i++) {
        free(t->vars[i].name);
        free(t->vars[i].json);
    }
    free(t->vars);
    free(t);
}

txc_status txc_chat_template_set_max_steps(txc_chat_template *t, uint64_t max_steps)
{
    if (!t)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_set_max_steps: NULL template");
    t->max_steps = max_steps;
    return TXC_OK;
}

txc_status txc_chat_template_set_token(txc_chat_template *t, const char *name, const char *value)
{
    if (!t || !name)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_set_token: NULL argument");
    for (int k = 0; k < 4; k++) {
        if (strcmp(name, ct_token_names[k]) != 0)
            continue;
        char *v = NULL;
        if (value && !(v = dup_str(value)))
            return txc_error(TXC_ERR_NOMEM, "out of memory");
        free(t->tokens[k]);
        t->tokens[k] = v;
        return TXC_OK;
    }
    return txc_error(TXC_ERR_INVALID,
                     "txc_chat_template_set_token: '%s' is not one of bos_token, eos_token, unk_token, pad_token",
                     name);
}

static bool is_identifier(const char *s)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

txc_status txc_chat_template_set_var_json(txc_chat_template *t, const char *name, const char *json)
{
    if (!t || !name)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_set_var_json: NULL argument");
    if (!is_identifier(name))
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_set_var_json: '%s' is not a variable name", name);
    static const char *const reserved[] = {"messages", "add_generation_prompt", "bos_token", "eos_token",
                                           "unk_token", "pad_token", NULL};
    for (int k = 0; reserved[k]; k++)
        if (!strcmp(name, reserved[k]))
            return txc_error(TXC_ERR_INVALID,
                             "txc_chat_template_set_var_json: '%s' is set by the render call or set_token", name);
    size_t idx = t->nvars;
    for (size_t i = 0; i < t->nvars; i++)
        if (!strcmp(t->vars[i].name, name))
            idx = i;
    if (!json) { /* remove */
        if (idx < t->nvars) {
            free(t->vars[idx].name);
            free(t->vars[idx].json);
            t->vars[idx] = t->vars[--t->nvars];
        }
        return TXC_OK;
    }
    cJSON *j = cJSON_Parse(json);
    if (!j)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_set_var_json: the value of '%s' is not valid JSON",
                         name);
    cJSON_Delete(j);
    char *js = dup_str(json);
    if (!js)
        return txc_error(TXC_ERR_NOMEM, "out of memory");
    if (idx < t->nvars) {
        free(t->vars[idx].json);
        t->vars[idx].json = js;
        return TXC_OK;
    }
    char *nm = dup_str(name);
    ct_var *nv = realloc(t->vars, (t->nvars + 1) * sizeof *nv);
    if (!nm || !nv) {
        free(nm);
        free(js);
        if (nv)
            t->vars = nv;
        return txc_error(TXC_ERR_NOMEM, "out of memory");
    }
    t->vars = nv;
    t->vars[t->nvars].name = nm;
    t->vars[t->nvars].json = js;
    t->nvars++;
    return TXC_OK;
}

txc_status txc_chat_template_render(const txc_chat_template *t, const txc_chat_message *messages, size_t n,
                                    bool add_generation_prompt, char **out, size_t *out_len)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_render: out is NULL");
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!t || (n && !messages))
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_render: NULL argument");
    if (n == 0) /* as apply_chat_template (transformers 5) */
        return txc_error(TXC_ERR_INVALID,
                         "Cannot apply chat template to an empty conversation. Provide at least one message.");
    return ct_render(t, messages, n, add_generation_prompt, out, out_len);
}

/* A special token of tokenizer_config.json: a string, an AddedToken object
 * {"content": ...} (transformers uses str(token) = its content), or null. */
static const char *token_string(const cJSON *v)
{
    if (cJSON_IsString(v))
        return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c))
            return c->valuestring;
    }
    return NULL;
}

static txc_status read_json(const char *dir, const char *name, cJSON **out, bool *missing)
{
    *out = NULL;
    char *path = txc_hf_path_join(dir, name);
    if (!path)
        return TXC_ERR_NOMEM;
    char *text;
    size_t len;
    txc_status st = txc_hf_read_file(path, TEMPLATE_MAX_BYTES, &text, &len, missing);
    if (st || *missing) {
        free(path);
        return st;
    }
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*out || !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        st = txc_error(TXC_ERR_FORMAT, "%s: not a JSON object", path);
    }
    free(path);
    return st;
}

/* The special tokens transformers 5.x gives a tokenizer whose files name
 * none: the defaults of the __init__ of the class tokenizer_config.json's
 * tokenizer_class names ("Fast" or not): GPT2Tokenizer, LlamaTokenizer,
 * Qwen2Tokenizer, GemmaTokenizer. Others (PreTrainedTokenizerFast,
 * TokenizersBackend, no tokenizer_class) have none. AutoTokenizer loads a
 * LlamaTokenizer whose tokenizer.json has "ByteLevel" in it (Llama 3) as a
 * TokenizersBackend, without defaults. Order: ct_token_names. */
static txc_status class_default_tokens(const char *dir, const cJSON *cfg, const char *const **out)
{
    static const char *const gpt2[4] = {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", NULL};
    static const char *const llama[4] = {"<s>", "</s>", "<unk>", NULL};
    static const char *const qwen2[4] = {NULL, "<|endoftext|>", "<|endoftext|>", "<|endoftext|>"};
    static const char *const gemma[4] = {"<bos>", "<eos>", "<unk>", "<pad>"};
    static const struct {
        const char *name;
        const char *const *tokens;
    } classes[] = {{"GPT2Tokenizer", gpt2}, {"LlamaTokenizer", llama}, {"Qwen2Tokenizer", qwen2}, {"GemmaTokenizer", gemma}};
    *out = NULL;
    const cJSON *cls = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class") : NULL;
    if (!cJSON_IsString(cls))
        return TXC_OK;
    size_t n = strlen(cls->valuestring);
    if (n >= 4 && !strcmp(cls->valuestring + n - 4, "Fast"))
        n -= 4;
    for (size_t k = 0; k < sizeof classes / sizeof *classes; k++)
        if (strlen(classes[k].name) == n && !strncmp(cls->valuestring, classes[k].name, n))
            *out = classes[k].tokens;
    if (*out != llama)
        return TXC_OK;
    char *path = txc_hf_path_join(dir, "tokenizer.json");
    if (!path)
        return TXC_ERR_NOMEM;
    char *text = NULL;
    size_t len = 0;
    bool missing = true;
    txc_status st = txc_hf_read_file(path, (size_t)1 << 30, &text, &len, &missing);
    free(path);
    if (st)
        return st;
    static const char needle[] = "\"ByteLevel\"";
    const size_t nl = sizeof needle - 1;
    for (size_t i = 0; text && i + nl <= len; i++)
        if (text[i] == '"' && !memcmp(text + i, needle, nl)) {
            *out = NULL;
            break;
        }
    free(text);
    return TXC_OK;
}

txc_status txc_chat_template_load(const char *model_dir, txc_chat_template **out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_load: out is NULL");
    *out = NULL;
    if (!model_dir)
        return txc_error(TXC_ERR_INVALID, "txc_chat_template_load: model_dir is NULL");
    if (txc_gguf_is_path(model_dir))
        return txc_chat_template_load_gguf(model_dir, out);
    cJSON *cfg = NULL, *stm = NULL;
    bool cfg_missing = true, stm_missing = true, jinja_missing = true;
    char *jinja = NULL;
    size_t jinja_len = 0;
    txc_chat_template *t = NULL;
    txc_status st = read_json(model_dir, "tokenizer_config.json", &cfg, &cfg_missing);
    if (st)
        goto done;
    st = read_json(model_dir, "special_tokens_map.json", &stm, &stm_missing);
    if (st)
        goto done;
    /* transformers: a chat_template.jinja file takes priority over the config's entry */
    char *jpath = txc_hf_path_join(model_dir, "chat_template.jinja");
    if (!jpath) {
        st = TXC_ERR_NOMEM;
        goto done;
    }
    st = txc_hf_read_file(jpath, TEMPLATE_MAX_BYTES, &jinja, &jinja_len, &jinja_missing);
    free(jpath);
    if (st)
        goto done;
    const char *src = NULL;
    size_t src_len = 0;
    if (jinja) {
        src = jinja;
        src_len = jinja_len;
    } else if (cfg) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        if (cJSON_IsString(ct)) {
            src = ct->valuestring;
        } else if (cJSON_IsArray(ct)) {
            for (const cJSON *e = ct->child; e; e = e->next) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
                const cJSON *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
                if (cJSON_IsString(nm) && cJSON_IsString(tp) && !strcmp(nm->valuestring, "default"))
                    src = tp->valuestring;
            }
            if (!src) {
                st = txc_error(TXC_ERR_UNSUPPORTED,
                               "%s/tokenizer_config.json: chat_template lists several templates and none is named "
                               "\"default\"", model_dir);
                goto done;
            }
        } else if (ct && !cJSON_IsNull(ct)) {
            st = txc_error(TXC_ERR_FORMAT, "%s/tokenizer_config.json: chat_template is %s, expected a string or a list",
                           model_dir, txc_hf_json_kind(ct));
            goto done;
        }
        if (src)
            src_len = strlen(src);
    }
    if (!src) {
        st = txc_error(TXC_ERR_UNSUPPORTED, "%s has no chat_template in tokenizer_config.json or chat_template.jinja",
                       model_dir);
        goto done;
    }
    st = txc_chat_template_parse(src, src_len, &t);
    if (st)
        goto done;
    /* PreTrainedTokenizerBase._from_pretrained: special_tokens_map.json is
     * read only when tokenizer_config.json has no added_tokens_decoder, and
     * then its entries replace the config's (null included) */
    const char *const *defaults = NULL;
    bool defaults_read = false;
    bool use_stm = stm && !(cfg && cJSON_HasObjectItem(cfg, "added_tokens_decoder"));
    for (int k = 0; k < 4; k++) {
        const cJSON *item = use_stm ? cJSON_GetObjectItemCaseSensitive(stm, ct_token_names[k]) : NULL;
        if (!item && cfg)
            item = cJSON_GetObjectItemCaseSensitive(cfg, ct_token_names[k]);
        const char *v = token_string(item);
        if (!item) { /* named nowhere (null is named): the class's default */
            if (!defaults_read && (st = class_default_tokens(model_dir, cfg, &defaults)))
                goto done;
            defaults_read = true;
            v = defaults ? defaults[k] : NULL;
        }
        if (v && (st = txc_chat_template_set_token(t, ct_token_names[k], v)))
            goto done;
    }
    *out = t;
    t = NULL;
done:
    txc_chat_template_free(t);
    cJSON_Delete(cfg);
    cJSON_Delete(stm);
    free(jinja);
    return st;
}
