/* Batched generation (txc/batch.h): slots, continuous batching, and batch
 * invariance — every request's tokens and raw logits are bit-identical to
 * the same request alone, whatever the slot count, the other requests, their
 * lengths and the order they come in; greedy and seeded sampling, eager and
 * compiled, on stories260K and every architecture fixture. */
#include "testutil.h"
#include "txc/batch.h"
#include "txc/ops.h"
#include "txc/threads.h"
#include "ops/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_REQ 5
#define MAX_NEW 6

static const char *arch_names[] = {"gemma", "gemma2", "gpt2", "llama_bias", "llama_linear", "llama_llama3",
                                   "llama_yarn", "mistral", "phi3", "phi3_longrope", "qwen2", "qwen2_sliding",
                                   "qwen3"};

typedef struct run_out {
    int32_t tokens[N_REQ][MAX_NEW];
    int64_t n[N_REQ];
    txc_batch_finish finish[N_REQ];
    float *logits[N_REQ];
} run_out;

static txc_model *load(const char *dir)
{
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(dir, NULL, &m), TXC_OK);
    return m;
}

/* Prompt r of n ids from a fixed generator. */
static int64_t prompt_n(int r, int64_t n, int64_t V, int32_t *ids)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    for (int64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)V);
    }
    return n;
}

/* Prompt r: length 3 + 5 r (so rows differ in length). */
static int64_t prompt(int r, int64_t V, int32_t *ids) { return prompt_n(r, 3 + 5 * r, V, ids); }

static txc_batch_request request(txc_model *m, int r, bool sample, int32_t *ids, float *logits)
{
    txc_batch_request q = txc_batch_default_request(m, NULL);
    q.id = (uint64_t)r;
    q.n_input = prompt(r, txc_model_config(m)->vocab_size, ids);
    q.input_ids = ids;
    q.gen.max_new_tokens = MAX_NEW;
    q.gen.n_eos = 0;
    q.gen.repetition_penalty = 1.0;
    q.gen.do_sample = sample && r % 2 == 0; /* a mix of greedy and seeded rows */
    q.gen.temperature = 0.9;
    q.gen.top_k = 0;
    q.gen.top_p = 0.95;
    q.gen.min_p = 0;
    q.gen.seed = 1000 + (uint64_t)r;
    q.logits_out = logits;
    q.cache_prompt = false;
    return q;
}

/* What one drive() records, request by request (ids below DRIVE_MAX). */
#define DRIVE_MAX 8
typedef struct drive_io {
    int32_t *tokens;          /* request r's at tokens + r * max_new */
    int64_t *n;               /* tokens kept per request (0 on entry) */
    txc_batch_finish *finish; /* how each finished; NULL: not kept */
    float *const *logits;     /* each request's buffer of max_new x vocab (the caller's) */
    const int64_t *lens;      /* prompt lengths by request; NULL: request()'s */
    int max_new;
} drive_io;

/* The requests `which` (in that order) through a new batch of `slots`
 * slots (max_cache_len 64, prefill_chunk `chunk`, prefill_tokens the
 * default where 0), each added as soon as a slot is free: every event's
 * token kept, its n_new checked; at the end no slot busy. Returns the
 * batch's stats. */
