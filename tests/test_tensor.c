/* The core layer: storages, arrays, tensors and their views, dtype
 * conversions, environments and scopes. No torch needed: the expected
 * strides, offsets and bit patterns below were computed with torch 2.x and
 * are hardcoded. Leaks and use-after-free are caught by the ASan build. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/ops.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}

static void assert_dims(const txc_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                        int64_t offset)
{
    assert_non_null(t);
    assert_int_equal(txc_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) {
        if (txc_tensor_shape(t)[i] != shape[i])
            fail_msg("dim %d: size %lld, expected %lld", i, (long long)txc_tensor_shape(t)[i], (long long)shape[i]);
        if (strides && txc_tensor_strides(t)[i] != strides[i])
            fail_msg("dim %d: stride %lld, expected %lld", i, (long long)txc_tensor_strides(t)[i],
                     (long long)strides[i]);
    }
    assert_int_equal(txc_tensor_offset(t), offset);
}

/* torch.arange(24.).view(2, 3, 4) */
static txc_tensor *arange234(void)
{
    float d[24];
    for (int i = 0; i < 24; i++)
        d[i] = (float)i;
    txc_tensor *t = txc_tensor_from_data(NULL, TXC_F32, 3, SHAPE(2, 3, 4), d);
    assert_non_null(t);
    return t;
}

static void assert_values(const txc_tensor *t, const float *want, int64_t n)
{
    float got[64];
    assert_true(n <= 64);
    assert_int_equal(txc_tensor_numel(t), n);
    assert_int_equal(txc_tensor_copy_to_f32(t, got, 64), TXC_OK);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("element %lld is %g, expected %g", (long long)i, got[i], want[i]);
}

/* ---- wrap / unwrap ----------------------------------------------------------- */

static void test_wrap_unwrap_zero_copy(void **state)
{
    (void)state;
    txc_clear_error();
    txc_array *arr = txc_array_new(TXC_CPU, TXC_F32, 2, SHAPE(2, 3));
    assert_non_null(arr);
    float *data = txc_array_data(arr);
    for (int i = 0; i < 6; i++)
        data[i] = (float)i;
    txc_tensor *t = txc_tensor_wrap(NULL, arr);
    assert_non_null(t);
    assert_ptr_equal(txc_tensor_array(t), arr);
    assert_ptr_equal(txc_tensor_unwrap(t), arr);
    assert_ptr_equal(txc_tensor_data_ptr(t), data);
    assert_ptr_equal(txc_tensor_env(t), txc_env_active());
    assert_dims(t, 2, SHAPE(2, 3), SHAPE(3, 1), 0);
    assert_true(txc_tensor_is_contiguous(t));
    /* the tensor holds its own reference: the array outlives our release */
    txc_array_release(arr);
    data[5] = 42.0f; /* writes through: same memory */
    assert_true(txc_tensor_item_at(t, SHAPE(1, 2)) == 42.0);

    /* a strided view is not its array: unwrap refuses, contiguous() copies */
    txc_tensor *tr = txc_transpose(t, 0, 1);
    assert_null(txc_tensor_unwrap(tr));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "txc_contiguous"));
    txc_clear_error();
    txc_tensor *c = txc_contiguous(tr);
    assert_non_null(txc_tensor_unwrap(c));
    assert_ptr_not_equal(txc_tensor_data_ptr(c), data);
    assert_values(c, (float[]){0, 3, 1, 4, 2, 42}, 6);
    /* a narrow view starting at an offset is not its array either */
    txc_tensor *n = txc_narrow(t, 1, 1, 2);
    assert_null(txc_tensor_unwrap(n));
    txc_clear_error();
    /* contiguous() of a contiguous tensor is the tensor itself */
    txc_tensor *same = txc_contiguous(t);
    assert_ptr_equal(same, t);
    assert_ptr_equal(txc_tensor_unwrap(same), txc_tensor_array(t));

    /* release order does not matter */
    txc_tensor_release(t);
    txc_tensor_release(same);
    assert_true(txc_tensor_item_at(n, SHAPE(1, 1)) == 42.0);
    txc_tensor_release(tr);
    txc_tensor_release(c);
    txc_tensor_release(n);
    assert_int_equal(txc_last_status(), TXC_OK);
}

/* ---- views ------------------------------------------------------------------------ */

