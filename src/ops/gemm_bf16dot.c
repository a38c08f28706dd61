/* The bfloat16 prefill GEMM on AVX-512 BF16 CPUs without AMX (AMD Zen 4/5,
 * Intel Cooper Lake): C = A·Bᵀ for float32 A rounded to bfloat16 (round to
 * nearest even, VCVTNE2PS2BF16, as amx.c and torch's .to(torch.bfloat16))
 * and bfloat16 weights B, with VDPBF16PS (_mm512_dpbf16_ps): float32
 * products of bfloat16 pairs added into float32 accumulators — the
 * arithmetic of torch.nn.functional.linear on bfloat16 inputs (oneDNN's
 * avx512_core_bf16 path), except that C stays float32.
 *
 * Scheme (GotoBLAS/BLIS, K. Goto and R. van de Geijn, "Anatomy of
 * High-Performance Matrix Multiplication", ACM TOMS 34(3), 2008): A is
 * rounded to bfloat16 once per GEMM (rows of K rounded up to even, a zero
 * pad); B is packed per 64 columns and 256 k into the pair-interleaved
 * layout VDPBF16PS reads (word p of column c = B[c][k0+2p], B[c][k0+2p+1]),
 * 32 KiB, L1-resident while every row tile of the M block uses it; the
 * register tile is 6 rows x 64 columns (24 zmm accumulators, 4 zmm of B, A
 * broadcast a pair at a time from memory). Rows at the M edge are shorter
 * tiles (7..11 rows left: two near-equal tiles, fewer than 6: one; the same
 * instructions per row), columns at the N edge are
 * zero-padded in the pack and stored masked. Threads take chunks of the
 * columns (multiples of 64) on demand; sibling GEMMs of one A (q/k/v,
 * gate/up) share the rounded A and one set of chunks.
 *
 * Order (what makes the bits independent of M, the tiles, the threads):
 * every C[i,j] is the float32 chain, from 0, over k pairs p = 0..ceil(K/2)-1
 * in order, of  c = (c + a[2p+1]·b[2p+1]) + a[2p]·b[2p]  (VDPBF16PS adds the
 * odd element's product first; each product of two bfloat16 is exact in
 * float32; a K tail pads a zero pair element), with denormal inputs and
 * results flushed to zero (VDPBF16PS ignores MXCSR: DAZ and FTZ always).
 * tests/test_gemm_bf16dot.c checks these bits against a scalar emulation.
 */
#include "ops/kernels.h"
#include "txc/threads.h"

#include <stdlib.h>
#include <string.h>

#if TXC_HAVE_X86
#include <cpuid.h>
#endif

/* ---- detection ------------------------------------------------------------------ */

static int bf16dot_override = -1;

bool txc_kern_avx512bf16_cpu(void)
{
#if TXC_HAVE_X86
    static int state; /* 0 unknown, 1 yes, -1 no (benign race: same answer) */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        unsigned eax = 0, ebx, ecx, edx;
        /* CPUID.(EAX=7,ECX=1):EAX bit 5 = AVX512_BF16; the OS's AVX-512
         * state (XCR0 opmask/ZMM) is part of SIMD level 2's check. */
        bool cpu = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
        const char *env = getenv("TXC_AVX512_BF16");
        if (env && env[0] == '0' && !env[1])
            cpu = false;
        s = cpu ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 1;
#else
    return false;
#endif
}

void txc_kern_set_avx512bf16(int on) { __atomic_store_n(&bf16dot_override, on, __ATOMIC_RELAXED); }

bool txc_kern_avx512bf16(void)
{
    return __atomic_load_n(&bf16dot_override, __ATOMIC_RELAXED) != 0 && txc_kern_simd_level() >= 2 &&
           txc_kern_avx512bf16_cpu();
}

#if TXC_HAVE_X86

#define TXC_BF16DOT_TARGET TXC_AVX512_TARGET ",avx512bf16"
#define TXC_BF16DOT __attribute__((target(TXC_BF16DOT_TARGET)))
#define TXC_INLINE_BF16DOT static inline __attribute__((always_inline, target(TXC_BF16DOT_TARGET)))

