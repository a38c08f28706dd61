/* Storages and arrays; see include/txc/array.h. */
#include "core/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct txc_storage {
    int refcount;
    txc_storage_kind kind;
    txc_device device;
    void *data;
    size_t nbytes;
    void (*deleter)(void *ctx, void *data);
    void *ctx;
    void *map;       /* ANON: the whole mapping (data is inside it, 2 MiB aligned) */
    size_t map_size;
    bool huge;       /* ANON: MADV_HUGEPAGE accepted */
    bool sealed;     /* ANON: read-only */
};

static bool fail_madvise; /* tests */

void txc_impl_test_fail_madvise(bool fail) { fail_madvise = fail; }

static txc_storage *storage_alloc(void)
{
    txc_storage *s = calloc(1, sizeof *s);
    if (!s)
        txc_error(TXC_ERR_NOMEM, "out of memory (storage)");
    else
        s->refcount = 1;
    return s;
}

txc_storage *txc_storage_new(txc_device dev, size_t nbytes)
{
    void *p = txc_backend_alloc(dev, nbytes);
    if (!p)
        return NULL;
    txc_storage *s = storage_alloc();
    if (!s) {
        txc_backend_free(dev, p);
        return NULL;
    }
    s->kind = TXC_STORAGE_OWNED;
    s->device = dev;
    s->data = p;
    s->nbytes = nbytes;
    return s;
}

txc_storage *txc_storage_mmap_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        txc_error(TXC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        txc_error(TXC_ERR_IO, "%s is not a regular file", path);
        close(fd);
        return NULL;
    }
    void *p = NULL;
    size_t size = (size_t)st.st_size;
    if (size > 0) {
        p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            txc_error(TXC_ERR_IO, "cannot mmap %s: %s", path, strerror(errno));
            close(fd);
            return NULL;
        }
    }
    close(fd);
    txc_storage *s = storage_alloc();
    if (!s) {
        if (p)
            munmap(p, size);
        return NULL;
    }
    s->kind = TXC_STORAGE_MMAP;
    s->device = TXC_CPU;
    s->data = p;
    s->nbytes = size;
    return s;
}

txc_storage *txc_storage_from_external(void *data, size_t nbytes, void (*deleter)(void *, void *), void *ctx)
{
    txc_storage *s = storage_alloc();
    if (!s)
        return NULL;
    s->kind = TXC_STORAGE_EXTERNAL;
    s->device = TXC_CPU;
    s->data = data;
    s->nbytes = nbytes;
    s->deleter = deleter;
    s->ctx = ctx;
    return s;
}

#define ANON_ALIGN ((size_t)2 << 20) /* one x86-64 huge page */

txc_storage *txc_storage_new_anon(size_t nbytes, bool hugepages)
{
    if (nbytes == 0) {
        txc_error(TXC_ERR_INVALID, "txc_storage_new_anon: 0 bytes");
        return NULL;
    }
    if (nbytes > SIZE_MAX - 2 * ANON_ALIGN) {
        txc_error(TXC_ERR_NOMEM, "out of memory (%zu bytes of anonymous memory)", nbytes);
        return NULL;
    }
    /* Map an extra 2 MiB and trim both ends so that the base is aligned
     * (huge pages need 2 MiB-aligned virtual ranges). */
    size_t len = (nbytes + ANON_ALIGN - 1) / ANON_ALIGN * ANON_ALIGN;
    size_t map_size = len + ANON_ALIGN;
    char *p = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        txc_error(TXC_ERR_NOMEM, "out of memory (%zu bytes of anonymous memory: %s)", nbytes, strerror(errno));
        return NULL;
    }
    char *base = (char *)(((uintptr_t)p + ANON_ALIGN - 1) & ~(uintptr_t)(ANON_ALIGN - 1));
    size_t head = (size_t)(base - p), tail = map_size - head - len;
    if (head)
        munmap(p, head);
    if (tail)
        munmap(base + len, tail);
    bool huge = false;
#ifdef MADV_HUGEPAGE
    if (hugepages)
        huge = !fail_madvise && madvise(base, len, MADV_HUGEPAGE) == 0; /* refused: small pages, still correct */
#endif
    txc_storage *s = storage_alloc();
    if (!s) {
        munmap(base, len);
        return NULL;
    }
    s->kind = TXC_STORAGE_ANON;
    s->device = TXC_CPU;
    s->data = base;
    s->nbytes = nbytes;
    s->map = base;
    s->map_size = len;
    s->huge = huge;
    return s;
}

bool txc_storage_hugepages(const txc_storage *s) { return s && s->kind == TXC_STORAGE_ANON && s->huge; }

txc_status txc_storage_seal(txc_storage *s)
{
    if (!s || s->kind != TXC_STORAGE_ANON)
        return txc_error(TXC_ERR_INVALID, "txc_storage_seal: not an anonymous storage");
    (void)mprotect(s->map, s->map_size, PROT_READ); /* refused: still reported read-only */
    s->sealed = true;
    return TXC_OK;
}

txc_storage *txc_storage_retain(txc_storage *s)
{
    if (s)
        s->refcount++;
    return s;
}

void txc_storage_release(txc_storage *s)
{
    if (!s || --s->refcount > 0)
        return;
    switch (s->kind) {
    case TXC_STORAGE_OWNED: txc_backend_free(s->device, s->data); break;
    case TXC_STORAGE_MMAP:
        if (s->data)
            munmap(s->data, s->nbytes);
        break;
    case TXC_STORAGE_ANON: munmap(s->map, s->map_size); break;
    case TXC_STORAGE_EXTERNAL:
        if (s->deleter)
            s->deleter(s->ctx, s->data);
        break;
    }
    free(s);
}

