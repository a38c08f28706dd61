/* config.json and generation_config.json; see include/txc/hf_config.h. */
#include "txc/hf_config.h"
#include "formats/files.h"
#include "txc/gguf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Config files are a few KB; anything this large is not one. */
#define CONFIG_MAX_BYTES (16u << 20)
/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define JSON_MAX_EXACT 9007199254740992.0

typedef struct jctx {
    const char *origin;
    const cJSON *obj;
} jctx;


/* The item `key`, or NULL when absent or null. A key given twice takes the
 * last value, as Python's json module (which transformers reads with). */
static const cJSON *item(const jctx *c, const char *key)
{
    const cJSON *v = NULL;
    for (const cJSON *e = c->obj->child; e; e = e->next)
        if (e->string && strcmp(e->string, key) == 0)
            v = e;
    return cJSON_IsNull(v) ? NULL : v;
}

/* Whether `key` is in the object at all (null included): absent takes the
 * config class's default, null means "none" for the nullable fields. */
static bool has_key(const jctx *c, const char *key)
{
    for (const cJSON *e = c->obj->child; e; e = e->next)
        if (e->string && strcmp(e->string, key) == 0)
            return true;
    return false;
}

static txc_status as_int(const jctx *c, const char *field, const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected an integer", c->origin,
                         field, txc_hf_json_kind(v));
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %g, expected an integer", c->origin,
                         field, d);
    if (fabs(d) > JSON_MAX_EXACT)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' (%g) is out of range", c->origin, field, d);
    *out = (int64_t)d;
    return TXC_OK;
}

/* Integer field: *out untouched (default) when absent or null. */
static txc_status get_int(const jctx *c, const char *key, int64_t *out, bool *found)
{
    const cJSON *v = item(c, key);
    if (found)
        *found = v != NULL;
    return v ? as_int(c, key, v, out) : TXC_OK;
}

static txc_status get_double(const jctx *c, const char *key, double *out)
{
    const cJSON *v = item(c, key);
    if (!v)
        return TXC_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected a number", c->origin, key,
                         txc_hf_json_kind(v));
    *out = v->valuedouble;
    return TXC_OK;
}

static txc_status get_bool(const jctx *c, const char *key, bool *out)
{
    const cJSON *v = item(c, key);
    if (!v)
        return TXC_OK;
    if (!cJSON_IsBool(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected true or false", c->origin,
                         key, txc_hf_json_kind(v));
    *out = cJSON_IsTrue(v);
    return TXC_OK;
}

static txc_status copy_str(const jctx *c, const char *field, const cJSON *v, char *buf, size_t cap)
{
    if (!cJSON_IsString(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected a string", c->origin,
                         field, txc_hf_json_kind(v));
    size_t n = strlen(v->valuestring);
    if (n >= cap)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' (\"%.40s...\") is longer than %zu characters",
                         c->origin, field, v->valuestring, cap - 1);
    memcpy(buf, v->valuestring, n + 1);
    return TXC_OK;
}

static txc_status get_str(const jctx *c, const char *key, char *buf, size_t cap)
{
    const cJSON *v = item(c, key);
    return v ? copy_str(c, key, v, buf, cap) : TXC_OK;
}

/* Token id: an integer >= -1 (-1 = none, as some configs write). */
static txc_status get_token_id(const jctx *c, const char *key, int64_t *out)
{
    int64_t v = -1;
    bool found;
    txc_status rc = get_int(c, key, &v, &found);
    if (rc)
        return rc;
    if (found && v < -1)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %" PRId64 ", expected a token id >= 0",
                         c->origin, key, v);
    *out = v;
    return TXC_OK;
}

/* eos_token_id: an integer or a list of at most TXC_MAX_EOS integers. */
static txc_status get_eos(const jctx *c, const char *key, int64_t *ids, int *n)
{
    *n = 0;
    const cJSON *v = item(c, key);
    if (!v)
        return TXC_OK;
    if (cJSON_IsArray(v)) {
        int count = cJSON_GetArraySize(v);
        if (count > TXC_MAX_EOS)
            return txc_error(TXC_ERR_FORMAT, "%s: field '%s' has %d ids (at most %d supported)",
                             c->origin, key, count, TXC_MAX_EOS);
        for (const cJSON *e = v->child; e; e = e->next) {
            int64_t id = 0;
            txc_status rc = as_int(c, key, e, &id);
            if (rc)
                return rc;
            if (id < 0)
                return txc_error(TXC_ERR_FORMAT, "%s: field '%s' holds %" PRId64 ", expected token ids >= 0",
                                 c->origin, key, id);
            ids[(*n)++] = id;
        }
        return TXC_OK;
    }
    if (!cJSON_IsNumber(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected an integer or a list of integers",
                         c->origin, key, txc_hf_json_kind(v));
    int64_t id = 0;
    txc_status rc = as_int(c, key, v, &id);
    if (rc)
        return rc;
    if (id < -1)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %" PRId64 ", expected a token id >= 0",
                         c->origin, key, id);
    if (id >= 0)
        ids[(*n)++] = id;
    return TXC_OK;
}