enum { BNR = 64, BKC = 256, BMR = 6, BMC = 252 /* rows per M block (42 tiles) */ };
enum { FKC = 128 /* k per block of the float32 panel: 64 x 128 floats, the bf16 panel's 32 KiB */ };
enum { PSTEPS = 128 /* rows of 64 32-bit words in a packed panel (either kind) */ };

/* A panel's packer: columns n..n+nr-1 (nr <= 64; the rest zeros) of B (rows
 * of ldb elements) over `steps` panel rows from element k0 (elements at
 * k >= K zero) into bp (steps x 64 words). */
typedef void (*pk_pack_fn)(const void *B, int64_t ldb, int64_t n, int nr, int64_t k0, int64_t steps, int64_t K,
                           uint32_t *bp);
/* A register tile: rows of A (lda elements) from the block's first k, over
 * `steps` panel rows; mask[v]: the columns of vector v that are C's; load:
 * add to C (a later K block). */
typedef void (*pk_micro_fn)(int64_t steps, const void *a, int64_t lda, const uint32_t *bp, float *c, int64_t ldc,
                            const __mmask16 *mask, bool load);

typedef struct bd_part {
    const void *B;
    int64_t N, ldb, ldc, col0;
    float *C;
    pk_pack_fn pack;
    int esize; /* bytes of one element of B */
} bd_part;

typedef struct bd_job {
    int64_t mc, K, Kp, kc, cols, chunk;
    const void *A;     /* the M block's rows: bf16, Kp each (VDPBF16PS), or float32 of stride lda (FMA) */
    int64_t lda;       /* elements */
    int a_esize, kstep; /* bytes of an element of A; elements of K per panel row (2: a bf16 pair; 1) */
    const pk_micro_fn *micro; /* [h] for tiles of h = 1..6 rows */
    int n_parts;
    bd_part parts[TXC_PACKED_GROUP_MAX];
} bd_job;

/* MR rows x 64 columns over kpn pairs: a (rows of lda bf16) at its k0, bp
 * the packed panel (kpn x 64 words), c the tile's C. */
TXC_INLINE_BF16DOT void bd_micro(const int MR, int64_t kpn, const uint16_t *a, int64_t lda, const uint32_t *bp,
                                  float *c, int64_t ldc, const __mmask16 *mask, bool load)
{
    __m512 acc[BMR][4];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < 4; v++)
            acc[r][v] = load ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t p = 0; p < kpn; p++) {
        const uint32_t *b = bp + p * BNR;
        __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);
        __m512bh b2 = (__m512bh)_mm512_load_si512(b + 32), b3 = (__m512bh)_mm512_load_si512(b + 48);
        for (int r = 0; r < MR; r++) {
            int32_t w;
            memcpy(&w, a + r * lda + 2 * p, 4);
            __m512bh av = (__m512bh)_mm512_set1_epi32(w);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
            acc[r][2] = _mm512_dpbf16_ps(acc[r][2], av, b2);
            acc[r][3] = _mm512_dpbf16_ps(acc[r][3], av, b3);
        }
    }
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < 4; v++)
            _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

/* The float32 tile: c = fma(a[k], b[k], c) over k in order, a broadcast
 * from float32 A, bp the panel of float32 columns (steps x 64 floats). */
TXC_INLINE_AVX512 void fm_micro(const int MR, int64_t steps, const float *a, int64_t lda, const uint32_t *bp,
                                float *c, int64_t ldc, const __mmask16 *mask, bool load)
{
    __m512 acc[BMR][4];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < 4; v++)
            acc[r][v] = load ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t p = 0; p < steps; p++) {
        const float *b = (const float *)(bp + p * BNR);
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16), b2 = _mm512_load_ps(b + 32),
               b3 = _mm512_load_ps(b + 48);
        for (int r = 0; r < MR; r++) {
            __m512 av = _mm512_set1_ps(a[r * lda + p]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(av, b2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(av, b3, acc[r][3]);
        }
    }
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < 4; v++)
            _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

