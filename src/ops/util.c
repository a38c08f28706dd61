/* Inference helpers shared by the kernels; see ops/registry.h. */
#include "ops/registry.h"
#include "txc/ops.h"

#include "txc/threads.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

static int rank(txc_dtype d)
{
    switch (d) {
    case TXC_BOOL: return 0;
    case TXC_I32: return 1;
    case TXC_I64: return 2;
    case TXC_BF16:
    case TXC_F16: return 3;
    case TXC_F32: return 4;
    default: return 4;
    }
}

txc_dtype txc_promote(txc_dtype a, txc_dtype b)
{
    if (a == b)
        return a;
    if ((a == TXC_BF16 && b == TXC_F16) || (a == TXC_F16 && b == TXC_BF16))
        return TXC_F32;
    return rank(a) >= rank(b) ? a : b;
}

txc_dtype txc_promote_scalar(txc_dtype t, double s)
{
    if (txc_dtype_is_float(t))
        return t;
    if (s != floor(s) || isinf(s) || isnan(s))
        return TXC_F32; /* float scalar with an integer/bool tensor: default dtype */
    if (t == TXC_BOOL)
        return TXC_I64; /* bool tensor + int scalar: int64 */
    return t;
}

txc_status txc_broadcast_shapes(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb,
                                int *nout, int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return txc_error(TXC_ERR_INVALID,
                             "%s: shapes cannot be broadcast: size %lld vs %lld at dim %d",
                             op, (long long)da, (long long)db, i - n);
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return TXC_OK;
}

txc_status txc_norm_dim(const char *op, int64_t dim, int ndim, int *out)
{
    int n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n)
        return txc_error(TXC_ERR_INVALID, "%s: dim %lld out of range for a %d-d tensor (expected [%d, %d])",
                         op, (long long)dim, ndim, -n, n - 1);
    *out = (int)(dim < 0 ? dim + n : dim);
    return TXC_OK;
}

void txc_broadcast_strides(const txc_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    for (int i = 0; i < ndim; i++) {
        int it = t->ndim - ndim + i;
        strides[i] = (it >= 0 && t->shape[it] == shape[i] && shape[i] != 1) ? t->strides[it] : 0;
    }
}

static _Thread_local struct {
    void *ptr;
    size_t size;
} scratch[TXC_SCRATCH_SLOTS];

/* Scratch made on a pool worker is freed when the worker exits: the hook is
 * installed by the first allocation (txc_threads_set_worker_exit). */
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;
static void set_exit_hook(void) { txc_threads_set_worker_exit(txc_scratch_free_all); }

void *txc_scratch(size_t bytes, int slot)
{
    if (slot < 0 || slot >= TXC_SCRATCH_SLOTS)
        return NULL;
    if (bytes <= scratch[slot].size && scratch[slot].ptr)
        return scratch[slot].ptr;
    size_t size = (bytes + 63) & ~(size_t)63;
    if (size < bytes)
        return NULL;
    pthread_once(&exit_hook_once, set_exit_hook);
    void *p = aligned_alloc(64, size ? size : 64);
    if (!p)
        return NULL;
    free(scratch[slot].ptr);
    scratch[slot].ptr = p;
    scratch[slot].size = size;
    return p;
}

void txc_ops_thread_release(void)
{
    txc_scratch_free_all();
}

void txc_scratch_free_all(void)
{
    for (int i = 0; i < TXC_SCRATCH_SLOTS; i++) {
        free(scratch[i].ptr);
        scratch[i].ptr = NULL;
        scratch[i].size = 0;
    }
}
