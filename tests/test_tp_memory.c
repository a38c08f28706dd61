/*
 * A tensor-parallel load's memory (txc_model_load with tp_mesh, two
 * in-process devices, txc_devices_run): the peak RSS of loading a llama
 * written here (float32, o_proj and down_proj several MiB) at tp 2 stays
 * within the two devices' parameter bytes plus a stated slack. A rank's
 * rowwise (o/down) slice is a column copy out of the file mapping, which
 * reads every page of the tensor: those source pages must leave the RSS
 * after the copy (tp.c, txc_impl_drop_mapped_pages), or each device holds
 * all of o and down besides its half until the mapping goes (the weights
 * copy's munmap; with the mmap mode, until the model is freed). Skipped
 * where the kernel refuses the peak reset (/proc/self/clear_refs) and
 * under ASan (its allocator and shadow memory count in the RSS).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/model.h"
#include "txc/ops.h"
#include "txc/shard.h"

/* down_proj's slice is H x I/2 f32 = 4.5 MiB: not a whole number of 2 MiB
 * huge pages (an allocator that rounds it up wastes 1.5 MiB a layer) */
enum { H = 576, I = 4096, NL = 4, V = 1024, NDEV = 2 };

typedef struct load_job {
    const char *dir;
    txc_weights_mode mode;
    size_t param_bytes[NDEV];
    long rss_loaded_kb; /* the RSS while every device holds its model */
} load_job;

/* Each device: load at tp 2, then wait for the others (an all_reduce) so
 * that every device's model is held at once, read the RSS, wait again, free. */
static int load_fn(void *ctx, int d)
{
    load_job *j = ctx;
    int64_t nd = txc_device_count();
    const char *axis[] = {"tp"};
    txc_mesh *mesh = txc_mesh_new(NULL, 1, &nd, axis);
    TU_DEVICE_CHECK(mesh, "mesh: %s", txc_last_error());
    txc_model_options o = {.weights = j->mode, .tp_mesh = mesh};
    txc_model *m = NULL;
    txc_status s = txc_model_load(j->dir, &o, &m);
    if (s != TXC_OK)
        txc_mesh_free(mesh);
    TU_DEVICE_CHECK(s == TXC_OK, "device %d: load at tp 2: %s", d, txc_last_error());
    j->param_bytes[d] = txc_model_weights_info(m).param_bytes;
    txc_env *env = txc_env_active();
    for (int round = 0; round < 2; round++) {
        int mark = txc_env_scope_begin(env);
        float one = 1.0f;
        txc_tensor *x = txc_tensor_from_data(env, TXC_F32, 1, (int64_t[]){1}, &one);
        txc_tensor *y = txc_all_reduce(x, mesh, "tp");
        bool ok = y != NULL;
        txc_env_scope_end(env, mark);
        if (!ok) {
            txc_model_free(m);
            txc_mesh_free(mesh);
        }
        TU_DEVICE_CHECK(ok, "barrier: %s", txc_last_error());
        if (round == 0 && d == 0)
            j->rss_loaded_kb = tu_status_kb("VmRSS:");
    }
    txc_model_free(m);
    txc_mesh_free(mesh);
    return 0;
}

static bool reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    ok &= fclose(f) == 0;
    return ok;
}

static void run_load(load_job *j)
{
    tu_device_failure[0] = 0;
    txc_status s = txc_devices_run(NDEV, NULL, load_fn, j, NULL);
    if (tu_device_failure[0])
        fail_msg("%s", tu_device_failure);
    if (s != TXC_OK)
        fail_msg("txc_devices_run: %s", txc_last_error());
}

static void test_tp2_load_rss(void **state)
{
    (void)state;
    if (!TU_HEAP_COUNTED)
        skip(); /* ASan: its allocator and shadow memory are in the RSS */
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    size_t big, rowwise;
    tu_write_llama_folder(dir, H, I, NL, V, 8, 4, 0, &rowwise, &big);
    load_job warm = {.dir = dir, .mode = TXC_WEIGHTS_COPY};
    run_load(&warm); /* the device threads' pools, stacks and envs: not what is measured */

    /* The copy (the default): the peak over the load is both devices' weights
     * + for each device one rowwise tensor's source pages (dropped after its
     * copy) + 8 MiB; without the drop each device keeps all of o and down of
     * the file (here 36 MiB) until the copy's munmap. */
    if (!reset_peak_rss()) {
        tu_rm_rf(dir);
        print_message("skipped: the kernel refuses the peak RSS reset (/proc/self/clear_refs)\n");
        skip();
    }
    long rss0 = tu_status_kb("VmRSS:");
    load_job cp = {.dir = dir, .mode = TXC_WEIGHTS_COPY};
    run_load(&cp);
    long hwm = tu_status_kb("VmHWM:");
    assert_true(rss0 > 0 && hwm > 0);
    size_t weights = cp.param_bytes[0] + cp.param_bytes[1];
    assert_true(cp.param_bytes[0] == cp.param_bytes[1] && weights > 0);
    long bound_kb = (long)((weights + NDEV * big) / 1024) + 8 * 1024;
    if (getenv("TU_VERBOSE"))
        print_message("copy: peak RSS grew by %ld KiB at tp %d; weights %zu KiB, bound %ld KiB "
                      "(o/down of the file: %zu KiB)\n",
                      hwm - rss0, NDEV, weights / 1024, bound_kb, rowwise / 1024);
    if (hwm - rss0 > bound_kb)
        fail_msg("a tp %d load's peak RSS grew by %ld KiB: over the devices' %zu KiB of weights + %ld KiB "
                 "(each device's o/down source pages stayed?)",
                 NDEV, hwm - rss0, weights / 1024, bound_kb - (long)(weights / 1024));

    /* Held after the load: the weights + 4 MiB (a slice's array rounded up
     * to whole huge pages would hold more: here 12 MiB more). */
    long held_cp = cp.rss_loaded_kb - rss0;
    if (getenv("TU_VERBOSE"))
        print_message("copy: RSS grew by %ld KiB with both models held\n", held_cp);
    if (held_cp > (long)(weights / 1024) + 4 * 1024)
        fail_msg("a tp %d load holds %ld KiB more RSS with the models loaded: over the devices' %zu KiB of "
                 "weights + 4 MiB", NDEV, held_cp, weights / 1024);

    /* The mmap mode: the colwise slices stay untouched in the mapping, the
     * rowwise ones are copies; with every model held, the RSS is the copies
     * (both devices: o and down once) + 4 MiB, not the file's o and down
     * besides in each device's mapping, nor the copies rounded up to whole
     * 2 MiB pages. */
    long r0 = tu_status_kb("VmRSS:");
    load_job mm = {.dir = dir, .mode = TXC_WEIGHTS_MMAP};
    run_load(&mm);
    long held = mm.rss_loaded_kb - r0;
    if (getenv("TU_VERBOSE"))
        print_message("mmap: RSS grew by %ld KiB with both models held (o/down copies: %zu KiB)\n", held,
                      rowwise / 1024);
    if (held > (long)(rowwise / 1024) + 4 * 1024)
        fail_msg("with the mmap mode at tp %d, the RSS grew by %ld KiB holding the models: over the %zu KiB "
                 "of o/down copies + 4 MiB (the mapping's o/down pages stayed, or the copies were rounded up?)",
                 NDEV, held, rowwise / 1024);
    tu_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp2_load_rss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
