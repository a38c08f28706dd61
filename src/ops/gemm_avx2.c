/* The prefill GEMM on AVX2+FMA CPUs without AVX-512 and AMX (AMD Zen 1-3,
 * Intel Haswell..Comet Lake): C = A·Bᵀ for float32 A and float32, bfloat16
 * or float16 B (the weight, rows of stride ldb), in 6 x 16 register tiles
 * over packed operands — the GotoBLAS/BLIS scheme (K. Goto, R. van de
 * Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS
 * 34(3), 2008; BLIS's haswell sgemm micro-kernel is 6 x 16 too). See
 * ops/kernels.h (txc_kern_gemm_nt_avx2_packed) for the contract.
 *
 * Summation order: every C[i,j] is one fused multiply-add chain in
 * increasing k from 0, c = fma(A[i,k], B[j,k], c) — the same for every M,
 * N, stride, blocking and thread count: a K block continues from the value
 * the previous one stored in C (a float32 store and load are exact), padded
 * rows and columns are computed apart and dropped, rows and columns are
 * never combined. So a row does not depend on the other rows, and the
 * result is bit-identical to the scalar loop with fmaf (tests/
 * test_gemm_avx2.c checks that bit for bit).
 *
 * Why this shape. Zen 3 (and Intel since Haswell) issue 2 FMAs a cycle with
 * a 4-5 cycle latency. The 6 x 16 tile keeps 12 accumulators (independent
 * chains: enough to cover the latency at 2 a cycle), 2 B vectors and one
 * broadcast A value in the 16 ymm registers and needs 8 loads per 12 FMAs
 * (2 a cycle): FMA-bound. B is converted to float32 once per 16 columns and
 * K block into a panel (KC x 16 floats, 16 KiB: stays in L1 while every
 * 6-row tile of the M block meets it); A is packed once per GEMM into 6-row
 * panels (k-major: 6 floats per k; 4-row panels and 4 x 16 tiles where 6
 * would leave a padded edge: 128 rows are 20 x 6 + 2 x 4, not 22 x 6), the
 * panels packed by the threads in parallel, and one K block of it (MC x KC
 * floats, 192 KiB at most) stays in L2 while a thread's columns stream past
 * it. The next B panel's raw rows are prefetched while a panel's tiles run
 * (a weight is read once per GEMM, from memory). Threads take chunks of
 * columns (multiples of 16) on demand; sibling GEMMs of one A (q/k/v,
 * gate/up) share the packed A and one set of chunks.
 */
#include "ops/avx2_dot.h"
#include "ops/cpu_cache.h"
#include "ops/kernels.h"
#include "txc/threads.h"

#include <string.h>

#if TXC_HAVE_X86

enum { NR = 16, KC_MAX = 256, MC_MAX = 192, MAX_TILES = MC_MAX / 4 + 2 };

/* The k loop of an h x 16 tile (h = 6 or 4) in assembly: with intrinsics
 * GCC spills accumulators (16 live vectors for h = 6), which puts a store
 * and a load into the FMA chains. The accumulators are operands; B's two
 * vectors and A's broadcasts take ymm12-15. vfmadd231ps x, y, acc:
 * acc = y * x + acc, one rounding (the contract's fmaf). A advances by h
 * floats a step, B by 16. */
#define K_STEP_B "vmovaps (%[b]), %%ymm12\n\tvmovaps 32(%[b]), %%ymm13\n\t"
#define K_ROW(off, reg, c0, c1)                                                                                    \
    "vbroadcastss " #off "(%[a]), %%" reg "\n\t"                                                                  \
    "vfmadd231ps %%ymm12, %%" reg ", %[" c0 "]\n\t"                                                                \
    "vfmadd231ps %%ymm13, %%" reg ", %[" c1 "]\n\t"

/* The 6 x 16 tile c (rows of stride ldc) += the kc-step product of the A
 * panel (kc x 6) and the B panel (kc x 16); load: start from c, else from 0. */
