/* txc bench --tp N (src/tools/bench_tp.c): the tensor-parallel lines. */
#ifndef TXC_TOOLS_BENCH_TP_H
#define TXC_TOOLS_BENCH_TP_H

#include <stdint.h>
#include <stdio.h>
#include "txc/model.h"

/* "tensor parallel: ..." — the processes, this rank's weight bytes against
 * the whole model's (each parameter's global shape, txc/shard.h); the
 * latency of an all_reduce of one hidden-state row (median of `reps`). */
void txc_bench_tp_header(FILE *f, const txc_model *m);
/* One mode's time in collectives: `seconds` over `calls`, against the
 * mode's `total_s` and its `n_new` tokens. */
void txc_bench_tp_row(FILE *f, const char *mode, double seconds, uint64_t calls, double total_s, int64_t n_new);

#endif
