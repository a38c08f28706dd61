/* safetensors reader: the real stories260K weights, tiny files written
 * here (F32/F16/BF16/I64/BOOL, scalar, empty, 2 shards), and every kind of
 * corrupt file. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/array.h"
#include "txc/safetensors.h"

/* ---- a tiny safetensors writer ------------------------------------------ */

/* Write 8-byte length + header (padded with spaces to a multiple of 8 when
 * pad) + data. */
static void write_st_raw(const char *path, const char *header, bool pad, const void *data, size_t n)
{
    size_t hl = strlen(header);
    size_t padded = pad ? (hl + 7) / 8 * 8 : hl;
    size_t total = 8 + padded + n;
    unsigned char *buf = malloc(total);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    if (n)
        memcpy(buf + 8 + padded, data, n);
    assert_int_equal(tu_write_file(path, buf, total), 0);
    free(buf);
}

/* A file with an explicit (possibly lying) header length. */
static void write_st_len(const char *path, uint64_t hlen, const char *bytes, size_t n)
{
    unsigned char *buf = malloc(8 + n);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, bytes, n);
    assert_int_equal(tu_write_file(path, buf, 8 + n), 0);
    free(buf);
}

static const char *model_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

static void expect_fail(const char *path, txc_status want, const char *substr)
{
    txc_clear_error();
    txc_safetensors *st = (txc_safetensors *)0x1;
    txc_status s = txc_safetensors_open(path, &st);
    if (s != want || !strstr(txc_last_error(), substr))
        print_error("open(%s): got %s \"%s\", want %s containing \"%s\"\n", path, txc_status_name(s),
                    txc_last_error(), txc_status_name(want), substr);
    assert_int_equal(s, want);
    assert_null(st);
    assert_int_equal(txc_last_status(), want);
    assert_non_null(strstr(txc_last_error(), substr));
}

/* Write `header` + `n` zero bytes as DIR/model.safetensors, expect failure. */
static void expect_header_fail(const char *header, size_t n, txc_status want, const char *substr)
{
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *p = tu_path("%s/model.safetensors", dir);
    void *zeros = calloc(1, n ? n : 1);
    write_st_raw(p, header, true, zeros, n);
    free(zeros);
    expect_fail(dir, want, substr);
    expect_fail(p, want, substr);
    tu_rm_rf(dir);
}

/* ---- the real model ------------------------------------------------------ */

static void test_real_model(void **state)
{
    (void)state;
    txc_clear_error();
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(model_dir(), &st), TXC_OK);
    assert_non_null(st);
    assert_int_equal(txc_safetensors_count(st), 47);
    assert_int_equal(txc_safetensors_shard_count(st), 1);
    assert_string_equal(txc_safetensors_metadata(st, "format"), "pt");
    assert_null(txc_safetensors_metadata(st, "nope"));

    /* sorted by name */
    for (int i = 1; i < txc_safetensors_count(st); i++)
        assert_true(strcmp(txc_safetensors_at(st, i - 1)->name, txc_safetensors_at(st, i)->name) < 0);
    assert_null(txc_safetensors_at(st, -1));
    assert_null(txc_safetensors_at(st, 47));

    const txc_st_tensor *e = txc_safetensors_find(st, "model.embed_tokens.weight");
    assert_non_null(e);
    assert_int_equal(e->dtype, TXC_F32);
    assert_int_equal(e->ndim, 2);
    assert_int_equal(e->shape[0], 512);
    assert_int_equal(e->shape[1], 64);
    assert_int_equal(e->nbytes, 512 * 64 * 4);
    assert_int_equal(e->shard, 0);
    /* zero copy: the data lies inside the file's mapping */
    const char *base = txc_storage_data(e->storage);
    size_t size = txc_storage_size(e->storage);
    assert_int_equal(txc_storage_get_kind(e->storage), TXC_STORAGE_MMAP);
    assert_int_equal(size, 1044992);
    assert_ptr_equal(e->data, base + e->byte_offset);
    assert_true((const char *)e->data >= base && e->byte_offset + e->nbytes <= size);
    assert_int_equal(e->byte_offset % 4, 0);
    const float *f = e->data;
    bool nonzero = false;
    for (int i = 0; i < 512 * 64; i++) {
        assert_true(isfinite(f[i]));
        nonzero |= f[i] != 0;
    }
    assert_true(nonzero);

    const txc_st_tensor *g = txc_safetensors_find(st, "model.layers.0.mlp.gate_proj.weight");
    assert_non_null(g);
    assert_int_equal(g->ndim, 2);
    assert_int_equal(g->shape[0], 172);
    assert_int_equal(g->shape[1], 64);
    assert_ptr_equal(g->storage, e->storage);
    const txc_st_tensor *n = txc_safetensors_find(st, "model.norm.weight");
    assert_non_null(n);
    assert_int_equal(n->ndim, 1);
    assert_int_equal(n->shape[0], 64);

    /* absent: NULL, no error */
    assert_null(txc_safetensors_find(st, "lm_head.weight"));
    assert_null(txc_safetensors_find(st, ""));
    assert_int_equal(txc_last_status(), TXC_OK);

    /* an array over the storage outlives the table */
    txc_array *a = txc_array_from_storage(g->storage, g->byte_offset, g->dtype, g->ndim, g->shape);
    assert_non_null(a);
    float first = ((const float *)g->data)[0];
    txc_safetensors_close(st);
    assert_true(((const float *)txc_array_data(a))[0] == first);
    txc_array_release(a);

    /* the file path itself works too */
    st = NULL;
    assert_int_equal(txc_safetensors_open(tu_path("%s/model.safetensors", model_dir()), &st), TXC_OK);
    assert_int_equal(txc_safetensors_count(st), 47);
    txc_safetensors_close(st);
    txc_safetensors_close(NULL);
}

