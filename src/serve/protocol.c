/* OpenAI's HTTP protocol: request bodies of /v1/completions and
 * /v1/chat/completions parsed and validated with cJSON (a 400 names the
 * field), chat messages rendered with the model's chat template, and the
 * response objects (chat.completion, text_completion, their streamed
 * chunks, the error object). Field meanings follow OpenAI's API reference
 * (platform.openai.com/docs/api-reference/chat and /completions). */
#include "serve/serve_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

bool serve_fail(serve_error *e, int status, const char *type, const char *param, const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = NULL;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

#define INVALID "invalid_request_error"
#define bad(e, param, ...) serve_fail(e, 400, INVALID, param, __VA_ARGS__)

void serve_request_free(serve_request *r)
{
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->ids);
    free(r->text);
    for (int64_t i = 0; i < r->n_toks; i++)
        free(r->toks[i].piece);
    free(r->toks);
    free(r->marks);
    free(r->held);
    txc_detok_stream_free(r->detok);
}

/* True when s is UTF-8 text (utf8proc's decoder: no overlongs, no
 * surrogates). A JSON \u0000 is refused before parsing (serve_parse_request). */
static bool utf8_ok(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0)
            return false;
        i += (size_t)k;
    }
    return true;
}

/* ---- field readers: absent or null leaves *out as it is ------------------------- */

static const cJSON *field(const cJSON *root, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool get_number(const cJSON *root, const char *name, double lo, double hi, double *out, serve_error *e)
{
    const cJSON *v = field(root, name);
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(e, name, "'%s' must be a number", name);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return bad(e, name, "'%s' must be in [%g, %g], got %g", name, lo, hi, v->valuedouble);
    *out = v->valuedouble;
    return true;
}

static bool get_int(const cJSON *root, const char *name, int64_t lo, int64_t hi, int64_t *out, serve_error *e)
{
    const cJSON *v = field(root, name);
    if (!v)
        return true;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d)))
        return bad(e, name, "'%s' must be an integer", name);
    if (!(d >= -9.2e18 && d <= 9.2e18)) /* an integer, past what int64 holds (and a double shows exactly) */
        return bad(e, name, "'%s' must be in [%lld, %lld], got a number of about %.3g", name, (long long)lo,
                   (long long)hi, d);
    if (d < (double)lo || d > (double)hi)
        return bad(e, name, "'%s' must be in [%lld, %lld], got %.0f", name, (long long)lo, (long long)hi, d);
    *out = (int64_t)d;
    return true;
}

