/*
 * Where a loaded model's weights live: the safetensors file's mmap (zero
 * copy, pages read on first use) or one anonymous buffer they are copied
 * into (llama.cpp's --no-mmap); see txc_weights_mode in include/txc/model.h.
 *
 * The copy: the parameters whose arrays are in a file mapping are laid out
 * one after the other (64-byte aligned) in a buffer from
 * txc_storage_new_anon (2 MiB aligned, MADV_HUGEPAGE asked before the
 * first write) and copied in 4 MiB chunks spread over the thread pool.
 * A chunk is read with pread() from the file (the kernel's copy out of the
 * page cache): the file's pages never enter this process's page tables, so
 * the RSS never holds the file and the copy at once, and no page of the
 * mapping is faulted in. Where the file cannot be read (opened or read
 * failed), the chunk is copied with memcpy from the mapping instead and
 * its source pages dropped again (MADV_DONTNEED: the mapping is private
 * and read-only, so this only unmaps them). Measured on a 2-core VM, 1 GB:
 * pread ~0.7-1 s on 1 or 2 threads; memcpy + MADV_DONTNEED 1.0 s on one
 * thread but 1.6-3.8 s on two (every MADV_DONTNEED flushes the other
 * thread's TLB); memcpy without dropping: 0.8 s but twice the RSS.
 * Block-quantized weights of Q4_0, Q4_1, Q8_0 and Q4_K are then repacked in
 * place, rows interleaved by 8 (txc_quant_repack: the same bytes, no
 * second copy), unless TXC_QUANT_REPACK=0; under MMAP they stay in the
 * file's layout (the row-layout kernels read them).
 * Then the buffer is made read-only and every tensor's array is swapped
 * for one over it: the tensors (and every pointer to them) stay the same.
 * The file mapping goes when txc_safetensors_close drops the last reference.
 */
#include "models/model_impl.h"
#include "txc/quant.h"
#include "txc/threads.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20)

static bool force_memcpy; /* tests */

void txc_model_test_force_memcpy(bool on) { force_memcpy = on; }

const char *txc_weights_mode_name(txc_weights_mode mode)
{
    switch (mode) {
    case TXC_WEIGHTS_DEFAULT: return "memory";
    case TXC_WEIGHTS_MMAP: return "mmap";
    case TXC_WEIGHTS_COPY: return "copy";
    }
    return "?";
}

txc_weights_info txc_model_weights_info(const txc_model *m)
{
    txc_weights_info w = m ? m->weights : (txc_weights_info){0};
    if (m) { /* the parameters as they are now (txc_model_to may have moved them) */
        w.param_bytes = 0;
        for (int i = 0; i < m->n_params; i++) {
            const txc_tensor *t = m->params[i].tensor;
            size_t nb = 0;
            if (txc_dtype_nbytes(t->dtype, t->numel, &nb)) /* whole blocks for a quantized weight */
                w.param_bytes += nb;
        }
    }
    return w;
}

typedef struct chunk {
    const char *src; /* in the mapping */
    char *dst;
    size_t n;
    int fd;          /* the file, -1: memcpy from the mapping */
    off_t off;       /* src's offset in the file */
} chunk;

typedef struct copy_ctx {
    const chunk *chunks;
    size_t page;
} copy_ctx;