static void test_views_strides_like_torch(void **state)
{
    (void)state;
    txc_clear_error();
    txc_tensor *x = arange234();
    const char *base = txc_tensor_data_ptr(x);
    txc_tensor *v;

    v = txc_view(x, 2, SHAPE(6, 4));
    assert_dims(v, 2, SHAPE(6, 4), SHAPE(4, 1), 0);
    assert_ptr_equal(txc_tensor_array(v), txc_tensor_array(x));
    txc_tensor_release(v);

    v = txc_view(x, 2, SHAPE(-1, 8));
    assert_dims(v, 2, SHAPE(3, 8), SHAPE(8, 1), 0);
    txc_tensor_release(v);

    v = txc_permute(x, (int[]){2, 0, 1});
    assert_dims(v, 3, SHAPE(4, 2, 3), SHAPE(1, 12, 4), 0);
    assert_ptr_equal(txc_tensor_data_ptr(v), base);
    assert_false(txc_tensor_is_contiguous(v));
    txc_tensor_release(v);

    v = txc_transpose(x, 0, 2);
    assert_dims(v, 3, SHAPE(4, 3, 2), SHAPE(1, 4, 12), 0);
    assert_true(txc_tensor_item_at(v, SHAPE(3, 1, 1)) == 12 + 4 + 3);
    txc_tensor *u = txc_unsqueeze(v, 1); /* torch: (1, 12, 4, 12) */
    assert_dims(u, 4, SHAPE(4, 1, 3, 2), SHAPE(1, 12, 4, 12), 0);
    txc_tensor_release(u);
    txc_tensor_release(v);

    v = txc_narrow(x, 1, 1, 2);
    assert_dims(v, 3, SHAPE(2, 2, 4), SHAPE(12, 4, 1), 4);
    assert_ptr_equal(txc_tensor_data_ptr(v), base + 4 * sizeof(float));
    assert_ptr_equal(txc_tensor_array(v), txc_tensor_array(x));
    txc_tensor_release(v);

    v = txc_slice(x, 2, 0, 4, 2); /* x[:, :, 0:4:2] */
    assert_dims(v, 3, SHAPE(2, 3, 2), SHAPE(12, 4, 2), 0);
    assert_values(v, (float[]){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}, 12);
    txc_tensor_release(v);

    v = txc_slice(x, -1, -3, 100, 2); /* x[:, :, -3:100:2]: clamped like Python */
    assert_dims(v, 3, SHAPE(2, 3, 2), SHAPE(12, 4, 2), 1);
    assert_values(v, (float[]){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}, 12);
    txc_tensor_release(v);

    v = txc_select(x, 1, -1);
    assert_dims(v, 2, SHAPE(2, 4), SHAPE(12, 1), 8);
    assert_values(v, (float[]){8, 9, 10, 11, 20, 21, 22, 23}, 8);
    txc_tensor_release(v);

    v = txc_narrow(x, 2, 0, 1);
    assert_null(txc_view(v, 0, NULL)); /* 6 elements cannot be viewed as a 0-d tensor */
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_tensor_release(v);
    float c3[3] = {0, 1, 2};
    txc_tensor *c = txc_tensor_from_data(NULL, TXC_F32, 2, SHAPE(3, 1), c3);
    v = txc_expand(c, 3, SHAPE(2, 3, 4));
    assert_dims(v, 3, SHAPE(2, 3, 4), SHAPE(0, 1, 0), 0);
    assert_true(txc_tensor_item_at(v, SHAPE(1, 2, 3)) == 2.0);
    assert_ptr_equal(txc_tensor_data_ptr(v), txc_tensor_data_ptr(c));
    txc_tensor *e2 = txc_expand(c, 2, SHAPE(-1, 5));
    assert_dims(e2, 2, SHAPE(3, 5), SHAPE(1, 0), 0);
    assert_null(txc_expand(c, 2, SHAPE(4, 5)));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_tensor_release(e2);
    txc_tensor_release(v);
    txc_tensor_release(c);

    v = txc_unsqueeze(x, 1);
    assert_dims(v, 4, SHAPE(2, 1, 3, 4), SHAPE(12, 12, 4, 1), 0);
    txc_tensor_release(v);
    v = txc_unsqueeze(x, 3);
    assert_dims(v, 4, SHAPE(2, 3, 4, 1), SHAPE(12, 4, 1, 1), 0);
    txc_tensor_release(v);
    v = txc_unsqueeze(x, -4);
    assert_dims(v, 4, SHAPE(1, 2, 3, 4), SHAPE(24, 12, 4, 1), 0);
    txc_tensor_release(v);

    float d6[6] = {0, 1, 2, 3, 4, 5};
    txc_tensor *q = txc_tensor_from_data(NULL, TXC_F32, 4, SHAPE(1, 3, 1, 2), d6);
    v = txc_squeeze_all(q);
    assert_dims(v, 2, SHAPE(3, 2), SHAPE(2, 1), 0);
    txc_tensor_release(v);
    v = txc_squeeze(q, 2);
    assert_dims(v, 3, SHAPE(1, 3, 2), SHAPE(6, 2, 1), 0);
    txc_tensor_release(v);
    v = txc_squeeze(q, 1); /* size 3: unchanged view */
    assert_dims(v, 4, SHAPE(1, 3, 1, 2), SHAPE(6, 2, 2, 1), 0);
    txc_tensor_release(v);
    txc_tensor_release(q);

    /* bad dims are errors, not crashes */
    assert_null(txc_transpose(x, 0, 3));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    assert_null(txc_select(x, 0, 2));
    txc_clear_error();
    assert_null(txc_narrow(x, 2, 3, 2));
    txc_clear_error();
    assert_null(txc_permute(x, (int[]){0, 0, 1}));
    txc_clear_error();
    assert_null(txc_view(x, 2, SHAPE(5, -1)));
    txc_clear_error();
    txc_tensor_release(x);
}

