/* The thread pool: every task runs exactly once at any thread count and
 * task count, nested and concurrent calls run serially and correctly, the
 * count is set/restored, TXC_THREADS is read, workers are joined, and a
 * parallel call allocates nothing once the workers exist. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "txc/generate.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/threads.h"


#define MAXT 10000

typedef struct {
    _Atomic int hits[MAXT];
} counts;

static void count_task(void *ctx, int64_t t)
{
    counts *c = ctx;
    atomic_fetch_add(&c->hits[t], 1);
}

static void check_once_with(int64_t n, bool dynamic)
{
    static counts c;
    for (int64_t i = 0; i < MAXT; i++)
        atomic_store(&c.hits[i], 0);
    (dynamic ? txc_parallel_for_dynamic : txc_parallel_for)(n, count_task, &c);
    for (int64_t i = 0; i < MAXT; i++)
        if (atomic_load(&c.hits[i]) != (i < n ? 1 : 0))
            fail_msg("%s n_tasks %lld threads %d: task %lld ran %d times", dynamic ? "dynamic" : "fixed",
                     (long long)n, txc_threads_get(), (long long)i, atomic_load(&c.hits[i]));
}

static void check_once(int64_t n)
{
    check_once_with(n, false);
    check_once_with(n, true);
}

static void test_every_task_once(void **state)
{
    (void)state;
    const int threads[] = {1, 2, 3, 8, 1, 4};
    const int64_t tasks[] = {0, 1, 2, 3, 7, 64, 1000, MAXT};
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
        assert_int_equal(txc_threads_set(threads[i]), TXC_OK);
        assert_int_equal(txc_threads_get(), threads[i]);
        for (size_t j = 0; j < sizeof tasks / sizeof *tasks; j++)
            for (int rep = 0; rep < 20; rep++)
                check_once(tasks[j]);
    }
    assert_int_equal(txc_threads_set(0), TXC_OK);
    assert_int_equal(txc_threads_get(), txc_threads_default());
}

/* Fixed-share and on-demand jobs back to back, many times, with more
 * threads than cores too: a worker that wakes late for an on-demand job the
 * caller already finished must never run a task of it or of the next job
 * twice (the claims carry the job's generation). */
static void test_mixed_jobs_stress(void **state)
{
    (void)state;
    const int threads[] = {2, 3, 6};
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
        assert_int_equal(txc_threads_set(threads[i]), TXC_OK);
        for (int rep = 0; rep < 3000; rep++)
            check_once_with(1 + rep % 13, rep % 3 != 0);
    }
    assert_int_equal(txc_threads_set(0), TXC_OK);
}

static void test_bad_counts(void **state)
{
    (void)state;
    int before = txc_threads_get();
    assert_int_equal(txc_threads_set(-1), TXC_ERR_INVALID);
    assert_int_equal(txc_threads_set(TXC_MAX_THREADS + 1), TXC_ERR_INVALID);
    assert_int_equal(txc_threads_get(), before);
}

static void test_env_default(void **state)
{
    (void)state;
    setenv("TXC_THREADS", "3", 1);
    assert_int_equal(txc_threads_default(), 3);
    setenv("TXC_THREADS", "junk", 1);
    assert_true(txc_threads_default() >= 1);
    unsetenv("TXC_THREADS");
    assert_true(txc_threads_default() >= 1);
}

/* Nested: a task that itself calls parallel_for. */
typedef struct {
    _Atomic long sum;
} nest_ctx;

static void inner(void *ctx, int64_t t) { atomic_fetch_add(&((nest_ctx *)ctx)->sum, (long)t + 1); }
static void outer(void *ctx, int64_t t)
{
    (void)t;
    txc_parallel_for(10, inner, ctx); /* 55 each */
}

static void test_nested(void **state)
{
    (void)state;
    assert_int_equal(txc_threads_set(4), TXC_OK);
    nest_ctx c = {0};
    txc_parallel_for(16, outer, &c);
    assert_int_equal(atomic_load(&c.sum), 16 * 55);
}

