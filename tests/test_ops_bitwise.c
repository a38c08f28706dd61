/* aten::bitwise_and / aten::bitwise_or (src/ops/elementwise.c) against
 * torch's results, worked by hand: int64 & int64, int32 | int32, an int64
 * & a bool mask broadcast along rows (transformers' generate():
 * `unfinished_sequences & ~stopping_criteria(...)`, result int64), bool &
 * bool (bool), and a float operand refused as torch refuses it. Also under
 * the jit: the traced op replays the same numbers. */
#include "testutil.h"

#include <stdint.h>
#include <string.h>

#include "txc/jit.h"
#include "txc/ops.h"

static txc_tensor *tensor(txc_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    txc_tensor *t = txc_tensor_from_data(NULL, dt, ndim, shape, data);
    assert_non_null(t);
    return t;
}

static void expect_i64(txc_tensor *r, txc_dtype dt, const int64_t *want, int n)
{
    assert_non_null(r);
    assert_int_equal(txc_tensor_dtype(r), dt);
    int64_t out[8];
    assert_int_equal(txc_tensor_copy_to_i64(r, out, n), TXC_OK);
    assert_memory_equal(out, want, sizeof(int64_t) * (size_t)n);
    txc_tensor_release(r);
}

static void test_bitwise_integers(void **state)
{
    (void)state;
    txc_clear_error();
    int64_t a[4] = {6, -1, 12, INT64_MIN}, b[4] = {3, 5, 10, -1};
    txc_tensor *x = tensor(TXC_I64, 1, (int64_t[]){4}, a), *y = tensor(TXC_I64, 1, (int64_t[]){4}, b);
    expect_i64(txc_bitwise_and(x, y), TXC_I64, (int64_t[]){2, 5, 8, INT64_MIN}, 4);
    expect_i64(txc_bitwise_or(x, y), TXC_I64, (int64_t[]){7, -1, 14, -1}, 4);
    int32_t c[3] = {1, 8, -16}, d[3] = {2, 8, 3};
    txc_tensor *u = tensor(TXC_I32, 1, (int64_t[]){3}, c), *v = tensor(TXC_I32, 1, (int64_t[]){3}, d);
    expect_i64(txc_bitwise_or(u, v), TXC_I32, (int64_t[]){3, 8, -13}, 3);
    expect_i64(txc_bitwise_and(u, v), TXC_I32, (int64_t[]){0, 8, 0}, 3);
    txc_tensor_release(v);
    txc_tensor_release(u);
    txc_tensor_release(y);
    txc_tensor_release(x);
    assert_int_equal(txc_last_status(), TXC_OK);
}

static void test_bitwise_with_bool(void **state)
{
    (void)state;
    txc_clear_error();
    int64_t seq[4] = {1, 1, 0, 3};
    uint8_t keep[2] = {1, 0}, other[2] = {1, 1};
    txc_tensor *s = tensor(TXC_I64, 2, (int64_t[]){2, 2}, seq);
    txc_tensor *m = tensor(TXC_BOOL, 1, (int64_t[]){2}, keep); /* broadcast along rows */
    expect_i64(txc_bitwise_and(s, m), TXC_I64, (int64_t[]){1, 0, 0, 0}, 4);
    expect_i64(txc_bitwise_or(m, s), TXC_I64, (int64_t[]){1, 1, 1, 3}, 4);
    txc_tensor *o = tensor(TXC_BOOL, 1, (int64_t[]){2}, other);
    expect_i64(txc_bitwise_and(m, o), TXC_BOOL, (int64_t[]){1, 0}, 2);
    expect_i64(txc_bitwise_or(m, o), TXC_BOOL, (int64_t[]){1, 1}, 2);
    float f[2] = {1.0f, 2.0f};
    txc_tensor *fl = tensor(TXC_F32, 1, (int64_t[]){2}, f);
    assert_null(txc_bitwise_and(fl, m)); /* torch: "not implemented for 'Float'" */
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_tensor_release(fl);
    txc_tensor_release(o);
    txc_tensor_release(m);
    txc_tensor_release(s);
}

static txc_status and_fn(void *ctx, txc_tensor *const *in, int n_in, const void *st, size_t len, txc_tensor **out,
                         int max_out, int *n_out)
{
    (void)ctx, (void)n_in, (void)st, (void)len, (void)max_out;
    out[0] = txc_bitwise_and(in[0], in[1]);
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static void test_bitwise_under_jit(void **state)
{
    (void)state;
    txc_clear_error();
    txc_jit *jit = txc_jit_new(NULL, "bitwise_and", and_fn, NULL);
    assert_non_null(jit);
    int64_t seq[3] = {1, 1, 1};
    uint8_t stop[2][3] = {{1, 0, 1}, {0, 0, 1}};
    txc_tensor *s = tensor(TXC_I64, 1, (int64_t[]){3}, seq);
    for (int k = 0; k < 2; k++) {
        txc_tensor *in[2] = {s, tensor(TXC_BOOL, 1, (int64_t[]){3}, stop[k])};
        txc_tensor *o = NULL;
        int n = 0;
        assert_int_equal(txc_jit_call(jit, in, 2, NULL, NULL, 0, &o, 1, &n), TXC_OK);
        int64_t want[3] = {stop[k][0], stop[k][1], stop[k][2]};
        expect_i64(o, TXC_I64, want, 3);
        txc_tensor_release(in[1]);
    }
    txc_jit_stats st = txc_jit_get_stats(jit);
    assert_true(st.misses == 1 && st.hits == 1);
    txc_jit_free(jit);
    txc_tensor_release(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitwise_integers),
        cmocka_unit_test(test_bitwise_with_bool),
        cmocka_unit_test(test_bitwise_under_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
