/*
 * txc/shard.h: meshes, NamedSharding, device_put / gather, the collectives,
 * and tensor-parallel models against the same model unsharded.
 *
 * Run alone (ctest) the job is one process (tp 1); tests/cli_tp.sh runs it
 * under `mpirun -np 2` and `-np 4`, where every rank checks its own shards
 * and results: collectives against their closed form summed in rank order
 * (bit for bit), and for stories260K and every architecture fixture
 * (tests/fixtures/arch) greedy tokens equal to the unsharded model's (one
 * full copy loaded in every rank), eager and compiled, and the prompt's
 * logits within 1e-5 of the row's largest magnitude.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/generate.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/shard.h"

static int N, R; /* processes, this rank */
static txc_mesh *mesh;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(txc_distributed_init(), TXC_OK);
    N = txc_process_count();
    R = txc_process_index();
    int64_t shape = N;
    const char *axis[] = {"tp"};
    mesh = txc_mesh_new(NULL, 1, &shape, axis);
    assert_non_null(mesh);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    txc_mesh_free(mesh);
    return 0;
}

static void test_mesh_errors(void **state)
{
    (void)state;
    int64_t shape = N + 1;
    const char *axis[] = {"tp"};
    txc_clear_error();
    assert_null(txc_mesh_new(NULL, 1, &shape, axis));
    assert_non_null(strstr(txc_last_error(), "devices"));
    int64_t s2[2] = {N, 1};
    const char *dup[] = {"tp", "tp"};
    txc_clear_error();
    assert_null(txc_mesh_new(NULL, 2, s2, dup));
    assert_non_null(strstr(txc_last_error(), "used twice"));
    int bad[1] = {N};
    shape = N;
    if (N == 1) {
        txc_clear_error();
        assert_null(txc_mesh_new(bad, 1, &shape, axis));
        assert_non_null(strstr(txc_last_error(), "not a device"));
    }
    txc_clear_error();
    assert_null(txc_named_sharding(mesh, TXC_P("dp", NULL)));
    assert_non_null(strstr(txc_last_error(), "no axis 'dp'"));
    assert_int_equal(txc_mesh_axis_size(mesh, "tp"), N);
    assert_int_equal(txc_mesh_axis_index(mesh, "tp"), R);
    assert_int_equal(txc_mesh_axis_size(mesh, "dp"), 0);
}

static void test_device_put_gather(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    float data[8 * 6];
    for (int i = 0; i < 8 * 6; i++)
        data[i] = (float)i * 0.5f - 3.0f;
    txc_tensor *x = txc_tensor_from_data(env, TXC_F32, 2, (int64_t[]){8, 6}, data);
    const txc_sharding *rows = txc_named_sharding(mesh, TXC_P("tp", NULL));
    const txc_sharding *rep = txc_named_sharding(mesh, TXC_P_REPLICATED);
    assert_non_null(rows);
    assert_non_null(rep);
    char buf[160];
    txc_sharding_str(rows, buf, sizeof buf);
    char want[160];
    snprintf(want, sizeof want, "NamedSharding(mesh=Mesh('tp': %d), spec=P('tp', None))", N);
    assert_string_equal(buf, want);
    if (8 % N == 0) {
        txc_tensor *s = txc_device_put(x, rows);
        assert_non_null(s);
        assert_ptr_equal(txc_tensor_sharding(s), rows);
        assert_null(txc_tensor_sharding(x));
        assert_int_equal(txc_tensor_size(s, 0), 8 / N);
        assert_int_equal(txc_tensor_num_addressable_shards(s), 1);
        int64_t start[2], global[2];
        assert_int_equal(txc_tensor_shard_index(s, 0, start, global), TXC_OK);
        assert_int_equal(start[0], R * (8 / N));
        assert_int_equal(global[0], 8);
        assert_int_equal(global[1], 6);
        const float *p = txc_tensor_data_ptr(s);
        for (int i = 0; i < (8 / N) * 6; i++)
            assert_true(p[i] == data[R * (8 / N) * 6 + i]);
        txc_tensor *g = txc_gather(s);
        assert_non_null(g);
        assert_null(txc_tensor_sharding(g));
        assert_memory_equal(txc_tensor_data_ptr(g), data, sizeof data);
    }
    if (N > 1) { /* 6 columns over 4 ranks */
        const txc_sharding *cols = txc_named_sharding(mesh, TXC_P(NULL, "tp"));
        if (6 % N) {
            txc_clear_error();
            assert_null(txc_device_put(x, cols));
            assert_non_null(strstr(txc_last_error(), "does not divide"));
        }
    }
    txc_tensor *r = txc_device_put(x, rep);
    assert_non_null(r);
    assert_memory_equal(txc_tensor_data_ptr(r), data, sizeof data);
    txc_env_scope_end(env, mark);
}

/* Rank r's value at i, and the sum over ranks in rank order. */
static float part(int r, int i) { return 1.0f / (float)(3 + r) + (float)i * 0.1f * (float)(r + 1); }
static float sum_parts(int i)
{
    float s = part(0, i);
    for (int r = 1; r < N; r++)
        s += part(r, i);
    return s;
}