/* Two user threads calling at once: one gets the pool, the other runs
 * serially; both complete every task. */
static void *caller(void *arg)
{
    nest_ctx *c = arg;
    for (int i = 0; i < 2000; i++)
        txc_parallel_for(10, inner, c);
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    assert_int_equal(txc_threads_set(3), TXC_OK);
    nest_ctx a = {0}, b = {0};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, caller, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, caller, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(atomic_load(&a.sum), 2000 * 55);
    assert_int_equal(atomic_load(&b.sum), 2000 * 55);
}

static void test_no_allocations(void **state)
{
    (void)state;
#if TU_HEAP_COUNTED
    assert_int_equal(txc_threads_set(2), TXC_OK);
    nest_ctx c = {0};
    txc_parallel_for(8, inner, &c); /* starts the worker */
    long before = tu_heap_calls();
    for (int i = 0; i < 1000; i++)
        txc_parallel_for(8, inner, &c);
    assert_int_equal(tu_heap_calls() - before, 0);
    assert_int_equal(atomic_load(&c.sum), 1001 * 36);
#else
    skip();
#endif
}

static int exits;
static void on_exit_fn(void) { __atomic_fetch_add(&exits, 1, __ATOMIC_RELAXED); }

static void test_shutdown_joins(void **state)
{
    (void)state;
    txc_threads_set_worker_exit(on_exit_fn);
    assert_int_equal(txc_threads_set(4), TXC_OK);
    nest_ctx c = {0};
    txc_parallel_for(8, inner, &c); /* 3 workers */
    int before = __atomic_load_n(&exits, __ATOMIC_RELAXED);
    assert_int_equal(txc_threads_set(1), TXC_OK); /* joins them */
    assert_int_equal(__atomic_load_n(&exits, __ATOMIC_RELAXED) - before, 3);
    txc_parallel_for(8, inner, &c); /* serial */
    assert_int_equal(txc_threads_set(2), TXC_OK);
    txc_parallel_for(8, inner, &c); /* one worker again */
    txc_threads_shutdown();
    assert_int_equal(__atomic_load_n(&exits, __ATOMIC_RELAXED) - before, 4);
    assert_int_equal(atomic_load(&c.sum), 3 * 36);
    txc_threads_set_worker_exit(NULL);
    txc_parallel_for(8, inner, &c); /* restarts after a shutdown; joined at exit */
    assert_int_equal(atomic_load(&c.sum), 4 * 36);
}

/* The GEMMs split over threads give the bits of one thread (NT and NN,
 * f32/bf16/f16 B, GEMV and small/large M, odd N and K), at every SIMD level
 * (AMX included). */