#define PK_MICRO_FNS(MR)                                                                                            \
    static TXC_BF16DOT void bd_micro_##MR(int64_t steps, const void *a, int64_t lda, const uint32_t *bp, float *c,  \
                                          int64_t ldc, const __mmask16 *mask, bool load)                            \
    {                                                                                                               \
        bd_micro(MR, steps, a, lda, bp, c, ldc, mask, load);                                                        \
    }                                                                                                               \
    static TXC_AVX512 void fm_micro_##MR(int64_t steps, const void *a, int64_t lda, const uint32_t *bp, float *c,   \
                                         int64_t ldc, const __mmask16 *mask, bool load)                             \
    {                                                                                                               \
        fm_micro(MR, steps, a, lda, bp, c, ldc, mask, load);                                                        \
    }
PK_MICRO_FNS(1)
PK_MICRO_FNS(2)
PK_MICRO_FNS(3)
PK_MICRO_FNS(4)
PK_MICRO_FNS(5)
PK_MICRO_FNS(6)
#undef PK_MICRO_FNS
static const pk_micro_fn bd_micros[BMR + 1] = {NULL, bd_micro_1, bd_micro_2, bd_micro_3, bd_micro_4, bd_micro_5, bd_micro_6};
static const pk_micro_fn fm_micros[BMR + 1] = {NULL, fm_micro_1, fm_micro_2, fm_micro_3, fm_micro_4, fm_micro_5, fm_micro_6};

/* Transpose the 16 x 16 block of 32-bit words r[0..15] in place. */
TXC_INLINE_AVX512 void bd_transpose16(__m512i r[16])
{
    __m512i t[16], v[16];
    for (int g = 0; g < 4; g++) {
        __m512i *q = r + 4 * g;
        __m512i t0 = _mm512_unpacklo_epi32(q[0], q[1]), t1 = _mm512_unpackhi_epi32(q[0], q[1]);
        __m512i t2 = _mm512_unpacklo_epi32(q[2], q[3]), t3 = _mm512_unpackhi_epi32(q[2], q[3]);
        /* v[4g + w] lane L: (r[4g..4g+3][4L + w]) */
        t[4 * g + 0] = _mm512_unpacklo_epi64(t0, t2), t[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
        t[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3), t[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int w = 0; w < 4; w++) { /* the 4 x 4 transpose of 128-bit lanes over the row groups */
        __m512i x0 = _mm512_shuffle_i32x4(t[w], t[4 + w], 0x44), x1 = _mm512_shuffle_i32x4(t[w], t[4 + w], 0xee);
        __m512i x2 = _mm512_shuffle_i32x4(t[8 + w], t[12 + w], 0x44), x3 = _mm512_shuffle_i32x4(t[8 + w], t[12 + w], 0xee);
        v[0 + w] = _mm512_shuffle_i32x4(x0, x2, 0x88), v[4 + w] = _mm512_shuffle_i32x4(x0, x2, 0xdd);
        v[8 + w] = _mm512_shuffle_i32x4(x1, x3, 0x88), v[12 + w] = _mm512_shuffle_i32x4(x1, x3, 0xdd);
    }
    for (int i = 0; i < 16; i++)
        r[i] = v[i];
}

/* 16 consecutive 32-bit words of row B + off (elements) of dtype dt, the
 * first `left` of them live (the rest zero; nothing past them read): for
 * TXC_BF16 with pairs, 16 pairs (32 bf16, left counts elements); otherwise
 * 16 elements widened exactly to float32. */
TXC_INLINE_AVX512 __m512i pk_load16(txc_dtype dt, bool pairs, const void *row, int64_t left)
{
    if (pairs) {
        const __mmask32 m = left >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << left) - 1u);
        return _mm512_maskz_loadu_epi16(m, row);
    }
    const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
    if (dt == TXC_F32)
        return _mm512_castps_si512(_mm512_maskz_loadu_ps(m, row));
    const __m256i h = _mm256_maskz_loadu_epi16(m, row);
    if (dt == TXC_F16)
        return _mm512_castps_si512(_mm512_cvtph_ps(h));
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16); /* bf16: the high half of a float32 */
}

/* The panel of columns n..n+nr-1 (nr <= 64; the rest zeros), panel rows
 * p < steps from element k0 of K: pairs (VDPBF16PS): bp[p * 64 + c] =
 * (B[n+c][k0+2p], B[n+c][k0+2p+1]); else bp[p * 64 + c] = (float)B[n+c][k0+p];
 * elements at k >= K zero. 16 rows x 16 words at a time through a 32-bit
 * transpose (masked loads: nothing past the block or K is read). */
