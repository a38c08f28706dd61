/* aten::cumsum (src/ops/scan.c), aten::logical_or and aten::view of a 0-d
 * tensor against references computed here (torch's results, worked by
 * hand); the Python frontend's tests check the same ops against torch
 * itself (python/tests/test_ops.py). Also under the jit: a traced cumsum
 * replays the same numbers. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "txc/jit.h"
#include "txc/ops.h"

static txc_tensor *f32_tensor(int ndim, const int64_t *shape, const float *data)
{
    txc_tensor *t = txc_tensor_from_data(NULL, TXC_F32, ndim, shape, data);
    assert_non_null(t);
    return t;
}

static txc_tensor *i64_tensor(int ndim, const int64_t *shape, const int64_t *data)
{
    txc_tensor *t = txc_tensor_from_data(NULL, TXC_I64, ndim, shape, data);
    assert_non_null(t);
    return t;
}

static void test_cumsum_dims_and_dtypes(void **state)
{
    (void)state;
    txc_clear_error();
    float x[6] = {1, 2, 3, 4, 5, 6};
    txc_tensor *a = f32_tensor(2, (int64_t[]){2, 3}, x);
    float out[6];
    txc_tensor *r = txc_cumsum(a, -1, TXC_F32);
    assert_non_null(r);
    assert_int_equal(txc_tensor_copy_to_f32(r, out, 6), TXC_OK);
    float want1[6] = {1, 3, 6, 4, 9, 15};
    assert_memory_equal(out, want1, sizeof want1);
    txc_tensor_release(r);
    r = txc_cumsum(a, 0, TXC_F32);
    assert_int_equal(txc_tensor_copy_to_f32(r, out, 6), TXC_OK);
    float want0[6] = {1, 2, 3, 5, 7, 9};
    assert_memory_equal(out, want0, sizeof want0);
    txc_tensor_release(r);
    /* a strided input (the transpose): rows of the view */
    txc_tensor *t = txc_transpose(a, 0, 1);
    r = txc_cumsum(t, 1, TXC_F32);
    assert_int_equal(txc_tensor_copy_to_f32(r, out, 6), TXC_OK);
    float wantt[6] = {1, 5, 2, 7, 3, 9};
    assert_memory_equal(out, wantt, sizeof wantt);
    txc_tensor_release(r);
    txc_tensor_release(t);
    /* float input, int64 result: converted first (truncated), then summed */
    float y[3] = {1.7f, 2.9f, -0.5f};
    txc_tensor *b = f32_tensor(1, (int64_t[]){3}, y);
    r = txc_cumsum(b, 0, TXC_I64);
    assert_true(r && txc_tensor_dtype(r) == TXC_I64);
    int64_t io[3];
    assert_int_equal(txc_tensor_copy_to_i64(r, io, 3), TXC_OK);
    assert_true(io[0] == 1 && io[1] == 3 && io[2] == 3);
    txc_tensor_release(r);
    txc_tensor_release(b);
    /* bfloat16: each running sum rounded to bf16 when stored, the sum kept in float */
    float ones[300];
    for (int i = 0; i < 300; i++)
        ones[i] = 1.0f;
    txc_tensor *o = f32_tensor(1, (int64_t[]){300}, ones);
    txc_tensor *ob = txc_to_dtype(o, TXC_BF16);
    r = txc_cumsum(ob, 0, TXC_BF16);
    float big[300];
    assert_int_equal(txc_tensor_copy_to_f32(r, big, 300), TXC_OK);
    assert_true(big[255] == 256.0f && big[256] == 256.0f /* 257 rounds to even */ && big[257] == 258.0f);
    txc_tensor_release(r);
    txc_tensor_release(ob);
    txc_tensor_release(o);
    /* a 0-d tensor is its own cumsum */
    txc_tensor *s = f32_tensor(0, NULL, (float[]){2.5f});
    r = txc_cumsum(s, 0, TXC_F32);
    assert_true(r && txc_tensor_ndim(r) == 0 && txc_tensor_item(r) == 2.5);
    txc_tensor_release(r);
    txc_tensor_release(s);
    txc_tensor_release(a);
    assert_int_equal(txc_last_status(), TXC_OK);
}