static bool get_bool(const cJSON *root, const char *name, bool *out, serve_error *e)
{
    const cJSON *v = field(root, name);
    if (!v)
        return true;
    if (!cJSON_IsBool(v))
        return bad(e, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return true;
}

static bool add_stop(serve_request *r, const cJSON *s, serve_error *e)
{
    if (!cJSON_IsString(s))
        return bad(e, "stop", "'stop' must be a string or a list of strings");
    size_t n = strlen(s->valuestring);
    if (!utf8_ok(s->valuestring))
        return bad(e, "stop", "'stop' strings must be UTF-8 text");
    if (n == 0)
        return bad(e, "stop", "'stop' strings must not be empty");
    if (n > SERVE_MAX_STOP_LEN)
        return bad(e, "stop", "'stop' strings are at most %d bytes", SERVE_MAX_STOP_LEN);
    if (r->n_stop == SERVE_MAX_STOP)
        return bad(e, "stop", "at most %d 'stop' strings", SERVE_MAX_STOP);
    if (!(r->stop[r->n_stop] = strdup(s->valuestring)))
        return serve_fail(e, 503, "server_error", NULL, "out of memory");
    r->n_stop++;
    return true;
}

/* The fields both endpoints share. */
static bool parse_common(const serve_context *c, const cJSON *root, serve_request *r, serve_error *e)
{
    const cJSON *m = field(root, "model");
    if (m && !cJSON_IsString(m))
        return bad(e, "model", "'model' must be a string");
    if (m && !utf8_ok(m->valuestring))
        return bad(e, "model", "'model' is not UTF-8 text");
    if (m && strcmp(m->valuestring, c->model_id) != 0) {
        serve_fail(e, 404, INVALID, "model", "The model '%.200s' does not exist (this server has '%.200s')",
                   m->valuestring, c->model_id);
        e->code = "model_not_found";
        return false;
    }
    int64_t n = 1;
    if (!get_int(root, "n", 1, 1, &n, e))
        return bad(e, "n", "'n' must be 1 (one choice per request)");
    /* max_tokens, or the newer max_completion_tokens (chat) */
    int64_t max_tokens = -1;
    if (!get_int(root, "max_tokens", 1, INT64_MAX / 2, &max_tokens, e) ||
        !get_int(root, "max_completion_tokens", 1, INT64_MAX / 2, &max_tokens, e))
        return false;
    r->max_tokens = max_tokens > 0 ? max_tokens : c->default_max_tokens;

    serve_sampling *sp = &r->sp;
    *sp = c->defaults;
    double temperature = NAN;
    if (!get_number(root, "temperature", 0, 2, &temperature, e))
        return false;
    /* OpenAI: 0 is (near) deterministic: greedy. A temperature below 1e-30
     * (which the float32 logits cannot be divided by: txc_generate_next_token
     * refuses it) is its limit, greedy too, not a refusal after a stream began. */
    if (temperature >= 0 && temperature < 1e-30)
        sp->do_sample = false;
    else if (temperature > 0) {
        sp->do_sample = true;
        sp->temperature = temperature;
    }
    if (!get_number(root, "top_p", 0, 1, &sp->top_p, e) || !get_number(root, "min_p", 0, 1, &sp->min_p, e) ||
        !get_int(root, "top_k", 0, INT32_MAX, &sp->top_k, e) ||
        !get_number(root, "repetition_penalty", 1e-30, 1e30, &sp->repetition_penalty, e) ||
        !get_number(root, "presence_penalty", -2, 2, &sp->presence_penalty, e) ||
        !get_number(root, "frequency_penalty", -2, 2, &sp->frequency_penalty, e) ||
        !get_bool(root, "cache_prompt", &sp->cache_prompt, e) || !get_bool(root, "ignore_eos", &sp->ignore_eos, e))
        return false;
    int64_t seed = 0;
    const cJSON *sv = field(root, "seed");
    if (sv) {
        if (!get_int(root, "seed", INT64_MIN / 2, INT64_MAX / 2, &seed, e))
            return false;
        sp->seed = (uint64_t)seed;
    } else {
        pthread_mutex_lock(c->mu);
        sp->seed = (*c->seed_counter)++;
        pthread_mutex_unlock(c->mu);
    }
    const cJSON *stop = field(root, "stop");
    if (cJSON_IsArray(stop)) {
        const cJSON *s;
        cJSON_ArrayForEach(s, stop) if (!add_stop(r, s, e)) return false;
    } else if (stop && !add_stop(r, stop, e))
        return false;

    /* Fields that would change the output and are not implemented: a 400,
     * not a completion that silently ignores them (as echo, suffix). */
    const cJSON *lb = field(root, "logit_bias");
    if (lb && !(cJSON_IsObject(lb) && !lb->child))
        return bad(e, "logit_bias", "'logit_bias' is not supported");
    const cJSON *rf = field(root, "response_format");
    if (rf) {
        const cJSON *type = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
            return bad(e, "response_format", "'response_format' other than {\"type\": \"text\"} is not supported");
    }
    static const char *const tool_fields[] = {"tools", "functions"};
    for (size_t i = 0; i < sizeof tool_fields / sizeof *tool_fields; i++) {
        const cJSON *t = field(root, tool_fields[i]);
        if (t && !(cJSON_IsArray(t) && !t->child))
            return bad(e, tool_fields[i], "'%s' (tool calls) is not supported", tool_fields[i]);
    }
    if (!get_bool(root, "stream", &r->stream, e))
        return false;
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return bad(e, "stream_options", "'stream_options' must be an object");
        if (!r->stream)
            return bad(e, "stream_options", "'stream_options' is only allowed when 'stream' is true");
        if (!get_bool(so, "include_usage", &r->include_usage, e))
            return bad(e, "stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
    }
    return true;
}

/* Ids of the prompt (completions): a string (tokenized with the
 * post-processor's special tokens, as the Hugging Face pipelines and txc
 * generate do), a list of token ids, or a list of one of either. */
static bool parse_prompt(const serve_context *c, const cJSON *root, serve_request *r, serve_error *e)
{
    const cJSON *p = field(root, "prompt");
    if (!p)
        return bad(e, "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
        (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        p = p->child;
    if (cJSON_IsString(p)) {
        size_t n = 0;
        if (!utf8_ok(p->valuestring))
            return bad(e, "prompt", "'prompt' is not UTF-8 text");
        if (txc_tokenizer_encode(c->tok, p->valuestring, strlen(p->valuestring), true, &r->ids, &n) != TXC_OK)
            return bad(e, "prompt", "'prompt' cannot be tokenized: %s", txc_last_error());
        r->n_ids = (int64_t)n;
    } else if (cJSON_IsArray(p)) {
        int n = cJSON_GetArraySize(p);
        if (n == 0)
            return bad(e, "prompt", "'prompt' must not be empty");
        if (n > c->context_len + 1)
            return bad(e, "prompt", "This model's maximum context length is %lld tokens, the prompt has %d",
                       (long long)c->context_len, n);
        if (!(r->ids = malloc(sizeof(int32_t) * (size_t)n)))
            return serve_fail(e, 503, "server_error", NULL, "out of memory");
        const cJSON *t;
        cJSON_ArrayForEach(t, p)
        {
            if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble))
                return bad(e, "prompt", "'prompt' must be a string, a list of token ids, or a list of one of "
                                        "them (one prompt per request)");
            if (!(t->valuedouble >= 0 && t->valuedouble < c->vocab_size))
                return bad(e, "prompt", "'prompt' has the token id %.0f, outside the vocabulary [0, %d)",
                           t->valuedouble, c->vocab_size);
            r->ids[r->n_ids++] = (int32_t)t->valuedouble;
        }
    } else
        return bad(e, "prompt", "'prompt' must be a string, a list of token ids, or a list of one of them "
                                "(one prompt per request)");
    if (r->n_ids == 0)
        return bad(e, "prompt", "'prompt' gives no tokens");
    return true;
}

/* Chat messages rendered with the template (add_generation_prompt), then
 * tokenized without the post-processor's special tokens (the template
 * writes BOS), as txc chat and apply_chat_template(tokenize=True). */
static bool parse_messages(const serve_context *c, const cJSON *root, serve_request *r, serve_error *e)
{
    const cJSON *msgs = field(root, "messages");
    if (!msgs)
        return bad(e, "messages", "'messages' is required");
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : -1;
    if (n < 1)
        return bad(e, "messages", "'messages' must be a non-empty list of messages");
    if (n > SERVE_MAX_MESSAGES)
        return bad(e, "messages", "at most %d messages", SERVE_MAX_MESSAGES);
    if (!c->tpl)
        return bad(e, "messages", "the model '%s' has no chat template (tokenizer_config.json's chat_template or "
                                  "chat_template.jinja): use /v1/completions",
                   c->model_id);
    txc_chat_message *m = calloc((size_t)n, sizeof *m);
    char **owned = calloc((size_t)n, sizeof *owned); /* joined content parts */
    bool okay = m && owned;
    if (!okay)
        serve_fail(e, 503, "server_error", NULL, "out of memory");
    int i = 0;
    const cJSON *msg;
    char param[64];
    cJSON_ArrayForEach(msg, msgs)
    {
        if (!okay)
            break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            snprintf(param, sizeof param, "messages[%d].role", i);
            okay = bad(e, param, "'%s' must be a string", param);
            break;
        }
        m[i].role = role->valuestring;
        if (!utf8_ok(role->valuestring) || (cJSON_IsString(content) && !utf8_ok(content->valuestring))) {
            snprintf(param, sizeof param, "messages[%d]", i);
            okay = bad(e, param, "'%s' is not UTF-8 text", param);
            break;
        }
        /* An assistant message's tool calls (OpenAI's tool_calls, the older
         * function_call) would be rendered by the template: not supported,
         * as the request's tools. */
        static const char *const call_fields[] = {"tool_calls", "function_call"};
        for (size_t f = 0; f < sizeof call_fields / sizeof *call_fields && okay; f++) {
            const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, call_fields[f]);
            if (calls && !cJSON_IsNull(calls) && !(cJSON_IsArray(calls) && !calls->child)) {
                snprintf(param, sizeof param, "messages[%d].%s", i, call_fields[f]);
                okay = bad(e, param, "'%s' (tool calls) is not supported", param);
            }
        }
        if (!okay)
            break;
        if (cJSON_IsString(content))
            m[i].content = content->valuestring;
        else if (!content || cJSON_IsNull(content)) {
            /* OpenAI: content is required, except in an assistant message
             * with tool calls (refused above); llama-server: "Expected
             * 'content' or 'tool_calls'" */
            snprintf(param, sizeof param, "messages[%d].content", i);
            if (!content) {
                okay = bad(e, param, "Missing required parameter: '%s' (a '%.40s' message needs content)", param,
                           role->valuestring);
                e->code = "missing_required_parameter";
            } else
                okay = bad(e, param, "Invalid value for '%s': expected a string or a list of text parts, got null",
                           param);
            break;
        } else if (cJSON_IsArray(content)) {
            /* content parts: the text ones, joined (images etc. are refused) */
            size_t len = 0;
            const cJSON *part;
            cJSON_ArrayForEach(part, content)
            {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
                const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text)) {
                    snprintf(param, sizeof param, "messages[%d].content", i);
                    okay = bad(e, param, "'%s': only text parts ({\"type\": \"text\", \"text\": ...}) are supported",
                               param);
                    break;
                }
                if (!utf8_ok(text->valuestring)) {
                    snprintf(param, sizeof param, "messages[%d].content", i);
                    okay = bad(e, param, "'%s' is not UTF-8 text", param);
                    break;
                }
                len += strlen(text->valuestring);
            }
            if (!okay)
                break;
            if (!(owned[i] = malloc(len + 1))) {
                okay = serve_fail(e, 503, "server_error", NULL, "out of memory");
                break;
            }
            owned[i][0] = 0;
            size_t at = 0;
            cJSON_ArrayForEach(part, content)
            {
                const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
                size_t k = strlen(t);
                memcpy(owned[i] + at, t, k + 1);
                at += k;
            }
            m[i].content = owned[i];
        } else {
            snprintf(param, sizeof param, "messages[%d].content", i);
            okay = bad(e, param, "'%s' must be a string or a list of text parts", param);
            break;
        }
        i++;
    }
    char *text = NULL;
    size_t text_len = 0;
    if (okay) {
        pthread_mutex_lock(c->tpl_mu);
        txc_clear_error();
        txc_status s = txc_chat_template_render(c->tpl, m, (size_t)n, true, &text, &text_len);
        pthread_mutex_unlock(c->tpl_mu);
        if (s != TXC_OK)
            okay = bad(e, "messages", "the chat template refused the messages: %s", txc_last_error());
    }
    if (okay) {
        size_t n_ids = 0;
        if (txc_tokenizer_encode(c->tok, text, text_len, false, &r->ids, &n_ids) != TXC_OK)
            okay = bad(e, "messages", "the messages cannot be tokenized: %s", txc_last_error());
        r->n_ids = (int64_t)n_ids;
        if (okay && n_ids == 0)
            okay = bad(e, "messages", "the rendered messages give no tokens");
    }
    free(text);
    for (int k = 0; owned && k < n; k++)
        free(owned[k]);
    free(owned);
    free(m);
    return okay;
}

