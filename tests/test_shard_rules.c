/*
 * Sharding propagation (src/shard/rules.c, include/txc/shard.h): eager ops
 * on NamedSharding'd tensors against the same ops on the whole values.
 *
 * Every device builds the same global tensors, computes the op on them
 * unsharded (the reference), places them with txc_device_put, runs the op
 * on its shards, checks the result's spec and compares txc_gather of it
 * with the reference (float32: bit for bit where no sum is split, within
 * 1e-6 relative where partial sums are all_reduced). Also: the error that
 * names an op and specs without a rule, the implicit all-gather, a
 * shard_map body (no propagation), and a jitted function over sharded
 * inputs (the all_reduce a rule adds is a plan node; the replay gives the
 * eager result and sharding).
 *
 * Run alone it runs on 2 and 4 in-process CPU devices (txc_devices_run);
 * under `mpirun -np N` (tests/cli_shard_rules_mpi.sh) each rank is one
 * device. cmocka's asserts jump on the test's thread, so the devices
 * record their first failure and the test asserts on it.
 */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/jit.h"
#include "txc/ops.h"
#include "txc/shard.h"

#define CHECK TU_DEVICE_CHECK

#define TRY(call) CHECK((call) == 0, "in " #call)

typedef int (*case_fn)(txc_env *env, txc_mesh *mesh);

/* A global float32 tensor, the same on every device. */
static txc_tensor *G(txc_env *env, int ndim, const int64_t *shape, int seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!v)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)sin(0.37 * (double)i + 1.3 * seed) * (1.0f + 0.25f * (float)(seed % 3));
    txc_tensor *t = txc_tensor_from_data(env, TXC_F32, ndim, shape, v);
    free(v);
    return t;
}

static const txc_sharding *S(txc_mesh *mesh, txc_partition_spec spec) { return txc_named_sharding(mesh, spec); }

/* The spec of t as "P('tp', None)" over t's dims ("P()": replicated, "-": none). */
static void spec_of(const txc_tensor *t, char *buf, size_t cap)
{
    const txc_sharding *s = txc_tensor_sharding(t);
    if (!s) {
        snprintf(buf, cap, "-");
        return;
    }
    txc_partition_spec p = txc_sharding_spec(s);
    bool split = false;
    for (int d = 0; d < p.ndim; d++)
        split |= p.axes[d] != NULL;
    size_t o = (size_t)snprintf(buf, cap, "P(");
    for (int d = 0; split && d < txc_tensor_ndim(t) && o < cap; d++) {
        const char *a = d < p.ndim ? p.axes[d] : NULL;
        o += (size_t)snprintf(buf + o, cap - o, a ? "%s'%s'" : "%sNone%.0s", d ? ", " : "", a ? a : "");
    }
    if (o < cap)
        snprintf(buf + o, cap - o, ")");
}

/* got (sharded) has spec `want_spec`, and gathered equals ref (max error
 * <= tol * max(1, |ref|)). */
static int same(const char *what, txc_tensor *got, const char *want_spec, txc_tensor *ref, double tol)
{
    CHECK(got, "%s: %s", what, txc_last_error());
    CHECK(ref, "%s: reference: %s", what, txc_last_error());
    char sp[128];
    spec_of(got, sp, sizeof sp);
    CHECK(strcmp(sp, want_spec) == 0, "%s: spec %s, want %s", what, sp, want_spec);
    txc_tensor *g = txc_gather(got);
    CHECK(g, "%s: gather: %s", what, txc_last_error());
    CHECK(!txc_tensor_sharding(g), "%s: the gathered value carries no sharding", what);
    txc_tensor *gc = txc_contiguous(txc_to_dtype(g, TXC_F32)), *rc = txc_contiguous(txc_to_dtype(ref, TXC_F32));
    CHECK(gc && rc && txc_tensor_ndim(gc) == txc_tensor_ndim(rc), "%s: ranks %d and %d", what,
          gc ? txc_tensor_ndim(gc) : -1, rc ? txc_tensor_ndim(rc) : -1);
    for (int d = 0; d < txc_tensor_ndim(rc); d++)
        CHECK(txc_tensor_size(gc, d) == txc_tensor_size(rc, d), "%s: dim %d is %lld, want %lld", what, d,
              (long long)txc_tensor_size(gc, d), (long long)txc_tensor_size(rc, d));
    const float *a = txc_tensor_data_ptr(gc), *b = txc_tensor_data_ptr(rc);
    for (int64_t i = 0; i < txc_tensor_numel(rc); i++) {
        double e = fabs((double)a[i] - (double)b[i]), lim = tol * fmax(1.0, fabs((double)b[i]));
        CHECK(e <= lim, "%s: element %lld is %.9g, want %.9g", what, (long long)i, (double)a[i], (double)b[i]);
    }
    return 0;
}