TXC_INLINE_AVX2 void micro_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load)
{
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (load) {
        c00 = _mm256_loadu_ps(c + 0 * ldc), c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc), c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    if (kc > 0) {
        int64_t n = kc;
        __asm__ volatile("1:\n\t" K_STEP_B K_ROW(0, "ymm14", "c00", "c01") K_ROW(4, "ymm15", "c10", "c11")
                             K_ROW(8, "ymm14", "c20", "c21") K_ROW(12, "ymm15", "c30", "c31")
                                 K_ROW(16, "ymm14", "c40", "c41") K_ROW(20, "ymm15", "c50", "c51")
                         "addq $24, %[a]\n\t"
                         "addq $64, %[b]\n\t"
                         "decq %[n]\n\t"
                         "jnz 1b\n\t"
                         : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20),
                           [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41),
                           [c50] "+x"(c50), [c51] "+x"(c51), [a] "+r"(a), [b] "+r"(b), [n] "+r"(n)
                         :
                         : "cc", "memory", "xmm12", "xmm13", "xmm14", "xmm15");
    }
    _mm256_storeu_ps(c + 0 * ldc, c00), _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10), _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

/* The same for a 4 x 16 tile over a 4-row A panel (kc x 4): the rows that
 * 6-row tiles would leave as a padded edge (M = 128 = 20 x 6 + 2 x 4). 8
 * chains at 2 FMAs a cycle still cover the FMA latency of 4 cycles. */
TXC_INLINE_AVX2 void micro_4x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load)
{
    __m256 c00, c01, c10, c11, c20, c21, c30, c31;
    if (load) {
        c00 = _mm256_loadu_ps(c + 0 * ldc), c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc), c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
    }
    if (kc > 0) {
        int64_t n = kc;
        __asm__ volatile("1:\n\t" K_STEP_B K_ROW(0, "ymm14", "c00", "c01") K_ROW(4, "ymm15", "c10", "c11")
                             K_ROW(8, "ymm14", "c20", "c21") K_ROW(12, "ymm15", "c30", "c31")
                         "addq $16, %[a]\n\t"
                         "addq $64, %[b]\n\t"
                         "decq %[n]\n\t"
                         "jnz 1b\n\t"
                         : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20),
                           [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31), [a] "+r"(a), [b] "+r"(b), [n] "+r"(n)
                         :
                         : "cc", "memory", "xmm12", "xmm13", "xmm14", "xmm15");
    }
    _mm256_storeu_ps(c + 0 * ldc, c00), _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10), _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
}

/* An h x 16 tile (h = 6 or 4) of which mr rows and nr columns are C's (the
 * panels padded with zeros): the full tile on a copy, its mr x nr part
 * written back. */
TXC_INLINE_AVX2 void micro_edge(int h, int mr, int nr, int64_t kc, const float *a, const float *b, float *c,
                                int64_t ldc, bool load)
{
    float t[6 * NR];
    memset(t, 0, sizeof t);
    if (load)
        for (int i = 0; i < mr; i++)
            memcpy(t + i * NR, c + i * ldc, (size_t)nr * sizeof(float));
    if (h == 6)
        micro_6x16(kc, a, b, t, NR, true);
    else
        micro_4x16(kc, a, b, t, NR, true);
    for (int i = 0; i < mr; i++)
        memcpy(c + i * ldc, t + i * NR, (size_t)nr * sizeof(float));
}

/* Transpose the 8 x 8 block r[0..7] in place. */
TXC_INLINE_AVX2 void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* The B panel of columns j0..j0+nc-1 (nc <= 16; the rest zeros) and k in
 * [k0, k0+kc): P[k * 16 + c] = B[j0 + c, k0 + k] as float32. */
TXC_INLINE_AVX2 void pack_b(const int DT, const char *B, int64_t ldb, int64_t j0, int nc, int64_t k0, int64_t kc,
                           float *P)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    for (int g = 0; g < NR / 8; g++) {
        const char *row[8];
        int live = 0;
        for (int r = 0; r < 8; r++) {
            int c = g * 8 + r;
            row[r] = c < nc ? B + (size_t)((j0 + c) * ldb + k0) * es : NULL;
            live += c < nc;
        }
        float *p = P + g * 8;
        if (live == 0) {
            for (int64_t k = 0; k < kc; k++)
                _mm256_store_ps(p + k * NR, _mm256_setzero_ps());
            continue;
        }
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 v[8];
            for (int r = 0; r < 8; r++)
                v[r] = row[r] ? ld8(row[r] + (size_t)k * es, DT) : _mm256_setzero_ps();
            transpose8(v);
            for (int q = 0; q < 8; q++)
                _mm256_store_ps(p + (k + q) * NR, v[q]);
        }
        for (; k < kc; k++)
            for (int r = 0; r < 8; r++)
                p[k * NR + r] = row[r] ? ld1(row[r] + (size_t)k * es, DT) : 0.0f;
    }
}