static void copy_task(void *ctx, int64_t i)
{
    const copy_ctx *c = ctx;
    const chunk *k = &c->chunks[i];
    size_t done = 0;
    while (k->fd >= 0 && done < k->n) {
        ssize_t r = pread(k->fd, k->dst + done, k->n - done, k->off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* the rest from the mapping */
        done += (size_t)r;
    }
    if (done == k->n)
        return;
    memcpy(k->dst + done, k->src + done, k->n - done);
    /* (a page shared with a neighbouring chunk stays until the munmap) */
    txc_impl_drop_mapped_pages(k->src, k->n);
}

void txc_impl_drop_mapped_pages(const void *p, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* refused: only the RSS is higher */
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool in_file(const txc_array *a) { return txc_storage_get_kind(a->storage) == TXC_STORAGE_MMAP; }

/* The shard whose mapping is `s`, -1 if none. */
static int shard_of(const txc_safetensors *st, const txc_storage *s)
{
    for (int i = 0; i < txc_safetensors_count(st); i++) {
        const txc_st_tensor *t = txc_safetensors_at(st, i);
        if (t->storage == s)
            return t->shard;
    }
    return -1;
}

txc_status txc_model_place_weights(txc_model *m, const txc_safetensors *st, txc_weights_mode mode, bool hugepages)
{
    txc_weights_info kept = m->weights; /* what the conversions found */
    m->weights = (txc_weights_info){.mode = mode, .n_overflow_tensors = kept.n_overflow_tensors,
                                    .overflow_values = kept.overflow_values};
    memcpy(m->weights.overflow_tensor, kept.overflow_tensor, sizeof kept.overflow_tensor);
    /* The distinct arrays in a file mapping (a tensor may share its array). */
    txc_array **src = malloc(((size_t)m->n_params + 1) * sizeof *src);
    size_t *off = malloc(((size_t)m->n_params + 1) * sizeof *off);
    if (!src || !off) {
        free(src);
        free(off);
        return txc_error(TXC_ERR_NOMEM, "out of memory (weights)");
    }
    int n = 0;
    size_t total = 0;
    for (int i = 0; i < m->n_params; i++) {
        txc_array *a = m->params[i].tensor->array;
        if (!in_file(a))
            continue;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++)
            seen = src[j] == a;
        if (seen)
            continue;
        src[n] = txc_array_retain(a); /* held until the swap is done */
        off[n] = total;
        m->weights.file_bytes += a->nbytes;
        total += (a->nbytes + 63) & ~(size_t)63;
        n++;
    }
    txc_status s = TXC_OK;
    if (mode != TXC_WEIGHTS_COPY || total == 0)
        goto done;

    double t0 = now_ms();
    bool repack = txc_quant_repack_enabled();
    double tr = 0;
    txc_storage *buf = txc_storage_new_anon(total, hugepages);
    if (!buf) {
        s = txc_last_status();
        goto done;
    }
    m->weights.hugepages = txc_storage_hugepages(buf);
    char *base = txc_storage_data(buf);
    size_t n_chunks = 0;
    for (int j = 0; j < n; j++)
        n_chunks += (src[j]->nbytes + CHUNK - 1) / CHUNK;
    chunk *chunks = malloc((n_chunks + 1) * sizeof *chunks);
    txc_array **dst = calloc((size_t)n + 1, sizeof *dst);
    int n_shards = txc_safetensors_shard_count(st);
    int *fds = malloc(((size_t)n_shards + 1) * sizeof *fds);
    for (int i = 0; fds && i < n_shards; i++) /* a file that cannot be opened: memcpy from its mapping */
        fds[i] = force_memcpy ? -1 : open(txc_safetensors_shard_path(st, i), O_RDONLY | O_CLOEXEC);
    if (!chunks || !dst || !fds) {
        s = txc_error(TXC_ERR_NOMEM, "out of memory (weights)");
    } else {
        size_t k = 0;
        for (int j = 0; j < n; j++) {
            txc_storage *from = src[j]->storage;
            int sh = shard_of(st, from);
            int fd = sh >= 0 ? fds[sh] : -1;
            off_t foff = (off_t)((const char *)src[j]->data - (const char *)txc_storage_data(from));
            for (size_t o = 0; o < src[j]->nbytes; o += CHUNK)
                chunks[k++] = (chunk){(const char *)src[j]->data + o, base + off[j] + o,
                                      src[j]->nbytes - o < CHUNK ? src[j]->nbytes - o : CHUNK, fd,
                                      foff + (off_t)o};
        }
        long page = sysconf(_SC_PAGESIZE);
        copy_ctx c = {chunks, page > 0 ? (size_t)page : 4096};
        txc_parallel_for((int64_t)n_chunks, copy_task, &c);
        for (int j = 0; j < n && s == TXC_OK; j++)
            if (!(dst[j] = txc_array_from_storage(buf, off[j], src[j]->dtype, src[j]->ndim, src[j]->shape)))
                s = txc_last_status();
        /* block-quantized weights interleaved by 8 rows, in place in the copy (the same bytes) */
        tr = now_ms();
        for (int j = 0; j < n && s == TXC_OK && repack; j++)
            if ((s = txc_quant_repack(dst[j])) == TXC_OK && dst[j]->interleave)
                m->weights.repacked_bytes += dst[j]->nbytes;
        m->weights.repack_ms = now_ms() - tr;
        txc_storage_seal(buf);
    }
    if (s == TXC_OK) /* swap: every tensor over a copied array now views the copy */
        for (int i = 0; i < m->n_params; i++) {
            txc_tensor *t = m->params[i].tensor;
            for (int j = 0; j < n; j++)
                if (t->array == src[j]) {
                    t->array = txc_array_retain(dst[j]);
                    txc_array_release(src[j]);
                    break;
                }
        }
    if (dst)
        for (int j = 0; j < n; j++)
            txc_array_release(dst[j]);
    free(dst);
    free(chunks);
    for (int i = 0; fds && i < n_shards; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    txc_storage_release(buf); /* the arrays hold it */
    /* the weights made at load (GGUF q/k rows put back in order: owned,
     * writable) are repacked in place too */
    for (int i = 0; i < m->n_params && s == TXC_OK && repack; i++) {
        txc_tensor *t = m->params[i].tensor;
        txc_array *a = t->array;
        if (in_file(a) || a->interleave || t->offset != 0 || t->numel != a->numel ||
            !txc_quant_interleave_for(a->dtype, a->ndim == 2 ? a->shape[0] : 0))
            continue;
        tr = now_ms();
        if ((s = txc_quant_repack(a)) == TXC_OK)
            m->weights.repacked_bytes += a->nbytes;
        m->weights.repack_ms += now_ms() - tr;
    }
    m->weights.copy_ms = now_ms() - t0 - m->weights.repack_ms;
done:
    for (int j = 0; j < n; j++)
        txc_array_release(src[j]);
    free(src);
    free(off);
    return s;
}

/* ---- non-finite values (--check-tensors, conversion overflow) ----------------------
 * By the bits: an all-ones exponent is inf (mantissa 0) or NaN. */

int64_t txc_weights_first_nonfinite(const void *data, txc_dtype dtype, int64_t n, int64_t *count, bool *is_nan)
{
    const unsigned char *p = data;
    int64_t first = -1, bad = 0;
    bool nan = false;
    for (int64_t i = 0; i < n; i++) {
        bool inf_or_nan, mant;
        if (dtype == TXC_F32) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            inf_or_nan = (u & 0x7f800000u) == 0x7f800000u;
            mant = (u & 0x007fffffu) != 0;
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            uint16_t e = dtype == TXC_F16 ? 0x7c00 : 0x7f80; /* (bfloat16: float32's top half) */
            inf_or_nan = (h & e) == e;
            mant = (h & (uint16_t)~(e | 0x8000)) != 0;
        }
        if (inf_or_nan) {
            if (first < 0)
                first = i, nan = mant;
            bad++;
        }
    }
    if (count)
        *count = bad;
    if (is_nan)
        *is_nan = nan;
    return first;
}

void txc_weights_index_str(char *buf, size_t cap, int ndim, const int64_t *shape, int64_t flat)
{
    int64_t idx[TXC_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] > 0 ? flat % shape[d] : 0;
        flat = shape[d] > 0 ? flat / shape[d] : 0;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "[", (long long)idx[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, ndim ? "]" : "[]");
}