/* Parse `len` bytes as one JSON object (trailing whitespace allowed). */
/* cJSON decodes "\u0000" into a NUL byte inside a C string: "llama\u0000x"
 * would read as "llama". Finds the first string (key or value) of the
 * valid JSON text `s` holding that escape; *key: the top-level key it is
 * under (the key itself when it is the one), cut to `cap`. */
static bool find_nul_escape(const char *s, size_t len, char *key, size_t cap)
{
    int depth = 0;
    bool expect_key = false;
    const char *k = "";
    size_t k_len = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '{' || ch == '[') {
            depth++;
            expect_key = depth == 1 && ch == '{';
        } else if (ch == '}' || ch == ']') {
            depth--;
        } else if (ch == ',' && depth == 1) {
            expect_key = true;
        } else if (ch == '"') {
            size_t start = ++i;
            bool nul = false;
            for (; i < len && s[i] != '"'; i++)
                if (s[i] == '\\') {
                    nul |= i + 5 < len && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0;
                    i++;
                }
            if (depth == 1 && expect_key) {
                k = s + start;
                k_len = i - start;
                expect_key = false;
            }
            if (nul) {
                size_t n = strcspn(k, "\\\""); /* up to the first escape */
                n = n < k_len ? n : k_len;
                snprintf(key, cap, "%.*s", (int)(n < cap ? n : cap - 1), k);
                return true;
            }
        }
    }
    return false;
}

static txc_status parse_object(const char *text, size_t len, const char *origin, cJSON **out)
{
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root)
        return txc_error(TXC_ERR_FORMAT, "%s: not valid JSON (at byte %zu)", origin,
                         end && end >= text ? (size_t)(end - text) : (size_t)0);
    for (const char *p = end; p < text + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
            cJSON_Delete(root);
            return txc_error(TXC_ERR_FORMAT, "%s: not valid JSON (text after the value at byte %zu)",
                             origin, (size_t)(p - text));
        }
    }
    if (!cJSON_IsObject(root)) {
        txc_status rc = txc_error(TXC_ERR_FORMAT, "%s: is %s, expected a JSON object", origin,
                                  txc_hf_json_kind(root));
        cJSON_Delete(root);
        return rc;
    }
    char key[64];
    if (find_nul_escape(text, len, key, sizeof key)) {
        cJSON_Delete(root);
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' holds a NUL character (\\u0000)", origin,
                         key);
    }
    *out = root;
    return TXC_OK;
}



/* ---- config.json ----------------------------------------------------- */

#define TRY(x)                                                                                     \
    do {                                                                                           \
        txc_status rc_ = (x);                                                                      \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    } while (0)

static txc_status require_positive(const jctx *c, const char *key, int64_t *out)
{
    bool found;
    TRY(get_int(c, key, out, &found));
    if (!found)
        return txc_error(TXC_ERR_FORMAT, "%s: required field '%s' is missing", c->origin, key);
    if (*out <= 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %" PRId64 ", expected a positive integer",
                         c->origin, key, *out);
    return TXC_OK;
}

static txc_status optional_positive(const jctx *c, const char *key, int64_t *out, bool *found)
{
    TRY(get_int(c, key, out, found));
    if (*found && *out <= 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %" PRId64 ", expected a positive integer",
                         c->origin, key, *out);
    return TXC_OK;
}

/* A number of the rope object (`obj` names it in messages); *out untouched
 * when absent or null. */
static txc_status rope_double(const jctx *sub, const char *obj, const char *key, double *out)
{
    const cJSON *v = item(sub, key);
    if (!v)
        return TXC_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s.%s' is %s, expected a number", sub->origin, obj, key,
                         txc_hf_json_kind(v));
    *out = v->valuedouble;
    return TXC_OK;
}

