/*
 * In-process CPU devices (txc_devices_run, include/txc/shard.h): 2 and 4
 * devices of this process, each a thread with its own pool, env and mesh
 * coordinate, collectives over shared memory.
 *
 * Collectives against their closed form summed in device order (bit for
 * bit, the same formula test_shard checks over MPI ranks); the thread
 * split; a failed device ends its peers' collectives with an error that
 * names it (no wait); and for stories260K and every architecture fixture
 * (tests/fixtures/arch) at tp 2 and 4 (where the heads divide, the kv
 * heads replicated where the size is a multiple of them; else the error
 * naming the sizes that work) greedy tokens equal to the unsharded
 * model's, eager and compiled, and the prompt's logits within 1e-5 of the
 * row's largest magnitude. cmocka's asserts jump on the thread that runs
 * the test, so the device threads record their first failure and the test
 * asserts on it.
 */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "txc/generate.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/shard.h"
#include "txc/threads.h"

#define CHECK TU_DEVICE_CHECK

static void reset(void) { tu_device_failure[0] = 0; }

static void assert_no_failure(txc_status s)
{
    if (tu_device_failure[0])
        fail_msg("%s", tu_device_failure);
    if (s != TXC_OK)
        fail_msg("txc_devices_run: %s", txc_last_error());
}

static txc_mesh *tp_mesh(void)
{
    int64_t n = txc_device_count();
    const char *axis[] = {"tp"};
    return txc_mesh_new(NULL, 1, &n, axis);
}

/* Device r's value at i, and the sum over the n devices in device order. */
static float part(int r, int i) { return 1.0f / (float)(3 + r) + (float)i * 0.1f * (float)(r + 1); }
static float sum_parts(int n, int i)
{
    float s = part(0, i);
    for (int r = 1; r < n; r++)
        s += part(r, i);
    return s;
}

/* ---- collectives ------------------------------------------------------------------ */