static txc_batch_stats drive(txc_model *m, int slots, int64_t chunk, int64_t prefill_tokens, bool jit, bool sample,
                             const int *which, int n_which, const drive_io *io)
{
    const int64_t V = txc_model_config(m)->vocab_size;
    txc_batch_options opt = txc_batch_default_options();
    opt.n_slots = slots;
    opt.max_cache_len = 64;
    opt.prefill_chunk = chunk;
    if (prefill_tokens)
        opt.prefill_tokens = prefill_tokens;
    opt.jit = jit;
    txc_batch *b = txc_batch_new(m, &opt);
    assert_non_null(b);
    int32_t ids[DRIVE_MAX][64];
    int next = 0, done = 0;
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    for (int guard = 0; done < n_which; guard++) {
        assert_true(guard < 1000);
        while (next < n_which && txc_batch_busy(b) < slots) {
            int r = which[next++], s;
            assert_true(r >= 0 && r < DRIVE_MAX);
            txc_batch_request q = request(m, r, sample, ids[r], io->logits[r]);
            if (io->lens)
                q.n_input = prompt_n(r, io->lens[r], V, ids[r]);
            q.gen.max_new_tokens = io->max_new;
            assert_int_equal(txc_batch_add(b, &q, &s), TXC_OK);
        }
        int n;
        assert_int_equal(txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n), TXC_OK);
        for (int k = 0; k < n; k++) {
            int r = (int)ev[k].id;
            assert_true(io->n[r] < io->max_new);
            io->tokens[r * io->max_new + io->n[r]++] = ev[k].token_id;
            assert_int_equal(ev[k].n_new, io->n[r]);
            if (ev[k].finish != TXC_BATCH_RUNNING) {
                if (io->finish)
                    io->finish[r] = ev[k].finish;
                done++;
            }
        }
    }
    assert_int_equal(txc_batch_busy(b), 0);
    txc_batch_stats st = txc_batch_get_stats(b);
    txc_batch_free(b);
    return st;
}

/* Run the requests `which` (in that order) through a batch of `slots`
 * slots, adding each as soon as a slot is free. */
static void run(txc_model *m, int slots, int64_t chunk, bool jit, bool sample, const int *which, int n_which,
                run_out *o)
{
    const int64_t V = txc_model_config(m)->vocab_size;
    memset(o->n, 0, sizeof o->n);
    for (int r = 0; r < N_REQ; r++)
        assert_non_null(o->logits[r] = calloc((size_t)(MAX_NEW * V), sizeof(float)));
    drive_io io = {&o->tokens[0][0], o->n, o->finish, o->logits, NULL, MAX_NEW};
    drive(m, slots, chunk, 0, jit, sample, which, n_which, &io);
}

static void free_out(run_out *o)
{
    for (int r = 0; r < N_REQ; r++)
        free(o->logits[r]);
}

/* Every request of `got` equals its run alone in `alone`, bit for bit. */
static void same(const char *what, txc_model *m, const run_out *alone, const run_out *got, const int *which, int n)
{
    const int64_t V = txc_model_config(m)->vocab_size;
    for (int k = 0; k < n; k++) {
        int r = which[k];
        if (got->n[r] != alone->n[r] || memcmp(got->tokens[r], alone->tokens[r], sizeof(int32_t) * MAX_NEW) != 0)
            fail_msg("%s: request %d: tokens differ from the request alone", what, r);
        if (memcmp(got->logits[r], alone->logits[r], sizeof(float) * (size_t)(got->n[r] * V)) != 0) {
            int64_t i = 0;
            while (got->logits[r][i] == alone->logits[r][i])
                i++;
            fail_msg("%s: request %d: logits differ from the request alone at step %lld, id %lld (%.9g vs %.9g)", what,
                     r, (long long)(i / V), (long long)(i % V), got->logits[r][i], alone->logits[r][i]);
        }
    }
}

static void check_model(const char *name, const char *dir, bool jit, bool sample)
{
    txc_model *m = load(dir);
    run_out alone, got;
    memset(&alone, 0, sizeof alone);
    /* each request alone: a batch of one slot */
    for (int r = 0; r < N_REQ; r++) {
        run_out one;
        memset(&one, 0, sizeof one);
        run(m, 1, 8, jit, sample, &r, 1, &one);
        alone.n[r] = one.n[r];
        memcpy(alone.tokens[r], one.tokens[r], sizeof one.tokens[r]);
        alone.logits[r] = one.logits[r];
        one.logits[r] = NULL;
        assert_int_equal(one.finish[r], TXC_BATCH_LENGTH);
        free_out(&one);
    }
    static const int order[N_REQ] = {0, 1, 2, 3, 4}, reversed[N_REQ] = {4, 2, 0, 3, 1};
    static const struct {
        int slots;
        const int *which;
    } cases[] = {{N_REQ, order}, {3, reversed}, {8, reversed}, {2, order}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char what[160];
        snprintf(what, sizeof what, "%s (%s, %s, %d slots, case %zu)", name, jit ? "compiled" : "eager",
                 sample ? "greedy and seeded sampling" : "greedy", cases[c].slots, c);
        memset(&got, 0, sizeof got);
        run(m, cases[c].slots, 8, jit, sample, cases[c].which, N_REQ, &got);
        same(what, m, &alone, &got, cases[c].which, N_REQ);
        free_out(&got);
    }
    free_out(&alone);
    txc_model_free(m);
}

