/* The activation quantization of the quantized linear (ops/quant_impl.h)
 * against ggml's own: tests/fixtures/qact_fixtures.json holds float32 rows
 * and the bytes llama.cpp's CPU backend quantizes them to
 * (ggml_get_type_traits_cpu(type)->from_float: the x86 quantize_row_q8_0,
 * quantize_row_q8_1 and quantize_row_q8_K_ref), written by
 * scripts/gen_qact_fixtures.py. At SIMD levels 0 (portable) and 1 (AVX2):
 * - q8_0 (activation block 32): the int8 values and the float16 scale d,
 *   bit for bit;
 * - q8_1: the same and the float16 s = d * sum(q);
 * - q8_K (block 256): the float32 scale d and the int8 values up to the
 *   sign ggml takes from the block's largest value (iscale = -127/max:
 *   q and d both negated, their products equal), and the per-32 sums of
 *   its per-16 bsums.
 * And where float16 would overflow (amax/127 or d*sum(q) past 65504, where
 * ggml's scale is inf): the float32 value is kept, so the product stays
 * finite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "ops/quant_impl.h"
#include "testutil.h"
#include "txc/dtype.h"

static uint8_t *unhex(const char *h, size_t *n)
{
    size_t len = strlen(h);
    assert_int_equal(len % 2, 0);
    uint8_t *b = malloc(len / 2 + 1);
    assert_non_null(b);
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        b[i] = (uint8_t)v;
    }
    *n = len / 2;
    return b;
}

static uint16_t ld16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* one row of n floats against ggml's bytes of type `name` */
static void check_row(const char *name, const float *x, int64_t n, const uint8_t *g, size_t gn, int row)
{
    bool k = strcmp(name, "q8_K") == 0, s1 = strcmp(name, "q8_1") == 0;
    int64_t block = k ? 256 : 32;
    size_t bytes = txc_qact_row_bytes(n, block);
    void *buf = aligned_alloc(32, bytes);
    assert_non_null(buf);
    for (int level = 0; level <= 1; level++) {
        txc_kern_set_simd_level(level);
        memset(buf, 0, bytes);
        txc_qact a = txc_qact_quantize(x, n, block, buf);
        if (!k) {
            size_t bb = s1 ? 36 : 34;
            assert_int_equal(gn, (size_t)(n / 32) * bb);
            for (int64_t b = 0; b < n / 32; b++) {
                const uint8_t *gb = g + (size_t)b * bb;
                if (txc_f32_to_f16(a.d[b]) != ld16(gb) || a.d[b] != txc_f16_to_f32(ld16(gb)))
                    fail_msg("%s row %d block %lld (level %d): d %.9g, ggml's %.9g", name, row, (long long)b, level,
                             a.d[b], txc_f16_to_f32(ld16(gb)));
                if (s1 && (txc_f32_to_f16(a.s[b]) != ld16(gb + 2) || a.s[b] != txc_f16_to_f32(ld16(gb + 2))))
                    fail_msg("%s row %d block %lld (level %d): s %.9g, ggml's %.9g", name, row, (long long)b, level,
                             a.s[b], txc_f16_to_f32(ld16(gb + 2)));
                if (memcmp(a.qs + b * 32, gb + bb - 32, 32) != 0)
                    fail_msg("%s row %d block %lld (level %d): the int8 values differ from ggml's", name, row,
                             (long long)b, level);
            }
        } else {
            assert_int_equal(gn, (size_t)(n / 256) * 292);
            for (int64_t B = 0; B < n / 256; B++) {
                const uint8_t *gb = g + (size_t)B * 292;
                float gd;
                memcpy(&gd, gb, 4);
                const int8_t *gq = (const int8_t *)(gb + 4);
                int sign = gd < 0 ? -1 : 1;
                if (!(a.D[B] == fabsf(gd)) || !(a.d[B * 8] == fabsf(gd)))
                    fail_msg("q8_K row %d super-block %lld (level %d): d %.9g, ggml's %.9g", row, (long long)B, level,
                             a.D[B], gd);
                for (int j = 0; j < 256; j++)
                    if (a.qs[B * 256 + j] != sign * gq[j])
                        fail_msg("q8_K row %d element %lld (level %d): %d, ggml's %d (d %g)", row,
                                 (long long)(B * 256 + j), level, a.qs[B * 256 + j], gq[j], gd);
                for (int j = 0; j < 8; j++) {
                    int16_t b0, b1;
                    memcpy(&b0, gb + 4 + 256 + 4 * j, 2);
                    memcpy(&b1, gb + 4 + 256 + 4 * j + 2, 2);
                    assert_int_equal(a.bs[B * 8 + j], sign * (b0 + b1));
                }
            }
        }
    }
    txc_kern_set_simd_level(-1);
    free(buf);
}

static void test_fixtures(void **state)
{
    (void)state;
    char *text = tu_read_file(tu_path("%s/tests/fixtures/qact_fixtures.json", tu_source_dir()), NULL);
    assert_non_null(text);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    int64_t n = cJSON_GetObjectItem(doc, "n")->valueint;
    const cJSON *rows = cJSON_GetObjectItem(doc, "rows"), *quant = cJSON_GetObjectItem(doc, "quant");
    int n_rows = cJSON_GetArraySize(rows), checked = 0;
    assert_true(n_rows >= 4);
    static const char *const names[] = {"q8_0", "q8_1", "q8_K"};
    for (int t = 0; t < 3; t++) {
        const cJSON *qs = cJSON_GetObjectItem(quant, names[t]);
        assert_non_null(qs);
        assert_int_equal(cJSON_GetArraySize(qs), n_rows);
        for (int r = 0; r < n_rows; r++) {
            size_t xn, gn;
            uint8_t *xb = unhex(cJSON_GetArrayItem(rows, r)->valuestring, &xn);
            uint8_t *g = unhex(cJSON_GetArrayItem(qs, r)->valuestring, &gn);
            assert_int_equal(xn, (size_t)n * 4);
            float *x = malloc(xn);
            assert_non_null(x);
            memcpy(x, xb, xn);
            check_row(names[t], x, n, g, gn, r);
            checked++;
            free(x), free(xb), free(g);
        }
    }
    assert_int_equal(checked, 3 * n_rows);
    cJSON_Delete(doc);
    free(text);
}

/* past float16's range: the float32 scale (ggml's would be inf) */
static void test_f16_overflow(void **state)
{
    (void)state;
    enum { K = 64 };
    float x[K];
    for (int i = 0; i < K; i++)
        x[i] = 1.0e7f * (float)(i % 7 + 1) / 7.0f; /* block 0: amax 1e7, d = 78740 > 65504 */
    for (int i = 32; i < K; i++)
        x[i] = 3000.0f; /* block 1: d = 23.6 fits, s = d * 32 * 127 = 96000 does not */
    size_t bytes = txc_qact_row_bytes(K, 32);
    void *buf = aligned_alloc(32, bytes);
    assert_non_null(buf);
    for (int level = 0; level <= 1; level++) {
        txc_kern_set_simd_level(level);
        txc_qact a = txc_qact_quantize(x, K, 32, buf);
        assert_true(a.d[0] == 1.0e7f / 127.0f);
        assert_true(isfinite(a.s[0]));
        assert_true(a.d[1] == txc_f16_to_f32(txc_f32_to_f16(3000.0f / 127.0f)));
        assert_true(a.s[1] == 3000.0f / 127.0f * (32 * 127));
    }
    txc_kern_set_simd_level(-1);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_f16_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
