#include "testutil.h"
#include "txc/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tu_shared_dir(void)
{
    const char *s = getenv("TXC_SHARED_DIR");
    return s && *s ? s : "../shared";
}

const char *tu_source_dir(void)
{
    const char *s = getenv("TXC_SOURCE_DIR");
    return s && *s ? s : ".";
}

const char *tu_path(const char *fmt, ...)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return b;
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

char *tu_mkdtemp(void)
{
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    const char *tmp = getenv("TMPDIR");
    snprintf(b, sizeof bufs[0], "%s/txc-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(b);
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    fclose(f);
    return w == len ? 0 : -1;
}

void tu_rm_rf(const char *dir)
{
    char cmd[512];
    if (!dir || strlen(dir) < 10 || strstr(dir, "txc-test-") == NULL)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#include <math.h>
#include "txc/hf_config.h"
#include "txc/ops.h"

size_t tu_gpt2_tp_param_bytes(const txc_hf_config *c, int n)
{
    const int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int64_t split = 3 * H * H + 3 * H + H * I + I + H * H + I * H; /* per layer */
    int64_t rep = 2 * H + 2 * H + H + H;                            /* ln_1, ln_2, the c_proj biases */
    int64_t total = c->num_hidden_layers * (split / n + rep) + c->max_position_embeddings * H + 2 * H;
    total += (V % n ? V * H : V * H / n) * (c->tie_word_embeddings ? 1 : 2); /* wte (and an untied lm_head) */
    return (size_t)total * 4;
}

static double json_num(const cJSON *v)
{
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v) ? 1.0 : 0.0;
    if (cJSON_IsString(v)) {
        if (strcmp(v->valuestring, "nan") == 0) return NAN;
        if (strcmp(v->valuestring, "inf") == 0) return INFINITY;
        if (strcmp(v->valuestring, "-inf") == 0) return -INFINITY;
    }
    fail_msg("fixture: bad number");
    return 0;
}

/* An integer fixture value, exactly. cJSON keeps numbers as doubles only
 * (exact up to 2^53); tu_load_json gives the long integer literals their
 * text back in valuestring (see keep_long_integers), read here. */
static int64_t json_i64(const cJSON *v)
{
    if (cJSON_IsNumber(v) && v->valuestring)
        return strtoll(v->valuestring, NULL, 10); /* saturates outside int64 */
    double d = json_num(v);
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        fail_msg("fixture: %g is not an int64", d);
    return (int64_t)d;
}

static void json_shape(const cJSON *j, int *ndim, int64_t *shape)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "shape");
    assert_non_null(s);
    *ndim = cJSON_GetArraySize(s);
    assert_true(*ndim <= TXC_MAX_DIMS);
    for (int i = 0; i < *ndim; i++)
        shape[i] = (int64_t)cJSON_GetArrayItem(s, i)->valuedouble;
}

static txc_dtype json_dtype(const cJSON *j)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    txc_dtype dt = TXC_F32;
    assert_true(cJSON_IsString(d) && txc_dtype_parse(d->valuestring, &dt));
    return dt;
}

txc_tensor *tu_tensor_from_json(const cJSON *j)
{
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    json_shape(j, &ndim, shape);
    txc_dtype dt = json_dtype(j);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "transpose");
    int d0 = 0, d1 = 0;
    int64_t stored[TXC_MAX_DIMS];
    memcpy(stored, shape, sizeof stored);
    if (tr) {
        d0 = (int)cJSON_GetArrayItem(tr, 0)->valuedouble;
        d1 = (int)cJSON_GetArrayItem(tr, 1)->valuedouble;
        stored[d0] = shape[d1];
        stored[d1] = shape[d0];
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    int64_t n = txc_shape_numel(ndim, shape);
    assert_int_equal(cJSON_GetArraySize(data), n);
    void *buf = calloc((size_t)(n > 0 ? n : 1), txc_dtype_size(dt));
    int64_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, data)
    {
        if (dt == TXC_I64)
            ((int64_t *)buf)[i++] = json_i64(v);
        else
            txc_dtype_store(dt, buf, (size_t)i++, json_num(v));
    }
    txc_tensor *t = txc_tensor_from_data(NULL, dt, ndim, stored, buf);
    free(buf);
    assert_non_null(t);
    if (tr) {
        txc_tensor *v2 = txc_transpose(t, d0, d1);
        txc_tensor_release(t);
        t = v2;
        assert_non_null(t);
    }
    return t;
}