void *txc_storage_data(const txc_storage *s) { return s->data; }
size_t txc_storage_size(const txc_storage *s) { return s->nbytes; }
txc_storage_kind txc_storage_get_kind(const txc_storage *s) { return s->kind; }
bool txc_storage_is_readonly(const txc_storage *s) { return s->kind == TXC_STORAGE_MMAP || s->sealed; }
txc_device txc_storage_device(const txc_storage *s) { return s->device; }

int64_t txc_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] && n > INT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

static txc_status check_shape(txc_dtype dtype, int ndim, const int64_t *shape, size_t *nbytes)
{
    if ((unsigned)dtype >= TXC_DTYPE_COUNT)
        return txc_error(TXC_ERR_INVALID, "bad dtype %d", (int)dtype);
    if (ndim < 0 || ndim > TXC_MAX_DIMS)
        return txc_error(TXC_ERR_INVALID, "%d dims (at most %d supported)", ndim, TXC_MAX_DIMS);
    int64_t n = txc_shape_numel(ndim, shape);
    if (n < 0 || (uint64_t)n > SIZE_MAX / 8)
        return txc_error(TXC_ERR_INVALID, "bad shape (negative or overflowing dims)");
    if (txc_dtype_is_quantized(dtype)) {
        /* rows of K = shape[-1] elements, each a whole number of blocks */
        int64_t bs = txc_dtype_block_size(dtype);
        if (ndim < 1 || shape[ndim - 1] % bs != 0)
            return txc_error(TXC_ERR_INVALID, "a %s array needs its last dim (%lld) to be a multiple of %lld",
                             txc_dtype_name(dtype), ndim < 1 ? 0LL : (long long)shape[ndim - 1], (long long)bs);
    }
    if (!txc_dtype_nbytes(dtype, n, nbytes))
        return txc_error(TXC_ERR_INVALID, "bad shape for %s", txc_dtype_name(dtype));
    return TXC_OK;
}

static txc_array *array_wrap(txc_storage *s, size_t off, txc_dtype dtype, int ndim, const int64_t *shape,
                             size_t nbytes)
{
    txc_array *a = calloc(1, sizeof *a);
    if (!a) {
        txc_error(TXC_ERR_NOMEM, "out of memory (array)");
        return NULL;
    }
    a->refcount = 1;
    a->storage = s;
    a->dtype = dtype;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a->shape[i] = shape[i];
    a->numel = txc_shape_numel(ndim, shape);
    a->nbytes = nbytes;
    a->data = s->data ? (char *)s->data + off : NULL;
    return a;
}

txc_array *txc_array_new(txc_device dev, txc_dtype dtype, int ndim, const int64_t *shape)
{
    size_t nbytes;
    if (check_shape(dtype, ndim, shape, &nbytes) != TXC_OK)
        return NULL;
    txc_storage *s = txc_storage_new(dev, nbytes);
    if (!s)
        return NULL;
    txc_array *a = array_wrap(s, 0, dtype, ndim, shape, nbytes);
    if (!a)
        txc_storage_release(s);
    return a;
}

txc_array *txc_array_from_storage(txc_storage *s, size_t off, txc_dtype dtype, int ndim, const int64_t *shape)
{
    size_t nbytes;
    if (check_shape(dtype, ndim, shape, &nbytes) != TXC_OK)
        return NULL;
    if (off > s->nbytes || nbytes > s->nbytes - off) {
        txc_error(TXC_ERR_INVALID, "array of %zu bytes at offset %zu does not fit in a storage of %zu bytes",
                  nbytes, off, s->nbytes);
        return NULL;
    }
    /* element alignment; a block type's blocks start with (or hold) f16 fields */
    size_t align = txc_dtype_is_quantized(dtype) ? 2 : txc_dtype_size(dtype);
    if (nbytes > 0 && ((uintptr_t)((char *)s->data + off) % align) != 0) {
        txc_error(TXC_ERR_INVALID, "offset %zu is not aligned for %s", off, txc_dtype_name(dtype));
        return NULL;
    }
    txc_array *a = array_wrap(s, off, dtype, ndim, shape, nbytes);
    if (a)
        txc_storage_retain(s);
    return a;
}

txc_array *txc_array_retain(txc_array *a)
{
    if (a)
        a->refcount++;
    return a;
}

void txc_array_release(txc_array *a)
{
    if (!a || --a->refcount > 0)
        return;
    txc_storage_release(a->storage);
    free(a);
}

txc_dtype txc_array_dtype(const txc_array *a) { return a->dtype; }
int txc_array_ndim(const txc_array *a) { return a->ndim; }
const int64_t *txc_array_shape(const txc_array *a) { return a->shape; }
int64_t txc_array_numel(const txc_array *a) { return a->numel; }
size_t txc_array_nbytes(const txc_array *a) { return a->nbytes; }
void *txc_array_data(const txc_array *a) { return a->data; }
txc_device txc_array_device(const txc_array *a) { return a->storage->device; }
txc_storage *txc_array_storage(const txc_array *a) { return a->storage; }

txc_array *txc_array_copy_to(const txc_array *a, txc_device dev)
{
    txc_array *b = txc_array_new(dev, a->dtype, a->ndim, a->shape);
    if (!b)
        return NULL;
    if (txc_backend_copy(dev, b->data, a->storage->device, a->data, a->nbytes) != TXC_OK) {
        txc_array_release(b);
        return NULL;
    }
    return b;
}
