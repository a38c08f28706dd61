/* The bfloat16 GEMM on Intel AMX (Advanced Matrix Extensions: AMX-TILE +
 * AMX-BF16, Sapphire Rapids and later): C = A·Bᵀ with A float32 rounded to
 * bfloat16 (round to nearest even, as torch's .to(torch.bfloat16)), B
 * bfloat16 weights read in place, products and sums in float32 — the
 * arithmetic of torch.nn.functional.linear on bfloat16 inputs (oneDNN's
 * AMX path), except that C stays float32.
 *
 * Accuracy (documented in kernels.h): |C - C_exact| <= 2^-8 * sum_k |A_ik B_jk|
 * (A's rounding; a bfloat16 product is exact in float32) plus float32
 * summation error.
 *
 * TDPBF16PS tmm_c, tmm_a, tmm_b computes c[i][j] += sum_p a[i][2p..2p+1] ·
 * b[p][j][0..1] for a 16x32 bf16 tile a and a 16x(16x2) bf16 tile b in
 * "VNNI" layout. We use the weights as `a` (16 rows of B, 32 consecutive k,
 * loaded straight from the matrix with its row stride) and A as `b`, packed
 * once per call into VNNI tiles, so the result tile is Cᵀ (16 weight rows x
 * 16 rows of A), transposed on the way out. A rows are padded to a multiple
 * of 16 with zeros; a last block of fewer than 16 weight rows is copied into
 * a zero-padded 16-row block, so every column of C is computed by the same
 * instructions in the same order whatever slice of the columns a thread is
 * given (results are identical for any thread count).
 *
 * The kernel needs the OS's permission for the tile state
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux >= 5.16),
 * asked once per process by txc_amx_available().
 */
#include "ops/kernels.h"

#include <string.h>

#if TXC_HAVE_X86 && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

bool txc_amx_available(void)
{
    static int state; /* 0: unknown, 1: yes, -1: no (benign race: same answer) */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        __builtin_cpu_init();
        unsigned eax, ebx, ecx, edx;
        bool cpu = __builtin_cpu_supports("avx512bf16") && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
                   (edx & (1u << 22)) /* AMX-BF16 */ && (edx & (1u << 24)) /* AMX-TILE */;
        s = cpu && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 1;
}

#define TXC_AMX_TARGET TXC_AVX512_TARGET ",avx512bf16,amx-tile,amx-bf16"
#define TXC_AMX __attribute__((target(TXC_AMX_TARGET)))
#define TXC_INLINE_AMX static inline __attribute__((always_inline, target(TXC_AMX_TARGET)))

typedef struct amx_tilecfg {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

/* Tiles 0-3: C accumulators (2 weight blocks x 2 A blocks); 4-5: weights;
 * 6-7: A. Every tile is 16 rows x 64 bytes. */
TXC_INLINE_AMX void amx_configure(void)
{
    amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette_id = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    /* (asm with the whole struct as an input: GCC 12 drops the stores to
     * colsb/rows before _tile_loadconfig as dead, and ldtilecfg then faults) */
    __asm__ volatile("ldtilecfg %0" : : "m"(c) : "memory");
}

/* Pack rows [0, mp) of A (rows >= m are zeros; mp a multiple of 16), k in
 * [0, K) (K a multiple of 32), into VNNI tiles: tile (mb, ks) — A rows
 * 16mb..16mb+15, k 32ks..32ks+31 — is 1 KiB at pack + (mb * K/32 + ks) * 512
 * bf16, its row p holding (A[r][32ks+2p], A[r][32ks+2p+1]) for r = 0..15. */
TXC_INLINE_AMX void amx_pack_a(int64_t m, int64_t mp, int64_t K, const float *A, int64_t lda, uint16_t *pack)
{
    const int64_t ks_n = K / 32;
    const __m512i idx = _mm512_set_epi32(240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64, 48, 32, 16, 0);
    for (int64_t r = 0; r < mp; r++) {
        uint16_t *tile = pack + (r / 16) * ks_n * 512 + (r % 16) * 2;
        for (int64_t ks = 0; ks < ks_n; ks++, tile += 512) {
            __m512i v = _mm512_setzero_si512();
            if (r < m) {
                const float *a = A + r * lda + ks * 32;
                v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + 16), _mm512_loadu_ps(a));
            }
            _mm512_i32scatter_epi32(tile, idx, v, 4);
        }
    }
}