/* ---- tiny files written here --------------------------------------------- */

static void test_tiny_dtypes(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    /* data: a F32 [2,3] @0..24, b F16 [3] @24..30, c BF16 [2] @32..36,
     * d I64 [] (scalar) @40..48, e BOOL [2,1] @48..50, z F32 [0,4] @50..50 */
    unsigned char data[56];
    memset(data, 0, sizeof data);
    float fa[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
    memcpy(data, fa, sizeof fa);
    uint16_t hb[3] = {txc_f32_to_f16(1.5f), txc_f32_to_f16(-0.25f), txc_f32_to_f16(65504.f)};
    memcpy(data + 24, hb, sizeof hb);
    uint16_t hc[2] = {txc_f32_to_bf16(3.0f), txc_f32_to_bf16(-1e10f)};
    memcpy(data + 32, hc, sizeof hc);
    int64_t d = -1234567890123LL;
    memcpy(data + 40, &d, 8);
    data[48] = 1;
    data[49] = 0;
    const char *hdr =
        "{\"__metadata__\":{\"format\":\"pt\",\"who\":\"txc test\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[24,30]},"
        "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[32,36]},"
        "\"d\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[40,48]},"
        "\"e\":{\"dtype\":\"BOOL\",\"shape\":[2,1],\"data_offsets\":[48,50]},"
        "\"z\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[50,50]}}";
    const char *p = tu_path("%s/weights.safetensors", dir);
    write_st_raw(p, hdr, true, data, sizeof data);

    txc_clear_error();
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(p, &st), TXC_OK);
    assert_int_equal(txc_safetensors_count(st), 6);
    assert_string_equal(txc_safetensors_metadata(st, "who"), "txc test");
    const txc_st_tensor *t = txc_safetensors_find(st, "a");
    assert_int_equal(t->dtype, TXC_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_true(memcmp(t->data, fa, sizeof fa) == 0);
    t = txc_safetensors_find(st, "b");
    assert_int_equal(t->dtype, TXC_F16);
    assert_true(txc_dtype_load(TXC_F16, t->data, 0) == 1.5);
    assert_true(txc_dtype_load(TXC_F16, t->data, 1) == -0.25);
    assert_true(txc_dtype_load(TXC_F16, t->data, 2) == 65504.0);
    t = txc_safetensors_find(st, "c");
    assert_int_equal(t->dtype, TXC_BF16);
    assert_true(txc_dtype_load(TXC_BF16, t->data, 0) == 3.0);
    assert_true(txc_dtype_load(TXC_BF16, t->data, 1) < -9.9e9);
    t = txc_safetensors_find(st, "d");
    assert_int_equal(t->dtype, TXC_I64);
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->nbytes, 8);
    assert_true(*(const int64_t *)t->data == -1234567890123LL);
    t = txc_safetensors_find(st, "e");
    assert_int_equal(t->dtype, TXC_BOOL);
    assert_int_equal(((const unsigned char *)t->data)[0], 1);
    assert_int_equal(((const unsigned char *)t->data)[1], 0);
    t = txc_safetensors_find(st, "z");
    assert_int_equal(t->nbytes, 0);
    assert_int_equal(t->shape[0], 0);
    assert_int_equal(t->shape[1], 4);
    txc_safetensors_close(st);

    /* a .safetensors that is not called model.safetensors: a directory
     * without one is an IO error naming the directory */
    expect_fail(dir, TXC_ERR_IO, "no model.safetensors or model.safetensors.index.json in");
    tu_rm_rf(dir);
}

