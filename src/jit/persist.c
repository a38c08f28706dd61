/* The on-disk cache of compiled plans: keys, the file format, reading with
 * validation, atomic writing. See jit/persist.h. */
#include "jit/persist.h"
#include "txc/env.h"
#include "txc/jit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TXC_VERSION
#define TXC_VERSION "unknown"
#endif

static const char MAGIC[8] = {'T', 'X', 'C', 'P', 'L', 'A', 'N', '\n'};
#define BYTE_ORDER_TAG 0x01020304u
#define NODE_VIEW 1u
#define NODE_INPLACE 2u
#define NODE_DEAD 4u
#define NODE_FUSED 8u
#define MAX_EXTENT ((int64_t)1 << 50) /* elements: far beyond any real buffer, far from overflow */

/* ---- hashing ------------------------------------------------------------------------------ */

/* Two 64-bit lanes over 8-byte words. Each step of each lane is a
 * bijection of the state for a given word and of the word for a given
 * state, so a file that differs from the hashed one in a single word always
 * gets another checksum; the final mix spreads every bit. */
typedef struct hasher {
    uint64_t a, b, n;
} hasher;

static void h_init(hasher *h)
{
    h->a = 14695981039346656037ull;
    h->b = 0x6c62272e07bb0142ull;
    h->n = 0;
}

static inline void h_word(hasher *h, uint64_t w)
{
    h->a = (h->a ^ w) * 0x9e3779b97f4a7c15ull;
    h->a ^= h->a >> 29;
    h->b = (h->b + w) * 0xc2b2ae3d27d4eb4full;
    h->b = (h->b << 31) | (h->b >> 33);
    h->n++;
}

static void h_bytes(hasher *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    h_word(h, (uint64_t)n);
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h_word(h, w);
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h_word(h, w);
    }
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static txc_plan_key h_final(const hasher *h)
{
    txc_plan_key k = {{mix64(h->a ^ mix64(h->n)), mix64(h->b + 0x9e3779b97f4a7c15ull * h->n)}};
    k.h[1] ^= mix64(k.h[0]);
    return k;
}

static txc_plan_key hash_of(const void *p, size_t n)
{
    hasher h;
    h_init(&h);
    h_bytes(&h, p, n);
    return h_final(&h);
}

txc_plan_key txc_persist_hash(const void *p, size_t n) { return hash_of(p, n); }

/* What the meaning of a file's numbers depends on besides the format: the
 * op table (ids, names, which are views), the dtypes, the limits, the
 * fused programs' encoding. */
static uint64_t op_table_fingerprint(void)
{
    hasher h;
    h_init(&h);
    h_word(&h, TXC_OP_COUNT);
    for (int i = 0; i < TXC_OP_COUNT; i++) {
        const char *name = txc_op_name((txc_op_id)i);
        h_bytes(&h, name ? name : "", name ? strlen(name) : 0);
        const txc_op_def *d = txc_op_get((txc_op_id)i);
        h_word(&h, (uint64_t)(d && d->view ? 1 : 0));
    }
    h_word(&h, TXC_DTYPE_COUNT);
    for (int d = 0; d < TXC_DTYPE_COUNT; d++) {
        h_word(&h, txc_dtype_size((txc_dtype)d));
        h_word(&h, (uint64_t)txc_dtype_block_size((txc_dtype)d));
        h_word(&h, txc_dtype_block_bytes((txc_dtype)d));
    }
    h_word(&h, TXC_MAX_DIMS);
    h_word(&h, TXC_MAX_OP_INPUTS);
    h_word(&h, txc_fused_format());
    return h_final(&h).h[0];
}

/* Bytes of a constant's numel elements (whole blocks for a quantized dtype;
 * 0 for a count that is not). */
static size_t const_bytes(txc_dtype dt, int64_t numel)
{
    size_t n = 0;
    return txc_dtype_nbytes(dt, numel, &n) ? n : 0;
}

static int clamp_ints(int n) { return n < 0 ? 0 : n > TXC_MAX_DIMS + 2 ? TXC_MAX_DIMS + 2 : n; }

static void hash_value(hasher *h, const txc_value *v)
{
    h_word(h, (uint64_t)v->dtype);
    h_word(h, (uint64_t)v->ndim);
    for (int d = 0; d < v->ndim && d < TXC_MAX_DIMS; d++) {
        h_word(h, (uint64_t)v->shape[d]);
        h_word(h, (uint64_t)v->strides[d]);
    }
    h_word(h, (uint64_t)v->offset);
    h_word(h, (uint64_t)(int64_t)v->buffer);
    h_word(h, (uint64_t)(int64_t)v->producer);
}

/* The attributes as the op sees them (the ints in use, as CSE compares). */
static void hash_attrs(hasher *h, const txc_op_attrs *a)
{
    h_word(h, (uint64_t)(int64_t)a->n_ints);
    for (int i = 0, n = clamp_ints(a->n_ints); i < n; i++)
        h_word(h, (uint64_t)a->ints[i]);
    for (int i = 0; i < 3; i++) {
        uint64_t w;
        memcpy(&w, &a->f[i], sizeof w);
        h_word(h, w);
    }
    h_word(h, (uint64_t)a->dtype);
    h_word(h, (uint64_t)a->flags);
}

