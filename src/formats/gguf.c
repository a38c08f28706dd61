/* GGUF reader (mmap, zero copy); see include/txc/gguf.h. */
#include "txc/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct txc_gguf {
    char *path;
    txc_storage *storage;     /* one reference */
    const uint8_t *base;
    size_t size;
    uint32_t version, alignment;
    size_t data_offset;
    int64_t n_kv, n_tensors;
    txc_gguf_kv *kv;
    txc_gguf_tensor *tensors;
    const txc_gguf_tensor **by_name; /* the tensors sorted by name */
    /* every items[] block of the arrays, freed at close */
    txc_gguf_value **blocks;
    size_t n_blocks, cap_blocks;
};

/* ---- ggml's types (ggml.c type_traits; ggml.h enum ggml_type) ---------------- */

typedef struct ggml_traits {
    const char *name;
    int64_t block;
    size_t size;
} ggml_traits;

static const ggml_traits GGML_TYPES[] = {
    [0] = {"F32", 1, 4},       [1] = {"F16", 1, 2},       [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},    [6] = {"Q5_0", 32, 22},    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},    [9] = {"Q8_1", 32, 36},    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110}, [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210}, [15] = {"Q8_K", 256, 292}, [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18}, [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},     [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},      [27] = {"I64", 1, 8},      [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56}, [30] = {"BF16", 1, 2},     [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66}, [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof GGML_TYPES / sizeof *GGML_TYPES)

const char *txc_ggml_type_name(uint32_t t) { return t < N_GGML_TYPES ? GGML_TYPES[t].name : NULL; }

bool txc_ggml_type_block(uint32_t t, int64_t *block_size, size_t *type_size)
{
    if (t >= N_GGML_TYPES || !GGML_TYPES[t].name)
        return false;
    if (block_size)
        *block_size = GGML_TYPES[t].block;
    if (type_size)
        *type_size = GGML_TYPES[t].size;
    return true;
}

bool txc_gguf_type_to_dtype(uint32_t t, txc_dtype *out)
{
    txc_dtype d;
    if (!txc_dtype_from_ggml(t, &d)) /* F32, F16, BF16, I32, I64 and the quantized types (txc/dtype.h) */
        return false;
    if (out)
        *out = d;
    return true;
}

static const char *const VALUE_NAMES[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                          "bool", "str", "arr", "u64", "i64", "f64"};
static const size_t VALUE_SIZES[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *txc_gguf_type_name(txc_gguf_type t)
{
    return (unsigned)t < TXC_GGUF_TYPE_COUNT ? VALUE_NAMES[t] : "?";
}

size_t txc_gguf_type_size(txc_gguf_type t) { return (unsigned)t < TXC_GGUF_TYPE_COUNT ? VALUE_SIZES[t] : 0; }

/* ---- the cursor ---------------------------------------------------------------- */

typedef struct cursor {
    txc_gguf *g;
    size_t pos;
} cursor;

static size_t left(const cursor *c) { return c->g->size - c->pos; }

static bool take(cursor *c, size_t n, const void **p)
{
    if (n > left(c))
        return false;
    *p = c->g->base + c->pos;
    c->pos += n;
    return true;
}

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static bool rd_u32(cursor *c, uint32_t *v)
{
    const void *p;
    if (!take(c, 4, &p))
        return false;
    *v = (uint32_t)le(p, 4);
    return true;
}

static bool rd_u64(cursor *c, uint64_t *v)
{
    const void *p;
    if (!take(c, 8, &p))
        return false;
    *v = le(p, 8);
    return true;
}

static txc_status truncated(const cursor *c, const char *what)
{
    return txc_error(TXC_ERR_FORMAT, "%s: truncated GGUF: %s at byte %zu runs past the end of the file (%zu bytes)",
                     c->g->path, what, c->pos, c->g->size);
}

/* A string whose length the file holds. */
static txc_status rd_str(cursor *c, txc_gguf_str *s, const char *what)
{
    uint64_t n;
    size_t at = c->pos;
    if (!rd_u64(c, &n))
        return truncated(c, what);
    if (n > left(c))
        return txc_error(TXC_ERR_FORMAT, "%s: %s at byte %zu has length %" PRIu64 ", past the end of the file "
                                         "(%zu bytes left)", c->g->path, what, at, n, left(c));
    const void *p = NULL;
    take(c, (size_t)n, &p);
    s->data = p;
    s->len = n;
    return TXC_OK;
}

static char *dup_str(txc_gguf_str s)
{
    char *p = malloc((size_t)s.len + 1);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory (GGUF)");
        return NULL;
    }
    memcpy(p, s.data, (size_t)s.len);
    p[s.len] = 0;
    return p;
}

