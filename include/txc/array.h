/*
 * txc/array.h — storages and arrays (the core layer's backend buffers).
 *
 * A txc_storage is a refcounted block of bytes of one of four kinds:
 *   - OWNED:    allocated by the backend (txc_backend_alloc), freed with it;
 *   - MMAP:     a read-only mmap of a whole file (safetensors weights);
 *   - EXTERNAL: a caller's buffer, released through the caller's deleter;
 *   - ANON:     anonymous memory of its own mapping (weights copied out of
 *               their file, `--no-mmap`), optionally on transparent huge
 *               pages, writable until sealed read-only.
 * A txc_array is a dense, C-contiguous n-d array inside a storage: device,
 * dtype, shape, and a data pointer (storage base + byte offset). Arrays are
 * what the backend computes on; they have no strides (like jax.Array).
 * txc_tensor (tensor.h) adds torch's view semantics on top.
 *
 * Ownership: *_new / *_from_* return one reference owned by the caller;
 * txc_*_retain adds one; txc_*_release drops one (NULL is ignored).
 * Not thread-safe refcounts: an array is used by one thread at a time.
 */
#ifndef TXC_ARRAY_H
#define TXC_ARRAY_H

#include <stdint.h>
#include <stddef.h>
#include "txc/backend.h"
#include "txc/dtype.h"
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_MAX_DIMS 8

typedef enum txc_storage_kind {
    TXC_STORAGE_OWNED = 0,
    TXC_STORAGE_MMAP = 1,
    TXC_STORAGE_EXTERNAL = 2,
    TXC_STORAGE_ANON = 3,
} txc_storage_kind;

typedef struct txc_storage txc_storage;
typedef struct txc_array txc_array;

/* ---- storages ---------------------------------------------------------- */

/* `nbytes` zero-filled bytes on `dev`. NULL + TXC_ERR_NOMEM/UNSUPPORTED. */
txc_storage *txc_storage_new(txc_device dev, size_t nbytes);
/* Map the whole file at `path` read-only (PROT_READ, MAP_PRIVATE).
 * Errors: TXC_ERR_IO (missing, unreadable, a directory, mmap failure).
 * An empty file gives a storage of size 0 with a NULL base. */
txc_storage *txc_storage_mmap_file(const char *path);
/* Wrap a caller's CPU buffer; `deleter(ctx, data)` runs when the last
 * reference goes (deleter may be NULL: the buffer outlives the storage). */
txc_storage *txc_storage_from_external(void *data, size_t nbytes,
                                       void (*deleter)(void *ctx, void *data), void *ctx);
/* `nbytes` of anonymous memory (mmap MAP_PRIVATE | MAP_ANONYMOUS, not
 * zero-filled by a pass: the kernel's zero pages, faulted in on first
 * write), its base aligned to 2 MiB. With `hugepages`, madvise(MADV_HUGEPAGE)
 * is asked before any page is touched, so that a kernel with transparent huge
 * pages in "madvise" mode backs it with 2 MiB pages (fewer TLB misses when
 * streaming weights, as llama.cpp's --no-mmap buffers); a kernel that refuses
 * (no THP: EINVAL) is no error, txc_storage_hugepages() then says false.
 * Writable until txc_storage_seal. Errors: TXC_ERR_NOMEM (mmap failed),
 * TXC_ERR_INVALID (nbytes 0). */
txc_storage *txc_storage_new_anon(size_t nbytes, bool hugepages);
/* Whether MADV_HUGEPAGE was accepted for an ANON storage (false otherwise). */
bool txc_storage_hugepages(const txc_storage *s);
/* Make an ANON storage read-only (mprotect PROT_READ; where the kernel
 * refuses, it is still reported read-only, so in-place ops refuse it as
 * they refuse an mmap). TXC_ERR_INVALID for another kind. */
txc_status txc_storage_seal(txc_storage *s);
txc_storage *txc_storage_retain(txc_storage *s);
void txc_storage_release(txc_storage *s);
void *txc_storage_data(const txc_storage *s);
size_t txc_storage_size(const txc_storage *s);
txc_storage_kind txc_storage_get_kind(const txc_storage *s);
bool txc_storage_is_readonly(const txc_storage *s); /* true for MMAP and a sealed ANON */
txc_device txc_storage_device(const txc_storage *s);

/* ---- arrays ------------------------------------------------------------ */

/* Number of elements of a shape (1 for ndim 0). Returns -1 when a dim is
 * negative or the product overflows int64. */
int64_t txc_shape_numel(int ndim, const int64_t *shape);

/* A new zero-filled array (OWNED storage). Errors: TXC_ERR_INVALID (ndim >
 * TXC_MAX_DIMS, negative dim, overflow), TXC_ERR_NOMEM. */
txc_array *txc_array_new(txc_device dev, txc_dtype dtype, int ndim, const int64_t *shape);
/* An array over `storage` starting at `byte_offset` (zero copy; takes a new
 * reference to the storage). Errors: TXC_ERR_INVALID when the array does
 * not fit inside the storage or the offset is misaligned for the dtype. */
txc_array *txc_array_from_storage(txc_storage *storage, size_t byte_offset, txc_dtype dtype,
                                  int ndim, const int64_t *shape);
txc_array *txc_array_retain(txc_array *a);
void txc_array_release(txc_array *a);

txc_dtype txc_array_dtype(const txc_array *a);
int txc_array_ndim(const txc_array *a);
const int64_t *txc_array_shape(const txc_array *a);
int64_t txc_array_numel(const txc_array *a);
size_t txc_array_nbytes(const txc_array *a);
void *txc_array_data(const txc_array *a);
txc_device txc_array_device(const txc_array *a);
txc_storage *txc_array_storage(const txc_array *a); /* borrowed */
/* Copy to another device (a new array; a copy even on the same device). */
txc_array *txc_array_copy_to(const txc_array *a, txc_device dev);

#ifdef __cplusplus
}
#endif
#endif