/* The row tiles of an M block of mc rows: 6-row tiles, and 4-row ones
 * where 6 would leave a short edge (rows left: 8 -> 4 + 4, 7 -> 4 + 3,
 * 5 -> one 6-row edge, 1..4 -> one 4-row tile or edge). Tile t covers rows
 * [i, i + mr) with height h (mr < h: an edge, the last tile); its A panel
 * starts at float i * K (the tiles before hold i rows of K). */
typedef struct row_tile {
    int64_t i;
    int h, mr;
} row_tile;

static int plan_rows(int64_t mc, row_tile *t)
{
    int n = 0;
    for (int64_t i = 0; i < mc;) {
        const int64_t rem = mc - i;
        int h = rem >= 9 || rem == 6 || rem == 5 ? 6 : 4;
        int mr = rem < h ? (int)rem : h;
        t[n++] = (row_tile){i, h, mr};
        i += mr;
    }
    return n;
}

/* A's panel for tile t: P[k * h + r] = A[i + r, k] for r < mr, zeros for
 * r in [mr, h), k < K. Eight k at a time through an 8 x 8 transpose (rows
 * h..7 zero), each stored as 8 floats at P + k * h whose tail the next
 * store overwrites (the last one masked to h floats). */
TXC_INLINE_AVX2 void pack_a_tile(const row_tile *t, int64_t K, const float *A, int64_t lda, float *P)
{
    const int h = t->h, mr = t->mr;
    float *p = P + t->i * K;
    const float *a[6];
    for (int r = 0; r < mr; r++)
        a[r] = A + (t->i + r) * lda;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 v[8];
        for (int r = 0; r < 8; r++)
            v[r] = r < mr ? _mm256_loadu_ps(a[r] + k) : _mm256_setzero_ps();
        transpose8(v);
        for (int q = 0; q < 7; q++)
            _mm256_storeu_ps(p + (k + q) * h, v[q]);
        if (k + 8 < K)
            _mm256_storeu_ps(p + (k + 7) * h, v[7]);
        else
            _mm256_maskstore_ps(p + (k + 7) * h, mask, v[7]);
    }
    for (; k < K; k++)
        for (int r = 0; r < h; r++)
            p[k * h + r] = r < mr ? a[r][k] : 0.0f;
}

/* One GEMM of a group: C (rows of stride ldc, row 0 of the M block) = A·Bᵀ
 * over its N columns, which are columns [col0, col0 + N rounded up to 16)
 * of the job's joint column space. */
typedef struct packed_part {
    const char *B;
    txc_dtype bdt;
    int64_t N, ldb, ldc, col0;
    float *C;
} packed_part;

typedef struct packed_job {
    int64_t mc, K, kc, ncb, cols, chunk;
    const float *A; /* row 0 of the M block, rows of stride lda */
    int64_t lda;
    float *Ap; /* its panels (plan_rows) */
    row_tile tiles[MAX_TILES];
    int n_tiles;
    int n_parts;
    packed_part parts[TXC_PACKED_GROUP_MAX];
} packed_job;

/* Prefetch into L1 the raw B of the panel after (n, k0) while this one's
 * tiles run: 16 rows x kc elements, spread over the tiles (the panel's
 * loads would otherwise wait for memory at its start: a weight is read once
 * per GEMM, from DRAM). */
typedef struct b_prefetch {
    const char *base; /* row 0 of the next panel at its k0 */
    int64_t stride;   /* bytes between its rows */
    int rows, lines;  /* rows (<= 16) and 64-byte lines per row */
    int next, per_tile;
} b_prefetch;

TXC_INLINE_AVX2 void prefetch_some(b_prefetch *f)
{
    const int total = f->rows * f->lines;
    for (int q = 0; q < f->per_tile && f->next < total; q++, f->next++)
        _mm_prefetch((const char *)((uintptr_t)f->base + (uintptr_t)((f->next / f->lines) * f->stride) +
                                    (uintptr_t)(f->next % f->lines) * 64),
                     _MM_HINT_T0); /* (an address, not a pointer into B: the last line may pass its end) */
}

