/* The jit: signatures, the plan cache, compilation and the executor.
 * See include/txc/jit.h and jit/graph.h. */
#include "txc/jit.h"
#include "jit/graph.h"
#include "jit/persist.h"
#include "jit/trace.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One input's part of a signature. */
typedef struct sig_entry {
    txc_dtype dtype;
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    int64_t strides[TXC_MAX_DIMS];
    txc_device device;
    const struct txc_sharding *sharding; /* txc/shard.h: the rules trace another graph for another one */
} sig_entry;

typedef struct txc_plan {
    uint64_t hash;
    int n_inputs;
    sig_entry *sig;
    unsigned char *statics;
    size_t static_len;
    txc_graph *graph;
    txc_storage *arena;
    txc_array **buf_arrays; /* per buffer: TEMP arrays over the arena, CONST the captured array */
    txc_tensor *hdr;        /* per value: the tensor the kernels see */
    txc_tensor **argv;      /* per node: pointers into hdr (node_argv[i] .. +n_in) */
    int *node_argv;
    int *exec;              /* live kernel nodes, in order */
    int *group;             /* per exec slot: sibling linears run from it as one (1: alone, 0: run by a leader) */
    int n_exec;
    int *bind_start, *bind_vals; /* per input: the values living in its buffer */
    const struct txc_sharding **out_sharding; /* per output: its sharding when traced (txc/shard.h) */
    int64_t arena_bytes;
    struct txc_plan *next;
} txc_plan;

struct txc_jit {
    txc_env *env;
    char name[64];
    txc_jit_fn fn;
    void *ctx;
    txc_plan *plans;     /* most recently used first */
    txc_jit_stats stats;
    char reason[512];
    char **last_names;   /* input names of the last call that compiled */
    char *cache_dir;     /* the compile cache folder, NULL: off */
    int64_t cache_max_bytes; /* its size cap (txc_jit_set_compile_cache_max_bytes); 0: none */
    char cache_msg[3 * PATH_MAX + 1024];
    bool profile;                                 /* time each kernel launch */
    double prof_ms[TXC_OP_COUNT + 2];             /* per op; then fused, linear group */
    uint64_t prof_calls[TXC_OP_COUNT + 2];
    txc_jit_gemm_time prof_gemm[TXC_JIT_PROFILE_GEMM_SHAPES]; /* per GEMM shape, in first-seen order */
    int n_prof_gemm;
    uint64_t prof_gemm_other_calls; /* GEMM launches of shapes past the table's room */
    double prof_gemm_other_ms;
};

#define PROF_FUSED TXC_OP_COUNT
#define PROF_GROUP (TXC_OP_COUNT + 1)

/* Plans one jit saves to the compile cache per process, at most (a power-of-
 * two prefill bucket per doubling of the prompt needs ~log2(max_cache_len)). */
