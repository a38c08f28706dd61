/* The jit's pattern pass (src/jit/patterns.c): transformers' decomposed
 * LlamaRMSNorm becomes aten::rms_norm, apply_rotary_pos_emb's
 * x * cos + rotate_half(x) * sin becomes txc::rotary_embedding.
 *
 * Each case is traced as transformers' code records it through the Python
 * frontend (the same ops in the same order, float32 and bfloat16), the pass
 * runs, and the graph's results are compared with eager mode: the rotary
 * embedding bit for bit, the norm within its documented tolerance (its
 * double sum of squares in another order: one float32 rounding of the mean).
 * Near misses — another exponent, another dim, a rounding the kernel does
 * not make, an intermediate read elsewhere, the halves swapped, an in-place
 * write in between — must stay as they are. A compile-cache round trip
 * checks that the loader accepts the rewritten nodes. */
#include "jit_pass_util.h"

#include <stdint.h>

static txc_tensor *eps_const; /* a captured one-element constant: eps as a wrapped Python float */

static txc_tensor *bf16_of(txc_tensor *t) { return txc_to_dtype(t, TXC_BF16); }

/* LlamaRMSNorm.forward over x0 with weight w: variants by flags. */
enum {
    RMS_EPS_TENSOR = 1, /* variance + eps as a tensor add (the frontend's aten::add.Tensor) */
    RMS_CAST = 2,       /* x0 half: .to(float32) and .to(input_dtype) */
    RMS_POW3 = 4,       /* near miss: pow(3) */
    RMS_DIM0 = 8,       /* near miss: mean over dim 0 */
    RMS_NO_CAST_BACK = 16, /* near miss: half x0, h not cast back (Gemma-like: the kernel would round) */
    RMS_R_OUT = 32,     /* near miss: rsqrt's result is also an output */
    RMS_W_3D = 64,      /* near miss: a (1, 1, D) weight */
    RMS_SWAP = 128,     /* h * weight, rsqrt * x: the other operand orders */
};

static txc_tensor *rms(txc_tensor *x0, txc_tensor *w, int flags, txc_tensor **extra)
{
    txc_tensor *x = (flags & RMS_CAST) ? txc_to_dtype(x0, TXC_F32) : x0;
    int dim = (flags & RMS_DIM0) ? 0 : -1;
    txc_tensor *v = txc_mean(txc_pow_scalar(x, (flags & RMS_POW3) ? 3.0 : 2.0), 1, &dim, true);
    txc_tensor *e = (flags & RMS_EPS_TENSOR) ? txc_add(v, eps_const) : txc_add_scalar(v, 1e-5);
    txc_tensor *r = txc_rsqrt(e);
    if (extra)
        *extra = r;
    txc_tensor *h = (flags & RMS_SWAP) ? txc_mul(r, x) : txc_mul(x, r);
    if ((flags & RMS_CAST) && !(flags & RMS_NO_CAST_BACK))
        h = txc_to_dtype(h, txc_tensor_dtype(x0));
    return (flags & RMS_SWAP) ? txc_mul(h, w) : txc_mul(w, h);
}

static int rms_flags;

static int in_rms(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(3, SHAPE(2, 3, 64));
    in[1] = rand_tensor(1, SHAPE(64));
    return 2;
}

static void fn_rms(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *x0 = in[0], *w = in[1];
    if (rms_flags & RMS_CAST) {
        x0 = bf16_of(x0);
        w = bf16_of(w);
    }
    if (rms_flags & RMS_W_3D)
        w = txc_view(w, 3, SHAPE(1, 1, 64));
    txc_tensor *r = NULL;
    out[0] = rms(x0, w, rms_flags, (rms_flags & RMS_R_OUT) ? &r : NULL);
    *n = 1;
    if (r)
        out[(*n)++] = r;
}