static const char *stories(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

static void test_stories_invariance(void **state)
{
    (void)state;
    check_model("stories260K", stories(), true, false);
    check_model("stories260K", stories(), true, true);
    check_model("stories260K", stories(), false, true);
}

static void test_arch_invariance(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof arch_names / sizeof *arch_names; i++) {
        const char *dir = tu_path("%s/tests/fixtures/arch/%s", tu_source_dir(), arch_names[i]);
        check_model(arch_names[i], dir, true, true);
        check_model(arch_names[i], dir, false, false);
    }
}

/* The API: errors before anything changes, busy slots, cancel, prefix
 * reuse (the reused request's tokens equal a fresh run's on stories260K's
 * float32 weights), logprobs, txc_batch_generate over a left-padded batch. */
static void test_api(void **state)
{
    (void)state;
    txc_model *m = load(stories());
    const int64_t V = txc_model_config(m)->vocab_size;
    txc_batch_options o = txc_batch_default_options();
    o.n_slots = 2;
    o.max_cache_len = 32;
    o.prefill_chunk = 4;
    o.n_slots = 0;
    assert_null(txc_batch_new(m, &o));
    assert_non_null(strstr(txc_last_error(), "n_slots"));
    txc_clear_error();
    o.n_slots = 2;
    txc_batch *b = txc_batch_new(m, &o);
    assert_non_null(b);
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = 1 + (i * 37) % (int32_t)(V - 1);
    txc_batch_request q = txc_batch_default_request(m, NULL);
    q.input_ids = ids;
    q.gen.max_new_tokens = 5;
    q.gen.n_eos = 0;
    int s;
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    int n;
    /* errors */
    q.n_input = 32;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_ERR_CAPACITY);
    assert_non_null(strstr(txc_last_error(), "32 tokens"));
    assert_non_null(strstr(txc_last_error(), "max_cache_len 32"));
    txc_clear_error();
    q.n_input = 3;
    ids[1] = (int32_t)V;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "position 1"));
    txc_clear_error();
    ids[1] = 5;
    q.presence_penalty = 3;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "presence_penalty"));
    txc_clear_error();
    q.presence_penalty = 0;
    q.gen.do_sample = true;
    q.gen.top_p = 2;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "top_p"));
    txc_clear_error();
    q.gen.do_sample = false;
    q.top_logprobs = 21;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_batch_busy(b), 0);
    assert_int_equal(txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n), TXC_OK);
    assert_int_equal(n, 0);
    assert_int_equal(txc_batch_step(b, ev, 1, &n), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_batch_cancel(b, 0), TXC_ERR_INVALID);
    txc_clear_error();

    /* a fresh run of 10 ids (chunks of 4: three prefill steps), with logprobs */
    q.top_logprobs = 3;
    q.logprobs = true;
    q.n_input = 10;
    q.id = 7;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_OK);
    assert_int_equal(s, 0);
    int32_t fresh[5];
    int got = 0, steps = 0;
    while (txc_batch_busy(b)) {
        assert_int_equal(txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n), TXC_OK);
        steps++;
        for (int k = 0; k < n; k++) {
            assert_int_equal(ev[k].id, 7);
            assert_true(ev[k].n_top == 3 && ev[k].top_logprobs[0] >= ev[k].top_logprobs[1] &&
                        ev[k].top_logprobs[1] >= ev[k].top_logprobs[2] && ev[k].logprob <= 0);
            assert_int_equal(ev[k].top_ids[0], ev[k].token_id); /* greedy: the most likely */
            assert_true(ev[k].logprob == ev[k].top_logprobs[0]);
            fresh[got++] = ev[k].token_id;
            assert_int_equal(ev[k].finish, got == 5 ? TXC_BATCH_LENGTH : TXC_BATCH_RUNNING);
        }
    }
    assert_int_equal(got, 5);
    assert_int_equal(steps, 3 + 4); /* 3 prefill chunks (the last gives token 1), 4 decodes */

    /* the same prompt again: it takes slot 0 and reuses all but its last id */
    q.logprobs = false;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_OK);
    assert_int_equal(s, 0);
    /* another prompt meanwhile takes slot 1; both full: a third is refused */
    txc_batch_request q2 = q;
    int32_t other[6] = {1, 2, 3, 4, 5, 6};
    q2.input_ids = other;
    q2.n_input = 6;
    q2.id = 8;
    assert_int_equal(txc_batch_add(b, &q2, &s), TXC_OK);
    assert_int_equal(s, 1);
    assert_int_equal(txc_batch_add(b, &q2, &s), TXC_ERR_CAPACITY);
    assert_non_null(strstr(txc_last_error(), "all 2 slots are busy"));
    txc_clear_error();
    got = 0;
    int got8 = 0;
    while (txc_batch_busy(b)) {
        assert_int_equal(txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n), TXC_OK);
        for (int k = 0; k < n; k++) {
            if (ev[k].id == 7) {
                assert_int_equal(ev[k].n_reused, 9);
                assert_int_equal(ev[k].token_id, fresh[got]);
                got++;
            } else if (++got8 == 2) {
                assert_int_equal(txc_batch_cancel(b, ev[k].slot), TXC_OK); /* free at once */
                assert_int_equal(txc_batch_busy(b), got == 5 ? 0 : 1);
            }
        }
    }
    assert_int_equal(got, 5);
    assert_int_equal(got8, 2);
    txc_batch_stats st = txc_batch_get_stats(b);
    assert_int_equal(st.requests, 3);
    assert_int_equal(st.reused_tokens, 9);
    assert_int_equal(st.prefill_tokens, 10 + 1 + 6);
    txc_batch_free(b);

    /* a left-padded batch: each row as that row alone */
    int32_t grid[3 * 8];
    uint8_t mask[3 * 8];
    memset(grid, 0, sizeof grid);
    memset(mask, 0, sizeof mask);
    const int lens[3] = {8, 3, 5};
    for (int r = 0; r < 3; r++)
        for (int j = 8 - lens[r]; j < 8; j++)
            grid[r * 8 + j] = ids[r + j], mask[r * 8 + j] = 1;
    txc_generate_result res[3], one;
    q.logprobs = false;
    q.top_logprobs = 0;
    o.n_slots = 2;
    assert_int_equal(txc_batch_generate(m, &o, 3, 8, grid, mask, &q, res), TXC_OK);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(txc_batch_generate(m, &o, 1, lens[r], grid + r * 8 + 8 - lens[r], NULL, &q, &one), TXC_OK);
        assert_int_equal(res[r].n_new, 5);
        assert_string_equal(res[r].stop_reason, "max_new_tokens");
        assert_memory_equal(res[r].new_ids, one.new_ids, sizeof(int32_t) * 5);
        txc_generate_result_free(&res[r]);
        txc_generate_result_free(&one);
    }
    mask[1 * 8 + 6] = 0; /* a hole: not left padding */
    assert_int_equal(txc_batch_generate(m, &o, 3, 8, grid, mask, &q, res), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "row 1"));
    txc_clear_error();
    txc_model_free(m);

    /* dynamic NTK RoPE is refused (rows would depend on each other) */
    m = load(tu_path("%s/tests/fixtures/arch/llama_dynamic", tu_source_dir()));
    assert_null(txc_batch_new(m, NULL));
    assert_int_equal(txc_last_status(), TXC_ERR_UNSUPPORTED);
    txc_clear_error();
    txc_model_free(m);
}