TXC_INLINE_AVX2 void cols_dt(const int DT, const packed_job *j, const packed_part *pt, int64_t c0, int64_t c1)
{
    _Alignas(32) float Bp[KC_MAX * NR];
    const int64_t K = j->K;
    const size_t es = DT == TXC_F32 ? 4 : 2;
    for (int64_t g0 = c0; g0 < c1; g0 += j->ncb) { /* the C block stays in L2 over the K blocks */
        const int64_t g1 = g0 + j->ncb < c1 ? g0 + j->ncb : c1;
        for (int64_t k0 = 0; k0 < K; k0 += j->kc) {
            const int64_t kc = K - k0 < j->kc ? K - k0 : j->kc;
            const bool load = k0 > 0;
            for (int64_t n = g0; n < g1; n += NR) {
                const int nr = g1 - n < NR ? (int)(g1 - n) : NR;
                pack_b(DT, pt->B, pt->ldb, n, nr, k0, kc, Bp);
                /* the next panel: the next 16 columns, else the group's first at the next K block */
                int64_t nn = n + NR, nk = k0;
                if (nn >= g1)
                    nn = g0, nk = k0 + j->kc;
                b_prefetch f = {0};
                if (nk < K) {
                    const int64_t nkc = K - nk < j->kc ? K - nk : j->kc;
                    f.base = pt->B + (size_t)(nn * pt->ldb + nk) * es;
                    f.stride = pt->ldb * (int64_t)es;
                    f.rows = g1 - nn < NR ? (int)(g1 - nn) : NR;
                    f.lines = (int)(((int64_t)nkc * (int64_t)es + 63) / 64) + 1;
                    f.per_tile = (f.rows * f.lines + j->n_tiles - 1) / j->n_tiles;
                }
                for (int t = 0; t < j->n_tiles; t++) {
                    const row_tile *rt = &j->tiles[t];
                    const float *a = j->Ap + rt->i * K + k0 * rt->h;
                    float *c = pt->C + rt->i * pt->ldc + n;
                    prefetch_some(&f);
                    if (rt->mr < rt->h || nr < NR)
                        micro_edge(rt->h, rt->mr, nr, kc, a, Bp, c, pt->ldc, load);
                    else if (rt->h == 6)
                        micro_6x16(kc, a, Bp, c, pt->ldc, load);
                    else
                        micro_4x16(kc, a, Bp, c, pt->ldc, load);
                }
            }
        }
    }
}

/* Task t: columns [t * chunk, (t + 1) * chunk) of the joint space. */
TXC_AVX2 static void cols_task(void *ctx, int64_t t)
{
    const packed_job *j = ctx;
    const int64_t c0 = t * j->chunk, c1 = c0 + j->chunk < j->cols ? c0 + j->chunk : j->cols;
    for (int p = 0; p < j->n_parts; p++) {
        const packed_part *pt = &j->parts[p];
        int64_t lo = c0 > pt->col0 ? c0 - pt->col0 : 0, hi = c1 - pt->col0 < pt->N ? c1 - pt->col0 : pt->N;
        if (lo >= hi)
            continue;
        if (pt->bdt == TXC_F32)
            cols_dt(TXC_F32, j, pt, lo, hi);
        else if (pt->bdt == TXC_BF16)
            cols_dt(TXC_BF16, j, pt, lo, hi);
        else
            cols_dt(TXC_F16, j, pt, lo, hi);
    }
}

/* Task t: the A panel of tile t. */
TXC_AVX2 static void pack_task(void *ctx, int64_t t)
{
    const packed_job *j = ctx;
    pack_a_tile(&j->tiles[t], j->K, j->A, j->lda, j->Ap);
}

/* Below this many multiply-adds the columns run on the calling thread (as
 * linalg.c's PAR_MIN_MACS). */
#define PACKED_PAR_MIN_MACS (64 * 1024)
/* Below this many A elements an M block's panels are packed on the calling thread. */
#define PACK_PAR_MIN (32 * 1024)
/* Column chunks per thread (taken on demand). */
#define PACKED_CHUNKS 4