/* Two shards + index. */
static void write_sharded(const char *dir, const char *index_json)
{
    float w1[4] = {1, 2, 3, 4}, w2[2] = {5, 6};
    write_st_raw(tu_path("%s/model-00001-of-00002.safetensors", dir),
                 "{\"__metadata__\":{\"format\":\"pt\"},"
                 "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
                 true, w1, sizeof w1);
    write_st_raw(tu_path("%s/model-00002-of-00002.safetensors", dir),
                 "{\"__metadata__\":{\"format\":\"second\"},"
                 "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                 true, w2, sizeof w2);
    const char *idx = index_json ? index_json
                                 : "{\"metadata\":{\"total_size\":24},\"weight_map\":{"
                                   "\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
                                   "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\"}}";
    assert_int_equal(tu_write_file(tu_path("%s/model.safetensors.index.json", dir), idx, strlen(idx)), 0);
}

static void test_sharded(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    write_sharded(dir, NULL);
    const char *paths[2] = {dir, tu_path("%s/model.safetensors.index.json", dir)};
    for (int k = 0; k < 2; k++) {
        txc_clear_error();
        txc_safetensors *st = NULL;
        assert_int_equal(txc_safetensors_open(paths[k], &st), TXC_OK);
        assert_int_equal(txc_safetensors_count(st), 2);
        assert_int_equal(txc_safetensors_shard_count(st), 2);
        assert_non_null(strstr(txc_safetensors_shard_path(st, 1), "model-00002-of-00002"));
        assert_null(txc_safetensors_shard_path(st, 2));
        assert_string_equal(txc_safetensors_metadata(st, "format"), "pt"); /* first shard */
        const txc_st_tensor *a = txc_safetensors_find(st, "model.embed_tokens.weight");
        const txc_st_tensor *b = txc_safetensors_find(st, "model.norm.weight");
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(a->shard, 0);
        assert_int_equal(b->shard, 1);
        assert_ptr_not_equal(a->storage, b->storage);
        assert_true(((const float *)a->data)[3] == 4.0f);
        assert_true(((const float *)b->data)[1] == 6.0f);
        assert_string_equal(txc_safetensors_at(st, 0)->name, "model.embed_tokens.weight");
        txc_safetensors_close(st);
    }
    /* with both, model.safetensors wins (transformers' order) */
    float w[1] = {9};
    write_st_raw(tu_path("%s/model.safetensors", dir),
                 "{\"only\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", true, w, 4);
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(dir, &st), TXC_OK);
    assert_int_equal(txc_safetensors_count(st), 1);
    assert_non_null(txc_safetensors_find(st, "only"));
    txc_safetensors_close(st);
    tu_rm_rf(dir);
}