/* Requests coming and going do not recompile: after a first wave has made
 * the plans (prefill buckets, decode row counts), a second wave of other
 * prompts with other lengths in another order compiles nothing. */
static void test_no_recompile(void **state)
{
    (void)state;
    txc_model *m = load(stories());
    txc_batch_options o = txc_batch_default_options();
    o.n_slots = 4;
    o.max_cache_len = 48;
    o.prefill_chunk = 8;
    txc_batch *b = txc_batch_new(m, &o);
    assert_non_null(b);
    int32_t ids[N_REQ][64];
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    int64_t after_first = 0;
    for (int wave = 0; wave < 2; wave++) {
        static const int order[2][N_REQ] = {{0, 1, 2, 3, 4}, {3, 0, 4, 2, 1}};
        int next = 0, done = 0, n;
        while (done < N_REQ) {
            while (next < N_REQ && txc_batch_busy(b) < o.n_slots) {
                int r = order[wave][next++], s;
                txc_batch_request q = request(m, r, true, ids[r], NULL);
                q.gen.max_new_tokens = wave ? 12 - 2 * r : 4 + 3 * r;
                q.gen.seed += (uint64_t)wave;
                ids[r][0] = (int32_t)(ids[r][0] + wave) % (int32_t)txc_model_config(m)->vocab_size;
                assert_int_equal(txc_batch_add(b, &q, &s), TXC_OK);
            }
            assert_int_equal(txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n), TXC_OK);
            for (int k = 0; k < n; k++)
                done += ev[k].finish != TXC_BATCH_RUNNING;
        }
        if (wave == 0)
            after_first = txc_batch_get_stats(b).compilations;
    }
    assert_true(after_first > 0);
    assert_int_equal(txc_batch_get_stats(b).compilations, after_first);
    txc_batch_free(b);
    txc_model_free(m);
}