txc_plan_key txc_persist_key(const txc_graph *g, txc_tensor *const *in, int n, const void *statics, size_t len)
{
    hasher h;
    h_init(&h);
    h_bytes(&h, MAGIC, sizeof MAGIC);
    h_word(&h, TXC_PLAN_FORMAT);
    h_bytes(&h, TXC_VERSION, strlen(TXC_VERSION));
    h_word(&h, op_table_fingerprint());
    /* the signature */
    h_word(&h, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        const txc_tensor *t = in[i];
        txc_device dev = txc_tensor_device(t);
        h_word(&h, (uint64_t)t->dtype);
        h_word(&h, (uint64_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) {
            h_word(&h, (uint64_t)t->shape[d]);
            h_word(&h, (uint64_t)t->strides[d]);
        }
        h_word(&h, (uint64_t)dev.type);
        h_word(&h, (uint64_t)(int64_t)dev.index);
    }
    h_bytes(&h, statics ? statics : "", statics ? len : 0);
    /* the traced graph */
    h_word(&h, (uint64_t)g->n_values);
    for (int v = 0; v < g->n_values; v++)
        hash_value(&h, &g->values[v]);
    h_word(&h, (uint64_t)g->n_buffers);
    for (int b = 0; b < g->n_buffers; b++) {
        const txc_buffer *B = &g->buffers[b];
        h_word(&h, (uint64_t)B->kind);
        h_word(&h, (uint64_t)B->dtype);
        h_word(&h, (uint64_t)B->numel);
        h_word(&h, (uint64_t)(int64_t)B->input);
        if (B->kind == TXC_BUF_CONST && B->konst) { /* captured: its bytes */
            const txc_array *a = B->konst->array;
            size_t bytes = const_bytes(a->dtype, a->numel);
            txc_plan_key c = hash_of(a->data, bytes);
            h_word(&h, c.h[0]);
            h_word(&h, c.h[1]);
        }
    }
    h_word(&h, (uint64_t)g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *nd = &g->nodes[i];
        h_word(&h, (uint64_t)nd->op);
        h_word(&h, (uint64_t)nd->n_in);
        for (int j = 0; j < nd->n_in; j++)
            h_word(&h, (uint64_t)(int64_t)nd->in[j]);
        h_word(&h, (uint64_t)(int64_t)nd->out);
        hash_attrs(&h, &nd->attrs);
        h_word(&h, (uint64_t)(nd->is_view | nd->inplace << 1 | nd->dead << 2 | (nd->fused != NULL) << 3));
    }
    h_word(&h, (uint64_t)g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++)
        h_word(&h, (uint64_t)(int64_t)g->inputs[i]);
    h_word(&h, (uint64_t)g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++)
        h_word(&h, (uint64_t)(int64_t)g->outputs[i]);
    return h_final(&h);
}

bool txc_persist_path(char *buf, size_t cap, const char *dir, const char *name, txc_plan_key key)
{
    char nm[64];
    size_t k = 0;
    for (const char *s = name ? name : "fn"; *s && k + 1 < sizeof nm; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-';
        nm[k++] = ok ? c : '_';
    }
    nm[k] = 0;
    if (k == 0 || nm[0] == '.')
        nm[0] = k == 0 ? (nm[1] = 0, 'f') : '_';
    int w = snprintf(buf, cap, "%s/%s-%016llx%016llx.txcplan", dir, nm, (unsigned long long)key.h[0],
                     (unsigned long long)key.h[1]);
    return w > 0 && (size_t)w < cap;
}

static void say(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
    bool bad;
} wbuf;

static void w_bytes(wbuf *w, const void *src, size_t n)
{
    if (w->bad)
        return;
    if (w->n + n > w->cap) {
        size_t c = w->cap ? w->cap : 1 << 16;
        while (c < w->n + n)
            c *= 2;
        unsigned char *p = realloc(w->p, c);
        if (!p) {
            w->bad = true;
            return;
        }
        w->p = p;
        w->cap = c;
    }
    if (n)
        memcpy(w->p + w->n, src, n);
    w->n += n;
}

static void w_u32(wbuf *w, uint32_t v) { w_bytes(w, &v, sizeof v); }
static void w_i32(wbuf *w, int32_t v) { w_bytes(w, &v, sizeof v); }
static void w_i64(wbuf *w, int64_t v) { w_bytes(w, &v, sizeof v); }
static void w_u64(wbuf *w, uint64_t v) { w_bytes(w, &v, sizeof v); }
static void w_str(wbuf *w, const char *s)
{
    w_u32(w, (uint32_t)strlen(s));
    w_bytes(w, s, strlen(s));
}

/* mkdir -p; true when `dir` exists as a folder afterwards. */
static bool make_dirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return false;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return false;
            *s = '/';
        }
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        return false;
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Why a graph cannot be written (a value this format does not hold). */
static bool writable(const txc_graph *g, char *why, size_t cap)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_op_attrs *a = &g->nodes[i].attrs;
        if (a->n_ints < 0 || a->n_ints > TXC_MAX_DIMS + 2 || (int)a->dtype < 0 || a->dtype >= TXC_DTYPE_COUNT) {
            say(why, cap, "node %d has attributes the plan format does not hold", i);
            return false;
        }
    }
    for (int b = 0; b < g->n_buffers; b++) {
        const txc_buffer *B = &g->buffers[b];
        if (B->kind == TXC_BUF_CONST &&
            (!B->konst || B->konst->array->numel != B->numel || B->konst->array->dtype != B->dtype ||
             txc_device_equal(txc_tensor_device(B->konst), TXC_CPU) == false)) {
            say(why, cap, "constant buffer %d is not a plain CPU array of its size", b);
            return false;
        }
    }
    return true;
}