static txc_gguf_value *new_block(txc_gguf *g, uint64_t n)
{
    if (g->n_blocks == g->cap_blocks) {
        size_t cap = g->cap_blocks ? g->cap_blocks * 2 : 16;
        txc_gguf_value **b = realloc(g->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        g->blocks = b;
        g->cap_blocks = cap;
    }
    txc_gguf_value *v = calloc((size_t)n ? (size_t)n : 1, sizeof *v);
    if (v)
        g->blocks[g->n_blocks++] = v;
    return v;
}

static txc_status rd_value(cursor *c, txc_gguf_type type, txc_gguf_value *out, const char *key, int depth);

/* The smallest number of bytes one element of `type` takes in the file. */
static size_t min_elem_size(txc_gguf_type t)
{
    if (t == TXC_GGUF_STRING)
        return 8;
    if (t == TXC_GGUF_ARRAY)
        return 12;
    return VALUE_SIZES[t];
}

static txc_status rd_array(cursor *c, txc_gguf_value *out, const char *key, int depth)
{
    uint32_t et;
    uint64_t n;
    size_t at = c->pos;
    if (!rd_u32(c, &et) || !rd_u64(c, &n))
        return truncated(c, "an array header");
    if (et >= TXC_GGUF_TYPE_COUNT)
        return txc_error(TXC_ERR_FORMAT, "%s: key '%s': array element type %" PRIu32 " is not a GGUF value type "
                                         "(0..12)", c->g->path, key, et);
    if (et == TXC_GGUF_ARRAY && depth + 1 >= TXC_GGUF_MAX_DEPTH)
        return txc_error(TXC_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d", c->g->path, key,
                         TXC_GGUF_MAX_DEPTH);
    size_t m = min_elem_size((txc_gguf_type)et);
    if (n > left(c) / m)
        return txc_error(TXC_ERR_FORMAT, "%s: key '%s': array at byte %zu has %" PRIu64 " elements of %s, past the "
                                         "end of the file (%zu bytes left)", c->g->path, key, at, n,
                         VALUE_NAMES[et], left(c));
    out->v.arr.type = (txc_gguf_type)et;
    out->v.arr.n = n;
    if (et != TXC_GGUF_STRING && et != TXC_GGUF_ARRAY) {
        const void *p = NULL;
        take(c, (size_t)n * m, &p);
        out->v.arr.data = p;
        return TXC_OK;
    }
    txc_gguf_value *items = new_block(c->g, n);
    if (!items)
        return txc_error(TXC_ERR_NOMEM, "out of memory (GGUF array of %" PRIu64 ")", n);
    out->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        txc_status s = rd_value(c, (txc_gguf_type)et, &items[i], key, depth + 1);
        if (s)
            return s;
    }
    return TXC_OK;
}