/* A GEMM's operands for the row-invariance tests: A (M x K) and B (N x K,
 * float32 and its dtype's copy) from an LCG seeded with `seed`, C and out
 * (M x N each). */
typedef struct gemm_data {
    float *A, *C, *out, *Bf;
    uint16_t *Bh;
    const void *B; /* Bf or Bh, by dtype */
} gemm_data;

static void gemm_data_make(gemm_data *g, int64_t M, int64_t N, int64_t K, txc_dtype dt, uint64_t seed)
{
    g->A = malloc(sizeof(float) * (size_t)(M * K));
    g->C = malloc(sizeof(float) * (size_t)(M * N));
    g->out = malloc(sizeof(float) * (size_t)(M * N));
    g->Bf = malloc(sizeof(float) * (size_t)(N * K));
    g->Bh = malloc(sizeof(uint16_t) * (size_t)(N * K));
    assert_true(g->A && g->C && g->out && g->Bf && g->Bh);
    uint64_t x = seed;
    for (int64_t i = 0; i < M * K; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        g->A[i] = (float)((int64_t)(x >> 40) - (1 << 23)) / (float)(1 << 20);
    }
    for (int64_t i = 0; i < N * K; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        g->Bf[i] = (float)((int64_t)(x >> 40) - (1 << 23)) / (float)(1 << 22);
        g->Bh[i] = dt == TXC_BF16 ? txc_f32_to_bf16(g->Bf[i]) : txc_f32_to_f16(g->Bf[i]);
    }
    g->B = dt == TXC_F32 ? (const void *)g->Bf : (const void *)g->Bh;
}

static void gemm_data_free(gemm_data *g) { free(g->A), free(g->C), free(g->out), free(g->Bf), free(g->Bh); }

/* The row invariance the batch rests on (ops/kernels.h): every row of a
 * GEMM with 2..TXC_KERN_ROWS_INVARIANT_MAX rows has the bits of that row
 * alone, for every weight dtype, odd N and K (both tails), 1 and 2 threads,
 * every SIMD level this machine has. */
static void test_gemm_row_invariance(void **state)
{
    (void)state;
    static const int64_t Ns[] = {1, 7, 37, 130}, Ks[] = {5, 64, 203};
    static const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};
    const int M = TXC_KERN_ROWS_INVARIANT_MAX;
    int saved = txc_threads_get();
    for (int level = 0; level <= txc_kern_simd_level(); level++)
        for (int threads = 1; threads <= 2; threads++) {
            txc_kern_set_simd_level(level);
            assert_int_equal(txc_threads_set(threads), TXC_OK);
            for (size_t a = 0; a < 4; a++)
                for (size_t c = 0; c < 3; c++)
                    for (size_t d = 0; d < 3; d++) {
                        int64_t N = Ns[a], K = Ks[c];
                        gemm_data g;
                        gemm_data_make(&g, M, N, K, dts[d], 12345);
                        for (int m = 2; m <= M; m += m < 8 ? 1 : 5) {
                            txc_kern_gemm_nt(m, N, K, g.A, K, g.B, dts[d], K, g.C, N);
                            for (int i = 0; i < m; i++) {
                                txc_kern_gemm_nt(1, N, K, g.A + i * K, K, g.B, dts[d], K, g.out, N);
                                if (memcmp(g.out, g.C + i * N, sizeof(float) * (size_t)N) != 0)
                                    fail_msg("simd %d, %d threads, %s, M %d N %lld K %lld: row %d differs from M = 1",
                                             level, threads, txc_dtype_name(dts[d]), m, (long long)N, (long long)K, i);
                            }
                        }
                        gemm_data_free(&g);
                    }
        }
    txc_kern_set_simd_level(-1);
    assert_int_equal(txc_threads_set(saved), TXC_OK);
}

/* Above TXC_KERN_ROWS_INVARIANT_MAX rows, where txc_kern_gemm_rows_invariant:
 * every row of a GEMM has the bits of that row in any other GEMM of more
 * than 32 rows (other counts, other places among the rows), every weight
 * dtype, tails of N and K, 1 and 2 threads — what a group of prompt chunks
 * longer than 32 rows rests on. */
static void test_gemm_many_row_invariance(void **state)
{
    (void)state;
    static const int64_t Ns[] = {7, 130}, Ks[] = {64, 203};
    static const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};
    static const int64_t spans[][2] = {{0, 33}, {5, 40}, {17, 64}, {3, 97}}; /* first row, rows */
    const int64_t M = 120;
    int saved = txc_threads_get();
    for (int level = 0; level <= txc_kern_simd_level(); level++)
        for (int threads = 1; threads <= 2; threads++) {
            txc_kern_set_simd_level(level);
            assert_int_equal(txc_threads_set(threads), TXC_OK);
            if (!txc_kern_gemm_rows_invariant())
                continue;
            for (size_t a = 0; a < 2; a++)
                for (size_t c = 0; c < 2; c++)
                    for (size_t d = 0; d < 3; d++) {
                        int64_t N = Ns[a], K = Ks[c];
                        gemm_data g;
                        gemm_data_make(&g, M, N, K, dts[d], 777);
                        txc_kern_gemm_nt(M, N, K, g.A, K, g.B, dts[d], K, g.C, N);
                        for (size_t sp = 0; sp < sizeof spans / sizeof *spans; sp++) {
                            int64_t r0 = spans[sp][0], m = spans[sp][1];
                            txc_kern_gemm_nt(m, N, K, g.A + r0 * K, K, g.B, dts[d], K, g.out, N);
                            for (int64_t i = 0; i < m; i++)
                                if (memcmp(g.out + i * N, g.C + (r0 + i) * N, sizeof(float) * (size_t)N) != 0)
                                    fail_msg("simd %d, %d threads, %s, N %lld K %lld: row %lld of %lld rows differs "
                                             "from the same row among %lld", level, threads,
                                             txc_dtype_name(dts[d]), (long long)N, (long long)K, (long long)(r0 + i),
                                             (long long)m, (long long)M);
                        }
                        gemm_data_free(&g);
                    }
        }
    txc_kern_set_simd_level(-1);
    assert_int_equal(txc_threads_set(saved), TXC_OK);
}

/* ---- grouped prefill: several slots' chunks in one forward ------------------------- */

#define G_REQ 8
#define G_NEW 5
/* padded (compiled): 40 40 40 48 48 | 8 8 8: a group of three 40-row
 * chunks, one of two 48-row chunks (the many-row GEMM), one of three
 * 8-row chunks (24 rows: the multi-row GEMV) */