static void test_sharded_errors(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    char idx[512];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);

    /* missing shard */
    write_sharded(dir, "{\"weight_map\":{\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
                       "\"lm_head.weight\":\"model-00003-of-00003.safetensors\"}}");
    expect_fail(dir, TXC_ERR_IO, "model-00003-of-00003.safetensors");
    expect_fail(dir, TXC_ERR_IO, "lm_head.weight");

    /* a weight_map entry whose file does not hold the tensor */
    write_sharded(dir, "{\"weight_map\":{\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
                       "\"lm_head.weight\":\"model-00001-of-00002.safetensors\"}}");
    expect_fail(dir, TXC_ERR_FORMAT, "'lm_head.weight'");
    /* ... or names the wrong shard */
    write_sharded(dir, "{\"weight_map\":{\"model.norm.weight\":\"model-00001-of-00002.safetensors\","
                       "\"model.embed_tokens.weight\":\"model-00002-of-00002.safetensors\"}}");
    expect_fail(idx, TXC_ERR_FORMAT, "but it is in");

    /* the same tensor in two shards */
    write_sharded(dir, NULL);
    float w[4] = {0, 0, 0, 0};
    write_st_raw(tu_path("%s/model-00002-of-00002.safetensors", dir),
                 "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                 true, w, sizeof w);
    expect_fail(dir, TXC_ERR_FORMAT, "two shards");

    /* a corrupt shard is reported with its own name */
    write_sharded(dir, NULL);
    write_st_len(tu_path("%s/model-00002-of-00002.safetensors", dir), 500, "{}", 2);
    expect_fail(dir, TXC_ERR_FORMAT, "model-00002-of-00002.safetensors: header length 500");

    /* bad index files */
    write_sharded(dir, "{\"weight_map\": [1, 2]}");
    expect_fail(dir, TXC_ERR_FORMAT, "weight_map");
    write_sharded(dir, "{\"metadata\": {}}");
    expect_fail(dir, TXC_ERR_FORMAT, "\"weight_map\" is missing");
    write_sharded(dir, "{\"weight_map\": {}}");
    expect_fail(dir, TXC_ERR_FORMAT, "empty");
    write_sharded(dir, "{\"weight_map\": {\"a\": 3}}");
    expect_fail(dir, TXC_ERR_FORMAT, "'a'");
    write_sharded(dir, "{\"weight_map\": {\"a\": \"../model-00001-of-00002.safetensors\"}}");
    expect_fail(dir, TXC_ERR_FORMAT, "outside");
    write_sharded(dir, "{\"weight_map\": {\"a\": \"/etc/passwd\"}}");
    expect_fail(dir, TXC_ERR_FORMAT, "outside");
    write_sharded(dir, "{\"weight_map\": {");
    expect_fail(dir, TXC_ERR_FORMAT, "not valid JSON");
    write_sharded(dir, "[1]");
    expect_fail(idx, TXC_ERR_FORMAT, "expected a JSON object");
    /* a missing index file named directly */
    expect_fail(tu_path("%s/nope.index.json", dir), TXC_ERR_IO, "nope.index.json");
    tu_rm_rf(dir);
}

/* ---- corrupt files ------------------------------------------------------- */

static void test_missing(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    expect_fail(dir, TXC_ERR_IO, "no model.safetensors or model.safetensors.index.json in");
    expect_fail(tu_path("%s/absent.safetensors", dir), TXC_ERR_IO, "absent.safetensors");
    expect_fail(tu_path("%s/no/such/dir", dir), TXC_ERR_IO, "no/such/dir");
    txc_clear_error();
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(NULL, &st), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_safetensors_open(dir, NULL), TXC_ERR_INVALID);
    txc_clear_error();
    tu_rm_rf(dir);
}

static void test_truncated(void **state)
{
    (void)state;
    size_t len = 0;
    char *real = tu_read_file(tu_path("%s/model.safetensors", model_dir()), &len);
    assert_non_null(real);
    assert_int_equal(len, 1044992);
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *p = tu_path("%s/model.safetensors", dir);

    /* cut in the middle of the data */
    assert_int_equal(tu_write_file(p, real, len / 2), 0);
    expect_fail(p, TXC_ERR_FORMAT, "extends past the end of the data section");
    /* one byte short */
    assert_int_equal(tu_write_file(p, real, len - 1), 0);
    expect_fail(dir, TXC_ERR_FORMAT, "extends past the end of the data section");
    /* cut inside the header (4856 bytes) */
    assert_int_equal(tu_write_file(p, real, 2000), 0);
    expect_fail(p, TXC_ERR_FORMAT, "header length 4856 extends past the end of the file (2000 bytes)");
    /* shorter than the length field */
    assert_int_equal(tu_write_file(p, real, 5), 0);
    expect_fail(p, TXC_ERR_FORMAT, "shorter than the 8-byte header length");
    assert_int_equal(tu_write_file(p, real, 0), 0);
    expect_fail(p, TXC_ERR_FORMAT, "is 0 bytes");
    /* the whole file still opens */
    assert_int_equal(tu_write_file(p, real, len), 0);
    txc_clear_error();
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(p, &st), TXC_OK);
    txc_safetensors_close(st);
    free(real);
    tu_rm_rf(dir);
}