static txc_status rd_value(cursor *c, txc_gguf_type type, txc_gguf_value *out, const char *key, int depth)
{
    out->type = type;
    if (type == TXC_GGUF_STRING)
        return rd_str(c, &out->v.str, "a string value");
    if (type == TXC_GGUF_ARRAY)
        return rd_array(c, out, key, depth);
    size_t n = VALUE_SIZES[type];
    const void *p;
    if (!take(c, n, &p))
        return truncated(c, "a value");
    uint64_t raw = le(p, n);
    switch (type) {
    case TXC_GGUF_UINT8: case TXC_GGUF_UINT16: case TXC_GGUF_UINT32: case TXC_GGUF_UINT64:
        out->v.u = raw;
        break;
    case TXC_GGUF_INT8: out->v.i = (int8_t)raw; break;
    case TXC_GGUF_INT16: out->v.i = (int16_t)raw; break;
    case TXC_GGUF_INT32: out->v.i = (int32_t)raw; break;
    case TXC_GGUF_INT64: memcpy(&out->v.i, &raw, 8); break;
    case TXC_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        out->v.f = f;
        break;
    }
    case TXC_GGUF_FLOAT64: memcpy(&out->v.f, &raw, 8); break;
    case TXC_GGUF_BOOL:
        if (raw > 1) /* gguf.cpp reads a bool as one byte, 0 or 1 */
            return txc_error(TXC_ERR_FORMAT, "%s: key '%s': bool value %" PRIu64 " is neither 0 nor 1", c->g->path,
                             key, raw);
        out->v.b = raw != 0;
        break;
    default: break;
    }
    return TXC_OK;
}

/* ---- the file ------------------------------------------------------------------------ */

static int cmp_kv_key(const void *a, const void *b)
{
    return strcmp(((const txc_gguf_kv *)a)->key, ((const txc_gguf_kv *)b)->key);
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp((*(const txc_gguf_tensor *const *)a)->name, (*(const txc_gguf_tensor *const *)b)->name);
}

typedef struct span {
    size_t begin, end;
    int64_t i;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->i > y->i) - (x->i < y->i);
}

static txc_status parse_kvs(txc_gguf *g, cursor *c)
{
    for (int64_t i = 0; i < g->n_kv; i++) {
        txc_gguf_str k;
        txc_status s = rd_str(c, &k, "a metadata key");
        if (s)
            return s;
        if (k.len == 0)
            return txc_error(TXC_ERR_FORMAT, "%s: metadata key %" PRId64 " is empty", g->path, i);
        if (!(g->kv[i].key = dup_str(k)))
            return TXC_ERR_NOMEM;
        uint32_t t;
        if (!rd_u32(c, &t))
            return truncated(c, "a value type");
        if (t >= TXC_GGUF_TYPE_COUNT)
            return txc_error(TXC_ERR_FORMAT, "%s: key '%s': value type %" PRIu32 " is not a GGUF value type (0..12)",
                             g->path, g->kv[i].key, t);
        if ((s = rd_value(c, (txc_gguf_type)t, &g->kv[i].value, g->kv[i].key, 0)))
            return s;
    }
    /* duplicate keys (gguf.cpp: "duplicate key") */
    txc_gguf_kv *sorted = malloc(((size_t)g->n_kv + 1) * sizeof *sorted);
    if (!sorted)
        return txc_error(TXC_ERR_NOMEM, "out of memory (GGUF)");
    memcpy(sorted, g->kv, (size_t)g->n_kv * sizeof *sorted);
    qsort(sorted, (size_t)g->n_kv, sizeof *sorted, cmp_kv_key);
    for (int64_t i = 1; i < g->n_kv; i++)
        if (strcmp(sorted[i - 1].key, sorted[i].key) == 0) {
            txc_status s = txc_error(TXC_ERR_FORMAT, "%s: metadata key '%s' appears twice", g->path, sorted[i].key);
            free(sorted);
            return s;
        }
    free(sorted);
    const txc_gguf_value *al = txc_gguf_find(g, "general.alignment");
    g->alignment = TXC_GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        if (al->type != TXC_GGUF_UINT32)
            return txc_error(TXC_ERR_FORMAT, "%s: general.alignment is %s, not u32", g->path,
                             txc_gguf_type_name(al->type));
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)))
            return txc_error(TXC_ERR_FORMAT, "%s: general.alignment %" PRIu64 " is not a power of two", g->path,
                             al->v.u);
        g->alignment = (uint32_t)al->v.u;
    }
    return TXC_OK;
}

