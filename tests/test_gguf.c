/* GGUF: the reader (every value type, nested arrays, alignment, each
 * malformed file refused with one message), a model from a GGUF equal to
 * the same weights' safetensors folder (logits bit for bit, through the
 * q/k row permutation of convert_hf_to_gguf.py's LlamaModel.permute), and
 * the tokenizer from tokenizer.ggml.* equal to the tokenizer.json it was
 * written from. The GGUF files are written here by a small writer that
 * follows ggml's gguf.cpp layout. */
#include "testutil.h"
#include "txc/gguf.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/safetensors.h"
#include "txc/tokenizer.h"
#include "txc/chat_template.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a GGUF writer ------------------------------------------------------------- */

typedef struct gbuf {
    uint8_t *p;
    size_t n, cap;
} gbuf;

static void put(gbuf *b, const void *d, size_t n)
{
    if (!n)
        return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u8(gbuf *b, uint8_t v) { put(b, &v, 1); }
static void u32(gbuf *b, uint32_t v) { put(b, &v, 4); } /* little-endian host (x86-64) */
static void u64(gbuf *b, uint64_t v) { put(b, &v, 8); }
static void f32(gbuf *b, float v) { put(b, &v, 4); }
static void str(gbuf *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

typedef struct gtensor {
    char name[64];
    uint32_t type;
    int n_dims;
    uint64_t ne[5]; /* one more than GGUF allows: the n_dims 5 case */
    const void *data;
    size_t nbytes;
} gtensor;

typedef struct gfile {
    gbuf kv;        /* the metadata entries, already encoded */
    uint64_t n_kv;
    gtensor *t;
    int n_t;
    uint32_t version;
} gfile;

static void kv_key(gfile *f, const char *key, uint32_t type)
{
    str(&f->kv, key);
    u32(&f->kv, type);
    f->n_kv++;
}
static void kv_u32(gfile *f, const char *key, uint32_t v) { kv_key(f, key, TXC_GGUF_UINT32), u32(&f->kv, v); }
static void kv_f32(gfile *f, const char *key, float v) { kv_key(f, key, TXC_GGUF_FLOAT32), f32(&f->kv, v); }
static void kv_bool(gfile *f, const char *key, bool v) { kv_key(f, key, TXC_GGUF_BOOL), u8(&f->kv, v); }
static void kv_str(gfile *f, const char *key, const char *v) { kv_key(f, key, TXC_GGUF_STRING), str(&f->kv, v); }

static void add_tensor(gfile *f, const char *name, uint32_t type, int n_dims, const uint64_t *ne, const void *data,
                       size_t nbytes)
{
    f->t = realloc(f->t, (size_t)(f->n_t + 1) * sizeof *f->t);
    assert_non_null(f->t);
    gtensor *t = &f->t[f->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, (size_t)n_dims * sizeof *ne);
    t->data = data;
    t->nbytes = nbytes;
}

/* The file: header, metadata, tensor infos (offsets padded to 32), data. */
static gbuf gguf_bytes(const gfile *f)
{
    gbuf b = {0};
    put(&b, "GGUF", 4);
    u32(&b, f->version ? f->version : 3);
    u64(&b, (uint64_t)f->n_t);
    u64(&b, f->n_kv);
    put(&b, f->kv.p, f->kv.n);
    uint64_t off = 0;
    for (int i = 0; i < f->n_t; i++) {
        str(&b, f->t[i].name);
        u32(&b, (uint32_t)f->t[i].n_dims);
        for (int d = 0; d < f->t[i].n_dims; d++)
            u64(&b, f->t[i].ne[d]);
        u32(&b, f->t[i].type);
        u64(&b, off);
        off += (f->t[i].nbytes + 31) / 32 * 32;
    }
    static const uint8_t zero[32];
    put(&b, zero, (32 - b.n % 32) % 32);
    for (int i = 0; i < f->n_t; i++) {
        put(&b, f->t[i].data, f->t[i].nbytes);
        put(&b, zero, (32 - f->t[i].nbytes % 32) % 32);
    }
    return b;
}

static void gfile_free(gfile *f)
{
    free(f->kv.p);
    free(f->t);
    memset(f, 0, sizeof *f);
}

static const char *write_tmp(const char *name, const gbuf *b)
{
    const char *dir = tu_mkdtemp();
    const char *path = tu_path("%s/%s", dir, name);
    assert_int_equal(tu_write_file(path, b->p, b->n), 0);
    return path;
}

/* ---- the reader ---------------------------------------------------------------- */

static float F[6] = {1, 2, 3, 4, 5, 6};

/* A file with every value type, an array of arrays, two tensors. */
static gfile sample(void)
{
    gfile f = {0};
    kv_str(&f, "general.architecture", "llama");
    kv_key(&f, "v.u8", TXC_GGUF_UINT8), u8(&f.kv, 200);
    kv_key(&f, "v.i8", TXC_GGUF_INT8), u8(&f.kv, (uint8_t)-5);
    kv_key(&f, "v.u16", TXC_GGUF_UINT16), put(&f.kv, (uint16_t[]){65000}, 2);
    kv_key(&f, "v.i16", TXC_GGUF_INT16), put(&f.kv, (int16_t[]){-300}, 2);
    kv_u32(&f, "v.u32", 4000000000u);
    kv_key(&f, "v.i32", TXC_GGUF_INT32), put(&f.kv, (int32_t[]){-70000}, 4);
    kv_f32(&f, "v.f32", 0.5f);
    kv_bool(&f, "v.bool", true);
    kv_key(&f, "v.u64", TXC_GGUF_UINT64), u64(&f.kv, 1ull << 40);
    kv_key(&f, "v.i64", TXC_GGUF_INT64), u64(&f.kv, (uint64_t)-(1ll << 40));
    kv_key(&f, "v.f64", TXC_GGUF_FLOAT64), put(&f.kv, (double[]){-2.25}, 8);
    kv_key(&f, "v.arr_i32", TXC_GGUF_ARRAY), u32(&f.kv, TXC_GGUF_INT32), u64(&f.kv, 3);
    put(&f.kv, (int32_t[]){7, -8, 9}, 12);
    kv_key(&f, "v.arr_str", TXC_GGUF_ARRAY), u32(&f.kv, TXC_GGUF_STRING), u64(&f.kv, 2);
    str(&f.kv, "ab"), str(&f.kv, "");
    kv_key(&f, "v.nested", TXC_GGUF_ARRAY), u32(&f.kv, TXC_GGUF_ARRAY), u64(&f.kv, 2);
    u32(&f.kv, TXC_GGUF_FLOAT32), u64(&f.kv, 1), f32(&f.kv, 1.5f);
    u32(&f.kv, TXC_GGUF_STRING), u64(&f.kv, 1), str(&f.kv, "x");
    add_tensor(&f, "a", 0, 2, (uint64_t[]){3, 2}, F, sizeof F);
    add_tensor(&f, "b", 0, 1, (uint64_t[]){2}, F, 8);
    return f;
}

static void test_reader_values(void **state)
{
    (void)state;
    for (uint32_t version = 2; version <= 3; version++) {
        gfile f = sample();
        f.version = version;
        gbuf b = gguf_bytes(&f);
        txc_gguf *g = NULL;
        assert_int_equal(txc_gguf_open_memory(b.p, b.n, "sample", &g), TXC_OK);
        assert_int_equal(txc_gguf_version(g), version);
        assert_int_equal(txc_gguf_kv_count(g), 15);
        int64_t i;
        double d;
        bool bv;
        txc_gguf_str s;
        assert_true(txc_gguf_get_i64(g, "v.u8", &i, NULL) && i == 200);
        assert_true(txc_gguf_get_i64(g, "v.i8", &i, NULL) && i == -5);
        assert_true(txc_gguf_get_i64(g, "v.u16", &i, NULL) && i == 65000);
        assert_true(txc_gguf_get_i64(g, "v.i16", &i, NULL) && i == -300);
        assert_true(txc_gguf_get_i64(g, "v.u32", &i, NULL) && i == 4000000000ll);
        assert_true(txc_gguf_get_i64(g, "v.i32", &i, NULL) && i == -70000);
        assert_true(txc_gguf_get_f64(g, "v.f32", &d, NULL) && d == 0.5);
        assert_true(txc_gguf_get_bool(g, "v.bool", &bv, NULL) && bv);
        assert_true(txc_gguf_get_i64(g, "v.u64", &i, NULL) && i == 1ll << 40);
        assert_true(txc_gguf_get_i64(g, "v.i64", &i, NULL) && i == -(1ll << 40));
        assert_true(txc_gguf_get_f64(g, "v.f64", &d, NULL) && d == -2.25);
        assert_true(txc_gguf_get_str(g, "general.architecture", &s, NULL) && s.len == 5 && !memcmp(s.data, "llama", 5));
        const txc_gguf_value *a = txc_gguf_find(g, "v.arr_i32");
        assert_non_null(a);
        assert_int_equal(a->v.arr.n, 3);
        assert_int_equal(txc_gguf_array_i64(a, 1), -8);
        a = txc_gguf_find(g, "v.arr_str");
        assert_int_equal(a->v.arr.items[0].v.str.len, 2);
        assert_int_equal(a->v.arr.items[1].v.str.len, 0);
        a = txc_gguf_find(g, "v.nested");
        assert_int_equal(a->v.arr.type, TXC_GGUF_ARRAY);
        assert_true(txc_gguf_array_f64(&a->v.arr.items[0], 0) == 1.5);
        assert_int_equal(a->v.arr.items[1].v.arr.items[0].v.str.data[0], 'x');
        /* a wrong type is an error naming the key */
        bool bad = false;
        assert_false(txc_gguf_get_i64(g, "general.architecture", &i, &bad));
        assert_true(bad);
        assert_non_null(strstr(txc_last_error(), "general.architecture"));
        txc_clear_error();
        assert_false(txc_gguf_get_i64(g, "absent", &i, NULL));
        /* tensors: torch-order shape, data in place */
        const txc_gguf_tensor *t = txc_gguf_find_tensor(g, "a");
        assert_non_null(t);
        assert_int_equal(t->shape[0], 2);
        assert_int_equal(t->shape[1], 3);
        assert_int_equal(t->nbytes, 24);
        assert_int_equal(t->byte_offset % 32, 0);
        assert_memory_equal(t->data, F, 24);
        assert_ptr_equal(t->data, b.p + t->byte_offset);
        assert_null(txc_gguf_find_tensor(g, "c"));
        txc_gguf_close(g);
        free(b.p);
        gfile_free(&f);
    }
}

/* Every proper prefix of a valid file is refused with one message, never a crash. */
static void test_reader_truncated(void **state)
{
    (void)state;
    gfile f = sample();
    gbuf b = gguf_bytes(&f);
    /* the last tensor's padding is not needed: cut inside its data */
    size_t need = b.n - 32 + 8;
    for (size_t n = 0; n < need; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        txc_gguf *g = (txc_gguf *)1;
        txc_clear_error();
        txc_status s = txc_gguf_open_memory(copy, n, "cut", &g);
        if (s != TXC_ERR_FORMAT)
            fail_msg("prefix %zu of %zu: status %d", n, b.n, s);
        assert_null(g);
        assert_non_null(strstr(txc_last_error(), "cut: "));
        assert_null(strchr(txc_last_error(), '\n'));
        free(copy);
    }
    free(b.p);
    gfile_free(&f);
}

/* One malformed file: the status and a piece of the message. */
static void expect_bad(const gbuf *b, txc_status want, const char *msg)
{
    txc_gguf *g = NULL;
    txc_clear_error();
    txc_status s = txc_gguf_open_memory(b->p, b->n, "bad.gguf", &g);
    if (s != want || !strstr(txc_last_error(), msg))
        fail_msg("expected %d '%s', got %d '%s'", want, msg, s, txc_last_error());
    assert_null(g);
}

static void test_reader_errors(void **state)
{
    (void)state;
    gfile f = sample();
    gbuf b = gguf_bytes(&f);
    gbuf c = {0};
    put(&c, b.p, b.n);
#define RESET() memcpy(c.p, b.p, b.n), c.n = b.n
    c.p[0] = 'X';
    expect_bad(&c, TXC_ERR_FORMAT, "not a GGUF file");
    RESET();
    c.p[4] = 1;
    expect_bad(&c, TXC_ERR_FORMAT, "version 1 is not supported");
    RESET();
    c.p[4] = 4;
    expect_bad(&c, TXC_ERR_FORMAT, "version 4 is not supported");
    RESET();
    memcpy(c.p + 4, (uint8_t[]){0, 0, 0, 3}, 4);
    expect_bad(&c, TXC_ERR_FORMAT, "big-endian");
    RESET();
    memcpy(c.p + 8, (uint64_t[]){1ull << 60}, 8); /* tensor_count */
    expect_bad(&c, TXC_ERR_FORMAT, "tensor_count");
    RESET();
    memcpy(c.p + 16, (uint64_t[]){1ull << 40}, 8); /* metadata_kv_count */
    expect_bad(&c, TXC_ERR_FORMAT, "metadata_kv_count");
    RESET();
    memcpy(c.p + 24, (uint64_t[]){1ull << 50}, 8); /* the first key's length */
    expect_bad(&c, TXC_ERR_FORMAT, "past the end of the file");
    gfile_free(&f);
    free(b.p);
    free(c.p);

    /* an array count past the file, a type that is none, nesting too deep */
    f = (gfile){0};
    kv_key(&f, "arr", TXC_GGUF_ARRAY), u32(&f.kv, TXC_GGUF_UINT64), u64(&f.kv, 1ull << 61);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "key 'arr': array at byte");
    free(b.p), gfile_free(&f);
    kv_key(&f, "odd", 13), u8(&f.kv, 0);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "value type 13 is not a GGUF value type");
    free(b.p), gfile_free(&f);
    kv_key(&f, "deep", TXC_GGUF_ARRAY);
    for (int i = 0; i < TXC_GGUF_MAX_DEPTH + 1; i++)
        u32(&f.kv, TXC_GGUF_ARRAY), u64(&f.kv, 1);
    u32(&f.kv, TXC_GGUF_UINT8), u64(&f.kv, 0);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "nested deeper");
    free(b.p), gfile_free(&f);
    /* a key twice; a bool that is 2; alignment not a power of two, or not u32 */
    kv_u32(&f, "k", 1), kv_u32(&f, "k", 2);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "'k' appears twice");
    free(b.p), gfile_free(&f);
    kv_key(&f, "flag", TXC_GGUF_BOOL), u8(&f.kv, 2);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "neither 0 nor 1");
    free(b.p), gfile_free(&f);
    kv_u32(&f, "general.alignment", 24);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "not a power of two");
    free(b.p), gfile_free(&f);
    kv_str(&f, "general.alignment", "32");
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "general.alignment is str");
    free(b.p), gfile_free(&f);

    /* tensors: unknown type id, overlap, data past the end, misaligned offset,
     * a name twice, too many dims, ne[0] not a block multiple, a long name */
    add_tensor(&f, "w", 4, 1, (uint64_t[]){6}, F, 24); /* ggml type 4 was removed (Q4_2) */
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "tensor 'w' has unknown ggml type 4");
    free(b.p), gfile_free(&f);
    add_tensor(&f, "w", 99, 1, (uint64_t[]){6}, F, 24);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "unknown ggml type 99");
    free(b.p), gfile_free(&f);
    add_tensor(&f, "x", 0, 1, (uint64_t[]){6}, F, 24);
    add_tensor(&f, "y", 0, 1, (uint64_t[]){6}, F, 24);
    b = gguf_bytes(&f);
    /* y's offset (32) -> 0: on top of x */
    /* header 24, x's info 33 bytes, then y's: name 9, n_dims 4, ne 8, type 4, offset */
    size_t y_off = 24 + 33 + 9 + 4 + 8 + 4;
    assert_int_equal(b.p[24 + 33 + 8], 'y');
    memcpy(b.p + y_off, (uint64_t[]){0}, 8);
    expect_bad(&b, TXC_ERR_FORMAT, "tensors 'x'");
    expect_bad(&b, TXC_ERR_FORMAT, "overlap");
    memcpy(b.p + y_off, (uint64_t[]){16}, 8);
    expect_bad(&b, TXC_ERR_FORMAT, "not a multiple of the alignment");
    memcpy(b.p + y_off, (uint64_t[]){1024}, 8);
    expect_bad(&b, TXC_ERR_FORMAT, "runs past the end of the file");
    free(b.p), gfile_free(&f);
    add_tensor(&f, "x", 0, 1, (uint64_t[]){6}, F, 24);
    add_tensor(&f, "x", 0, 1, (uint64_t[]){6}, F, 24);
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "tensor 'x' appears twice");
    free(b.p), gfile_free(&f);
    add_tensor(&f, "x", 0, 1, (uint64_t[]){6}, F, 24);
    f.t[0].n_dims = 5;
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "n_dims 5");
    free(b.p), gfile_free(&f);
    add_tensor(&f, "q", 2, 1, (uint64_t[]){16}, F, 9); /* Q4_0: blocks of 32 */
    b = gguf_bytes(&f);
    expect_bad(&b, TXC_ERR_FORMAT, "not a multiple of its block size 32");
    free(b.p), gfile_free(&f);
    char longname[80];
    memset(longname, 'n', 70);
    longname[70] = 0;
    add_tensor(&f, "x", 0, 1, (uint64_t[]){6}, F, 24);
    gbuf hb = {0};
    put(&hb, "GGUF", 4), u32(&hb, 3), u64(&hb, 1), u64(&hb, 0), str(&hb, longname), u32(&hb, 1), u64(&hb, 6);
    u32(&hb, 0), u64(&hb, 0);
    static const uint8_t pad[64];
    put(&hb, pad, 64);
    expect_bad(&hb, TXC_ERR_FORMAT, "name is 70 bytes");
    free(hb.p), gfile_free(&f);
    /* a file on disk that is missing */
    txc_gguf *g = NULL;
    txc_clear_error();
    assert_int_equal(txc_gguf_open("/nonexistent/x.gguf", &g), TXC_ERR_IO);
    assert_null(g);
}

