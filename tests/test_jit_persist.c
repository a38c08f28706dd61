/* The compile cache on disk (jit/persist.c): a plan saved by one jit is
 * loaded by a fresh one (no passes, same results); the key follows the
 * input shapes, static arguments and captured constants; corrupt,
 * truncated, stale or unreadable files are rejected and recompiled, never
 * trusted (random byte flips and truncations, also with a recomputed
 * checksum so that the validation behind it is exercised); a folder that
 * cannot be written is not an error of the call; a real model's prefill
 * and decode steps round-trip through the generator. Every test works in
 * a fresh temporary folder, never in the user's cache. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/persist.h"
#include "txc/generate.h"
#include "txc/jit.h"
#include "txc/model.h"
#include "txc/ops.h"

static txc_env *env;
static txc_tensor *konst; /* read by fn without being an input: a captured constant (like RoPE's inv_freq) */
static int traces;

/* f(x, w) = silu(linear(x, w) * (arange(O) * konst) + s) * 2 + exp(-linear) with s the static byte:
 * a linear, a folded constant (arange * konst), a fused elementwise chain. */
static txc_status fn(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out, int max,
                     int *n_out)
{
    (void)ctx, (void)n, (void)max;
    traces++;
    double s = len ? ((const unsigned char *)st)[0] : 0;
    txc_tensor *y = txc_linear(in[0], in[1], NULL);
    int64_t o = txc_tensor_shape(in[1])[0];
    txc_tensor *scale = txc_mul(txc_arange(env, 0, (double)o, 1, TXC_F32), konst);
    txc_tensor *z = txc_add_scalar(txc_mul(y, scale), s);
    out[0] = txc_add(txc_mul_scalar(txc_silu(z), 2.0), txc_exp(txc_neg(y)));
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

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

/* The output as floats (malloc'd, *n elements). */
static float *values(const txc_tensor *t, int64_t *n)
{
    *n = txc_tensor_numel(t);
    float *v = malloc(sizeof(float) * (size_t)(*n > 0 ? *n : 1));
    assert_int_equal(txc_tensor_copy_to_f32(t, v, *n), TXC_OK);
    return v;
}

/* One call of a fresh jit on (x, w) with static byte `s`, cache in `dir`
 * (NULL: off); returns the output values and the jit's stats. */
static float *call(const char *dir, txc_tensor *x, txc_tensor *w, unsigned char s, int64_t *n, txc_jit_stats *stats,
                   char *msg, size_t msg_cap)
{
    txc_jit *jit = txc_jit_new(env, "fn", fn, NULL);
    assert_non_null(jit);
    assert_int_equal(txc_jit_set_compile_cache(jit, dir), TXC_OK);
    txc_tensor *in[2] = {x, w}, *out[1];
    int n_out;
    txc_clear_error();
    assert_int_equal(txc_jit_call(jit, in, 2, NULL, &s, 1, out, 1, &n_out), TXC_OK);
    assert_string_equal(txc_last_error(), ""); /* nothing of the cache leaks into the error state */
    float *v = values(out[0], n);
    *stats = txc_jit_get_stats(jit);
    if (msg)
        snprintf(msg, msg_cap, "%s", txc_jit_compile_cache_message(jit));
    txc_jit_free(jit);
    return v;
}

/* The .txcplan files in dir (names into names[], sorted). */
static int plans(const char *dir, char names[][256], int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".txcplan") && !strstr(e->d_name, ".tmp") && n < max)
            snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[256];
            memcpy(t, names[j], 256);
            memcpy(names[j], names[j - 1], 256);
            memcpy(names[j - 1], t, 256);
        }
    return n;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void set_konst(float base)
{
    float v[3] = {base, base + 0.5f, base - 0.25f};
    memcpy(txc_tensor_data_ptr(konst), v, sizeof v);
}

/* Recompute a file's trailing checksum after editing it. */
static void reseal(unsigned char *data, size_t n)
{
    txc_plan_key k = txc_persist_hash(data, n - 16);
    memcpy(data + n - 16, k.h, 16);
}

static unsigned char *find_bytes(unsigned char *hay, size_t n, const void *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            return hay + i;
    return NULL;
}