static txc_status parse_tensor_info(txc_gguf *g, cursor *c, int64_t i)
{
    txc_gguf_tensor *t = &g->tensors[i];
    txc_gguf_str name;
    txc_status s = rd_str(c, &name, "a tensor name");
    if (s)
        return s;
    if (name.len >= TXC_GGUF_MAX_NAME)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor %" PRId64 "'s name is %" PRIu64 " bytes (at most %d)", g->path,
                         i, name.len, TXC_GGUF_MAX_NAME - 1);
    if (!(t->name = dup_str(name)))
        return TXC_ERR_NOMEM;
    uint32_t nd;
    if (!rd_u32(c, &nd))
        return truncated(c, "a tensor's n_dims");
    if (nd == 0 || nd > TXC_GGUF_MAX_DIMS)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has n_dims %" PRIu32 " (1..%d)", g->path, t->name, nd,
                         TXC_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    int64_t numel = 1;
    for (int d = 0; d < TXC_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && !rd_u64(c, &ne))
            return truncated(c, "a tensor's dimensions");
        if (ne > (uint64_t)INT64_MAX)
            return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has a negative dimension ne[%d] = %" PRId64, g->path,
                             t->name, d, (int64_t)ne);
        t->ne[d] = (int64_t)ne;
        if (ne && numel > INT64_MAX / (int64_t)ne)
            return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has more than INT64_MAX elements", g->path, t->name);
        numel *= (int64_t)ne;
    }
    t->numel = numel;
    for (int d = 0; d < t->n_dims; d++)
        t->shape[d] = t->ne[t->n_dims - 1 - d];
    if (!rd_u32(c, &t->ggml_type) || !rd_u64(c, &t->offset))
        return truncated(c, "a tensor's type and offset");
    int64_t blk;
    size_t tsize;
    if (!txc_ggml_type_block(t->ggml_type, &blk, &tsize))
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has unknown ggml type %" PRIu32 " (not a GGML_TYPE_*)",
                         g->path, t->name, t->ggml_type);
    if (t->ne[0] % blk)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' of type %s has ne[0] = %" PRId64 ", not a multiple of its "
                                         "block size %" PRId64, g->path, t->name, txc_ggml_type_name(t->ggml_type),
                         t->ne[0], blk);
    uint64_t blocks = (uint64_t)(numel / blk);
    if (blocks > SIZE_MAX / tsize || blocks * tsize > g->size)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' (%s, %" PRId64 " elements) is larger than the file (%zu "
                                         "bytes)", g->path, t->name, txc_ggml_type_name(t->ggml_type), numel, g->size);
    t->nbytes = (size_t)(blocks * tsize);
    if (t->offset % g->alignment)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has offset %" PRIu64 ", not a multiple of the alignment %"
                                         PRIu32, g->path, t->name, t->offset, g->alignment);
    return TXC_OK;
}