/* ---- a model: stories260K's safetensors as a GGUF ----------------------------------- */

/* The safetensors tensor `name` (f32) of stories260K. */
static const txc_st_tensor *st_get(txc_safetensors *st, const char *name)
{
    const txc_st_tensor *t = txc_safetensors_find(st, name);
    if (!t)
        fail_msg("stories260K has no %s", name);
    return t;
}

/* convert_hf_to_gguf.py LlamaModel.permute: reshape(n_head, 2, rows/n_head/2, in).swapaxes(1, 2). */
static float *permute(const float *w, int64_t rows, int64_t cols, int64_t n_head)
{
    float *out = malloc((size_t)(rows * cols) * sizeof *out);
    int64_t d = rows / n_head, half = d / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++) /* out row h*d + 2i + j <- in row h*d + j*half + i */
                memcpy(out + (h * d + 2 * i + j) * cols, w + (h * d + j * half + i) * cols, (size_t)cols * 4);
    return out;
}

static int dup_token = -1; /* > 0: token dup_token written with token dup_token - 1's string */

/* The tokenizer.json of `dir` as tokenizer.ggml.* (as convert_hf_to_gguf.py's
 * _set_vocab_sentencepiece / _set_vocab_gpt2 write them). */
static void add_vocab(gfile *f, const char *tokjson, bool spm, const char *pre, int64_t bos)
{
    size_t len;
    char *text = tu_read_file(tokjson, &len);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    cJSON *vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "vocab");
    cJSON *added = cJSON_GetObjectItem(root, "added_tokens");
    int n = 0;
    for (cJSON *e = vocab->child; e; e = e->next)
        n = (int)e->valuedouble + 1 > n ? (int)e->valuedouble + 1 : n;
    for (cJSON *e = added->child; e; e = e->next)
        n = (int)cJSON_GetObjectItem(e, "id")->valuedouble + 1 > n ? (int)cJSON_GetObjectItem(e, "id")->valuedouble + 1
                                                                   : n;
    const char **tok = calloc((size_t)n, sizeof *tok);
    int32_t *type = calloc((size_t)n, sizeof *type);
    for (cJSON *e = vocab->child; e; e = e->next) {
        int id = (int)e->valuedouble;
        tok[id] = e->string;
        type[id] = spm && strlen(e->string) == 6 && !strncmp(e->string, "<0x", 3) ? 6 : 1;
    }
    for (cJSON *e = added->child; e; e = e->next) {
        int id = (int)cJSON_GetObjectItem(e, "id")->valuedouble;
        tok[id] = cJSON_GetObjectItem(e, "content")->valuestring;
        type[id] = cJSON_IsTrue(cJSON_GetObjectItem(e, "special")) ? 3 : 4;
    }
    if (dup_token > 0 && dup_token < n)
        tok[dup_token] = tok[dup_token - 1];
    kv_str(f, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (pre)
        kv_str(f, "tokenizer.ggml.pre", pre);
    kv_key(f, "tokenizer.ggml.tokens", TXC_GGUF_ARRAY), u32(&f->kv, TXC_GGUF_STRING), u64(&f->kv, (uint64_t)n);
    for (int i = 0; i < n; i++)
        str(&f->kv, tok[i] ? tok[i] : "");
    kv_key(f, "tokenizer.ggml.token_type", TXC_GGUF_ARRAY), u32(&f->kv, TXC_GGUF_INT32), u64(&f->kv, (uint64_t)n);
    put(&f->kv, type, (size_t)n * 4);
    if (spm) { /* sentencepiece's BPE scores: -id */
        kv_key(f, "tokenizer.ggml.scores", TXC_GGUF_ARRAY), u32(&f->kv, TXC_GGUF_FLOAT32), u64(&f->kv, (uint64_t)n);
        for (int i = 0; i < n; i++)
            f32(&f->kv, (float)-i);
    } else {
        cJSON *merges = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "merges");
        kv_key(f, "tokenizer.ggml.merges", TXC_GGUF_ARRAY), u32(&f->kv, TXC_GGUF_STRING);
        u64(&f->kv, (uint64_t)cJSON_GetArraySize(merges));
        for (cJSON *m = merges->child; m; m = m->next) {
            if (cJSON_IsString(m)) {
                str(&f->kv, m->valuestring);
            } else { /* ["a", "b"] -> "a b" */
                char buf[512];
                snprintf(buf, sizeof buf, "%s %s", m->child->valuestring, m->child->next->valuestring);
                str(&f->kv, buf);
            }
        }
    }
    if (bos >= 0) {
        kv_u32(f, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
        kv_bool(f, "tokenizer.ggml.add_bos_token", spm);
    }
    if (spm)
        kv_u32(f, "tokenizer.ggml.unknown_token_id", 0);
    free(tok);
    free(type);
    cJSON_Delete(root);
}