bool serve_parse_request(const serve_context *c, serve_endpoint ep, const char *body, size_t len,
                         serve_request *r, serve_error *e)
{
    r->endpoint = ep;
    r->slot = -1;
    /* cJSON decodes \u0000 into a NUL that would cut the string short
     * without a word: refused (a backslash outside a string is no JSON) */
    for (size_t i = 0; i + 1 < len; i++)
        if (body[i] == '\\') {
            if (body[i + 1] == 'u' && i + 6 <= len && memcmp(body + i + 2, "0000", 4) == 0)
                return bad(e, NULL, "the body holds \\u0000 (a NUL character), which strings here cannot hold");
            i++;
        }
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root)
        return bad(e, NULL, "the body is not valid JSON");
    bool okay = true;
    if (!cJSON_IsObject(root))
        okay = bad(e, NULL, "the body must be a JSON object");
    okay = okay && parse_common(c, root, r, e);
    if (okay && ep == SERVE_CHAT) {
        bool want = false;
        int64_t top = 0;
        okay = get_bool(root, "logprobs", &want, e) && get_int(root, "top_logprobs", 0, 20, &top, e);
        if (okay && top > 0 && !want)
            okay = bad(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->sp.logprobs = want ? 1 + (int)top : 0;
        okay = okay && parse_messages(c, root, r, e);
    } else if (okay) {
        int64_t lp = -1;
        okay = get_int(root, "logprobs", 0, 5, &lp, e);
        r->sp.logprobs = lp >= 0 ? 1 + (int)lp : 0;
        bool echo = false;
        okay = okay && get_bool(root, "echo", &echo, e);
        if (okay && echo)
            okay = bad(e, "echo", "'echo' is not supported");
        if (okay && field(root, "suffix"))
            okay = bad(e, "suffix", "'suffix' is not supported");
        int64_t best_of = 1;
        if (okay && !get_int(root, "best_of", 1, 1, &best_of, e))
            okay = bad(e, "best_of", "'best_of' must be 1");
        okay = okay && parse_prompt(c, root, r, e);
    }
    cJSON_Delete(root);
    if (!okay)
        return false;
    /* The prompt must leave room for one new token in the slot's cache. */
    if (r->n_ids >= c->context_len)
        return bad(e, ep == SERVE_CHAT ? "messages" : "prompt",
                   "This model's maximum context length is %lld tokens; the prompt has %lld tokens (at most %lld "
                   "leave room for a completion)",
                   (long long)c->context_len, (long long)r->n_ids, (long long)c->context_len - 1);
    return true;
}

