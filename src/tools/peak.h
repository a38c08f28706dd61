/* tools/peak.h — the machine's compute peak and cache size, measured in the
 * run that reports against them (txc bench). */
#ifndef TXC_TOOLS_PEAK_H
#define TXC_TOOLS_PEAK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct txc_peak {
    double gflops;     /* GFLOP/s on every thread (the best of 5 passes) */
    int simd_level;    /* txc_kern_simd_level(): 0 portable, 1 AVX2+FMA, 2 AVX-512, 3 AMX */
    const char *what;  /* "amx bf16 tdpbf16ps", "avx512 fp32 fma", "avx2 fp32 fma", "scalar fp32" */
} txc_peak;

/* The multiply-add peak of the instructions the prefill GEMMs of weights of
 * this kind use (src/ops/linalg.c, amx.c), on txc_threads_get() threads,
 * each thread ~20 ms per pass, the best of 5 passes after a warm-up (on a
 * shared machine other work only slows a pass down):
 *  - bf16 weights where AMX runs (SIMD level 3): TDPBF16PS on resident
 *    tiles (4 independent accumulators, 16 x 16 x 32 x 2 flops each);
 *  - otherwise the float32 FMA at the SIMD level: a register-blocked loop
 *    of independent FMAs (12 accumulators, no memory traffic), 2 flops per
 *    lane (the kernels widen f16 weights, and bf16 ones below level 3, to
 *    float32 in registers and use these same FMAs). */
txc_peak txc_measure_peak(bool bf16_weights);

/* Bytes of the last-level cache: the highest level /sys/devices/system/cpu/
 * cpu0/cache lists (the kernel's report), else glibc's
 * sysconf(_SC_LEVEL3_CACHE_SIZE); 0 when unknown. */
size_t txc_llc_bytes(void);

#endif