static void test_gemm_bit_identical(void **state)
{
    (void)state;
    const int64_t Ms[] = {1, 3, 37}, Ns[] = {1000, 77, 4099}, Ks[] = {64, 333};
    const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};
    const int64_t maxn = 4099, maxk = 333, maxm = 37;
    float *A = malloc(sizeof(float) * maxm * maxk), *Bf = malloc(sizeof(float) * maxn * maxk);
    uint16_t *Bh = malloc(2 * maxn * maxk);
    float *C1 = malloc(sizeof(float) * maxm * maxn), *C2 = malloc(sizeof(float) * maxm * maxn);
    uint32_t r = 12345;
    for (int64_t i = 0; i < maxm * maxk; i++)
        A[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / (float)(1 << 24) - 0.5f;
    for (int64_t i = 0; i < maxn * maxk; i++)
        Bf[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / (float)(1 << 24) - 0.5f;
    for (int level = 0; level <= 3; level++) { /* 3: bf16 B with M > 4 on AMX */
        txc_kern_set_simd_level(level);
        for (size_t d = 0; d < 3; d++) {
            const void *B = Bf;
            if (dts[d] != TXC_F32) {
                txc_kern_from_f32(dts[d], Bf, Bh, maxn * maxk);
                B = Bh;
            }
            for (size_t mi = 0; mi < 3; mi++)
                for (size_t ni = 0; ni < 3; ni++)
                    for (size_t ki = 0; ki < 2; ki++)
                        for (int nn = 0; nn < 2; nn++) {
                            int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki];
                            for (int th = 1; th <= 3; th++) {
                                assert_int_equal(txc_threads_set(th), TXC_OK);
                                float *C = th == 1 ? C1 : C2;
                                if (nn) /* B as (K, N) row-major */
                                    txc_kern_gemm_nn(M, N, K, A, K, B, dts[d], N, C, N);
                                else
                                    txc_kern_gemm_nt(M, N, K, A, K, B, dts[d], K, C, N);
                                if (th > 1 && memcmp(C1, C2, sizeof(float) * (size_t)(M * N)) != 0)
                                    fail_msg("%s M %lld N %lld K %lld %s simd %d: %d threads differ from 1",
                                             nn ? "nn" : "nt", (long long)M, (long long)N, (long long)K,
                                             txc_dtype_name(dts[d]), level, th);
                            }
                        }
        }
    }
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
    free(A), free(Bf), free(Bh), free(C1), free(C2);
}

/* Attention split over threads (by (batch, kv head) group, or by row
 * chunks when there are fewer groups than threads) gives the bits of one
 * thread: GQA decode by position, prefill with a sliding window and
 * soft-capping over a bf16 cache, torch's causal and an explicit mask; and
 * after a warm-up call at each thread count, no heap calls. Runs before
 * any GEMM has gone parallel in this process (the workers' exit hook). */
static uint64_t att_rng = 0x2545f4914f6cdd1dull;

static txc_tensor *att_rnd(txc_dtype dt, int ndim, const int64_t *shape)
{
    int64_t n = txc_shape_numel(ndim, shape);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        att_rng ^= att_rng << 13, att_rng ^= att_rng >> 7, att_rng ^= att_rng << 17;
        v[i] = (float)((double)(att_rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    }
    txc_tensor *f = txc_tensor_from_data(NULL, TXC_F32, ndim, shape, v);
    free(v);
    assert_non_null(f);
    if (dt == TXC_F32)
        return f;
    txc_tensor *t = txc_to_dtype(f, dt);
    txc_tensor_release(f);
    assert_non_null(t);
    return t;
}

typedef struct {
    const char *name;
    txc_op_id op;
    int64_t B, Hq, Hkv, L, S, E;
    txc_dtype qdt, kvdt;
    int64_t window, pos0; /* by position: rows at pos0, pos0 + 1, ... */
    double softcap;
    bool causal, mask;
} att_case;

/* txc::causal_attention in double precision, by its definition: row i of
 * head hq (kv head hq / (Hq / Hkv)) at position p sees keys
 * (p - window, p], scores scaled by 1/sqrt(E), tanh soft-capped, softmax,
 * times V. Checks `out` within 1e-5 relative to the largest |value|. */
static void check_causal_reference(const att_case *ac, txc_tensor *const *in, const txc_tensor *out)
{
    const int64_t B = ac->B, Hq = ac->Hq, Hkv = ac->Hkv, L = ac->L, S = ac->S, E = ac->E, G = Hq / Hkv;
    int64_t nq = B * Hq * L * E, nk = B * Hkv * S * E;
    float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk),
          *v = malloc(sizeof(float) * (size_t)nk), *o = malloc(sizeof(float) * (size_t)nq);
    double *w = malloc(sizeof(double) * (size_t)S);
    assert_int_equal(txc_tensor_copy_to_f32(in[0], q, nq), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(in[1], k, nk), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(in[2], v, nk), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(out, o, nq), TXC_OK);
    double worst = 0, big = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t hq = 0; hq < Hq; hq++)
            for (int64_t i = 0; i < L; i++) {
                int64_t p = ac->pos0 + i, st = ac->window && p + 1 > ac->window ? p + 1 - ac->window : 0;
                const float *qr = q + ((b * Hq + hq) * L + i) * E;
                const float *kb = k + (b * Hkv + hq / G) * S * E, *vb = v + (b * Hkv + hq / G) * S * E;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = st; j <= p; j++) {
                    double d = 0;
                    for (int64_t e = 0; e < E; e++)
                        d += (double)qr[e] * kb[j * E + e];
                    d /= sqrt((double)E);
                    if (ac->softcap > 0)
                        d = tanh(d / ac->softcap) * ac->softcap;
                    w[j] = d, mx = d > mx ? d : mx;
                }
                for (int64_t j = st; j <= p; j++)
                    sum += (w[j] = exp(w[j] - mx));
                for (int64_t e = 0; e < E; e++) {
                    double r = 0;
                    for (int64_t j = st; j <= p; j++)
                        r += w[j] / sum * vb[j * E + e];
                    double d = fabs(r - o[((b * Hq + hq) * L + i) * E + e]);
                    worst = d > worst ? d : worst, big = fabs(r) > big ? fabs(r) : big;
                }
            }
    if (!(worst <= 1e-5 * (big > 1 ? big : 1)))
        fail_msg("%s: differs from the double-precision reference by %g (largest value %g)", ac->name, worst, big);
    free(q), free(k), free(v), free(o), free(w);
}

