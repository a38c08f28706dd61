/* The machine's multiply-add peak (float32 FMA, AVX-512 BF16, AMX) and last-level cache size; see tools/peak.h. */
#include "tools/peak.h"
#include "ops/cpu_cache.h"
#include "ops/kernels.h"
#include "tools/cli.h"
#include "txc/threads.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ACC 12 /* independent accumulators: hide the FMA latency (4 cycles x 2 ports + margin) */

#define RUNS 9 /* timed runs per thread, after one warm-up run */

typedef struct peak_ctx {
    int level;
    bool amx, bf16dot;
    int64_t iters;
    float sink[TXC_MAX_THREADS];
    double rate[TXC_MAX_THREADS][RUNS]; /* flops per ns of the thread's own CPU time */
} peak_ctx;

#if TXC_HAVE_X86
TXC_AVX512 static float fma_avx512(int64_t iters, float seed)
{
    __m512 a[ACC], x = _mm512_set1_ps(1.0f + seed * 1e-9f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < ACC; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (int64_t k = 0; k < iters; k++)
        for (int i = 0; i < ACC; i++)
            a[i] = _mm512_fmadd_ps(a[i], x, y);
    for (int i = 1; i < ACC; i++)
        a[0] = _mm512_add_ps(a[0], a[i]);
    return _mm512_reduce_add_ps(a[0]);
}

TXC_AVX2 static float fma_avx2(int64_t iters, float seed)
{
    __m256 a[ACC], x = _mm256_set1_ps(1.0f + seed * 1e-9f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < ACC; i++)
        a[i] = _mm256_set1_ps((float)i);
    for (int64_t k = 0; k < iters; k++)
        for (int i = 0; i < ACC; i++)
            a[i] = _mm256_fmadd_ps(a[i], x, y);
    for (int i = 1; i < ACC; i++)
        a[0] = _mm256_add_ps(a[0], a[i]);
    float v[8];
    _mm256_storeu_ps(v, a[0]);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif

static float fma_scalar(int64_t iters, float seed)
{
    float a[ACC], x = 1.0f + seed * 1e-9f, y = 1e-7f;
    for (int i = 0; i < ACC; i++)
        a[i] = (float)i;
    for (int64_t k = 0; k < iters; k++)
        for (int i = 0; i < ACC; i++)
            a[i] = a[i] * x + y;
    float s = 0;
    for (int i = 0; i < ACC; i++)
        s += a[i];
    return s;
}

static int lanes(int level) { return level >= 2 ? 16 : level == 1 ? 8 : 1; }

/* One run of c->iters on this thread; returns the flops done. */
static double peak_run(peak_ctx *c, int64_t t)
{
    if (c->amx)
        return txc_kern_amx_peak_run(c->iters);
    if (c->bf16dot)
        return txc_kern_bf16dot_peak_run(c->iters, &c->sink[t]);
    float r;
#if TXC_HAVE_X86
    if (c->level >= 2)
        r = fma_avx512(c->iters, (float)t);
    else if (c->level == 1)
        r = fma_avx2(c->iters, (float)t);
    else
#endif
        r = fma_scalar(c->iters, (float)t);
    c->sink[t] += r;
    return (double)c->iters * ACC * lanes(c->level) * 2.0;
}

/* This thread's CPU time in ns (the wall clock where there is none). */
static double thread_ns(void)
{
    struct timespec ts;
#ifdef CLOCK_THREAD_CPUTIME_ID
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
#endif
    return txc_cli_now_ms() * 1e6;
}

static void peak_task(void *ctx, int64_t t)
{
    peak_ctx *c = ctx;
    peak_run(c, t); /* warm-up: clocks up, code and tiles in place */
    for (int r = 0; r < RUNS; r++) {
        double t0 = thread_ns(), f = peak_run(c, t), ns = thread_ns() - t0;
        c->rate[t][r] = ns > 0 ? f / ns : 0;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

txc_peak txc_measure_peak(bool bf16_weights)
{
    txc_peak p = {.simd_level = txc_kern_simd_level()};
    p.what = p.simd_level >= 2 ? "avx512 fp32 fma" : p.simd_level == 1 ? "avx2 fp32 fma" : "scalar fp32";
    static peak_ctx c;
    memset(&c, 0, sizeof c);
    c.level = p.simd_level;
    c.amx = bf16_weights && p.simd_level >= 3;
    c.bf16dot = bf16_weights && p.simd_level == 2 && txc_kern_avx512bf16();
    if (c.amx)
        p.what = "amx bf16 tdpbf16ps";
    if (c.bf16dot)
        p.what = "avx512 bf16 vdpbf16ps";
    int n = txc_threads_get();
    /* Size a run to ~5 ms of CPU time on this thread (doubling until a
     * calibration run takes at least 1 ms, so a preempted first run or a
     * coarse clock does not mis-size it). */
    c.iters = 1 << 12;
    for (int i = 0; i < 24; i++) {
        double t0 = thread_ns();
        peak_run(&c, 0);
        double ns = thread_ns() - t0;
        if (ns >= 1e6) {
            c.iters = (int64_t)((double)c.iters * 5e6 / ns) + 1;
            break;
        }
        c.iters *= 2;
    }
    txc_parallel_for(n, peak_task, &c);
    /* Each thread's median run: a run's CPU time leaves out the time the
     * thread was not running, and the median leaves out runs slowed by a
     * busy sibling hyperthread or a frequency change. The machine's peak is
     * the sum over the threads. */
    double sum = 0;
    for (int t = 0; t < n; t++) {
        qsort(c.rate[t], RUNS, sizeof(double), cmp_double);
        sum += c.rate[t][RUNS / 2];
    }
    float s = 0;
    for (int t = 0; t < n; t++)
        s += c.sink[t];
    if (s == 12345.0f) /* (keeps the sums alive) */
        fprintf(stderr, " ");
    p.gflops = sum; /* flops per ns = GFLOP/s */
    return p;
}

size_t txc_llc_bytes(void) { return txc_cpu_caches_get()->llc_bytes; }