static void serialize(wbuf *w, const char *name, txc_plan_key key, const txc_graph *g, int64_t arena)
{
    w_bytes(w, MAGIC, sizeof MAGIC);
    w_u32(w, TXC_PLAN_FORMAT);
    w_u32(w, BYTE_ORDER_TAG);
    w_str(w, TXC_VERSION);
    w_u64(w, op_table_fingerprint());
    w_u64(w, key.h[0]);
    w_u64(w, key.h[1]);
    w_str(w, name ? name : "");
    w_i64(w, arena);
    w_i32(w, g->n_values);
    w_i32(w, g->n_nodes);
    w_i32(w, g->n_buffers);
    w_i32(w, g->n_inputs);
    w_i32(w, g->n_outputs);
    for (int v = 0; v < g->n_values; v++) {
        const txc_value *x = &g->values[v];
        w_i32(w, (int32_t)x->dtype);
        w_i32(w, x->ndim);
        w_bytes(w, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        w_bytes(w, x->strides, sizeof(int64_t) * (size_t)x->ndim);
        w_i64(w, x->offset);
        w_i32(w, x->buffer);
        w_i32(w, x->producer);
    }
    for (int b = 0; b < g->n_buffers; b++) {
        const txc_buffer *B = &g->buffers[b];
        w_i32(w, (int32_t)B->kind);
        w_i32(w, (int32_t)B->dtype);
        w_i64(w, B->numel);
        w_i32(w, B->input);
        w_i64(w, B->arena_offset);
        w_i32(w, B->first_use);
        w_i32(w, B->last_use);
        if (B->kind == TXC_BUF_CONST) {
            size_t bytes = const_bytes(B->dtype, B->numel);
            w_u64(w, (uint64_t)bytes);
            w_bytes(w, B->konst->array->data, bytes);
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *n = &g->nodes[i];
        w_i32(w, (int32_t)n->op);
        w_i32(w, n->n_in);
        w_bytes(w, n->in, sizeof(int) * (size_t)n->n_in);
        w_i32(w, n->out);
        w_u32(w, (n->is_view ? NODE_VIEW : 0) | (n->inplace ? NODE_INPLACE : 0) | (n->dead ? NODE_DEAD : 0) |
                     (n->fused ? NODE_FUSED : 0));
        w_i32(w, n->attrs.n_ints);
        w_bytes(w, n->attrs.ints, sizeof(int64_t) * (size_t)n->attrs.n_ints);
        w_bytes(w, n->attrs.f, sizeof n->attrs.f);
        w_i32(w, (int32_t)n->attrs.dtype);
        w_u32(w, n->attrs.flags);
        if (n->fused) {
            size_t len = txc_fused_serialize(n->fused, NULL, 0);
            unsigned char tmp[1024];
            if (len > sizeof tmp) {
                w->bad = true;
                return;
            }
            txc_fused_serialize(n->fused, tmp, sizeof tmp);
            w_u32(w, (uint32_t)len);
            w_bytes(w, tmp, len);
        }
    }
    w_bytes(w, g->inputs, sizeof(int) * (size_t)g->n_inputs);
    w_bytes(w, g->outputs, sizeof(int) * (size_t)g->n_outputs);
    if (!w->bad) {
        txc_plan_key sum = hash_of(w->p, w->n);
        w_u64(w, sum.h[0]);
        w_u64(w, sum.h[1]);
    }
}

bool txc_persist_save(const char *path, const char *name, txc_plan_key key, const txc_graph *g, int64_t arena_bytes,
                      char *why, size_t cap)
{
    if (!writable(g, why, cap))
        return false;
    char dir[PATH_MAX], tmp[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, "%s", slash ? "/" : ".");
    if (!make_dirs(dir)) {
        say(why, cap, "cannot create the folder %s: %s", dir, strerror(errno));
        return false;
    }
    wbuf w = {0};
    serialize(&w, name, key, g, arena_bytes);
    if (w.bad || (int64_t)w.n > TXC_PLAN_MAX_FILE) {
        say(why, cap, w.bad ? "out of memory writing the plan" : "the plan is larger than %lld bytes",
            (long long)TXC_PLAN_MAX_FILE);
        free(w.p);
        return false;
    }
    static unsigned counter;
    unsigned c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), c);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        say(why, cap, "cannot write %s: %s", tmp, strerror(errno));
        free(w.p);
        return false;
    }
    size_t done = 0;
    while (done < w.n) {
        ssize_t k = write(fd, w.p + done, w.n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        done += (size_t)k;
    }
    int err = done == w.n ? 0 : errno ? errno : EIO;
    if (close(fd) != 0 && !err)
        err = errno;
    free(w.p);
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        say(why, cap, "cannot write %s: %s", path, strerror(err));
        return false;
    }
    return true;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct rbuf {
    const unsigned char *p;
    size_t n, at;
    bool bad;
} rbuf;

static const unsigned char *r_span(rbuf *r, size_t n)
{
    if (r->bad || n > r->n - r->at) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *s = r->p + r->at;
    r->at += n;
    return s;
}

static void r_bytes(rbuf *r, void *dst, size_t n)
{
    const unsigned char *s = r_span(r, n);
    if (s)
        memcpy(dst, s, n);
    else
        memset(dst, 0, n);
}