static txc_status parse_tensors(txc_gguf *g, cursor *c)
{
    for (int64_t i = 0; i < g->n_tensors; i++) {
        txc_status s = parse_tensor_info(g, c, i);
        if (s)
            return s;
    }
    size_t a = g->alignment;
    g->data_offset = c->pos % a ? c->pos + (a - c->pos % a) : c->pos;
    if (g->n_tensors && g->data_offset > g->size)
        return txc_error(TXC_ERR_FORMAT, "%s: truncated GGUF: the data section would start at byte %zu, past the end "
                                         "of the file (%zu bytes)", g->path, g->data_offset, g->size);
    size_t data_size = g->size - (g->data_offset < g->size ? g->data_offset : g->size);
    span *spans = malloc(((size_t)g->n_tensors + 1) * sizeof *spans);
    if (!(g->by_name = malloc(((size_t)g->n_tensors + 1) * sizeof *g->by_name)) || !spans) {
        free(spans);
        return txc_error(TXC_ERR_NOMEM, "out of memory (GGUF tensors)");
    }
    txc_status s = TXC_OK;
    for (int64_t i = 0; i < g->n_tensors && !s; i++) {
        txc_gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            s = txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' (%zu bytes at data offset %" PRIu64 ") runs past the end "
                                          "of the file (data section: %zu bytes)", g->path, t->name, t->nbytes,
                          t->offset, data_size);
            break;
        }
        t->byte_offset = g->data_offset + (size_t)t->offset;
        t->data = g->base + t->byte_offset;
        spans[i] = (span){t->byte_offset, t->byte_offset + t->nbytes, i};
        g->by_name[i] = t;
    }
    if (!s) {
        qsort(spans, (size_t)g->n_tensors, sizeof *spans, cmp_span);
        const span *p = NULL; /* the non-empty span reaching furthest so far */
        for (int64_t i = 0; i < g->n_tensors && !s; i++) {
            const span *q = &spans[i];
            if (q->end == q->begin)
                continue; /* an empty tensor overlaps nothing */
            if (p && q->begin < p->end)
                s = txc_error(TXC_ERR_FORMAT, "%s: tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", g->path,
                              g->tensors[p->i].name, p->begin, p->end, g->tensors[q->i].name, q->begin, q->end);
            if (!p || q->end > p->end)
                p = q;
        }
    }
    free(spans);
    if (s)
        return s;
    qsort(g->by_name, (size_t)g->n_tensors, sizeof *g->by_name, cmp_by_name);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (strcmp(g->by_name[i - 1]->name, g->by_name[i]->name) == 0)
            return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' appears twice", g->path, g->by_name[i]->name);
    return TXC_OK;
}

static txc_status parse(txc_gguf *g)
{
    cursor c = {g, 0};
    uint32_t magic, version;
    if (g->size < 4 || !rd_u32(&c, &magic))
        return txc_error(TXC_ERR_FORMAT, "%s: not a GGUF file (%zu bytes, shorter than its 4-byte magic)", g->path,
                         g->size);
    if (memcmp(g->base, "GGUF", 4) != 0)
        return txc_error(TXC_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x, expected \"GGUF\")", g->path,
                         g->base[0], g->base[1], g->base[2], g->base[3]);
    if (!rd_u32(&c, &version))
        return truncated(&c, "the version");
    if (version == 1)
        return txc_error(TXC_ERR_FORMAT, "%s: GGUF version 1 is not supported (32-bit counts; versions 2 and 3 are)",
                         g->path);
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0) /* 2 or 3 byte-swapped */
            return txc_error(TXC_ERR_FORMAT, "%s: a big-endian GGUF (version %" PRIu32 " byte-swapped) is not "
                                             "supported", g->path, version);
        return txc_error(TXC_ERR_FORMAT, "%s: GGUF version %" PRIu32 " is not supported (versions 2 and 3 are)",
                         g->path, version);
    }
    g->version = version;
    uint64_t nt, nkv;
    if (!rd_u64(&c, &nt) || !rd_u64(&c, &nkv))
        return truncated(&c, "the header");
    /* A metadata entry takes >= 13 bytes (key length, type, a 1-byte value),
     * a tensor info >= 28 (name length, n_dims, one dim, type, offset). */
    if (nkv > left(&c) / 13)
        return txc_error(TXC_ERR_FORMAT, "%s: metadata_kv_count %" PRIu64 " is more than the file can hold (%zu bytes "
                                         "left)", g->path, nkv, left(&c));
    if (nt > left(&c) / 28)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor_count %" PRIu64 " is more than the file can hold (%zu bytes "
                                         "left)", g->path, nt, left(&c));
    g->n_kv = (int64_t)nkv;
    g->n_tensors = (int64_t)nt;
    g->kv = calloc((size_t)nkv + 1, sizeof *g->kv);
    g->tensors = calloc((size_t)nt + 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return txc_error(TXC_ERR_NOMEM, "out of memory (GGUF)");
    txc_status s = parse_kvs(g, &c);
    if (!s)
        s = parse_tensors(g, &c);
    return s;
}