static int collectives_fn(void *ctx, int d)
{
    const int n = *(const int *)ctx;
    CHECK(txc_device_index() == d && txc_device_count() == n, "device %d of %d", txc_device_index(),
          txc_device_count());
    CHECK(txc_process_count() == 1 && txc_process_index() == 0, "one process");
    CHECK(strcmp(txc_collective_transport(), n > 1 ? "shared memory" : "nothing (one device)") == 0, "transport %s",
          txc_collective_transport());
    txc_mesh *mesh = tp_mesh();
    CHECK(mesh, "mesh: %s", txc_last_error());
    CHECK(txc_mesh_axis_index(mesh, "tp") == d, "coordinate");
    txc_env *env = txc_env_active();
    CHECK(env != txc_env_default(), "the device's own env");
    int rc = 0;
    enum { ROWS = 4, COLS = 8 };
    float mine[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        mine[i] = part(d, i);
    for (int rep = 0; rep < 50 && !rc; rep++) { /* many rounds: the barriers' generations wrap nothing */
        int mark = txc_env_scope_begin(env);
        txc_tensor *x = txc_tensor_from_data(env, TXC_F32, 2, (int64_t[]){ROWS, COLS}, mine);
        txc_tensor *ar = txc_all_reduce(x, mesh, "tp");
        if (!ar) {
            rc = 1;
            CHECK(false, "all_reduce: %s", txc_last_error());
        }
        const float *a = txc_tensor_data_ptr(ar);
        for (int i = 0; i < ROWS * COLS; i++)
            CHECK(a[i] == sum_parts(n, i), "all_reduce[%d] = %.9g, want %.9g", i, a[i], sum_parts(n, i));
        txc_tensor *ag = txc_all_gather(x, mesh, "tp", 1);
        CHECK(ag && txc_tensor_size(ag, 1) == COLS * n, "all_gather: %s", txc_last_error());
        const float *g = txc_tensor_data_ptr(ag);
        for (int r = 0; r < ROWS; r++)
            for (int k = 0; k < n; k++)
                for (int c = 0; c < COLS; c++)
                    CHECK(g[(r * n + k) * COLS + c] == part(k, r * COLS + c), "all_gather (%d, %d, %d)", r, k, c);
        txc_tensor *rs = txc_reduce_scatter(x, mesh, "tp", 0);
        CHECK(rs && txc_tensor_size(rs, 0) == ROWS / n, "reduce_scatter: %s", txc_last_error());
        const float *q = txc_tensor_data_ptr(rs);
        for (int i = 0; i < (ROWS / n) * COLS; i++)
            CHECK(q[i] == sum_parts(n, d * (ROWS / n) * COLS + i), "reduce_scatter[%d]", i);
        txc_tensor *bc = txc_broadcast(x, mesh, "tp", n - 1);
        CHECK(bc, "broadcast: %s", txc_last_error());
        const float *b = txc_tensor_data_ptr(bc);
        for (int i = 0; i < ROWS * COLS; i++)
            CHECK(b[i] == part(n - 1, i), "broadcast[%d]", i);
        /* device_put / gather of a global value (the same on every device): its rows, and all of them back */
        float glob[ROWS * COLS];
        for (int i = 0; i < ROWS * COLS; i++)
            glob[i] = (float)i * 0.25f - 1.0f;
        txc_tensor *gx = txc_tensor_from_data(env, TXC_F32, 2, (int64_t[]){ROWS, COLS}, glob);
        const txc_sharding *rows = txc_named_sharding(mesh, TXC_P("tp", NULL));
        txc_tensor *sh = txc_device_put(gx, rows);
        CHECK(sh && txc_tensor_size(sh, 0) == ROWS / n &&
                  memcmp(txc_tensor_data_ptr(sh), glob + d * (ROWS / n) * COLS, sizeof(float) * (ROWS / n) * COLS) == 0,
              "device_put: %s", txc_last_error());
        int64_t start[2];
        CHECK(txc_tensor_shard_index(sh, 0, start, NULL) == TXC_OK && start[0] == d * (ROWS / n), "shard index");
        txc_tensor *back = txc_gather(sh);
        CHECK(back, "gather: %s", txc_last_error());
        CHECK(txc_tensor_numel(back) == ROWS * COLS && txc_tensor_is_contiguous(back) &&
                  memcmp(txc_tensor_data_ptr(back), glob, sizeof glob) == 0,
              "gather at %d devices: %lld elements, first %g", n, (long long)txc_tensor_numel(back),
              (double)((const float *)txc_tensor_data_ptr(back))[0]);
        txc_env_scope_end(env, mark);
    }
    double sec;
    uint64_t calls;
    txc_collective_stats(&sec, &calls, NULL);
    CHECK(calls >= 50 * 5, "this device's collectives counted: %llu", (unsigned long long)calls);
    txc_mesh_free(mesh);
    return rc;
}

static void test_collectives(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n *= 2) {
        reset();
        int rcs[4];
        assert_no_failure(txc_devices_run(n, NULL, collectives_fn, &n, rcs));
        for (int d = 0; d < n; d++)
            assert_int_equal(rcs[d], 0);
    }
}

/* ---- thread pools, failure, errors -------------------------------------------------- */

static int threads_fn(void *ctx, int d)
{
    const int *want = ctx;
    CHECK(txc_threads_get() == want[d], "threads %d, want %d", txc_threads_get(), want[d]);
    /* a parallel loop on the device's own pool */
    int64_t shape[1] = {4096};
    txc_env *env = txc_env_active();
    int mark = txc_env_scope_begin(env);
    txc_tensor *a = txc_ones(env, 1, shape, TXC_F32);
    txc_tensor *s = txc_sum(txc_mul_scalar(a, 2.0), 0, NULL, false);
    const bool ok = s && txc_tensor_item(s) == 8192.0;
    txc_env_scope_end(env, mark);
    CHECK(ok, "sum");
    return 0;
}