static void check_attention_threads(const att_case *ac)
{
    int64_t qs[4] = {ac->B, ac->Hq, ac->L, ac->E}, ks[4] = {ac->B, ac->Hkv, ac->S, ac->E};
    int64_t ms[4] = {1, ac->Hq, ac->L, ac->S};
    txc_tensor *in[4] = {att_rnd(ac->qdt, 4, qs), att_rnd(ac->kvdt, 4, ks), att_rnd(ac->kvdt, 4, ks), NULL};
    txc_op_attrs a = {0};
    a.f[0] = NAN;
    int n_in = 3;
    if (ac->op == TXC_OP_CAUSAL_ATTENTION) {
        int64_t pos[512];
        for (int64_t i = 0; i < ac->L; i++)
            pos[i] = ac->pos0 + i;
        int64_t L = ac->L;
        in[3] = txc_tensor_from_data(NULL, TXC_I64, 1, &L, pos);
        n_in = 4;
        a.flags = TXC_ATTR_POSITIONS;
        a.n_ints = 1;
        a.ints[0] = ac->window;
        a.f[1] = ac->softcap;
    } else if (ac->mask) {
        txc_tensor *m = att_rnd(TXC_F32, 4, ms), *z = txc_zeros(NULL, 4, ms, TXC_F32);
        in[3] = txc_gt(m, z); /* bool: about half the keys visible */
        assert_non_null(in[3]);
        txc_tensor_release(m), txc_tensor_release(z);
        n_in = 4;
    } else if (ac->causal) {
        a.flags = TXC_ATTR_CAUSAL;
    }
    const txc_op_def *def = txc_op_get(ac->op);
    txc_meta m;
    if (def->infer(in, n_in, &a, &m) != TXC_OK)
        fail_msg("%s: %s", ac->name, txc_last_error());
    txc_tensor *out = txc_zeros(NULL, m.ndim, m.shape, m.dtype);
    assert_non_null(out);
    size_t nbytes = (size_t)txc_shape_numel(m.ndim, m.shape) * txc_dtype_size(m.dtype);
    char *ref = malloc(nbytes);
    for (int th = 1; th <= 3; th++) {
        assert_int_equal(txc_threads_set(th), TXC_OK);
        memset(txc_tensor_data_ptr(out), 0x7f, nbytes);
        if (def->cpu(out, in, n_in, &a) != TXC_OK) /* warm: workers, scratch */
            fail_msg("%s: %s", ac->name, txc_last_error());
        if (th == 1) {
            memcpy(ref, txc_tensor_data_ptr(out), nbytes);
            if (ac->op == TXC_OP_CAUSAL_ATTENTION && ac->qdt == TXC_F32 && m.dtype == TXC_F32)
                check_causal_reference(ac, in, out);
        }
        else if (memcmp(ref, txc_tensor_data_ptr(out), nbytes) != 0)
            fail_msg("%s: %d threads differ from 1", ac->name, th);
#if TU_HEAP_COUNTED
        long before = tu_heap_calls();
        for (int rep = 0; rep < 10; rep++)
            if (def->cpu(out, in, n_in, &a) != TXC_OK)
                fail_msg("%s: %s", ac->name, txc_last_error());
        long n_heap = tu_heap_calls() - before;
        if (n_heap != 0)
            fail_msg("%s, %d threads: %ld heap calls in 10 calls after warm-up", ac->name, th, n_heap);
#endif
        if (memcmp(ref, txc_tensor_data_ptr(out), nbytes) != 0)
            fail_msg("%s: %d threads, repeated: differs from 1 thread", ac->name, th);
    }
    free(ref);
    txc_tensor_release(out);
    for (int i = 0; i < n_in; i++)
        txc_tensor_release(in[i]);
    txc_threads_set(0);
}

