/* fuzz_gguf: txc_gguf_open_memory on one GGUF file (the input), then the
 * model layer's reading of it (txc_gguf_model_config and, when that
 * succeeds, txc_gguf_model_table: the renaming, q/k row permutation and
 * norm rewrite). Properties: the open succeeds or records an error and
 * leaves *out NULL; an accepted file's metadata entries and tensors are all
 * reachable, every tensor's bytes lie inside the input at an offset that is
 * a multiple of the alignment, nbytes = numel / block * type size, no two
 * non-empty tensors overlap, and find_tensor finds each by its name; reading
 * every tensor byte and every string byte is safe. Standalone (libFuzzer's
 * LLVMFuzzerTestOneInput only): builds with any fuzz/ harness. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_impl.h"
#include "txc/gguf.h"

static volatile uint8_t sink;

static void touch(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint8_t x = 0;
    for (size_t i = 0; i < n; i++)
        x ^= b[i];
    sink ^= x;
}

static void touch_value(const txc_gguf_value *v)
{
    if (v->type == TXC_GGUF_STRING)
        touch(v->v.str.data, (size_t)v->v.str.len);
    if (v->type != TXC_GGUF_ARRAY)
        return;
    if (v->v.arr.type == TXC_GGUF_STRING || v->v.arr.type == TXC_GGUF_ARRAY) {
        for (uint64_t i = 0; i < v->v.arr.n; i++)
            touch_value(&v->v.arr.items[i]);
    } else {
        touch(v->v.arr.data, (size_t)v->v.arr.n * txc_gguf_type_size(v->v.arr.type));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    txc_clear_error();
    txc_gguf *g = (txc_gguf *)1;
    if (txc_gguf_open_memory(data, size, "fuzz.gguf", &g) != TXC_OK) {
        if (g || !*txc_last_error())
            abort();
        return 0;
    }
    if (!g)
        abort();
    for (int64_t i = 0; i < txc_gguf_kv_count(g); i++)
        touch_value(&txc_gguf_kv_at(g, i)->value);
    uint32_t align = txc_gguf_alignment(g);
    for (int64_t i = 0; i < txc_gguf_tensor_count(g); i++) {
        const txc_gguf_tensor *t = txc_gguf_tensor_at(g, i);
        int64_t blk;
        size_t tsize;
        if (!txc_ggml_type_block(t->ggml_type, &blk, &tsize) || t->numel % blk ||
            t->nbytes != (size_t)(t->numel / blk) * tsize)
            abort();
        if (t->byte_offset > size || t->nbytes > size - t->byte_offset || (const uint8_t *)t->data != data + t->byte_offset ||
            (t->byte_offset - txc_gguf_data_offset(g)) % align)
            abort();
        if (txc_gguf_find_tensor(g, t->name) != t)
            abort();
        for (int64_t j = 0; j < i; j++) {
            const txc_gguf_tensor *u = txc_gguf_tensor_at(g, j);
            if (t->nbytes && u->nbytes && t->byte_offset < u->byte_offset + u->nbytes &&
                u->byte_offset < t->byte_offset + t->nbytes)
                abort();
        }
        touch(t->data, t->nbytes);
    }
    txc_hf_config *c = malloc(sizeof *c);
    txc_clear_error();
    if (c && txc_gguf_model_config(g, c) == TXC_OK) {
        txc_safetensors *st = NULL;
        if (txc_gguf_model_table(g, c, &st) == TXC_OK) {
            for (int i = 0; i < txc_safetensors_count(st); i++)
                touch(txc_safetensors_at(st, i)->data, txc_safetensors_at(st, i)->nbytes);
            txc_safetensors_close(st);
        } else if (st || !*txc_last_error()) {
            abort();
        }
    }
    free(c);
    txc_gguf_close(g);
    return 0;
}