/* Run the pass on the rms case with `flags`; returns the live rms_norm nodes. */
static int rms_case(int flags, float tol)
{
    rms_flags = flags;
    check_tol = tol;
    int c;
    txc_graph *g = check_passes(fn_rms, in_rms, P_PATTERNS | P_FUSE, &c);
    int k = count_live(g, TXC_OP_RMS_NORM);
    if (k) { /* the decomposition is gone: one kernel from x0 and the weight */
        assert_int_equal(count_live(g, TXC_OP_MEAN), 0);
        assert_int_equal(count_live(g, TXC_OP_POW), 0);
        assert_int_equal(count_live(g, TXC_OP_RSQRT), 0);
        const txc_node *n = producer(g, g->outputs[0]);
        assert_int_equal(n->op, TXC_OP_RMS_NORM);
        assert_int_equal(n->n_in, 2);
        assert_true(fabs(n->attrs.f[0] - 1e-5) < 1e-12);
    }
    txc_graph_free(g);
    check_tol = 0;
    return k;
}

static void test_rms_norm_f32(void **state)
{
    (void)state;
    assert_int_equal(rms_case(0, 1e-6f), 1);
    assert_int_equal(rms_case(RMS_SWAP, 1e-6f), 1);
    assert_int_equal(rms_case(RMS_EPS_TENSOR, 1e-6f), 1);
}

static void test_rms_norm_bf16(void **state)
{
    (void)state;
    /* bfloat16 results: at most one bfloat16 rounding apart where the mean's float32 differs */
    assert_int_equal(rms_case(RMS_CAST, 8e-3f), 1);
    assert_int_equal(rms_case(RMS_CAST | RMS_EPS_TENSOR | RMS_SWAP, 8e-3f), 1);
}

static void test_rms_norm_near_misses(void **state)
{
    (void)state;
    assert_int_equal(rms_case(RMS_POW3, 0), 0);
    assert_int_equal(rms_case(RMS_DIM0, 0), 0);
    assert_int_equal(rms_case(RMS_CAST | RMS_NO_CAST_BACK, 0), 0);
    assert_int_equal(rms_case(RMS_R_OUT, 0), 0);
    assert_int_equal(rms_case(RMS_W_3D, 0), 0);
}

/* ---- rotary embedding ------------------------------------------------------------------------ */

enum {
    ROT_BF16 = 1,     /* x, cos, sin bfloat16 */
    ROT_ORDER = 2,    /* rotate_half(x) * sin + cos * x: the other operand orders */
    ROT_SWAPPED = 4,  /* near miss: cat(x1, -x2) (the other direction) */
    ROT_SPLIT = 8,    /* near miss: halves split at d/4 */
    ROT_NEG_OUT = 16, /* near miss: -x2 is also an output */
    ROT_MIXED = 32,   /* near miss: bfloat16 x with float32 cos and sin */
    ROT_INPLACE = 64, /* near miss: x's buffer written in place before the add */
};

static int rot_flags;

static int in_rot(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(3, SHAPE(2, 5, 3 * 16)); /* (B, L, H*d) */
    in[1] = rand_tensor(4, SHAPE(2, 1, 5, 16));  /* cos (B, 1, L, d) */
    in[2] = rand_tensor(4, SHAPE(2, 1, 5, 16));  /* sin */
    in[3] = rand_tensor(1, SHAPE(16));           /* a row written into x in place */
    int64_t zero = 0;
    in[4] = i64_tensor(1, &zero);
    return 5;
}