static void assert_same(const float *a, const float *b, int64_t n)
{
    assert_memory_equal(a, b, sizeof(float) * (size_t)n);
}

static void test_roundtrip(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 4}, 0.1f), *w = make(2, (int64_t[]){3, 4}, 0.2f);
    txc_jit_stats st;
    int64_t n, n2, n3;
    char msg[8192];
    float *ref = call(NULL, x, w, 1, &n, &st, NULL, 0);
    assert_int_equal(st.cache_saves + st.cache_loads, 0);

    traces = 0;
    float *a = call(dir, x, w, 1, &n2, &st, msg, sizeof msg);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.cache_loads, 0);
    assert_int_equal(st.cache_saves, 1);
    assert_string_equal(st.last_compile_source, "compiled");
    assert_non_null(strstr(msg, "compile cache: saved"));
    char names[8][256];
    assert_int_equal(plans(dir, names, 8), 1);
    assert_int_equal(count_files(dir), 1); /* no temporary left behind */
    assert_int_equal(strncmp(names[0], "fn-", 3), 0);
    assert_int_equal(strlen(names[0]), strlen("fn-") + 32 + strlen(".txcplan"));

    /* a fresh jit (as another process would) loads instead of compiling */
    float *b = call(dir, x, w, 1, &n3, &st, msg, sizeof msg);
    assert_int_equal(traces, 2); /* traced both times: tracing is how the key is known */
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.cache_loads, 1);
    assert_int_equal(st.cache_saves, 0);
    assert_int_equal(st.cache_rejects, 0);
    assert_string_equal(st.last_compile_source, "loaded from cache");
    assert_non_null(strstr(msg, "compile cache: loaded"));
    assert_true(st.nodes_compiled > 0 && st.nodes_compiled < st.nodes_traced);
    assert_int_equal(n, n2);
    assert_int_equal(n, n3);
    assert_same(ref, a, n);
    assert_same(ref, b, n);

    /* the loaded plan is the compiled one: same graph, and it is reused */
    txc_jit *j1 = txc_jit_new(env, "fn", fn, NULL), *j2 = txc_jit_new(env, "fn", fn, NULL);
    txc_jit_set_compile_cache(j2, dir);
    txc_tensor *in[2] = {x, w}, *out[1];
    int n_out;
    unsigned char s = 1;
    assert_int_equal(txc_jit_call(j1, in, 2, NULL, &s, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_call(j2, in, 2, NULL, &s, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_call(j2, in, 2, NULL, &s, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(j2).hits, 1);
    assert_int_equal(txc_jit_get_stats(j2).cache_loads, 1);
    char *d1 = NULL, *d2 = NULL;
    size_t l1, l2;
    FILE *f1 = open_memstream(&d1, &l1), *f2 = open_memstream(&d2, &l2);
    txc_jit_dump_last_graph(j1, f1);
    txc_jit_dump_last_graph(j2, f2);
    fclose(f1);
    fclose(f2);
    assert_string_equal(d1, d2);
    assert_non_null(strstr(d1, "fused:"));
    free(d1);
    free(d2);
    txc_jit_free(j1);
    txc_jit_free(j2);

    /* NULL turns it off */
    txc_jit *j3 = txc_jit_new(env, "fn", fn, NULL);
    txc_jit_set_compile_cache(j3, dir);
    assert_string_equal(txc_jit_compile_cache(j3), dir);
    txc_jit_set_compile_cache(j3, NULL);
    assert_null(txc_jit_compile_cache(j3));
    assert_int_equal(txc_jit_call(j3, in, 2, NULL, &s, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(j3).cache_loads, 0);
    assert_string_equal(txc_jit_compile_cache_message(j3), "");
    txc_jit_free(j3);

    free(ref);
    free(a);
    free(b);
    txc_env_scope_end(env, mark);
    tu_rm_rf(dir);
}

static void test_keys(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 4}, 0.1f), *w = make(2, (int64_t[]){3, 4}, 0.2f);
    txc_tensor *x3 = make(2, (int64_t[]){3, 4}, 0.1f);
    txc_jit_stats st;
    int64_t n;
    char names[8][256];
    free(call(dir, x, w, 1, &n, &st, NULL, 0));
    assert_int_equal(plans(dir, names, 8), 1);
    /* another input shape: another file */
    free(call(dir, x3, w, 1, &n, &st, NULL, 0));
    assert_int_equal(st.cache_loads, 0);
    assert_int_equal(plans(dir, names, 8), 2);
    /* another static argument: another file, and its own result */
    float *ref = call(NULL, x, w, 2, &n, &st, NULL, 0);
    float *v = call(dir, x, w, 2, &n, &st, NULL, 0);
    assert_int_equal(st.cache_loads, 0);
    assert_int_equal(plans(dir, names, 8), 3);
    assert_same(ref, v, n);
    free(ref);
    free(v);
    /* another captured constant (same shape): another key, never the old plan's bytes */
    set_konst(2.0f);
    ref = call(NULL, x, w, 1, &n, &st, NULL, 0);
    v = call(dir, x, w, 1, &n, &st, NULL, 0);
    assert_int_equal(st.cache_loads, 0);
    assert_int_equal(st.cache_saves, 1);
    assert_int_equal(plans(dir, names, 8), 4);
    assert_same(ref, v, n);
    free(v);
    /* ...and that plan loads with that constant */
    v = call(dir, x, w, 1, &n, &st, NULL, 0);
    assert_int_equal(st.cache_loads, 1);
    assert_same(ref, v, n);
    free(v);
    free(ref);
    /* back to the first constant: the first file again */
    set_konst(1.0f);
    v = call(dir, x, w, 1, &n, &st, NULL, 0);
    assert_int_equal(st.cache_loads, 1);
    free(v);
    assert_int_equal(plans(dir, names, 8), 4);
    txc_env_scope_end(env, mark);
    tu_rm_rf(dir);
}

/* The one plan file of dir: path and bytes. */
static unsigned char *the_file(const char *dir, char *path, size_t cap, size_t *len)
{
    char names[4][256];
    assert_int_equal(plans(dir, names, 4), 1);
    snprintf(path, cap, "%s/%s", dir, names[0]);
    unsigned char *d = (unsigned char *)tu_read_file(path, len);
    assert_non_null(d);
    return d;
}

/* Write `data` as the plan, run a fresh jit: it must reject the file
 * (or, when `maybe`, possibly load it), compute, and rewrite the file. */
static void expect_rejected(const char *dir, const char *path, const unsigned char *data, size_t len, txc_tensor *x,
                            txc_tensor *w, const float *ref, int64_t n, const char *reason, bool maybe,
                            const unsigned char *good, size_t good_len)
{
    assert_int_equal(tu_write_file(path, data, len), 0);
    txc_jit_stats st;
    int64_t m;
    char msg[8192];
    float *v = call(dir, x, w, 1, &m, &st, msg, sizeof msg);
    assert_int_equal(m, n);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.cache_loads + st.cache_rejects, 1);
    if (!maybe) {
        if (st.cache_rejects != 1)
            fail_msg("a corrupted file was loaded (%s)", msg);
        assert_same(ref, v, n); /* a rejected file: recompiled, exact */
    }
    if (st.cache_rejects) {
        assert_int_equal(st.cache_saves, 1);
        assert_non_null(strstr(msg, ", recompiled"));
        if (reason && !strstr(msg, reason))
            fail_msg("expected '%s' in '%s'", reason, msg);
        size_t l;
        unsigned char *again = (unsigned char *)tu_read_file(path, &l);
        assert_non_null(again); /* overwritten with the good plan */
        assert_int_equal(l, good_len);
        assert_memory_equal(again, good, l);
        free(again);
    }
    free(v);
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void test_corrupt(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 4}, 0.1f), *w = make(2, (int64_t[]){3, 4}, 0.2f);
    txc_jit_stats st;
    int64_t n;
    float *ref = call(dir, x, w, 1, &n, &st, NULL, 0);
    char path[1024];
    size_t len;
    unsigned char *good = the_file(dir, path, sizeof path, &len);
    unsigned char *bad = malloc(len);

    /* named cases */
    memcpy(bad, good, len);
    bad[0] ^= 0xff;
    expect_rejected(dir, path, bad, len, x, w, ref, n, "is corrupt (not a plan file)", false, good, len);
    memcpy(bad, good, len);
    bad[8] = 99; /* the format version */
    expect_rejected(dir, path, bad, len, x, w, ref, n, "is stale (format 99", false, good, len);
    memcpy(bad, good, len);
    bad[20] ^= 0x01; /* the txc version string, checksum recomputed */
    reseal(bad, len);
    expect_rejected(dir, path, bad, len, x, w, ref, n, "is stale (written by txc", false, good, len);
    memcpy(bad, good, len);
    bad[len / 2] ^= 0x10;
    expect_rejected(dir, path, bad, len, x, w, ref, n, "is corrupt (checksum)", false, good, len);
    expect_rejected(dir, path, good, len - 1, x, w, ref, n, "is corrupt (checksum)", false, good, len);
    expect_rejected(dir, path, good, 0, x, w, ref, n, "is corrupt (not a plan file)", false, good, len);
    /* a captured constant's bytes changed (checksum recomputed): compared with the traced ones */
    float kv[3];
    memcpy(kv, txc_tensor_data_ptr(konst), sizeof kv);
    memcpy(bad, good, len);
    unsigned char *at = find_bytes(bad, len, kv, sizeof kv);
    assert_non_null(at);
    at[1] ^= 0x40;
    reseal(bad, len);
    expect_rejected(dir, path, bad, len, x, w, ref, n, "captured constant", false, good, len);
    /* a file whose key is another's (renamed) */
    uint32_t vlen;
    memcpy(&vlen, good + 16, 4); /* after magic, format, byte order: the version's length */
    memcpy(bad, good, len);
    bad[20 + vlen + 8 + 3] ^= 0x01; /* inside the key (after the version and the op-table fingerprint) */
    reseal(bad, len);
    expect_rejected(dir, path, bad, len, x, w, ref, n, NULL, false, good, len);

    /* random single-byte changes anywhere: always caught by the checksum */
    for (int it = 0; it < 300; it++) {
        memcpy(bad, good, len);
        size_t pos = next_rand() % len;
        bad[pos] ^= (unsigned char)(1 + next_rand() % 255);
        expect_rejected(dir, path, bad, len, x, w, ref, n, NULL, false, good, len);
    }
    /* random truncations and extensions */
    for (int it = 0; it < 60; it++) {
        size_t l = next_rand() % len;
        expect_rejected(dir, path, good, l, x, w, ref, n, NULL, false, good, len);
    }
    unsigned char *longer = calloc(len + 64, 1);
    memcpy(longer, good, len);
    expect_rejected(dir, path, longer, len + 64, x, w, ref, n, NULL, false, good, len);
    free(longer);
    /* changes behind a valid checksum (a file written by a buggy or hostile
     * writer): the validation must hold — no crash, no read or write out of
     * bounds (run under AddressSanitizer) — though a change in, e.g., a
     * folded constant's bytes may go unnoticed */
    int loaded = 0, iters = getenv("TXC_PERSIST_FUZZ") ? atoi(getenv("TXC_PERSIST_FUZZ")) : 1500;
    for (int it = 0; it < iters; it++) {
        memcpy(bad, good, len);
        int flips = 1 + (int)(next_rand() % 3);
        for (int k = 0; k < flips; k++) {
            size_t pos = 64 + next_rand() % (len - 80); /* past the header, before the checksum */
            uint64_t r = next_rand();
            if (r & 1)
                bad[pos] ^= (unsigned char)(1u << (r >> 1) % 8);
            else
                bad[pos] = (unsigned char)(r >> 8);
        }
        reseal(bad, len);
        assert_int_equal(tu_write_file(path, bad, len), 0);
        txc_jit *jit = txc_jit_new(env, "fn", fn, NULL);
        txc_jit_set_compile_cache(jit, dir);
        txc_tensor *in[2] = {x, w}, *out[1];
        int n_out;
        unsigned char s = 1;
        txc_jit_call(jit, in, 2, NULL, &s, 1, out, 1, &n_out); /* may fail at run time (e.g. an index) */
        txc_clear_error();
        st = txc_jit_get_stats(jit);
        assert_int_equal(st.cache_loads + st.cache_rejects, 1);
        loaded += (int)st.cache_loads;
        txc_jit_free(jit);
    }
    printf("resealed random changes: %d of %d passed the validation\n", loaded, iters);
    free(bad);
    free(good);
    free(ref);
    txc_env_scope_end(env, mark);
    tu_rm_rf(dir);
}