static uint32_t r_u32(rbuf *r)
{
    uint32_t v;
    r_bytes(r, &v, sizeof v);
    return v;
}
static int32_t r_i32(rbuf *r)
{
    int32_t v;
    r_bytes(r, &v, sizeof v);
    return v;
}
static int64_t r_i64(rbuf *r)
{
    int64_t v;
    r_bytes(r, &v, sizeof v);
    return v;
}
static uint64_t r_u64(rbuf *r)
{
    uint64_t v;
    r_bytes(r, &v, sizeof v);
    return v;
}
static size_t r_left(const rbuf *r) { return r->bad ? 0 : r->n - r->at; }

/* Element offsets [lo, hi] a value reads or writes (false on a negative
 * size or extents past MAX_EXTENT); *empty when it has no elements. */
static bool value_span(const txc_value *v, int64_t *lo, int64_t *hi, bool *empty)
{
    *lo = *hi = v->offset;
    *empty = false;
    if (v->offset < 0 || v->offset > MAX_EXTENT)
        return false;
    for (int d = 0; d < v->ndim; d++) {
        int64_t s = v->shape[d], st = v->strides[d];
        if (s < 0 || s > MAX_EXTENT || st < -MAX_EXTENT || st > MAX_EXTENT)
            return false;
        if (s == 0)
            *empty = true;
    }
    if (*empty)
        return true;
    for (int d = 0; d < v->ndim; d++) {
        int64_t reach;
        if (__builtin_mul_overflow(v->shape[d] - 1, v->strides[d], &reach))
            return false;
        if (reach >= 0)
            *hi += reach;
        else
            *lo += reach;
        if (*hi > MAX_EXTENT || *lo < -MAX_EXTENT)
            return false;
    }
    return true;
}

/* A header over value v for shape inference: CONST values over their
 * bytes, the others over the graph's zero-size placeholder (as tracing). */
static void infer_header(const txc_graph *g, int v, txc_env *env, txc_tensor *h)
{
    const txc_value *x = &g->values[v];
    const txc_buffer *b = &g->buffers[x->buffer];
    memset(h, 0, sizeof *h);
    h->refcount = 1 << 30;
    h->env = env;
    h->array = b->kind == TXC_BUF_CONST ? b->konst->array : g->placeholder;
    h->dtype = x->dtype;
    h->ndim = x->ndim;
    memcpy(h->shape, x->shape, sizeof h->shape);
    memcpy(h->strides, x->strides, sizeof h->strides);
    h->offset = x->offset;
    h->numel = txc_shape_numel(x->ndim, x->shape);
    h->value = -1;
}

/* May live node i read or write value v at run time: its buffer is an
 * input, a constant, or placed in the arena. */
static bool usable(const txc_graph *g, int v)
{
    const txc_buffer *b = &g->buffers[g->values[v].buffer];
    return b->kind != TXC_BUF_TEMP || b->arena_offset >= 0;
}

static bool same_attrs(const txc_op_attrs *a, const txc_op_attrs *b)
{
    if (a->n_ints != b->n_ints || a->dtype != b->dtype || a->flags != b->flags)
        return false;
    for (int i = 0, n = clamp_ints(a->n_ints); i < n; i++)
        if (a->ints[i] != b->ints[i])
            return false;
    return memcmp(a->f, b->f, sizeof a->f) == 0;
}

/* The passes rewrite a graph in place and never add, remove or reorder
 * values, nodes or buffers, nor change a value's geometry or a node's op,
 * attributes and result: what they change is which nodes are dead, the
 * inputs of nodes (CSE, fusion), fused programs, buffers turned into
 * constants (folding), the buffer of views, the outputs (CSE), the arena
 * offsets, and linears that absorbed the add after them (the residual
 * pass: one more input, TXC_ATTR_RESIDUAL, the add's output), and the last
 * nodes of the patterns jit/patterns.c rewrites (another op, inputs and
 * attributes: checked by matching the pattern in the traced graph). A plan read from a file must be the traced graph in
 * everything else. (A pass that breaks this rule makes every load fail
 * safely, and the round-trip tests fail.) */
