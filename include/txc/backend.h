/*
 * txc/backend.h — devices and raw buffers (the layer below everything).
 *
 * A device is (type, index). Only the CPU backend exists in this build;
 * TXC_DEVICE_CUDA is reserved and reported unavailable. Buffers are
 * 64-byte aligned (one cache line, one AVX-512 register) and zero-filled.
 * The backend knows no torch semantics: it allocates, frees and copies.
 * Analogue: the PJRT client / XLA runtime under JAX.
 */
#ifndef TXC_BACKEND_H
#define TXC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum txc_device_type { TXC_DEVICE_CPU = 0, TXC_DEVICE_CUDA = 1 } txc_device_type;

typedef struct txc_device {
    txc_device_type type;
    int index;
} txc_device;

#define TXC_CPU ((txc_device){TXC_DEVICE_CPU, 0})

/* True when this build and machine can run on `dev`. */
bool txc_device_available(txc_device dev);
bool txc_device_equal(txc_device a, txc_device b);
/* "cpu", "cuda:0". Parses the same forms ("cuda" = "cuda:0"). */
const char *txc_device_name(txc_device dev);
txc_status txc_device_parse(const char *s, txc_device *out);

/* Allocate `nbytes` zero-filled, 64-byte-aligned bytes on `dev` (nbytes may
 * be 0: returns a valid unique pointer); on the CPU, buffers of 2 MiB or
 * more are 2 MiB-aligned and advised as transparent huge pages
 * (madvise(MADV_HUGEPAGE)). NULL + TXC_ERR_NOMEM on failure,
 * TXC_ERR_UNSUPPORTED for an unavailable device. */
void *txc_backend_alloc(txc_device dev, size_t nbytes);
void txc_backend_free(txc_device dev, void *ptr);
/* Copy between devices (only cpu->cpu in this build). */
txc_status txc_backend_copy(txc_device dst_dev, void *dst, txc_device src_dev,
                            const void *src, size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif
