/* `txc bench --profile`: the compiled steps' kernel time by op kind and by
 * GEMM shape (txc_jit_get_profile, txc_jit_get_gemm_profile), collected
 * from a generator after a row's generation and printed as the table's
 * profile lines or put in the row's JSON. See tools/bench_profile.h. */
#include "tools/bench_profile.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ALL_KINDS 64

static void collect(const txc_generator *gen, int which, const txc_jit *jit, txc_bench_profile *p)
{
    memset(p, 0, sizeof *p);
    txc_jit_op_time all[ALL_KINDS];
    int n = jit ? txc_jit_get_profile(jit, all, ALL_KINDS) : txc_generator_jit_profile(gen, which, all, ALL_KINDS);
    n = n < ALL_KINDS ? n : ALL_KINDS;
    for (int i = 0; i < n; i++)
        p->total_ms += all[i].ms;
    p->n_op = n < TXC_BENCH_PROFILE_TOP ? n : TXC_BENCH_PROFILE_TOP;
    memcpy(p->op, all, sizeof(txc_jit_op_time) * (size_t)p->n_op);
    txc_jit_gemm_time shapes[TXC_JIT_PROFILE_GEMM_SHAPES + 1];
    int ns = jit ? txc_jit_get_gemm_profile(jit, shapes, TXC_JIT_PROFILE_GEMM_SHAPES + 1)
                 : txc_generator_jit_gemm_profile(gen, which, shapes, TXC_JIT_PROFILE_GEMM_SHAPES + 1);
    ns = ns < TXC_JIT_PROFILE_GEMM_SHAPES + 1 ? ns : TXC_JIT_PROFILE_GEMM_SHAPES + 1;
    for (int i = 0; i < ns; i++)
        p->gemm_ms += shapes[i].ms;
    p->n_gemm = ns < TXC_BENCH_PROFILE_GEMM_TOP ? ns : TXC_BENCH_PROFILE_GEMM_TOP;
    memcpy(p->gemm, shapes, sizeof(txc_jit_gemm_time) * (size_t)p->n_gemm);
    p->calls = (int64_t)(jit ? txc_jit_get_stats(jit).calls : txc_generator_jit_stats(gen, which).calls);
}

void txc_bench_profile_collect(const txc_generator *gen, int which, txc_bench_profile *p) { collect(gen, which, NULL, p); }

void txc_bench_profile_collect_jit(const txc_jit *jit, txc_bench_profile *p) { collect(NULL, 0, jit, p); }

static double gemm_gflops(const txc_jit_gemm_time *g)
{
    return g->ms > 0 ? 2.0 * (double)g->M * (double)g->N * (double)g->K * (double)g->calls / (g->ms * 1e6) : 0;
}

static double share(double ms, double total) { return total > 0 ? ms / total : 0; }

void txc_bench_profile_print(const char *label, const char *step, const char *what, const txc_bench_profile *p,
                             double peak_gflops)
{
    if (!p->n_op)
        return;
    printf("%s %s step, kernel time by op (%.1f ms over %s; the %d largest):", label, step, p->total_ms, what,
           p->n_op);
    for (int k = 0; k < p->n_op; k++)
        printf("%s %s %.1f%%", k ? "," : "", p->op[k].op, 100.0 * share(p->op[k].ms, p->total_ms));
    printf("\n");
    if (!p->n_gemm)
        return;
    printf("%s %s step, GEMM kernel time by shape M x N x K (%.1f ms, %.1f%% of the step's; the %d largest):\n",
           label, step, p->gemm_ms, 100.0 * share(p->gemm_ms, p->total_ms), p->n_gemm);
    for (int k = 0; k < p->n_gemm; k++) {
        const txc_jit_gemm_time *g = &p->gemm[k];
        char shape[96];
        if (!g->parts)
            snprintf(shape, sizeof shape, "-");
        else
            snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)g->M, (long long)g->N, (long long)g->K);
        char frac[32] = "";
        if (peak_gflops > 0 && g->parts)
            snprintf(frac, sizeof frac, " (%.2f of peak)", gemm_gflops(g) / peak_gflops);
        char parts[24] = "";
        if (g->parts > 1)
            snprintf(parts, sizeof parts, ", %d linears", g->parts);
        printf("  %-14s %-18s %6llu calls %9.2f ms %5.1f%%", g->op, shape, (unsigned long long)g->calls, g->ms,
               100.0 * share(g->ms, p->total_ms));
        if (g->parts)
            printf(" %8.2f GFLOP/s%s%s", gemm_gflops(g), frac, parts);
        printf("\n");
    }
}

static double round_to(double v, double q) { return round(v / q) * q; }

void txc_bench_profile_json(void *row, const char *key, const txc_bench_profile *p, double peak_gflops)
{
    cJSON *o = row;
    if (!p->n_op)
        return;
    cJSON *pa = cJSON_AddArrayToObject(o, key);
    for (int k = 0; k < p->n_op; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", p->op[k].op);
        cJSON_AddNumberToObject(e, "calls", (double)p->op[k].calls);
        cJSON_AddNumberToObject(e, "ms", round_to(p->op[k].ms, 1e-3));
        cJSON_AddNumberToObject(e, "share", round_to(share(p->op[k].ms, p->total_ms), 1e-4));
        cJSON_AddItemToArray(pa, e);
    }
    if (!p->n_gemm)
        return;
    char gkey[64];
    snprintf(gkey, sizeof gkey, "%s_gemm", key);
    cJSON *ga = cJSON_AddArrayToObject(o, gkey);
    for (int k = 0; k < p->n_gemm; k++) {
        const txc_jit_gemm_time *g = &p->gemm[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", g->op);
        cJSON_AddNumberToObject(e, "M", (double)g->M);
        cJSON_AddNumberToObject(e, "N", (double)g->N);
        cJSON_AddNumberToObject(e, "K", (double)g->K);
        cJSON_AddNumberToObject(e, "parts", g->parts);
        cJSON_AddNumberToObject(e, "calls", (double)g->calls);
        cJSON_AddNumberToObject(e, "ms", round_to(g->ms, 1e-3));
        cJSON_AddNumberToObject(e, "share", round_to(share(g->ms, p->total_ms), 1e-4));
        cJSON_AddNumberToObject(e, "gflops", round_to(gemm_gflops(g), 1e-3));
        if (peak_gflops > 0 && g->parts)
            cJSON_AddNumberToObject(e, "peak_fraction", round_to(gemm_gflops(g) / peak_gflops, 1e-4));
        else
            cJSON_AddNullToObject(e, "peak_fraction");
        cJSON_AddItemToArray(ga, e);
    }
}
