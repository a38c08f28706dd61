/* Elementwise ops and reductions against PyTorch fixtures
 * (tests/fixtures/ops_elementwise.json, written by
 * scripts/gen_op_fixtures_elementwise.py), plus what the fixtures cannot
 * hold: environment errors, int64 wrap-around, long and strided inputs
 * against references computed here. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h" /* txc_kern_set_simd_level */
#include "txc/ops.h"

/* ---- fixture driver ------------------------------------------------------------ */

typedef txc_tensor *(*bin_fn)(txc_tensor *, txc_tensor *);
typedef txc_tensor *(*scalar_fn)(txc_tensor *, double);
typedef txc_tensor *(*un_fn)(txc_tensor *);

static const struct { const char *name; bin_fn fn; } binary_ops[] = {
    {"add", txc_add}, {"sub", txc_sub}, {"mul", txc_mul}, {"div", txc_div}, {"pow", txc_pow},
    {"maximum", txc_maximum}, {"minimum", txc_minimum}, {"eq", txc_eq}, {"ne", txc_ne}, {"lt", txc_lt},
    {"le", txc_le}, {"gt", txc_gt}, {"ge", txc_ge}, {"logical_and", txc_logical_and},
};
static const struct { const char *name; scalar_fn fn; } scalar_ops[] = {
    {"add_scalar", txc_add_scalar}, {"sub_scalar", txc_sub_scalar}, {"mul_scalar", txc_mul_scalar},
    {"div_scalar", txc_div_scalar}, {"pow_scalar", txc_pow_scalar}, {"rsub_scalar", txc_rsub_scalar},
};
static const struct { const char *name; un_fn fn; } unary_ops[] = {
    {"neg", txc_neg}, {"abs", txc_abs}, {"exp", txc_exp}, {"log", txc_log}, {"sqrt", txc_sqrt},
    {"rsqrt", txc_rsqrt}, {"sin", txc_sin}, {"cos", txc_cos}, {"tanh", txc_tanh}, {"sigmoid", txc_sigmoid},
    {"silu", txc_silu}, {"relu", txc_relu}, {"logical_not", txc_logical_not},
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static double arg_num(const cJSON *args, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    if (cJSON_IsString(v)) {
        if (strcmp(v->valuestring, "-inf") == 0) return -INFINITY;
        if (strcmp(v->valuestring, "inf") == 0) return INFINITY;
        if (strcmp(v->valuestring, "nan") == 0) return NAN;
    }
    if (!cJSON_IsNumber(v))
        fail_msg("fixture: missing numeric arg '%s'", key);
    return v->valuedouble;
}

static bool arg_bool(const cJSON *args, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, key));
}

/* Run one fixture op; sets *known = false for an op name it does not map. */
static txc_tensor *run_op(const char *op, txc_tensor **in, int n_in, const cJSON *args, bool *known)
{
    *known = true;
    for (size_t i = 0; i < COUNT(binary_ops); i++)
        if (strcmp(op, binary_ops[i].name) == 0 && n_in == 2)
            return binary_ops[i].fn(in[0], in[1]);
    for (size_t i = 0; i < COUNT(scalar_ops); i++)
        if (strcmp(op, scalar_ops[i].name) == 0 && n_in == 1)
            return scalar_ops[i].fn(in[0], arg_num(args, "scalar"));
    for (size_t i = 0; i < COUNT(unary_ops); i++)
        if (strcmp(op, unary_ops[i].name) == 0 && n_in == 1)
            return unary_ops[i].fn(in[0]);
    if (strcmp(op, "gelu") == 0) {
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(args, "approximate");
        return txc_gelu(in[0], cJSON_IsString(ap) && strcmp(ap->valuestring, "tanh") == 0);
    }
    if (strcmp(op, "where") == 0 && n_in == 3)
        return txc_where(in[0], in[1], in[2]);
    if (strcmp(op, "masked_fill") == 0 && n_in == 2)
        return txc_masked_fill(in[0], in[1], arg_num(args, "value"));
    if ((strcmp(op, "sum") == 0 || strcmp(op, "mean") == 0) && n_in == 1) {
        const cJSON *dj = cJSON_GetObjectItemCaseSensitive(args, "dims");
        int dims[TXC_MAX_DIMS], n = cJSON_GetArraySize(dj);
        assert_true(n <= TXC_MAX_DIMS);
        for (int i = 0; i < n; i++)
            dims[i] = (int)cJSON_GetArrayItem(dj, i)->valuedouble;
        bool keep = arg_bool(args, "keepdim");
        return op[0] == 's' ? txc_sum(in[0], n, dims, keep) : txc_mean(in[0], n, dims, keep);
    }
    if ((strcmp(op, "max") == 0 || strcmp(op, "argmax") == 0) && n_in == 1) {
        bool is_max = strcmp(op, "max") == 0;
        if (!cJSON_GetObjectItemCaseSensitive(args, "dim"))
            return is_max ? txc_max_all(in[0]) : txc_argmax_all(in[0]);
        int d = (int)arg_num(args, "dim");
        bool keep = arg_bool(args, "keepdim");
        return is_max ? txc_max(in[0], d, keep) : txc_argmax(in[0], d, keep);
    }
    if (strcmp(op, "softmax") == 0 && n_in == 1)
        return txc_softmax(in[0], (int)arg_num(args, "dim"));
    if (strcmp(op, "log_softmax") == 0 && n_in == 1)
        return txc_log_softmax(in[0], (int)arg_num(args, "dim"));
    *known = false;
    return NULL;
}