/* fails (TXC_ERR_UNSUPPORTED) with a message holding `part`. */
static int refused(const char *what, txc_tensor *got, const char *part)
{
    CHECK(!got, "%s: no error", what);
    CHECK(txc_last_status() == TXC_ERR_UNSUPPORTED, "%s: status %d", what, (int)txc_last_status());
    CHECK(strstr(txc_last_error(), part), "%s: '%s' lacks '%s'", what, txc_last_error(), part);
    txc_clear_error();
    return 0;
}

static uint64_t collective_calls(void)
{
    uint64_t calls = 0;
    txc_collective_stats(NULL, &calls, NULL);
    return calls;
}

/* ---- the cases --------------------------------------------------------------------- */

static int elementwise(txc_env *env, txc_mesh *m)
{
    txc_tensor *x = G(env, 2, (int64_t[]){8, 12}, 1), *y = G(env, 2, (int64_t[]){8, 12}, 2),
               *b = G(env, 1, (int64_t[]){12}, 3);
    txc_tensor *xs = txc_device_put(x, S(m, TXC_P("tp", NULL))), *ys = txc_device_put(y, S(m, TXC_P("tp", NULL)));
    txc_tensor *xc = txc_device_put(x, S(m, TXC_P(NULL, "tp")));
    TRY(same("sharded + replicated", txc_add(xs, y), "P('tp', None)", txc_add(x, y), 0));
    TRY(same("replicated - sharded", txc_sub(y, xs), "P('tp', None)", txc_sub(y, x), 0));
    TRY(same("sharded * sharded", txc_mul(xs, ys), "P('tp', None)", txc_mul(x, y), 0));
    TRY(same("silu(sharded) * 2", txc_mul_scalar(txc_silu(xs), 2.0), "P('tp', None)",
             txc_mul_scalar(txc_silu(x), 2.0), 0));
    TRY(same("(8, 12) split on dim 1 + (12) bias", txc_add(xc, b), "P(None, 'tp')", txc_add(x, b), 0));
    TRY(same("(8, 12) split on dim 0 + (12) bias", txc_add(xs, b), "P('tp', None)", txc_add(x, b), 0));
    TRY(same("where", txc_where(txc_gt(xs, y), xs, y), "P('tp', None)", txc_where(txc_gt(x, y), x, y), 0));
    TRY(same("to bf16", txc_to_dtype(xs, TXC_BF16), "P('tp', None)", txc_to_dtype(x, TXC_BF16), 0));
    TRY(refused("two specs", txc_add(xs, xc), "no sharding rule for aten::add with P('tp', None) x P(None, 'tp')"));
    /* rotary reads its last dim whole */
    txc_tensor *q = G(env, 4, (int64_t[]){1, 8, 3, 8}, 4), *cs = G(env, 4, (int64_t[]){1, 1, 3, 8}, 5),
               *sn = G(env, 4, (int64_t[]){1, 1, 3, 8}, 6);
    txc_tensor *qs = txc_device_put(q, S(m, TXC_P(NULL, "tp", NULL, NULL)));
    TRY(same("rotary per head shard", txc_rotary_embedding(qs, cs, sn), "P(None, 'tp', None, None)",
             txc_rotary_embedding(q, cs, sn), 0));
    txc_tensor *qd = txc_device_put(q, S(m, TXC_P(NULL, NULL, NULL, "tp")));
    TRY(refused("rotary over a split last dim", txc_rotary_embedding(qd, cs, sn),
                "no sharding rule for txc::rotary_embedding with P(None, None, None, 'tp') x P() x P()"));
    return 0;
}

