/* The kernels allocate nothing in a steady state: a compiled plan (src/jit)
 * calls txc_op_get(op)->cpu(out, in, n, &attrs) once per step on the same
 * shapes, and every work buffer a kernel needs comes from the per-thread
 * scratch (txc_scratch), which keeps the largest size asked. Each case runs
 * once to warm the scratch, then again with the heap counted (malloc, calloc,
 * realloc, free, aligned_alloc, posix_memalign, memalign wrapped here and
 * forwarded to glibc's __libc_* functions), at every SIMD level. Skipped
 * under AddressSanitizer, which owns malloc. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "txc/ops.h"

#if TU_HEAP_COUNTED

/* ---- cases ------------------------------------------------------------------------- */

#define MAX_CASES 64

typedef struct kcase {
    char name[64];
    txc_op_id op;
    txc_tensor *out;
    txc_tensor *in[4];
    int n_in;
    txc_op_attrs a;
    bool out_is_in0; /* in place: out is in[0] (not released twice) */
} kcase;

static kcase cases[MAX_CASES];
static int n_cases;
static txc_tensor *keep[MAX_CASES * 4]; /* inputs, released at the end */
static int n_keep;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static txc_tensor *held(txc_tensor *t)
{
    assert_non_null(t);
    assert_true(n_keep < MAX_CASES * 4);
    keep[n_keep++] = t;
    return t;
}

static txc_tensor *rnd(txc_dtype dt, int ndim, const int64_t *shape)
{
    int64_t n = txc_shape_numel(ndim, shape);
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = frand();
    txc_tensor *f = txc_tensor_from_data(NULL, TXC_F32, ndim, shape, v);
    free(v);
    assert_non_null(f);
    txc_tensor *t = dt == TXC_F32 ? f : txc_to_dtype(f, dt);
    if (t != f)
        txc_tensor_release(f);
    return held(t);
}

static txc_tensor *ints(int64_t n, const int64_t *v)
{
    return held(txc_tensor_from_data(NULL, TXC_I64, 1, &n, v));
}

/* A case: the output allocated here from the op's own inference. */
static void add_case(const char *name, txc_op_id op, txc_op_attrs a, int n_in, txc_tensor *const *in)
{
    assert_true(n_cases < MAX_CASES);
    kcase *c = &cases[n_cases++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->op = op;
    c->a = a;
    c->n_in = n_in;
    memcpy(c->in, in, sizeof(txc_tensor *) * (size_t)n_in);
    const txc_op_def *def = txc_op_get(op);
    assert_non_null(def->cpu);
    if (a.flags & TXC_ATTR_INPLACE) {
        c->out = in[0];
        c->out_is_in0 = true;
        return;
    }
    txc_meta m;
    if (def->infer(c->in, n_in, &a, &m) != TXC_OK)
        fail_msg("%s: %s", name, txc_last_error());
    c->out = txc_zeros(NULL, m.ndim, m.shape, m.dtype);
    assert_non_null(c->out);
}

static txc_op_attrs attrs_dim(int dim)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    return a;
}

