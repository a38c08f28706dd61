/* txc generate / bench --tp N [--devices cpu:N]: the job (MPI ranks or
 * in-process devices), the mesh, one device's output; and the quiet of
 * every rank but 0 while the arguments are read. */
#include "backend/comm.h"
#include "tools/cli.h"
#include "txc/env.h"
#include "txc/ops.h"
#include "txc/shard.h"
#include "txc/tensor.h"
#include "txc/threads.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static txc_mesh *tp_mesh; /* the process's (MPI), lives to the end of the process */
static int saved_stderr = -1;
static bool mpi_job;   /* this process is one rank of several (MPI initialized) */
static bool args_read; /* txc_cli_unquiet_ranks was called: every rank speaks for itself */
static _Thread_local bool device_quiet; /* an in-process device but 0 */

static void free_mesh(void) { txc_mesh_free(tp_mesh); }

bool txc_cli_quiet(void) { return device_quiet; }

/* mpirun's rank of this process from the environment (before MPI_Init), -1 alone. */
static int launch_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

static int launch_size(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v || !*v)
        v = getenv("PMI_SIZE");
    return v && *v ? atoi(v) : launch_rank() >= 0 ? 2 : 1;
}

void txc_cli_quiet_ranks(void)
{
    if (launch_rank() <= 0 || saved_stderr >= 0)
        return;
    fflush(stderr);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0)
        return;
    saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved_stderr >= 0)
        dup2(null, STDERR_FILENO);
    close(null);
}

void txc_cli_unquiet_ranks(void)
{
    args_read = true;
    if (saved_stderr < 0)
        return;
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
}

bool txc_cli_mpirun_ok(const char *command)
{
    const int n = launch_size();
    if (n <= 1)
        return true;
    fprintf(stderr, "txc: txc %s does not run under mpirun with %d processes (each would run it on its own; "
                    "txc generate and txc bench run tensor-parallel with --tp %d)\n", command, n, n);
    return false;
}

bool txc_cli_parse_devices(const char *arg, int64_t *n)
{
    if (strncmp(arg, "cpu:", 4) != 0) {
        fprintf(stderr, "txc: --devices expects cpu:N (N CPU devices in this process), got '%s'\n", arg);
        return false;
    }
    if (!txc_cli_parse_range("--devices cpu:N", arg + 4, 1, 64, n))
        return false;
    return true;
}

bool txc_cli_parse_tp(const char *arg, int64_t *n) { return txc_cli_parse_range("--tp", arg, 1, 4096, n); }

bool txc_cli_parallel_setup(int64_t tp, int64_t devices, txc_model_options *o)
{
    const int ranks = launch_size();
    if (ranks > 1 && tp == 0) {
        fprintf(stderr, "txc: started by mpirun with %d processes but without --tp: each would run the whole model "
                        "and print its own copy (give --tp %d for tensor parallelism over the %d processes, or run "
                        "txc without mpirun)\n", ranks, ranks, ranks);
        return false;
    }
    if (devices > 1 || (devices == 1 && tp > 0)) {
        if (ranks > 1) {
            fprintf(stderr, "txc: --devices cpu:%lld under mpirun: one device per process there (drop --devices, "
                            "or run one process)\n", (long long)devices);
            return false;
        }
        if (tp != devices) {
            fprintf(stderr, "txc: --devices cpu:%lld needs --tp %lld (each device holds one shard of the weights)%s\n",
                    (long long)devices, (long long)devices, tp ? "" : "; without --tp one device runs");
            return false;
        }
        if (txc_threads_get() < devices) {
            fprintf(stderr, "txc: --threads %d is fewer than the %lld devices (each device needs a thread)\n",
                    txc_threads_get(), (long long)devices);
            return false;
        }
        o->tp_mesh = NULL; /* each device makes its own (txc_cli_devices_run) */
        return true;
    }
    if (tp == 0)
        return true;
    if (txc_distributed_init() != TXC_OK)
        return txc_cli_fail("--tp") == 0;
    if (txc_process_count() != tp) {
        fprintf(stderr, "txc: --tp %lld needs %lld processes (mpirun -np %lld txc ...) or %lld in-process devices "
                        "(--devices cpu:%lld), this job has %d\n",
                (long long)tp, (long long)tp, (long long)tp, (long long)tp, (long long)tp, txc_process_count());
        return false;
    }
    mpi_job = tp > 1;
    if (!tp_mesh) {
        const char *axis[] = {"tp"};
        if (!(tp_mesh = txc_mesh_new(NULL, 1, &tp, axis)))
            return txc_cli_fail("--tp") == 0;
        atexit(free_mesh);
        /* SPMD: every rank computes the same tokens; rank 0 alone prints them */
        if (txc_process_index() != 0 && !freopen("/dev/null", "w", stdout)) {
            fprintf(stderr, "txc: --tp: cannot send rank %d's output to /dev/null\n", txc_process_index());
            return false;
        }
    }
    o->tp_mesh = tp_mesh;
    return true;
}

