/* txc generate / chat / serve / bench --tp N: the job, the mesh, rank 0's output. */
#include "tools/cli.h"
#include "txc/shard.h"

#include <stdio.h>
#include <stdlib.h>

static txc_mesh *tp_mesh; /* lives to the end of the process */

static void free_mesh(void) { txc_mesh_free(tp_mesh); }

bool txc_cli_tp_setup(const char *arg, txc_model_options *o)
{
    int64_t n;
    if (!txc_cli_parse_int("--tp", arg, 1, &n))
        return false;
    if (n > 4096) {
        fprintf(stderr, "txc: --tp must be 1 to 4096, got %lld\n", (long long)n);
        return false;
    }
    if (txc_distributed_init() != TXC_OK) {
        txc_cli_fail("--tp");
        return false;
    }
    if (txc_process_count() != n) {
        fprintf(stderr, "txc: --tp %lld needs %lld processes (mpirun -np %lld txc ...), this job has %d\n",
                (long long)n, (long long)n, (long long)n, txc_process_count());
        return false;
    }
    if (tp_mesh) {
        o->tp_mesh = tp_mesh;
        return true;
    }
    const char *axis[] = {"tp"};
    if (!(tp_mesh = txc_mesh_new(NULL, 1, &n, axis))) {
        txc_cli_fail("--tp");
        return false;
    }
    atexit(free_mesh);
    o->tp_mesh = tp_mesh;
    /* SPMD: every rank computes the same tokens; rank 0 alone prints them */
    if (txc_process_index() != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "txc: --tp: cannot send rank %d's output to /dev/null\n", txc_process_index());
        return false;
    }
    return true;
}