static bool gemm_packed(int n_parts, const packed_part *parts, int64_t M, int64_t K, const float *A, int64_t lda)
{
    /* M blocks of at most MC_MAX rows, as even as multiples of 6 allow. */
    const int64_t nmb = (M + MC_MAX - 1) / MC_MAX;
    const int64_t mcb = ((M + nmb - 1) / nmb + 5) / 6 * 6;
    /* K blocks of at most KC_MAX, as even as possible. */
    const int64_t nkb = (K + KC_MAX - 1) / KC_MAX;
    const int64_t kc = (K + nkb - 1) / nkb;
    /* the panels: mcb rows (+3: a last 4-row edge) x K, +8 floats */
    if ((uint64_t)(mcb + 4) * (uint64_t)K > SIZE_MAX / sizeof(float) - 8)
        return false;
    float *Ap = txc_scratch(((size_t)(mcb + 4) * (size_t)K + 8) * sizeof(float), TXC_SCRATCH_GEMM_PACK);
    if (!Ap)
        return false;
    /* Column blocks whose C (mcb x ncb floats) takes a quarter of L2. */
    size_t l2 = txc_cpu_caches_get()->l2_bytes;
    if (l2 < ((size_t)128 << 10) || l2 > ((size_t)8 << 20))
        l2 = (size_t)512 << 10;
    int64_t ncb = (int64_t)(l2 / 4 / ((size_t)mcb * sizeof(float))) / NR * NR;
    if (ncb < NR)
        ncb = NR;
    const int threads = txc_threads_get();
    packed_job j = {.K = K, .kc = kc, .ncb = ncb, .lda = lda, .Ap = Ap, .n_parts = n_parts};
    int64_t cols = 0;
    for (int p = 0; p < n_parts; p++) {
        j.parts[p] = parts[p];
        j.parts[p].col0 = cols;
        cols += (parts[p].N + NR - 1) / NR * NR;
    }
    j.cols = cols;
    for (int64_t m0 = 0; m0 < M; m0 += mcb) {
        const int64_t mc = M - m0 < mcb ? M - m0 : mcb;
        j.mc = mc;
        j.A = A + m0 * lda;
        j.n_tiles = plan_rows(mc, j.tiles);
        for (int p = 0; p < n_parts; p++)
            j.parts[p].C = parts[p].C + m0 * parts[p].ldc;
        if (threads > 1 && mc * K >= PACK_PAR_MIN)
            txc_parallel_for_dynamic(j.n_tiles, pack_task, &j);
        else
            for (int t = 0; t < j.n_tiles; t++)
                pack_task(&j, t);
        j.chunk = cols;
        if (threads > 1 && (double)mc * (double)cols * (double)K >= PACKED_PAR_MIN_MACS && cols > NR) {
            int64_t chunk = (cols + threads * PACKED_CHUNKS - 1) / (threads * PACKED_CHUNKS);
            j.chunk = (chunk + NR - 1) / NR * NR;
            txc_parallel_for_dynamic((cols + j.chunk - 1) / j.chunk, cols_task, &j);
        } else {
            cols_task(&j, 0);
        }
    }
    return true;
}
#endif

static bool packed_dtype(txc_dtype dt) { return dt == TXC_F32 || dt == TXC_BF16 || dt == TXC_F16; }

bool txc_kern_gemm_nt_avx2_packed_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K,
                                        const float *A, int64_t lda)
{
#if TXC_HAVE_X86
    if (n_parts < 1 || n_parts > TXC_PACKED_GROUP_MAX || M <= 0 || K <= 0 || txc_kern_simd_level() < 1)
        return false;
    packed_part pp[TXC_PACKED_GROUP_MAX];
    for (int p = 0; p < n_parts; p++) {
        if (parts[p].N <= 0 || !packed_dtype(parts[p].bdt))
            return false;
        pp[p] = (packed_part){parts[p].B, parts[p].bdt, parts[p].N, parts[p].ldb, parts[p].N, 0, parts[p].C};
    }
    return gemm_packed(n_parts, pp, M, K, A, lda);
#else
    (void)n_parts, (void)parts, (void)M, (void)K, (void)A, (void)lda;
    return false;
#endif
}

bool txc_kern_gemm_nt_avx2_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                                  txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
#if TXC_HAVE_X86
    if (M <= 0 || N <= 0 || K <= 0 || txc_kern_simd_level() < 1 || !packed_dtype(bdt))
        return false;
    const packed_part p = {B, bdt, N, ldb, ldc, 0, C};
    return gemm_packed(1, &p, M, K, A, lda);
#else
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)bdt, (void)ldb, (void)C, (void)ldc;
    return false;
#endif
}
