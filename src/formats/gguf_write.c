/* GGUF writer (txc/gguf_write.h): gguf-py's GGUFWriter layout, version 3. */
#include "txc/gguf_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/dtype.h"
#include "txc/gguf.h"

#define ALIGN 32
enum { V_U32 = 4, V_I32 = 5, V_F32 = 6, V_BOOL = 7, V_STR = 8, V_ARR = 9, V_U64 = 10 };

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}
static void put_u32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(wbuf *b, const char *s)
{
    size_t n = strlen(s);
    put_u64(b, n);
    put(b, s, n);
}

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    size_t nbytes, offset;
} wtensor;

struct txc_gguf_writer {
    wbuf kv;
    int64_t n_kv;
    char **keys;
    wtensor *t;
    int n_t, cap_t;
    size_t data_size;
    FILE *f;
    char *path;
    int next;
    bool failed, closed;
};

txc_gguf_writer *txc_gguf_writer_new(void)
{
    txc_gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory");
    return w;
}

void txc_gguf_writer_free(txc_gguf_writer *w)
{
    if (!w)
        return;
    if (w->f)
        fclose(w->f);
    if (w->path && !w->closed)
        remove(w->path);
    for (int64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    for (int i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->keys), free(w->t), free(w->kv.p), free(w->path), free(w);
}

static txc_status fail(txc_gguf_writer *w, txc_status s)
{
    w->failed = true;
    return s;
}

/* the key checked and recorded, its string written */
static txc_status key(txc_gguf_writer *w, const char *k, uint32_t type)
{
    if (w->failed)
        return TXC_ERR_INVALID;
    if (w->f)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: metadata '%s' after the header was written", k));
    if (!k || !*k)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: an empty key"));
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], k) == 0)
            return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: key '%s' given twice", k));
    char **keys = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *keys);
    char *copy = keys ? malloc(strlen(k) + 1) : NULL;
    if (keys)
        w->keys = keys;
    if (!copy)
        return fail(w, txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory"));
    strcpy(copy, k);
    w->keys[w->n_kv++] = copy;
    put_str(&w->kv, k);
    put_u32(&w->kv, type);
    return TXC_OK;
}

static txc_status done(txc_gguf_writer *w)
{
    if (w->kv.oom)
        return fail(w, txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory"));
    return TXC_OK;
}

#define SCALAR(fn, T, VT)                                                         \
    txc_status fn(txc_gguf_writer *w, const char *k, T v)                         \
    {                                                                             \
        txc_status s = key(w, k, VT);                                             \
        if (s)                                                                    \
            return s;                                                             \
        put(&w->kv, &v, sizeof v);                                                \
        return done(w);                                                           \
    }
SCALAR(txc_gguf_w_u32, uint32_t, V_U32)
SCALAR(txc_gguf_w_i32, int32_t, V_I32)
SCALAR(txc_gguf_w_f32, float, V_F32)

txc_status txc_gguf_w_bool(txc_gguf_writer *w, const char *k, bool v)
{
    txc_status s = key(w, k, V_BOOL);
    if (s)
        return s;
    unsigned char b = v ? 1 : 0;
    put(&w->kv, &b, 1);
    return done(w);
}

txc_status txc_gguf_w_str(txc_gguf_writer *w, const char *k, const char *v)
{
    txc_status s = key(w, k, V_STR);
    if (s)
        return s;
    put_str(&w->kv, v);
    return done(w);
}

txc_status txc_gguf_w_arr_str(txc_gguf_writer *w, const char *k, const char *const *v, size_t n)
{
    txc_status s = key(w, k, V_ARR);
    if (s)
        return s;
    put_u32(&w->kv, V_STR);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        put_str(&w->kv, v[i]);
    return done(w);
}

txc_status txc_gguf_w_arr_i32(txc_gguf_writer *w, const char *k, const int32_t *v, size_t n)
{
    txc_status s = key(w, k, V_ARR);
    if (s)
        return s;
    put_u32(&w->kv, V_I32);
    put_u64(&w->kv, n);
    put(&w->kv, v, n * 4);
    return done(w);
}

txc_status txc_gguf_w_arr_f32(txc_gguf_writer *w, const char *k, const float *v, size_t n)
{
    txc_status s = key(w, k, V_ARR);
    if (s)
        return s;
    put_u32(&w->kv, V_F32);
    put_u64(&w->kv, n);
    put(&w->kv, v, n * 4);
    return done(w);
}

static size_t pad(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

txc_status txc_gguf_w_tensor(txc_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne)
{
    if (w->failed)
        return TXC_ERR_INVALID;
    if (w->f)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor '%s' after the header was written", name));
    if (!name || !*name || n_dims < 1 || n_dims > 4)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor '%s' needs a name and 1 to 4 dims",
                                 name ? name : ""));
    for (int i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor '%s' given twice", name));
    int64_t blk;
    size_t tsize;
    if (!txc_ggml_type_block(type, &blk, &tsize) || tsize == 0)
        return fail(w, txc_error(TXC_ERR_UNSUPPORTED, "gguf writer: tensor '%s': ggml type %u has no size here",
                                 name, type));
    if (ne[0] <= 0 || ne[0] % blk)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor '%s': ne[0] %lld is not a multiple of %s's "
                                 "block of %lld", name, (long long)ne[0], txc_ggml_type_name(type), (long long)blk));
    uint64_t bytes = (uint64_t)(ne[0] / blk) * tsize;
    for (int i = 1; i < n_dims; i++) {
        if (ne[i] <= 0 || bytes > UINT64_MAX / 2 / (uint64_t)ne[i])
            return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor '%s': bad dims", name));
        bytes *= (uint64_t)ne[i];
    }
    if (w->n_t == w->cap_t) {
        int cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t)
            return fail(w, txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory"));
        w->t = t, w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = malloc(strlen(name) + 1)))
        return fail(w, txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory"));
    strcpy(t->name, name);
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, (size_t)n_dims * sizeof *ne);
    t->nbytes = (size_t)bytes;
    t->offset = w->data_size;
    w->data_size += pad(t->nbytes);
    w->n_t++;
    return TXC_OK;
}

