/* Where the weights live (txc_weights_mode): the copy into anonymous memory
 * gives the same logits and tokens as the mmap, bit for bit (stories260K in
 * f32, a llama written here in bf16), is read-only, survives a refused
 * MADV_HUGEPAGE, drops the file's mapping, and does not hold the file and
 * the copy in the RSS at once (read with pread, or in the fallback copied
 * from the mapping and its pages dropped). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/impl.h"
#include "models/model_impl.h"
#include "txc/generate.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/threads.h"

static const char *stories_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

static txc_model *load(const char *dir, txc_weights_mode mode)
{
    txc_model_options o = {.weights = mode};
    txc_model *m = NULL;
    txc_status s = txc_model_load(dir, &o, &m);
    if (s != TXC_OK)
        fail_msg("load %s (%s): %s", dir, txc_weights_mode_name(mode), txc_last_error());
    return m;
}

/* Logits (float32, vocab) of the last of `n` ids; malloc'd. */
static float *last_logits(txc_model *m, const int64_t *ids, int64_t n)
{
    txc_env *env = txc_model_env(m);
    int mark = txc_env_scope_begin(env);
    int64_t shape[2] = {1, n};
    txc_tensor *in = txc_tensor_from_data(env, TXC_I64, 2, shape, ids);
    txc_tensor *out = txc_model_forward(m, in, NULL, NULL, txc_arange(env, 0, n, 1, TXC_I64), 1);
    assert_non_null(out);
    txc_tensor *c = txc_contiguous(out);
    assert_non_null(c);
    size_t bytes = (size_t)txc_tensor_numel(c) * sizeof(float);
    float *v = malloc(bytes);
    assert_non_null(v);
    memcpy(v, txc_tensor_data_ptr(c), bytes);
    txc_env_scope_end(env, mark);
    return v;
}

static int32_t *greedy(txc_model *m, bool jit, int64_t *n_new)
{
    int32_t prompt[] = {1, 403, 407, 261, 378};
    txc_generate_options o = txc_generate_default_options(m, NULL);
    o.max_new_tokens = 24;
    o.n_eos = 0;
    o.jit = jit;
    txc_generate_result r;
    assert_int_equal(txc_generate(m, prompt, 5, &o, &r), TXC_OK);
    int32_t *ids = r.new_ids;
    *n_new = r.n_new;
    r.new_ids = NULL;
    txc_generate_result_free(&r);
    return ids;
}

/* Both modes hold the same parameters, the same bytes; only the storage differs. */
static void check_same_params(txc_model *a, txc_model *b)
{
    assert_int_equal(txc_model_num_parameters(a), txc_model_num_parameters(b));
    for (int i = 0; i < txc_model_num_parameters(a); i++) {
        txc_tensor *x = txc_model_parameter(a, i), *y = txc_model_parameter(b, i);
        assert_string_equal(txc_model_parameter_name(a, i), txc_model_parameter_name(b, i));
        assert_int_equal(txc_tensor_dtype(x), txc_tensor_dtype(y));
        assert_int_equal(txc_tensor_numel(x), txc_tensor_numel(y));
        assert_memory_equal(txc_tensor_data_ptr(x), txc_tensor_data_ptr(y),
                            (size_t)txc_tensor_numel(x) * txc_dtype_size(txc_tensor_dtype(x)));
    }
}

static void check_modes_agree(const char *dir, const int64_t *ids, int64_t n, bool tokens)
{
    txc_model *mm = load(dir, TXC_WEIGHTS_MMAP), *cp = load(dir, TXC_WEIGHTS_COPY);
    check_same_params(mm, cp);
    int64_t vocab = txc_model_config(mm)->vocab_size;
    float *a = last_logits(mm, ids, n), *b = last_logits(cp, ids, n);
    assert_memory_equal(a, b, sizeof(float) * (size_t)vocab);
    free(a);
    free(b);
    if (tokens)
        for (int jit = 0; jit < 2; jit++) {
            int64_t na, nb;
            int32_t *ta = greedy(mm, jit, &na), *tb = greedy(cp, jit, &nb);
            assert_int_equal(na, nb);
            assert_memory_equal(ta, tb, sizeof(int32_t) * (size_t)na);
            free(ta);
            free(tb);
        }
    txc_model_free(mm);
    txc_model_free(cp);
}

static void test_stories_copy_equals_mmap(void **state)
{
    (void)state;
    int64_t ids[] = {1, 403, 407, 261, 378, 259};
    check_modes_agree(stories_dir(), ids, 6, true);
    /* on two threads too (the copy is split over the pool) */
    assert_int_equal(txc_threads_set(2), TXC_OK);
    check_modes_agree(stories_dir(), ids, 6, false);
    assert_int_equal(txc_threads_set(0), TXC_OK);
}