/* The aten name an op's error message must carry. */
static void aten_name(const char *op, char *buf, size_t n)
{
    char base[64];
    snprintf(base, sizeof base, "%s", op);
    char *s = strstr(base, "_scalar");
    if (s)
        *s = '\0';
    if (strcmp(base, "softmax") == 0 || strcmp(base, "log_softmax") == 0)
        snprintf(buf, n, "aten::_%s", base);
    else
        snprintf(buf, n, "aten::%s", base);
}

static void run_fixtures(void)
{
    cJSON *root = tu_load_json("tests/fixtures/ops_elementwise.json");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    assert_true(cJSON_GetArraySize(cases) > 500);
    int n_ok = 0, n_err = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *op = cJSON_GetObjectItemCaseSensitive(c, "op")->valuestring;
        const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(c, "inputs");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
        txc_tensor *in[4] = {NULL};
        int n_in = cJSON_GetArraySize(inputs);
        assert_true(n_in >= 1 && n_in <= 4);
        for (int i = 0; i < n_in; i++)
            in[i] = tu_tensor_from_json(cJSON_GetArrayItem(inputs, i));
        txc_clear_error();
        bool known;
        txc_tensor *r = run_op(op, in, n_in, args, &known);
        if (!known)
            fail_msg("%s: unknown op '%s'", name, op);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "error"))) {
            char aten[80];
            aten_name(op, aten, sizeof aten);
            if (r)
                fail_msg("%s: expected an error (torch: %s), got a result", name,
                         cJSON_GetObjectItemCaseSensitive(c, "torch_error")->valuestring);
            if (txc_last_status() != TXC_ERR_INVALID || !strstr(txc_last_error(), aten))
                fail_msg("%s: expected TXC_ERR_INVALID naming %s, got %s: %s", name, aten,
                         txc_status_name(txc_last_status()), txc_last_error());
            n_err++;
        } else {
            double rtol = cJSON_GetObjectItemCaseSensitive(c, "rtol")->valuedouble;
            double atol = cJSON_GetObjectItemCaseSensitive(c, "atol")->valuedouble;
            tu_assert_tensor_close(name, r, cJSON_GetObjectItemCaseSensitive(c, "expected"), rtol, atol);
            /* results are fresh, contiguous tensors */
            assert_true(txc_tensor_is_contiguous(r));
            assert_int_equal(txc_tensor_offset(r), 0);
            n_ok++;
        }
        txc_tensor_release(r);
        for (int i = 0; i < n_in; i++)
            txc_tensor_release(in[i]);
    }
    printf("[ fixtures ] %d results and %d errors match torch (SIMD level %d)\n", n_ok, n_err,
           txc_kern_simd_level());
    cJSON_Delete(root);
}

/* The fixtures at every SIMD level (the vector exp of softmax/log_softmax,
 * the F16C conversions, and their portable versions). */
static void test_fixtures(void **state)
{
    (void)state;
    static const int levels[] = {-1, 1, 0};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        txc_kern_set_simd_level(levels[i]);
        run_fixtures();
    }
    txc_kern_set_simd_level(-1);
}

/* ---- helpers ----------------------------------------------------------------------- */

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