/* ---- responses -------------------------------------------------------------------- */

/* `s` with every byte that is not part of a UTF-8 character (a request's
 * raw bytes echoed in a message: a URL, a method; or a character cut by
 * the message's length) replaced by U+FFFD, so the JSON is UTF-8 text
 * (RFC 8259). malloc'd; NULL when out of memory. */
static char *utf8_scrub(const char *s)
{
    size_t n = strlen(s);
    char *t = malloc(3 * n + 1);
    if (!t)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k > 0) {
            memcpy(t + at, s + i, (size_t)k);
            at += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(t + at, "\xef\xbf\xbd", 3);
            at += 3;
            i++;
        }
    }
    t[at] = 0;
    return t;
}

static cJSON *error_object(const serve_error *e)
{
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    char *msg = utf8_scrub(e->message);
    cJSON_AddStringToObject(err, "message", msg ? msg : "(out of memory)");
    free(msg);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : INVALID);
    if (e->param[0])
        cJSON_AddStringToObject(err, "param", e->param);
    else
        cJSON_AddNullToObject(err, "param");
    if (e->code)
        cJSON_AddStringToObject(err, "code", e->code);
    else
        cJSON_AddNullToObject(err, "code");
    return root;
}

char *serve_error_json(const serve_error *e)
{
    cJSON *root = error_object(e);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static void add_usage(cJSON *obj, const serve_request *r)
{
    cJSON *u = cJSON_AddObjectToObject(obj, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_ids);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->n_completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->n_ids + r->n_completion));
}