static int linears(txc_env *env, txc_mesh *m)
{
    const int64_t K = 8, N = 12;
    txc_tensor *x = G(env, 2, (int64_t[]){3, K}, 7), *w1 = G(env, 2, (int64_t[]){N, K}, 8),
               *b1 = G(env, 1, (int64_t[]){N}, 9), *w2 = G(env, 2, (int64_t[]){K, N}, 10),
               *b2 = G(env, 1, (int64_t[]){K}, 11);
    txc_tensor *w1s = txc_device_put(w1, S(m, TXC_P("tp", NULL))), *b1s = txc_device_put(b1, S(m, TXC_P("tp")));
    txc_tensor *w2s = txc_device_put(w2, S(m, TXC_P(NULL, "tp")));
    /* column-parallel: no communication, the result split on its last dim */
    uint64_t c0 = collective_calls();
    txc_tensor *h = txc_linear(x, w1s, b1s);
    CHECK(collective_calls() == c0, "a column-parallel linear communicates");
    TRY(same("column-parallel linear", h, "P(None, 'tp')", txc_linear(x, w1, b1), 1e-6));
    TRY(same("column-parallel, replicated bias", txc_linear(x, w1s, b1), "P(None, 'tp')", txc_linear(x, w1, b1), 1e-6));
    /* row-parallel: partial sums + one all_reduce, the bias once: replicated */
    txc_tensor *href = txc_linear(x, w1, b1);
    c0 = collective_calls();
    txc_tensor *y = txc_linear(txc_gelu(h, true), w2s, b2);
    CHECK(collective_calls() == c0 + 1, "row-parallel: %llu collectives, want 1",
          (unsigned long long)(collective_calls() - c0));
    TRY(same("row-parallel linear", y, "P()", txc_linear(txc_gelu(href, true), w2, b2), 1e-6));
    TRY(same("row-parallel, x replicated", txc_linear(href, w2s, NULL), "P()", txc_linear(href, w2, NULL), 1e-6));
    /* x split over its rows, weight replicated: rows stay split */
    txc_tensor *xr = txc_device_put(G(env, 2, (int64_t[]){4, K}, 12), S(m, TXC_P("tp", NULL)));
    TRY(same("data-parallel rows", txc_linear(xr, w1, b1), "P('tp', None)",
             txc_linear(G(env, 2, (int64_t[]){4, K}, 12), w1, b1), 1e-6));
    TRY(refused("rows and weight rows on one axis", txc_linear(xr, w1s, NULL), "aten::linear with P('tp', None) x P('tp', None)"));
    return 0;
}

static int matmuls(txc_env *env, txc_mesh *m)
{
    txc_tensor *a = G(env, 2, (int64_t[]){4, 8}, 13), *b = G(env, 2, (int64_t[]){8, 12}, 14),
               *c = G(env, 2, (int64_t[]){12, 4}, 15);
    txc_tensor *as = txc_device_put(a, S(m, TXC_P("tp", NULL))), *ak = txc_device_put(a, S(m, TXC_P(NULL, "tp")));
    txc_tensor *bk = txc_device_put(b, S(m, TXC_P("tp", NULL))), *bn = txc_device_put(b, S(m, TXC_P(NULL, "tp")));
    txc_tensor *cs = txc_device_put(c, S(m, TXC_P("tp", NULL)));
    TRY(same("M split", txc_matmul(as, b), "P('tp', None)", txc_matmul(a, b), 1e-6));
    TRY(same("N split", txc_matmul(a, bn), "P(None, 'tp')", txc_matmul(a, b), 1e-6));
    TRY(same("K split: all_reduce", txc_matmul(ak, bk), "P()", txc_matmul(a, b), 1e-6));
    /* a chain: (a @ b_N) @ c_K: column then row, replicated at the end */
    TRY(same("chain", txc_matmul(txc_matmul(a, bn), cs), "P()", txc_matmul(txc_matmul(a, b), c), 1e-6));
    /* batched, the batch split */
    txc_tensor *x3 = G(env, 3, (int64_t[]){4, 3, 8}, 16), *x3s = txc_device_put(x3, S(m, TXC_P("tp", NULL, NULL)));
    TRY(same("batch split", txc_matmul(x3s, b), "P('tp', None, None)", txc_matmul(x3, b), 1e-6));
    TRY(refused("matmul M and K on one axis", txc_matmul(as, bk),
                "no sharding rule for aten::matmul with P('tp', None) x P('tp', None) ("));
    return 0;
}