/* longrope's short_factor / long_factor: lists of numbers. */
static txc_status rope_factors(const jctx *sub, const char *obj, const char *key, double *out, int *n)
{
    *n = 0;
    const cJSON *v = item(sub, key);
    if (!v)
        return TXC_OK;
    if (!cJSON_IsArray(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s.%s' is %s, expected a list of numbers", sub->origin, obj, key,
                         txc_hf_json_kind(v));
    if (cJSON_GetArraySize(v) > TXC_MAX_ROPE_FACTORS)
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s.%s' has %d entries (at most %d supported)", sub->origin, obj,
                         key, cJSON_GetArraySize(v), TXC_MAX_ROPE_FACTORS);
    for (const cJSON *e = v->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
            return txc_error(TXC_ERR_FORMAT, "%s: field '%s.%s' holds %s, expected numbers", sub->origin, obj, key,
                             txc_hf_json_kind(e));
        out[(*n)++] = e->valuedouble;
    }
    return TXC_OK;
}

/* rope_scaling (older key) and rope_parameters (transformers v5): the type
 * and its parameters. rope_scaling wins when both are there (transformers'
 * convert_rope_params_to_dict). */
static txc_status parse_rope(const jctx *c, txc_hf_config *o, bool theta_found)
{
    const cJSON *rs = item(c, "rope_scaling");
    if (rs) {
        if (!cJSON_IsObject(rs))
            return txc_error(TXC_ERR_FORMAT, "%s: field 'rope_scaling' is %s, expected an object or null",
                             c->origin, txc_hf_json_kind(rs));
        jctx sub = {c->origin, rs};
        o->has_rope_scaling = true;
        const cJSON *t = item(&sub, "rope_type");
        if (!t)
            t = item(&sub, "type");
        if (t)
            TRY(copy_str(c, "rope_scaling.rope_type", t, o->rope_scaling_type,
                         sizeof o->rope_scaling_type));
    }
    const cJSON *rp = item(c, "rope_parameters");
    if (rp) {
        if (!cJSON_IsObject(rp))
            return txc_error(TXC_ERR_FORMAT,
                             "%s: field 'rope_parameters' is %s, expected an object or null",
                             c->origin, txc_hf_json_kind(rp));
        jctx sub = {c->origin, rp};
        const cJSON *theta = item(&sub, "rope_theta");
        if (theta && !theta_found) {
            if (!cJSON_IsNumber(theta) || !isfinite(theta->valuedouble))
                return txc_error(TXC_ERR_FORMAT, "%s: field 'rope_parameters.rope_theta' is %s, expected a number",
                                 c->origin, txc_hf_json_kind(theta));
            o->rope_theta = theta->valuedouble;
        }
        const cJSON *t = item(&sub, "rope_type");
        if (!t)
            t = item(&sub, "type");
        if (t && !rs) {
            char type[sizeof o->rope_scaling_type] = "";
            TRY(copy_str(c, "rope_parameters.rope_type", t, type, sizeof type));
            if (strcmp(type, "default") != 0) {
                o->has_rope_scaling = true;
                memcpy(o->rope_scaling_type, type, sizeof type);
            }
        }
    }
    const cJSON *obj = rs ? rs : rp;
    const char *oname = rs ? "rope_scaling" : "rope_parameters";
    if (obj) {
        jctx sub = {c->origin, obj};
        TRY(rope_double(&sub, oname, "factor", &o->rope_factor));
        TRY(rope_double(&sub, oname, "low_freq_factor", &o->low_freq_factor));
        TRY(rope_double(&sub, oname, "high_freq_factor", &o->high_freq_factor));
        TRY(rope_double(&sub, oname, "beta_fast", &o->beta_fast));
        TRY(rope_double(&sub, oname, "beta_slow", &o->beta_slow));
        TRY(rope_double(&sub, oname, "attention_factor", &o->attention_factor));
        TRY(rope_double(&sub, oname, "mscale", &o->mscale));
        TRY(rope_double(&sub, oname, "mscale_all_dim", &o->mscale_all_dim));
        TRY(rope_double(&sub, oname, "partial_rotary_factor", &o->partial_rotary_factor));
        const cJSON *v = item(&sub, "original_max_position_embeddings");
        if (v) {
            char field[64];
            snprintf(field, sizeof field, "%s.original_max_position_embeddings", oname);
            TRY(as_int(c, field, v, &o->original_max_position_embeddings));
        }
        TRY(rope_factors(&sub, oname, "short_factor", o->short_factor, &o->n_short_factor));
        TRY(rope_factors(&sub, oname, "long_factor", o->long_factor, &o->n_long_factor));
        v = item(&sub, "truncate");
        if (v) {
            if (!cJSON_IsBool(v))
                return txc_error(TXC_ERR_FORMAT, "%s: field '%s.truncate' is %s, expected true or false", c->origin,
                                 oname, txc_hf_json_kind(v));
            o->rope_truncate = cJSON_IsTrue(v);
        }
    }
    return TXC_OK;
}