bool txc_cli_tp_config_ok(const char *model_dir, int64_t tp)
{
    if (tp <= 1)
        return true;
    txc_hf_config c;
    if (txc_model_config_load(model_dir, &c) != TXC_OK) {
        txc_clear_error(); /* (the load says it, with the rest of the folder's errors) */
        return true;
    }
    if (txc_model_tp_check(&c, tp) == TXC_OK)
        return true;
    txc_cli_fail("--tp");
    return false;
}

bool txc_cli_reads_stdin(void) { return !mpi_job || txc_process_index() == 0; }

bool txc_cli_share_input(char **text, size_t *len, bool ok)
{
    if (!mpi_job)
        return ok;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return txc_cli_fail("--prompt -") == 0;
    const bool root = txc_process_index() == 0;
    int64_t n = root ? (ok ? (int64_t)*len : -1) : 0;
    txc_tensor *x = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){1}, &n);
    txc_tensor *y = x ? txc_broadcast(x, tp_mesh, "tp", 0) : NULL;
    const int64_t *got = y ? txc_tensor_data_ptr(txc_contiguous(y)) : NULL;
    bool shared = got != NULL;
    if (got)
        n = *got;
    if (shared && n > 0) { /* the bytes in int64 words (the collectives' dtypes) */
        const int64_t words = (n + 7) / 8;
        int64_t *buf = calloc((size_t)words, sizeof *buf);
        if (!buf) { /* (past the broadcast of the size: the others wait in the next one) */
            fprintf(stderr, "txc: out of memory (the stdin prompt, %lld bytes)\n", (long long)n);
            txc_comm_abort(EXIT_ERROR);
        }
        if (root)
            memcpy(buf, *text, (size_t)n);
        x = txc_tensor_from_data(env, TXC_I64, 1, &words, buf);
        y = x ? txc_broadcast(x, tp_mesh, "tp", 0) : NULL;
        const int64_t *d = y ? txc_tensor_data_ptr(txc_contiguous(y)) : NULL;
        if (d && !root) {
            char *t = malloc((size_t)n + 1);
            if (t) {
                memcpy(t, d, (size_t)n);
                t[n] = 0;
                free(*text);
                *text = t;
                *len = (size_t)n;
            }
            shared = t != NULL;
        }
        shared = shared && d;
        free(buf);
    } else if (shared && n == 0 && !root) {
        free(*text);
        *text = calloc(1, 1);
        *len = 0;
        shared = *text != NULL;
    }
    if (!shared && !*txc_last_error())
        txc_error(TXC_ERR_IO, "the stdin prompt: out of memory");
    if (!shared) { /* one rank's failure: the others may wait in a broadcast */
        txc_cli_unquiet_ranks();
        txc_cli_fail("--prompt -");
        txc_comm_abort(EXIT_ERROR);
    }
    txc_env_scope_end(env, mark);
    return n >= 0; /* n < 0: rank 0's read failed and said why */
}

int txc_cli_exit_status(int rc)
{
    /* (an argument error, while the others are quiet, is every rank's: all exit together; past the
     * arguments MPI_Finalize would wait for the ranks still in a collective) */
    if (rc != 0 && mpi_job && args_read)
        txc_comm_abort(rc);
    return rc;
}

/* ---- in-process devices --------------------------------------------------------- */

typedef struct devices_ctx {
    int64_t n;
    txc_cli_device_fn body;
    void *ctx;
} devices_ctx;

static int device_main(void *arg, int d)
{
    const devices_ctx *c = arg;
    txc_cli_device dev = {.index = d, .lead = d == 0, .out = stdout};
    device_quiet = d != 0;
    const char *axis[] = {"tp"};
    if (!(dev.mesh = txc_mesh_new(NULL, 1, &c->n, axis))) {
        device_quiet = false;
        return d == 0 ? txc_cli_fail("--devices") : EXIT_ERROR;
    }
    FILE *null = NULL;
    if (d != 0 && !(dev.out = null = fopen("/dev/null", "w"))) {
        txc_mesh_free(dev.mesh);
        device_quiet = false;
        return EXIT_ERROR;
    }
    int rc = c->body(c->ctx, &dev);
    if (null)
        fclose(null);
    txc_mesh_free(dev.mesh);
    device_quiet = false;
    return rc;
}

int txc_cli_devices_run(int64_t n, txc_cli_device_fn body, void *ctx)
{
    int threads[64];
    const int total = txc_threads_get();
    for (int d = 0; d < n; d++) /* the --threads split over the devices, the remainder to the first */
        threads[d] = (int)(total / n + (d < total % n));
    devices_ctx c = {n, body, ctx};
    int rcs[64] = {0};
    txc_status s = txc_devices_run((int)n, threads, device_main, &c, rcs);
    if (s == TXC_OK)
        return 0;
    if (rcs[0] != 0) /* device 0 printed its line (its error names a failed peer) */
        return rcs[0];
    return txc_cli_fail("--devices"); /* another device alone failed: its message */
}

int txc_cli_run_parallel(int64_t tp, int64_t devices, const txc_model_options *o, txc_cli_device_fn body, void *ctx)
{
    if (devices > 1 || (devices == 1 && tp > 0))
        return txc_cli_devices_run(devices, body, ctx);
    txc_cli_device dev = {.index = txc_process_index(), .lead = txc_process_index() == 0, .out = stdout,
                          .mesh = o->tp_mesh};
    return body(ctx, &dev);
}