static int embeddings(txc_env *env, txc_mesh *m)
{
    txc_tensor *table = G(env, 2, (int64_t[]){16, 8}, 17);
    int64_t idv[6] = {0, 15, 3, 8, 7, 12};
    txc_tensor *ids = txc_tensor_from_data(env, TXC_I64, 2, (int64_t[]){2, 3}, idv);
    txc_tensor *tv = txc_device_put(table, S(m, TXC_P("tp", NULL))), *td = txc_device_put(table, S(m, TXC_P(NULL, "tp")));
    TRY(same("vocab-split embedding", txc_embedding(tv, ids), "P()", txc_embedding(table, ids), 0));
    TRY(same("hidden-split embedding", txc_embedding(td, ids), "P(None, None, 'tp')", txc_embedding(table, ids), 0));
    TRY(same("bf16 vocab-split", txc_embedding(txc_to_dtype(tv, TXC_BF16), ids), "P()",
             txc_embedding(txc_to_dtype(table, TXC_BF16), ids), 0));
    int64_t bad = 16;
    txc_tensor *oob = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){1}, &bad);
    txc_clear_error();
    CHECK(!txc_embedding(tv, oob) && strstr(txc_last_error(), "out of range"), "an id past the vocabulary: %s",
          txc_last_error());
    txc_clear_error();
    return 0;
}

static int attention(txc_env *env, txc_mesh *m)
{
    txc_tensor *q = G(env, 4, (int64_t[]){1, 8, 3, 8}, 18), *k = G(env, 4, (int64_t[]){1, 4, 5, 8}, 19),
               *v = G(env, 4, (int64_t[]){1, 4, 5, 8}, 20);
    const txc_sharding *heads = S(m, TXC_P(NULL, "tp", NULL, NULL));
    txc_tensor *qs = txc_device_put(q, heads), *ks = txc_device_put(k, heads), *vs = txc_device_put(v, heads);
    const double nan = NAN;
    TRY(same("sdpa per kv-head shard", txc_scaled_dot_product_attention(qs, ks, vs, NULL, false, nan),
             "P(None, 'tp', None, None)", txc_scaled_dot_product_attention(q, k, v, NULL, false, nan), 1e-6));
    TRY(same("sdpa, k/v replicated", txc_scaled_dot_product_attention(qs, k, v, NULL, false, nan),
             "P(None, 'tp', None, None)", txc_scaled_dot_product_attention(q, k, v, NULL, false, nan), 1e-6));
    int64_t pos[3] = {2, 3, 4};
    txc_tensor *cp = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){3}, pos);
    TRY(same("causal_attention per head shard", txc_causal_attention(qs, ks, vs, cp, nan),
             "P(None, 'tp', None, None)", txc_causal_attention(q, k, v, cp, nan), 1e-6));
    txc_tensor *qseq = txc_device_put(q, S(m, TXC_P(NULL, NULL, NULL, "tp")));
    TRY(refused("sdpa split on the head dim's features", txc_scaled_dot_product_attention(qseq, k, v, NULL, false, nan),
                "aten::scaled_dot_product_attention"));
    return 0;
}