static void test_reshape_copies_when_needed(void **state)
{
    (void)state;
    txc_clear_error();
    txc_tensor *x = arange234();
    txc_tensor *t = txc_transpose(x, 1, 2); /* (2, 4, 3), strides (12, 1, 4) */
    assert_dims(t, 3, SHAPE(2, 4, 3), SHAPE(12, 1, 4), 0);

    /* view of a non-contiguous tensor across the swapped dims: torch refuses */
    assert_null(txc_view(t, 1, SHAPE(-1)));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "not compatible"));
    txc_clear_error();

    /* reshape copies: new memory, torch's values */
    txc_tensor *r = txc_reshape(t, 1, SHAPE(-1));
    assert_dims(r, 1, SHAPE(24), SHAPE(1), 0);
    assert_ptr_not_equal(txc_tensor_array(r), txc_tensor_array(x));
    assert_values(r, (float[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23},
                  24);
    assert_int_equal(txc_last_status(), TXC_OK); /* the failed view attempt left no error */
    txc_tensor_release(r);

    /* reshape of a view the strides allow: no copy (torch: x[:, 1:, :].reshape(2, 8) shares) */
    txc_tensor *n = txc_narrow(x, 1, 1, 2);
    r = txc_reshape(n, 2, SHAPE(2, 8));
    assert_dims(r, 2, SHAPE(2, 8), SHAPE(12, 1), 4);
    assert_ptr_equal(txc_tensor_data_ptr(r), txc_tensor_data_ptr(n));
    txc_tensor_release(r);
    /* view of a select of a transpose: torch (12, 2, 1) */
    txc_tensor *tt = txc_transpose(x, 0, 1), *s = txc_select(tt, 0, 0);
    r = txc_view(s, 3, SHAPE(2, 2, 2));
    assert_dims(r, 3, SHAPE(2, 2, 2), SHAPE(12, 2, 1), 0);
    txc_tensor_release(r);
    txc_tensor_release(s);
    txc_tensor_release(tt);
    /* reshape of a contiguous tensor is a view */
    r = txc_reshape(x, 2, SHAPE(4, 6));
    assert_ptr_equal(txc_tensor_data_ptr(r), txc_tensor_data_ptr(x));
    txc_tensor_release(r);

    /* clone always copies; to_dtype of the same dtype is the tensor itself */
    txc_tensor *cl = txc_clone(x);
    assert_ptr_not_equal(txc_tensor_data_ptr(cl), txc_tensor_data_ptr(x));
    txc_tensor *same = txc_to_dtype(x, TXC_F32);
    assert_ptr_equal(same, x);
    txc_tensor *h = txc_to_dtype(t, TXC_BF16);
    assert_int_equal(txc_tensor_dtype(h), TXC_BF16);
    assert_true(txc_tensor_is_contiguous(h));
    assert_true(txc_tensor_item_at(h, SHAPE(1, 3, 2)) == 23.0);
    txc_tensor_release(h);
    txc_tensor_release(same);
    txc_tensor_release(cl);
    txc_tensor_release(n);
    txc_tensor_release(t);
    txc_tensor_release(x);
}

/* ---- storages ---------------------------------------------------------------------------- */

typedef struct deleter_log {
    int calls;
    void *data;
} deleter_log;

static void count_deleter(void *ctx, void *data)
{
    deleter_log *log = ctx;
    log->calls++;
    log->data = data;
    free(data);
}

