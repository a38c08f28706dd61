/* Block-quantized dtypes (ggml's Q8_0 ... Q6_K).
 *
 * - the dtype table: block sizes and bytes as ggml-common.h's structs, ggml
 *   type ids both ways, names, arrays sized by blocks and refused when the
 *   last dim is not a whole number of blocks.
 * - dequantization bit-exact against gguf.quants.dequantize and
 *   quantization bit-exact against gguf.quants.quantize / ggml's reference
 *   quantizers (tests/fixtures/quant_fixtures.json, written by
 *   scripts/gen_quant_fixtures.py), for every type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/quant.h"

#include "testutil.h"
#include "txc/array.h"
#include "txc/dtype.h"
#include "txc/status.h"

static void test_dtype_table(void **state)
{
    (void)state;
    static const struct { txc_dtype dt; const char *name; int64_t bs; size_t bb; int ggml; } want[] = {
        {TXC_Q8_0, "q8_0", 32, 34, 8},    {TXC_Q4_0, "q4_0", 32, 18, 2},    {TXC_Q4_1, "q4_1", 32, 20, 3},
        {TXC_Q5_0, "q5_0", 32, 22, 6},    {TXC_Q5_1, "q5_1", 32, 24, 7},    {TXC_Q4_K, "q4_K", 256, 144, 12},
        {TXC_Q5_K, "q5_K", 256, 176, 13}, {TXC_Q6_K, "q6_K", 256, 210, 14}, {TXC_F32, "float32", 1, 4, 0},
        {TXC_F16, "float16", 1, 2, 1},    {TXC_BF16, "bfloat16", 1, 2, 30},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        txc_dtype dt = want[i].dt, back;
        assert_string_equal(txc_dtype_name(dt), want[i].name);
        assert_int_equal(txc_dtype_block_size(dt), want[i].bs);
        assert_int_equal(txc_dtype_block_bytes(dt), want[i].bb);
        assert_int_equal(txc_dtype_to_ggml(dt), want[i].ggml);
        assert_true(txc_dtype_from_ggml((uint32_t)want[i].ggml, &back));
        assert_int_equal(back, dt);
        assert_int_equal(txc_dtype_is_quantized(dt), want[i].bs > 1);
        if (want[i].bs > 1) {
            assert_int_equal(txc_dtype_size(dt), 0);
            assert_int_equal(txc_dtype_row_bytes(dt, 4 * want[i].bs), 4 * want[i].bb);
            assert_int_equal(txc_dtype_row_bytes(dt, want[i].bs + 1), 0);
            assert_true(txc_dtype_parse(want[i].name, &back) && back == dt);
        }
    }
    txc_dtype dt;
    assert_true(txc_dtype_parse("Q4_K", &dt) && dt == TXC_Q4_K);
    assert_true(txc_dtype_parse("q6_k", &dt) && dt == TXC_Q6_K);
    assert_false(txc_dtype_from_ggml(10, &dt)); /* q2_K: not read */
    assert_false(txc_dtype_from_ggml(4, &dt));  /* removed id */
    assert_false(txc_dtype_from_ggml(1000, &dt));
    assert_string_equal(txc_ggml_type_name(10), "q2_K");
    assert_string_equal(txc_ggml_type_name(20), "iq4_nl");
    assert_null(txc_ggml_type_name(4));
    assert_null(txc_ggml_type_name(1000));
    assert_false(txc_dtype_from_safetensors("q4_0", &dt));
    size_t n;
    assert_false(txc_dtype_nbytes(TXC_Q4_0, 33, &n));
    assert_false(txc_dtype_nbytes(TXC_Q4_0, -32, &n));
    assert_false(txc_dtype_nbytes(TXC_Q4_K, INT64_MAX - (INT64_MAX % 256), &n) && n < 1000);
}