size_t txc_gguf_w_tensor_bytes(const txc_gguf_writer *w, int i) { return i >= 0 && i < w->n_t ? w->t[i].nbytes : 0; }

static txc_status io_fail(txc_gguf_writer *w)
{
    return fail(w, txc_error(TXC_ERR_IO, "gguf writer: cannot write %s", w->path));
}

static bool write_zeros(FILE *f, size_t n)
{
    static const unsigned char z[ALIGN] = {0};
    return n == 0 || fwrite(z, 1, n, f) == n;
}

txc_status txc_gguf_writer_open(txc_gguf_writer *w, const char *path)
{
    if (w->failed || w->f)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: opened twice or after an error"));
    if (!(w->path = malloc(strlen(path) + 1)))
        return fail(w, txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory"));
    strcpy(w->path, path);
    if (!(w->f = fopen(path, "wb")))
        return fail(w, txc_error(TXC_ERR_IO, "gguf writer: cannot create %s", path));
    wbuf h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)w->n_t);
    put_u64(&h, (uint64_t)w->n_kv);
    put(&h, w->kv.p, w->kv.n);
    for (int i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(&h, t->name);
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, t->offset);
    }
    if (h.oom) {
        free(h.p);
        return fail(w, txc_error(TXC_ERR_NOMEM, "gguf writer: out of memory"));
    }
    bool ok = fwrite(h.p, 1, h.n, w->f) == h.n && write_zeros(w->f, pad(h.n) - h.n);
    free(h.p);
    return ok ? TXC_OK : io_fail(w);
}

txc_status txc_gguf_writer_data(txc_gguf_writer *w, const void *data, size_t nbytes)
{
    if (w->failed || !w->f || w->next >= w->n_t)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor data %s", !w->f ? "before open"
                                                                              : "past the last tensor"));
    const wtensor *t = &w->t[w->next];
    if (nbytes != t->nbytes)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: tensor '%s' takes %zu bytes, got %zu", t->name,
                                 t->nbytes, nbytes));
    if (fwrite(data, 1, nbytes, w->f) != nbytes || !write_zeros(w->f, pad(nbytes) - nbytes))
        return io_fail(w);
    w->next++;
    return TXC_OK;
}

txc_status txc_gguf_writer_close(txc_gguf_writer *w)
{
    if (w->failed || !w->f)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: close before open or after an error"));
    if (w->next != w->n_t)
        return fail(w, txc_error(TXC_ERR_INVALID, "gguf writer: %d of %d tensors' data written", w->next, w->n_t));
    int rc = fclose(w->f);
    w->f = NULL;
    if (rc != 0)
        return io_fail(w);
    w->closed = true;
    return TXC_OK;
}