static bool matches_trace(const txc_graph *g, const txc_graph *t, char *why, size_t cap)
{
    if (g->n_values != t->n_values || g->n_nodes != t->n_nodes || g->n_buffers != t->n_buffers ||
        g->n_inputs != t->n_inputs || g->n_outputs != t->n_outputs) {
        say(why, cap, "corrupt (not the traced graph: counts)");
        return false;
    }
    for (int v = 0; v < g->n_values; v++) {
        const txc_value *a = &g->values[v], *b = &t->values[v];
        if (a->dtype != b->dtype || a->ndim != b->ndim || a->offset != b->offset ||
            memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) ||
            memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim)) {
            say(why, cap, "corrupt (not the traced graph: value %d)", v);
            return false;
        }
    }
    for (int k = 0; k < g->n_buffers; k++) {
        const txc_buffer *a = &g->buffers[k], *b = &t->buffers[k];
        bool kind_ok = a->kind == b->kind || (a->kind == TXC_BUF_CONST && b->kind == TXC_BUF_TEMP);
        if (!kind_ok || a->dtype != b->dtype || a->numel != b->numel || a->input != b->input) {
            say(why, cap, "corrupt (not the traced graph: buffer %d)", k);
            return false;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *a = &g->nodes[i], *b = &t->nodes[i];
        /* the residual pass: a linear with one more input (the residual), the flag, and the output of the
         * traced add that read its result */
        const bool residual = a->op == TXC_OP_LINEAR && b->op == TXC_OP_LINEAR &&
                              (a->attrs.flags & TXC_ATTR_RESIDUAL) && !(b->attrs.flags & TXC_ATTR_RESIDUAL);
        txc_op_attrs aa = a->attrs;
        bool out_ok = a->out == b->out;
        if (residual) {
            aa.flags &= ~(unsigned)TXC_ATTR_RESIDUAL;
            for (int k = i + 1; k < t->n_nodes && !out_ok; k++) {
                const txc_node *add = &t->nodes[k];
                out_ok = add->op == TXC_OP_ADD && add->out == a->out && add->n_in == 2 &&
                         (add->in[0] == b->out || add->in[1] == b->out);
            }
        }
        /* the pattern pass: the last node of a decomposed norm / rotary embedding as the one kernel */
        if (a->op != b->op && !a->fused && !a->is_view && !a->inplace && a->out == b->out && !b->is_view &&
            !b->inplace && txc_pattern_check(t, i, a))
            continue;
        if (a->op != b->op || !out_ok || a->is_view != b->is_view || a->inplace != b->inplace ||
            (!a->fused && a->n_in != b->n_in + residual) || !same_attrs(&aa, &b->attrs)) {
            say(why, cap, "corrupt (not the traced graph: node %d)", i);
            return false;
        }
    }
    if (memcmp(g->inputs, t->inputs, sizeof(int) * (size_t)g->n_inputs)) {
        say(why, cap, "corrupt (not the traced graph: inputs)");
        return false;
    }
    return true;
}