static void test_collectives(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    enum { ROWS = 4, COLS = 8 };
    float mine[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        mine[i] = part(R, i);
    txc_tensor *x = txc_tensor_from_data(env, TXC_F32, 2, (int64_t[]){ROWS, COLS}, mine);
    /* all_reduce: the rank-order sum, bit for bit, on every rank */
    txc_tensor *ar = txc_all_reduce(x, mesh, "tp");
    assert_non_null(ar);
    const float *a = txc_tensor_data_ptr(ar);
    for (int i = 0; i < ROWS * COLS; i++)
        assert_true(a[i] == sum_parts(i));
    /* a strided input (a transposed view) */
    txc_tensor *art = txc_all_reduce(txc_transpose(x, 0, 1), mesh, "tp");
    assert_non_null(art);
    const float *at = txc_tensor_data_ptr(art);
    for (int c = 0; c < COLS; c++)
        for (int r = 0; r < ROWS; r++)
            assert_true(at[c * ROWS + r] == sum_parts(r * COLS + c));
    /* all_gather along dim 1: (ROWS, COLS * N) */
    txc_tensor *ag = txc_all_gather(x, mesh, "tp", 1);
    assert_non_null(ag);
    assert_int_equal(txc_tensor_size(ag, 1), COLS * N);
    const float *g = txc_tensor_data_ptr(ag);
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < N; k++)
            for (int c = 0; c < COLS; c++)
                assert_true(g[(r * N + k) * COLS + c] == part(k, r * COLS + c));
    /* reduce_scatter along dim 0 (ROWS divides by N = 1, 2, 4) */
    if (ROWS % N == 0) {
        txc_tensor *rs = txc_reduce_scatter(x, mesh, "tp", 0);
        assert_non_null(rs);
        assert_int_equal(txc_tensor_size(rs, 0), ROWS / N);
        const float *q = txc_tensor_data_ptr(rs);
        for (int i = 0; i < (ROWS / N) * COLS; i++)
            assert_true(q[i] == sum_parts(R * (ROWS / N) * COLS + i));
    }
    /* broadcast from the last rank */
    txc_tensor *bc = txc_broadcast(x, mesh, "tp", N - 1);
    assert_non_null(bc);
    const float *b = txc_tensor_data_ptr(bc);
    for (int i = 0; i < ROWS * COLS; i++)
        assert_true(b[i] == part(N - 1, i));
    /* errors: an axis the mesh lacks, an int tensor summed, a bad root */
    txc_clear_error();
    assert_null(txc_all_reduce(x, mesh, "dp"));
    assert_non_null(strstr(txc_last_error(), "no axis 'dp'"));
    txc_tensor *ids = txc_arange(env, 0, 4, 1, TXC_I64);
    txc_clear_error();
    assert_null(txc_all_reduce(ids, mesh, "tp"));
    assert_non_null(strstr(txc_last_error(), "float32"));
    txc_clear_error();
    assert_null(txc_broadcast(x, mesh, "tp", N));
    assert_non_null(strstr(txc_last_error(), "root"));
    /* vocab-parallel embedding: rows [off, off + 2) of a 2 x 3 table */
    float tab[6] = {1, 2, 3, 4, 5, 6};
    txc_tensor *w = txc_tensor_from_data(env, TXC_F32, 2, (int64_t[]){2, 3}, tab);
    int64_t idv[3] = {5, 6, 1};
    txc_tensor *tid = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){3}, idv);
    txc_tensor *e = txc_vocab_parallel_embedding(w, tid, 5);
    assert_non_null(e);
    const float *ep = txc_tensor_data_ptr(e);
    float want[9] = {1, 2, 3, 4, 5, 6, 0, 0, 0};
    assert_memory_equal(ep, want, sizeof want);
    txc_env_scope_end(env, mark);
}

/* ---- tensor-parallel models -------------------------------------------------------- */

typedef struct model_case {
    const char *name;
    const char *dir;
} model_case;

static void compare_logits(const char *name, txc_model *full, txc_model *tp, const int32_t *ids, int64_t n)
{
    txc_env *env = txc_model_env(full);
    int mark = txc_env_scope_begin(env);
    int64_t *ids64 = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        ids64[i] = ids[i];
    txc_tensor *in = txc_tensor_from_data(env, TXC_I64, 2, (int64_t[]){1, n}, ids64);
    txc_tensor *pos = txc_arange(env, 0, (double)n, 1, TXC_I64);
    txc_tensor *a = txc_contiguous(txc_model_forward(full, in, NULL, NULL, pos, 0));
    txc_tensor *b = txc_contiguous(txc_model_forward(tp, in, NULL, NULL, pos, 0));
    if (!a || !b)
        fail_msg("%s: forward: %s", name, txc_last_error());
    int64_t V = txc_tensor_size(a, 2);
    assert_int_equal(txc_tensor_size(b, 2), V);
    const float *pa = txc_tensor_data_ptr(a), *pb = txc_tensor_data_ptr(b);
    for (int64_t r = 0; r < n; r++) {
        double scale = 0;
        for (int64_t j = 0; j < V; j++)
            scale = fmax(scale, fabs(pa[r * V + j]));
        for (int64_t j = 0; j < V; j++)
            if (fabs(pa[r * V + j] - pb[r * V + j]) > 1e-5 * scale)
                fail_msg("%s: tp %d logits[%lld][%lld] = %.9g, one process %.9g", name, N, (long long)r,
                         (long long)j, pb[r * V + j], pa[r * V + j]);
    }
    free(ids64);
    txc_env_scope_end(env, mark);
}