static int reductions(txc_env *env, txc_mesh *m)
{
    txc_tensor *x = G(env, 2, (int64_t[]){4, 8}, 21), *w = G(env, 1, (int64_t[]){8}, 22);
    txc_tensor *xr = txc_device_put(x, S(m, TXC_P("tp", NULL))), *xc = txc_device_put(x, S(m, TXC_P(NULL, "tp")));
    int d1[1] = {1}, d0[1] = {0};
    TRY(same("sum over an unsplit dim", txc_sum(xr, 1, d1, false), "P('tp')", txc_sum(x, 1, d1, false), 0));
    TRY(same("sum over the split dim", txc_sum(xc, 1, d1, true), "P()", txc_sum(x, 1, d1, true), 1e-6));
    TRY(same("mean over the split dim", txc_mean(xr, 1, d0, false), "P()", txc_mean(x, 1, d0, false), 1e-6));
    TRY(same("sum of all", txc_sum(xr, 0, NULL, false), "P()", txc_sum(x, 0, NULL, false), 1e-6));
    TRY(same("softmax over an unsplit dim", txc_softmax(xr, -1), "P('tp', None)", txc_softmax(x, -1), 0));
    TRY(same("rms_norm, rows split", txc_rms_norm(xr, w, 1e-6), "P('tp', None)", txc_rms_norm(x, w, 1e-6), 0));
    TRY(refused("softmax over the split dim", txc_softmax(xc, -1), "no sharding rule for aten::_softmax with P(None, 'tp')"));
    TRY(refused("rms_norm over the split dim", txc_rms_norm(xc, w, 1e-6), "aten::rms_norm with P(None, 'tp') x P()"));
    TRY(refused("max over the split dim", txc_max(xc, 1, false), "aten::max"));
    return 0;
}

static int views(txc_env *env, txc_mesh *m)
{
    const int n = txc_device_count();
    txc_tensor *x = G(env, 2, (int64_t[]){8, 12}, 23);
    txc_tensor *xr = txc_device_put(x, S(m, TXC_P("tp", NULL))), *xc = txc_device_put(x, S(m, TXC_P(NULL, "tp")));
    TRY(same("transpose", txc_transpose(xr, 0, 1), "P(None, 'tp')", txc_transpose(x, 0, 1), 0));
    TRY(same("unsqueeze", txc_unsqueeze(xr, 0), "P(None, 'tp', None)", txc_unsqueeze(x, 0), 0));
    /* split the split dim on its outer factor: local (8/n, 12) -> (8/n, 3, 4) and (2, 4/n, 12)... */
    TRY(same("split an unsplit dim", txc_view(xr, 3, (int64_t[]){8 / n, 3, 4}), "P('tp', None, None)",
             txc_view(x, 3, (int64_t[]){8, 3, 4}), 0));
    TRY(same("merge the split dim (outer) with the next", txc_view(xr, 1, (int64_t[]){8 / n * 12}), "P('tp')",
             txc_view(x, 1, (int64_t[]){96}), 0));
    /* heads: (B, S, H*D) split on the last dim -> (B, S, H, D) split on H -> (B, H, S, D) */
    txc_tensor *h = G(env, 3, (int64_t[]){1, 3, 32}, 24);
    txc_tensor *hs = txc_device_put(h, S(m, TXC_P(NULL, NULL, "tp")));
    txc_tensor *v4 = txc_transpose(txc_view(hs, 4, (int64_t[]){1, 3, 8 / n, 4}), 1, 2);
    TRY(same("heads view + transpose", v4, "P(None, 'tp', None, None)",
             txc_transpose(txc_view(h, 4, (int64_t[]){1, 3, 8, 4}), 1, 2), 0));
    TRY(same("back: transpose + reshape", txc_reshape(txc_transpose(v4, 1, 2), 3, (int64_t[]){1, 3, 32 / n}),
             "P(None, None, 'tp')", h, 0));
    TRY(same("slice an unsplit dim", txc_narrow(xr, 1, 2, 5), "P('tp', None)", txc_narrow(x, 1, 2, 5), 0));
    TRY(refused("merge with the split dim inner", txc_view(xc, 1, (int64_t[]){8 * 12 / n}),
                "no sharding rule for aten::view with P(None, 'tp')"));
    TRY(refused("slice of the split dim", txc_narrow(xr, 0, 0, 1), "aten::slice"));
    txc_tensor *parts[2] = {xr, txc_device_put(x, S(m, TXC_P("tp", NULL)))};
    TRY(same("cat along the unsplit dim", txc_cat(parts, 2, 1), "P('tp', None)",
             txc_cat((txc_tensor *[]){x, x}, 2, 1), 0));
    TRY(same("stack", txc_stack(parts, 2, 0), "P(None, 'tp', None)", txc_stack((txc_tensor *[]){x, x}, 2, 0), 0));
    TRY(refused("cat along the split dim", txc_cat(parts, 2, 0), "aten::cat"));
    int64_t iv[3] = {5, 0, 7};
    txc_tensor *idx = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){3}, iv);
    TRY(same("index_select of an unsplit dim", txc_index_select(xr, 1, idx), "P('tp', None)",
             txc_index_select(x, 1, idx), 0));
    /* a StaticCache write per kv-head shard: index_copy_ of the new positions, in place */
    txc_tensor *cache = G(env, 4, (int64_t[]){1, 4, 6, 4}, 35), *src = G(env, 4, (int64_t[]){1, 4, 2, 4}, 36);
    int64_t pv[2] = {4, 1};
    txc_tensor *pos = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){2}, pv);
    const txc_sharding *heads = S(m, TXC_P(NULL, "tp", NULL, NULL));
    txc_tensor *cs = txc_device_put(cache, heads);
    CHECK(txc_index_copy_(cs, 2, pos, txc_device_put(src, heads)) == TXC_OK, "index_copy_: %s", txc_last_error());
    CHECK(txc_index_copy_(cache, 2, pos, src) == TXC_OK, "index_copy_ (reference): %s", txc_last_error());
    TRY(same("index_copy_ per head shard", cs, "P(None, 'tp', None, None)", cache, 0));
    return 0;
}