static const char *stories_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

/* stories260K (llama, f32) written as convert_hf_to_gguf.py writes it. */
static const float *extra_rope_freqs; /* a rope_freqs.weight (4 factors) to add, NULL: none */
static bool no_space_prefix;          /* write tokenizer.ggml.add_space_prefix false */
static bool extra_block;              /* add blk.5.attn_norm.weight (block_count is 5) */

static gbuf stories_gguf(const char *arch, bool do_permute, float ***owned, int *n_owned)
{
    txc_safetensors *st;
    assert_int_equal(txc_safetensors_open(stories_dir(), &st), TXC_OK);
    gfile f = {0};
    kv_str(&f, "general.architecture", arch);
    char key[96];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    kv_u32(&f, K("context_length"), 512);
    kv_u32(&f, K("embedding_length"), 64);
    kv_u32(&f, K("block_count"), 5);
    kv_u32(&f, K("feed_forward_length"), 172);
    kv_u32(&f, K("attention.head_count"), 8);
    kv_u32(&f, K("attention.head_count_kv"), 4);
    kv_f32(&f, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    kv_f32(&f, K("rope.freq_base"), 10000.0f);
    kv_u32(&f, K("rope.dimension_count"), 8);
    kv_u32(&f, K("attention.key_length"), 8);
#undef K
    add_vocab(&f, tu_path("%s/tokenizer.json", stories_dir()), true, NULL, 1);
    kv_u32(&f, "tokenizer.ggml.eos_token_id", 2);
    if (no_space_prefix)
        kv_bool(&f, "tokenizer.ggml.add_space_prefix", false);
    kv_str(&f, "tokenizer.chat_template", "{% for m in messages %}{{ bos_token }}{{ m['content'] }}{{ eos_token }}{% endfor %}");
    *owned = calloc(16, sizeof **owned);
    *n_owned = 0;
    static const char *const names[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"}, {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    const txc_st_tensor *t = st_get(st, "model.embed_tokens.weight");
    add_tensor(&f, "token_embd.weight", 0, 2, (uint64_t[]){64, 512}, t->data, t->nbytes);
    for (int l = 0; l < 5; l++)
        for (int j = 0; j < 9; j++) {
            char hf[128], gg[64];
            snprintf(hf, sizeof hf, "model.layers.%d.%s", l, names[j][0]);
            snprintf(gg, sizeof gg, "blk.%d.%s", l, names[j][1]);
            t = st_get(st, hf);
            const void *data = t->data;
            if (do_permute && (j == 1 || j == 2)) {
                float *p = permute(t->data, t->shape[0], t->shape[1], j == 1 ? 8 : 4);
                (*owned)[(*n_owned)++] = p;
                data = p;
            }
            uint64_t ne[2] = {t->ndim == 2 ? (uint64_t)t->shape[1] : (uint64_t)t->shape[0],
                              t->ndim == 2 ? (uint64_t)t->shape[0] : 1};
            add_tensor(&f, gg, 0, t->ndim, ne, data, t->nbytes);
        }
    t = st_get(st, "model.norm.weight");
    add_tensor(&f, "output_norm.weight", 0, 1, (uint64_t[]){64}, t->data, t->nbytes);
    if (extra_rope_freqs)
        add_tensor(&f, "rope_freqs.weight", 0, 1, (uint64_t[]){4}, extra_rope_freqs, 16);
    if (extra_block)
        add_tensor(&f, "blk.5.attn_norm.weight", 0, 1, (uint64_t[]){64}, t->data, t->nbytes);
    gbuf b = gguf_bytes(&f);
    gfile_free(&f);
    txc_safetensors_close(st);
    return b;
}

static void free_owned(float **owned, int n)
{
    for (int i = 0; i < n; i++)
        free(owned[i]);
    free(owned);
}

static txc_tensor *logits_of(txc_model *m, const int64_t *ids, int64_t n)
{
    txc_env *env = txc_model_env(m);
    txc_tensor *in = txc_tensor_from_data(env, TXC_I64, 2, (int64_t[]){1, n}, ids);
    return txc_model_forward(m, in, NULL, NULL, txc_arange(env, 0, (double)n, 1, TXC_I64), 0);
}

/* The GGUF's logits equal the folder's, bit for bit (the permutation undone);
 * and without undoing it they would not (the test can fail). */
static void test_model_logits_equal(void **state)
{
    (void)state;
    float **owned;
    int n_owned;
    gbuf b = stories_gguf("llama", true, &owned, &n_owned);
    const char *path = write_tmp("stories260k.gguf", &b);
    txc_model *mf = NULL, *mg = NULL;
    assert_int_equal(txc_model_load(stories_dir(), NULL, &mf), TXC_OK);
    if (txc_model_load(path, NULL, &mg) != TXC_OK)
        fail_msg("%s", txc_last_error());
    const txc_hf_config *c = txc_model_config(mg);
    assert_string_equal(c->model_type, "llama");
    assert_int_equal(c->num_key_value_heads, 4);
    assert_true(c->tie_word_embeddings);
    assert_int_equal(c->n_eos, 1);
    assert_int_equal(c->eos_token_id[0], 2);
    assert_int_equal(txc_model_num_parameters(mg), txc_model_num_parameters(mf));
    txc_env *env = txc_model_env(mf);
    int mark = txc_env_scope_begin(env);
    int64_t ids[7] = {1, 403, 407, 261, 378, 432, 290};
    txc_tensor *a = logits_of(mf, ids, 7), *g = logits_of(mg, ids, 7);
    assert_non_null(a);
    assert_non_null(g);
    assert_int_equal(txc_tensor_numel(a), 7 * 512);
    assert_memory_equal(txc_tensor_data_ptr(txc_contiguous(a)), txc_tensor_data_ptr(txc_contiguous(g)), 7 * 512 * 4);
    txc_env_scope_end(env, mark);
    txc_model_free(mg);
    free(b.p);
    free_owned(owned, n_owned);

    /* the same file without the converter's permutation: the loader's undoing
     * it now scrambles q and k, and the logits differ (the permutation matters) */
    b = stories_gguf("llama", false, &owned, &n_owned);
    path = write_tmp("unpermuted.gguf", &b);
    assert_int_equal(txc_model_load(path, NULL, &mg), TXC_OK);
    mark = txc_env_scope_begin(env);
    a = logits_of(mf, ids, 7), g = logits_of(mg, ids, 7);
    assert_memory_not_equal(txc_tensor_data_ptr(txc_contiguous(a)), txc_tensor_data_ptr(txc_contiguous(g)), 7 * 512 * 4);
    txc_env_scope_end(env, mark);
    txc_model_free(mg);
    free(b.p);
    free_owned(owned, n_owned);
    txc_model_free(mf);
}

/* rope_freqs.weight (llama3's factors, as llama.cpp applies them): factors of 1
 * give the folder's logits; others change them. */
static void test_rope_freqs(void **state)
{
    (void)state;
    txc_model *mf = NULL, *mg = NULL;
    assert_int_equal(txc_model_load(stories_dir(), NULL, &mf), TXC_OK);
    txc_env *env = txc_model_env(mf);
    int64_t ids[5] = {1, 403, 407, 261, 378};
    static const float ones[4] = {1, 1, 1, 1}, llama3[4] = {1, 1.5f, 4, 8};
    for (int k = 0; k < 2; k++) {
        float **owned;
        int n_owned;
        extra_rope_freqs = k ? llama3 : ones;
        gbuf b = stories_gguf("llama", true, &owned, &n_owned);
        extra_rope_freqs = NULL;
        const char *path = write_tmp("freqs.gguf", &b);
        if (txc_model_load(path, NULL, &mg) != TXC_OK)
            fail_msg("%s", txc_last_error());
        float *inv = txc_tensor_data_ptr(txc_model_rope_inv_freq(mg));
        float *ref = txc_tensor_data_ptr(txc_model_rope_inv_freq(mf));
        for (int i = 0; i < 4; i++) /* base^(-2i/d) / factor */
            assert_float_equal(inv[i], ref[i] / (k ? llama3[i] : 1.0f), 1e-7 * ref[i]);
        int mark = txc_env_scope_begin(env);
        txc_tensor *a = logits_of(mf, ids, 5), *g = logits_of(mg, ids, 5);
        int same = memcmp(txc_tensor_data_ptr(txc_contiguous(a)), txc_tensor_data_ptr(txc_contiguous(g)), 5 * 512 * 4);
        assert_true(k ? same != 0 : same == 0);
        txc_env_scope_end(env, mark);
        txc_model_free(mg);
        free(b.p);
        free_owned(owned, n_owned);
    }
    txc_model_free(mf);
}

/* The GGUF's tokenizer (merges from the scores) and chat template. */
static void test_spm_tokenizer(void **state)
{
    (void)state;
    float **owned;
    int n_owned;
    gbuf b = stories_gguf("llama", true, &owned, &n_owned);
    const char *path = write_tmp("stories260k.gguf", &b);
    txc_tokenizer *tf = NULL, *tg = NULL;
    assert_int_equal(txc_tokenizer_load(stories_dir(), &tf), TXC_OK);
    if (txc_tokenizer_load(path, &tg) != TXC_OK)
        fail_msg("%s", txc_last_error());
    static const char *const texts[] = {"Once upon a time, there was a little girl named Lily.",
                                        "  leading spaces and\nnewlines\t\ttabs", "émoji 🙂 and ünïcödé",
                                        "<s>special</s> text <unk>", "", "1234567890 !@#$%^&*()"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        for (int add = 0; add < 2; add++) {
            int32_t *x, *y;
            size_t nx, ny;
            assert_int_equal(txc_tokenizer_encode(tf, texts[i], strlen(texts[i]), add, &x, &nx), TXC_OK);
            assert_int_equal(txc_tokenizer_encode(tg, texts[i], strlen(texts[i]), add, &y, &ny), TXC_OK);
            if (nx != ny || memcmp(x, y, nx * 4))
                fail_msg("'%s': %zu ids vs %zu from the GGUF", texts[i], nx, ny);
            char *dx, *dy;
            assert_int_equal(txc_tokenizer_decode(tf, x, nx, true, &dx, NULL), TXC_OK);
            assert_int_equal(txc_tokenizer_decode(tg, y, ny, true, &dy, NULL), TXC_OK);
            assert_string_equal(dx, dy);
            free(x), free(y), free(dx), free(dy);
        }
    }
    assert_int_equal(txc_tokenizer_bos_id(tg), 1);
    assert_true(txc_tokenizer_is_special(tg, 2));
    txc_chat_template *ct = NULL;
    if (txc_chat_template_load(path, &ct) != TXC_OK)
        fail_msg("%s", txc_last_error());
    txc_chat_message msg = {.role = "user", .content = "hi"};
    char *out = NULL;
    assert_int_equal(txc_chat_template_render(ct, &msg, 1, false, &out, NULL), TXC_OK);
    assert_string_equal(out, "<s>hi</s>");
    free(out);
    txc_chat_template_free(ct);
    txc_tokenizer_free(tf);
    txc_tokenizer_free(tg);
    free(b.p);
    free_owned(owned, n_owned);
}

/* tokenizer.ggml.add_space_prefix false: no "▁" before the text, none stripped when decoding. */
static void test_spm_no_space_prefix(void **state)
{
    (void)state;
    float **owned;
    int n_owned;
    no_space_prefix = true;
    gbuf b = stories_gguf("llama", true, &owned, &n_owned);
    no_space_prefix = false;
    const char *path = write_tmp("noprefix.gguf", &b);
    txc_tokenizer *tf = NULL, *tg = NULL;
    assert_int_equal(txc_tokenizer_load(stories_dir(), &tf), TXC_OK);
    assert_int_equal(txc_tokenizer_load(path, &tg), TXC_OK);
    const char *text = "Once upon a time";
    int32_t *x, *y;
    size_t nx, ny;
    assert_int_equal(txc_tokenizer_encode(tf, text, strlen(text), false, &x, &nx), TXC_OK);
    assert_int_equal(txc_tokenizer_encode(tg, text, strlen(text), false, &y, &ny), TXC_OK);
    assert_int_equal(strncmp(txc_tokenizer_id_to_token(tf, x[0]), "\xe2\x96\x81", 3), 0); /* "▁Once" ... */
    assert_int_not_equal(strncmp(txc_tokenizer_id_to_token(tg, y[0]), "\xe2\x96\x81", 3), 0);
    char *d;
    assert_int_equal(txc_tokenizer_decode(tg, y, ny, false, &d, NULL), TXC_OK);
    assert_string_equal(d, text);
    free(x), free(y), free(d);
    txc_tokenizer_free(tf);
    txc_tokenizer_free(tg);
    free(b.p);
    free_owned(owned, n_owned);
}

/* Byte-level BPE: gpt2 (gpt-2), llama3 (llama-bpe), qwen3 (qwen2) written as
 * GGUF vocabularies give the ids of their tokenizer.json. */
static void test_bpe_tokenizers(void **state)
{
    (void)state;
    static const struct {
        const char *dir, *pre;
    } fams[] = {{"gpt2", "gpt-2"}, {"llama3", "llama-bpe"}, {"qwen3", "qwen2"}};
    static const char *const texts[] = {
        "Hello world! It's 2024, and we're testing 12345 numbers.", "  multiple   spaces\n\nand newlines\r\n",
        "Ünïcödé café naïve — “quotes” 日本語のテキスト 🙂👍", "<|endoftext|>special<|im_start|>", "don't I'LL ve'd",
    };
    for (size_t k = 0; k < sizeof fams / sizeof *fams; k++) {
        const char *tj = tu_path("%s/tokenizers/%s/tokenizer.json", tu_shared_dir(), fams[k].dir);
        gfile f = {0};
        kv_str(&f, "general.architecture", "llama");
        add_vocab(&f, tj, false, fams[k].pre, -1);
        gbuf b = gguf_bytes(&f);
        gfile_free(&f);
        const char *path = write_tmp("vocab.gguf", &b);
        txc_tokenizer *tf = NULL, *tg = NULL;
        assert_int_equal(txc_tokenizer_load(tj, &tf), TXC_OK);
        if (txc_tokenizer_load(path, &tg) != TXC_OK)
            fail_msg("%s: %s", fams[k].dir, txc_last_error());
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
            int32_t *x, *y;
            size_t nx, ny;
            assert_int_equal(txc_tokenizer_encode(tf, texts[i], strlen(texts[i]), false, &x, &nx), TXC_OK);
            assert_int_equal(txc_tokenizer_encode(tg, texts[i], strlen(texts[i]), false, &y, &ny), TXC_OK);
            if (nx != ny || memcmp(x, y, nx * 4))
                fail_msg("%s '%s': %zu ids vs %zu from the GGUF", fams[k].dir, texts[i], nx, ny);
            char *dx, *dy;
            assert_int_equal(txc_tokenizer_decode(tf, x, nx, false, &dx, NULL), TXC_OK);
            assert_int_equal(txc_tokenizer_decode(tg, y, ny, false, &dy, NULL), TXC_OK);
            assert_string_equal(dx, dy);
            free(x), free(y), free(dx), free(dy);
        }
        txc_tokenizer_free(tf);
        txc_tokenizer_free(tg);
        free(b.p);
    }
}

/* What the loaders refuse, by name: an architecture, a tokenizer model, a pre-tokenizer,
 * a tensor type they cannot compute with, metadata missing. */
static void test_refused(void **state)
{
    (void)state;
    gfile f = {0};
    kv_str(&f, "general.architecture", "mamba");
    kv_str(&f, "tokenizer.ggml.model", "bert");
    gbuf b = gguf_bytes(&f);
    const char *path = write_tmp("x.gguf", &b);
    txc_model *m = NULL;
    txc_tokenizer *t = NULL;
    txc_clear_error();
    assert_int_equal(txc_model_load(path, NULL, &m), TXC_ERR_UNSUPPORTED);
    assert_non_null(strstr(txc_last_error(), "general.architecture 'mamba' is not supported"));
    txc_clear_error();
    assert_int_equal(txc_tokenizer_load(path, &t), TXC_ERR_UNSUPPORTED);
    assert_non_null(strstr(txc_last_error(), "tokenizer.ggml.model 'bert' is not supported"));
    free(b.p), gfile_free(&f);

    kv_str(&f, "general.architecture", "llama");
    kv_str(&f, "tokenizer.ggml.model", "gpt2");
    kv_str(&f, "tokenizer.ggml.pre", "made-up");
    kv_key(&f, "tokenizer.ggml.tokens", TXC_GGUF_ARRAY), u32(&f.kv, TXC_GGUF_STRING), u64(&f.kv, 1), str(&f.kv, "a");
    b = gguf_bytes(&f);
    path = write_tmp("x.gguf", &b);
    txc_clear_error();
    assert_int_equal(txc_tokenizer_load(path, &t), TXC_ERR_UNSUPPORTED);
    assert_non_null(strstr(txc_last_error(), "tokenizer.ggml.pre 'made-up' is not supported"));
    txc_clear_error();
    assert_int_equal(txc_model_load(path, NULL, &m), TXC_ERR_FORMAT); /* no llama.embedding_length */
    assert_non_null(strstr(txc_last_error(), "llama.embedding_length"));
    free(b.p), gfile_free(&f);

    /* a type the reader knows but the models cannot compute with (I8) */
    float **owned;
    int n_owned;
    b = stories_gguf("llama", true, &owned, &n_owned);
    const uint8_t name[] = "token_embd.weight";
    for (size_t p = 0; p + sizeof name < b.n; p++)
        if (!memcmp(b.p + p, name, sizeof name - 1)) { /* n_dims 2, ne {64, 512}: type after them */
            size_t tp = p + sizeof name - 1 + 4 + 16;
            memcpy(b.p + tp, (uint32_t[]){24}, 4); /* I8: 1 byte an element, inside the f32 data */
            break;
        }
    path = write_tmp("x.gguf", &b);
    txc_clear_error();
    assert_int_equal(txc_model_load(path, NULL, &m), TXC_ERR_UNSUPPORTED);
    assert_non_null(strstr(txc_last_error(), "tensor 'token_embd.weight' has type I8"));
    free(b.p);
    free_owned(owned, n_owned);
    assert_null(m);
    assert_null(t);
}

/* What llama.cpp cannot load either, refused with one line: a token string
 * twice (llama_vocab::load asserts each is its own entry), a tensor of a
 * block past block_count (llama.cpp: "wrong number of tensors"). The same
 * files without the fault load (the test can fail). */
static void test_refused_vocab_blocks(void **state)
{
    (void)state;
    float **owned;
    int n_owned;
    txc_tokenizer *t = NULL;
    txc_model *m = NULL;
    dup_token = 300;
    gbuf b = stories_gguf("llama", true, &owned, &n_owned);
    dup_token = -1;
    const char *path = write_tmp("dup.gguf", &b);
    txc_clear_error();
    assert_int_equal(txc_tokenizer_load(path, &t), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "at ids 299 and 300 (each token's string must be its own)"));
    assert_null(strchr(txc_last_error(), '\n'));
    free(b.p);
    free_owned(owned, n_owned);

    extra_block = true;
    b = stories_gguf("llama", true, &owned, &n_owned);
    extra_block = false;
    path = write_tmp("blk5.gguf", &b);
    txc_clear_error();
    assert_int_equal(txc_model_load(path, NULL, &m), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(),
                           "tensor 'blk.5.attn_norm.weight' is in block 5, past llama.block_count 5 (blocks 0..4)"));
    assert_null(m);
    free(b.p);
    free_owned(owned, n_owned);

    b = stories_gguf("llama", true, &owned, &n_owned);
    path = write_tmp("ok.gguf", &b);
    assert_int_equal(txc_tokenizer_load(path, &t), TXC_OK);
    assert_int_equal(txc_model_load(path, NULL, &m), TXC_OK);
    txc_tokenizer_free(t);
    txc_model_free(m);
    free(b.p);
    free_owned(owned, n_owned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_values),    cmocka_unit_test(test_reader_truncated),
        cmocka_unit_test(test_reader_errors),    cmocka_unit_test(test_model_logits_equal),
        cmocka_unit_test(test_spm_tokenizer),    cmocka_unit_test(test_bpe_tokenizers),
        cmocka_unit_test(test_refused),          cmocka_unit_test(test_rope_freqs),
        cmocka_unit_test(test_spm_no_space_prefix), cmocka_unit_test(test_refused_vocab_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