static void test_storage_owned_and_external(void **state)
{
    (void)state;
    txc_clear_error();
    txc_storage *s = txc_storage_new(TXC_CPU, 64);
    assert_non_null(s);
    assert_int_equal(txc_storage_get_kind(s), TXC_STORAGE_OWNED);
    assert_false(txc_storage_is_readonly(s));
    assert_int_equal(txc_storage_size(s), 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(((unsigned char *)txc_storage_data(s))[i], 0);
    assert_int_equal((uintptr_t)txc_storage_data(s) % 64, 0);
    txc_storage_release(s);

    /* external buffer with a deleter: runs once, when the last user goes */
    deleter_log log = {0};
    float *buf = malloc(8 * sizeof(float));
    for (int i = 0; i < 8; i++)
        buf[i] = (float)i;
    s = txc_storage_from_external(buf, 8 * sizeof(float), count_deleter, &log);
    assert_non_null(s);
    assert_int_equal(txc_storage_get_kind(s), TXC_STORAGE_EXTERNAL);
    txc_array *a = txc_array_from_storage(s, 2 * sizeof(float), TXC_F32, 2, SHAPE(2, 3));
    assert_non_null(a);
    assert_ptr_equal(txc_array_data(a), buf + 2);
    txc_storage_release(s); /* the array keeps it */
    txc_tensor *t = txc_tensor_wrap(NULL, a);
    txc_array_release(a); /* the tensor keeps it */
    txc_tensor *v = txc_transpose(t, 0, 1);
    txc_tensor *w = txc_select(v, 0, 2);
    assert_ptr_equal(txc_tensor_data_ptr(t), buf + 2);
    assert_values(w, (float[]){4, 7}, 2);
    txc_tensor_release(t);
    txc_tensor_release(v);
    assert_int_equal(log.calls, 0);
    txc_tensor_release(w);
    assert_int_equal(log.calls, 1);
    assert_ptr_equal(log.data, buf);

    /* no deleter: the buffer outlives the storage */
    float local[4] = {1, 2, 3, 4};
    s = txc_storage_from_external(local, sizeof local, NULL, NULL);
    a = txc_array_from_storage(s, 0, TXC_F32, 1, SHAPE(4));
    txc_storage_release(s);
    txc_array_release(a);
    assert_true(local[3] == 4.0f);

    /* arrays must fit and be aligned */
    char *raw = malloc(16);
    log.calls = 0;
    s = txc_storage_from_external(raw, 16, count_deleter, &log);
    assert_null(txc_array_from_storage(s, 8, TXC_F32, 1, SHAPE(3)));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    assert_null(txc_array_from_storage(s, 2, TXC_F32, 1, SHAPE(2)));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    assert_null(txc_array_from_storage(s, 17, TXC_BOOL, 1, SHAPE(0)));
    txc_clear_error();
    txc_storage_release(s);
    assert_int_equal(log.calls, 1);

    /* shapes */
    assert_int_equal(txc_shape_numel(3, SHAPE(2, 0, 5)), 0);
    assert_int_equal(txc_shape_numel(0, NULL), 1);
    assert_int_equal(txc_shape_numel(2, SHAPE(-1, 2)), -1);
    assert_int_equal(txc_shape_numel(3, SHAPE(INT64_MAX / 2, 3, 1)), -1);
    assert_null(txc_array_new(TXC_CPU, TXC_F32, 2, SHAPE(2, -3)));
    txc_clear_error();
    assert_null(txc_array_new(TXC_CPU, TXC_F32, 9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1)));
    txc_clear_error();
    txc_array *z = txc_array_new(TXC_CPU, TXC_I64, 2, SHAPE(0, 4)); /* empty is fine */
    assert_non_null(z);
    assert_int_equal(txc_array_nbytes(z), 0);
    txc_array_release(z);
}

static void test_storage_mmap(void **state)
{
    (void)state;
    txc_clear_error();
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *path = tu_path("%s/weights.bin", dir);
    /* 8 header bytes, then 6 floats */
    unsigned char file[8 + 6 * sizeof(float)];
    memset(file, 0xab, 8);
    float vals[6] = {1.5f, -2, 3, 4.25f, 5, -6};
    memcpy(file + 8, vals, sizeof vals);
    assert_int_equal(tu_write_file(path, file, sizeof file), 0);

    txc_storage *s = txc_storage_mmap_file(path);
    assert_non_null(s);
    assert_int_equal(txc_storage_get_kind(s), TXC_STORAGE_MMAP);
    assert_true(txc_storage_is_readonly(s));
    assert_int_equal(txc_storage_size(s), sizeof file);
    txc_array *a = txc_array_from_storage(s, 8, TXC_F32, 2, SHAPE(3, 2));
    assert_non_null(a);
    assert_ptr_equal(txc_array_data(a), (char *)txc_storage_data(s) + 8);
    txc_storage_release(s);
    txc_tensor *t = txc_tensor_wrap(NULL, a);
    txc_array_release(a);
    assert_ptr_equal(txc_tensor_unwrap(t), a); /* zero copy, same array */
    txc_tensor *tr = txc_transpose(t, 0, 1);
    assert_values(tr, (float[]){1.5f, 3, 5, -2, 4.25f, -6}, 6);
    /* ops read mmap'd weights in place */
    txc_tensor *sum = txc_sum(tr, 1, (int[]){1}, false);
    assert_values(sum, (float[]){9.5f, -3.75f}, 2);
    /* in-place writes into read-only weights are refused */
    txc_tensor *idx = txc_tensor_from_data(NULL, TXC_I64, 1, SHAPE(1), (int64_t[]){0});
    txc_tensor *src = txc_tensor_from_data(NULL, TXC_F32, 2, SHAPE(1, 2), (float[]){0, 0});
    assert_int_equal(txc_index_copy_(t, 0, idx, src), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "aten::index_copy_"));
    txc_clear_error();
    txc_tensor_release(idx);
    txc_tensor_release(src);
    txc_tensor_release(sum);
    txc_tensor_release(t);
    txc_tensor_release(tr); /* the mapping goes with the last view */

    /* an empty file maps to an empty storage */
    const char *empty = tu_path("%s/empty.bin", dir);
    assert_int_equal(tu_write_file(empty, "", 0), 0);
    s = txc_storage_mmap_file(empty);
    assert_non_null(s);
    assert_int_equal(txc_storage_size(s), 0);
    txc_storage_release(s);

    /* missing file and directory: TXC_ERR_IO naming the path */
    assert_null(txc_storage_mmap_file(tu_path("%s/missing.bin", dir)));
    assert_int_equal(txc_last_status(), TXC_ERR_IO);
    assert_non_null(strstr(txc_last_error(), "missing.bin"));
    txc_clear_error();
    assert_null(txc_storage_mmap_file(dir));
    assert_int_equal(txc_last_status(), TXC_ERR_IO);
    txc_clear_error();
    tu_rm_rf(dir);
}