static txc_status open_storage(txc_storage *st, const char *origin, txc_gguf **out)
{
    txc_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = malloc(strlen(origin) + 1))) {
        free(g);
        txc_storage_release(st);
        return txc_error(TXC_ERR_NOMEM, "out of memory (GGUF)");
    }
    strcpy(g->path, origin);
    g->storage = st;
    g->base = txc_storage_data(st);
    g->size = txc_storage_size(st);
    static const uint8_t empty[1];
    if (!g->base)
        g->base = empty;
    txc_status s = parse(g);
    if (s) {
        txc_gguf_close(g);
        return s;
    }
    *out = g;
    return TXC_OK;
}

txc_status txc_gguf_open(const char *path, txc_gguf **out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_gguf_open: out is NULL");
    *out = NULL;
    if (!path)
        return txc_error(TXC_ERR_INVALID, "txc_gguf_open: path is NULL");
    txc_storage *st = txc_storage_mmap_file(path);
    if (!st)
        return txc_last_status();
    return open_storage(st, path, out);
}

txc_status txc_gguf_open_memory(const void *data, size_t n, const char *origin, txc_gguf **out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_gguf_open_memory: out is NULL");
    *out = NULL;
    if (!data && n)
        return txc_error(TXC_ERR_INVALID, "txc_gguf_open_memory: data is NULL");
    txc_storage *st = txc_storage_from_external((void *)data, n, NULL, NULL);
    if (!st)
        return txc_last_status();
    return open_storage(st, origin ? origin : "GGUF", out);
}

void txc_gguf_close(txc_gguf *g)
{
    if (!g)
        return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++)
        free((char *)g->kv[i].key);
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++)
        free((char *)g->tensors[i].name);
    for (size_t i = 0; i < g->n_blocks; i++)
        free(g->blocks[i]);
    free(g->blocks);
    free(g->kv);
    free(g->tensors);
    free(g->by_name);
    free(g->path);
    txc_storage_release(g->storage);
    free(g);
}

/* ---- queries --------------------------------------------------------------------------- */

uint32_t txc_gguf_version(const txc_gguf *g) { return g ? g->version : 0; }
uint32_t txc_gguf_alignment(const txc_gguf *g) { return g ? g->alignment : 0; }
size_t txc_gguf_data_offset(const txc_gguf *g) { return g ? g->data_offset : 0; }
const char *txc_gguf_path(const txc_gguf *g) { return g ? g->path : NULL; }
size_t txc_gguf_file_size(const txc_gguf *g) { return g ? g->size : 0; }
txc_storage *txc_gguf_storage(const txc_gguf *g) { return g ? g->storage : NULL; }
int64_t txc_gguf_kv_count(const txc_gguf *g) { return g ? g->n_kv : 0; }
int64_t txc_gguf_tensor_count(const txc_gguf *g) { return g ? g->n_tensors : 0; }

const txc_gguf_kv *txc_gguf_kv_at(const txc_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const txc_gguf_value *txc_gguf_find(const txc_gguf *g, const char *key)
{
    for (int64_t i = 0; g && key && i < g->n_kv; i++)
        if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0)
            return &g->kv[i].value;
    return NULL;
}

