/* bfloat16 weights against PyTorch at bfloat16, and the AMX GEMM.
 *
 * - stories260K loaded with its weights converted to bf16: the logits of a
 *   forward over each prompt of tests/fixtures/stories260k_bf16.json
 *   (transformers' LlamaForCausalLM, written by scripts/gen_bf16_fixtures.py),
 *   at every SIMD level this machine has (level 3: prefill GEMMs on AMX with
 *   activations rounded to bf16, as PyTorch's bf16 linear; level 2 with
 *   AVX-512 BF16: the same on VDPBF16PS, and also with it turned off).
 *   Relative error = L2 norm of the difference over the reference row's:
 *     vs PyTorch at the same precision (weights rounded to bf16, float32
 *     compute): <= 1e-4 with float32 activations, <= 1e-2 where the
 *     prefill GEMMs round them to bf16 (AMX, VDPBF16PS);
 *     vs PyTorch entirely in bf16 (activations and logits rounded to bf16
 *     too, itself 0.4-2% from float32): <= 3e-2.
 * - txc_kern_gemm_nt_amx against a double-precision reference: with A
 *   rounded to bf16 first, within float32 summation error; with A as given,
 *   within the documented bound 2^-8 sum|A B| (kernels.h). Skipped (with a
 *   message) where AMX is not available.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "testutil.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/threads.h"

/* level: the SIMD level; rounded: the prefill GEMMs round the activations
 * to bf16 (AMX at level 3, VDPBF16PS at level 2 with AVX-512 BF16). */
static void check_prompts(txc_model *m, int level, bool rounded)
{
    cJSON *doc = tu_load_json("tests/fixtures/stories260k_bf16.json");
    const cJSON *c;
    int64_t V = txc_model_config(m)->vocab_size;
    txc_env *env = txc_model_env(m);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases"))
    {
        const cJSON *ids_j = cJSON_GetObjectItem(c, "input_ids");
        int64_t n = cJSON_GetArraySize(ids_j), keep = cJSON_GetObjectItem(c, "keep")->valueint;
        int mark = txc_env_scope_begin(env);
        txc_tensor *ids = txc_zeros(env, 2, (int64_t[]){1, n}, TXC_I64);
        int64_t *p = txc_tensor_data_ptr(ids);
        for (int64_t i = 0; i < n; i++)
            p[i] = cJSON_GetArrayItem(ids_j, (int)i)->valueint;
        txc_tensor *logits = txc_model_forward(m, ids, NULL, NULL, txc_arange(env, 0, (double)n, 1, TXC_I64), 0);
        if (!logits)
            fail_msg("forward: %s", txc_last_error());
        const float *g = txc_tensor_data_ptr(logits);
        for (int which = 0; which < 2; which++) {
        const cJSON *ref = cJSON_GetObjectItem(c, which ? "logits_bf16" : "logits_bf16_weights");
        const double bound = which ? 3e-2 : rounded ? 1e-2 : 1e-4;
        for (int64_t r = 0; r < keep; r++) {
            const cJSON *row = cJSON_GetArrayItem(ref, (int)r);
            const float *got = g + (n - keep + r) * V;
            double max_ref = 0, max_err = 0, ss_ref = 0, ss_err = 0; /* (max: for the message) */
            for (int64_t j = 0; j < V; j++) {
                double w = cJSON_GetArrayItem(row, (int)j)->valuedouble, d = got[j] - w;
                max_ref = fmax(max_ref, fabs(w));
                max_err = fmax(max_err, fabs(d));
                ss_ref += w * w, ss_err += d * d;
            }
            double rel = sqrt(ss_err / ss_ref);
            print_message("  %s, prompt of %lld tokens, position %lld, SIMD level %d: relative error %.2e "
                          "(max |diff| %.3g, largest logit %.3g)\n",
                          which ? "vs torch bf16" : "vs torch bf16 weights", (long long)n,
                          (long long)(n - keep + r), level, rel, max_err, max_ref);
            if (!(rel <= bound))
                fail_msg("%s, prompt of %lld tokens, position %lld, SIMD level %d: relative error %g > %g",
                         which ? "vs torch bf16" : "vs torch bf16 weights", (long long)n,
                         (long long)(n - keep + r), level, rel, bound);
        }
        }
        txc_env_scope_end(env, mark);
    }
    cJSON_Delete(doc);
}

