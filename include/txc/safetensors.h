/*
 * txc/safetensors.h — zero-copy reader of Hugging Face safetensors weights.
 *
 * The format (https://huggingface.co/docs/safetensors, the `safetensors`
 * crate): an 8-byte little-endian u64 header length N, N bytes of a JSON
 * object {name: {"dtype": "F32", "shape": [d0, ...], "data_offsets":
 * [begin, end]}, ..., optional "__metadata__": {str: str}}, then the data
 * section. Offsets are in bytes, relative to the start of the data section
 * (byte 8 + N of the file); tensors are C-contiguous, little-endian.
 *
 * A sharded checkpoint (transformers' save_pretrained with max_shard_size)
 * is several such files plus "model.safetensors.index.json":
 * {"metadata": {...}, "weight_map": {tensor name: shard file name}}.
 *
 * Every file is mmap'd read-only (txc_storage_mmap_file) and its tensors
 * point into the mapping: nothing is copied. Arrays made from a tensor's
 * storage (txc_array_from_storage) take their own reference and stay valid
 * after txc_safetensors_close.
 *
 * Validation (each failure records a one-line message naming the file and,
 * where there is one, the tensor and field):
 *   - TXC_ERR_IO: file or directory missing or unreadable, missing shard;
 *   - TXC_ERR_FORMAT: file shorter than 8 bytes, header length past the end
 *     of the file or above 100,000,000 bytes (the crate's MAX_HEADER_SIZE),
 *     header not a JSON object, an entry without a valid "dtype", "shape"
 *     (array of at most TXC_MAX_DIMS non-negative integers) or
 *     "data_offsets" (two integers, begin <= end <= data section size),
 *     end - begin != numel * dtype size, two tensors overlapping, a name
 *     twice (in one file or across shards), a dtype string that is no
 *     safetensors dtype at all, a malformed "__metadata__" (not {str: str}),
 *     an index without a "weight_map" object, a weight_map entry whose
 *     tensor is not in the named shard, a shard name that leaves the
 *     directory ("/..." or "..");
 *   - TXC_ERR_UNSUPPORTED: a valid safetensors dtype txc does not handle
 *     ("F64", "I8", "U8", "F8_E4M3", ...).
 * Data not aligned for its dtype (a writer that did not pad the header to 8
 * bytes) is accepted and marked `aligned = false`: use it through a copy.
 * Lenient where the crate is strict (the crate demands that the tensors
 * tile the data section exactly): gaps between tensors and bytes after the
 * last one are accepted. Tensors of a shard file that the weight_map does
 * not list are kept (as loading the shard file alone would).
 */
#ifndef TXC_SAFETENSORS_H
#define TXC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "txc/array.h"
#include "txc/dtype.h"
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The header's limit on N, as the safetensors crate (MAX_HEADER_SIZE). */
#define TXC_SAFETENSORS_MAX_HEADER 100000000u

typedef struct txc_st_tensor {
    const char *name;          /* e.g. "model.layers.0.self_attn.q_proj.weight" */
    txc_dtype dtype;           /* from "F32","F16","BF16","I32","I64","BOOL" */
    int ndim;                  /* 0..TXC_MAX_DIMS (0: a scalar, one element) */
    int64_t shape[TXC_MAX_DIMS];
    txc_storage *storage;      /* the file's mmap storage (borrowed; retain to keep) */
    size_t byte_offset;        /* offset of the data inside that storage (absolute, in the file) */
    size_t nbytes;             /* numel * txc_dtype_size(dtype) */
    const void *data;          /* storage base + byte_offset (read-only memory) */
    bool aligned;              /* data is aligned for its dtype (else: copy before use) */
    int shard;                 /* index of the file it came from (0 for a single file;
                                  shards are numbered in sorted file-name order) */
} txc_st_tensor;

typedef struct txc_safetensors txc_safetensors;

/* Open safetensors weights. `path` is one of:
 *   - a directory holding "model.safetensors" (preferred, as transformers)
 *     or "model.safetensors.index.json" (sharded; shards are looked up
 *     beside the index);
 *   - a .safetensors file;
 *   - an index file (a path ending in ".json").
 * On success *out owns the mappings (free with txc_safetensors_close).
 * On failure *out is NULL and nothing leaks. Errors: TXC_ERR_INVALID (NULL
 * argument), TXC_ERR_IO ("no model.safetensors or
 * model.safetensors.index.json in DIR", missing file or shard),
 * TXC_ERR_FORMAT, TXC_ERR_UNSUPPORTED (see the list above), TXC_ERR_NOMEM. */
txc_status txc_safetensors_open(const char *path, txc_safetensors **out);

/* Release the mappings' references and the table (NULL is ignored). Arrays
 * made from the storages stay valid (refcounted). */
void txc_safetensors_close(txc_safetensors *st);

/* Number of tensors (all shards together). */
int txc_safetensors_count(const txc_safetensors *st);

/* Tensor i, 0 <= i < count, sorted by name (strcmp order); NULL when i is
 * out of range (no error recorded). */
const txc_st_tensor *txc_safetensors_at(const txc_safetensors *st, int i);

/* The tensor called `name` (binary search), NULL if absent; no error is
 * recorded (a missing optional weight, e.g. lm_head.weight when the
 * embeddings are tied, is not an error of the file). */
const txc_st_tensor *txc_safetensors_find(const txc_safetensors *st, const char *name);

/* Value of `key` in the "__metadata__" of the first file (for a sharded
 * checkpoint: the first shard in sorted order), NULL if absent. E.g.
 * "format" -> "pt". Valid until txc_safetensors_close. */
const char *txc_safetensors_metadata(const txc_safetensors *st, const char *key);

/* Number of shard files (1 for a single file) and the path of shard i as
 * opened (NULL when out of range). */
int txc_safetensors_shard_count(const txc_safetensors *st);
const char *txc_safetensors_shard_path(const txc_safetensors *st, int i);

/* A table of tensors that lie in one file of another format (the GGUF
 * loader's, under the Hugging Face names): new_table(path, file mapping)
 * takes a reference on `file`; add() copies t (its name too; a tensor
 * over another storage, e.g. one rewritten at load, gets shard -1; the
 * caller keeps that storage alive); finish() sorts by name and refuses a
 * name twice (TXC_ERR_FORMAT). The table then answers count/at/find and the
 * shard queries (one shard: `path`) as an opened file does. Errors:
 * TXC_ERR_INVALID (NULL argument), TXC_ERR_NOMEM. */
txc_status txc_safetensors_new_table(const char *path, txc_storage *file, txc_safetensors **out);
txc_status txc_safetensors_add(txc_safetensors *st, const txc_st_tensor *t);
txc_status txc_safetensors_finish(txc_safetensors *st);
/* add() of a tensor rewritten into `storage`, on which the table then holds
 * a reference (released at close). */
txc_status txc_safetensors_add_owned(txc_safetensors *st, const txc_st_tensor *t, txc_storage *storage);

#ifdef __cplusplus
}
#endif
#endif
