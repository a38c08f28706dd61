/* In-process CPU devices: txc_devices_run (include/txc/shard.h). Each
 * device is a thread bound to its device of a shared-memory world
 * (backend/comm.h) and to a thread pool of its own (txc/threads.h); device
 * 0 is the caller's thread. */
#include "backend/comm.h"
#include "txc/env.h"
#include "txc/ops.h"
#include "txc/shard.h"
#include "txc/threads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct device_run {
    txc_comm_world *world;
    int device, threads;
    txc_device_fn fn;
    void *ctx;
    int rc;
    txc_status status;
    char msg[1024];
} device_run;

static void run_device(device_run *r)
{
    txc_thread_pool *pool = NULL;
    r->rc = 1;
    if (txc_comm_shm_bind(r->world, r->device) != TXC_OK || !(pool = txc_thread_pool_new(r->threads))) {
        r->status = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
        snprintf(r->msg, sizeof r->msg, "%s", txc_last_error());
        txc_comm_shm_fail(r->world, r->device, r->msg);
        txc_comm_shm_bind(NULL, 0);
        return;
    }
    txc_thread_pool *old = txc_thread_pool_bind(pool);
    /* the device's env: its tensors and scopes (txc_env_active on its thread) */
    char name[32];
    snprintf(name, sizeof name, "cpu:%d", r->device);
    txc_env_options eo = txc_env_default_options();
    eo.name = name;
    txc_env *env = txc_env_new(&eo);
    if (!env || txc_env_enter(env) != TXC_OK) {
        r->status = txc_last_status() ? txc_last_status() : TXC_ERR_NOMEM;
        snprintf(r->msg, sizeof r->msg, "%s", txc_last_error());
        txc_comm_shm_fail(r->world, r->device, r->msg);
        txc_env_free(env);
        txc_thread_pool_bind(old);
        txc_thread_pool_free(pool);
        txc_comm_shm_bind(NULL, 0);
        return;
    }
    txc_clear_error();
    r->rc = r->fn(r->ctx, r->device);
    if (r->rc != 0) {
        r->status = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
        snprintf(r->msg, sizeof r->msg, "%s", *txc_last_error() ? txc_last_error() : "it returned an error");
        txc_comm_shm_fail(r->world, r->device, r->msg);
    }
    txc_env_exit(env);
    txc_env_free(env);
    txc_thread_pool_bind(old);
    txc_thread_pool_free(pool);
    txc_comm_shm_bind(NULL, 0);
}

static void *device_main(void *arg)
{
    run_device(arg);
    txc_ops_thread_release(); /* the kernels' scratch of this thread (lost when it ends) */
    return NULL;
}

txc_status txc_devices_run(int n_devices, const int *threads, txc_device_fn fn, void *ctx, int *rcs)
{
    if (txc_distributed_init() != TXC_OK)
        return txc_last_status();
    if (!fn)
        return txc_error(TXC_ERR_INVALID, "devices: no function to run");
    if (n_devices < 1 || n_devices > TXC_SHM_MAX_DEVICES)
        return txc_error(TXC_ERR_INVALID, "devices: 1 to %d CPU devices in one process, got %d", TXC_SHM_MAX_DEVICES,
                         n_devices);
    if (txc_process_count() > 1)
        return txc_error(TXC_ERR_UNSUPPORTED, "devices: in-process devices inside an MPI job of %d processes (one "
                                              "device per process there)", txc_process_count());
    if (txc_device_count() > 1)
        return txc_error(TXC_ERR_UNSUPPORTED, "devices: txc_devices_run called on a device's thread");
    for (int d = 0; threads && d < n_devices; d++)
        if (threads[d] < 1 || threads[d] > TXC_MAX_THREADS)
            return txc_error(TXC_ERR_INVALID, "devices: device %d has %d threads (1 to %d)", d, threads[d],
                             TXC_MAX_THREADS);
    txc_comm_world *w = txc_comm_shm_new(n_devices);
    device_run *runs = w ? calloc((size_t)n_devices, sizeof *runs) : NULL;
    pthread_t *tid = runs ? calloc((size_t)n_devices, sizeof *tid) : NULL;
    if (!tid) {
        free(runs);
        txc_comm_shm_free(w);
        return w ? txc_error(TXC_ERR_NOMEM, "out of memory (devices)") : txc_last_status();
    }
    for (int d = 0; d < n_devices; d++)
        runs[d] = (device_run){.world = w, .device = d, .threads = threads ? threads[d] : 1, .fn = fn, .ctx = ctx};
    int started = 1;
    txc_status s = TXC_OK;
    for (int d = 1; d < n_devices; d++, started++)
        if (pthread_create(&tid[d], NULL, device_main, &runs[d]) != 0) {
            s = txc_error(TXC_ERR_IO, "devices: cannot start the thread of device %d", d);
            txc_comm_shm_fail(w, d, "its thread did not start");
            break;
        }
    if (s == TXC_OK)
        run_device(&runs[0]);
    for (int d = 1; d < started; d++)
        pthread_join(tid[d], NULL);
    if (s == TXC_OK) {
        const char *msg;
        int f = txc_comm_shm_failed(w, &msg);
        if (f >= 0)
            s = txc_error(runs[f].status ? runs[f].status : TXC_ERR_INTERNAL, "%s", runs[f].msg);
    }
    for (int d = 0; rcs && d < n_devices; d++)
        rcs[d] = d < started ? runs[d].rc : 1;
    free(tid);
    free(runs);
    txc_comm_shm_free(w);
    return s;
}