/* ---- dtypes -------------------------------------------------------------------------------- */

static void test_dtype_conversions(void **state)
{
    (void)state;
    /* f32 -> bf16 / f16 bit patterns from torch's .to(dtype) */
    static const struct { float f; uint16_t bf16, f16; } cases[] = {
        {1.0f, 0x3f80, 0x3c00},
        {1.00390625f, 0x3f80, 0x3c04},          /* bf16 tie: to even (down) */
        {1.01171875f, 0x3f82, 0x3c0c},          /* bf16 tie: to even (up) */
        {1.0078134536743164f, 0x3f81, 0x3c08},  /* just above a tie */
        {-2.5f, 0xc020, 0xc100},
        {3.4028234663852886e+38f, 0x7f80, 0x7c00}, /* FLT_MAX rounds to inf in bf16 */
        {3.3895313892515355e+38f, 0x7f7f, 0x7c00},
        {1e-40f, 0x0001, 0x0000},                /* f32 subnormal */
        {9.183549615799121e-41f, 0x0001, 0x0000},
        {-1e-45f, 0x8000, 0x8000},
        {INFINITY, 0x7f80, 0x7c00},
        {-INFINITY, 0xff80, 0xfc00},
        {-0.0f, 0x8000, 0x8000},
        {65504.0f, 0x4780, 0x7bff},             /* f16 max */
        {65519.99f, 0x4780, 0x7bff},
        {65520.0f, 0x4780, 0x7c00},             /* rounds to inf in f16 */
        {5.960464477539063e-08f, 0x3380, 0x0001}, /* smallest f16 subnormal */
        {2.9802322387695312e-08f, 0x3300, 0x0000}, /* half of it: tie to even (0) */
        {2.980530261993408e-08f, 0x3300, 0x0001},  /* just above the tie */
        {4.470348358154297e-08f, 0x3340, 0x0001},
        {6.1e-05f, 0x3880, 0x03ff},             /* largest f16 subnormal range */
        {6.103515625e-05f, 0x3880, 0x0400},     /* smallest f16 normal */
        {0.1f, 0x3dcd, 0x2e66},
        {0.333333f, 0x3eab, 0x3555},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (txc_f32_to_bf16(cases[i].f) != cases[i].bf16)
            fail_msg("bf16(%.9g) = 0x%04x, torch 0x%04x", cases[i].f, txc_f32_to_bf16(cases[i].f), cases[i].bf16);
        if (txc_f32_to_f16(cases[i].f) != cases[i].f16)
            fail_msg("f16(%.9g) = 0x%04x, torch 0x%04x", cases[i].f, txc_f32_to_f16(cases[i].f), cases[i].f16);
    }
    /* NaN stays NaN (any payload) */
    uint16_t nb = txc_f32_to_bf16(NAN), nh = txc_f32_to_f16(NAN);
    assert_true((nb & 0x7f80) == 0x7f80 && (nb & 0x7f) != 0);
    assert_true((nh & 0x7c00) == 0x7c00 && (nh & 0x3ff) != 0);
    assert_true(isnan(txc_bf16_to_f32(nb)) && isnan(txc_f16_to_f32(nh)));

    /* f16 / bf16 -> f32 (exact) */
    static const struct { uint16_t h; double f; } f16s[] = {
        {0x0001, 5.960464477539063e-08}, {0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05},
        {0x7bff, 65504.0}, {0x8001, -5.960464477539063e-08}, {0x3c00, 1.0}, {0x3555, 0.333251953125},
    };
    for (size_t i = 0; i < sizeof f16s / sizeof f16s[0]; i++)
        assert_true(txc_f16_to_f32(f16s[i].h) == (float)f16s[i].f);
    assert_true(isinf(txc_f16_to_f32(0x7c00)) && txc_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(txc_f16_to_f32(0xfc00)) && txc_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(txc_f16_to_f32(0x7e00)));
    static const struct { uint16_t h; double f; } bf16s[] = {
        {0x0001, 9.183549615799121e-41}, {0x007f, 1.1663108012064884e-38}, {0x0080, 1.1754943508222875e-38},
        {0x7f7f, 3.3895313892515355e+38}, {0x3f80, 1.0}, {0xc020, -2.5},
    };
    for (size_t i = 0; i < sizeof bf16s / sizeof bf16s[0]; i++)
        assert_true(txc_bf16_to_f32(bf16s[i].h) == (float)bf16s[i].f);
    assert_true(isinf(txc_bf16_to_f32(0xff80)) && isnan(txc_bf16_to_f32(0x7fc0)));
    /* every f16 survives f16 -> f32 -> f16 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* NaNs */
        assert_int_equal(txc_f32_to_f16(txc_f16_to_f32((uint16_t)h)), h);
    }

    /* float -> int truncates toward zero, nonzero -> true (torch's .to) */
    float src[5] = {2.7f, -2.7f, 0.5f, -0.0f, NAN};
    int32_t i32[5];
    uint8_t b[5];
    txc_dtype_convert(TXC_F32, src, TXC_I32, i32, 4);
    assert_true(i32[0] == 2 && i32[1] == -2 && i32[2] == 0 && i32[3] == 0);
    txc_dtype_convert(TXC_F32, src, TXC_BOOL, b, 5);
    assert_true(b[0] == 1 && b[1] == 1 && b[2] == 1 && b[3] == 0 && b[4] == 1);
    int64_t big[3] = {(1LL << 40) + 5, -1, 1LL << 31};
    txc_dtype_convert(TXC_I64, big, TXC_I32, i32, 3); /* wraps, as torch */
    assert_true(i32[0] == 5 && i32[1] == -1 && i32[2] == INT32_MIN);
    uint16_t h16[2];
    txc_dtype_convert(TXC_F32, (float[]){1.01171875f, 65520.0f}, TXC_BF16, h16, 2);
    assert_true(h16[0] == 0x3f82 && h16[1] == 0x4780);
    assert_true(txc_dtype_load(TXC_BF16, h16, 0) == 1.015625);
    /* int64 -> float32 rounds once (not through double: 2^60 + 2^36 + 1 is
     * above the float tie, its double is on it) */
    int64_t i64 = (1LL << 60) + (1LL << 36) + 1;
    float f1;
    txc_dtype_convert(TXC_I64, &i64, TXC_F32, &f1, 1);
    assert_true(f1 == 0x1.000002p60f);
    /* strided (byte strides): every other f32 into every third bf16 slot,
     * and f16 <-> f32 through the bulk loops agree with the scalar ones */
    float sf[6] = {1.0f, -7.0f, 2.5f, -7.0f, 65520.0f, -7.0f};
    uint16_t d16[9] = {0};
    txc_dtype_convert_strided(TXC_F32, sf, 8, TXC_BF16, d16, 6, 3);
    assert_true(d16[0] == 0x3f80 && d16[3] == 0x4020 && d16[6] == 0x4780 && d16[1] == 0 && d16[4] == 0);
    uint16_t all16[4096];
    float back[4096];
    for (uint32_t base = 0; base < 0x10000; base += 4096) {
        for (uint32_t k = 0; k < 4096; k++)
            all16[k] = (uint16_t)(base + k);
        txc_dtype_convert(TXC_F16, all16, TXC_F32, back, 4096);
        for (uint32_t k = 0; k < 4096; k++) {
            float want = txc_f16_to_f32(all16[k]);
            assert_true(memcmp(&back[k], &want, 4) == 0);
        }
        txc_dtype_convert(TXC_F32, back, TXC_F16, all16, 4096);
        for (uint32_t k = 0; k < 4096; k++)
            assert_int_equal(all16[k], txc_f32_to_f16(back[k]));
    }

    /* names, sizes, parsing */
    static const struct { txc_dtype dt; const char *name, *st; size_t size; } names[] = {
        {TXC_F32, "float32", "F32", 4}, {TXC_F16, "float16", "F16", 2}, {TXC_BF16, "bfloat16", "BF16", 2},
        {TXC_I32, "int32", "I32", 4},   {TXC_I64, "int64", "I64", 8},   {TXC_BOOL, "bool", "BOOL", 1},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        txc_dtype d;
        assert_string_equal(txc_dtype_name(names[i].dt), names[i].name);
        assert_int_equal(txc_dtype_size(names[i].dt), names[i].size);
        assert_true(txc_dtype_parse(names[i].name, &d) && d == names[i].dt);
        assert_true(txc_dtype_from_safetensors(names[i].st, &d) && d == names[i].dt);
        assert_int_equal(txc_dtype_is_float(names[i].dt), i < 3);
    }
    txc_dtype d;
    assert_true(txc_dtype_parse("bf16", &d) && d == TXC_BF16);
    assert_false(txc_dtype_from_safetensors("F64", &d));
    assert_false(txc_dtype_parse("complex64", &d));
}