static void build_cases(void)
{
    const int64_t K = 64, N = 96;
    txc_op_attrs none = {0}, nobias = {0};
    nobias.flags = TXC_ATTR_NO_BIAS;

    /* linear: f32 and bf16 weights, 1 and 7 rows (7 > 4: bf16 weight blocks
     * converted in scratch), with a bias, bf16 activations (packed A, f32 C
     * converted back), and a weight that is a strided view (packed B) */
    int64_t ws[2] = {N, K}, bs[1] = {N};
    txc_tensor *wf = rnd(TXC_F32, 2, ws), *wb = rnd(TXC_BF16, 2, ws), *bias = rnd(TXC_F32, 1, bs);
    for (int64_t rows = 1; rows <= 7; rows += 6) {
        int64_t xs[2] = {rows, K};
        txc_tensor *xf = rnd(TXC_F32, 2, xs), *xb = rnd(TXC_BF16, 2, xs);
        char nm[64];
        snprintf(nm, sizeof nm, "linear f32 w, %lld rows", (long long)rows);
        add_case(nm, TXC_OP_LINEAR, nobias, 2, (txc_tensor *[]){xf, wf});
        snprintf(nm, sizeof nm, "linear bf16 w, %lld rows", (long long)rows);
        add_case(nm, TXC_OP_LINEAR, nobias, 2, (txc_tensor *[]){xf, wb});
        snprintf(nm, sizeof nm, "linear bf16 w + bias, %lld rows", (long long)rows);
        add_case(nm, TXC_OP_LINEAR, none, 3, (txc_tensor *[]){xf, wb, bias});
        snprintf(nm, sizeof nm, "linear bf16 x, bf16 w, %lld rows", (long long)rows);
        add_case(nm, TXC_OP_LINEAR, nobias, 2, (txc_tensor *[]){xb, wb});
    }
    int64_t wbig[2] = {N, 2 * K};
    txc_tensor *wwide = rnd(TXC_F32, 2, wbig);
    txc_tensor *wstep = held(txc_slice(wwide, 1, 0, 2 * K, 2)); /* (N, K), column stride 2 */
    int64_t x7[2] = {7, K};
    add_case("linear strided weight", TXC_OP_LINEAR, nobias, 2, (txc_tensor *[]){rnd(TXC_F32, 2, x7), wstep});

    /* matmul: batched f32 (NN), a transposed right operand (NT), a bf16 left
     * operand (packed), a stepped right operand (packed B) */
    int64_t ma[3] = {2, 7, 32}, mb[2] = {32, 24}, mbt[2] = {24, 32}, m2[2] = {7, 32}, mw[2] = {32, 48};
    add_case("matmul f32 batched", TXC_OP_MATMUL, none, 2, (txc_tensor *[]){rnd(TXC_F32, 3, ma), rnd(TXC_F32, 2, mb)});
    txc_tensor *yt = held(txc_transpose(rnd(TXC_F32, 2, mbt), 0, 1));
    add_case("matmul transposed rhs", TXC_OP_MATMUL, none, 2, (txc_tensor *[]){rnd(TXC_F32, 2, m2), yt});
    add_case("matmul bf16 lhs", TXC_OP_MATMUL, none, 2, (txc_tensor *[]){rnd(TXC_BF16, 2, m2), rnd(TXC_F32, 2, mb)});
    txc_tensor *ystep = held(txc_slice(rnd(TXC_F32, 2, mw), 1, 0, 48, 2)); /* (32, 24), column stride 2 */
    add_case("matmul stepped rhs", TXC_OP_MATMUL, none, 2, (txc_tensor *[]){rnd(TXC_F32, 2, m2), ystep});

    /* rms_norm (f32, bf16), embedding */
    int64_t hs[2] = {7, K}, ks[1] = {K};
    txc_op_attrs eps = {0};
    eps.f[0] = 1e-6;
    add_case("rms_norm f32", TXC_OP_RMS_NORM, eps, 2, (txc_tensor *[]){rnd(TXC_F32, 2, hs), rnd(TXC_F32, 1, ks)});
    add_case("rms_norm bf16", TXC_OP_RMS_NORM, eps, 2, (txc_tensor *[]){rnd(TXC_BF16, 2, hs), rnd(TXC_BF16, 1, ks)});
    int64_t es[2] = {100, K}, ids[7] = {3, 0, 99, 42, 42, 7, 1};
    add_case("embedding", TXC_OP_EMBEDDING, none, 2, (txc_tensor *[]){rnd(TXC_F32, 2, es), ints(7, ids)});

    /* causal_attention over a static cache (f32 and bf16): decode (1 row at
     * position 10) and prefill (8 rows: K transposed in scratch) */
    for (int half = 0; half < 2; half++) {
        txc_dtype dt = half ? TXC_BF16 : TXC_F32;
        int64_t cs[4] = {1, 2, 64, 16};
        txc_tensor *kc = rnd(dt, 4, cs), *vc = rnd(dt, 4, cs);
        txc_op_attrs at = {0};
        at.f[0] = NAN;
        at.flags = TXC_ATTR_POSITIONS;
        int64_t q1[4] = {1, 4, 1, 16}, q8[4] = {1, 4, 8, 16}, p1[1] = {10}, p8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        add_case(half ? "causal_attention bf16 decode" : "causal_attention f32 decode", TXC_OP_CAUSAL_ATTENTION,
                 at, 4, (txc_tensor *[]){rnd(dt, 4, q1), kc, vc, ints(1, p1)});
        add_case(half ? "causal_attention bf16 prefill" : "causal_attention f32 prefill", TXC_OP_CAUSAL_ATTENTION,
                 at, 4, (txc_tensor *[]){rnd(dt, 4, q8), kc, vc, ints(8, p8)});

        /* index_copy_ of the new key into the cache, in place */
        int64_t ns[4] = {1, 2, 1, 16}, at5[1] = {5};
        txc_op_attrs ic = attrs_dim(2);
        ic.flags = TXC_ATTR_INPLACE;
        add_case(half ? "index_copy_ bf16" : "index_copy_ f32", TXC_OP_INDEX_COPY, ic, 3,
                 (txc_tensor *[]){kc, ints(1, at5), rnd(dt, 4, ns)});
    }

    /* cat (one operand a transposed view) */
    int64_t c1[2] = {7, 16}, c2t[2] = {24, 7};
    {
        int64_t xr[4] = {1, 2, 3, 8}, cr[4] = {1, 1, 3, 8};
        add_case("rotary_embedding", TXC_OP_ROTARY, none, 3,
                 (txc_tensor *[]){rnd(TXC_F32, 4, xr), rnd(TXC_F32, 4, cr), rnd(TXC_F32, 4, cr)});
    }
    add_case("cat", TXC_OP_CAT, attrs_dim(1), 2,
             (txc_tensor *[]){rnd(TXC_F32, 2, c1), held(txc_transpose(rnd(TXC_F32, 2, c2t), 0, 1))});

    /* elementwise: broadcast add, bf16 mul (converted in chunks), silu */
    add_case("add bias", TXC_OP_ADD, none, 2, (txc_tensor *[]){rnd(TXC_F32, 2, hs), rnd(TXC_F32, 1, ks)});
    add_case("mul bf16", TXC_OP_MUL, none, 2, (txc_tensor *[]){rnd(TXC_BF16, 2, hs), rnd(TXC_BF16, 2, hs)});
    add_case("silu f32", TXC_OP_SILU, none, 1, (txc_tensor *[]){rnd(TXC_F32, 2, hs)});
    add_case("silu bf16", TXC_OP_SILU, none, 1, (txc_tensor *[]){rnd(TXC_BF16, 2, hs)});

    /* reductions and softmax */
    int64_t lg[2] = {7, 100};
    txc_tensor *logits = rnd(TXC_F32, 2, lg);
    add_case("softmax", TXC_OP_SOFTMAX, attrs_dim(-1), 1, (txc_tensor *[]){logits});
    add_case("softmax bf16 dim 0", TXC_OP_SOFTMAX, attrs_dim(0), 1, (txc_tensor *[]){rnd(TXC_BF16, 2, lg)});
    add_case("log_softmax", TXC_OP_LOG_SOFTMAX, attrs_dim(-1), 1, (txc_tensor *[]){logits});
    add_case("argmax", TXC_OP_ARGMAX, attrs_dim(-1), 1, (txc_tensor *[]){logits});
    txc_op_attrs all = {0};
    all.flags = TXC_ATTR_ALL_DIMS;
    add_case("argmax all", TXC_OP_ARGMAX, all, 1, (txc_tensor *[]){logits});
    add_case("sum dim 0", TXC_OP_SUM, attrs_dim(0), 1, (txc_tensor *[]){logits});
    add_case("mean", TXC_OP_MEAN, attrs_dim(-1), 1, (txc_tensor *[]){logits});

    /* copy: strided f32 -> bf16, contiguous bf16 -> f32 */
    txc_op_attrs tob = {0}, tof = {0};
    tob.dtype = TXC_BF16;
    tof.dtype = TXC_F32;
    add_case("copy transposed f32 -> bf16", TXC_OP_COPY, tob, 1, (txc_tensor *[]){held(txc_transpose(logits, 0, 1))});
    add_case("copy bf16 -> f32", TXC_OP_COPY, tof, 1, (txc_tensor *[]){rnd(TXC_BF16, 2, lg)});
}