void tu_assert_tensor_close(const char *what, const txc_tensor *t, const cJSON *expected, double rtol, double atol)
{
    if (!t)
        fail_msg("%s: op failed: %s", what, txc_last_error());
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    json_shape(expected, &ndim, shape);
    txc_dtype dt = json_dtype(expected);
    if (txc_tensor_dtype(t) != dt)
        fail_msg("%s: dtype %s, expected %s", what, txc_dtype_name(txc_tensor_dtype(t)), txc_dtype_name(dt));
    if (txc_tensor_ndim(t) != ndim)
        fail_msg("%s: %d dims, expected %d", what, txc_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        if (txc_tensor_shape(t)[i] != shape[i])
            fail_msg("%s: dim %d is %lld, expected %lld", what, i, (long long)txc_tensor_shape(t)[i],
                     (long long)shape[i]);
    int64_t n = txc_tensor_numel(t);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(expected, "data");
    assert_int_equal(cJSON_GetArraySize(data), n);
    /* -0.0 and 0.0 differ only where the fixture asks ("signed_zeros": true) */
    bool signed_zeros = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expected, "signed_zeros"));
    const int64_t *st = txc_tensor_strides(t);
    int64_t idx[TXC_MAX_DIMS] = {0};
    const cJSON *v = data ? data->child : NULL;
    for (int64_t i = 0; i < n; i++, v = v->next) {
        if (dt == TXC_I64) { /* exactly, beyond 2^53 too */
            int64_t off = 0;
            for (int d = 0; d < ndim; d++)
                off += idx[d] * st[d];
            int64_t got = ((const int64_t *)txc_tensor_data_ptr(t))[off], want = json_i64(v);
            if (got != want)
                fail_msg("%s: element %lld is %lld, expected %lld", what, (long long)i, (long long)got,
                         (long long)want);
        } else {
            double got = txc_tensor_item_at(t, idx), want = json_num(v);
            bool ok = (isnan(want) && isnan(got)) || (isinf(want) && got == want) ||
                      (isfinite(want) && fabs(got - want) <= atol + rtol * fabs(want));
            if (ok && signed_zeros && want == 0.0)
                ok = got == 0.0 && signbit(got) == signbit(want);
            if (!ok)
                fail_msg("%s: element %lld is %.9g, expected %.9g (rtol %g, atol %g)", what, (long long)i, got,
                         want, rtol, atol);
        }
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
    }
}

/* The number items of a tree in document order. */
static void number_items(cJSON *j, cJSON ***items, size_t *n, size_t *cap)
{
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            if (*n == *cap) {
                *cap = *cap ? 2 * *cap : 1024;
                *items = realloc(*items, *cap * sizeof **items);
                assert_non_null(*items);
            }
            (*items)[(*n)++] = j;
        }
        number_items(j->child, items, n, cap);
    }
}

/* cJSON keeps a number as a double: an integer literal past 2^53 (an int64
 * fixture value) loses digits. Give each such literal its text back, in the
 * number item's valuestring (which cJSON_Delete frees), by walking the text's
 * number literals (outside strings) alongside the tree's number items. */
static void keep_long_integers(const char *text, cJSON *root)
{
    cJSON **items = NULL;
    size_t n = 0, cap = 0, k = 0;
    number_items(root, &items, &n, &cap);
    for (const char *p = text; *p; p++) {
        if (*p == '"') { /* a string (keys too): no literals inside */
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                break;
            continue;
        }
        if (*p != '-' && !(*p >= '0' && *p <= '9'))
            continue;
        size_t len = strspn(p, "-+0123456789.eE");
        if (k >= n)
            break; /* (not the tree's literals: leave the doubles alone) */
        bool integer = strcspn(p, ".eE") >= len;
        size_t digits = len - (*p == '-');
        if (integer && digits > 15 && len < 32) {
            char *s = cJSON_malloc(len + 1);
            assert_non_null(s);
            memcpy(s, p, len);
            s[len] = '\0';
            items[k]->valuestring = s;
        }
        k++;
        p += len - 1;
    }
    free(items);
}

cJSON *tu_load_json(const char *rel)
{
    const char *path = tu_path("%s/%s", tu_source_dir(), rel);
    char *text = tu_read_file(path, NULL);
    if (!text)
        fail_msg("cannot read %s", path);
    cJSON *j = cJSON_Parse(text);
    if (!j)
        fail_msg("%s is not valid JSON", path);
    keep_long_integers(text, j);
    free(text);
    return j;
}

/* ---- counting the heap (see testutil.h) --------------------------------------- */

static long heap_calls;

long tu_heap_calls(void) { return __atomic_load_n(&heap_calls, __ATOMIC_RELAXED); }

#if TU_HEAP_COUNTED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static void note(void) { __atomic_add_fetch(&heap_calls, 1, __ATOMIC_RELAXED); }

void *malloc(size_t n)
{
    note();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    note();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    note();
    return __libc_realloc(p, n);
}
void free(void *p)
{
    if (p)
        note();
    __libc_free(p);
}
void *aligned_alloc(size_t al, size_t n)
{
    note();
    return __libc_memalign(al, n);
}
void *memalign(size_t al, size_t n)
{
    note();
    return __libc_memalign(al, n);
}
int posix_memalign(void **p, size_t al, size_t n)
{
    note();
    *p = __libc_memalign(al, n);
    return *p ? 0 : 12; /* ENOMEM */
}
#endif

