/* txc bench --tp N: per-rank weight bytes, the all_reduce latency of one
 * hidden-state row, the time per token in collectives. */
#include "tools/bench_tp.h"
#include "tools/cli.h"
#include "txc/ops.h"
#include "txc/shard.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "txc/threads.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median microseconds of an all_reduce of (1, 1, hidden) float32. */
static double all_reduce_us(const txc_model *m, const txc_mesh *mesh)
{
    enum { REPS = 201 };
    txc_env *env = txc_model_env(m);
    int64_t H = txc_model_config(m)->hidden_size;
    double t[REPS];
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = txc_ones(env, 3, (int64_t[]){1, 1, H}, TXC_F32);
    for (int i = 0; i < REPS && x; i++) {
        int inner = txc_env_scope_begin(env);
        double t0 = txc_cli_now_ms();
        txc_tensor *y = txc_all_reduce(x, mesh, "tp");
        t[i] = (txc_cli_now_ms() - t0) * 1e3;
        txc_env_scope_end(env, inner);
        if (!y) {
            txc_env_scope_end(env, mark);
            return -1;
        }
    }
    txc_env_scope_end(env, mark);
    qsort(t, REPS, sizeof *t, cmp_double);
    return t[REPS / 2];
}

void txc_bench_tp_measure(const txc_model *m, txc_bench_tp_info *out)
{
    double mine = 0, whole = 0;
    for (int i = 0; i < txc_model_num_parameters(m); i++) {
        const txc_tensor *p = txc_model_parameter(m, i);
        int64_t global[8], n = 1;
        if (txc_tensor_shard_index(p, 0, NULL, global) != TXC_OK)
            continue;
        for (int d = 0; d < txc_tensor_ndim(p); d++)
            n *= global[d];
        double es = (double)txc_dtype_size(txc_tensor_dtype(p));
        mine += (double)txc_tensor_numel(p) * es;
        whole += (double)n * es;
    }
    const txc_sharding *s = NULL;
    for (int i = 0; i < txc_model_num_parameters(m) && !s; i++)
        s = txc_tensor_sharding(txc_model_parameter(m, i));
    out->weights_bytes = mine;
    out->whole_bytes = whole;
    out->all_reduce_us = s ? all_reduce_us(m, txc_sharding_mesh(s)) : -1;
}

static bool over_processes(void) { return txc_process_count() > 1 || txc_device_count() == 1; }

void txc_bench_tp_header(FILE *f, const txc_model *m, const txc_bench_tp_info *info)
{
    const double mine = info->weights_bytes, whole = info->whole_bytes;
    if (over_processes())
        fprintf(f, "tensor parallel: --tp %lld, %d processes over %s; rank %d's weights %.1f MB of the whole model's "
                   "%.1f MB (%.3fx)\n",
                (long long)txc_model_tp_size(m), txc_process_count(), txc_distributed_is_mpi() ? "MPI" : "nothing",
                txc_process_index(), mine / 1e6, whole / 1e6, whole > 0 ? mine / whole : 0);
    else
        fprintf(f, "tensor parallel: --tp %lld, %d devices in one process over %s (%d thread%s each); device %d's "
                   "weights %.1f MB of the whole model's %.1f MB (%.3fx)\n",
                (long long)txc_model_tp_size(m), txc_device_count(), txc_collective_transport(), txc_threads_get(),
                txc_threads_get() == 1 ? "" : "s",
                txc_device_index(), mine / 1e6, whole / 1e6, whole > 0 ? mine / whole : 0);
    if (info->all_reduce_us >= 0)
        fprintf(f, "all_reduce of one hidden-state row (%lld float32): %.1f us (median of 201)\n",
                (long long)txc_model_config(m)->hidden_size, info->all_reduce_us);
}

cJSON *txc_bench_tp_json(const txc_model *m, const txc_bench_tp_info *info)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "tp", (double)txc_model_tp_size(m));
    cJSON_AddNumberToObject(o, "processes", txc_process_count());
    cJSON_AddNumberToObject(o, "devices", txc_device_count());
    cJSON_AddStringToObject(o, "transport", over_processes() ? (txc_distributed_is_mpi() ? "MPI" : "nothing")
                                                             : txc_collective_transport());
    cJSON_AddNumberToObject(o, "weights_bytes", info->weights_bytes);
    cJSON_AddNumberToObject(o, "whole_model_bytes", info->whole_bytes);
    cJSON_AddNumberToObject(o, "weights_fraction",
                            info->whole_bytes > 0 ? round(info->weights_bytes / info->whole_bytes * 1e4) / 1e4 : 0);
    if (info->all_reduce_us >= 0)
        cJSON_AddNumberToObject(o, "all_reduce_us", round(info->all_reduce_us * 1e3) / 1e3);
    else
        cJSON_AddNullToObject(o, "all_reduce_us");
    return o;
}

void txc_bench_tp_row(FILE *f, const char *mode, double seconds, uint64_t calls, double total_s, int64_t n_new)
{
    if (n_new <= 0)
        return;
    fprintf(f, "collectives, %s: %.3f ms per token (%.1f calls), %.1f%% of the run's time\n", mode,
            seconds * 1e3 / (double)n_new, (double)calls / (double)n_new,
            total_s > 0 ? 100.0 * seconds / total_s : 0);
}