static void test_logits_vs_torch_bf16(void **state)
{
    (void)state;
    txc_model_options opts = {.env = NULL, .convert_dtype = true, .dtype = TXC_BF16};
    txc_model *m = NULL;
    if (txc_model_load(tu_path("%s/models/stories260K", tu_shared_dir()), &opts, &m) != TXC_OK)
        fail_msg("load: %s", txc_last_error());
    int top = txc_kern_simd_level();
    for (int level = 0; level <= top; level++) {
        txc_kern_set_simd_level(level);
        if (level == 2 && txc_kern_avx512bf16()) { /* level 2 without it too: float32 activations */
            txc_kern_set_avx512bf16(0);
            check_prompts(m, level, false);
            txc_kern_set_avx512bf16(-1);
            print_message("  (SIMD level 2 with AVX-512 BF16: prefill activations rounded to bf16)\n");
        }
        check_prompts(m, level, level >= 3 || (level == 2 && txc_kern_avx512bf16()));
    }
    txc_kern_set_simd_level(-1);
    txc_model_free(m);
}

static uint32_t rng = 2463534242u;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / (float)(1 << 24) - 0.5f;
}

static void test_amx_gemm(void **state)
{
    (void)state;
    if (!txc_amx_available()) {
        print_message("  AMX not available on this machine (or not permitted): skipped\n");
        assert_false(txc_kern_gemm_nt_amx(16, 16, 32, NULL, 32, NULL, 32, NULL, 16));
        return;
    }
    /* (M, N, K): whole and partial 16-blocks of A rows and weight rows, odd
     * pairs of blocks, one and several k steps; K % 32 != 0 is refused. */
    const int64_t shapes[][3] = {{5, 16, 32}, {16, 32, 64}, {37, 77, 96}, {128, 300, 256}, {33, 4099, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * (size_t)(M * K)), *C = malloc(sizeof(float) * (size_t)(M * N));
        uint16_t *B = malloc(2 * (size_t)(N * K));
        for (int64_t i = 0; i < M * K; i++)
            A[i] = 4.0f * rnd();
        for (int64_t i = 0; i < N * K; i++)
            B[i] = txc_f32_to_bf16(rnd());
        for (int64_t i = 0; i < M * N; i++)
            C[i] = NAN;
        assert_true(txc_kern_gemm_nt_amx(M, N, K, A, K, B, K, C, N));
        double worst_rounded = 0, worst_given = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double exact = 0, rounded = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    double b = txc_bf16_to_f32(B[j * K + k]), a = A[i * K + k];
                    exact += a * b;
                    rounded += (double)txc_bf16_to_f32(txc_f32_to_bf16(A[i * K + k])) * b;
                    mag += fabs(a * b);
                }
                double c = C[i * N + j];
                worst_rounded = fmax(worst_rounded, fabs(c - rounded) / (mag * K * 0x1p-24));
                worst_given = fmax(worst_given, fabs(c - exact) / (mag * (0x1p-8 + K * 0x1p-24)));
            }
        print_message("  M %lld N %lld K %lld: error / f32 summation bound %.3f, / documented bound %.3f\n",
                      (long long)M, (long long)N, (long long)K, worst_rounded, worst_given);
        assert_true(worst_rounded <= 1.0); /* also false for a NaN left in C */
        assert_true(worst_given <= 1.0);
        free(A), free(B), free(C);
    }
    float a[64] = {0}, c[4];
    uint16_t b[64] = {0};
    assert_false(txc_kern_gemm_nt_amx(2, 2, 33, a, 33, b, 33, c, 2)); /* K not a multiple of 32 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_vs_torch_bf16),
        cmocka_unit_test(test_amx_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
