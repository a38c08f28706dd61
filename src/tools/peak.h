/* tools/peak.h — the machine's compute peak and cache size, measured in the
 * run that reports against them (txc bench). */
#ifndef TXC_TOOLS_PEAK_H
#define TXC_TOOLS_PEAK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct txc_peak {
    double gflops;     /* GFLOP/s on every thread (the sum of each thread's median run) */
    int simd_level;    /* txc_kern_simd_level(): 0 portable, 1 AVX2+FMA, 2 AVX-512, 3 AMX */
    const char *what;  /* "amx bf16 tdpbf16ps", "avx512 bf16 vdpbf16ps", "avx512 fp32 fma", "avx2 fp32 fma",
                          "scalar fp32" */
} txc_peak;

/* The multiply-add peak of the instructions the prefill GEMMs of weights of
 * this kind use (src/ops/linalg.c, gemm_avx2.c, amx.c), on txc_threads_get()
 * threads at once: each thread does one warm-up run and 9 timed runs of
 * ~5 ms each, a run's rate is its flops over the thread's own CPU time
 * (CLOCK_THREAD_CPUTIME_ID: time the thread was preempted does not count),
 * a thread's rate is its median run, and the peak is the sum over the
 * threads (on a shared machine the best pass of a wall-clock measurement
 * varied 3x between runs; this varies as the cores' own speed does):
 *  - bf16 weights where AMX runs (SIMD level 3): TDPBF16PS on resident
 *    tiles (4 independent accumulators, 16 x 16 x 32 x 2 flops each);
 *  - bf16 weights at SIMD level 2 with AVX-512 BF16 (the VDPBF16PS GEMM,
 *    ops/gemm_bf16dot.c): VDPBF16PS on 16 independent accumulator chains
 *    (16 lanes x 2 products x 2 flops each, no memory traffic);
 *  - otherwise the float32 FMA at the SIMD level: a register-blocked loop
 *    of independent FMAs (12 accumulators, no memory traffic), 2 flops per
 *    lane (the kernels widen f16 weights, and bf16 ones without AMX or
 *    AVX-512 BF16, to float32 in registers and use these same FMAs). */
txc_peak txc_measure_peak(bool bf16_weights);

/* Bytes of one instance of the last-level cache (ops/cpu_cache.h: Linux's
 * sysfs cache tree, else CPUID's per-instance leaf by vendor, else sysconf
 * except on AMD, whose package-wide figure glibc reports), 0 when unknown.
 * On AMD Zen that is one CCX's L3 (32 MiB), not the package's sum. */
size_t txc_llc_bytes(void);

#endif