static void assert_error(txc_tensor *r, txc_status st, const char *needle)
{
    assert_null(r);
    assert_int_equal(txc_last_status(), st);
    if (!strstr(txc_last_error(), needle))
        fail_msg("error '%s' does not contain '%s'", txc_last_error(), needle);
    txc_clear_error();
}

/* ---- errors ---------------------------------------------------------------------------- */

static void test_shape_and_dim_errors(void **state)
{
    (void)state;
    txc_clear_error();
    float d[6] = {1, 2, 3, 4, 5, 6};
    txc_tensor *a = f32_tensor(2, (int64_t[]){2, 3}, d), *b = f32_tensor(2, (int64_t[]){3, 2}, d);
    assert_error(txc_add(a, b), TXC_ERR_INVALID, "aten::add");
    txc_tensor *cond4 = txc_tensor_from_data(NULL, TXC_BOOL, 1, (int64_t[]){4}, NULL);
    assert_error(txc_where(cond4, a, a), TXC_ERR_INVALID, "aten::where");
    txc_tensor_release(cond4);
    assert_error(txc_sum(a, 1, (int[]){2}, false), TXC_ERR_INVALID, "aten::sum");
    assert_error(txc_sum(a, 2, (int[]){1, -1}, false), TXC_ERR_INVALID, "appears multiple times");
    assert_error(txc_max(a, -3, false), TXC_ERR_INVALID, "aten::max");
    assert_error(txc_argmax(a, 5, true), TXC_ERR_INVALID, "aten::argmax");
    assert_error(txc_softmax(a, 2), TXC_ERR_INVALID, "aten::_softmax");
    assert_error(txc_log_softmax(a, -3), TXC_ERR_INVALID, "aten::_log_softmax");
    txc_tensor *ints = i64_tensor(1, (int64_t[]){2}, (int64_t[]){1, 2});
    assert_error(txc_mean(ints, 0, NULL, false), TXC_ERR_INVALID, "aten::mean");
    assert_error(txc_pow_scalar(ints, -1), TXC_ERR_INVALID, "negative integer powers");
    assert_error(txc_add_scalar(ints, 1e30), TXC_ERR_INVALID, "overflow");
    txc_tensor *mask = txc_tensor_from_data(NULL, TXC_BOOL, 1, (int64_t[]){2}, (uint8_t[]){1, 0});
    assert_error(txc_masked_fill(ints, mask, -INFINITY), TXC_ERR_INVALID, "aten::masked_fill");
    assert_error(txc_masked_fill(a, a, 0), TXC_ERR_INVALID, "bool");

    /* A NULL input (an earlier failure) keeps the first error. */
    txc_tensor *bad = txc_add(a, b);
    assert_null(bad);
    char first[512];
    snprintf(first, sizeof first, "%s", txc_last_error());
    txc_tensor *chain = txc_exp(txc_mul_scalar(bad, 2.0));
    assert_null(chain);
    assert_string_equal(txc_last_error(), first);
    txc_clear_error();
    txc_tensor_release(a);
    txc_tensor_release(b);
    txc_tensor_release(ints);
    txc_tensor_release(mask);
}

static void test_env_errors(void **state)
{
    (void)state;
    txc_clear_error();
    float d[3] = {1, 2, 3};
    txc_env_options o = txc_env_default_options();
    o.name = "other";
    txc_env *env = txc_env_new(&o);
    assert_non_null(env);
    txc_tensor *a = f32_tensor(1, (int64_t[]){3}, d); /* default env */
    assert_int_equal(txc_env_enter(env), TXC_OK);
    txc_tensor *b = f32_tensor(1, (int64_t[]){3}, d); /* "other" */
    assert_ptr_equal(txc_tensor_env(b), env);

    /* Two environments: names the op and the fix. */
    txc_tensor *r = txc_add(b, a);
    assert_null(r);
    assert_int_equal(txc_last_status(), TXC_ERR_ENV);
    assert_non_null(strstr(txc_last_error(), "aten::add"));
    assert_non_null(strstr(txc_last_error(), "txc_tensor_to_env"));
    txc_clear_error();

    /* A tensor of a non-active env: names the op and txc_env_enter. */
    r = txc_sum(a, 0, NULL, false);
    assert_null(r);
    assert_int_equal(txc_last_status(), TXC_ERR_ENV);
    assert_non_null(strstr(txc_last_error(), "aten::sum"));
    assert_non_null(strstr(txc_last_error(), "txc_env_enter"));
    txc_clear_error();

    /* Works in the active env; moving the other tensor fixes the call. */
    txc_tensor *a2 = txc_tensor_to_env(a, env);
    r = txc_add(b, a2);
    assert_non_null(r);
    assert_ptr_equal(txc_tensor_env(r), env);
    assert_true(txc_tensor_item(r) == 2.0f);
    txc_tensor_release(r);
    txc_tensor_release(a2);
    txc_tensor_release(b);
    assert_int_equal(txc_env_exit(env), TXC_OK);

    /* Back in the default env: b's env is no longer active. */
    r = txc_exp(a);
    assert_non_null(r);
    txc_tensor_release(r);
    txc_tensor_release(a);
    txc_env_free(env);
}