TXC_INLINE_AVX512 void pk_pack(txc_dtype dt, bool pairs, const void *B, int64_t ldb, int64_t n, int nr, int64_t k0,
                               int64_t steps, int64_t K, uint32_t *bp)
{
    const int kstep = pairs ? 2 : 1;
    const size_t es = txc_dtype_size(dt);
    const int64_t kend = K - k0 < kstep * steps ? K - k0 : kstep * steps; /* elements of this block inside K */
    for (int g = 0; g < BNR / 16; g++) {
        const int live = nr - 16 * g;
        uint32_t *o = bp + 16 * g;
        if (live <= 0) {
            for (int64_t p = 0; p < steps; p++)
                _mm512_store_si512(o + p * BNR, _mm512_setzero_si512());
            continue;
        }
        const char *base = (const char *)B + ((n + 16 * g) * ldb + k0) * (int64_t)es;
        for (int64_t p0 = 0; p0 < steps; p0 += 16) {
            const int64_t left = kend - kstep * p0;
            __m512i r[16];
            for (int c = 0; c < 16; c++)
                r[c] = c < live && left > 0 ? pk_load16(dt, pairs, base + (c * ldb + kstep * p0) * (int64_t)es, left)
                                            : _mm512_setzero_si512();
            bd_transpose16(r);
            const int64_t w_n = steps - p0 < 16 ? steps - p0 : 16;
            for (int64_t w = 0; w < w_n; w++)
                _mm512_store_si512(o + (p0 + w) * BNR, r[w]);
        }
    }
}

#define PK_PACK_FN(name, dt, pairs)                                                                                 \
    static TXC_AVX512 void name(const void *B, int64_t ldb, int64_t n, int nr, int64_t k0, int64_t steps, int64_t K, \
                                uint32_t *bp)                                                                       \
    {                                                                                                               \
        pk_pack(dt, pairs, B, ldb, n, nr, k0, steps, K, bp);                                                        \
    }
PK_PACK_FN(pk_pack_pairs, TXC_BF16, true)
PK_PACK_FN(pk_pack_f32, TXC_F32, false)
PK_PACK_FN(pk_pack_f16, TXC_F16, false)
PK_PACK_FN(pk_pack_bf16, TXC_BF16, false)
#undef PK_PACK_FN

/* Row i of A (K floats) as Kp bfloat16 (round to nearest even), zero pad. */
TXC_INLINE_BF16DOT void bd_round_row(const float *a, int64_t K, int64_t Kp, uint16_t *o)
{
    int64_t k = 0;
    for (; k + 32 <= K; k += 32)
        _mm512_storeu_si512(o + k, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k)));
    if (k < Kp) {
        const int64_t left = K - k;
        const __mmask16 lo = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
        const __mmask16 hi = left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1u);
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, a + k + 16), _mm512_maskz_loadu_ps(lo, a + k));
        const int64_t n = Kp - k; /* <= 32 */
        _mm512_mask_storeu_epi16(o + k, n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1u), v);
    }
}