#define TXC_JIT_MAX_SAVES 32

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- signatures ------------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void entry_of(const txc_tensor *t, sig_entry *e)
{
    memset(e, 0, sizeof *e);
    e->dtype = t->dtype;
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(e->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    e->device = txc_tensor_device(t);
    e->sharding = t->sharding;
}

static uint64_t signature_hash(txc_tensor *const *in, int n, const void *statics, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    h = fnv(h, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        sig_entry e;
        entry_of(in[i], &e);
        h = fnv(h, &e, sizeof e);
    }
    h = fnv(h, &len, sizeof len);
    return fnv(h, statics, len);
}

static bool plan_matches(const txc_plan *p, uint64_t h, txc_tensor *const *in, int n, const void *statics,
                         size_t len)
{
    if (p->hash != h || p->n_inputs != n || p->static_len != len || (len && memcmp(p->statics, statics, len)))
        return false;
    for (int i = 0; i < n; i++) {
        sig_entry e;
        entry_of(in[i], &e);
        if (memcmp(&e, &p->sig[i], sizeof e) != 0)
            return false;
    }
    return true;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *s)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* Why `in` missed: the differences from the closest plan held (the one
 * with the fewest differing inputs), as JAX's explain-cache-misses. */
static int plan_distance(const txc_plan *p, txc_tensor *const *in, int n, const void *statics, size_t len)
{
    if (p->n_inputs != n)
        return 1 << 20;
    int d = (p->static_len != len || (len && memcmp(p->statics, statics, len))) ? 1 : 0;
    for (int i = 0; i < n; i++) {
        sig_entry e;
        entry_of(in[i], &e);
        d += memcmp(&e, &p->sig[i], sizeof e) != 0;
    }
    return d;
}

static void explain_miss(txc_jit *jit, txc_tensor *const *in, int n, const char *const *names, const void *statics,
                         size_t len)
{
    const txc_plan *p = jit->plans;
    if (!p) {
        snprintf(jit->reason, sizeof jit->reason, "first call");
        return;
    }
    int best = plan_distance(p, in, n, statics, len);
    for (const txc_plan *q = p->next; q; q = q->next) {
        int d = plan_distance(q, in, n, statics, len);
        if (d < best) {
            best = d;
            p = q;
        }
    }
    if (p->n_inputs != n) {
        snprintf(jit->reason, sizeof jit->reason, "%d inputs instead of %d", n, p->n_inputs);
        return;
    }
    for (int i = 0; i < n; i++) {
        sig_entry e;
        entry_of(in[i], &e);
        const sig_entry *o = &p->sig[i];
        char nm[160], a[128], b[128];
        snprintf(nm, sizeof nm, "input %d%s%s%s", i, names ? " '" : "", names ? names[i] : "", names ? "'" : "");
        if (e.dtype != o->dtype) {
            snprintf(jit->reason, sizeof jit->reason, "%s dtype %s -> %s", nm, txc_dtype_name(o->dtype),
                     txc_dtype_name(e.dtype));
            return;
        }
        if (e.ndim != o->ndim || memcmp(e.shape, o->shape, sizeof e.shape)) {
            shape_str(a, sizeof a, o->ndim, o->shape);
            shape_str(b, sizeof b, e.ndim, e.shape);
            snprintf(jit->reason, sizeof jit->reason, "%s shape %s -> %s", nm, a, b);
            return;
        }
        if (memcmp(e.strides, o->strides, sizeof e.strides)) {
            shape_str(a, sizeof a, o->ndim, o->strides);
            shape_str(b, sizeof b, e.ndim, e.strides);
            snprintf(jit->reason, sizeof jit->reason, "%s strides %s -> %s", nm, a, b);
            return;
        }
        if (!txc_device_equal(e.device, o->device)) {
            snprintf(jit->reason, sizeof jit->reason, "%s device %s -> ", nm, txc_device_name(o->device));
            size_t l = strlen(jit->reason);
            snprintf(jit->reason + l, sizeof jit->reason - l, "%s", txc_device_name(e.device));
            return;
        }
        if (e.sharding != o->sharding) {
            snprintf(jit->reason, sizeof jit->reason, "%s sharding changed", nm);
            return;
        }
    }
    const unsigned char *s = statics;
    size_t i = 0;
    while (i < len && i < p->static_len && s[i] == p->statics[i])
        i++;
    if (len != p->static_len)
        snprintf(jit->reason, sizeof jit->reason, "static arguments of %zu bytes instead of %zu", len, p->static_len);
    else
        snprintf(jit->reason, sizeof jit->reason, "static argument byte %zu changed: 0x%02x -> 0x%02x", i,
                 p->statics[i], s[i]);
}

/* ---- compilation --------------------------------------------------------------------- */

static void plan_free(txc_plan *p)
{
    if (!p)
        return;
    if (p->graph && p->buf_arrays)
        for (int b = 0; b < p->graph->n_buffers; b++)
            if (p->graph->buffers[b].kind == TXC_BUF_TEMP)
                txc_array_release(p->buf_arrays[b]);
    free(p->buf_arrays);
    txc_storage_release(p->arena);
    txc_graph_free(p->graph);
    free(p->sig);
    free(p->statics);
    free(p->hdr);
    free(p->argv);
    free(p->node_argv);
    free(p->exec);
    free(p->group);
    free(p->bind_start);
    free(p->bind_vals);
    free(p->out_sharding);
    free(p);
}

/* Trace jit->fn on placeholders for `in`: the graph, or NULL on error. */
static txc_graph *trace(txc_jit *jit, txc_tensor *const *in, int n, const void *statics, size_t len,
                        const struct txc_sharding **out_sharding)
{
    txc_env *env = jit->env;
    txc_graph *g = txc_graph_new();
    if (!g)
        return NULL;
    g->inputs = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    g->outputs = malloc(sizeof(int) * TXC_JIT_MAX_IO);
    txc_tensor **tin = calloc((size_t)(n > 0 ? n : 1), sizeof *tin);
    txc_tensor *outs[TXC_JIT_MAX_IO];
    txc_trace *tr = calloc(1, sizeof *tr);
    if (!g->inputs || !g->outputs || !tin || !tr) {
        free(tin);
        free(tr);
        txc_graph_free(g);
        txc_error(TXC_ERR_NOMEM, "out of memory (trace)");
        return NULL;
    }
    tr->graph = g;
    bool ok = true;
    int mark = txc_env_scope_begin(env);
    for (int i = 0; i < n && ok; i++) {
        int b = txc_graph_add_buffer(g, TXC_BUF_INPUT, in[i]->dtype, in[i]->numel);
        txc_value v = {.dtype = in[i]->dtype, .ndim = in[i]->ndim, .offset = 0, .buffer = b, .producer = -1};
        memcpy(v.shape, in[i]->shape, sizeof v.shape);
        memcpy(v.strides, in[i]->strides, sizeof v.strides);
        int id = b >= 0 ? txc_graph_add_value(g, &v) : -1;
        ok = id >= 0;
        if (ok) {
            g->buffers[b].input = i;
            g->inputs[g->n_inputs++] = id;
            ok = (tin[i] = txc_env_scope_adopt(env, txc_trace_tensor(g, env, id))) != NULL;
            if (ok) /* sharded inputs trace the sharding rules' ops (shard/rules.c) */
                tin[i]->sharding = in[i]->sharding;
        }
    }
    int n_out = 0;
    if (ok) {
        env->trace_hook = txc_trace_record;
        env->trace_ctx = tr;
        txc_status s = jit->fn(jit->ctx, tin, n, statics, len, outs, TXC_JIT_MAX_IO, &n_out);
        env->trace_hook = NULL;
        env->trace_ctx = NULL;
        if (s != TXC_OK) {
            txc_error(s, "jit '%s': the traced function failed", jit->name);
            ok = false;
        }
    }
    for (int i = 0; ok && i < n_out; i++) {
        if (!outs[i]) {
            ok = false;
            txc_error(TXC_ERR_INVALID, "jit '%s': output %d is NULL", jit->name, i);
        } else if (outs[i]->value < 0) {
            ok = false;
            txc_error(TXC_ERR_INVALID, "jit '%s': output %d does not depend on the inputs (return a traced tensor)",
                      jit->name, i);
        } else {
            out_sharding[g->n_outputs] = outs[i]->sharding;
            g->outputs[g->n_outputs++] = outs[i]->value;
        }
    }
    txc_env_scope_end(env, mark);
    free(tin);
    free(tr);
    if (!ok) {
        txc_graph_free(g);
        return NULL;
    }
    return g;
}

/* ---- sibling linears ------------------------------------------------------------------
 * Consecutive kernel nodes that are aten::linear of one input value (the
 * q/k/v projections, gate/up) run as one group: txc_ops_linear_group
 * splits all their weight rows across the threads at once, so the threads
 * meet once instead of once per projection (one row: the grouped GEMV;
 * prefill rows without AVX-512 and AMX: the packed GEMM, A packed once;
 * otherwise each linear alone). Running a later member early
 * is safe when its output shares no arena bytes with another member's
 * output or with any member's input: nothing else runs in between. */

/* The arena byte range of value v's buffer; false if it is not in the arena. */
static bool arena_range(const txc_graph *g, int v, int64_t *lo, int64_t *hi)
{
    const txc_buffer *b = &g->buffers[g->values[v].buffer];
    if (b->kind != TXC_BUF_TEMP || b->arena_offset < 0)
        return false;
    *lo = b->arena_offset;
    *hi = b->arena_offset + b->numel * (int64_t)txc_dtype_size(b->dtype);
    return true;
}

static bool overlaps(const txc_graph *g, int v, int w)
{
    int64_t a0, a1, b0, b1;
    return arena_range(g, v, &a0, &a1) && arena_range(g, w, &b0, &b1) && a0 < b1 && b0 < a1;
}

/* May node m join the group of nodes mem[0..k) (all linears of one input)? */
static bool joins(const txc_graph *g, const int *mem, int k, const txc_node *m)
{
    const txc_node *lead = &g->nodes[mem[0]];
    if (m->op != TXC_OP_LINEAR || m->fused || (m->attrs.flags & TXC_ATTR_RESIDUAL) || m->in[0] != lead->in[0] ||
        k >= TXC_LINEAR_GROUP_MAX)
        return false;
    int64_t lo, hi;
    if (!arena_range(g, m->out, &lo, &hi))
        return false;
    for (int j = 0; j < m->n_in; j++)
        if (overlaps(g, m->out, m->in[j]))
            return false;
    for (int i = 0; i < k; i++) {
        const txc_node *o = &g->nodes[mem[i]];
        if (overlaps(g, m->out, o->out))
            return false;
        for (int j = 0; j < o->n_in; j++)
            if (overlaps(g, m->out, o->in[j]))
                return false;
        for (int j = 0; j < m->n_in; j++)
            if (overlaps(g, o->out, m->in[j]))
                return false;
    }
    return true;
}

/* Do values v and w share memory: the same buffer, or overlapping arena ranges? */
static bool shares(const txc_graph *g, int v, int w)
{
    return g->values[v].buffer == g->values[w].buffer || overlaps(g, v, w);
}

/* May node m run before node x (x earlier in the plan, m independent of it)?
 * m reads nothing x writes, and x reads and writes nothing where m writes. */
static bool commutes(const txc_graph *g, const txc_node *x, const txc_node *m)
{
    for (int j = 0; j < m->n_in; j++)
        if (shares(g, x->out, m->in[j]))
            return false;
    if (shares(g, x->out, m->out))
        return false;
    for (int j = 0; j < x->n_in; j++)
        if (shares(g, x->in[j], m->out))
            return false;
    return true;
}

/* Sibling linears of one input run as one group: consecutive plan
 * entries, or a linear at most TXC_GROUP_HOP_MAX entries further on that
 * commutes with every entry it moves before (it then moves to the end of
 * the group; the plan's other entries keep their order). */
static void find_groups(txc_plan *p)
{
    const txc_graph *g = p->graph;
    for (int e = 0; e < p->n_exec;) {
        const txc_node *n = &g->nodes[p->exec[e]];
        int k = 1;
        if (n->op == TXC_OP_LINEAR && !n->fused && !(n->attrs.flags & TXC_ATTR_RESIDUAL) &&
            arena_range(g, n->out, &(int64_t){0}, &(int64_t){0}))
            for (;;) {
                if (e + k < p->n_exec && joins(g, &p->exec[e], k, &g->nodes[p->exec[e + k]])) {
                    k++;
                    continue;
                }
                /* a sibling a few entries on, movable before the ones in between */
                int found = -1;
                for (int h = 1; h <= TXC_GROUP_HOP_MAX && e + k + h < p->n_exec && found < 0; h++) {
                    const txc_node *m = &g->nodes[p->exec[e + k + h]];
                    if (!joins(g, &p->exec[e], k, m))
                        continue;
                    bool ok = true;
                    for (int i = 0; i < h && ok; i++)
                        ok = commutes(g, &g->nodes[p->exec[e + k + i]], m);
                    if (ok)
                        found = e + k + h;
                }
                if (found < 0)
                    break;
                int moved = p->exec[found];
                memmove(&p->exec[e + k + 1], &p->exec[e + k], sizeof *p->exec * (size_t)(found - (e + k)));
                p->exec[e + k] = moved;
                k++;
            }
        p->group[e] = k;
        for (int i = 1; i < k; i++)
            p->group[e + i] = 0;
        e += k;
    }
}

/* The executable plan of a planned graph (arena offsets assigned, arena
 * size `arena_bytes`). */
static txc_plan *build_plan(txc_jit *jit, txc_graph *g, int64_t arena_bytes)
{
    txc_plan *p = calloc(1, sizeof *p);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory (plan)");
        return NULL;
    }
    p->graph = g;
    p->arena_bytes = arena_bytes;
    p->arena = txc_storage_new(jit->env->device, (size_t)p->arena_bytes);
    p->buf_arrays = calloc((size_t)g->n_buffers + 1, sizeof *p->buf_arrays);
    p->hdr = calloc((size_t)g->n_values + 1, sizeof *p->hdr);
    p->node_argv = calloc((size_t)g->n_nodes + 1, sizeof *p->node_argv);
    p->exec = calloc((size_t)g->n_nodes + 1, sizeof *p->exec);
    p->group = calloc((size_t)g->n_nodes + 1, sizeof *p->group);
    int n_args = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n_args += g->nodes[i].n_in;
    p->argv = calloc((size_t)n_args + 1, sizeof *p->argv);
    p->bind_start = calloc((size_t)g->n_inputs + 1, sizeof *p->bind_start);
    p->bind_vals = calloc((size_t)g->n_values + 1, sizeof *p->bind_vals);
    if (!p->arena || !p->buf_arrays || !p->hdr || !p->node_argv || !p->exec || !p->group || !p->argv || !p->bind_start ||
        !p->bind_vals) {
        txc_error(TXC_ERR_NOMEM, "out of memory (plan)");
        goto fail;
    }
    for (int b = 0; b < g->n_buffers; b++) {
        txc_buffer *buf = &g->buffers[b];
        if (buf->kind == TXC_BUF_TEMP && buf->arena_offset >= 0) {
            int64_t numel = buf->numel;
            p->buf_arrays[b] = txc_array_from_storage(p->arena, (size_t)buf->arena_offset, buf->dtype, 1, &numel);
            if (!p->buf_arrays[b])
                goto fail;
        } else if (buf->kind == TXC_BUF_CONST) {
            p->buf_arrays[b] = buf->konst->array;
        }
    }
    for (int v = 0; v < g->n_values; v++) {
        const txc_value *x = &g->values[v];
        txc_tensor *h = &p->hdr[v];
        h->refcount = 1 << 30; /* plan-owned: never freed by a release */
        h->env = jit->env;
        h->array = p->buf_arrays[x->buffer] ? p->buf_arrays[x->buffer] : g->placeholder;
        h->dtype = x->dtype;
        h->ndim = x->ndim;
        memcpy(h->shape, x->shape, sizeof h->shape);
        memcpy(h->strides, x->strides, sizeof h->strides);
        h->offset = x->offset;
        h->numel = txc_shape_numel(x->ndim, x->shape);
        h->value = -1;
    }
    int a = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *n = &g->nodes[i];
        p->node_argv[i] = a;
        for (int j = 0; j < n->n_in; j++)
            p->argv[a++] = &p->hdr[n->in[j]];
        if (!n->dead && !n->is_view)
            p->exec[p->n_exec++] = i;
    }
    find_groups(p);
    /* Per input, the values living in its buffer, in value order (a
     * counting sort: linear in the values, not inputs x values). */
    int *input_of = malloc(sizeof(int) * ((size_t)g->n_buffers + 1));
    int *fill = calloc((size_t)g->n_inputs + 1, sizeof *fill);
    if (!input_of || !fill) {
        free(input_of);
        free(fill);
        txc_error(TXC_ERR_NOMEM, "out of memory (plan)");
        goto fail;
    }
    for (int b = 0; b < g->n_buffers; b++)
        input_of[b] = -1;
    for (int i = 0; i < g->n_inputs; i++)
        input_of[g->values[g->inputs[i]].buffer] = i;
    for (int v = 0; v < g->n_values; v++)
        if (input_of[g->values[v].buffer] >= 0)
            fill[input_of[g->values[v].buffer]]++;
    int k = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        p->bind_start[i] = k;
        k += fill[i];
        fill[i] = p->bind_start[i];
    }
    p->bind_start[g->n_inputs] = k;
    for (int v = 0; v < g->n_values; v++) {
        int i = input_of[g->values[v].buffer];
        if (i >= 0)
            p->bind_vals[fill[i]++] = v;
    }
    free(input_of);
    free(fill);
    return p;