/* ---- environments, scopes, devices --------------------------------------------------------------- */

static void test_env_stack(void **state)
{
    (void)state;
    txc_clear_error();
    txc_env *def = txc_env_default();
    assert_ptr_equal(txc_env_active(), def); /* nothing entered */
    assert_string_equal(txc_env_name(def), "default");
    txc_env_options o = txc_env_default_options();
    o.name = "a";
    txc_env *a = txc_env_new(&o);
    txc_env *b = txc_env_new(NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(txc_env_name(a), "a");
    assert_true(txc_device_equal(txc_env_device(a), TXC_CPU));

    assert_int_equal(txc_env_enter(a), TXC_OK);
    assert_ptr_equal(txc_env_active(), a);
    assert_int_equal(txc_env_enter(b), TXC_OK);
    assert_ptr_equal(txc_env_active(), b);
    /* tensors go to the active env */
    txc_tensor *t = txc_tensor_from_data(NULL, TXC_F32, 1, SHAPE(2), (float[]){1, 2});
    assert_ptr_equal(txc_tensor_env(t), b);
    uint64_t before = txc_env_op_count(b);
    txc_tensor *u = txc_neg(t);
    assert_ptr_equal(txc_tensor_env(u), b);
    assert_true(txc_env_op_count(b) > before);
    txc_tensor_release(u);
    /* exit out of order: TXC_ERR_ENV, stack unchanged */
    assert_int_equal(txc_env_exit(a), TXC_ERR_ENV);
    assert_non_null(strstr(txc_last_error(), "txc_env_exit"));
    txc_clear_error();
    assert_ptr_equal(txc_env_active(), b);
    assert_int_equal(txc_env_exit(b), TXC_OK);
    assert_ptr_equal(txc_env_active(), a);
    /* t's env is no longer active: ops on it fail with TXC_ERR_ENV */
    assert_null(txc_exp(t));
    assert_int_equal(txc_last_status(), TXC_ERR_ENV);
    assert_non_null(strstr(txc_last_error(), "aten::exp"));
    txc_clear_error();
    /* ... and to_env moves it, zero copy */
    txc_tensor *ta = txc_tensor_to_env(t, a);
    assert_ptr_equal(txc_tensor_env(ta), a);
    assert_ptr_equal(txc_tensor_array(ta), txc_tensor_array(t));
    u = txc_exp(ta);
    assert_non_null(u);
    txc_tensor_release(u);
    txc_tensor_release(ta);
    txc_tensor_release(t);
    assert_int_equal(txc_env_exit(a), TXC_OK);
    assert_ptr_equal(txc_env_active(), def);
    assert_int_equal(txc_env_exit(a), TXC_ERR_ENV); /* nothing left to exit */
    txc_clear_error();
    /* views of default-env tensors work again */
    txc_tensor *x = arange234();
    assert_ptr_equal(txc_tensor_env(x), def);
    txc_tensor_release(x);
    txc_env_free(a);
    txc_env_free(b);
    txc_env_free(def); /* ignored */
    assert_ptr_equal(txc_env_active(), def);
}

static void test_scopes(void **state)
{
    (void)state;
    txc_clear_error();
    txc_env *env = txc_env_active();
    deleter_log temp_log = {0}, kept_log = {0};
    float *tb = malloc(4 * sizeof(float)), *kb = malloc(4 * sizeof(float));
    for (int i = 0; i < 4; i++)
        tb[i] = kb[i] = (float)i;

    int outer = txc_env_scope_begin(env);
    assert_true(outer >= 0);
    txc_storage *s = txc_storage_from_external(tb, 4 * sizeof(float), count_deleter, &temp_log);
    txc_array *a = txc_array_from_storage(s, 0, TXC_F32, 1, SHAPE(4));
    txc_storage_release(s);
    txc_tensor *temp = txc_tensor_wrap(NULL, a); /* owned by the scope */
    txc_array_release(a);
    s = txc_storage_from_external(kb, 4 * sizeof(float), count_deleter, &kept_log);
    a = txc_array_from_storage(s, 0, TXC_F32, 1, SHAPE(4));
    txc_storage_release(s);
    txc_tensor *kept = txc_tensor_wrap(NULL, a);
    txc_array_release(a);
    txc_tensor_retain(kept); /* survives the scope */

    int inner = txc_env_scope_begin(env);
    txc_tensor *v = txc_mul(txc_transpose(txc_unsqueeze(temp, 0), 0, 1), kept); /* temporaries: scope's */
    assert_non_null(v);
    assert_int_equal(txc_tensor_numel(v), 16);
    txc_tensor *keep_v = txc_tensor_retain(txc_sum(v, 0, NULL, false));
    txc_env_scope_end(env, inner);
    assert_true(txc_tensor_item(keep_v) == 36.0); /* (0+1+2+3)^2 */
    assert_int_equal(temp_log.calls, 0);          /* temp is the outer scope's */
    txc_env_scope_end(env, outer);
    assert_int_equal(temp_log.calls, 1);          /* released at scope end */
    assert_int_equal(kept_log.calls, 0);
    assert_true(txc_tensor_item_at(kept, SHAPE(3)) == 3.0);
    txc_tensor_release(kept);
    assert_int_equal(kept_log.calls, 1);
    txc_tensor_release(keep_v);

    /* ending a mark that is not open is ignored */
    txc_env_scope_end(env, 5);
    /* without a scope, results are the caller's */
    txc_tensor *x = arange234(), *y = txc_neg(x);
    txc_tensor_release(x);
    assert_true(txc_tensor_item_at(y, SHAPE(1, 2, 3)) == -23.0);
    txc_tensor_release(y);
}

static void test_tensor_to_device(void **state)
{
    (void)state;
    txc_clear_error();
    txc_tensor *x = arange234();
    txc_tensor *c = txc_tensor_to(x, TXC_CPU);
    assert_ptr_equal(c, x); /* already there: the same tensor, retained */
    assert_ptr_equal(txc_tensor_data_ptr(c), txc_tensor_data_ptr(x));
    txc_tensor_release(c);
    txc_device cuda = {TXC_DEVICE_CUDA, 0};
    assert_false(txc_device_available(cuda));
    assert_null(txc_tensor_to(x, cuda));
    assert_int_equal(txc_last_status(), TXC_ERR_UNSUPPORTED);
    assert_non_null(strstr(txc_last_error(), "cuda"));
    txc_clear_error();
    txc_env_options o = txc_env_default_options();
    o.device = cuda;
    assert_null(txc_env_new(&o));
    assert_int_equal(txc_last_status(), TXC_ERR_UNSUPPORTED);
    txc_clear_error();
    assert_string_equal(txc_device_name(TXC_CPU), "cpu");
    txc_device d;
    assert_int_equal(txc_device_parse("cuda:1", &d), TXC_OK);
    assert_true(d.type == TXC_DEVICE_CUDA && d.index == 1);
    assert_true(txc_device_equal(txc_tensor_device(x), TXC_CPU));
    txc_tensor_release(x);
}

static void test_accessors_and_0d(void **state)
{
    (void)state;
    txc_clear_error();
    txc_tensor *s = txc_tensor_from_data(NULL, TXC_I64, 0, NULL, (int64_t[]){-7});
    assert_non_null(s);
    assert_int_equal(txc_tensor_ndim(s), 0);
    assert_int_equal(txc_tensor_numel(s), 1);
    assert_true(txc_tensor_is_contiguous(s));
    assert_true(txc_tensor_item(s) == -7.0);
    txc_tensor *u = txc_unsqueeze(s, 0);
    assert_dims(u, 1, SHAPE(1), SHAPE(1), 0);
    txc_tensor *e = txc_expand(s, 2, SHAPE(2, 3));
    assert_dims(e, 2, SHAPE(2, 3), SHAPE(0, 0), 0);
    int64_t out[6];
    assert_int_equal(txc_tensor_copy_to_i64(e, out, 6), TXC_OK);
    assert_true(out[0] == -7 && out[5] == -7);
    assert_int_equal(txc_tensor_copy_to_i64(e, out, 5), TXC_ERR_INVALID);
    txc_clear_error();
    txc_tensor_release(e);
    txc_tensor_release(u);
    txc_tensor_release(s);

    txc_tensor *x = arange234();
    assert_int_equal(txc_tensor_size(x, -1), 4);
    assert_int_equal(txc_tensor_size(x, 0), 2);
    txc_tensor *z = txc_narrow(x, 1, 3, 0); /* empty view */
    assert_dims(z, 3, SHAPE(2, 0, 4), NULL, 12);
    assert_int_equal(txc_tensor_numel(z), 0);
    assert_true(txc_tensor_is_contiguous(z));
    txc_tensor *zc = txc_contiguous(z);
    assert_int_equal(txc_tensor_numel(zc), 0);
    txc_tensor_release(zc);
    txc_tensor_release(z);
    txc_tensor_release(x);
    /* NULL in, NULL out, no new error */
    assert_null(txc_transpose(NULL, 0, 1));
    assert_null(txc_contiguous(NULL));
    assert_null(txc_tensor_to(NULL, TXC_CPU));
    assert_int_equal(txc_last_status(), TXC_OK);
    txc_tensor_release(NULL);
    txc_array_release(NULL);
    txc_storage_release(NULL);
}

/* txc_error_replace wrapping the recorded message in context (status.h):
 * its argument is the record's own buffer. */
static void test_error_replace_wraps_last_error(void **state)
{
    (void)state;
    txc_clear_error();
    assert_int_equal(txc_error(TXC_ERR_INVALID, "batch: slot %d is not busy", 3), TXC_ERR_INVALID);
    assert_int_equal(txc_error(TXC_ERR_IO, "ignored: %s", "a second error"), TXC_ERR_IO);
    assert_string_equal(txc_last_error(), "batch: slot 3 is not busy");
    txc_error_replace(TXC_ERR_FORMAT, "rank %d (cancel): %s", 1, txc_last_error());
    assert_string_equal(txc_last_error(), "rank 1 (cancel): batch: slot 3 is not busy");
    assert_int_equal(txc_last_status(), TXC_ERR_FORMAT);
    txc_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_unwrap_zero_copy),
        cmocka_unit_test(test_error_replace_wraps_last_error),
        cmocka_unit_test(test_views_strides_like_torch),
        cmocka_unit_test(test_reshape_copies_when_needed),
        cmocka_unit_test(test_storage_owned_and_external),
        cmocka_unit_test(test_storage_mmap),
        cmocka_unit_test(test_dtype_conversions),
        cmocka_unit_test(test_env_stack),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_tensor_to_device),
        cmocka_unit_test(test_accessors_and_0d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