static const int64_t group_lens[G_REQ] = {37, 40, 34, 45, 48, 8, 6, 5};

typedef struct group_out {
    int32_t tokens[G_REQ][G_NEW];
    int64_t n[G_REQ];
    float *logits[G_REQ];
    txc_batch_stats st;
} group_out;

/* The requests `which` through a batch of `slots` slots, added as slots
 * free up (all at once when they fit), prompts group_lens[r] long. */
static void run_group(txc_model *m, int slots, int64_t chunk, int64_t prefill_tokens, bool jit, bool sample,
                      const int *which, int n_which, group_out *o)
{
    const int64_t V = txc_model_config(m)->vocab_size;
    memset(o, 0, sizeof *o);
    for (int k = 0; k < n_which; k++)
        assert_non_null(o->logits[which[k]] = calloc((size_t)(G_NEW * V), sizeof(float)));
    drive_io io = {&o->tokens[0][0], o->n, NULL, o->logits, group_lens, G_NEW};
    o->st = drive(m, slots, chunk, prefill_tokens, jit, sample, which, n_which, &io);
}

static void free_group(group_out *o)
{
    for (int r = 0; r < G_REQ; r++)
        free(o->logits[r]);
}

static void same_group(const char *what, int64_t V, const group_out *alone, const group_out *got, const int *which,
                       int n)
{
    for (int k = 0; k < n; k++) {
        int r = which[k];
        if (got->n[r] != G_NEW || memcmp(got->tokens[r], alone->tokens[r], sizeof got->tokens[r]) != 0)
            fail_msg("%s: request %d (%lld ids): tokens differ from the request alone", what, r,
                     (long long)group_lens[r]);
        if (memcmp(got->logits[r], alone->logits[r], sizeof(float) * (size_t)(G_NEW * V)) != 0) {
            int64_t i = 0;
            while (got->logits[r][i] == alone->logits[r][i])
                i++;
            fail_msg("%s: request %d (%lld ids): logits differ from the request alone at step %lld, id %lld "
                     "(%.9g vs %.9g)", what, r, (long long)group_lens[r], (long long)(i / V), (long long)(i % V),
                     got->logits[r][i], alone->logits[r][i]);
        }
    }
}

/* Slots prefilled together get the bits they get alone: chunks longer than
 * 32 rows grouped (the many-row GEMM), short ones grouped up to 32 rows
 * (the multi-row GEMV), chunked prompts, a small prefill_tokens budget
 * splitting the step, other orders and slot counts, eager and compiled;
 * and a compiled group is one forward (prefill_forwards). */
static void check_group(const char *name, const char *dir, bool sample)
{
    txc_model *m = load(dir);
    const int64_t V = txc_model_config(m)->vocab_size;
    static const int order[G_REQ] = {0, 1, 2, 3, 4, 5, 6, 7}, reversed[G_REQ] = {7, 4, 1, 6, 3, 0, 5, 2};
    static const struct {
        int slots;
        int64_t chunk, budget;
        const int *which;
        int forwards; /* prefill forwards of the compiled run (0: not checked) */
    } cases[] = {{8, 64, 512, order, 3}, {8, 16, 512, order, 0}, {3, 64, 48, reversed, 0}, {5, 16, 40, reversed, 0},
                 {8, 64, 512, reversed, 8}}; /* reversed: no two neighbouring slots share a length */
    /* where long chunks do not group (txc_kern_gemm_rows_invariant false), 3 + 2 forwards for them */
    const int long_groups = txc_kern_gemm_rows_invariant() ? 0 : 3;
    for (int jit = 1; jit >= 0; jit--)
        for (int chunk = 16; chunk <= 64; chunk *= 4) {
            group_out alone;
            memset(&alone, 0, sizeof alone);
            for (int r = 0; r < G_REQ; r++) { /* each alone: one slot */
                group_out one;
                run_group(m, 1, chunk, 512, jit, sample, &r, 1, &one);
                memcpy(alone.tokens[r], one.tokens[r], sizeof one.tokens[r]);
                alone.logits[r] = one.logits[r];
                one.logits[r] = NULL;
                free_group(&one);
            }
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                if (cases[c].chunk != chunk)
                    continue;
                char what[200];
                snprintf(what, sizeof what, "%s (%s, %s, %d slots, chunk %d, prefill_tokens %lld, case %zu)", name,
                         jit ? "compiled" : "eager", sample ? "greedy and seeded" : "greedy", cases[c].slots, chunk,
                         (long long)cases[c].budget, c);
                group_out got;
                run_group(m, cases[c].slots, chunk, cases[c].budget, jit, sample, cases[c].which, G_REQ, &got);
                same_group(what, V, &alone, &got, cases[c].which, G_REQ);
                const int forwards = cases[c].forwards == 3 ? 3 + long_groups : cases[c].forwards;
                if (jit && forwards && got.st.prefill_forwards != (uint64_t)forwards)
                    fail_msg("%s: %llu prefill forwards, expected %d", what,
                             (unsigned long long)got.st.prefill_forwards, forwards);
                if (jit && chunk == 64) /* 40 40 40 48 48 8 8 8 */
                    assert_int_equal(got.st.prefill_rows, 3 * 40 + 2 * 48 + 3 * 8);
                free_group(&got);
            }
            free_group(&alone);
        }
    txc_model_free(m);
}