/* The text of a token that was not chosen (a top_logprobs entry): its
 * decoding alone, with the leading space a SentencePiece "▁" or
 * byte-level "Ġ" token stands for (decoding one token alone strips it). */
static char *token_text(const serve_context *c, int32_t id)
{
    char *t = NULL;
    size_t n;
    if (txc_tokenizer_decode(c->tok, &id, 1, false, &t, &n) != TXC_OK)
        return NULL;
    const char *raw = txc_tokenizer_id_to_token(c->tok, id);
    if (raw && (!strncmp(raw, "\xe2\x96\x81", 3) || !strncmp(raw, "\xc4\xa0", 2)) && t[0] != ' ') {
        char *s = malloc(n + 2);
        if (s) {
            s[0] = ' ';
            memcpy(s + 1, t, n + 1);
        }
        free(t);
        t = s;
    }
    return t;
}

/* The text the chosen token added to the output. */
static char *chosen_text(const serve_context *c, const serve_token *t)
{
    return t->piece ? strdup(t->piece) : token_text(c, t->id);
}

static cJSON *bytes_array(const char *t)
{
    cJSON *b = cJSON_CreateArray();
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        cJSON_AddItemToArray(b, cJSON_CreateNumber(*p));
    return b;
}

static double finite_lp(float lp)
{
    return isfinite(lp) ? (double)lp : -9999.0; /* JSON has no -Infinity (OpenAI reports -9999 too) */
}

/* Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}]} */
static cJSON *chat_logprobs(const serve_context *c, const serve_request *r, int64_t from, int64_t to)
{
    cJSON *lp = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(lp, "content");
    for (int64_t i = from; i < to; i++) {
        const serve_token *t = &r->toks[i];
        cJSON *o = cJSON_CreateObject();
        char *s = chosen_text(c, t);
        cJSON_AddStringToObject(o, "token", s ? s : "");
        cJSON_AddNumberToObject(o, "logprob", finite_lp(t->logprob));
        cJSON_AddItemToObject(o, "bytes", bytes_array(s ? s : ""));
        free(s);
        cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
        for (int k = 0; k < t->n_top && k < r->sp.logprobs - 1; k++) {
            cJSON *x = cJSON_CreateObject();
            char *ts = token_text(c, t->top_id[k]);
            cJSON_AddStringToObject(x, "token", ts ? ts : "");
            cJSON_AddNumberToObject(x, "logprob", finite_lp(t->top_logprob[k]));
            cJSON_AddItemToObject(x, "bytes", bytes_array(ts ? ts : ""));
            free(ts);
            cJSON_AddItemToArray(top, x);
        }
        cJSON_AddItemToArray(content, o);
    }
    cJSON_AddNullToObject(lp, "refusal");
    return lp;
}

/* Completions logprobs (the legacy object): tokens, token_logprobs,
 * top_logprobs (a {token: logprob} object per token), text_offset. */
static cJSON *completion_logprobs(const serve_context *c, const serve_request *r, int64_t from, int64_t to,
                                  size_t offset)
{
    cJSON *lp = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(lp, "tokens"), *tl = cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON *top = cJSON_AddArrayToObject(lp, "top_logprobs"), *off = cJSON_AddArrayToObject(lp, "text_offset");
    for (int64_t i = from; i < to; i++) {
        const serve_token *t = &r->toks[i];
        char *s = chosen_text(c, t);
        cJSON_AddItemToArray(tokens, cJSON_CreateString(s ? s : ""));
        cJSON_AddItemToArray(tl, cJSON_CreateNumber(finite_lp(t->logprob)));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)offset));
        offset += s ? strlen(s) : 0;
        free(s);
        cJSON *x = cJSON_CreateObject();
        for (int k = 0; k < t->n_top && k < r->sp.logprobs - 1; k++) {
            char *ts = token_text(c, t->top_id[k]);
            if (ts && !cJSON_GetObjectItemCaseSensitive(x, ts))
                cJSON_AddNumberToObject(x, ts, finite_lp(t->top_logprob[k]));
            free(ts);
        }
        cJSON_AddItemToArray(top, x);
    }
    return lp;
}