static void test_attention_bit_identical(void **state)
{
    (void)state;
    txc_kern_set_attention_par_min(0); /* split even the small cases */
    const att_case cases[] = {
        /* decode: 1 row per head, GQA (4 query heads per kv head), B*Hkv = 4 groups */
        /* scores GEMM of 4 x 1001 x 64: large enough to go parallel itself when not in a task */
        {"decode f32 gqa long", TXC_OP_CAUSAL_ATTENTION, 1, 8, 2, 1, 1024, 64, TXC_F32, TXC_F32, 0, 1000, 0, true,
         false},
        {"decode f32 gqa", TXC_OP_CAUSAL_ATTENTION, 2, 8, 2, 1, 256, 64, TXC_F32, TXC_F32, 0, 200, 0, true, false},
        {"decode bf16 kv window softcap", TXC_OP_CAUSAL_ATTENTION, 1, 8, 2, 1, 300, 32, TXC_F32, TXC_BF16, 64, 250,
         30.0, true, false},
        /* split by key blocks of 128: a window that leaves whole blocks unseen, 2 decode rows (speculative / chat
         * suffix) whose limits differ, the last block partly valid; MHA (one query head per kv head) */
        {"decode window skips blocks", TXC_OP_CAUSAL_ATTENTION, 1, 4, 2, 1, 700, 64, TXC_F32, TXC_F32, 100, 650, 0,
         true, false},
        {"decode 2 rows, blocks", TXC_OP_CAUSAL_ATTENTION, 2, 6, 3, 2, 400, 32, TXC_F32, TXC_F32, 0, 257, 0, true,
         false},
        {"decode mha blocks", TXC_OP_CAUSAL_ATTENTION, 1, 3, 3, 1, 200, 48, TXC_F32, TXC_F32, 0, 199, 0, true, false},
        /* prefill: one group, row chunks split over threads (K transposed per task) */
        {"prefill bf16 kv window softcap", TXC_OP_CAUSAL_ATTENTION, 1, 4, 1, 40, 128, 32, TXC_F32, TXC_BF16, 16, 60,
         50.0, true, false},
        {"prefill f32 gqa by position", TXC_OP_CAUSAL_ATTENTION, 1, 6, 2, 70, 80, 16, TXC_F32, TXC_F32, 0, 5, 0, true,
         false},
        {"prefill bf16 q and kv", TXC_OP_CAUSAL_ATTENTION, 1, 4, 2, 33, 64, 16, TXC_BF16, TXC_BF16, 0, 0, 0, true,
         false},
        /* scaled_dot_product_attention: is_causal, and a bool mask */
        {"sdpa causal", TXC_OP_SDPA, 1, 2, 2, 70, 70, 24, TXC_F32, TXC_F32, 0, 0, 0, true, false},
        {"sdpa bool mask gqa", TXC_OP_SDPA, 2, 4, 1, 50, 90, 16, TXC_F32, TXC_F32, 0, 0, 0, false, true},
    };
    for (int level = 2; level >= 0; level--) {
        txc_kern_set_simd_level(level);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            check_attention_threads(&cases[i]);
    }
    txc_kern_set_simd_level(-1);
    txc_kern_set_attention_par_min(-1);
}

