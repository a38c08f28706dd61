/* fuzz_plan: the compiled-plan loader (src/jit/persist.c) and what runs a
 * loaded plan. Byte 0 of the input picks one of two functions, the rest is
 * the .txcplan file a jit with its compile cache in a private folder finds
 * for that function's call: fresh jits call the function, so the file is
 * read, checked (checksum, header, every index, size and offset, shapes
 * inferred again, constants compared) and, when accepted, executed; when
 * rejected the function is compiled again (and the file rewritten).
 * The functions: 0, a linear, a folded captured constant and a fused
 * elementwise chain (as tests/test_jit_persist.c); 1, an attention step over
 * a static cache: rms_norm, linear, view/transpose, index_copy_ into the
 * cache (an input written in place), causal_attention, softmax.
 * The custom mutator mutates the file and then recomputes its trailing
 * checksum (15 times in 16), so that mutations get past the checksum to the
 * validation behind it; an input whose header is not this build's (a stale
 * or hand-made seed) is first replaced by the file this build writes, so the
 * committed seeds stay useful when the format or the op table change.
 * Property: a call succeeds or fails with a message; no crash, leak or UB. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzutil.h"
#include "jit/persist.h"
#include "txc/env.h"
#include "txc/jit.h"
#include "txc/ops.h"
#include "txc/tensor.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static txc_env *env;
static txc_tensor *konst, *kcache;
static txc_tensor *inputs[2][5];
static int n_inputs[2] = {2, 5};
static char plan_path[2][4096];
static uint8_t *fresh[2]; /* the plan this build writes, case c */
static size_t fresh_len[2], header_len[2];

