/*
 * txc/gguf_write.h — writing GGUF files (version 3, little-endian), as
 * gguf-py's GGUFWriter and ggml's gguf.cpp write them: the header, the
 * metadata key/values, the tensor infos, padding to the alignment, then the
 * tensors' data, each padded to the alignment (general.alignment, 32 by
 * default; the writer does not write the key, so readers use 32).
 *
 * Use: txc_gguf_writer_new; the txc_gguf_w_* metadata setters and
 * txc_gguf_w_tensor (name, ggml type id, dims in ggml order: ne[0] the
 * contiguous one) in any mix; txc_gguf_writer_open(path) writes everything
 * up to the first tensor's data; then txc_gguf_writer_data once per tensor,
 * in the order they were added, with exactly the tensor's bytes
 * (ggml_row_size(type, ne[0]) * ne[1] * ...); txc_gguf_writer_close. The
 * writer keeps the metadata in memory, never the tensors' data.
 *
 * Errors (status + txc_last_error): TXC_ERR_INVALID (an empty or repeated
 * key or tensor name, more than 4 dims, ne[0] not a multiple of the type's
 * block, a data call out of order or of the wrong size, a setter after
 * open), TXC_ERR_UNSUPPORTED (a ggml type txc has no size for), TXC_ERR_IO
 * (create/write failure, naming the path), TXC_ERR_NOMEM. After an error
 * the writer only accepts txc_gguf_writer_free (the file is removed).
 */
#ifndef TXC_GGUF_WRITE_H
#define TXC_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txc_gguf_writer txc_gguf_writer;

txc_gguf_writer *txc_gguf_writer_new(void);
/* Free (NULL is ignored); a file not closed successfully is removed. */
void txc_gguf_writer_free(txc_gguf_writer *w);

/* Metadata (GGUF value types UINT32, INT32, FLOAT32, BOOL, STRING, UINT64,
 * and ARRAY of STRING / INT32 / FLOAT32). Strings are copied. */
txc_status txc_gguf_w_u32(txc_gguf_writer *w, const char *key, uint32_t v);
txc_status txc_gguf_w_i32(txc_gguf_writer *w, const char *key, int32_t v);
txc_status txc_gguf_w_f32(txc_gguf_writer *w, const char *key, float v);
txc_status txc_gguf_w_bool(txc_gguf_writer *w, const char *key, bool v);
txc_status txc_gguf_w_str(txc_gguf_writer *w, const char *key, const char *v);
txc_status txc_gguf_w_arr_str(txc_gguf_writer *w, const char *key, const char *const *v, size_t n);
txc_status txc_gguf_w_arr_i32(txc_gguf_writer *w, const char *key, const int32_t *v, size_t n);
txc_status txc_gguf_w_arr_f32(txc_gguf_writer *w, const char *key, const float *v, size_t n);

/* A tensor info: `n_dims` (1..4) sizes in ggml order. */
txc_status txc_gguf_w_tensor(txc_gguf_writer *w, const char *name, uint32_t ggml_type, int n_dims,
                             const int64_t *ne);
/* Bytes of tensor i's data (as added). */
size_t txc_gguf_w_tensor_bytes(const txc_gguf_writer *w, int i);

txc_status txc_gguf_writer_open(txc_gguf_writer *w, const char *path);
/* The next tensor's data (nbytes must equal txc_gguf_w_tensor_bytes). */
txc_status txc_gguf_writer_data(txc_gguf_writer *w, const void *data, size_t nbytes);
/* Flush and close; TXC_ERR_INVALID when tensors' data is missing. */
txc_status txc_gguf_writer_close(txc_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#endif