/* The config classes' defaults that differ from LlamaConfig's (a
 * save_pretrained config.json leaves out values equal to its class's). */
typedef struct type_defaults {
    const char *model_type;
    bool tie_word_embeddings;
    int64_t head_dim;               /* 0: hidden_size / num_attention_heads */
    int64_t max_position_embeddings;
    double rms_norm_eps;
    int64_t sliding_window;
    const char *hidden_act;
    double final_logit_softcapping, attn_logit_softcapping, query_pre_attn_scalar;
} type_defaults;

static const type_defaults known_defaults[] = {
    {"mistral", false, 0, 131072, 1e-6, 4096, "silu", 0, 0, 0},
    {"qwen2", false, 0, 32768, 1e-6, 0, "silu", 0, 0, 0},
    {"qwen3", false, 128, 32768, 1e-6, 0, "silu", 0, 0, 0},
    {"gemma", true, 256, 8192, 1e-6, 0, "gelu_pytorch_tanh", 0, 0, 0},
    {"gemma2", true, 256, 8192, 1e-6, 4096, "gelu_pytorch_tanh", 30.0, 50.0, 256},
    {"phi3", false, 0, 4096, 1e-5, 0, "silu", 0, 0, 0},
    {"gpt2", true, 0, 1024, 1e-6, 0, "gelu_new", 0, 0, 0},
};

static type_defaults defaults_for(const char *model_type)
{
    for (size_t i = 0; i < sizeof known_defaults / sizeof *known_defaults; i++)
        if (strcmp(known_defaults[i].model_type, model_type) == 0)
            return known_defaults[i];
    return (type_defaults){model_type, false, 0, 2048, 1e-6, 0, "silu", 0, 0, 0}; /* LlamaConfig */
}

/* `key`, else its GPT-2 alias (transformers' attribute_map). */
static const char *alias(const jctx *c, const char *key, const char *gpt2_key)
{
    return !has_key(c, key) && has_key(c, gpt2_key) ? gpt2_key : key;
}

/* A nullable positive number: absent keeps *out (the default), null gives 0
 * (none), else it must be > 0. */
static txc_status nullable_positive(const jctx *c, const char *key, double *out)
{
    if (!has_key(c, key))
        return TXC_OK;
    *out = 0;
    TRY(get_double(c, key, out));
    if (item(c, key) && !(*out > 0))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %g, expected a positive number or null", c->origin,
                         key, *out);
    return TXC_OK;
}

/* layer_types: one of "full_attention", "sliding_attention", ... per layer. */
static txc_status parse_layer_types(const jctx *c, txc_hf_config *o)
{
    const cJSON *lt = item(c, "layer_types");
    if (!lt)
        return TXC_OK;
    if (!cJSON_IsArray(lt))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'layer_types' is %s, expected a list of strings", c->origin,
                         txc_hf_json_kind(lt));
    int n = cJSON_GetArraySize(lt);
    if (n != o->num_hidden_layers)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'layer_types' has %d entries but num_hidden_layers is %" PRId64,
                         c->origin, n, o->num_hidden_layers);
    if (n > TXC_MAX_LAYER_TYPES)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'layer_types' has %d entries (at most %d supported)", c->origin,
                         n, TXC_MAX_LAYER_TYPES);
    int i = 0;
    for (const cJSON *e = lt->child; e; e = e->next, i++) {
        if (!cJSON_IsString(e))
            return txc_error(TXC_ERR_FORMAT, "%s: field 'layer_types' holds %s, expected strings", c->origin,
                             txc_hf_json_kind(e));
        if (strcmp(e->valuestring, "full_attention") == 0) {
            o->layer_types[i] = TXC_LAYER_FULL;
        } else if (strcmp(e->valuestring, "sliding_attention") == 0) {
            o->layer_types[i] = TXC_LAYER_SLIDING;
        } else {
            o->layer_types[i] = TXC_LAYER_OTHER;
            if (!o->layer_type_other[0])
                snprintf(o->layer_type_other, sizeof o->layer_type_other, "%.31s", e->valuestring);
        }
    }
    o->n_layer_types = n;
    return TXC_OK;
}