static void test_unwritable(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 4}, 0.1f), *w = make(2, (int64_t[]){3, 4}, 0.2f);
    txc_jit_stats st;
    int64_t n;
    char msg[8192];
    float *ref = call(NULL, x, w, 1, &n, &st, NULL, 0);
    /* a folder below a regular file cannot exist */
    const char *file = tu_path("%s/a-file", dir);
    assert_int_equal(tu_write_file(file, "x", 1), 0);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", file);
    float *v = call(sub, x, w, 1, &n, &st, msg, sizeof msg);
    assert_same(ref, v, n);
    free(v);
    assert_int_equal(st.cache_saves, 0);
    assert_int_equal(st.cache_errors, 1);
    assert_int_equal(st.cache_rejects, 0); /* no file was there to reject (ENOTDIR is "absent") */
    assert_string_equal(st.last_compile_source, "compiled");
    assert_non_null(strstr(msg, "plan not saved"));
    assert_null(strstr(msg, "recompiled"));
    /* why the first plan was not written, kept for the caller's warning */
    assert_non_null(strstr(st.cache_save_error, "cannot create the folder"));
    assert_non_null(strstr(st.cache_save_error, "Not a directory"));
    /* a folder where the plan file should be: not readable as a plan, not replaceable */
    char plandir[8192];
    v = call(dir, x, w, 1, &n, &st, NULL, 0); /* learn the file name */
    free(v);
    char names[4][256];
    assert_int_equal(plans(dir, names, 4), 1);
    snprintf(plandir, sizeof plandir, "%s/%s", dir, names[0]);
    assert_int_equal(unlink(plandir), 0);
    assert_int_equal(mkdir(plandir, 0700), 0);
    v = call(dir, x, w, 1, &n, &st, msg, sizeof msg);
    assert_same(ref, v, n);
    free(v);
    assert_int_equal(st.cache_rejects, 1);
    assert_int_equal(st.cache_errors, 1);
    assert_non_null(strstr(msg, "not a regular file (a folder): skipped"));
    assert_int_equal(rmdir(plandir), 0);
    /* a FIFO there: opening it for reading blocked forever; skipped, then
     * replaced by the plan (alarm: a hang fails the test) */
    assert_int_equal(mkfifo(plandir, 0600), 0);
    alarm(60);
    v = call(dir, x, w, 1, &n, &st, msg, sizeof msg);
    alarm(0);
    assert_same(ref, v, n);
    free(v);
    assert_int_equal(st.cache_rejects, 1);
    assert_int_equal(st.cache_saves, 1);
    assert_non_null(strstr(msg, "not a regular file (a FIFO): skipped"));
    struct stat sb;
    assert_int_equal(stat(plandir, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    /* a read-only folder (not for root, who may write anyway) */
    if (geteuid() != 0) {
        char ro[512];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        assert_int_equal(mkdir(ro, 0500), 0);
        v = call(ro, x, w, 1, &n, &st, msg, sizeof msg);
        assert_same(ref, v, n);
        free(v);
        assert_int_equal(st.cache_errors, 1);
        assert_int_equal(count_files(ro), 0);
        chmod(ro, 0700);
    }
    free(ref);
    txc_env_scope_end(env, mark);
    tu_rm_rf(dir);
}

/* One call of a fresh jit capped at max_bytes; returns its stats. */
static txc_jit_stats call_capped(const char *dir, int64_t max_bytes, txc_tensor *x, txc_tensor *w, unsigned char s,
                                 char *msg, size_t msg_cap)
{
    txc_jit *jit = txc_jit_new(env, "fn", fn, NULL);
    assert_non_null(jit);
    assert_int_equal(txc_jit_set_compile_cache(jit, dir), TXC_OK);
    assert_int_equal(txc_jit_set_compile_cache_max_bytes(jit, max_bytes), TXC_OK);
    txc_tensor *in[2] = {x, w}, *out[1];
    int n_out;
    assert_int_equal(txc_jit_call(jit, in, 2, NULL, &s, 1, out, 1, &n_out), TXC_OK);
    txc_jit_stats st = txc_jit_get_stats(jit);
    snprintf(msg, msg_cap, "%s", txc_jit_compile_cache_message(jit));
    assert_int_equal(txc_jit_set_compile_cache_max_bytes(jit, -1), TXC_ERR_INVALID);
    txc_jit_free(jit);
    return st;
}

/* The plan file of static byte s in dir (its path into buf). */
static const char *plan_of(const char *dir, unsigned char s, char names[][256], int n, const char *before[], char *buf)
{
    (void)s;
    for (int i = 0; i < n; i++) {
        bool old = false;
        for (int k = 0; before[k]; k++)
            old = old || !strcmp(before[k], names[i]);
        if (!old) {
            snprintf(buf, 4096, "%s/%s", dir, names[i]);
            return names[i];
        }
    }
    fail_msg("no new plan file");
    return NULL;
}

/* The size cap: past it, the least recently used plan files go first (a
 * load counts as a use), the plan just saved stays; no cap: the folder
 * grows (it did, without bound: every jit-dynamic run added plans). */
static void test_size_cap(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 4}, 0.1f), *w = make(2, (int64_t[]){3, 4}, 0.2f);
    char msg[8192], names[8][256], path[4][4096];
    const char *seen[8] = {0};
    /* four plans (static bytes 1..4), no cap; ages 40, 30, 20, 10 s */
    for (unsigned char s = 1; s <= 4; s++) {
        txc_jit_stats st = call_capped(dir, 0, x, w, s, msg, sizeof msg);
        assert_int_equal(st.cache_saves, 1);
        int n = plans(dir, names, 8);
        assert_int_equal(n, s);
        seen[s - 1] = strdup(plan_of(dir, s, names, n, seen, path[s - 1]));
        struct timespec t[2];
        clock_gettime(CLOCK_REALTIME, &t[0]);
        t[0].tv_sec -= 50 - 10 * s;
        t[1] = t[0];
        assert_int_equal(utimensat(AT_FDCWD, path[s - 1], t, 0), 0);
    }
    struct stat sb;
    assert_int_equal(stat(path[0], &sb), 0);
    int64_t one = (int64_t)sb.st_size;
    /* loading plan 1 makes it the most recently used */
    txc_jit_stats st = call_capped(dir, 0, x, w, 1, msg, sizeof msg);
    assert_int_equal(st.cache_loads, 1);
    /* a fifth plan under a cap of three plans: 2 and 3, the least recently used, go */
    st = call_capped(dir, 3 * one + one / 2, x, w, 5, msg, sizeof msg);
    assert_int_equal(st.cache_saves, 1);
    assert_int_equal(st.cache_evictions, 2);
    assert_non_null(strstr(msg, "evicted 2 least recently used plan file(s)"));
    assert_int_equal(stat(path[0], &sb), 0);
    assert_int_not_equal(stat(path[1], &sb), 0);
    assert_int_not_equal(stat(path[2], &sb), 0);
    assert_int_equal(stat(path[3], &sb), 0);
    assert_int_equal(plans(dir, names, 8), 3);
    /* a cap below one plan keeps just the plan saved */
    st = call_capped(dir, 1, x, w, 6, msg, sizeof msg);
    assert_int_equal(st.cache_evictions, 3);
    assert_int_equal(plans(dir, names, 8), 1);
    /* the default cap */
    txc_jit *jit = txc_jit_new(env, "fn", fn, NULL);
    assert_int_equal(txc_jit_set_compile_cache(jit, dir), TXC_OK);
    txc_tensor *in[2] = {x, w}, *out[1];
    int n_out;
    unsigned char s7 = 7;
    assert_int_equal(txc_jit_call(jit, in, 2, NULL, &s7, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(jit).cache_evictions, 0);
    txc_jit_free(jit);
    assert_int_equal(plans(dir, names, 8), 2);
    for (int i = 0; i < 8; i++)
        free((void *)seen[i]);
    txc_env_scope_end(env, mark);
    tu_rm_rf(dir);
}