static void test_bad_header_length(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *p = tu_path("%s/model.safetensors", dir);
    write_st_len(p, 1000, "{}        ", 10);
    expect_fail(p, TXC_ERR_FORMAT, "header length 1000 extends past the end of the file (18 bytes)");
    write_st_len(p, (uint64_t)1 << 40, "{}        ", 10);
    expect_fail(p, TXC_ERR_FORMAT, "above the limit of 100000000 bytes");
    write_st_len(p, UINT64_MAX, "{}", 2);
    expect_fail(p, TXC_ERR_FORMAT, "above the limit");
    write_st_len(p, 0, "", 0);
    expect_fail(p, TXC_ERR_FORMAT, "not valid JSON");
    /* an empty header object is a valid file with no tensors */
    write_st_raw(p, "{}", true, NULL, 0);
    txc_clear_error();
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(p, &st), TXC_OK);
    assert_int_equal(txc_safetensors_count(st), 0);
    assert_null(txc_safetensors_find(st, "x"));
    assert_null(txc_safetensors_metadata(st, "format"));
    txc_safetensors_close(st);
    tu_rm_rf(dir);
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_header_fail("this is not json", 0, TXC_ERR_FORMAT, "header is not valid JSON");
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",", 0, TXC_ERR_FORMAT, "header is not valid JSON");
    expect_header_fail("[1,2,3]", 0, TXC_ERR_FORMAT, "header is an array, expected a JSON object");
    expect_header_fail("{} trailing", 0, TXC_ERR_FORMAT, "bytes after the JSON object");
    expect_header_fail("{\"a\": 5}", 0, TXC_ERR_FORMAT, "tensor 'a' is a number, expected an object");
    expect_header_fail("{\"__metadata__\": {\"format\": 3}}", 0, TXC_ERR_FORMAT,
                       "\"__metadata__\" entry 'format' is a number");
    expect_header_fail("{\"__metadata__\": [1]}", 0, TXC_ERR_FORMAT, "\"__metadata__\" is an array");
}

static void test_bad_dtype(void **state)
{
    (void)state;
    expect_header_fail("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
                       TXC_ERR_UNSUPPORTED, "tensor 'w' has dtype F64");
    expect_header_fail("{\"w\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 8,
                       TXC_ERR_UNSUPPORTED, "tensor 'w' has dtype I8");
    expect_header_fail("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 8,
                       TXC_ERR_UNSUPPORTED, "tensor 'w' has dtype F8_E4M3");
    expect_header_fail("{\"w\":{\"dtype\":\"float32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
                       TXC_ERR_FORMAT, "tensor 'w' has unknown dtype \"float32\"");
    expect_header_fail("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 8, TXC_ERR_FORMAT,
                       "tensor 'w' field \"dtype\" is missing");
    expect_header_fail("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 8, TXC_ERR_FORMAT,
                       "tensor 'w' field \"dtype\" is a number");
}

static void test_bad_shape(void **state)
{
    (void)state;
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", 16,
                       TXC_ERR_FORMAT, "tensor 'w' data [0, 16) holds 16 bytes but shape [2, 3] of F32 needs 24 bytes");
    expect_header_fail("{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16,
                       TXC_ERR_FORMAT, "needs 8 bytes");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 8,
                       TXC_ERR_FORMAT, "tensor 'w' shape[0] is not a non-negative integer");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 8,
                       TXC_ERR_FORMAT, "shape[0]");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,8]}}", 8,
                       TXC_ERR_FORMAT, "shape[1]");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16,
                       TXC_ERR_FORMAT, "field \"shape\" is a number");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 8,
                       TXC_ERR_UNSUPPORTED, "9 dims");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                       "\"data_offsets\":[0,4]}}",
                       8, TXC_ERR_FORMAT, "shape overflows");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],"
                       "\"data_offsets\":[0,4]}}",
                       8, TXC_ERR_FORMAT, "needs more than");
}