/* Everything the executor relies on, checked on a graph read from a file. */
static bool check_graph(const txc_graph *g, int64_t arena, const txc_graph *traced, txc_env *env,
                        txc_tensor *const *in, int n, char *why, size_t cap)
{
    if (!matches_trace(g, traced, why, cap))
        return false;
    if (arena < 0 || arena > MAX_EXTENT) {
        say(why, cap, "corrupt (arena size)");
        return false;
    }
    /* inputs: the call's geometry, each on its own INPUT buffer */
    for (int i = 0; i < n; i++) {
        const txc_value *x = &g->values[g->inputs[i]];
        const txc_buffer *b = &g->buffers[x->buffer];
        const txc_tensor *t = in[i];
        if (b->kind != TXC_BUF_INPUT || b->input != i || x->dtype != t->dtype || x->ndim != t->ndim ||
            x->offset != 0 || x->producer != -1 ||
            memcmp(x->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) ||
            memcmp(x->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim)) {
            say(why, cap, "corrupt (input %d does not match the call)", i);
            return false;
        }
    }
    /* buffers */
    int64_t temp_total = 0;
    for (int b = 0; b < g->n_buffers; b++) {
        const txc_buffer *B = &g->buffers[b];
        int64_t bytes = B->numel * (int64_t)txc_dtype_size(B->dtype);
        if (B->kind == TXC_BUF_INPUT &&
            (B->input < 0 || B->input >= n || g->values[g->inputs[B->input]].buffer != b)) {
            say(why, cap, "corrupt (buffer %d: input index)", b);
            return false;
        }
        if (B->kind == TXC_BUF_TEMP) {
            temp_total += ((bytes + 63) & ~(int64_t)63) + 64;
            if (B->arena_offset != -1 &&
                (B->arena_offset < 0 || B->arena_offset % 64 || B->arena_offset > arena || bytes > arena - B->arena_offset)) {
                say(why, cap, "corrupt (buffer %d: arena offset %lld + %lld bytes outside the arena of %lld)", b,
                    (long long)B->arena_offset, (long long)bytes, (long long)arena);
                return false;
            }
        }
        bool use_ok = (B->first_use >= -1 && B->first_use < g->n_nodes) || B->first_use == INT_MAX;
        bool last_ok = (B->last_use >= -1 && B->last_use < g->n_nodes) || B->last_use == INT_MAX;
        if (!use_ok || !last_ok) {
            say(why, cap, "corrupt (buffer %d: live range)", b);
            return false;
        }
    }
    if (arena > temp_total) {
        say(why, cap, "corrupt (arena of %lld bytes for %lld bytes of temporaries)", (long long)arena,
            (long long)temp_total);
        return false;
    }
    /* values: dtype of their buffer, elements within it */
    for (int v = 0; v < g->n_values; v++) {
        const txc_value *x = &g->values[v];
        const txc_buffer *B = &g->buffers[x->buffer];
        int64_t lo, hi;
        bool empty;
        if (x->dtype != B->dtype || !value_span(x, &lo, &hi, &empty)) {
            say(why, cap, "corrupt (value %d: dtype or geometry)", v);
            return false;
        }
        if (empty)
            continue;
        int64_t blo = 0, bhi = B->numel - 1;
        if (B->kind == TXC_BUF_INPUT) { /* within the input tensor's own elements */
            bool e;
            if (!value_span(&g->values[g->inputs[B->input]], &blo, &bhi, &e) || e)
                blo = 0, bhi = -1;
        }
        if (lo < blo || hi > bhi) {
            say(why, cap, "corrupt (value %d: elements [%lld, %lld] outside buffer %d)", v, (long long)lo,
                (long long)hi, x->buffer);
            return false;
        }
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (!usable(g, g->outputs[k])) {
            say(why, cap, "corrupt (output %d has no memory)", k);
            return false;
        }
    /* CONST buffers captured while tracing hold the traced bytes */
    for (int b = 0; b < g->n_buffers && b < traced->n_buffers; b++) {
        const txc_buffer *B = &g->buffers[b], *T = &traced->buffers[b];
        if (B->kind != TXC_BUF_CONST || T->kind != TXC_BUF_CONST)
            continue;
        const txc_array *ta = T->konst->array;
        size_t bytes = const_bytes(B->dtype, B->numel);
        if (ta->numel != B->numel || ta->dtype != B->dtype || memcmp(ta->data, B->konst->array->data, bytes)) {
            say(why, cap, "stale (captured constant %d differs from the traced one)", b);
            return false;
        }
    }
    /* nodes: what runs must be a kernel of consistent shapes */
    txc_tensor *hin = malloc(sizeof *hin * TXC_MAX_OP_INPUTS);
    txc_tensor *args[TXC_MAX_OP_INPUTS];
    if (!hin) {
        say(why, cap, "out of memory");
        return false;
    }
    bool ok = true;
    txc_status before = txc_last_status();
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const txc_node *nd = &g->nodes[i];
        if (nd->dead)
            continue;
        const txc_value *o = &g->values[nd->out];
        const txc_op_def *def = txc_op_get(nd->op);
        if (nd->is_view) {
            ok = !nd->fused && !nd->inplace && def && def->view && nd->n_in >= 1 &&
                 g->values[nd->in[0]].buffer == o->buffer;
            if (!ok)
                say(why, cap, "corrupt (node %d: view)", i);
            continue;
        }
        for (int j = 0; j < nd->n_in && ok; j++)
            ok = usable(g, nd->in[j]);
        ok = ok && usable(g, nd->out);
        if (!ok) {
            say(why, cap, "corrupt (node %d reads or writes a value without memory)", i);
            break;
        }
        if (nd->inplace) {
            const txc_value *self = nd->n_in >= 1 ? &g->values[nd->in[0]] : NULL;
            ok = !nd->fused && self && self->buffer == o->buffer && self->dtype == o->dtype &&
                 self->ndim == o->ndim && self->offset == o->offset &&
                 !memcmp(self->shape, o->shape, sizeof(int64_t) * (size_t)o->ndim) &&
                 !memcmp(self->strides, o->strides, sizeof(int64_t) * (size_t)o->ndim) &&
                 g->buffers[o->buffer].kind != TXC_BUF_CONST;
        } else {
            ok = g->buffers[o->buffer].kind == TXC_BUF_TEMP && txc_value_is_contiguous(o);
        }
        if (!ok) {
            say(why, cap, "corrupt (node %d: output)", i);
            break;
        }
        if (nd->fused) { /* float32 inputs broadcasting to the output */
            ok = o->dtype == TXC_F32;
            for (int j = 0; j < nd->n_in && ok; j++) {
                const txc_value *x = &g->values[nd->in[j]];
                ok = x->dtype == TXC_F32 && x->ndim <= o->ndim;
                for (int d = 0; d < x->ndim && ok; d++) {
                    int64_t s = x->shape[x->ndim - 1 - d];
                    ok = s == 1 || s == o->shape[o->ndim - 1 - d];
                }
            }
            if (!ok)
                say(why, cap, "corrupt (node %d: fused operands)", i);
            continue;
        }
        if (!def || def->view || !def->infer || !def->cpu) {
            say(why, cap, "corrupt (node %d: %s is not a kernel)", i, txc_op_name(nd->op));
            ok = false;
            break;
        }
        for (int j = 0; j < nd->n_in; j++) {
            infer_header(g, nd->in[j], env, &hin[j]);
            args[j] = &hin[j];
        }
        txc_meta m;
        memset(&m, 0, sizeof m);
        ok = def->infer(args, nd->n_in, &nd->attrs, &m) == TXC_OK && m.dtype == o->dtype && m.ndim == o->ndim &&
             !memcmp(m.shape, o->shape, sizeof(int64_t) * (size_t)o->ndim);
        if (!ok)
            say(why, cap, "corrupt (node %d: %s's shapes do not infer)", i, txc_op_name(nd->op));
    }
    if (before == TXC_OK)
        txc_clear_error();
    free(hin);
    return ok;
}