static void test_info_and_storage(void **state)
{
    (void)state;
    txc_model *mm = load(stories_dir(), TXC_WEIGHTS_MMAP), *cp = load(stories_dir(), TXC_WEIGHTS_COPY);
    txc_weights_info a = txc_model_weights_info(mm), b = txc_model_weights_info(cp);
    assert_int_equal(a.mode, TXC_WEIGHTS_MMAP);
    assert_int_equal(b.mode, TXC_WEIGHTS_COPY);
    assert_string_equal(txc_weights_mode_name(a.mode), "mmap");
    assert_string_equal(txc_weights_mode_name(b.mode), "copy");
    /* stories260K is float32: every parameter is used in place (no conversion) */
    assert_int_equal(a.param_bytes, 260032 * 4);
    assert_int_equal(a.file_bytes, a.param_bytes);
    assert_int_equal(b.param_bytes, a.param_bytes);
    assert_int_equal(b.file_bytes, a.file_bytes);
    for (int i = 0; i < txc_model_num_parameters(cp); i++) {
        txc_storage *s = txc_array_storage(txc_tensor_array(txc_model_parameter(cp, i)));
        assert_int_equal(txc_storage_get_kind(s), TXC_STORAGE_ANON);
        assert_true(txc_storage_is_readonly(s));
        assert_int_equal(txc_storage_get_kind(txc_array_storage(txc_tensor_array(txc_model_parameter(mm, i)))),
                         TXC_STORAGE_MMAP);
    }
    /* an in-place op on a copied weight is refused like one on the mmap */
    txc_env *env = txc_model_env(cp);
    int mark = txc_env_scope_begin(env);
    txc_tensor *emb = txc_model_parameter(cp, 0);
    int64_t one = 0;
    txc_tensor *idx = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){1}, &one);
    txc_tensor *row = txc_contiguous(txc_index_select(emb, 0, idx));
    assert_non_null(row);
    txc_clear_error();
    assert_int_not_equal(txc_index_copy_(emb, 0, idx, row), TXC_OK);
    assert_non_null(strstr(txc_last_error(), "read-only"));
    txc_env_scope_end(env, mark);
    txc_model_free(mm);
    txc_model_free(cp);
}

static void test_madvise_refused(void **state)
{
    (void)state;
    txc_impl_test_fail_madvise(true);
    txc_model *cp = load(stories_dir(), TXC_WEIGHTS_COPY);
    txc_impl_test_fail_madvise(false);
    assert_false(txc_model_weights_info(cp).hugepages);
    txc_model *mm = load(stories_dir(), TXC_WEIGHTS_MMAP);
    check_same_params(mm, cp);
    int64_t ids[] = {1, 403, 407};
    float *a = last_logits(mm, ids, 3), *b = last_logits(cp, ids, 3);
    assert_memory_equal(a, b, sizeof(float) * (size_t)txc_model_config(mm)->vocab_size);
    free(a);
    free(b);
    txc_model_free(mm);
    txc_model_free(cp);
    /* no_hugepages: not asked */
    txc_model_options o = {.weights = TXC_WEIGHTS_COPY, .no_hugepages = true};
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(stories_dir(), &o, &m), TXC_OK);
    assert_false(txc_model_weights_info(m).hugepages);
    txc_model_free(m);
}

static void test_bad_mode(void **state)
{
    (void)state;
    txc_model_options o = {.weights = (txc_weights_mode)7};
    txc_model *m = (txc_model *)0x1;
    txc_clear_error();
    assert_int_equal(txc_model_load(stories_dir(), &o, &m), TXC_ERR_INVALID);
    assert_null(m);
    assert_non_null(strstr(txc_last_error(), "weights mode 7"));
    assert_string_equal(txc_weights_mode_name((txc_weights_mode)7), "?");
    assert_string_equal(txc_weights_mode_name(TXC_WEIGHTS_DEFAULT), "memory");
}