/* C[r][n] = ct[n][r] for r < mv rows of A and n < nv weight rows. */
TXC_INLINE_AMX void amx_store_t(const float *ct, int64_t mv, int64_t nv, float *C, int64_t ldc)
{
    const __m512i col = _mm512_set_epi32(240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64, 48, 32, 16, 0);
    const __mmask16 mask = nv >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nv) - 1u);
    for (int64_t r = 0; r < mv; r++)
        _mm512_mask_storeu_ps(C + r * ldc, mask, _mm512_i32gather_ps(_mm512_add_epi32(col, _mm512_set1_epi32((int)r)), ct, 4));
}

/* One step of 2 (NW) weight blocks x 2 (NA) A blocks: the tile numbers must
 * be constants, hence a macro per shape. */
#define AMX_BLOCK(NW, NA)                                                                                     \
    TXC_INLINE_AMX void amx_block_##NW##NA(int64_t ks_n, const uint16_t *w0, const uint16_t *w1, int64_t wstride, \
                                           const uint16_t *a0, const uint16_t *a1, float *ct,                  \
                                           const char *pf, int64_t pf_stride)                                  \
    {                                                                                                         \
        _tile_zero(0);                                                                                        \
        if (NA == 2)                                                                                          \
            _tile_zero(1);                                                                                    \
        if (NW == 2)                                                                                          \
            _tile_zero(2);                                                                                    \
        if (NW == 2 && NA == 2)                                                                               \
            _tile_zero(3);                                                                                    \
        for (int64_t ks = 0; ks < ks_n; ks++) {                                                               \
            if (pf)                                                                                           \
                for (int r = 0; r < 32; r++)                                                                  \
                    _mm_prefetch(pf + r * pf_stride + ks * 64, _MM_HINT_T1);                                  \
            _tile_loadd(4, w0 + ks * 32, wstride);                                                            \
            _tile_loadd(6, a0 + ks * 512, 64);                                                                \
            _tile_dpbf16ps(0, 4, 6);                                                                          \
            if (NA == 2) {                                                                                    \
                _tile_loadd(7, a1 + ks * 512, 64);                                                            \
                _tile_dpbf16ps(1, 4, 7);                                                                      \
            }                                                                                                 \
            if (NW == 2) {                                                                                    \
                _tile_loadd(5, w1 + ks * 32, wstride);                                                        \
                _tile_dpbf16ps(2, 5, 6);                                                                      \
                if (NA == 2)                                                                                  \
                    _tile_dpbf16ps(3, 5, 7);                                                                  \
            }                                                                                                 \
        }                                                                                                     \
        _tile_stored(0, ct, 64);                                                                              \
        if (NA == 2)                                                                                          \
            _tile_stored(1, ct + 256, 64);                                                                    \
        if (NW == 2)                                                                                          \
            _tile_stored(2, ct + 512, 64);                                                                    \
        if (NW == 2 && NA == 2)                                                                               \
            _tile_stored(3, ct + 768, 64);                                                                    \
    }
AMX_BLOCK(2, 2)
AMX_BLOCK(2, 1)
AMX_BLOCK(1, 2)
AMX_BLOCK(1, 1)

/* Rows of A packed per pass: the pack stays within 8 MiB. */
#define AMX_PACK_BYTES ((size_t)8 << 20)

/* The AMX body; entered only after txc_kern_gemm_nt_amx has checked the CPU
 * (a target("amx-...") function may use AVX-512 anywhere in its body, the
 * prologue included: under ASan, zeroing locals raised SIGILL on AVX2-only
 * CPUs before the check ran). */