static TXC_AVX512 void bd_cols(const bd_job *j, const bd_part *pt, int64_t c0, int64_t c1)
{
    _Alignas(64) uint32_t bp[PSTEPS * BNR];
    const int64_t es = pt->esize;
    for (int64_t n = c0; n < c1; n += BNR) {
        const int nr = c1 - n < BNR ? (int)(c1 - n) : BNR;
        __mmask16 mask[4];
        for (int v = 0; v < 4; v++) {
            const int live = nr - 16 * v;
            mask[v] = live >= 16 ? (__mmask16)0xffff : live <= 0 ? 0 : (__mmask16)((1u << live) - 1u);
        }
        for (int64_t k0 = 0; k0 < j->Kp; k0 += j->kc) {
            const int64_t steps = (j->Kp - k0 < j->kc ? j->Kp - k0 : j->kc) / j->kstep;
            pt->pack(pt->B, pt->ldb, n, nr, k0, steps, j->K, bp);
            /* The raw B of the next panel (the next K block, else the next
             * 64 columns' first) is prefetched into L2 while this one's
             * tiles run, spread over them: a weight is read once per GEMM,
             * from memory, and the pack's loads would otherwise wait for it. */
            int64_t nn = n, nk = k0 + j->kc;
            if (nk >= j->Kp)
                nn = n + BNR, nk = 0;
            const int pf_rows = nn < c1 ? (c1 - nn < BNR ? (int)(c1 - nn) : BNR) : 0;
            const int64_t pf_k = j->Kp - nk < j->kc ? j->Kp - nk : j->kc;
            const int pf_lines = (int)((pf_k * es + 63) / 64) + 1, pf_total = pf_rows * pf_lines;
            const int n_tiles = (int)((j->mc + BMR - 1) / BMR);
            const int pf_per = (pf_total + n_tiles - 1) / n_tiles;
            const char *pf_base = (const char *)pt->B + (nn * pt->ldb + nk) * es;
            int pf_next = 0, pf_row = 0, pf_line = 0;
            for (int64_t i = 0, h; i < j->mc; i += h) {
                /* 6-row tiles, and two near-equal ones where 6 would leave
                 * a short last tile (rows left 7..11: 8 -> 4 + 4) */
                const int64_t rem = j->mc - i;
                h = rem > BMR && rem < 2 * BMR ? (rem + 1) / 2 : rem < BMR ? rem : BMR;
                for (int q = 0; q < pf_per && pf_next < pf_total; q++, pf_next++) {
                    _mm_prefetch((const char *)((uintptr_t)pf_base + (uintptr_t)(pf_row * pt->ldb * es) +
                                                (uintptr_t)pf_line * 64),
                                 _MM_HINT_T1); /* (an address, not a pointer into B: may pass its end) */
                    if (++pf_line == pf_lines)
                        pf_line = 0, pf_row++;
                }
                const char *a = (const char *)j->A + (i * j->lda + k0) * j->a_esize;
                j->micro[h](steps, a, j->lda, bp, pt->C + i * pt->ldc + n, pt->ldc, mask, k0 > 0);
            }
        }
    }
}

/* Task t: columns [t * chunk, (t + 1) * chunk) of the joint space. */
static TXC_AVX512 void bd_task(void *ctx, int64_t t)
{
    const bd_job *j = ctx;
    const int64_t c0 = t * j->chunk, c1 = c0 + j->chunk < j->cols ? c0 + j->chunk : j->cols;
    for (int p = 0; p < j->n_parts; p++) {
        const bd_part *pt = &j->parts[p];
        int64_t lo = c0 > pt->col0 ? c0 - pt->col0 : 0, hi = c1 - pt->col0 < pt->N ? c1 - pt->col0 : pt->N;
        if (lo < hi)
            bd_cols(j, pt, lo, hi);
    }
}

static TXC_BF16DOT __attribute__((noinline)) void bd_round_rows(const float *A, int64_t lda, int64_t m, int64_t K,
                                                                 int64_t Kp, uint16_t *Ab)
{
    for (int64_t i = 0; i < m; i++)
        bd_round_row(A + i * lda, K, Kp, Ab + i * Kp);
}

/* Below this many multiply-adds the columns run on the calling thread. */
#define BD_PAR_MIN_MACS (64 * 1024)
/* Column chunks per thread (taken on demand). */
#define BD_CHUNKS 8

/* pairs: the VDPBF16PS GEMM (A rounded to bf16 into scratch), else the
 * float32 FMA one (A read as given). (noinline: entered only after the CPU
 * check; see amx.c's note on target attributes and ASan's prologue) */