/* ---- integer wrap-around (values JSON cannot hold) -------------------------------------- */

static void test_int64_wrap(void **state)
{
    (void)state;
    txc_clear_error();
    int64_t big[3] = {INT64_MAX, INT64_MIN, 3037000500LL};
    txc_tensor *a = i64_tensor(1, (int64_t[]){3}, big);
    int64_t out[3];

    txc_tensor *r = txc_add_scalar(a, 1);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    assert_true(out[0] == INT64_MIN && out[1] == INT64_MIN + 1 && out[2] == 3037000501LL);
    txc_tensor_release(r);

    r = txc_mul(a, a);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    assert_true(out[0] == 1 && out[1] == 0 && out[2] == (int64_t)(3037000500ULL * 3037000500ULL));
    txc_tensor_release(r);

    r = txc_neg(a);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    assert_true(out[0] == -INT64_MAX && out[1] == INT64_MIN && out[2] == -3037000500LL);
    txc_tensor_release(r);

    r = txc_abs(a);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    assert_true(out[0] == INT64_MAX && out[1] == INT64_MIN);
    txc_tensor_release(r);

    r = txc_sum(a, 0, NULL, false); /* MAX + MIN + x = x - 1 */
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 1), TXC_OK);
    assert_true(out[0] == 3037000499LL);
    txc_tensor_release(r);

    r = txc_pow_scalar(a, 3);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    uint64_t m = (uint64_t)INT64_MAX;
    assert_true(out[0] == (int64_t)(m * m * m) && out[1] == 0);
    txc_tensor_release(r);

    r = txc_max_all(a);
    assert_true(r && txc_tensor_dtype(r) == TXC_I64);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 1), TXC_OK);
    assert_true(out[0] == INT64_MAX);
    txc_tensor_release(r);

    r = txc_sub(a, a);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    assert_true(out[0] == 0 && out[1] == 0 && out[2] == 0);
    txc_tensor_release(r);
    /* comparisons are exact in int64 (no float rounding) */
    int64_t near[3] = {INT64_MAX - 1, INT64_MIN, 3037000500LL};
    txc_tensor *b = i64_tensor(1, (int64_t[]){3}, near);
    r = txc_eq(a, b);
    assert_int_equal(txc_tensor_copy_to_i64(r, out, 3), TXC_OK);
    assert_true(out[0] == 0 && out[1] == 1 && out[2] == 1);
    txc_tensor_release(r);
    r = txc_argmax(b, 0, false);
    assert_true(txc_tensor_item(r) == 0);
    txc_tensor_release(r);
    txc_tensor_release(b);
    txc_tensor_release(a);
    assert_int_equal(txc_last_status(), TXC_OK);
}

/* ---- long, strided and broadcast inputs against references computed here ---------------- */

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
}

