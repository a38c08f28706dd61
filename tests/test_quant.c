/* Block-quantized dtypes (ggml's Q8_0 ... Q6_K).
 *
 * - the dtype table: block sizes and bytes as ggml-common.h's structs, ggml
 *   type ids both ways, names, arrays sized by blocks and refused when the
 *   last dim is not a whole number of blocks.
 */
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