static int implicit_gather(txc_env *env, txc_mesh *m)
{
    txc_tensor *a = G(env, 2, (int64_t[]){4, 8}, 25), *b = G(env, 2, (int64_t[]){8, 4}, 26);
    txc_tensor *as = txc_device_put(a, S(m, TXC_P("tp", NULL))), *bs = txc_device_put(b, S(m, TXC_P("tp", NULL)));
    TRY(refused("off", txc_matmul(as, bs), "TXC_SHARDING_IMPLICIT_GATHER"));
    /* (process-wide: no device turns it on before every device made its call above) */
    txc_sync_global_devices();
    txc_sharding_set_implicit_gather(true);
    uint64_t before = txc_sharding_implicit_gather_count();
    txc_tensor *r = txc_matmul(as, bs);
    CHECK(txc_sharding_implicit_gather_count() > before, "the gather is counted");
    TRY(same("implicit all-gather", r, "P()", txc_matmul(a, b), 1e-6));
    /* a view's sizes are the shard's: never gathered */
    txc_tensor *ac = txc_device_put(a, S(m, TXC_P(NULL, "tp")));
    txc_tensor *v = txc_view(ac, 1, (int64_t[]){32 / txc_device_count()});
    txc_sync_global_devices();
    txc_sharding_set_implicit_gather(false);
    TRY(refused("a view under the implicit all-gather", v, "aten::view"));
    /* device_put of a shard */
    txc_clear_error();
    CHECK(!txc_device_put(as, S(m, TXC_P(NULL, "tp"))) && strstr(txc_last_error(), "already a shard"),
          "device_put of a shard: %s", txc_last_error());
    txc_clear_error();
    txc_sync_global_devices();
    return 0;
}