static txc_status parse_config(const jctx *c, txc_hf_config *o)
{
    const cJSON *mt = item(c, "model_type");
    if (!mt)
        return txc_error(TXC_ERR_FORMAT, "%s: required field 'model_type' is missing", c->origin);
    TRY(copy_str(c, "model_type", mt, o->model_type, sizeof o->model_type));
    const type_defaults d = defaults_for(o->model_type);
    const bool gpt2 = strcmp(o->model_type, "gpt2") == 0;

    const cJSON *arch = item(c, "architectures");
    if (arch) {
        if (!cJSON_IsArray(arch))
            return txc_error(TXC_ERR_FORMAT, "%s: field 'architectures' is %s, expected a list of strings",
                             c->origin, txc_hf_json_kind(arch));
        if (arch->child)
            TRY(copy_str(c, "architectures[0]", arch->child, o->architecture, sizeof o->architecture));
    }

    TRY(require_positive(c, "vocab_size", &o->vocab_size));
    TRY(require_positive(c, alias(c, "hidden_size", "n_embd"), &o->hidden_size));
    bool found;
    if (!has_key(c, "intermediate_size") && has_key(c, "n_inner")) {
        o->intermediate_size = 4 * o->hidden_size; /* GPT2Config: n_inner null = 4 * n_embd */
        TRY(optional_positive(c, "n_inner", &o->intermediate_size, &found));
    } else if (gpt2 && !has_key(c, "intermediate_size")) {
        o->intermediate_size = 4 * o->hidden_size;
    } else {
        TRY(require_positive(c, "intermediate_size", &o->intermediate_size));
    }
    TRY(require_positive(c, alias(c, "num_hidden_layers", "n_layer"), &o->num_hidden_layers));
    TRY(require_positive(c, alias(c, "num_attention_heads", "n_head"), &o->num_attention_heads));
    o->num_key_value_heads = o->num_attention_heads;
    TRY(optional_positive(c, "num_key_value_heads", &o->num_key_value_heads, &found));
    if (o->num_attention_heads % o->num_key_value_heads != 0)
        return txc_error(TXC_ERR_FORMAT,
                         "%s: field 'num_attention_heads' (%" PRId64
                         ") is not a multiple of 'num_key_value_heads' (%" PRId64 ")",
                         c->origin, o->num_attention_heads, o->num_key_value_heads);
    o->head_dim = d.head_dim;
    TRY(optional_positive(c, "head_dim", &o->head_dim, &found));
    if (!found && !d.head_dim) {
        if (o->hidden_size % o->num_attention_heads != 0)
            return txc_error(TXC_ERR_FORMAT,
                             "%s: field 'hidden_size' (%" PRId64
                             ") is not divisible by 'num_attention_heads' (%" PRId64
                             ") and 'head_dim' is absent",
                             c->origin, o->hidden_size, o->num_attention_heads);
        o->head_dim = o->hidden_size / o->num_attention_heads;
    }
    o->max_position_embeddings = d.max_position_embeddings;
    TRY(optional_positive(c, alias(c, "max_position_embeddings", "n_positions"), &o->max_position_embeddings,
                          &found));

    o->rms_norm_eps = d.rms_norm_eps;
    TRY(get_double(c, "rms_norm_eps", &o->rms_norm_eps));
    if (!(o->rms_norm_eps > 0))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'rms_norm_eps' is %g, expected a positive number",
                         c->origin, o->rms_norm_eps);
    o->layer_norm_epsilon = 1e-5;
    TRY(get_double(c, "layer_norm_epsilon", &o->layer_norm_epsilon));
    if (!(o->layer_norm_epsilon > 0))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'layer_norm_epsilon' is %g, expected a positive number",
                         c->origin, o->layer_norm_epsilon);
    o->rope_theta = 10000.0;
    TRY(get_double(c, "rope_theta", &o->rope_theta));
    bool theta_found = item(c, "rope_theta") != NULL;
    o->rope_truncate = true;
    o->partial_rotary_factor = 1.0;
    TRY(get_double(c, "partial_rotary_factor", &o->partial_rotary_factor));
    TRY(parse_rope(c, o, theta_found));
    if (!(o->rope_theta > 0))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'rope_theta' is %g, expected a positive number",
                         c->origin, o->rope_theta);
    if (!(o->partial_rotary_factor > 0 && o->partial_rotary_factor <= 1))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'partial_rotary_factor' is %g, expected a value in (0, 1]",
                         c->origin, o->partial_rotary_factor);
    /* A top-level original_max_position_embeddings wins (Phi-3 keeps it
     * there; transformers' standardize_rope_params). */
    const cJSON *ompe = item(c, "original_max_position_embeddings");
    if (ompe)
        TRY(as_int(c, "original_max_position_embeddings", ompe, &o->original_max_position_embeddings));
    if (o->original_max_position_embeddings < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'original_max_position_embeddings' is %" PRId64
                         ", expected a positive integer", c->origin, o->original_max_position_embeddings);

    o->tie_word_embeddings = d.tie_word_embeddings;
    TRY(get_bool(c, "tie_word_embeddings", &o->tie_word_embeddings));
    TRY(get_bool(c, "attention_bias", &o->attention_bias));
    TRY(get_bool(c, "mlp_bias", &o->mlp_bias));
    snprintf(o->hidden_act, sizeof o->hidden_act, "%s", d.hidden_act);
    if (strcmp(o->model_type, "gemma2") == 0) {
        TRY(get_str(c, "hidden_activation", o->hidden_act, sizeof o->hidden_act));
    } else if (gpt2) {
        TRY(get_str(c, "activation_function", o->hidden_act, sizeof o->hidden_act));
    } else {
        TRY(get_str(c, "hidden_act", o->hidden_act, sizeof o->hidden_act));
        if (strcmp(o->model_type, "gemma") == 0 && strcmp(o->hidden_act, "gelu") == 0)
            strcpy(o->hidden_act, "gelu_pytorch_tanh"); /* GemmaConfig's legacy value */
    }
    if (item(c, "torch_dtype"))
        TRY(get_str(c, "torch_dtype", o->torch_dtype, sizeof o->torch_dtype));
    else
        TRY(get_str(c, "dtype", o->torch_dtype, sizeof o->torch_dtype));

    o->sliding_window = has_key(c, "sliding_window") ? 0 : d.sliding_window;
    TRY(get_int(c, "sliding_window", &o->sliding_window, &found));
    if (o->sliding_window < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'sliding_window' is %" PRId64 ", expected >= 0",
                         c->origin, o->sliding_window);
    TRY(get_bool(c, "use_sliding_window", &o->use_sliding_window));
    o->max_window_layers = 28;
    TRY(get_int(c, "max_window_layers", &o->max_window_layers, &found));
    if (o->max_window_layers < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'max_window_layers' is %" PRId64 ", expected >= 0",
                         c->origin, o->max_window_layers);
    TRY(parse_layer_types(c, o));
    TRY(get_int(c, "sliding_window_pattern", &o->sliding_window_pattern, &found));
    if (o->sliding_window_pattern < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'sliding_window_pattern' is %" PRId64 ", expected >= 0",
                         c->origin, o->sliding_window_pattern);
    o->final_logit_softcapping = d.final_logit_softcapping;
    o->attn_logit_softcapping = d.attn_logit_softcapping;
    o->query_pre_attn_scalar = d.query_pre_attn_scalar;
    TRY(nullable_positive(c, "final_logit_softcapping", &o->final_logit_softcapping));
    TRY(nullable_positive(c, "attn_logit_softcapping", &o->attn_logit_softcapping));
    TRY(nullable_positive(c, "query_pre_attn_scalar", &o->query_pre_attn_scalar));
    TRY(get_bool(c, "use_bidirectional_attention", &o->use_bidirectional_attention));
    o->scale_attn_weights = true;
    TRY(get_bool(c, "scale_attn_weights", &o->scale_attn_weights));
    TRY(get_bool(c, "scale_attn_by_inverse_layer_idx", &o->scale_attn_by_inverse_layer_idx));
    TRY(get_bool(c, "add_cross_attention", &o->add_cross_attention));

    TRY(get_token_id(c, "bos_token_id", &o->bos_token_id));
    TRY(get_eos(c, "eos_token_id", o->eos_token_id, &o->n_eos));
    TRY(get_token_id(c, "pad_token_id", &o->pad_token_id));
    return TXC_OK;
}