static void run_all(void)
{
    for (int i = 0; i < n_cases; i++) {
        kcase *c = &cases[i];
        if (txc_op_get(c->op)->cpu(c->out, c->in, c->n_in, &c->a) != TXC_OK)
            fail_msg("%s: %s", c->name, txc_last_error());
    }
}

#endif /* TU_HEAP_COUNTED */

static void test_kernels_allocate_nothing(void **state)
{
    (void)state;
#if !TU_HEAP_COUNTED
    print_message("  skipped: built with AddressSanitizer, which owns malloc\n");
    skip();
#else
    build_cases();
    static const int levels[] = {-1, 1, 0};
    for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
        txc_kern_set_simd_level(levels[l]);
        long h0 = tu_heap_calls();
        run_all(); /* warm: the scratch grows to the largest size */
        if (l == 0) /* the counter sees the kernels: the first run fills the scratch */
            assert_true(tu_heap_calls() - h0 > 0);
        long total = 0;
        for (int i = 0; i < n_cases; i++) {
            kcase *c = &cases[i];
            long before = tu_heap_calls();
            txc_status s = txc_op_get(c->op)->cpu(c->out, c->in, c->n_in, &c->a);
            long n_heap = tu_heap_calls() - before;
            if (s != TXC_OK)
                fail_msg("%s: %s", c->name, txc_last_error());
            if (n_heap != 0)
                print_message("  %s (SIMD level %d): %ld heap calls\n", c->name, txc_kern_simd_level(), n_heap);
            total += n_heap;
        }
        print_message("  %d kernel calls at SIMD level %d: %ld heap calls\n", n_cases, txc_kern_simd_level(), total);
        assert_int_equal(total, 0);
    }
    txc_kern_set_simd_level(-1);
    for (int i = 0; i < n_cases; i++)
        if (!cases[i].out_is_in0)
            txc_tensor_release(cases[i].out);
    for (int i = 0; i < n_keep; i++)
        txc_tensor_release(keep[i]);
    txc_scratch_free_all();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_allocate_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