static int shard_map_body(txc_env *env, txc_mesh *m)
{
    txc_tensor *x = G(env, 2, (int64_t[]){3, 8}, 27), *w = G(env, 2, (int64_t[]){4, 8}, 28);
    txc_tensor *xs = txc_device_put(x, S(m, TXC_P(NULL, "tp"))), *ws = txc_device_put(w, S(m, TXC_P(NULL, "tp")));
    uint64_t c0 = collective_calls();
    txc_shard_map_begin();
    txc_tensor *partial = txc_linear(xs, ws, NULL);
    txc_shard_map_end();
    CHECK(partial && !txc_tensor_sharding(partial), "shard_map: the local result carries no sharding");
    CHECK(collective_calls() == c0, "shard_map: no collective added");
    TRY(same("shard_map, the program's own all_reduce", txc_all_reduce(partial, m, "tp"), "-",
             txc_linear(x, w, NULL), 1e-6));
    return 0;
}

/* a jitted MLP over sharded weights: column-parallel, gelu, row-parallel */
static txc_status mlp(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out, int max,
                      int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    out[0] = txc_linear(txc_gelu(txc_linear(in[0], in[1], NULL), true), in[2], NULL);
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static int jitted(txc_env *env, txc_mesh *m)
{
    txc_tensor *x = G(env, 2, (int64_t[]){2, 8}, 29), *w1 = G(env, 2, (int64_t[]){16, 8}, 30),
               *w2 = G(env, 2, (int64_t[]){8, 16}, 31);
    txc_tensor *in[3] = {x, txc_device_put(w1, S(m, TXC_P("tp", NULL))), txc_device_put(w2, S(m, TXC_P(NULL, "tp")))};
    txc_tensor *ref = txc_linear(txc_gelu(txc_linear(x, w1, NULL), true), w2, NULL);
    txc_tensor *eager[1];
    int n_out = 0;
    CHECK(mlp(NULL, in, 3, NULL, 0, eager, 1, &n_out) == TXC_OK, "eager: %s", txc_last_error());
    txc_jit *jit = txc_jit_new(env, "sharded_mlp", mlp, NULL);
    CHECK(jit, "jit: %s", txc_last_error());
    int rc = 0;
    for (int call = 0; call < 3 && !rc; call++) {
        txc_tensor *out[1] = {NULL};
        uint64_t c0 = collective_calls();
        if (txc_jit_call(jit, in, 3, NULL, NULL, 0, out, 1, &n_out) != TXC_OK) {
            rc = 1;
            CHECK(false, "jit call %d: %s", call, txc_last_error());
        }
        CHECK(collective_calls() == c0 + 1, "call %d: the plan ran %llu collectives, want the rule's 1", call,
              (unsigned long long)(collective_calls() - c0));
        rc = same("jit replay = eager", out[0], "P()", eager[0], 0) || same("jit = unsharded", out[0], "P()", ref, 1e-6);
    }
    /* the same shapes with another sharding: another signature (a plan for it), said so */
    txc_tensor *in2[3] = {txc_device_put(x, S(m, TXC_P_REPLICATED)), in[1], in[2]}, *out2[1] = {NULL};
    if (!rc && txc_jit_call(jit, in2, 3, NULL, NULL, 0, out2, 1, &n_out) != TXC_OK) {
        rc = 1;
        CHECK(false, "jit call with x P(): %s", txc_last_error());
    }
    bool said = strstr(txc_jit_last_recompile_reason(jit), "input 0 sharding changed") != NULL;
    rc = rc || same("jit, x P()", out2[0], "P()", ref, 1e-6);
    txc_jit_stats st = txc_jit_get_stats(jit);
    char *dump = NULL;
    size_t dlen = 0;
    FILE *f = open_memstream(&dump, &dlen);
    if (f) {
        txc_jit_dump_last_graph(jit, f);
        fclose(f);
    }
    bool has_ar = dump && strstr(dump, "all_reduce");
    free(dump);
    txc_jit_free(jit);
    CHECK(!rc, "replay");
    CHECK(st.misses == 2 && st.hits == 2, "two compilations, two replays (%llu, %llu)", (unsigned long long)st.misses,
          (unsigned long long)st.hits);
    CHECK(said, "the recompile reason names the sharding");
    CHECK(has_ar, "the plan holds the all_reduce node");
    return 0;
}

/* a 2-D mesh ("dp", "tp") of 4 devices: data-parallel rows, tensor-parallel weights; the all_reduce
 * runs over "tp" only */
static int mesh_2d(txc_env *env, txc_mesh *unused)
{
    (void)unused;
    if (txc_device_count() != 4)
        return 0;
    const char *axes[] = {"dp", "tp"};
    txc_mesh *m = txc_mesh_new(NULL, 2, (int64_t[]){2, 2}, axes);
    CHECK(m, "2-D mesh: %s", txc_last_error());
    txc_tensor *x = G(env, 2, (int64_t[]){4, 8}, 32), *w1 = G(env, 2, (int64_t[]){12, 8}, 33),
               *w2 = G(env, 2, (int64_t[]){8, 12}, 34);
    txc_tensor *xs = txc_device_put(x, S(m, TXC_P("dp", NULL)));
    txc_tensor *w1s = txc_device_put(w1, S(m, TXC_P("tp", NULL))), *w2s = txc_device_put(w2, S(m, TXC_P(NULL, "tp")));
    txc_tensor *h = txc_linear(xs, w1s, NULL);
    int rc = same("2-D: column-parallel over data-parallel rows", h, "P('dp', 'tp')", txc_linear(x, w1, NULL), 1e-6);
    rc = rc || same("2-D: row-parallel, reduced over 'tp'", txc_linear(h, w2s, NULL), "P('dp', None)",
                    txc_linear(txc_linear(x, w1, NULL), w2, NULL), 1e-6);
    txc_mesh_free(m);
    return rc;
}

static const struct {
    const char *name;
    case_fn fn;
} cases[] = {
    {"elementwise", elementwise}, {"linear", linears},         {"matmul", matmuls},
    {"embedding", embeddings},    {"attention", attention},     {"reductions", reductions},
    {"views", views},             {"implicit gather", implicit_gather}, {"shard_map", shard_map_body},
    {"jit", jitted},              {"2-D mesh", mesh_2d},
};

static int run_cases(void *ctx, int device)
{
    (void)ctx, (void)device;
    int64_t n = txc_device_count();
    const char *axis[] = {"tp"};
    txc_mesh *mesh = txc_mesh_new(NULL, 1, &n, axis);
    CHECK(mesh, "mesh: %s", txc_last_error());
    txc_env *env = txc_env_active();
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !rc; i++) {
        int mark = txc_env_scope_begin(env);
        rc = cases[i].fn(env, mesh);
        txc_env_scope_end(env, mark);
        if (rc) {
            pthread_mutex_lock(&tu_device_lock);
            size_t l = strlen(tu_device_failure);
            if (!strstr(tu_device_failure, " [case "))
                snprintf(tu_device_failure + l, sizeof tu_device_failure - l, " [case %s]", cases[i].name);
            pthread_mutex_unlock(&tu_device_lock);
        }
    }
    txc_mesh_free(mesh);
    return rc;
}