txc_status txc_hf_config_parse(const char *json_text, size_t len, const char *origin,
                               txc_hf_config *out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_hf_config_parse: out is NULL");
    memset(out, 0, sizeof *out);
    out->bos_token_id = -1;
    out->pad_token_id = -1;
    if (!json_text)
        return txc_error(TXC_ERR_INVALID, "txc_hf_config_parse: json_text is NULL");
    if (!origin)
        origin = "config.json";
    cJSON *root;
    TRY(parse_object(json_text, len, origin, &root));
    jctx c = {origin, root};
    txc_status rc = parse_config(&c, out);
    cJSON_Delete(root);
    return rc;
}

txc_status txc_hf_config_load(const char *model_dir, txc_hf_config *out)
{
    if (!model_dir || !out)
        return txc_error(TXC_ERR_INVALID, "txc_hf_config_load: NULL argument");
    char *path = txc_hf_path_join(model_dir, "config.json");
    if (!path)
        return TXC_ERR_NOMEM;
    char *text;
    size_t len = 0;
    txc_status rc = txc_hf_read_file(path, CONFIG_MAX_BYTES, &text, &len, NULL);
    if (!rc) {
        rc = txc_hf_config_parse(text, len, path, out);
        free(text);
    }
    free(path);
    return rc;
}

