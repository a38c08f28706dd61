/*
 * Where a loaded model's weights live: the safetensors file's mmap (zero
 * copy, pages read on first use) or one anonymous buffer they are copied
 * into (llama.cpp's --no-mmap); see txc_weights_mode in include/txc/model.h.
 *
 * The copy: the parameters whose arrays are in a file mapping are laid out
 * one after the other (64-byte aligned) in a buffer from
 * txc_storage_new_anon (2 MiB aligned, MADV_HUGEPAGE asked before the
 * first write), copied in 4 MiB chunks spread over the thread pool (one
 * memcpy stream per thread reaches the machine's memory bandwidth better
 * than one), and each chunk's source pages are dropped from this process
 * (MADV_DONTNEED: the mapping is private and read-only, so this only
 * unmaps them; they stay in the page cache) as soon as it is copied, so
 * that the RSS never holds the file and the copy at once. Then the buffer
 * is made read-only and every tensor's array is swapped for one over it:
 * the tensors (and every pointer to them) stay the same. The file mapping
 * goes when txc_safetensors_close drops the last reference.
 */
#include "models/model_impl.h"
#include "txc/threads.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20)

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
            w.param_bytes += (size_t)t->numel * txc_dtype_size(t->dtype);
        }
    }
    return w;
}

typedef struct chunk {
    const char *src;
    char *dst;
    size_t n;
} chunk;

typedef struct copy_ctx {
    const chunk *chunks;
    size_t page;
} copy_ctx;

static void copy_task(void *ctx, int64_t i)
{
    const copy_ctx *c = ctx;
    const chunk *k = &c->chunks[i];
    memcpy(k->dst, k->src, k->n);
    /* Drop the source pages wholly inside this chunk from the RSS (a page
     * shared with a neighbouring chunk stays until the munmap). */
    uintptr_t lo = ((uintptr_t)k->src + c->page - 1) & ~(uintptr_t)(c->page - 1);
    uintptr_t hi = ((uintptr_t)k->src + k->n) & ~(uintptr_t)(c->page - 1);
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

txc_status txc_model_place_weights(txc_model *m, txc_weights_mode mode, bool hugepages)
{
    m->weights = (txc_weights_info){.mode = mode};
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
    if (!chunks || !dst) {
        s = txc_error(TXC_ERR_NOMEM, "out of memory (weights)");
    } else {
        size_t k = 0;
        for (int j = 0; j < n; j++)
            for (size_t o = 0; o < src[j]->nbytes; o += CHUNK)
                chunks[k++] = (chunk){(const char *)src[j]->data + o, base + off[j] + o,
                                      src[j]->nbytes - o < CHUNK ? src[j]->nbytes - o : CHUNK};
        long page = sysconf(_SC_PAGESIZE);
        copy_ctx c = {chunks, page > 0 ? (size_t)page : 4096};
        txc_parallel_for((int64_t)n_chunks, copy_task, &c);
        txc_storage_seal(buf);
        for (int j = 0; j < n && s == TXC_OK; j++)
            if (!(dst[j] = txc_array_from_storage(buf, off[j], src[j]->dtype, src[j]->ndim, src[j]->shape)))
                s = txc_last_status();
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
    txc_storage_release(buf); /* the arrays hold it */
    m->weights.copy_ms = now_ms() - t0;
done:
    for (int j = 0; j < n; j++)
        txc_array_release(src[j]);
    free(src);
    free(off);
    return s;
}
