/* The machine's float32 FMA peak and last-level cache size; see tools/peak.h. */
#include "tools/peak.h"
#include "ops/kernels.h"
#include "tools/cli.h"
#include "txc/threads.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ACC 12 /* independent accumulators: hide the FMA latency (4 cycles x 2 ports + margin) */

typedef struct peak_ctx {
    int level;
    bool amx;
    int64_t iters;
    float sink[TXC_MAX_THREADS];
    double flops[TXC_MAX_THREADS];
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

static void peak_task(void *ctx, int64_t t)
{
    peak_ctx *c = ctx;
    float r;
    if (c->amx) {
        c->flops[t] = txc_kern_amx_peak_run(c->iters);
        return;
    }
    c->flops[t] = (double)c->iters * ACC * lanes(c->level) * 2.0;
#if TXC_HAVE_X86
    if (c->level >= 2)
        r = fma_avx512(c->iters, (float)t);
    else if (c->level == 1)
        r = fma_avx2(c->iters, (float)t);
    else
#endif
        r = fma_scalar(c->iters, (float)t);
    c->sink[t] = r;
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
    c.level = p.simd_level;
    c.amx = bf16_weights && p.simd_level >= 3;
    if (c.amx)
        p.what = "amx bf16 tdpbf16ps";
    int n = txc_threads_get();
    /* Size a pass to ~20 ms from a short calibration run. */
    c.iters = 1 << 16;
    double t0 = txc_cli_now_ms();
    txc_parallel_for(n, peak_task, &c);
    double ms = txc_cli_now_ms() - t0;
    if (ms > 0)
        c.iters = (int64_t)((double)c.iters * 20.0 / ms) + 1;
    double g[5];
    for (int pass = -1; pass < 5; pass++) {
        t0 = txc_cli_now_ms();
        txc_parallel_for(n, peak_task, &c);
        ms = txc_cli_now_ms() - t0;
        double flops = 0;
        for (int t = 0; t < n; t++)
            flops += c.flops[t];
        if (pass >= 0)
            g[pass] = ms > 0 ? flops / (ms * 1e6) : 0;
    }
    float s = 0;
    for (int t = 0; t < n; t++)
        s += c.sink[t];
    if (s == 12345.0f) /* (keeps the sums alive) */
        fprintf(stderr, " ");
    qsort(g, 5, sizeof *g, cmp_double);
    p.gflops = g[4]; /* the best pass: a peak is what the machine can do, other work only lowers a pass */
    return p;
}

size_t txc_llc_bytes(void)
{
    /* The highest cache level the kernel lists for cpu0 in /sys, first:
     * glibc's _SC_LEVEL3_CACHE_SIZE is its own reading of CPUID, and on
     * AMD EPYC VMs it said 256 MiB (Zen 3) and 384 MiB (Zen 5) where the
     * kernel and lscpu say 32 MiB. */
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], buf[64];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            unsigned long long sz = strtoull(buf, &end, 10);
            if (*end == 'K')
                sz <<= 10;
            else if (*end == 'M')
                sz <<= 20;
            if (level >= best_level && sz) {
                best_level = level;
                best = (size_t)sz;
            }
        }
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!best) { /* no /sys (a container without it): glibc's figure */
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (v > 0)
            best = (size_t)v;
    }
#endif
    return best;
}