fail:
    p->graph = NULL; /* the caller still owns g */
    plan_free(p);
    return NULL;
}

/* The plan of the traced graph `g` read from the compile cache, or NULL
 * (no file, or a file rejected: jit->cache_msg says why). */
static txc_plan *load_cached(txc_jit *jit, const char *path, txc_plan_key key, const txc_graph *g,
                             txc_tensor *const *in, int n)
{
    txc_graph *lg = NULL;
    int64_t arena = 0;
    char why[512];
    txc_persist_result r = txc_persist_load(path, key, g, jit->env, in, n, &lg, &arena, why, sizeof why);
    if (r == TXC_PERSIST_REJECTED) {
        jit->stats.cache_rejects++;
        snprintf(jit->cache_msg, sizeof jit->cache_msg, "compile cache: %s is %s, recompiled", path, why);
    }
    if (r != TXC_PERSIST_LOADED)
        return NULL;
    txc_status before = txc_last_status();
    txc_plan *p = build_plan(jit, lg, arena);
    if (!p) { /* out of memory: compiling may still fit */
        txc_graph_free(lg);
        if (before == TXC_OK)
            txc_clear_error();
        return NULL;
    }
    snprintf(jit->cache_msg, sizeof jit->cache_msg, "compile cache: loaded %s", path);
    return p;
}