static void test_anon_storage(void **state)
{
    (void)state;
    txc_clear_error();
    assert_null(txc_storage_new_anon(0, true));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    assert_null(txc_storage_new_anon(SIZE_MAX - 100, true));
    assert_int_equal(txc_last_status(), TXC_ERR_NOMEM);
    txc_storage *s = txc_storage_new_anon(5000, false);
    assert_non_null(s);
    assert_int_equal((uintptr_t)txc_storage_data(s) % (2u << 20), 0);
    assert_false(txc_storage_hugepages(s));
    assert_false(txc_storage_is_readonly(s));
    memset(txc_storage_data(s), 7, 5000);
    assert_int_equal(txc_storage_seal(s), TXC_OK);
    assert_true(txc_storage_is_readonly(s));
    assert_int_equal(((unsigned char *)txc_storage_data(s))[4999], 7);
    txc_storage_release(s);
    txc_storage *o = txc_storage_new(TXC_CPU, 16);
    assert_int_equal(txc_storage_seal(o), TXC_ERR_INVALID);
    txc_storage_release(o);
}

/* ---- a bf16 llama written here ------------------------------------------------ */

#define H 256
#define I 1024
#define NL 8
#define V 16384

static bool file_mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, path) != NULL;
    fclose(f);
    return found;
}

static void test_bf16_copy_equals_mmap_and_rss(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    size_t bytes = tu_write_llama_folder(dir, H, I, NL, V, 4, 2, 1, NULL, NULL);
    int64_t ids[] = {1, 17, 16000, 99, 2048};
    check_modes_agree(dir, ids, 5, false);

    /* the mmap mode keeps the file mapped; the copy drops it. Loading with
     * the mmap reads no weight page (no checksum pass, no eager conversion
     * but the few 1-d norms): the RSS grows by far less than the file. */
    const char *file = tu_path("%s/model.safetensors", dir);
    long before = tu_status_kb("VmRSS:");
    txc_model *mm = load(dir, TXC_WEIGHTS_MMAP);
    long after = tu_status_kb("VmRSS:");
    if (TU_HEAP_COUNTED && before > 0 && after > 0 && after - before > (long)(bytes / 1024) / 8)
        fail_msg("an mmap load grew the RSS by %ld KiB (weights: %zu KiB)", after - before, bytes / 1024);
    if (getenv("TU_VERBOSE"))
        print_message("mmap load: RSS grew by %ld KiB (weights %zu KiB)\n", after - before, bytes / 1024);
    assert_true(file_mapped(file));
    assert_true(txc_storage_is_readonly(txc_array_storage(txc_tensor_array(txc_model_parameter(mm, 0)))));
    txc_model_free(mm);
    assert_false(file_mapped(file));

    /* The copy's peak RSS: the copy and not the file besides (pread keeps
     * the file's pages out of the process; the memcpy fallback drops each
     * chunk's source pages): the growth of VmHWM over the load stays under
     * the weights + 12 MiB (it would be twice the weights otherwise). Not
     * under ASan (its shadow memory and allocator). */
    for (int fallback = 0; fallback < 2; fallback++) {
        txc_model_test_force_memcpy(fallback);
        FILE *cr = fopen("/proc/self/clear_refs", "w");
        bool reset = cr && fputs("5", cr) >= 0;
        if (cr)
            reset &= fclose(cr) == 0;
        long rss0 = tu_status_kb("VmRSS:");
        txc_model *cp = load(dir, TXC_WEIGHTS_COPY);
        long hwm = tu_status_kb("VmHWM:");
        txc_model_test_force_memcpy(false);
        assert_false(file_mapped(file));
        txc_weights_info w = txc_model_weights_info(cp);
        /* 2-d weights are copied; the 1-d norms were converted to float32 at load */
        assert_int_equal(w.file_bytes, bytes - (size_t)(2 * NL + 1) * H * 2);
        if (TU_HEAP_COUNTED && reset && rss0 > 0 && hwm > 0) {
            long grew_kb = hwm - rss0;
            if (getenv("TU_VERBOSE"))
                print_message("%s: peak RSS grew by %ld KiB loading %zu KiB of weights\n",
                              fallback ? "memcpy" : "pread", grew_kb, bytes / 1024);
            if (grew_kb > (long)(bytes / 1024) + 12 * 1024)
                fail_msg("peak RSS grew by %ld KiB loading %zu KiB of weights", grew_kb, bytes / 1024);
        }
        if (fallback) { /* the fallback copies the same bytes */
            txc_model *mm2 = load(dir, TXC_WEIGHTS_MMAP);
            check_same_params(mm2, cp);
            txc_model_free(mm2);
        }
        txc_model_free(cp);
    }
    tu_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_copy_equals_mmap),
        cmocka_unit_test(test_info_and_storage),
        cmocka_unit_test(test_madvise_refused),
        cmocka_unit_test(test_bad_mode),
        cmocka_unit_test(test_anon_storage),
        cmocka_unit_test(test_bf16_copy_equals_mmap_and_rss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