static void test_threads(void **state)
{
    (void)state;
    reset();
    int threads[2] = {2, 1};
    assert_no_failure(txc_devices_run(2, threads, threads_fn, threads, NULL));
    /* the process's pool is untouched */
    assert_true(txc_threads_get() >= 1);
}

static int fail_fn(void *ctx, int d)
{
    (void)ctx;
    if (d == 1) {
        txc_error(TXC_ERR_IO, "device one's own failure");
        return 2;
    }
    /* device 1 never reaches the collective: this one's must end with an error naming it, not wait */
    txc_mesh *mesh = tp_mesh();
    CHECK(mesh, "mesh: %s", txc_last_error());
    float v[4] = {1, 2, 3, 4};
    txc_env *env = txc_env_active();
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = txc_tensor_from_data(env, TXC_F32, 1, (int64_t[]){4}, v);
    txc_tensor *y = txc_all_reduce(x, mesh, "tp");
    txc_env_scope_end(env, mark);
    txc_mesh_free(mesh);
    CHECK(!y, "an all_reduce with a failed peer returned");
    CHECK(strstr(txc_last_error(), "device 1 failed (device one's own failure)"), "error: %s", txc_last_error());
    return 2;
}

static void test_failure(void **state)
{
    (void)state;
    reset();
    int rcs[2];
    txc_status s = txc_devices_run(2, NULL, fail_fn, NULL, rcs);
    if (tu_device_failure[0])
        fail_msg("%s", tu_device_failure);
    assert_int_equal(s, TXC_ERR_IO);
    assert_int_equal(rcs[1], 2);
    assert_int_equal(rcs[0], 2);
    assert_non_null(strstr(txc_last_error(), "device one's own failure"));
    /* errors: counts */
    txc_clear_error();
    assert_int_equal(txc_devices_run(0, NULL, fail_fn, NULL, NULL), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_devices_run(65, NULL, fail_fn, NULL, NULL), TXC_ERR_INVALID);
    txc_clear_error();
    int zero[2] = {1, 0};
    assert_int_equal(txc_devices_run(2, zero, fail_fn, NULL, NULL), TXC_ERR_INVALID);
    if (!strstr(txc_last_error(), "device 1 has 0 threads"))
        fail_msg("error: %s", txc_last_error());
}

/* A stalled device: past the deadline the process ends with one line and exit status 3, never a hang. */
static int stall_fn(void *ctx, int d)
{
    (void)ctx;
    if (d == 1) {
        sleep(5); /* past the 0.5 s deadline */
        return 0;
    }
    txc_mesh *mesh = tp_mesh();
    float v[4] = {1, 2, 3, 4};
    txc_env *env = txc_env_active();
    int mark = txc_env_scope_begin(env);
    txc_all_reduce(txc_tensor_from_data(env, TXC_F32, 1, (int64_t[]){4}, v), mesh, "tp");
    txc_env_scope_end(env, mark);
    txc_mesh_free(mesh);
    return 0;
}

static void test_timeout(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        txc_collective_set_timeout(0.5);
        txc_devices_run(2, NULL, stall_fn, NULL, NULL);
        _exit(0); /* (not reached: the timeout ends the process) */
    }
    close(fds[1]);
    char buf[1024];
    ssize_t n, got = 0;
    while (got < (ssize_t)sizeof buf - 1 && (n = read(fds[0], buf + got, sizeof buf - 1 - (size_t)got)) > 0)
        got += n;
    buf[got] = 0;
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    if (!strstr(buf, "txc: device 0: _c10d_functional::all_reduce of 16 bytes timed out after 0.5 s waiting for its peers") ||
        strchr(buf, '\n') != buf + strlen(buf) - 1)
        fail_msg("stderr: %s", buf);
}

/* ---- tensor-parallel models ----------------------------------------------------------- */