/* ---- generation_config.json ------------------------------------------ */

void txc_generation_config_defaults(txc_generation_config *out)
{
    memset(out, 0, sizeof *out);
    out->bos_token_id = -1;
    out->pad_token_id = -1;
    out->max_length = -1;
    out->max_new_tokens = -1;
    out->do_sample = false;
    out->temperature = 1.0;
    out->top_p = 1.0;
    out->min_p = 0.0;
    out->repetition_penalty = 1.0;
    out->top_k = 50;
}

static txc_status check_range(const jctx *c, const char *key, double v, double lo, double hi,
                              bool lo_open)
{
    if (v < lo || v > hi || (lo_open && v == lo))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %g, expected a value in %c%g, %g]",
                         c->origin, key, v, lo_open ? '(' : '[', lo, hi);
    return TXC_OK;
}

/* GenerationConfig keys (transformers' generation/configuration_utils.py)
 * that change the generated tokens and that txc does not implement, with
 * the value that turns each off (what the key's absence means). */
typedef enum { OFF_NULL, OFF_NUM, OFF_FALSE } off_kind;
static const struct ignored_key {
    const char *key;
    off_kind off;
    double num;      /* OFF_NUM: the value that is off */
    bool sampling;   /* applied by transformers only with do_sample */
} ignored_keys[] = {
    {"num_beams", OFF_NUM, 1, false},           {"num_beam_groups", OFF_NUM, 1, false},
    {"diversity_penalty", OFF_NUM, 0, false},   {"penalty_alpha", OFF_NUM, 0, false},
    {"num_return_sequences", OFF_NUM, 1, false}, {"no_repeat_ngram_size", OFF_NUM, 0, false},
    {"encoder_no_repeat_ngram_size", OFF_NUM, 0, false}, {"encoder_repetition_penalty", OFF_NUM, 1, false},
    {"min_length", OFF_NUM, 0, false},          {"min_new_tokens", OFF_NUM, 0, false},
    {"bad_words_ids", OFF_NULL, 0, false},      {"force_words_ids", OFF_NULL, 0, false},
    {"constraints", OFF_NULL, 0, false},        {"sequence_bias", OFF_NULL, 0, false},
    {"suppress_tokens", OFF_NULL, 0, false},    {"begin_suppress_tokens", OFF_NULL, 0, false},
    {"forced_eos_token_id", OFF_NULL, 0, false}, {"exponential_decay_length_penalty", OFF_NULL, 0, false},
    {"guidance_scale", OFF_NUM, 1, false},      {"stop_strings", OFF_NULL, 0, false},
    {"max_time", OFF_NULL, 0, false},           {"renormalize_logits", OFF_FALSE, 0, false},
    {"remove_invalid_values", OFF_FALSE, 0, false}, {"watermarking_config", OFF_NULL, 0, false},
    {"dola_layers", OFF_NULL, 0, false},        {"prompt_lookup_num_tokens", OFF_NULL, 0, false},
    {"token_healing", OFF_FALSE, 0, false},
    {"typical_p", OFF_NUM, 1, true},            {"epsilon_cutoff", OFF_NUM, 0, true},
    {"eta_cutoff", OFF_NUM, 0, true},           {"top_h", OFF_NULL, 0, true},
};

/* Whether `v` (present, not null) is the value that turns its key off:
 * the number, false, or an empty list / object / string. */
static bool is_off(const struct ignored_key *k, const cJSON *v)
{
    if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child)
        return true;
    if (cJSON_IsString(v) && !*v->valuestring)
        return true;
    switch (k->off) {
    case OFF_NUM: return cJSON_IsNumber(v) && v->valuedouble == k->num;
    case OFF_FALSE: return cJSON_IsFalse(v);
    case OFF_NULL: return false;
    }
    return false;
}