static void test_default_folder(void **state)
{
    (void)state;
    char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char buf[256];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/h", 1);
    assert_true(txc_jit_default_compile_cache(buf, sizeof buf));
    assert_string_equal(buf, "/x/cache/txc");
    setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as the XDG spec says */
    assert_true(txc_jit_default_compile_cache(buf, sizeof buf));
    assert_string_equal(buf, "/h/.cache/txc");
    unsetenv("XDG_CACHE_HOME");
    assert_true(txc_jit_default_compile_cache(buf, sizeof buf));
    assert_string_equal(buf, "/h/.cache/txc");
    unsetenv("HOME");
    assert_false(txc_jit_default_compile_cache(buf, sizeof buf));
    assert_string_equal(buf, "");
    if (xdg)
        setenv("XDG_CACHE_HOME", xdg, 1);
    if (home)
        setenv("HOME", home, 1);
    free(xdg);
    free(home);
}

/* A real model through the generator: the prefill and decode plans are
 * saved by one generator and loaded by the next, same tokens. */
static void test_model(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(tu_path("%s/models/stories260K", tu_shared_dir()), NULL, &m), TXC_OK);
    int32_t prompt[4] = {1, 403, 407, 261};
    txc_generate_options o = txc_generate_default_options(m, NULL);
    o.max_new_tokens = 12;
    o.n_eos = 0;
    int32_t ids[3][12];
    for (int run = 0; run < 3; run++) {
        txc_generator *gen = txc_generator_new(m);
        assert_non_null(gen);
        assert_int_equal(txc_generator_set_compile_cache(gen, run ? dir : NULL), TXC_OK);
        txc_generate_result r;
        assert_int_equal(txc_generator_run(gen, prompt, 4, &o, &r), TXC_OK);
        assert_int_equal(r.n_new, 12);
        memcpy(ids[run], r.new_ids, sizeof ids[run]);
        txc_generate_result_free(&r);
        txc_jit_stats p = txc_generator_jit_stats(gen, 0), d = txc_generator_jit_stats(gen, 1);
        assert_int_equal(p.misses, 1);
        assert_int_equal(d.misses, 1);
        if (run == 1) {
            assert_int_equal(p.cache_saves + d.cache_saves, 2);
            assert_int_equal(p.cache_loads + d.cache_loads, 0);
        } else if (run == 2) {
            assert_int_equal(p.cache_loads + d.cache_loads, 2);
            assert_int_equal(p.cache_rejects + d.cache_rejects, 0);
            assert_string_equal(d.last_compile_source, "loaded from cache");
            printf("stories260K: compile ms prefill %.2f + decode %.2f (loaded; tracing %.2f + %.2f)\n",
                   p.compile_ms, d.compile_ms, p.trace_ms, d.trace_ms);
        } else {
            printf("stories260K: compile ms prefill %.2f + decode %.2f (no cache)\n", p.compile_ms, d.compile_ms);
        }
        txc_generator_free(gen);
    }
    assert_memory_equal(ids[0], ids[1], sizeof ids[0]);
    assert_memory_equal(ids[0], ids[2], sizeof ids[0]);
    char names[4][256];
    assert_int_equal(plans(dir, names, 4), 2);
    txc_model_free(m);
    tu_rm_rf(dir);
}

int main(void)
{
    env = txc_env_default();
    float k[3] = {1.0f, 1.5f, 0.75f};
    konst = txc_tensor_from_data(env, TXC_F32, 1, (int64_t[]){3}, k);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),   cmocka_unit_test(test_keys),
        cmocka_unit_test(test_corrupt),     cmocka_unit_test(test_unwritable),
        cmocka_unit_test(test_default_folder), cmocka_unit_test(test_model),
        cmocka_unit_test(test_size_cap),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    txc_tensor_release(konst);
    return rc;
}