static const int32_t ids[] = {1, 7, 42, 3, 99, 12, 5};
enum { N_IDS = 7, NEW = 12 };

typedef struct model_case {
    const char *name, *dir;
    int64_t vocab, kv_heads;
    float *logits; /* the unsharded model's (N_IDS, vocab) */
    int32_t tokens[2][NEW]; /* eager, compiled */
    bool refused;           /* this tp does not divide the heads */
    const size_t *gpt2_bytes; /* GPT-2: a rank's weight bytes per tp (its slices and the replicated rest) */
} model_case;

static bool generate_ids(txc_model *m, const char *dir, bool jit, int32_t *out)
{
    txc_generate_options o = txc_generate_default_options(m, dir);
    o.cache = TXC_CACHE_STATIC;
    o.jit = jit;
    o.do_sample = false;
    o.max_new_tokens = NEW;
    o.n_eos = 0;
    txc_generate_result r;
    if (txc_generate(m, ids, N_IDS, &o, &r) != TXC_OK)
        return false;
    bool ok = r.n_new == NEW;
    if (ok)
        memcpy(out, r.new_ids, sizeof(int32_t) * NEW);
    txc_generate_result_free(&r);
    return ok;
}

static txc_tensor *prompt_logits(txc_model *m)
{
    txc_env *env = txc_model_env(m);
    int64_t v[N_IDS];
    for (int i = 0; i < N_IDS; i++)
        v[i] = ids[i];
    txc_tensor *in = txc_tensor_from_data(env, TXC_I64, 2, (int64_t[]){1, N_IDS}, v);
    txc_tensor *pos = txc_arange(env, 0, N_IDS, 1, TXC_I64);
    return txc_contiguous(txc_model_forward(m, in, NULL, NULL, pos, 0));
}

static int model_fn(void *ctx, int d)
{
    model_case *mc = ctx;
    (void)d;
    const int n = txc_device_count();
    txc_mesh *mesh = tp_mesh();
    CHECK(mesh, "mesh: %s", txc_last_error());
    txc_model_options to = {.tp_mesh = mesh};
    txc_model *tp = NULL;
    txc_status s = txc_model_load(mc->dir, &to, &tp);
    if (mc->refused) {
        txc_mesh_free(mesh);
        CHECK(s != TXC_OK && (strstr(txc_last_error(), "sizes that work") || strstr(txc_last_error(), "not tensor-parallel")),
              "%s: tp %d loaded, or: %s", mc->name, n, txc_last_error());
        return 0;
    }
    if (s != TXC_OK) {
        txc_mesh_free(mesh);
        CHECK(false, "%s: load at tp %d: %s", mc->name, n, txc_last_error());
    }
    const txc_hf_config *lc = txc_model_config(tp);
    CHECK(lc->num_key_value_heads == (mc->kv_heads % n ? 1 : mc->kv_heads / n), "%s: %lld local kv heads at tp %d",
          mc->name, (long long)lc->num_key_value_heads, n);
    CHECK(!mc->gpt2_bytes || txc_model_weights_info(tp).param_bytes == mc->gpt2_bytes[n],
          "%s: tp %d holds %zu weight bytes, its slices are %zu", mc->name, n, txc_model_weights_info(tp).param_bytes,
          mc->gpt2_bytes ? mc->gpt2_bytes[n] : 0);
    int rc = 0;
    txc_env *env = txc_model_env(tp);
    int mark = txc_env_scope_begin(env);
    txc_tensor *lg = prompt_logits(tp);
    if (!lg || txc_tensor_size(lg, 2) != mc->vocab) {
        CHECK(false, "%s: forward: %s", mc->name, txc_last_error());
    }
    const float *pb = txc_tensor_data_ptr(lg);
    for (int64_t r = 0; r < N_IDS && !rc; r++) {
        double scale = 0;
        for (int64_t j = 0; j < mc->vocab; j++)
            scale = fmax(scale, fabs(mc->logits[r * mc->vocab + j]));
        for (int64_t j = 0; j < mc->vocab; j++)
            CHECK(fabs(mc->logits[r * mc->vocab + j] - pb[r * mc->vocab + j]) <= 1e-5 * scale,
                  "%s: tp %d logits[%lld][%lld] = %.9g, one device %.9g", mc->name, n, (long long)r, (long long)j,
                  pb[r * mc->vocab + j], mc->logits[r * mc->vocab + j]);
    }
    txc_env_scope_end(env, mark);
    for (int jit = 0; jit < 2; jit++) {
        int32_t got[NEW];
        CHECK(generate_ids(tp, mc->dir, jit, got), "%s: generate: %s", mc->name, txc_last_error());
        for (int i = 0; i < NEW; i++)
            CHECK(got[i] == mc->tokens[jit][i], "%s (%s): tp %d token %d is %d, one device %d", mc->name,
                  jit ? "compiled" : "eager", n, i, got[i], mc->tokens[jit][i]);
    }
    txc_model_free(tp);
    txc_mesh_free(mesh);
    return 0;
}