static void test_arrays(void **state)
{
    (void)state;
    txc_array *a = txc_array_new(TXC_CPU, TXC_Q4_K, 2, (int64_t[]){3, 512});
    assert_non_null(a);
    assert_int_equal(txc_array_nbytes(a), 3 * 2 * 144);
    assert_int_equal(txc_array_numel(a), 3 * 512);
    txc_array_release(a);
    assert_null(txc_array_new(TXC_CPU, TXC_Q8_0, 2, (int64_t[]){2, 48}));
    assert_non_null(strstr(txc_last_error(), "multiple of 32"));
    assert_null(txc_array_new(TXC_CPU, TXC_Q8_0, 0, NULL));
    /* from a storage: sized by blocks, must fit */
    txc_storage *s = txc_storage_new(TXC_CPU, 2 * 34);
    a = txc_array_from_storage(s, 0, TXC_Q8_0, 2, (int64_t[]){2, 32});
    assert_non_null(a);
    txc_array_release(a);
    assert_null(txc_array_from_storage(s, 2, TXC_Q8_0, 2, (int64_t[]){2, 32}));
    txc_storage_release(s);
}

/* hex string -> malloc'd bytes (*n of them) */
static uint8_t *unhex(const char *h, size_t *n)
{
    size_t len = strlen(h);
    assert_int_equal(len % 2, 0);
    uint8_t *b = malloc(len / 2 + 1);
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        b[i] = (uint8_t)v;
    }
    *n = len / 2;
    return b;
}

static void test_fixtures(void **state)
{
    (void)state;
    char *text = tu_read_file(tu_path("%s/tests/fixtures/quant_fixtures.json", tu_source_dir()), NULL);
    assert_non_null(text);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases"))
    {
        const char *name = cJSON_GetObjectItem(c, "type")->valuestring;
        txc_dtype dt;
        assert_true(txc_dtype_parse(name, &dt));
        int64_t n = cJSON_GetObjectItem(c, "n")->valueint;
        size_t nb, nd, ni, nq;
        uint8_t *blocks = unhex(cJSON_GetObjectItem(c, "blocks")->valuestring, &nb);
        uint8_t *deq = unhex(cJSON_GetObjectItem(c, "dequant")->valuestring, &nd);
        uint8_t *in = unhex(cJSON_GetObjectItem(c, "input")->valuestring, &ni);
        uint8_t *q = unhex(cJSON_GetObjectItem(c, "quant")->valuestring, &nq);
        assert_int_equal(nb, txc_dtype_row_bytes(dt, n));
        assert_int_equal(nq, nb);
        assert_int_equal(nd, (size_t)n * 4);
        float *got = malloc((size_t)n * 4);
        assert_int_equal(txc_quant_dequantize(dt, blocks, got, n), TXC_OK);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(got + i, deq + 4 * i, 4) != 0) {
                float w;
                memcpy(&w, deq + 4 * i, 4);
                fail_msg("%s dequantize: element %lld is %.9g, gguf.quants says %.9g", name, (long long)i, got[i], w);
            }
        uint8_t *qb = malloc(nq);
        float *x = malloc(ni);
        memcpy(x, in, ni);
        assert_int_equal(txc_quant_quantize(dt, x, qb, n), TXC_OK);
        for (size_t i = 0; i < nq; i++)
            if (qb[i] != q[i])
                fail_msg("%s quantize: byte %zu (block %zu) is 0x%02x, %s says 0x%02x", name, i,
                         i / txc_dtype_block_bytes(dt), qb[i], cJSON_GetObjectItem(c, "quant_oracle")->valuestring, q[i]);
        /* not whole blocks: refused */
        assert_int_equal(txc_quant_dequantize(dt, blocks, got, n - 1), TXC_ERR_INVALID);
        assert_int_equal(txc_quant_quantize(dt, x, qb, n + 1), TXC_ERR_INVALID);
        free(got), free(qb), free(x), free(blocks), free(deq), free(in), free(q);
        n_cases++;
    }
    assert_int_equal(n_cases, 8);
    assert_int_equal(txc_quant_dequantize(TXC_I64, text, NULL, 0), TXC_ERR_UNSUPPORTED);
    cJSON_Delete(doc);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