static void test_grouped_prefill(void **state)
{
    (void)state;
    check_group("stories260K", stories(), true);
    for (size_t i = 0; i < sizeof arch_names / sizeof *arch_names; i++)
        check_group(arch_names[i], tu_path("%s/tests/fixtures/arch/%s", tu_source_dir(), arch_names[i]), i % 2 == 0);
}

/* A prompt of more than 32 ids prefilled by the batch (padded to a multiple
 * of 8) gives the tokens of txc_generator_run (padded to a power of two),
 * greedy and seeded. */
static void test_grouped_vs_generate(void **state)
{
    (void)state;
    static const char *models[] = {"stories260K", "qwen2", "llama_llama3", "gemma2", "gpt2"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        const char *dir = i == 0 ? stories() : tu_path("%s/tests/fixtures/arch/%s", tu_source_dir(), models[i]);
        txc_model *m = load(dir);
        const int64_t V = txc_model_config(m)->vocab_size;
        txc_generator *g = txc_generator_new(m);
        assert_non_null(g);
        static const int which[3] = {0, 2, 3}; /* 37, 34, 45 ids: 40, 40, 48 rows here; 64 in txc_generator_run */
        for (int sample = 0; sample <= 1; sample++) {
            group_out got;
            run_group(m, 3, 64, 512, true, sample, which, 3, &got);
            for (int k = 0; k < 3; k++) {
                int r = which[k];
                int32_t ids[64];
                int64_t n = prompt_n(r, group_lens[r], V, ids);
                txc_batch_request q = request(m, r, sample, ids, NULL);
                txc_generate_options o = q.gen;
                o.max_new_tokens = G_NEW;
                o.max_cache_len = 64;
                o.cache = TXC_CACHE_STATIC;
                o.jit = true;
                txc_generate_result res;
                assert_int_equal(txc_generator_run(g, ids, n, &o, &res), TXC_OK);
                assert_int_equal(res.n_new, G_NEW);
                if (memcmp(res.new_ids, got.tokens[r], sizeof(int32_t) * G_NEW) != 0)
                    fail_msg("%s: request %d (%lld ids, %s): the batch's tokens differ from txc_generator_run's",
                             models[i], r, (long long)n, sample ? "seeded" : "greedy");
                txc_generate_result_free(&res);
            }
            free_group(&got);
        }
        txc_generator_free(g);
        txc_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_no_recompile),
        cmocka_unit_test(test_gemm_row_invariance),
        cmocka_unit_test(test_stories_invariance),
        cmocka_unit_test(test_arch_invariance),
        cmocka_unit_test(test_gemm_many_row_invariance),
        cmocka_unit_test(test_grouped_prefill),
        cmocka_unit_test(test_grouped_vs_generate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