static void compare_tokens(const char *name, txc_model *full, txc_model *tp, const char *dir, const int32_t *ids,
                           int64_t n, bool jit)
{
    txc_generate_options o = txc_generate_default_options(full, dir);
    o.cache = TXC_CACHE_STATIC;
    o.jit = jit;
    o.do_sample = false;
    o.max_new_tokens = 12;
    o.n_eos = 0; /* the whole length: no early stop */
    txc_generate_result ra, rb;
    if (txc_generate(full, ids, n, &o, &ra) != TXC_OK)
        fail_msg("%s: generate: %s", name, txc_last_error());
    if (txc_generate(tp, ids, n, &o, &rb) != TXC_OK)
        fail_msg("%s: generate --tp %d: %s", name, N, txc_last_error());
    assert_int_equal(ra.n_new, rb.n_new);
    for (int64_t i = 0; i < ra.n_new; i++)
        if (ra.new_ids[i] != rb.new_ids[i])
            fail_msg("%s (%s): tp %d token %lld is %d, one process %d", name, jit ? "compiled" : "eager", N,
                     (long long)i, rb.new_ids[i], ra.new_ids[i]);
    txc_generate_result_free(&ra);
    txc_generate_result_free(&rb);
}

static void check_model(const model_case *mc)
{
    txc_clear_error();
    txc_model *full = NULL, *tp = NULL;
    txc_model_options fo = {0}, to = {.tp_mesh = mesh};
    if (txc_model_load(mc->dir, &fo, &full) != TXC_OK)
        fail_msg("%s: %s", mc->name, txc_last_error());
    txc_status s = txc_model_load(mc->dir, &to, &tp);
    const txc_hf_config *c = txc_model_config(full);
    if (N > 1 && ((c->num_key_value_heads % N && N % c->num_key_value_heads) || c->num_attention_heads % N ||
                  c->intermediate_size % N)) {
        assert_int_equal(s, TXC_ERR_INVALID);
        assert_non_null(strstr(txc_last_error(), "sizes that work"));
        txc_model_free(full);
        return;
    }
    if (s != TXC_OK)
        fail_msg("%s: load --tp %d: %s", mc->name, N, txc_last_error());
    assert_int_equal(txc_model_tp_size(tp), N);
    if (c->num_key_value_heads % N) /* N a multiple of the kv heads: each rank holds one, replicated */
        assert_int_equal(txc_model_config(tp)->num_key_value_heads, 1);
    else
        assert_int_equal(txc_model_config(tp)->num_key_value_heads * N, c->num_key_value_heads);
    if (N > 1) /* this rank holds its slices: less than the whole */
        assert_true(txc_model_weights_info(tp).param_bytes < txc_model_weights_info(full).param_bytes);
    if (strcmp(c->model_type, "gpt2") == 0) /* Conv1D: exactly its slices and the replicated rest */
        assert_int_equal(txc_model_weights_info(tp).param_bytes, tu_gpt2_tp_param_bytes(c, N));
    const int32_t ids[] = {1, 7, 42, 3, 99, 12, 5};
    compare_logits(mc->name, full, tp, ids, 7);
    compare_tokens(mc->name, full, tp, mc->dir, ids, 7, false);
    compare_tokens(mc->name, full, tp, mc->dir, ids, 7, true);
    txc_model_free(tp);
    txc_model_free(full);
}

static void test_tp_models(void **state)
{
    (void)state;
    static const char *arch[] = {"llama_bias", "llama_dynamic", "llama_linear", "llama_llama3", "llama_yarn",
                                 "mistral", "qwen2", "qwen2_sliding", "qwen3", "gemma", "gemma2", "gpt2", "phi3", "phi3_longrope"};
    model_case mc = {"stories260K", tu_path("%s/models/stories260K", tu_shared_dir())};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", mc.dir);
    mc.dir = dir;
    check_model(&mc);
    for (size_t i = 0; i < sizeof arch / sizeof *arch; i++) {
        char d[4096];
        snprintf(d, sizeof d, "%s/tests/fixtures/arch/%s", tu_source_dir(), arch[i]);
        model_case a = {arch[i], d};
        check_model(&a);
        if (R == 0)
            printf("  %s: tp %d ok\n", arch[i], N);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mesh_errors),
        cmocka_unit_test(test_device_put_gather),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_tp_models),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