static txc_plan *compile(txc_jit *jit, txc_tensor *const *in, int n, const void *statics, size_t len)
{
    double t0 = now_ms();
    const struct txc_sharding **out_sh = malloc(sizeof *out_sh * TXC_JIT_MAX_IO);
    txc_graph *g = out_sh ? trace(jit, in, n, statics, len, out_sh) : NULL;
    if (!g) {
        if (!out_sh)
            txc_error(TXC_ERR_NOMEM, "out of memory (trace)");
        free(out_sh);
        return NULL;
    }
    bool any_sh = false;
    for (int i = 0; i < g->n_outputs; i++)
        any_sh |= out_sh[i] != NULL;
    if (!any_sh) {
        free(out_sh);
        out_sh = NULL;
    }
    jit->stats.trace_ms += now_ms() - t0;
    jit->stats.nodes_traced = g->n_nodes;
    jit->cache_msg[0] = 0;
    /* The compile cache: the key hashes the traced graph and the call. */
    char path[PATH_MAX];
    txc_plan_key key = {{0, 0}};
    bool cached = jit->cache_dir && txc_env_device(jit->env).type == TXC_DEVICE_CPU;
    if (cached) {
        key = txc_persist_key(g, in, n, statics, len);
        cached = txc_persist_path(path, sizeof path, jit->cache_dir, jit->name, key);
        if (!cached) {
            jit->stats.cache_errors++;
            snprintf(jit->cache_msg, sizeof jit->cache_msg, "compile cache: the folder's path is too long");
            if (!jit->stats.cache_save_error[0])
                snprintf(jit->stats.cache_save_error, sizeof jit->stats.cache_save_error,
                         "the folder's path is too long");
        }
    }
    txc_plan *p = cached ? load_cached(jit, path, key, g, in, n) : NULL;
    if (p) {
        txc_graph_free(g);
        jit->stats.cache_loads++;
        jit->stats.last_compile_source = "loaded from cache";
    } else {
        txc_pass_dce(g);
        txc_pass_cse(g);
        txc_pass_fold(g, jit->env);
        txc_pass_patterns(g);
        txc_pass_fuse(g);
        txc_pass_residual(g);
        txc_pass_dce(g);
        int64_t arena = txc_plan_memory(g);
        p = arena >= 0 ? build_plan(jit, g, arena) : NULL;
        if (!p) {
            txc_graph_free(g);
            free(out_sh);
            return NULL;
        }
        jit->stats.last_compile_source = "compiled";
        if (cached && jit->stats.cache_saves >= TXC_JIT_MAX_SAVES) {
            /* A jit that keeps compiling new shapes (a DynamicCache step)
             * would fill the folder with plans never loaded again. */
            snprintf(jit->cache_msg, sizeof jit->cache_msg,
                     "compile cache: not saved (this jit already saved %d plans in this process)", TXC_JIT_MAX_SAVES);
        } else if (cached) { /* a failure to save is not the call's: it is reported, not returned */
            char why[PATH_MAX + 256];
            size_t l = strlen(jit->cache_msg);
            if (txc_persist_save(path, jit->name, key, g, arena, why, sizeof why)) {
                jit->stats.cache_saves++;
                if (!l)
                    snprintf(jit->cache_msg, sizeof jit->cache_msg, "compile cache: saved %s", path);
                int64_t left = 0;
                int gone = jit->cache_max_bytes > 0 ? txc_persist_trim(jit->cache_dir, jit->cache_max_bytes, path, &left)
                                                    : 0;
                if (gone) {
                    jit->stats.cache_evictions += (uint64_t)gone;
                    l = strlen(jit->cache_msg);
                    snprintf(jit->cache_msg + l, sizeof jit->cache_msg - l,
                             "; evicted %d least recently used plan file(s) to stay within %.1f MB (%.1f MB left)",
                             gone, (double)jit->cache_max_bytes / 1e6, (double)left / 1e6);
                }
            } else {
                jit->stats.cache_errors++;
                snprintf(jit->cache_msg + l, sizeof jit->cache_msg - l, "%scompile cache: plan not saved: %s",
                         l ? "; " : "", why);
                if (!jit->stats.cache_save_error[0]) { /* the first reason, cut to fit */
                    size_t k = strlen(why), cap = sizeof jit->stats.cache_save_error;
                    k = k < cap ? k : cap - 1;
                    memcpy(jit->stats.cache_save_error, why, k);
                    jit->stats.cache_save_error[k] = '\0';
                }
            }
        }
    }
    p->out_sharding = out_sh;
    p->n_inputs = n;
    p->sig = calloc((size_t)(n > 0 ? n : 1), sizeof *p->sig);
    p->statics = malloc(len ? len : 1);
    if (!p->sig || !p->statics) {
        plan_free(p);
        txc_error(TXC_ERR_NOMEM, "out of memory (plan)");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        entry_of(in[i], &p->sig[i]);
    if (len)
        memcpy(p->statics, statics, len);
    p->static_len = len;
    p->hash = signature_hash(in, n, statics, len);
    jit->stats.nodes_compiled = p->n_exec;
    jit->stats.linear_groups = 0;
    for (int e = 0; e < p->n_exec; e++)
        jit->stats.linear_groups += p->group[e] > 1;
    double dt = now_ms() - t0;
    jit->stats.misses++;
    jit->stats.compile_ms += dt;
    jit->stats.last_compile_ms = dt;
    return p;
}

/* ---- execution ------------------------------------------------------------------------ */

static void prof_add(txc_jit *jit, int kind, double t0)
{
    jit->prof_ms[kind] += now_ms() - t0;
    jit->prof_calls[kind]++;
}

/* The GEMM shape of a linear (x, w, ...) or matmul launch writing out:
 * N the output's last dim, M its other elements (rows, batches folded), K
 * the inner dim. */
static void gemm_shape(txc_op_id op, const txc_tensor *out, txc_tensor *const *args, int64_t *M, int64_t *N,
                       int64_t *K)
{
    const txc_tensor *x = args[0], *w = args[1];
    *N = out->ndim > 0 ? out->shape[out->ndim - 1] : 1;
    *M = *N > 0 ? out->numel / *N : 0;
    if (op == TXC_OP_LINEAR)
        *K = w->ndim == 2 ? w->shape[1] : 0;
    else
        *K = x->ndim > 0 ? x->shape[x->ndim - 1] : 1;
}

static void prof_gemm_add(txc_jit *jit, const char *op, int64_t M, int64_t N, int64_t K, int parts, double t0)
{
    const double ms = now_ms() - t0;
    for (int i = 0; i < jit->n_prof_gemm; i++) {
        txc_jit_gemm_time *t = &jit->prof_gemm[i];
        if (t->op == op && t->M == M && t->N == N && t->K == K && t->parts == parts) {
            t->calls++;
            t->ms += ms;
            return;
        }
    }
    if (jit->n_prof_gemm == TXC_JIT_PROFILE_GEMM_SHAPES) {
        jit->prof_gemm_other_calls++;
        jit->prof_gemm_other_ms += ms;
        return;
    }
    jit->prof_gemm[jit->n_prof_gemm++] = (txc_jit_gemm_time){op, M, N, K, parts, 1, ms};
}

static txc_status run(txc_jit *jit, txc_plan *p, txc_tensor *const *in)
{
    const bool prof = jit->profile;
    const txc_graph *g = p->graph;
    for (int i = 0; i < g->n_inputs; i++) /* bind: the caller's array, no copy */
        for (int k = p->bind_start[i]; k < p->bind_start[i + 1]; k++) {
            int v = p->bind_vals[k];
            p->hdr[v].array = in[i]->array;
            p->hdr[v].offset = in[i]->offset + g->values[v].offset;
        }
    for (int e = 0; e < p->n_exec; e++) {
        const txc_node *n = &g->nodes[p->exec[e]];
        txc_tensor **args = &p->argv[p->node_argv[p->exec[e]]];
        txc_status s;
        const double t0 = prof ? now_ms() : 0;
        if (p->group[e] > 1) {
            int k = p->group[e];
            txc_tensor *outs[TXC_LINEAR_GROUP_MAX];
            txc_tensor *const *argvs[TXC_LINEAR_GROUP_MAX];
            const txc_op_attrs *attrs[TXC_LINEAR_GROUP_MAX];
            for (int i = 0; i < k; i++) {
                const txc_node *m = &g->nodes[p->exec[e + i]];
                outs[i] = &p->hdr[m->out];
                argvs[i] = &p->argv[p->node_argv[p->exec[e + i]]];
                attrs[i] = &m->attrs;
            }
            s = txc_ops_linear_group(k, outs, argvs, attrs);
            if (s != TXC_OK)
                return s;
            if (prof) {
                int64_t M, N = 0, K, Ni;
                for (int i = 0; i < k; i++) {
                    gemm_shape(TXC_OP_LINEAR, outs[i], argvs[i], &M, &Ni, &K);
                    N += Ni;
                }
                prof_gemm_add(jit, "linear group", M, N, K, k, t0);
                prof_add(jit, PROF_GROUP, t0);
            }
            e += k - 1;
            continue;
        }
        if (n->fused)
            s = txc_fused_run(n->fused, &p->hdr[n->out], args, n->n_in);
        else
            s = txc_op_get(n->op)->cpu(&p->hdr[n->out], args, n->n_in, &n->attrs);
        if (prof && !n->fused && (n->op == TXC_OP_LINEAR || n->op == TXC_OP_MATMUL) && n->n_in >= 2) {
            int64_t M, N, K;
            gemm_shape(n->op, &p->hdr[n->out], args, &M, &N, &K);
            prof_gemm_add(jit, txc_op_name(n->op), M, N, K, 1, t0);
        }
        if (prof)
            prof_add(jit, n->fused ? PROF_FUSED : (int)n->op, t0);
        if (s != TXC_OK)
            return s;
    }
    return TXC_OK;
}

/* ---- API -------------------------------------------------------------------------------- */

txc_jit *txc_jit_new(txc_env *env, const char *name, txc_jit_fn fn, void *ctx)
{
    txc_jit *jit = calloc(1, sizeof *jit);
    if (!jit) {
        txc_error(TXC_ERR_NOMEM, "out of memory (jit)");
        return NULL;
    }
    jit->env = env ? env : txc_env_active();
    snprintf(jit->name, sizeof jit->name, "%s", name ? name : "fn");
    jit->fn = fn;
    jit->ctx = ctx;
    jit->stats.last_compile_source = "";
    jit->cache_max_bytes = TXC_JIT_COMPILE_CACHE_MAX_BYTES;
    return jit;
}

void txc_jit_set_profile(txc_jit *jit, bool on)
{
    if (on && !jit->profile) {
        memset(jit->prof_ms, 0, sizeof jit->prof_ms);
        memset(jit->prof_calls, 0, sizeof jit->prof_calls);
        jit->n_prof_gemm = 0;
        jit->prof_gemm_other_calls = 0;
        jit->prof_gemm_other_ms = 0;
    }
    jit->profile = on;
}

int txc_jit_get_profile(const txc_jit *jit, txc_jit_op_time *out, int max)
{
    int n = 0;
    for (int k = 0; k < TXC_OP_COUNT + 2; k++) {
        if (!jit->prof_calls[k])
            continue;
        txc_jit_op_time t = {k == PROF_FUSED   ? "fused elementwise"
                             : k == PROF_GROUP ? "linear group"
                                               : txc_op_name((txc_op_id)k),
                             jit->prof_calls[k], jit->prof_ms[k]};
        int i = n < max ? n : max; /* insertion by time, descending, keeping the top max */
        while (i > 0 && out[i - 1].ms < t.ms) {
            if (i < max)
                out[i] = out[i - 1];
            i--;
        }
        if (i < max)
            out[i] = t;
        n++;
    }
    return n;
}

int txc_jit_get_gemm_profile(const txc_jit *jit, txc_jit_gemm_time *out, int max)
{
    int n = 0;
    const int kinds = jit->n_prof_gemm + (jit->prof_gemm_other_calls > 0);
    for (int k = 0; k < kinds; k++) {
        txc_jit_gemm_time t = k < jit->n_prof_gemm ? jit->prof_gemm[k]
                                                   : (txc_jit_gemm_time){"other shapes", 0, 0, 0, 0,
                                                                         jit->prof_gemm_other_calls,
                                                                         jit->prof_gemm_other_ms};
        int i = n < max ? n : max; /* insertion by time, descending, keeping the top max */
        while (i > 0 && out[i - 1].ms < t.ms) {
            if (i < max)
                out[i] = out[i - 1];
            i--;
        }
        if (i < max)
            out[i] = t;
        n++;
    }
    return n;
}

void txc_jit_free(txc_jit *jit)
{
    if (!jit)
        return;
    while (jit->plans) {
        txc_plan *p = jit->plans;
        jit->plans = p->next;
        plan_free(p);
    }
    free(jit->cache_dir);
    free(jit);
}

txc_status txc_jit_set_compile_cache(txc_jit *jit, const char *dir)
{
    char *d = NULL;
    if (dir && *dir) {
        size_t l = strlen(dir);
        while (l > 1 && dir[l - 1] == '/')
            l--;
        if (l + 80 > PATH_MAX)
            return txc_error(TXC_ERR_INVALID, "jit '%s': compile cache folder path too long", jit->name);
        if (!(d = malloc(l + 1)))
            return txc_error(TXC_ERR_NOMEM, "out of memory (jit)");
        memcpy(d, dir, l);
        d[l] = 0;
    }
    free(jit->cache_dir);
    jit->cache_dir = d;
    return TXC_OK;
}

txc_status txc_jit_set_compile_cache_max_bytes(txc_jit *jit, int64_t max_bytes)
{
    if (max_bytes < 0)
        return txc_error(TXC_ERR_INVALID, "jit '%s': compile cache size cap %lld is negative", jit->name,
                         (long long)max_bytes);
    jit->cache_max_bytes = max_bytes;
    return TXC_OK;
}

const char *txc_jit_compile_cache(const txc_jit *jit) { return jit->cache_dir; }
const char *txc_jit_compile_cache_message(const txc_jit *jit) { return jit->cache_msg; }

bool txc_jit_default_compile_cache(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && xdg[0] == '/') /* the XDG spec: a relative path is ignored */
        w = snprintf(buf, cap, "%s/txc", xdg);
    else if (home && *home)
        w = snprintf(buf, cap, "%s/.cache/txc", home);
    else
        w = -1;
    if (w < 0 || (size_t)w >= cap) {
        if (cap)
            buf[0] = 0;
        return false;
    }
    return true;
}

