/* The CPU backend: aligned, zero-filled buffers. See include/txc/backend.h. */
#include "txc/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Buffers of at least this many bytes are aligned to 2 MiB and advised as
 * transparent huge pages (madvise(MADV_HUGEPAGE), honoured when the system
 * sets transparent_hugepage to "madvise" or "always"): a weight matrix
 * streamed by the decode GEMV then costs one TLB entry per 2 MiB instead of
 * per 4 KiB. The advice is a hint: its failure is ignored. */
#define HUGE_MIN ((size_t)2 << 20)

bool txc_device_available(txc_device dev) { return dev.type == TXC_DEVICE_CPU && dev.index == 0; }

bool txc_device_equal(txc_device a, txc_device b) { return a.type == b.type && a.index == b.index; }

const char *txc_device_name(txc_device dev)
{
    static _Thread_local char buf[32];
    if (dev.type == TXC_DEVICE_CPU)
        return "cpu";
    snprintf(buf, sizeof buf, "cuda:%d", dev.index);
    return buf;
}

txc_status txc_device_parse(const char *s, txc_device *out)
{
    if (strcmp(s, "cpu") == 0) {
        *out = TXC_CPU;
        return TXC_OK;
    }
    if (strncmp(s, "cuda", 4) == 0) {
        int idx = 0;
        if (s[4] == ':') {
            char *end;
            long v = strtol(s + 5, &end, 10);
            if (*end || end == s + 5 || v < 0 || v > 1024)
                return txc_error(TXC_ERR_INVALID, "bad device '%s' (expected cpu or cuda:N)", s);
            idx = (int)v;
        } else if (s[4]) {
            return txc_error(TXC_ERR_INVALID, "bad device '%s' (expected cpu or cuda:N)", s);
        }
        *out = (txc_device){TXC_DEVICE_CUDA, idx};
        return TXC_OK;
    }
    return txc_error(TXC_ERR_INVALID, "bad device '%s' (expected cpu or cuda:N)", s);
}

void *txc_backend_alloc(txc_device dev, size_t nbytes)
{
    if (!txc_device_available(dev)) {
        txc_error(TXC_ERR_UNSUPPORTED, "device %s is not available in this build", txc_device_name(dev));
        return NULL;
    }
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) {
        txc_error(TXC_ERR_NOMEM, "allocation of %zu bytes overflows", nbytes);
        return NULL;
    }
    size_t align = 64;
    if (rounded >= HUGE_MIN) {
        align = HUGE_MIN;
        rounded = (rounded + HUGE_MIN - 1) & ~(HUGE_MIN - 1);
        if (rounded < nbytes) {
            txc_error(TXC_ERR_NOMEM, "allocation of %zu bytes overflows", nbytes);
            return NULL;
        }
    }
    void *p = aligned_alloc(align, rounded ? rounded : 64);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (align == HUGE_MIN)
        (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded ? rounded : 64);
    return p;
}

void txc_backend_free(txc_device dev, void *ptr)
{
    (void)dev;
    free(ptr);
}

txc_status txc_backend_copy(txc_device dst_dev, void *dst, txc_device src_dev, const void *src, size_t nbytes)
{
    if (!txc_device_available(dst_dev) || !txc_device_available(src_dev))
        return txc_error(TXC_ERR_UNSUPPORTED, "copy %s -> %s is not available in this build",
                         txc_device_name(src_dev), txc_device_name(dst_dev));
    if (nbytes)
        memmove(dst, src, nbytes);
    return TXC_OK;
}