long tu_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) {
            v = strtol(line + kl, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static uint16_t tu_bf16_bits(uint32_t *rng)
{
    *rng = *rng * 1664525u + 1013904223u;
    /* a value in about +-0.06: sign, exponent 2^-5..2^-4, 7 random mantissa bits */
    uint32_t r = *rng >> 9;
    return (uint16_t)(((r & 1) << 15) | ((0x7a + ((r >> 1) & 1)) << 7) | ((r >> 2) & 0x7f));
}

size_t tu_write_llama_folder(const char *dir, int64_t h, int64_t inter, int layers, int64_t vocab, int heads,
                             int kv_heads, int bf16, size_t *rowwise, size_t *big)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": %lld, "
             "\"intermediate_size\": %lld, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"num_key_value_heads\": %d, \"vocab_size\": %lld, \"max_position_embeddings\": 256, "
             "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"hidden_act\": \"silu\", "
             "\"tie_word_embeddings\": false, \"torch_dtype\": \"%s\"}",
             (long long)h, (long long)inter, layers, heads, kv_heads, (long long)vocab, bf16 ? "bfloat16" : "float32");
    assert_int_equal(tu_write_file(tu_path("%s/config.json", dir), cfg, strlen(cfg)), 0);
    const int n_t = 3 + 9 * layers;
    struct tu_st {
        char name[96];
        int64_t r, c; /* c == 0: 1-d */
    } *t = calloc((size_t)n_t, sizeof *t);
    assert_non_null(t);
    int n = 0;
    snprintf(t[n].name, 96, "model.embed_tokens.weight"), t[n].r = vocab, t[n++].c = h;
    snprintf(t[n].name, 96, "model.norm.weight"), t[n].r = h, t[n++].c = 0;
    snprintf(t[n].name, 96, "lm_head.weight"), t[n].r = vocab, t[n++].c = h;
    const size_t es = bf16 ? 2 : 4;
    const int64_t kv = h / heads * kv_heads;
    size_t rw = 0, bg = 0, maxn = 0;
    for (int l = 0; l < layers; l++) {
        static const char *const names[] = {"input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
                                            "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
        const int64_t rows[] = {h, h, h, kv, kv, h, inter, inter, h}, cols[] = {0, 0, h, h, h, h, h, h, inter};
        for (int k = 0; k < 9; k++) {
            snprintf(t[n].name, 96, "model.layers.%d.%s.weight", l, names[k]);
            t[n].r = rows[k];
            t[n++].c = cols[k];
            if (k == 5 || k == 8) {
                size_t b = (size_t)rows[k] * (size_t)cols[k] * es;
                rw += b;
                bg = b > bg ? b : bg;
            }
        }
    }
    size_t hcap = 256 * (size_t)n_t + 64, hl = 0, off = 0;
    char *hdr = malloc(hcap);
    assert_non_null(hdr);
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "{");
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].r * (size_t)(t[i].c ? t[i].c : 1), bytes = cnt * es;
        maxn = cnt > maxn ? cnt : maxn;
        if (t[i].c)
            hl += (size_t)snprintf(hdr + hl, hcap - hl,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", t[i].name, bf16 ? "BF16" : "F32", (long long)t[i].r,
                                   (long long)t[i].c, off, off + bytes);
        else
            hl += (size_t)snprintf(hdr + hl, hcap - hl,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", t[i].name, bf16 ? "BF16" : "F32", (long long)t[i].r, off,
                                   off + bytes);
        off += bytes;
    }
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "}");
    assert_true(hl + 8 < hcap);
    while (hl % 8)
        hdr[hl++] = ' ';
    FILE *f = fopen(tu_path("%s/model.safetensors", dir), "wb");
    assert_non_null(f);
    uint64_t len = hl;
    assert_int_equal(fwrite(&len, 8, 1, f), 1); /* little-endian hosts (x86-64, arm64) */
    assert_int_equal(fwrite(hdr, 1, hl, f), hl);
    void *buf = malloc(maxn * es);
    assert_non_null(buf);
    uint32_t rng = 12345;
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].r * (size_t)(t[i].c ? t[i].c : 1);
        for (size_t k = 0; k < cnt; k++) {
            uint16_t b = t[i].c ? tu_bf16_bits(&rng) : 0x3f80; /* norms: 1.0 */
            if (bf16) {
                ((uint16_t *)buf)[k] = b;
            } else {
                uint32_t u = (uint32_t)b << 16;
                memcpy((float *)buf + k, &u, 4);
            }
        }
        assert_int_equal(fwrite(buf, es, cnt, f), cnt);
    }
    assert_int_equal(fclose(f), 0);
    free(buf);
    free(hdr);
    free(t);
    if (rowwise)
        *rowwise = rw;
    if (big)
        *big = bg;
    return off;
}

pthread_mutex_t tu_device_lock = PTHREAD_MUTEX_INITIALIZER;
char tu_device_failure[2048];

void tu_device_fail(int line, const char *fmt, ...)
{
    pthread_mutex_lock(&tu_device_lock);
    if (!tu_device_failure[0]) {
        int o = snprintf(tu_device_failure, sizeof tu_device_failure, "device %d, line %d: ", txc_device_index(), line);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tu_device_failure + o, sizeof tu_device_failure - (size_t)o, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&tu_device_lock);
}