static void check_devices(int n)
{
    tu_device_failure[0] = 0;
    txc_status s;
    if (txc_process_count() > 1) /* under mpirun: this rank is one device */
        s = run_cases(NULL, txc_process_index()) ? TXC_ERR_INTERNAL : TXC_OK;
    else
        s = txc_devices_run(n, NULL, run_cases, NULL, NULL);
    if (tu_device_failure[0])
        fail_msg("%d devices: %s", txc_device_count() > 1 ? txc_device_count() : n, tu_device_failure);
    if (s != TXC_OK)
        fail_msg("%s", txc_last_error());
}

static void test_two_devices(void **state)
{
    (void)state;
    check_devices(2);
}

static void test_four_devices(void **state)
{
    (void)state;
    if (txc_process_count() > 1)
        skip(); /* under mpirun the job's ranks are the devices */
    check_devices(4);
}

/* one device: a sharding over a mesh of one is P() in effect; the rules still run */
static void test_one_device(void **state)
{
    (void)state;
    if (txc_process_count() > 1)
        skip();
    check_devices(1);
}

int main(void)
{
    if (txc_distributed_init() != TXC_OK) {
        fprintf(stderr, "%s\n", txc_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_device),
        cmocka_unit_test(test_two_devices),
        cmocka_unit_test(test_four_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
