/* `txc bench --profile`: the compiled prefill and decode steps' kernel time
 * by op kind and, for the GEMMs, by shape (src/tools/bench_profile.c). */
#ifndef TXC_TOOLS_BENCH_PROFILE_H
#define TXC_TOOLS_BENCH_PROFILE_H

#include <stdint.h>

#include "txc/generate.h"

#define TXC_BENCH_PROFILE_TOP 8       /* op kinds kept */
#define TXC_BENCH_PROFILE_GEMM_TOP 12 /* GEMM shapes kept */

typedef struct txc_bench_profile {
    txc_jit_op_time op[TXC_BENCH_PROFILE_TOP]; /* most time first */
    int n_op;                                  /* kinds kept; 0: not profiled (or the step never ran) */
    double total_ms;                           /* kernel time over every kind */
    txc_jit_gemm_time gemm[TXC_BENCH_PROFILE_GEMM_TOP]; /* most time first */
    int n_gemm;
    double gemm_ms;    /* over every GEMM shape */
    int64_t calls;     /* calls of the step (prefill: prompt chunks; decode: tokens) */
} txc_bench_profile;

/* The profile of the generator's prefill (which = 0) or decode (1) step
 * (txc_generator_set_profile must have been on for its calls). */
void txc_bench_profile_collect(const txc_generator *gen, int which, txc_bench_profile *p);
/* The same of one jit's calls (txc_jit_set_profile on for them): a batch's step (txc_batch_jit). */
void txc_bench_profile_collect_jit(const txc_jit *jit, txc_bench_profile *p);

/* The table lines: "<label> <step> step, kernel time by op (<ms> ms over
 * <what>; the N largest): op share%, ..." and, when GEMM shapes were timed,
 * one line per shape with its calls, ms, share of the step's kernel time,
 * GFLOP/s (2 M N K per call over its kernel time) and fraction of
 * peak_gflops (0: not printed). */
void txc_bench_profile_print(const char *label, const char *step, const char *what, const txc_bench_profile *p,
                             double peak_gflops);

/* Adds "<key>" (an array of {op, calls, ms, share}) and, when GEMM shapes
 * were timed, "<key>_gemm" (an array of {op, M, N, K, parts, calls, ms,
 * share, gflops, peak_fraction (null without a peak)}) to the JSON object
 * `row` (a cJSON *). */
void txc_bench_profile_json(void *row, const char *key, const txc_bench_profile *p, double peak_gflops);

#endif