static void test_paths_against_reference(void **state)
{
    (void)state;
    txc_clear_error();
    enum { R = 37, C = 1031 };
    unsigned seed = 7;
    float *x = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C), *bias = malloc(sizeof(float) * C);
    float *col = malloc(sizeof(float) * R), *got = malloc(sizeof(float) * R * C);
    for (int i = 0; i < R * C; i++) {
        x[i] = frand(&seed);
        y[i] = frand(&seed);
    }
    for (int i = 0; i < C; i++)
        bias[i] = frand(&seed);
    for (int i = 0; i < R; i++)
        col[i] = frand(&seed);
    txc_tensor *tx = f32_tensor(2, (int64_t[]){R, C}, x), *ty = f32_tensor(2, (int64_t[]){R, C}, y);
    txc_tensor *tb = f32_tensor(1, (int64_t[]){C}, bias), *tc = f32_tensor(2, (int64_t[]){R, 1}, col);

    /* contiguous same shape */
    txc_tensor *r = txc_mul(tx, ty);
    assert_int_equal(txc_tensor_copy_to_f32(r, got, R * C), TXC_OK);
    for (int i = 0; i < R * C; i++)
        assert_true(got[i] == x[i] * y[i]);
    txc_tensor_release(r);

    /* inner-contiguous broadcasts: row vector and column */
    r = txc_add(tx, tb);
    txc_tensor *r2 = txc_sub(tx, tc);
    float *got2 = malloc(sizeof(float) * R * C);
    assert_int_equal(txc_tensor_copy_to_f32(r, got, R * C), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(r2, got2, R * C), TXC_OK);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            assert_true(got[i * C + j] == x[i * C + j] + bias[j]);
            assert_true(got2[i * C + j] == x[i * C + j] - col[i]);
        }
    txc_tensor_release(r);
    txc_tensor_release(r2);

    /* transposed input (strided), expanded (stride 0) input, bf16 output */
    txc_tensor *xt = txc_transpose(tx, 0, 1); /* (C, R) */
    txc_tensor *tct = txc_transpose(tc, 0, 1); /* (1, R) */
    txc_tensor *ce = txc_expand(tct, 2, (int64_t[]){C, R});
    txc_tensor *xt16 = txc_to_dtype(xt, TXC_BF16);
    r = txc_maximum(xt, ce);
    r2 = txc_mul(xt16, ce); /* bf16 * f32 -> f32 */
    assert_int_equal(txc_tensor_dtype(r2), TXC_F32);
    assert_int_equal(txc_tensor_copy_to_f32(r, got, R * C), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(r2, got2, R * C), TXC_OK);
    for (int j = 0; j < C; j++)
        for (int i = 0; i < R; i++) {
            float xv = x[i * C + j], cv = col[i];
            assert_true(got[j * R + i] == (xv > cv ? xv : cv));
            assert_true(got2[j * R + i] == txc_bf16_to_f32(txc_f32_to_bf16(xv)) * cv);
        }
    txc_tensor_release(r);
    txc_tensor_release(r2);

    /* both operands expanded from one element */
    txc_tensor *one = f32_tensor(1, (int64_t[]){1}, (float[]){3.0f});
    txc_tensor *e1 = txc_expand(one, 1, (int64_t[]){5}), *e2 = txc_expand(one, 2, (int64_t[]){2, 5});
    r = txc_add(e1, e2);
    assert_int_equal(txc_tensor_numel(r), 10);
    assert_int_equal(txc_tensor_copy_to_f32(r, got, 10), TXC_OK);
    for (int i = 0; i < 10; i++)
        assert_true(got[i] == 6.0f);
    txc_tensor_release(r);

    /* a slice with step, unary, chunked bf16 path */
    txc_tensor *sl = txc_slice(tx, 1, 1, C, 3); /* columns 1, 4, 7, ... */
    int64_t sc = txc_tensor_size(sl, 1);
    txc_tensor *sl16 = txc_to_dtype(sl, TXC_BF16);
    r = txc_neg(sl16);
    assert_int_equal(txc_tensor_dtype(r), TXC_BF16);
    assert_int_equal(txc_tensor_copy_to_f32(r, got, R * C), TXC_OK);
    for (int i = 0; i < R; i++)
        for (int64_t j = 0; j < sc; j++)
            assert_true(got[i * sc + j] == -txc_bf16_to_f32(txc_f32_to_bf16(x[i * C + 1 + 3 * j])));
    txc_tensor_release(r);

    /* reductions: rows (horizontal), columns (vertical), transposed, all */
    r = txc_sum(tx, 1, (int[]){1}, false);
    r2 = txc_sum(tx, 1, (int[]){0}, true);
    txc_tensor *r3 = txc_sum(xt, 1, (int[]){0}, false); /* == sum over dim 1 of tx */
    txc_tensor *r4 = txc_mean(tx, 0, NULL, false);
    txc_tensor *r5 = txc_argmax(xt, 0, false);          /* argmax over dim 1 of tx */
    txc_tensor *r6 = txc_max(tx, 0, false);
    assert_int_equal(txc_tensor_ndim(r2), 2);
    assert_int_equal(txc_tensor_size(r2, 0), 1);
    float *rows = malloc(sizeof(float) * R), *rows3 = malloc(sizeof(float) * R), *cols = malloc(sizeof(float) * C);
    float *maxc = malloc(sizeof(float) * C);
    int64_t *am = malloc(sizeof(int64_t) * R);
    assert_int_equal(txc_tensor_copy_to_f32(r, rows, R), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(r2, cols, C), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(r3, rows3, R), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_i64(r5, am, R), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(r6, maxc, C), TXC_OK);
    double total = 0;
    for (int i = 0; i < R; i++) {
        double s = 0;
        int64_t best = 0;
        for (int j = 0; j < C; j++) {
            s += x[i * C + j];
            if (x[i * C + j] > x[i * C + best])
                best = j;
        }
        total += s;
        assert_true(fabs(rows[i] - s) <= 1e-5 * fabs(s) + 1e-4);
        assert_true(rows3[i] == rows[i]);
        assert_int_equal(am[i], best);
    }
    for (int j = 0; j < C; j++) {
        double s = 0;
        float mx = -INFINITY;
        for (int i = 0; i < R; i++) {
            s += x[i * C + j];
            mx = x[i * C + j] > mx ? x[i * C + j] : mx;
        }
        assert_true(fabs(cols[j] - s) <= 1e-5 * fabs(s) + 1e-5);
        assert_true(maxc[j] == mx);
    }
    double mean = total / (R * C);
    assert_true(fabs(txc_tensor_item(r4) - mean) <= 1e-5 * fabs(mean) + 1e-6);
    txc_tensor_release(r);
    txc_tensor_release(r2);
    txc_tensor_release(r3);
    txc_tensor_release(r4);
    txc_tensor_release(r5);
    txc_tensor_release(r6);

    /* softmax over a long last dim and over dim 0 (strided rows) */
    r = txc_softmax(tx, -1);
    r2 = txc_log_softmax(tx, 0);
    assert_int_equal(txc_tensor_copy_to_f32(r, got, R * C), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(r2, got2, R * C), TXC_OK);
    for (int i = 0; i < R; i++) {
        double s = 0;
        for (int j = 0; j < C; j++)
            s += got[i * C + j];
        assert_true(fabs(s - 1.0) < 1e-4);
    }
    for (int j = 0; j < C; j += 97) {
        double mx = -INFINITY, s = 0;
        for (int i = 0; i < R; i++)
            mx = x[i * C + j] > mx ? x[i * C + j] : mx;
        for (int i = 0; i < R; i++)
            s += exp(x[i * C + j] - mx);
        for (int i = 0; i < R; i++) {
            double want = x[i * C + j] - mx - log(s);
            assert_true(fabs(got2[i * C + j] - want) <= 1e-5 * fabs(want) + 1e-5);
        }
    }
    txc_tensor_release(r);
    txc_tensor_release(r2);

    txc_tensor_release(sl16);
    txc_tensor_release(sl);
    txc_tensor_release(e1);
    txc_tensor_release(e2);
    txc_tensor_release(one);
    txc_tensor_release(xt16);
    txc_tensor_release(ce);
    txc_tensor_release(tct);
    txc_tensor_release(xt);
    txc_tensor_release(tx);
    txc_tensor_release(ty);
    txc_tensor_release(tb);
    txc_tensor_release(tc);
    free(x), free(y), free(bias), free(col), free(got), free(got2);
    free(rows), free(rows3), free(cols), free(maxc), free(am);
    assert_int_equal(txc_last_status(), TXC_OK);
}

/* Ops inside a scope: temporaries go at the scope's end. */
static void test_scope_chain(void **state)
{
    (void)state;
    txc_clear_error();
    txc_env *env = txc_env_active();
    float d[4] = {-1, 0, 1, 2};
    txc_tensor *x = f32_tensor(1, (int64_t[]){4}, d);
    int mark = txc_env_scope_begin(env);
    txc_tensor *y = txc_sum(txc_mul(txc_silu(x), txc_sigmoid(x)), 0, NULL, false);
    assert_non_null(y);
    txc_tensor_retain(y);
    txc_env_scope_end(env, mark);
    double want = 0;
    for (int i = 0; i < 4; i++) {
        double s = 1 / (1 + exp(-d[i]));
        want += d[i] * s * s;
    }
    assert_true(fabs(txc_tensor_item(y) - want) < 1e-5);
    txc_tensor_release(y);
    txc_tensor_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_shape_and_dim_errors),
        cmocka_unit_test(test_env_errors),
        cmocka_unit_test(test_int64_wrap),
        cmocka_unit_test(test_paths_against_reference),
        cmocka_unit_test(test_scope_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