static void list_ignored(const jctx *c, txc_generation_config *o)
{
    o->n_ignored = 0;
    for (const cJSON *e = c->obj->child; e && o->n_ignored < TXC_MAX_IGNORED_GEN_KEYS; e = e->next) {
        const struct ignored_key *k = NULL;
        for (size_t i = 0; i < sizeof ignored_keys / sizeof *ignored_keys && !k; i++)
            if (e->string && strcmp(e->string, ignored_keys[i].key) == 0)
                k = &ignored_keys[i];
        if (!k || item(c, k->key) != e || is_off(k, e) || (k->sampling && !o->do_sample))
            continue; /* (a key given twice: its last value, once) */
        char *json = cJSON_PrintUnformatted(e);
        char *d = o->ignored[o->n_ignored++];
        size_t cap = sizeof o->ignored[0];
        int n = snprintf(d, cap, "%s %s", k->key, json ? json : "?");
        if (n >= (int)cap)
            memcpy(d + cap - 4, "...", 4);
        cJSON_free(json);
    }
}

static txc_status parse_generation(const jctx *c, txc_generation_config *o)
{
    TRY(get_token_id(c, "bos_token_id", &o->bos_token_id));
    TRY(get_eos(c, "eos_token_id", o->eos_token_id, &o->n_eos));
    TRY(get_token_id(c, "pad_token_id", &o->pad_token_id));
    bool found;
    TRY(get_int(c, "max_length", &o->max_length, &found));
    if (found && o->max_length < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'max_length' is %" PRId64 ", expected >= 0",
                         c->origin, o->max_length);
    TRY(get_int(c, "max_new_tokens", &o->max_new_tokens, &found));
    if (found && o->max_new_tokens <= 0) /* GenerationConfig.validate() raises the same */
        return txc_error(TXC_ERR_FORMAT, "%s: field 'max_new_tokens' is %" PRId64 ", expected > 0 (as "
                         "transformers' GenerationConfig; absent or null: no limit of its own)",
                         c->origin, o->max_new_tokens);
    TRY(get_bool(c, "do_sample", &o->do_sample));
    TRY(get_double(c, "temperature", &o->temperature));
    TRY(check_range(c, "temperature", o->temperature, 0, HUGE_VAL, false));
    TRY(get_double(c, "top_p", &o->top_p));
    TRY(check_range(c, "top_p", o->top_p, 0, 1, false));
    TRY(get_double(c, "min_p", &o->min_p));
    TRY(check_range(c, "min_p", o->min_p, 0, 1, false));
    TRY(get_double(c, "repetition_penalty", &o->repetition_penalty));
    TRY(check_range(c, "repetition_penalty", o->repetition_penalty, 0, HUGE_VAL, true));
    TRY(get_int(c, "top_k", &o->top_k, &found));
    if (o->top_k < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'top_k' is %" PRId64 ", expected >= 0",
                         c->origin, o->top_k);
    list_ignored(c, o);
    return TXC_OK;
}

txc_status txc_generation_config_parse(const char *json_text, size_t len, const char *origin,
                                       txc_generation_config *out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_generation_config_parse: out is NULL");
    txc_generation_config_defaults(out);
    if (!json_text)
        return txc_error(TXC_ERR_INVALID, "txc_generation_config_parse: json_text is NULL");
    if (!origin)
        origin = "generation_config.json";
    cJSON *root;
    TRY(parse_object(json_text, len, origin, &root));
    out->present = true;
    jctx c = {origin, root};
    txc_status rc = parse_generation(&c, out);
    cJSON_Delete(root);
    return rc;
}

txc_status txc_generation_config_load(const char *model_dir, txc_generation_config *out)
{
    if (!model_dir || !out)
        return txc_error(TXC_ERR_INVALID, "txc_generation_config_load: NULL argument");
    txc_generation_config_defaults(out);
    if (txc_gguf_is_path(model_dir))
        return TXC_OK; /* a GGUF has no generation config: the defaults (its eos ids are the config's) */
    char *path = txc_hf_path_join(model_dir, "generation_config.json");
    if (!path)
        return TXC_ERR_NOMEM;
    char *text;
    size_t len = 0;
    bool missing;
    txc_status rc = txc_hf_read_file(path, CONFIG_MAX_BYTES, &text, &len, &missing);
    if (!rc && !missing) {
        rc = txc_generation_config_parse(text, len, path, out);
        free(text);
    }
    free(path);
    return rc;
}