/* Parse the body (after the header) into a graph; NULL with `why`. */
static txc_graph *parse(rbuf *r, txc_env *env, int n, char *why, size_t cap)
{
    int64_t arena = r_i64(r);
    int32_t nv = r_i32(r), nn = r_i32(r), nb = r_i32(r), ni = r_i32(r), no = r_i32(r);
    (void)arena;
    /* every record has a minimum size: counts cannot exceed the bytes left */
    size_t left = r_left(r);
    if (r->bad || nv < 1 || nn < 0 || nb < 1 || ni != n || no < 0 || no > TXC_JIT_MAX_IO ||
        (size_t)nv > left / 24 || (size_t)nn > left / 60 || (size_t)nb > left / 32) {
        say(why, cap, "corrupt (counts)");
        return NULL;
    }
    txc_graph *g = txc_graph_new();
    if (!g) {
        say(why, cap, "out of memory");
        return NULL;
    }
    g->values = calloc((size_t)nv, sizeof *g->values);
    g->nodes = calloc((size_t)nn + 1, sizeof *g->nodes);
    g->buffers = calloc((size_t)nb, sizeof *g->buffers);
    g->inputs = calloc((size_t)ni + 1, sizeof *g->inputs);
    g->outputs = calloc((size_t)no + 1, sizeof *g->outputs);
    if (!g->values || !g->nodes || !g->buffers || !g->inputs || !g->outputs) {
        say(why, cap, "out of memory");
        goto fail;
    }
    g->cap_values = nv;
    g->cap_nodes = nn + 1;
    g->cap_buffers = nb;
    for (int v = 0; v < nv; v++) {
        txc_value *x = &g->values[v];
        int32_t dt = r_i32(r), nd = r_i32(r);
        if (r->bad || dt < 0 || dt >= TXC_DTYPE_COUNT || nd < 0 || nd > TXC_MAX_DIMS) {
            say(why, cap, "corrupt (value %d)", v);
            goto fail;
        }
        x->dtype = (txc_dtype)dt;
        x->ndim = nd;
        r_bytes(r, x->shape, sizeof(int64_t) * (size_t)nd);
        r_bytes(r, x->strides, sizeof(int64_t) * (size_t)nd);
        x->offset = r_i64(r);
        x->buffer = r_i32(r);
        x->producer = r_i32(r);
        g->n_values = v + 1;
        if (r->bad || x->buffer < 0 || x->buffer >= nb || x->producer < -1 || x->producer >= nn) {
            say(why, cap, "corrupt (value %d: indices)", v);
            goto fail;
        }
    }
    for (int b = 0; b < nb; b++) {
        txc_buffer *B = &g->buffers[b];
        int32_t kind = r_i32(r), dt = r_i32(r);
        B->numel = r_i64(r);
        B->input = r_i32(r);
        B->arena_offset = r_i64(r);
        B->first_use = r_i32(r);
        B->last_use = r_i32(r);
        if (r->bad || kind < TXC_BUF_INPUT || kind > TXC_BUF_TEMP || dt < 0 || dt >= TXC_DTYPE_COUNT ||
            B->numel < 0 || B->numel > MAX_EXTENT) {
            say(why, cap, "corrupt (buffer %d)", b);
            goto fail;
        }
        B->kind = (txc_buffer_kind)kind;
        B->dtype = (txc_dtype)dt;
        g->n_buffers = b + 1;
        if (B->kind == TXC_BUF_CONST) {
            uint64_t bytes = r_u64(r);
            const unsigned char *data = r_span(r, (size_t)bytes);
            if (r->bad || bytes != (uint64_t)const_bytes(B->dtype, B->numel)) {
                say(why, cap, "corrupt (constant %d: size)", b);
                goto fail;
            }
            int64_t numel = B->numel, stride = 1;
            txc_array *a = txc_array_new(txc_env_device(env), B->dtype, 1, &numel);
            B->konst = a ? txc_impl_tensor_new(env, a, 1, &numel, &stride, 0) : NULL;
            txc_array_release(a);
            if (!B->konst) {
                say(why, cap, "out of memory");
                goto fail;
            }
            if (bytes)
                memcpy(B->konst->array->data, data, (size_t)bytes);
        }
    }
    for (int i = 0; i < nn; i++) {
        txc_node *nd = &g->nodes[i];
        int32_t op = r_i32(r), n_in = r_i32(r);
        if (r->bad || op < 0 || op >= TXC_OP_COUNT || n_in < 0 || n_in > TXC_MAX_OP_INPUTS) {
            say(why, cap, "corrupt (node %d: op)", i);
            goto fail;
        }
        nd->op = (txc_op_id)op;
        nd->in = malloc(sizeof(int) * (size_t)(n_in > 0 ? n_in : 1));
        if (!nd->in) {
            say(why, cap, "out of memory");
            goto fail;
        }
        g->n_nodes = i + 1;
        nd->n_in = n_in;
        r_bytes(r, nd->in, sizeof(int) * (size_t)n_in);
        nd->out = r_i32(r);
        uint32_t flags = r_u32(r);
        int32_t n_ints = r_i32(r);
        bool ok = !r->bad && nd->out >= 0 && nd->out < nv && flags <= 15 && n_ints >= 0 && n_ints <= TXC_MAX_DIMS + 2;
        for (int j = 0; j < n_in && ok; j++)
            ok = nd->in[j] >= 0 && nd->in[j] < nv;
        if (!ok) {
            say(why, cap, "corrupt (node %d: indices)", i);
            goto fail;
        }
        nd->is_view = flags & NODE_VIEW;
        nd->inplace = flags & NODE_INPLACE;
        nd->dead = flags & NODE_DEAD;
        nd->attrs.n_ints = n_ints;
        r_bytes(r, nd->attrs.ints, sizeof(int64_t) * (size_t)n_ints);
        r_bytes(r, nd->attrs.f, sizeof nd->attrs.f);
        int32_t adt = r_i32(r);
        nd->attrs.flags = r_u32(r);
        if (r->bad || adt < 0 || adt >= TXC_DTYPE_COUNT) {
            say(why, cap, "corrupt (node %d: attributes)", i);
            goto fail;
        }
        nd->attrs.dtype = (txc_dtype)adt;
        if (flags & NODE_FUSED) {
            uint32_t len = r_u32(r);
            const unsigned char *prog = r_span(r, len);
            nd->fused = prog ? txc_fused_deserialize(prog, len, n_in) : NULL;
            if (!nd->fused) {
                say(why, cap, "corrupt (node %d: fused program)", i);
                goto fail;
            }
        }
    }
    r_bytes(r, g->inputs, sizeof(int) * (size_t)ni);
    r_bytes(r, g->outputs, sizeof(int) * (size_t)no);
    g->n_inputs = ni;
    g->n_outputs = no;
    bool ok = !r->bad && r_left(r) == 0;
    for (int i = 0; i < ni && ok; i++)
        ok = g->inputs[i] >= 0 && g->inputs[i] < nv;
    for (int i = 0; i < no && ok; i++)
        ok = g->outputs[i] >= 0 && g->outputs[i] < nv;
    if (!ok) {
        say(why, cap, "corrupt (inputs/outputs)");
        goto fail;
    }
    return g;
fail:
    txc_graph_free(g);
    return NULL;
}