static txc_status fn0(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out, int max,
                      int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    txc_tensor *y = txc_linear(in[0], in[1], NULL);
    int64_t o = txc_tensor_shape(in[1])[0];
    txc_tensor *scale = txc_mul(txc_arange(env, 0, (double)o, 1, TXC_F32), konst);
    txc_tensor *z = txc_add_scalar(txc_mul(y, scale), 1.0);
    out[0] = txc_add(txc_mul_scalar(txc_silu(z), 2.0), txc_exp(txc_neg(y)));
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

/* x (1, 2, 8), wq (8, 8), norm weight (8), cache (1, 2, 6, 4), cache_position int64 (2). */
static txc_status fn1(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out, int max,
                      int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    txc_tensor *h = txc_rms_norm(in[0], in[2], 1e-6);
    txc_tensor *q = txc_transpose(txc_view(txc_linear(h, in[1], NULL), 4, (int64_t[]){1, 2, 2, 4}), 1, 2);
    txc_status s = txc_index_copy_(in[3], 2, in[4], q);
    if (s)
        return s;
    txc_tensor *a = txc_causal_attention(q, in[3], in[3], in[4], NAN);
    out[0] = txc_softmax(txc_add(a, q), -1);
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static txc_jit_fn fns[2] = {fn0, fn1};
static const char *names[2] = {"fuzzplan0", "fuzzplan1"};

static txc_tensor *make(int ndim, const int64_t *shape, float seed)
{
    int64_t n = txc_shape_numel(ndim, shape);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = sinf(seed + 0.37f * (float)i);
    txc_tensor *t = txc_tensor_from_data(env, TXC_F32, ndim, shape, v);
    free(v);
    return t;
}

/* Calls that loaded a plan from the file / rejected it (printed at exit:
 * how many mutated plans got through the checks to the executor). */
static unsigned long n_loaded, n_rejected;

static void print_counts(void)
{
    fprintf(stderr, "fuzz_plan: %lu plans loaded and run, %lu rejected\n", n_loaded, n_rejected);
}

static txc_status call(int c, const char *dir)
{
    if (c == 1)
        memset(txc_tensor_data_ptr(kcache), 0, sizeof(float) * 48);
    int mark = txc_env_scope_begin(env);
    txc_jit *jit = txc_jit_new(env, names[c], fns[c], NULL);
    if (!jit)
        fz_die("txc_jit_new");
    txc_status s = txc_jit_set_compile_cache(jit, dir);
    txc_tensor *out[1];
    int n_out = 0;
    if (!s)
        s = txc_jit_call(jit, inputs[c], n_inputs[c], NULL, NULL, 0, out, 1, &n_out);
    txc_jit_stats js = txc_jit_get_stats(jit);
    n_loaded += js.cache_loads;
    n_rejected += js.cache_rejects;
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
    return s;
}

/* The length of a plan's header up to and including the key (see
 * jit/persist.h), 0 when it is too short to tell. */
static size_t header_of(const uint8_t *p, size_t n)
{
    size_t at = 16; /* magic, format, byte-order tag */
    uint32_t vlen;
    if (n < at + 4)
        return 0;
    memcpy(&vlen, p + at, 4);
    at += 4 + (size_t)vlen + 8 + 16;
    return at <= n ? at : 0;
}

static void find_plan(int c, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, names[c], strlen(names[c])) == 0 && strstr(e->d_name, ".txcplan") &&
            !strstr(e->d_name, ".tmp"))
            snprintf(plan_path[c], sizeof plan_path[c], "%s/%s", dir, e->d_name);
    if (d)
        closedir(d);
    FILE *f = plan_path[c][0] ? fopen(plan_path[c], "rb") : NULL;
    if (!f) {
        fprintf(stderr, "fuzz_plan: no plan saved for case %d in %s\n", c, dir);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    fresh_len[c] = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    fresh[c] = malloc(fresh_len[c]);
    if (fread(fresh[c], 1, fresh_len[c], f) != fresh_len[c])
        fz_die("fuzz_plan: read");
    fclose(f);
    header_len[c] = header_of(fresh[c], fresh_len[c]);
    if (!header_len[c])
        exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    env = txc_env_default();
    float k[3] = {1.0f, 1.5f, 0.75f};
    konst = txc_tensor_from_data(env, TXC_F32, 1, (int64_t[]){3}, k);
    inputs[0][0] = make(2, (int64_t[]){2, 4}, 0.1f);
    inputs[0][1] = make(2, (int64_t[]){3, 4}, 0.2f);
    inputs[1][0] = make(3, (int64_t[]){1, 2, 8}, 0.3f);
    inputs[1][1] = make(2, (int64_t[]){8, 8}, 0.4f);
    inputs[1][2] = make(1, (int64_t[]){8}, 0.5f);
    kcache = inputs[1][3] = make(4, (int64_t[]){1, 2, 6, 4}, 0.0f);
    int64_t pos[2] = {2, 3};
    inputs[1][4] = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){2}, pos);
    const char *dir = fz_tmpdir();
    for (int c = 0; c < 2; c++) {
        if (call(c, dir) != TXC_OK) {
            fprintf(stderr, "fuzz_plan: case %d fails: %s\n", c, txc_last_error());
            exit(1);
        }
        find_plan(c, dir);
    }
    atexit(print_counts);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int c = data[0] & 1;
    fz_write_file(plan_path[c], data + 1, size - 1);
    txc_clear_error();
    if (call(c, fz_tmpdir()) != TXC_OK && !txc_last_error()[0])
        abort();
    return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    if (max_size < 1 + 16)
        return size;
    if (size < 1) {
        data[0] = (uint8_t)(seed & 1);
        size = 1;
    }
    int c = data[0] & 1;
    size_t n = size - 1;
    if ((n < header_len[c] || memcmp(data + 1, fresh[c], header_len[c]) != 0) && (seed >> 1) % 8 != 0 &&
        1 + fresh_len[c] <= max_size) {
        memcpy(data + 1, fresh[c], fresh_len[c]); /* a stale or foreign seed: start from this build's plan */
        n = fresh_len[c];
    }
    if (n < 16 || (seed >> 4) % 16 == 0) /* a raw mutation: the checksum no longer matches */
        return 1 + LLVMFuzzerMutate(data + 1, n, max_size - 1);
    n = LLVMFuzzerMutate(data + 1, n - 16, max_size - 1 - 16);
    txc_plan_key sum = txc_persist_hash(data + 1, n);
    memcpy(data + 1 + n, sum.h, 16);
    return 1 + n + 16;
}