static void test_cumsum_int_and_errors(void **state)
{
    (void)state;
    txc_clear_error();
    /* generate()'s position_ids: attention_mask.long().cumsum(-1) - 1 */
    int64_t mask[8] = {0, 0, 1, 1, 1, 1, 1, 1};
    txc_tensor *m = i64_tensor(2, (int64_t[]){2, 4}, mask);
    txc_tensor *r = txc_cumsum(m, -1, TXC_I64);
    int64_t out[8];
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 8), TXC_OK);
    int64_t want[8] = {0, 0, 1, 2, 1, 2, 3, 4};
    assert_memory_equal(out, want, sizeof want);
    txc_tensor_release(r);
    /* int64 wraps as torch's does (no signed overflow) */
    int64_t big[2] = {INT64_MAX, 1};
    txc_tensor *b = i64_tensor(1, (int64_t[]){2}, big);
    r = txc_cumsum(b, 0, TXC_I64);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 2), TXC_OK);
    assert_true(out[0] == INT64_MAX && out[1] == INT64_MIN);
    txc_tensor_release(r);
    txc_tensor_release(b);
    /* errors: a dim out of range, a bool result */
    assert_null(txc_cumsum(m, 2, TXC_I64));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "cumsum"));
    txc_clear_error();
    assert_null(txc_cumsum(m, 0, TXC_BOOL));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_tensor_release(m);
}

static void test_logical_or(void **state)
{
    (void)state;
    txc_clear_error();
    int64_t a[4] = {0, 3, 0, -1};
    float b[2] = {0.0f, 0.5f};
    txc_tensor *x = i64_tensor(2, (int64_t[]){2, 2}, a);
    txc_tensor *y = f32_tensor(1, (int64_t[]){2}, b); /* broadcast along rows */
    txc_tensor *r = txc_logical_or(x, y);
    assert_true(r && txc_tensor_dtype(r) == TXC_BOOL);
    int64_t out[4];
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 4), TXC_OK);
    assert_true(out[0] == 0 && out[1] == 1 && out[2] == 0 && out[3] == 1);
    txc_tensor_release(r);
    txc_tensor_release(y);
    txc_tensor_release(x);
    assert_int_equal(txc_last_status(), TXC_OK);
}

static void test_view_of_0d(void **state)
{
    (void)state;
    txc_clear_error();
    txc_tensor *s = f32_tensor(0, NULL, (float[]){4.0f});
    txc_tensor *v = txc_view(s, 1, (int64_t[]){1}); /* torch: x.view(1) of a 0-d x */
    assert_non_null(v);
    assert_true(txc_tensor_ndim(v) == 1 && txc_tensor_shape(v)[0] == 1 && txc_tensor_strides(v)[0] == 1);
    assert_true(txc_tensor_data_ptr(v) == txc_tensor_data_ptr(s) && txc_tensor_item(v) == 4.0);
    txc_tensor *v2 = txc_view(s, 3, (int64_t[]){1, 1, 1});
    assert_true(v2 && txc_tensor_ndim(v2) == 3);
    txc_tensor *back = txc_view(v2, 0, NULL);
    assert_true(back && txc_tensor_ndim(back) == 0);
    assert_null(txc_view(s, 1, (int64_t[]){2})); /* still one element */
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_tensor_release(back);
    txc_tensor_release(v2);
    txc_tensor_release(v);
    txc_tensor_release(s);
}

static txc_status cumsum_fn(void *ctx, txc_tensor *const *in, int n_in, const void *st, size_t len,
                            txc_tensor **out, int max_out, int *n_out)
{
    (void)ctx, (void)n_in, (void)st, (void)len, (void)max_out;
    out[0] = txc_cumsum(in[0], 1, TXC_I64);
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static void test_cumsum_under_jit(void **state)
{
    (void)state;
    txc_clear_error();
    txc_jit *jit = txc_jit_new(NULL, "cumsum", cumsum_fn, NULL);
    assert_non_null(jit);
    int64_t mask[6] = {1, 1, 0, 1, 0, 1};
    txc_tensor *m = i64_tensor(2, (int64_t[]){2, 3}, mask);
    for (int k = 0; k < 2; k++) {
        txc_tensor *o = NULL;
        int n = 0;
        assert_int_equal(txc_jit_call(jit, &m, 1, NULL, NULL, 0, &o, 1, &n), TXC_OK);
        int64_t out[6];
        assert_int_equal(txc_tensor_copy_to_i64(o, out, 6), TXC_OK);
        int64_t want[6] = {1, 2, 2, 1, 1, 2};
        assert_memory_equal(out, want, sizeof want);
    }
    txc_jit_stats s = txc_jit_get_stats(jit);
    assert_true(s.misses == 1 && s.hits == 1);
    txc_jit_free(jit);
    txc_tensor_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cumsum_dims_and_dtypes),
        cmocka_unit_test(test_cumsum_int_and_errors),
        cmocka_unit_test(test_logical_or),
        cmocka_unit_test(test_view_of_0d),
        cmocka_unit_test(test_cumsum_under_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