txc_persist_result txc_persist_load(const char *path, txc_plan_key key, const txc_graph *traced, txc_env *env,
                                    txc_tensor *const *in, int n, txc_graph **out, int64_t *arena_bytes, char *why,
                                    size_t cap)
{
    *out = NULL;
    txc_status before = txc_last_status();
    /* O_NONBLOCK: a FIFO (or a device) where the plan should be must not
     * block the open; its type is checked before any read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) /* ENOTDIR: the folder is a file; saving will say so */
            return TXC_PERSIST_ABSENT;
        say(why, cap, "unreadable (%s)", strerror(errno));
        return TXC_PERSIST_REJECTED;
    }
    struct stat st;
    unsigned char *data = NULL;
    txc_persist_result res = TXC_PERSIST_REJECTED;
    size_t size = 0;
    if (fstat(fd, &st) != 0) {
        say(why, cap, "unreadable (%s)", strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        say(why, cap, "not a regular file (%s): skipped",
            S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder" : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
        goto done;
    }
    if (st.st_size > TXC_PLAN_MAX_FILE) {
        say(why, cap, "unreadable (larger than %lld bytes)", (long long)TXC_PLAN_MAX_FILE);
        goto done;
    }
    size = (size_t)st.st_size;
    data = malloc(size ? size : 1);
    size_t got = 0;
    while (data && got < size) {
        ssize_t k = read(fd, data + got, size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (!data || got != size) {
        say(why, cap, data ? "unreadable (short read)" : "unreadable (out of memory)");
        goto done;
    }
    rbuf r = {data, size, 0, false};
    const unsigned char *magic = r_span(&r, sizeof MAGIC);
    if (!magic || memcmp(magic, MAGIC, sizeof MAGIC)) {
        say(why, cap, "corrupt (not a plan file)");
        goto done;
    }
    uint32_t format = r_u32(&r), order = r_u32(&r);
    if (r.bad) {
        say(why, cap, "corrupt (truncated)");
        goto done;
    }
    if (format != TXC_PLAN_FORMAT) {
        say(why, cap, "stale (format %u, this txc reads %u)", format, TXC_PLAN_FORMAT);
        goto done;
    }
    if (order != BYTE_ORDER_TAG) {
        say(why, cap, "stale (written on a machine of another byte order)");
        goto done;
    }
    if (size < r.at + 16) {
        say(why, cap, "corrupt (truncated)");
        goto done;
    }
    txc_plan_key sum = hash_of(data, size - 16), stored;
    memcpy(stored.h, data + size - 16, 16);
    if (sum.h[0] != stored.h[0] || sum.h[1] != stored.h[1]) {
        say(why, cap, "corrupt (checksum)");
        goto done;
    }
    r.n = size - 16; /* the body ends at the checksum */
    uint32_t vlen = r_u32(&r);
    const unsigned char *ver = r_span(&r, vlen);
    if (!ver || vlen != strlen(TXC_VERSION) || memcmp(ver, TXC_VERSION, vlen)) {
        say(why, cap, "stale (written by txc %.*s, this is %s)", ver && vlen < 64 ? (int)vlen : 1,
            ver && vlen < 64 ? (const char *)ver : "?", TXC_VERSION);
        goto done;
    }
    if (r_u64(&r) != op_table_fingerprint()) {
        say(why, cap, "stale (written by a build with another op table)");
        goto done;
    }
    txc_plan_key k;
    k.h[0] = r_u64(&r);
    k.h[1] = r_u64(&r);
    uint32_t nlen = r_u32(&r);
    r_span(&r, nlen);
    if (r.bad || k.h[0] != key.h[0] || k.h[1] != key.h[1]) {
        say(why, cap, "corrupt (key)");
        goto done;
    }
    size_t body = r.at;
    int64_t arena = r_i64(&r);
    r.at = body;
    txc_graph *g = parse(&r, env, n, why, cap);
    if (!g)
        goto done;
    if (!check_graph(g, arena, traced, env, in, n, why, cap)) {
        txc_graph_free(g);
        goto done;
    }
    *out = g;
    *arena_bytes = arena;
    res = TXC_PERSIST_LOADED;
    futimens(fd, NULL); /* its last use, for the size cap's LRU eviction (txc_persist_trim); best effort */
done:
    free(data);
    close(fd);
    if (before == TXC_OK)
        txc_clear_error();
    return res;
}