static TXC_AVX512 __attribute__((noinline)) bool bd_gemm(bool pairs, int n_parts, const bd_part *parts, int64_t M,
                                                          int64_t K, const float *A, int64_t lda)
{
    const int64_t Kp = pairs ? (K + 1) / 2 * 2 : K, bkc = pairs ? BKC : FKC, kstep = pairs ? 2 : 1;
    const int64_t nmb = (M + BMC - 1) / BMC;
    const int64_t mcb = ((M + nmb - 1) / nmb + BMR - 1) / BMR * BMR;
    const int64_t nkb = (Kp + bkc - 1) / bkc;
    const int64_t kc = ((Kp + nkb - 1) / nkb + kstep - 1) / kstep * kstep; /* K blocks as even as possible */
    uint16_t *Ab = NULL;
    if (pairs) {
        if ((uint64_t)mcb * (uint64_t)Kp > SIZE_MAX / 2 - 64)
            return false;
        Ab = txc_scratch((size_t)mcb * (size_t)Kp * 2 + 64, TXC_SCRATCH_GEMM_PACK);
        if (!Ab)
            return false;
    }
    bd_job j = {.K = K, .Kp = Kp, .kc = kc, .n_parts = n_parts, .kstep = (int)kstep,
                .a_esize = pairs ? 2 : 4, .lda = pairs ? Kp : lda, .micro = pairs ? bd_micros : fm_micros};
    int64_t cols = 0;
    for (int p = 0; p < n_parts; p++) {
        j.parts[p] = parts[p];
        j.parts[p].col0 = cols;
        cols += (parts[p].N + BNR - 1) / BNR * BNR;
    }
    j.cols = cols;
    const int threads = txc_threads_get();
    for (int64_t m0 = 0; m0 < M; m0 += mcb) {
        const int64_t mc = M - m0 < mcb ? M - m0 : mcb;
        j.mc = mc;
        if (pairs)
            bd_round_rows(A + m0 * lda, lda, mc, K, Kp, Ab);
        j.A = pairs ? (const void *)Ab : (const void *)(A + m0 * lda);
        for (int p = 0; p < n_parts; p++)
            j.parts[p].C = parts[p].C + m0 * parts[p].ldc;
        j.chunk = cols;
        if (threads > 1 && (double)mc * (double)cols * (double)K >= BD_PAR_MIN_MACS && cols > BNR) {
            /* whole panels, at least BD_CHUNKS per thread where there are
             * that many (a chunk rounded up to many panels left 4 against 3) */
            int64_t panels = cols / BNR / (threads * BD_CHUNKS);
            j.chunk = (panels > 1 ? panels : 1) * BNR;
            txc_parallel_for_dynamic((cols + j.chunk - 1) / j.chunk, bd_task, &j);
        } else {
            bd_task(&j, 0);
        }
    }
    return true;
}

/* A bound on the weight's row stride (elements) that keeps every offset the
 * packer and the prefetch form far inside int64 and uintptr_t. */
static bool bd_ok(int64_t N, int64_t ldb) { return N > 0 && ldb > 0 && ldb <= INT32_MAX / 16; }

/* The packer of the FMA GEMM for weights of dtype dt, NULL for none. */
static pk_pack_fn fm_packer(txc_dtype dt)
{
    return dt == TXC_F32 ? pk_pack_f32 : dt == TXC_F16 ? pk_pack_f16 : dt == TXC_BF16 ? pk_pack_bf16 : NULL;
}

bool txc_kern_gemm_nt_bf16dot_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K, const float *A,
                                    int64_t lda)
{
    if (n_parts < 1 || n_parts > TXC_PACKED_GROUP_MAX || M <= 0 || K <= 0 || !txc_kern_avx512bf16())
        return false;
    bd_part pp[TXC_PACKED_GROUP_MAX];
    for (int p = 0; p < n_parts; p++) {
        if (parts[p].bdt != TXC_BF16 || !bd_ok(parts[p].N, parts[p].ldb))
            return false;
        pp[p] = (bd_part){parts[p].B, parts[p].N, parts[p].ldb, parts[p].N, 0, parts[p].C, pk_pack_pairs, 2};
    }
    return bd_gemm(true, n_parts, pp, M, K, A, lda);
}

bool txc_kern_gemm_nt_bf16dot(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *B,
                              int64_t ldb, float *C, int64_t ldc)
{
    if (M <= 0 || K <= 0 || !bd_ok(N, ldb) || !txc_kern_avx512bf16())
        return false;
    const bd_part p = {B, N, ldb, ldc, 0, C, pk_pack_pairs, 2};
    return bd_gemm(true, 1, &p, M, K, A, lda);
}

bool txc_kern_gemm_nt_fma512_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K, const float *A,
                                   int64_t lda)
{
    if (n_parts < 1 || n_parts > TXC_PACKED_GROUP_MAX || M <= 0 || K <= 0 || txc_kern_simd_level() < 2)
        return false;
    bd_part pp[TXC_PACKED_GROUP_MAX];
    for (int p = 0; p < n_parts; p++) {
        const pk_pack_fn pack = fm_packer(parts[p].bdt);
        if (!pack || !bd_ok(parts[p].N, parts[p].ldb))
            return false;
        pp[p] = (bd_part){parts[p].B, parts[p].N, parts[p].ldb, parts[p].N, 0, parts[p].C, pack,
                          (int)txc_dtype_size(parts[p].bdt)};
    }
    return bd_gemm(false, n_parts, pp, M, K, A, lda);
}