txc_status txc_jit_call(txc_jit *jit, txc_tensor *const *in, int n, const char *const *names, const void *statics,
                        size_t len, txc_tensor **outputs, int max_outputs, int *n_outputs)
{
    if (n < 0 || n > TXC_JIT_MAX_IO)
        return txc_error(TXC_ERR_INVALID, "jit '%s': %d inputs (at most %d)", jit->name, n, TXC_JIT_MAX_IO);
    for (int i = 0; i < n; i++) {
        if (!in[i])
            return txc_error(TXC_ERR_INVALID, "jit '%s': input %d is NULL", jit->name, i);
        if (in[i]->env != jit->env)
            return txc_error(TXC_ERR_ENV, "jit '%s': input %d belongs to environment '%s', the jit to '%s'; move it "
                                          "with txc_tensor_to_env()", jit->name, i, txc_env_name(in[i]->env),
                             txc_env_name(jit->env));
        if (in[i]->value >= 0)
            return txc_error(TXC_ERR_UNSUPPORTED, "jit '%s': nested jit calls while tracing are not supported",
                             jit->name);
    }
    jit->stats.calls++;
    uint64_t h = signature_hash(in, n, statics, len);
    txc_plan *p = jit->plans, *prev = NULL;
    while (p && !plan_matches(p, h, in, n, statics, len)) {
        prev = p;
        p = p->next;
    }
    if (p) {
        jit->stats.hits++;
        if (prev) { /* move to front */
            prev->next = p->next;
            p->next = jit->plans;
            jit->plans = p;
        }
    } else {
        explain_miss(jit, in, n, names, statics, len);
        p = compile(jit, in, n, statics, len);
        if (!p)
            return txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
        p->next = jit->plans;
        jit->plans = p;
        jit->stats.n_plans++;
        int64_t held = 0;
        for (txc_plan *q = jit->plans; q; q = q->next)
            held += q->arena_bytes;
        /* drop the least recently used (never p: it is first) while over
         * either limit */
        while (jit->stats.n_plans > 1 && (jit->stats.n_plans > TXC_JIT_MAX_PLANS || held > TXC_JIT_MAX_PLAN_BYTES)) {
            txc_plan **last = &jit->plans;
            while ((*last)->next)
                last = &(*last)->next;
            held -= (*last)->arena_bytes;
            plan_free(*last);
            *last = NULL;
            jit->stats.n_plans--;
            jit->stats.evictions++;
        }
    }
    if (p->graph->n_outputs > max_outputs)
        return txc_error(TXC_ERR_INVALID, "jit '%s': %d outputs, room for %d", jit->name, p->graph->n_outputs,
                         max_outputs);
    txc_status s = run(jit, p, in);
    if (s != TXC_OK)
        return s;
    jit->stats.arena_bytes = p->arena_bytes;
    for (int i = 0; i < p->graph->n_outputs; i++) {
        outputs[i] = &p->hdr[p->graph->outputs[i]];
        if (p->out_sharding) /* as traced: the sharding rules' result */
            outputs[i]->sharding = p->out_sharding[i];
    }
    *n_outputs = p->graph->n_outputs;
    return TXC_OK;
}

txc_jit_stats txc_jit_get_stats(const txc_jit *jit) { return jit->stats; }
const char *txc_jit_last_recompile_reason(const txc_jit *jit) { return jit->reason; }

void txc_jit_dump_last_graph(const txc_jit *jit, void *file)
{
    if (jit->plans)
        txc_graph_dump(jit->plans->graph, file ? file : stderr);
}