const txc_gguf_tensor *txc_gguf_tensor_at(const txc_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const txc_gguf_tensor *txc_gguf_find_tensor(const txc_gguf *g, const char *name)
{
    if (!g || !name)
        return NULL;
    int64_t lo = 0, hi = g->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const txc_gguf_tensor *t = g->by_name[mid];
        int c = strcmp(t->name, name);
        if (c == 0)
            return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static bool is_uint(txc_gguf_type t)
{
    return t == TXC_GGUF_UINT8 || t == TXC_GGUF_UINT16 || t == TXC_GGUF_UINT32 || t == TXC_GGUF_UINT64;
}

static bool is_int(txc_gguf_type t)
{
    return t == TXC_GGUF_INT8 || t == TXC_GGUF_INT16 || t == TXC_GGUF_INT32 || t == TXC_GGUF_INT64;
}

static bool wrong_type(const txc_gguf *g, const char *key, const txc_gguf_value *v, const char *want, bool *bad)
{
    txc_error(TXC_ERR_FORMAT, "%s: key '%s' is %s, expected %s", g->path, key, txc_gguf_type_name(v->type), want);
    if (bad)
        *bad = true;
    return false;
}

bool txc_gguf_get_i64(const txc_gguf *g, const char *key, int64_t *out, bool *bad)
{
    const txc_gguf_value *v = txc_gguf_find(g, key);
    if (!v)
        return false;
    if (is_uint(v->type) && v->v.u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)v->v.u;
        return true;
    }
    if (is_int(v->type)) {
        *out = v->v.i;
        return true;
    }
    return wrong_type(g, key, v, "an integer", bad);
}

bool txc_gguf_get_f64(const txc_gguf *g, const char *key, double *out, bool *bad)
{
    const txc_gguf_value *v = txc_gguf_find(g, key);
    if (!v)
        return false;
    if (v->type == TXC_GGUF_FLOAT32 || v->type == TXC_GGUF_FLOAT64)
        *out = v->v.f;
    else if (is_uint(v->type))
        *out = (double)v->v.u;
    else if (is_int(v->type))
        *out = (double)v->v.i;
    else
        return wrong_type(g, key, v, "a number", bad);
    return true;
}

bool txc_gguf_get_bool(const txc_gguf *g, const char *key, bool *out, bool *bad)
{
    const txc_gguf_value *v = txc_gguf_find(g, key);
    if (!v)
        return false;
    if (v->type != TXC_GGUF_BOOL)
        return wrong_type(g, key, v, "bool", bad);
    *out = v->v.b;
    return true;
}

bool txc_gguf_get_str(const txc_gguf *g, const char *key, txc_gguf_str *out, bool *bad)
{
    const txc_gguf_value *v = txc_gguf_find(g, key);
    if (!v)
        return false;
    if (v->type != TXC_GGUF_STRING)
        return wrong_type(g, key, v, "str", bad);
    *out = v->v.str;
    return true;
}

static bool elem_raw(const txc_gguf_value *v, uint64_t i, uint64_t *raw, size_t *n)
{
    if (!v || v->type != TXC_GGUF_ARRAY || i >= v->v.arr.n || !v->v.arr.data)
        return false;
    *n = VALUE_SIZES[v->v.arr.type];
    *raw = le((const uint8_t *)v->v.arr.data + i * *n, *n);
    return true;
}

double txc_gguf_array_f64(const txc_gguf_value *v, uint64_t i)
{
    uint64_t raw;
    size_t n;
    if (!elem_raw(v, i, &raw, &n))
        return 0;
    switch (v->v.arr.type) {
    case TXC_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case TXC_GGUF_FLOAT64: {
        double d;
        memcpy(&d, &raw, 8);
        return d;
    }
    case TXC_GGUF_INT8: return (int8_t)raw;
    case TXC_GGUF_INT16: return (int16_t)raw;
    case TXC_GGUF_INT32: return (int32_t)raw;
    case TXC_GGUF_INT64: return (double)(int64_t)raw;
    default: return (double)raw;
    }
}

int64_t txc_gguf_array_i64(const txc_gguf_value *v, uint64_t i)
{
    uint64_t raw;
    size_t n;
    if (!elem_raw(v, i, &raw, &n))
        return 0;
    switch (v->v.arr.type) {
    case TXC_GGUF_FLOAT32: case TXC_GGUF_FLOAT64: {
        double d = txc_gguf_array_f64(v, i);
        return d >= -9.2e18 && d <= 9.2e18 ? (int64_t)d : 0;
    }
    case TXC_GGUF_INT8: return (int8_t)raw;
    case TXC_GGUF_INT16: return (int16_t)raw;
    case TXC_GGUF_INT32: return (int32_t)raw;
    case TXC_GGUF_INT64: return (int64_t)raw;
    default: return (int64_t)raw;
    }
}

bool txc_gguf_is_path(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 5 && strcmp(path + n - 5, ".gguf") == 0;
}