bool txc_kern_gemm_nt_fma512(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                             txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    const pk_pack_fn pack = fm_packer(bdt);
    if (M <= 0 || K <= 0 || !pack || !bd_ok(N, ldb) || txc_kern_simd_level() < 2)
        return false;
    const bd_part p = {B, N, ldb, ldc, 0, C, pack, (int)txc_dtype_size(bdt)};
    return bd_gemm(false, 1, &p, M, K, A, lda);
}

/* The VDPBF16PS peak probe: `iters` rounds of 16 independent accumulator
 * chains (no memory traffic); 16 lanes x 2 products x 2 flops each. */
static TXC_BF16DOT __attribute__((noinline)) double bd_peak_run(int64_t iters, float *sink)
{
    const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x33803380);
    /* (distinct starting values: equal ones let the compiler merge the
     * chains into one, which measured one instruction's latency) */
    const float s0 = *sink;
#define BD_ACC(i) _mm512_set1_ps(s0 + (float)(i))
    __m512 a0 = BD_ACC(0), a1 = BD_ACC(1), a2 = BD_ACC(2), a3 = BD_ACC(3), a4 = BD_ACC(4), a5 = BD_ACC(5),
           a6 = BD_ACC(6), a7 = BD_ACC(7), a8 = BD_ACC(8), a9 = BD_ACC(9), a10 = BD_ACC(10), a11 = BD_ACC(11),
           a12 = BD_ACC(12), a13 = BD_ACC(13), a14 = BD_ACC(14), a15 = BD_ACC(15);
#undef BD_ACC
    for (int64_t k = 0; k < iters; k++) {
        a0 = _mm512_dpbf16_ps(a0, x, y), a1 = _mm512_dpbf16_ps(a1, x, y), a2 = _mm512_dpbf16_ps(a2, x, y);
        a3 = _mm512_dpbf16_ps(a3, x, y), a4 = _mm512_dpbf16_ps(a4, x, y), a5 = _mm512_dpbf16_ps(a5, x, y);
        a6 = _mm512_dpbf16_ps(a6, x, y), a7 = _mm512_dpbf16_ps(a7, x, y), a8 = _mm512_dpbf16_ps(a8, x, y);
        a9 = _mm512_dpbf16_ps(a9, x, y), a10 = _mm512_dpbf16_ps(a10, x, y), a11 = _mm512_dpbf16_ps(a11, x, y);
        a12 = _mm512_dpbf16_ps(a12, x, y), a13 = _mm512_dpbf16_ps(a13, x, y), a14 = _mm512_dpbf16_ps(a14, x, y);
        a15 = _mm512_dpbf16_ps(a15, x, y);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                                       _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 16 * 16 * 2 * 2; /* 16 instructions x 16 lanes x 2 products x (mul + add) */
}

double txc_kern_bf16dot_peak_run(int64_t iters, float *sink)
{
    return txc_kern_avx512bf16() ? bd_peak_run(iters, sink) : 0;
}

#else

bool txc_kern_gemm_nt_bf16dot_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K, const float *A,
                                    int64_t lda)
{
    (void)n_parts, (void)parts, (void)M, (void)K, (void)A, (void)lda;
    return false;
}

bool txc_kern_gemm_nt_bf16dot(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *B,
                              int64_t ldb, float *C, int64_t ldc)
{
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)C, (void)ldc;
    return false;
}

bool txc_kern_gemm_nt_fma512_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K, const float *A,
                                   int64_t lda)
{
    (void)n_parts, (void)parts, (void)M, (void)K, (void)A, (void)lda;
    return false;
}

bool txc_kern_gemm_nt_fma512(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                             txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)bdt, (void)ldb, (void)C, (void)ldc;
    return false;
}

double txc_kern_bf16dot_peak_run(int64_t iters, float *sink)
{
    (void)iters, (void)sink;
    return 0;
}

#endif