static cJSON *envelope(const serve_context *c, const serve_request *r, const char *object)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", r->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)r->created);
    cJSON_AddStringToObject(root, "model", c->model_id);
    cJSON_AddStringToObject(root, "system_fingerprint", "txc-" TXC_SERVE_VERSION);
    return root;
}

static char *text_dup(const char *s, size_t n)
{
    char *t = malloc(n + 1);
    if (t) {
        memcpy(t, s, n);
        t[n] = 0;
    }
    return t;
}

char *serve_response_json(const serve_context *c, const serve_request *r)
{
    bool chat = r->endpoint == SERVE_CHAT;
    cJSON *root = envelope(c, r, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    char *text = text_dup(r->text ? r->text : "", r->n_text);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", text ? text : "");
        cJSON_AddNullToObject(msg, "refusal");
        if (r->sp.logprobs)
            cJSON_AddItemToObject(ch, "logprobs", chat_logprobs(c, r, 0, r->n_toks));
        else
            cJSON_AddNullToObject(ch, "logprobs");
    } else {
        cJSON_AddStringToObject(ch, "text", text ? text : "");
        if (r->sp.logprobs)
            cJSON_AddItemToObject(ch, "logprobs", completion_logprobs(c, r, 0, r->n_toks, 0));
        else
            cJSON_AddNullToObject(ch, "logprobs");
    }
    free(text);
    cJSON_AddStringToObject(ch, "finish_reason", r->finish_reason ? r->finish_reason : "stop");
    add_usage(root, r);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static char *sse(cJSON *root)
{
    char *j = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!j)
        return NULL;
    size_t n = strlen(j);
    char *s = malloc(n + 9);
    if (s) {
        memcpy(s, "data: ", 6);
        memcpy(s + 6, j, n);
        memcpy(s + 6 + n, "\n\n", 3);
    }
    free(j);
    return s;
}

char *serve_sse_chunk(const serve_context *c, const serve_request *r, size_t text_from, size_t text_to,
                      int64_t tok_from, int64_t tok_to, bool first, bool final)
{
    bool chat = r->endpoint == SERVE_CHAT;
    cJSON *root = envelope(c, r, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    char *text = text_dup(r->text ? r->text + text_from : "", text_to - text_from);
    if (chat) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        if (first)
            cJSON_AddStringToObject(delta, "role", "assistant");
        if (!final || text_to > text_from || first)
            cJSON_AddStringToObject(delta, "content", text ? text : "");
    } else
        cJSON_AddStringToObject(ch, "text", text ? text : "");
    free(text);
    if (r->sp.logprobs && tok_to > tok_from)
        cJSON_AddItemToObject(ch, "logprobs",
                              chat ? chat_logprobs(c, r, tok_from, tok_to)
                                   : completion_logprobs(c, r, tok_from, tok_to, text_from));
    else
        cJSON_AddNullToObject(ch, "logprobs");
    if (final)
        cJSON_AddStringToObject(ch, "finish_reason", r->finish_reason ? r->finish_reason : "stop");
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    if (r->include_usage)
        cJSON_AddNullToObject(root, "usage"); /* OpenAI: null on every chunk but the last */
    return sse(root);
}

char *serve_sse_error(const serve_error *e) { return sse(error_object(e)); }

char *serve_sse_usage(const serve_context *c, const serve_request *r)
{
    cJSON *root = envelope(c, r, r->endpoint == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(root, "choices");
    add_usage(root, r);
    return sse(root);
}

static void model_object(const serve_context *c, cJSON *m)
{
    cJSON_AddStringToObject(m, "id", c->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "txc");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx", (double)c->context_len);
    cJSON_AddNumberToObject(meta, "n_vocab", c->vocab_size);
}

char *serve_models_json(const serve_context *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data"), *m = cJSON_CreateObject();
    cJSON_AddItemToArray(data, m);
    model_object(c, m);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *serve_model_json(const serve_context *c)
{
    cJSON *m = cJSON_CreateObject();
    model_object(c, m);
    char *s = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    return s;
}
