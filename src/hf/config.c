/* config.json and generation_config.json; see include/txc/hf_config.h. */
#include "txc/hf_config.h"

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

static const char *json_kind(const cJSON *v)
{
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "invalid";
}

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

static txc_status as_int(const jctx *c, const char *field, const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected an integer", c->origin,
                         field, json_kind(v));
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
                         json_kind(v));
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
                         key, json_kind(v));
    *out = cJSON_IsTrue(v);
    return TXC_OK;
}

static txc_status copy_str(const jctx *c, const char *field, const cJSON *v, char *buf, size_t cap)
{
    if (!cJSON_IsString(v))
        return txc_error(TXC_ERR_FORMAT, "%s: field '%s' is %s, expected a string", c->origin,
                         field, json_kind(v));
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
                         c->origin, key, json_kind(v));
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
                                  json_kind(root));
        cJSON_Delete(root);
        return rc;
    }
    *out = root;
    return TXC_OK;
}

/* Read a whole file. *missing (when non-NULL) is set instead of an error
 * when the file does not exist. */
static txc_status read_file(const char *path, char **text, size_t *len, bool *missing)
{
    *text = NULL;
    if (missing)
        *missing = false;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (missing && errno == ENOENT) {
            *missing = true;
            return TXC_OK;
        }
        return txc_error(TXC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return txc_error(TXC_ERR_IO, "cannot read %s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > CONFIG_MAX_BYTES) {
        fclose(f);
        return txc_error(TXC_ERR_FORMAT, "%s: %lld bytes, too large for a config file", path,
                         (long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return txc_error(TXC_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t r = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || r != n) {
        free(buf);
        return txc_error(TXC_ERR_IO, "cannot read %s", path);
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return TXC_OK;
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
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

/* rope_scaling (older key) and rope_parameters (transformers v5). */
static txc_status parse_rope(const jctx *c, txc_hf_config *o, bool theta_found)
{
    const cJSON *rs = item(c, "rope_scaling");
    if (rs) {
        if (!cJSON_IsObject(rs))
            return txc_error(TXC_ERR_FORMAT, "%s: field 'rope_scaling' is %s, expected an object or null",
                             c->origin, json_kind(rs));
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
                             c->origin, json_kind(rp));
        jctx sub = {c->origin, rp};
        const cJSON *theta = item(&sub, "rope_theta");
        if (theta && !theta_found) {
            if (!cJSON_IsNumber(theta) || !isfinite(theta->valuedouble))
                return txc_error(TXC_ERR_FORMAT, "%s: field 'rope_parameters.rope_theta' is %s, expected a number",
                                 c->origin, json_kind(theta));
            o->rope_theta = theta->valuedouble;
        }
        const cJSON *t = item(&sub, "rope_type");
        if (t && !rs) {
            char type[sizeof o->rope_scaling_type] = "";
            TRY(copy_str(c, "rope_parameters.rope_type", t, type, sizeof type));
            if (strcmp(type, "default") != 0) {
                o->has_rope_scaling = true;
                memcpy(o->rope_scaling_type, type, sizeof type);
            }
        }
    }
    return TXC_OK;
}

static txc_status parse_config(const jctx *c, txc_hf_config *o)
{
    const cJSON *mt = item(c, "model_type");
    if (!mt)
        return txc_error(TXC_ERR_FORMAT, "%s: required field 'model_type' is missing", c->origin);
    TRY(copy_str(c, "model_type", mt, o->model_type, sizeof o->model_type));

    const cJSON *arch = item(c, "architectures");
    if (arch) {
        if (!cJSON_IsArray(arch))
            return txc_error(TXC_ERR_FORMAT, "%s: field 'architectures' is %s, expected a list of strings",
                             c->origin, json_kind(arch));
        if (arch->child)
            TRY(copy_str(c, "architectures[0]", arch->child, o->architecture, sizeof o->architecture));
    }

    TRY(require_positive(c, "vocab_size", &o->vocab_size));
    TRY(require_positive(c, "hidden_size", &o->hidden_size));
    TRY(require_positive(c, "intermediate_size", &o->intermediate_size));
    TRY(require_positive(c, "num_hidden_layers", &o->num_hidden_layers));
    TRY(require_positive(c, "num_attention_heads", &o->num_attention_heads));
    bool found;
    o->num_key_value_heads = o->num_attention_heads;
    TRY(optional_positive(c, "num_key_value_heads", &o->num_key_value_heads, &found));
    if (o->num_attention_heads % o->num_key_value_heads != 0)
        return txc_error(TXC_ERR_FORMAT,
                         "%s: field 'num_attention_heads' (%" PRId64
                         ") is not a multiple of 'num_key_value_heads' (%" PRId64 ")",
                         c->origin, o->num_attention_heads, o->num_key_value_heads);
    TRY(optional_positive(c, "head_dim", &o->head_dim, &found));
    if (!found) {
        if (o->hidden_size % o->num_attention_heads != 0)
            return txc_error(TXC_ERR_FORMAT,
                             "%s: field 'hidden_size' (%" PRId64
                             ") is not divisible by 'num_attention_heads' (%" PRId64
                             ") and 'head_dim' is absent",
                             c->origin, o->hidden_size, o->num_attention_heads);
        o->head_dim = o->hidden_size / o->num_attention_heads;
    }
    o->max_position_embeddings = 2048;
    TRY(optional_positive(c, "max_position_embeddings", &o->max_position_embeddings, &found));

    o->rms_norm_eps = 1e-6;
    TRY(get_double(c, "rms_norm_eps", &o->rms_norm_eps));
    if (!(o->rms_norm_eps > 0))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'rms_norm_eps' is %g, expected a positive number",
                         c->origin, o->rms_norm_eps);
    o->rope_theta = 10000.0;
    TRY(get_double(c, "rope_theta", &o->rope_theta));
    bool theta_found = item(c, "rope_theta") != NULL;
    TRY(parse_rope(c, o, theta_found));
    if (!(o->rope_theta > 0))
        return txc_error(TXC_ERR_FORMAT, "%s: field 'rope_theta' is %g, expected a positive number",
                         c->origin, o->rope_theta);

    TRY(get_bool(c, "tie_word_embeddings", &o->tie_word_embeddings));
    TRY(get_bool(c, "attention_bias", &o->attention_bias));
    TRY(get_bool(c, "mlp_bias", &o->mlp_bias));
    strcpy(o->hidden_act, "silu");
    TRY(get_str(c, "hidden_act", o->hidden_act, sizeof o->hidden_act));
    if (item(c, "torch_dtype"))
        TRY(get_str(c, "torch_dtype", o->torch_dtype, sizeof o->torch_dtype));
    else
        TRY(get_str(c, "dtype", o->torch_dtype, sizeof o->torch_dtype));

    TRY(get_int(c, "sliding_window", &o->sliding_window, &found));
    if (o->sliding_window < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'sliding_window' is %" PRId64 ", expected >= 0",
                         c->origin, o->sliding_window);
    TRY(get_bool(c, "use_sliding_window", &o->use_sliding_window));

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
    char *path = join(model_dir, "config.json");
    if (!path)
        return TXC_ERR_NOMEM;
    char *text;
    size_t len = 0;
    txc_status rc = read_file(path, &text, &len, NULL);
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
    if (found && o->max_new_tokens < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: field 'max_new_tokens' is %" PRId64 ", expected >= 0",
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
    char *path = join(model_dir, "generation_config.json");
    if (!path)
        return TXC_ERR_NOMEM;
    char *text;
    size_t len = 0;
    bool missing;
    txc_status rc = read_file(path, &text, &len, &missing);
    if (!rc && !missing) {
        rc = txc_generation_config_parse(text, len, path, out);
        free(text);
    }
    free(path);
    return rc;
}