static void check_model(const char *name, const char *dir)
{
    txc_model *full = NULL;
    txc_model_options fo = {0};
    if (txc_model_load(dir, &fo, &full) != TXC_OK)
        fail_msg("%s: %s", name, txc_last_error());
    const txc_hf_config *c = txc_model_config(full);
    model_case mc = {.name = name, .dir = dir, .vocab = c->vocab_size, .kv_heads = c->num_key_value_heads};
    txc_env *env = txc_model_env(full);
    int mark = txc_env_scope_begin(env);
    txc_tensor *lg = prompt_logits(full);
    assert_non_null(lg);
    mc.logits = malloc(sizeof(float) * (size_t)(N_IDS * mc.vocab));
    memcpy(mc.logits, txc_tensor_data_ptr(lg), sizeof(float) * (size_t)(N_IDS * mc.vocab));
    txc_env_scope_end(env, mark);
    for (int jit = 0; jit < 2; jit++)
        if (!generate_ids(full, dir, jit, mc.tokens[jit]))
            fail_msg("%s: generate: %s", name, txc_last_error());
    size_t gpt2_bytes[5] = {0};
    if (strcmp(c->model_type, "gpt2") == 0) {
        for (int n = 2; n <= 4; n *= 2)
            gpt2_bytes[n] = tu_gpt2_tp_param_bytes(c, n);
        mc.gpt2_bytes = gpt2_bytes;
    }
    for (int n = 2; n <= 4; n *= 2) {
        /* (a size that is a multiple of num_key_value_heads replicates the kv heads) */
        mc.refused = c->num_attention_heads % n || c->intermediate_size % n ||
                     (c->num_key_value_heads % n && n % c->num_key_value_heads);
        reset();
        assert_no_failure(txc_devices_run(n, NULL, model_fn, &mc, NULL));
        if (!mc.refused)
            printf("  %s: tp %d in one process ok%s\n", name, n,
                   c->num_key_value_heads % n ? " (kv heads replicated)" : "");
    }
    free(mc.logits);
    txc_model_free(full);
}

static void test_tp_models(void **state)
{
    (void)state;
    static const char *arch[] = {"llama_bias", "llama_dynamic", "llama_linear", "llama_llama3", "llama_yarn",
                                 "mistral", "qwen2", "qwen2_sliding", "qwen3", "gemma", "gemma2", "gpt2", "phi3",
                                 "phi3_longrope"};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/stories260K", tu_shared_dir());
    check_model("stories260K", dir);
    for (size_t i = 0; i < sizeof arch / sizeof *arch; i++) {
        snprintf(dir, sizeof dir, "%s/tests/fixtures/arch/%s", tu_source_dir(), arch[i]);
        check_model(arch[i], dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_failure),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_tp_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