static void test_bad_offsets(void **state)
{
    (void)state;
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                       TXC_ERR_FORMAT,
                       "tensor 'w' data [0, 8) extends past the end of the data section (4 bytes)");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8,
                       TXC_ERR_FORMAT, "begin > end");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                       TXC_ERR_FORMAT, "field \"data_offsets\" is not [begin, end]");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
                       TXC_ERR_FORMAT, "data_offsets");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 8, TXC_ERR_FORMAT, "data_offsets");
    expect_header_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 8,
                       TXC_ERR_FORMAT, "data_offsets");
    /* overlap */
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                       24, TXC_ERR_FORMAT, "tensors 'a' [0, 16) and 'b' [8, 24) overlap");
    expect_header_fail("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                       24, TXC_ERR_FORMAT, "overlap");
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                       8, TXC_ERR_FORMAT, "overlap");
    /* duplicate name */
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                       8, TXC_ERR_FORMAT, "tensor 'a' appears twice");

    /* misaligned: an unpadded header of 61 bytes puts F32 data at offset 69 */
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *p = tu_path("%s/model.safetensors", dir);
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    char padded[128];
    snprintf(padded, sizeof padded, "%s%*s", hdr, (int)(61 - strlen(hdr)), "");
    assert_int_equal(strlen(padded), 61);
    float one = 1;
    write_st_raw(p, padded, false, &one, 4);
    {   /* accepted (the format does not require alignment) and marked */
        txc_safetensors *ust = NULL;
        txc_clear_error();
        assert_int_equal(txc_safetensors_open(p, &ust), TXC_OK);
        const txc_st_tensor *w = txc_safetensors_find(ust, "w");
        assert_non_null(w);
        assert_false(w->aligned);
        assert_int_equal(w->byte_offset, 69);
        float v;
        memcpy(&v, w->data, 4);
        assert_true(v == 1.0f);
        txc_safetensors_close(ust);
    }
    /* but U8-like BOOL data at an odd offset is fine */
    snprintf(padded, sizeof padded, "%s", "{\"w\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}");
    write_st_raw(p, padded, false, "\1", 1);
    txc_clear_error();
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(p, &st), TXC_OK);
    assert_int_equal(*(const unsigned char *)txc_safetensors_find(st, "w")->data, 1);
    txc_safetensors_close(st);
    tu_rm_rf(dir);
}

/* The real header with one edit: every corruption applied to real data. */
static void test_real_header_edits(void **state)
{
    (void)state;
    size_t len = 0;
    char *real = tu_read_file(tu_path("%s/model.safetensors", model_dir()), &len);
    assert_non_null(real);
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *p = tu_path("%s/model.safetensors", dir);

    /* same-length substitutions inside the header keep the file layout */
    struct {
        const char *from, *to;
        txc_status want;
        const char *substr;
    } edits[] = {
        {"\"data_offsets\":[0,131072]", "\"data_offsets\":[0,131076]", TXC_ERR_FORMAT,
         "tensor 'model.embed_tokens.weight' data [0, 131076) holds 131076 bytes"},
        {"\"shape\":[512,64]", "\"shape\":[512,65]", TXC_ERR_FORMAT, "model.embed_tokens.weight"},
        {"\"dtype\":\"F32\"", "\"dtype\":\"F64\"", TXC_ERR_UNSUPPORTED, "has dtype F64"},
        {"{\"dtype\"", "[\"dtype\"", TXC_ERR_FORMAT, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char *copy = malloc(len);
        assert_non_null(copy);
        memcpy(copy, real, len);
        /* search only inside the header */
        char save = copy[8 + 4856];
        copy[8 + 4856] = '\0';
        char *at = strstr(copy + 8, edits[i].from);
        copy[8 + 4856] = save;
        if (!at)
            print_error("edit %zu: '%s' not in the header\n", i, edits[i].from);
        assert_non_null(at);
        assert_int_equal(strlen(edits[i].from), strlen(edits[i].to));
        memcpy(at, edits[i].to, strlen(edits[i].to));
        assert_int_equal(tu_write_file(p, copy, len), 0);
        expect_fail(p, edits[i].want, edits[i].substr);
        free(copy);
    }
    free(real);
    tu_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_model),
        cmocka_unit_test(test_tiny_dtypes),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_sharded_errors),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_header_length),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_dtype),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_real_header_edits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