static void fn_rot(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *base = in[0], *c = in[1], *s = in[2];
    if (rot_flags & ROT_BF16) {
        base = bf16_of(base);
        c = bf16_of(c);
        s = bf16_of(s);
    }
    if (rot_flags & ROT_MIXED)
        base = bf16_of(base);
    /* q.view(B, L, H, d).transpose(1, 2): (B, H, L, d), strided */
    txc_tensor *x = txc_transpose(txc_view(base, 4, SHAPE(2, 5, 3, 16)), 1, 2);
    const int64_t h = (rot_flags & ROT_SPLIT) ? 4 : 8;
    txc_tensor *x1 = txc_slice(x, -1, 0, h, 1), *x2 = txc_slice(x, -1, h, INT64_MAX, 1);
    txc_tensor *nx2 = txc_neg(x2);
    txc_tensor *halves[2] = {nx2, x1};
    if (rot_flags & ROT_SWAPPED) {
        halves[0] = x1;
        halves[1] = nx2;
    }
    txc_tensor *rh = txc_cat(halves, 2, -1);
    txc_tensor *a = (rot_flags & ROT_ORDER) ? txc_mul(c, x) : txc_mul(x, c);
    txc_tensor *b = (rot_flags & ROT_ORDER) ? txc_mul(s, rh) : txc_mul(rh, s);
    if (rot_flags & ROT_INPLACE) { /* index_copy_ into row 0 of the flat input x views */
        txc_tensor *flat = txc_view(in[0], 2, SHAPE(30, 16));
        txc_tensor *src = txc_view(in[3], 2, SHAPE(1, 16));
        assert_int_equal(txc_index_copy_(flat, 0, in[4], src), TXC_OK);
    }
    out[0] = (rot_flags & ROT_ORDER) ? txc_add(b, a) : txc_add(a, b);
    *n = 1;
    if (rot_flags & ROT_NEG_OUT)
        out[(*n)++] = nx2;
}

static int rot_case(int flags)
{
    rot_flags = flags;
    int c;
    txc_graph *g = check_passes(fn_rot, in_rot, P_PATTERNS | P_FUSE, &c); /* bit for bit */
    int k = count_live(g, TXC_OP_ROTARY);
    if (k) {
        assert_int_equal(count_live(g, TXC_OP_NEG), 0);
        assert_int_equal(count_live(g, TXC_OP_CAT), 0);
        const txc_node *n = producer(g, g->outputs[0]);
        assert_int_equal(n->op, TXC_OP_ROTARY);
        assert_int_equal(n->n_in, 3);
        assert_int_equal(count_kernels(g), 1 + ((flags & ROT_BF16) ? 3 : 0));
    }
    txc_graph_free(g);
    return k;
}

static void test_rotary_f32_bf16(void **state)
{
    (void)state;
    assert_int_equal(rot_case(0), 1);
    assert_int_equal(rot_case(ROT_ORDER), 1);
    assert_int_equal(rot_case(ROT_BF16), 1);
    assert_int_equal(rot_case(ROT_BF16 | ROT_ORDER), 1);
}

static void test_rotary_near_misses(void **state)
{
    (void)state;
    assert_int_equal(rot_case(ROT_SWAPPED), 0);
    assert_int_equal(rot_case(ROT_SPLIT), 0);
    assert_int_equal(rot_case(ROT_NEG_OUT), 0);
    assert_int_equal(rot_case(ROT_MIXED), 0);
    assert_int_equal(rot_case(ROT_INPLACE), 0);
}

/* ---- through the jit and its compile cache --------------------------------------------------- */