static TXC_AMX __attribute__((noinline)) bool gemm_nt_amx_run(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                                    const uint16_t *B, int64_t ldb, float *C, int64_t ldc)
{
    int64_t mc = (int64_t)(AMX_PACK_BYTES / ((size_t)K * 2)) / 16 * 16;
    if (mc < 32)
        mc = 32;
    const int64_t mp_all = (M + 15) / 16 * 16;
    if (mc > mp_all)
        mc = mp_all;
    uint16_t *pack = txc_scratch((size_t)mc * (size_t)K * 2, TXC_SCRATCH_GEMM_PACK);
    const int64_t n_full = N / 16 * 16, n_tail = N - n_full;
    uint16_t *wtail = NULL;
    if (n_tail) {
        wtail = txc_scratch((size_t)16 * (size_t)K * 2, TXC_SCRATCH_ROW);
        if (wtail) {
            memset(wtail, 0, (size_t)16 * (size_t)K * 2);
            for (int64_t j = 0; j < n_tail; j++)
                memcpy(wtail + j * K, B + (n_full + j) * ldb, (size_t)K * 2);
        }
    }
    if (!pack || (n_tail && !wtail))
        return false;
    const int64_t ks_n = K / 32, nblocks = (N + 15) / 16;
    float ct[4 * 256] __attribute__((aligned(64)));
    amx_configure();
    for (int64_t m0 = 0; m0 < M; m0 += mc) {
        const int64_t m = M - m0 < mc ? M - m0 : mc, mp = (m + 15) / 16 * 16, ablocks = mp / 16;
        amx_pack_a(m, mp, K, A + m0 * lda, lda, pack);
        int nw = 1;
        for (int64_t nb = 0; nb < nblocks; nb += nw) {
            /* Weight blocks nb and nb + 1 when both are whole; a partial
             * block (the last) goes alone from its zero-padded copy. */
            const bool tail0 = nb * 16 == n_full;
            nw = !tail0 && (nb + 2) * 16 <= n_full ? 2 : 1;
            const uint16_t *w0 = tail0 ? wtail : B + nb * 16 * ldb;
            const int64_t ws = (tail0 ? K : ldb) * 2;
            const uint16_t *w1 = nw == 2 ? B + (nb + 1) * 16 * ldb : NULL;
            const int64_t nv0 = tail0 ? n_tail : 16;
            /* The next pair of weight blocks (32 rows, whole ones only) is
             * prefetched into L2 during the last pass over this pair, so
             * that the weights stream from memory while the tiles compute. */
            const int64_t next = (nb + nw) * 16;
            const char *pf_next = next + 32 <= n_full ? (const char *)(B + next * ldb) : NULL;
            for (int64_t ab = 0; ab < ablocks; ab += 2) {
                const int na = ab + 1 < ablocks ? 2 : 1;
                const uint16_t *a0 = pack + ab * ks_n * 512, *a1 = a0 + ks_n * 512;
                const char *pf = ab + 2 >= ablocks ? pf_next : NULL;
                if (nw == 2 && na == 2)
                    amx_block_22(ks_n, w0, w1, ws, a0, a1, ct, pf, ldb * 2);
                else if (nw == 2)
                    amx_block_21(ks_n, w0, w1, ws, a0, a1, ct, pf, ldb * 2);
                else if (na == 2)
                    amx_block_12(ks_n, w0, w1, ws, a0, a1, ct, pf, ldb * 2);
                else
                    amx_block_11(ks_n, w0, w1, ws, a0, a1, ct, pf, ldb * 2);
                for (int a = 0; a < na; a++) {
                    const int64_t r0 = (ab + a) * 16, mv = m - r0 < 16 ? m - r0 : 16;
                    if (mv <= 0)
                        continue;
                    float *c = C + (m0 + r0) * ldc + nb * 16;
                    amx_store_t(ct + a * 256, mv, nv0, c, ldc);
                    if (nw == 2)
                        amx_store_t(ct + 512 + a * 256, mv, 16, c + 16, ldc);
                }
            }
        }
    }
    _tile_release();
    return true;
}

bool txc_kern_gemm_nt_amx(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *B,
                          int64_t ldb, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0 || K <= 0 || K % 32 || !txc_amx_available())
        return false;
    return gemm_nt_amx_run(M, N, K, A, lda, B, ldb, C, ldc);
}

static TXC_AMX __attribute__((noinline)) double amx_peak_run(int64_t iters)
{
    static const uint16_t zeros[512] __attribute__((aligned(64)));
    amx_configure();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_release();
    return (double)iters * 4.0 * 16 * 16 * 32 * 2;
}

/* The AMX bf16 peak probe: `iters` rounds of 4 independent TDPBF16PS on
 * tiles already loaded (no memory traffic in the loop); returns the flops
 * done (16 x 16 x 32 x 2 per instruction), 0 without AMX. */
double txc_kern_amx_peak_run(int64_t iters)
{
    return txc_amx_available() ? amx_peak_run(iters) : 0;
}

#else

bool txc_amx_available(void) { return false; }

double txc_kern_amx_peak_run(int64_t iters)
{
    (void)iters;
    return 0;
}

bool txc_kern_gemm_nt_amx(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *B,
                          int64_t ldb, float *C, int64_t ldc)
{
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)C, (void)ldc;
    return false;
}

#endif
