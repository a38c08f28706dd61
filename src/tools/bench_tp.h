/* txc bench --tp N (src/tools/bench_tp.c): the tensor-parallel lines. */
#ifndef TXC_TOOLS_BENCH_TP_H
#define TXC_TOOLS_BENCH_TP_H

#include <stdint.h>
#include <stdio.h>
#include "txc/model.h"

/* "tensor parallel: ..." — the processes, this rank's weight bytes against
 * the whole model's (each parameter's global shape, txc/shard.h); the
 * latency of an all_reduce of one hidden-state row (median of `reps`). */
typedef struct txc_bench_tp_info {
    double weights_bytes, whole_bytes; /* this device's parameters, the whole model's (global shapes) */
    double all_reduce_us;              /* -1: not measured (no sharded parameter) */
} txc_bench_tp_info;
/* The figures, on every device together (the all_reduce is a collective). */
void txc_bench_tp_measure(const txc_model *m, txc_bench_tp_info *out);
void txc_bench_tp_header(FILE *f, const txc_model *m, const txc_bench_tp_info *info);
/* The same as a JSON object {"tp", "processes", "devices", "transport",
 * "weights_bytes", "whole_model_bytes", "weights_fraction", "all_reduce_us"}
 * (NULL: out of memory). */
struct cJSON *txc_bench_tp_json(const txc_model *m, const txc_bench_tp_info *info);
/* One mode's time in collectives: `seconds` over `calls`, against the
 * mode's `total_s` and its `n_new` tokens. */
void txc_bench_tp_row(FILE *f, const char *mode, double seconds, uint64_t calls, double total_s, int64_t n_new);

#endif