/* stories260K's greedy tokens (reference.json, from transformers) at 1 and
 * 2 threads, eager and compiled: every token at f32; the first 32 with the
 * weights kept in bf16 (float32 activations). */
static void check_stories(txc_dtype dtype, int threads, bool jit)
{
    const char *dir = tu_path("%s/models/stories260K", tu_shared_dir());
    char *text = tu_read_file(tu_path("%s/reference.json", dir), NULL);
    assert_non_null(text);
    cJSON *ref = cJSON_Parse(text);
    free(text);
    assert_non_null(ref);
    assert_int_equal(txc_threads_set(threads), TXC_OK);
    txc_model_options mo = {.convert_dtype = dtype != TXC_F32, .dtype = dtype};
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(dir, &mo, &m), TXC_OK);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases"))
    {
        const cJSON *jin = cJSON_GetObjectItem(c, "input_ids"), *jnew = cJSON_GetObjectItem(c, "new_ids"), *v;
        int32_t in[512], want[512];
        int64_t n_in = 0, n_new = 0;
        cJSON_ArrayForEach(v, jin) in[n_in++] = (int32_t)v->valuedouble;
        cJSON_ArrayForEach(v, jnew) want[n_new++] = (int32_t)v->valuedouble;
        int64_t n_check = dtype == TXC_F32 ? n_new : (n_new < 32 ? n_new : 32);
        txc_generate_options o = txc_generate_default_options(m, dir);
        o.cache = TXC_CACHE_STATIC;
        o.jit = jit;
        o.max_new_tokens = n_check;
        txc_generate_result r;
        if (txc_generate(m, in, n_in, &o, &r) != TXC_OK)
            fail_msg("generate: %s", txc_last_error());
        int64_t n = r.n_new < n_check ? r.n_new : n_check;
        for (int64_t k = 0; k < n; k++)
            if (r.new_ids[k] != want[k])
                fail_msg("%s, %d threads, %s: new token %lld is %d, transformers says %d", txc_dtype_name(dtype),
                         threads, jit ? "jit" : "eager", (long long)k, r.new_ids[k], want[k]);
        assert_int_equal(n, n_check < n_new ? n_check : n_new);
        txc_generate_result_free(&r);
    }
    txc_model_free(m);
    cJSON_Delete(ref);
    txc_threads_set(0);
}

static void test_stories_threads_dtypes(void **state)
{
    (void)state;
    for (int th = 1; th <= 2; th++)
        for (int jit = 0; jit <= 1; jit++) {
            check_stories(TXC_F32, th, jit);
            check_stories(TXC_BF16, th, jit);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_once), cmocka_unit_test(test_mixed_jobs_stress), cmocka_unit_test(test_bad_counts),
        cmocka_unit_test(test_env_default),     cmocka_unit_test(test_nested),
        cmocka_unit_test(test_concurrent_callers), cmocka_unit_test(test_no_allocations),
        cmocka_unit_test(test_shutdown_joins),  cmocka_unit_test(test_attention_bit_identical), cmocka_unit_test(test_gemm_bit_identical),
        cmocka_unit_test(test_stories_threads_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
