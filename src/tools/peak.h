/* tools/peak.h — the machine's compute peak and cache size, measured in the
 * run that reports against them (txc bench). */
#ifndef TXC_TOOLS_PEAK_H
#define TXC_TOOLS_PEAK_H

#include <stddef.h>

typedef struct txc_peak {
    double gflops;     /* float32 FMA GFLOP/s on every thread (median of 5 passes) */
    int simd_level;    /* txc_kern_simd_level(): 0 portable, 1 AVX2+FMA, 2 AVX-512 */
    const char *what;  /* "avx512 fp32 fma", "avx2 fp32 fma", "scalar fp32" */
} txc_peak;

/* The float32 multiply-add peak at the SIMD level the GEMM kernels use
 * (src/ops/linalg.c), on txc_threads_get() threads: a register-blocked loop of
 * independent FMAs (12 accumulators, no memory traffic), 2 flops per lane per
 * FMA, each thread ~20 ms per pass, median of 5 passes after a warm-up. The
 * kernels widen bf16/f16 weights to float32 in registers and multiply with
 * these same FMAs, so this is the peak for every weights dtype txc runs. */
txc_peak txc_measure_peak(void);

/* Bytes of the last-level cache (sysconf, else /sys), 0 when unknown. */
size_t txc_llc_bytes(void);

#endif
