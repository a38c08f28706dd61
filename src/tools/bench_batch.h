/* `txc bench --batch LIST`: batched decode rows (src/tools/bench_batch.c). */
#ifndef TXC_TOOLS_BENCH_BATCH_H
#define TXC_TOOLS_BENCH_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "txc/model.h"

#define TXC_BENCH_MAX_BATCHES 16

/* "1,2,4,8" into sizes (each in [1, TXC_BATCH_MAX_SLOTS], at most max);
 * false after one line on stderr. */
bool txc_bench_parse_batch_list(const char *s, int *sizes, int max, int *n);
/* For each batch size B: B distinct sequences of the prompt (greedy,
 * new_tokens each, no eos) through a batch of B slots, compiled; prints
 * aggregate decode tok/s (tokens of the steps where all B rows decode in
 * one forward / their wall time; new_tokens must exceed B for any), per-sequence tok/s (aggregate / B) and the
 * ratio to batch 1 (a table, or one JSON object with batch_rows) on `out`
 * (an in-process device but 0 passes its /dev/null). profile: the timed
 * run's decode step kernel time by op and GEMM shape after the table
 * (tools/bench_profile.h; "decode_profile" in each JSON row). Returns
 * the exit status (2 after one line on stderr). */
int txc_bench_batch(txc_model *model, const char *model_name, const int *sizes, int n_sizes, const int32_t *prompt,
                    int64_t n_prompt, int64_t new_tokens, int64_t max_cache_len, bool json, const char *cpu,
                    bool profile, FILE *out);

#endif