/* A decoder layer's head: rms_norm, a projection, RoPE on it (bfloat16 as the frontend's). */
static txc_status block_fn(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                           int max, int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    txc_tensor *hn = rms(in[0], in[1], RMS_CAST | RMS_EPS_TENSOR, NULL); /* (1, 5, 48) bf16 */
    txc_tensor *q = txc_linear(hn, in[2], NULL);
    txc_tensor *x = txc_transpose(txc_view(q, 4, SHAPE(1, 5, 3, 16)), 1, 2);
    txc_tensor *halves[2] = {txc_neg(txc_slice(x, -1, 8, INT64_MAX, 1)), txc_slice(x, -1, 0, 8, 1)};
    out[0] = txc_add(txc_mul(x, in[3]), txc_mul(txc_cat(halves, 2, -1), in[4]));
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static void jit_once(const char *dir, txc_tensor *const *in, float *v, int64_t nv, txc_jit_stats *st)
{
    txc_jit *jit = txc_jit_new(NULL, "patterns", block_fn, NULL);
    assert_non_null(jit);
    assert_int_equal(txc_jit_set_compile_cache(jit, dir), TXC_OK);
    txc_tensor *o[1];
    int no = 0;
    if (txc_jit_call(jit, in, 5, NULL, NULL, 0, o, 1, &no) != TXC_OK)
        fail_msg("jit: %s", txc_last_error());
    assert_int_equal(txc_tensor_numel(o[0]), nv);
    assert_int_equal(txc_tensor_copy_to_f32(o[0], v, nv), TXC_OK);
    *st = txc_jit_get_stats(jit);
    if (getenv("TXC_TEST_VERBOSE"))
        fprintf(stderr, "%s: %s\n", st->last_compile_source, txc_jit_compile_cache_message(jit));
    txc_jit_free(jit);
}

static void test_jit_compile_cache(void **state)
{
    (void)state;
    setup_rng();
    txc_tensor *f[5] = {rand_tensor(3, SHAPE(1, 5, 48)), rand_tensor(1, SHAPE(48)), rand_tensor(2, SHAPE(48, 48)),
                        rand_tensor(4, SHAPE(1, 1, 5, 16)), rand_tensor(4, SHAPE(1, 1, 5, 16))};
    txc_tensor *in[5];
    for (int i = 0; i < 5; i++) {
        in[i] = bf16_of(f[i]);
        assert_non_null(in[i]);
    }
    char *dir = tu_mkdtemp();
    float a[240], b[240];
    txc_jit_stats s1, s2;
    jit_once(dir, in, a, 240, &s1);
    jit_once(dir, in, b, 240, &s2);
    /* traced: copy(x) pow mean add rsqrt mul copy mul | linear | neg cat mul mul add = 14 kernels;
     * compiled: rms_norm linear rotary_embedding */
    assert_int_equal(s1.cache_saves, 1);
    assert_int_equal(s1.nodes_compiled, 3);
    assert_int_equal(s2.cache_loads, 1); /* the loader took the rewritten nodes */
    assert_int_equal(s2.nodes_compiled, 3);
    assert_memory_equal(a, b, sizeof a);
    /* and the same numbers as eager mode, within rms_norm's tolerance (bfloat16: one rounding) */
    txc_tensor *eo[1];
    int ne = 0;
    txc_env *env = txc_env_active();
    int mark = txc_env_scope_begin(env);
    assert_int_equal(block_fn(NULL, in, 5, NULL, 0, eo, 1, &ne), TXC_OK);
    float e[240];
    assert_int_equal(txc_tensor_copy_to_f32(eo[0], e, 240), TXC_OK);
    txc_env_scope_end(env, mark);
    int exact = 0;
    for (int i = 0; i < 240; i++) {
        exact += a[i] == e[i];
        if (!(fabsf(a[i] - e[i]) <= 0.02f * (fabsf(e[i]) + 0.05f)))
            fail_msg("element %d: %.9g vs eager %.9g", i, a[i], e[i]);
    }
    assert_true(exact >= 230); /* one rounding apart at most in a few elements, if any */
    tu_rm_rf(dir);

    release_all(in, 5);
    release_all(f, 5);
}

static int setup(void **state)
{
    (void)state;
    float e = 1e-5f;
    eps_const = txc_tensor_from_data(NULL, TXC_F32, 0, NULL, &e);
    return eps_const ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    txc_tensor_release(eps_const);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rms_norm_f32),     cmocka_unit_test(test_rms_norm_bf16),
        cmocka_unit_test(test_rms_norm_near_misses), cmocka_unit_test(test_rotary_f32_bf16),
        cmocka_unit_test(test_rotary_near_misses), cmocka_unit_test(test_jit_compile_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
