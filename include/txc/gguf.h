/*
 * txc/gguf.h — zero-copy reader of GGUF files (llama.cpp / ggml's format).
 *
 * The format (ggml's docs/gguf.md and ggml/src/gguf.cpp, versions 2 and 3;
 * version 1, with 32-bit counts, is refused as llama.cpp refuses it), all
 * little-endian:
 *   u32 magic "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count,
 *   metadata_kv_count x (string key, u32 value type, value),
 *   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
 *                   u64 offset),
 *   padding to general.alignment (a u32, default 32), the data section.
 * A string is a u64 byte length and the bytes (no NUL). A value is one of
 * the 13 types of txc_gguf_type; an ARRAY is u32 element type, u64 count and
 * the elements (arrays nest). ne[0] is the innermost (fastest) dimension: the
 * torch-order shape is ne reversed (a 2-d weight of ne {in, out} is
 * (out, in)). A tensor's offset is relative to the data section.
 *
 * The file is mmap'd read-only (txc_storage_mmap_file); tensor data and
 * string values point into the mapping, nothing is copied.
 *
 * Validation, each failure one line naming the file and, where there is
 * one, the key or tensor (the counterparts of txc/safetensors.h's checks and
 * of gguf.cpp's own):
 *   - TXC_ERR_IO: file missing or unreadable;
 *   - TXC_ERR_FORMAT: shorter than the header, a magic other than "GGUF", a
 *     version other than 2 or 3 (1 and a big-endian file are named as such),
 *     a count, string length or array length that the rest of the file
 *     cannot hold (checked before anything is allocated for it), a key or
 *     tensor name twice, an empty key, a value type that is none of the 13,
 *     arrays nested deeper than TXC_GGUF_MAX_DEPTH, general.alignment not a
 *     u32 power of two, a tensor name of TXC_GGUF_MAX_NAME bytes or more (as
 *     GGML_MAX_NAME), n_dims 0 or above 4, a dimension negative or a
 *     product past INT64_MAX, ne[0] not a multiple of the type's block size,
 *     an unknown ggml type id (the message gives the id), an offset not a
 *     multiple of the alignment, data past the end of the file, two tensors
 *     overlapping.
 * Lenient where gguf.cpp is strict (it demands that the tensors follow one
 * another in order, each padded to the alignment): gaps and any order are
 * accepted, as the safetensors reader does.
 *
 * Every ggml type id ggml defines is known here by name and size (so that a
 * file of any type can be inspected); which ones the models can compute with
 * is txc_gguf_type_to_dtype's answer.
 */
#ifndef TXC_GGUF_H
#define TXC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "txc/array.h"
#include "txc/dtype.h"
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_GGUF_MAX_DIMS 4        /* GGML_MAX_DIMS */
#define TXC_GGUF_MAX_NAME 64       /* GGML_MAX_NAME: a tensor name is shorter */
#define TXC_GGUF_MAX_DEPTH 8       /* arrays of arrays nest at most this deep */
#define TXC_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types (gguf.h's enum gguf_type). */
typedef enum txc_gguf_type {
    TXC_GGUF_UINT8 = 0,
    TXC_GGUF_INT8 = 1,
    TXC_GGUF_UINT16 = 2,
    TXC_GGUF_INT16 = 3,
    TXC_GGUF_UINT32 = 4,
    TXC_GGUF_INT32 = 5,
    TXC_GGUF_FLOAT32 = 6,
    TXC_GGUF_BOOL = 7,
    TXC_GGUF_STRING = 8,
    TXC_GGUF_ARRAY = 9,
    TXC_GGUF_UINT64 = 10,
    TXC_GGUF_INT64 = 11,
    TXC_GGUF_FLOAT64 = 12,
    TXC_GGUF_TYPE_COUNT
} txc_gguf_type;

/* A string in the file: `len` bytes at `data` (no NUL; may hold any bytes). */
typedef struct txc_gguf_str {
    const char *data;
    uint64_t len;
} txc_gguf_str;

/* One metadata value. Scalars are decoded; a string points into the file;
 * an array of scalars keeps its elements in place (`data`, little-endian,
 * maybe unaligned: read them with txc_gguf_array_*), an array of strings or
 * of arrays has `items` (decoded, owned by the txc_gguf). */
typedef struct txc_gguf_value {
    txc_gguf_type type;
    union {
        uint64_t u;        /* UINT8..UINT64 */
        int64_t i;         /* INT8..INT64 */
        double f;          /* FLOAT32, FLOAT64 */
        bool b;            /* BOOL */
        txc_gguf_str str;  /* STRING */
        struct {
            txc_gguf_type type;                 /* element type */
            uint64_t n;                         /* element count */
            const void *data;                   /* scalar elements, in the file */
            const struct txc_gguf_value *items; /* STRING / ARRAY elements (n of them) */
        } arr;             /* ARRAY */
    } v;
} txc_gguf_value;

typedef struct txc_gguf_kv {
    const char *key;       /* NUL-terminated copy (owned) */
    txc_gguf_value value;
} txc_gguf_kv;

typedef struct txc_gguf_tensor {
    const char *name;            /* NUL-terminated copy (owned) */
    uint32_t ggml_type;          /* ggml's type id (GGML_TYPE_F32 = 0, ...) */
    int n_dims;                  /* 1..4 */
    int64_t ne[TXC_GGUF_MAX_DIMS]; /* ggml order, ne[0] innermost; 1 past n_dims */
    int64_t shape[TXC_GGUF_MAX_DIMS]; /* torch order: shape[i] = ne[n_dims - 1 - i] */
    int64_t numel;
    uint64_t offset;             /* in the data section, as in the file */
    size_t byte_offset;          /* absolute offset in the file */
    size_t nbytes;               /* numel / block size * type size */
    const void *data;            /* in the mapping */
} txc_gguf_tensor;

typedef struct txc_gguf txc_gguf;

/* Open and validate a GGUF file (see above). *out owns the mapping
 * (txc_gguf_close). On failure *out is NULL and nothing leaks. Errors:
 * TXC_ERR_INVALID (NULL argument), TXC_ERR_IO, TXC_ERR_FORMAT, TXC_ERR_NOMEM. */
txc_status txc_gguf_open(const char *path, txc_gguf **out);
/* The same over `n` bytes in memory (the fuzz target; `origin` names them in
 * messages). The bytes must outlive the txc_gguf. */
txc_status txc_gguf_open_memory(const void *data, size_t n, const char *origin, txc_gguf **out);
/* Release the mapping's reference and the tables (NULL is ignored); arrays
 * made from txc_gguf_storage() keep the mapping alive. */
void txc_gguf_close(txc_gguf *g);

uint32_t txc_gguf_version(const txc_gguf *g);
uint32_t txc_gguf_alignment(const txc_gguf *g);  /* general.alignment or 32 */
size_t txc_gguf_data_offset(const txc_gguf *g);  /* where the data section starts */
const char *txc_gguf_path(const txc_gguf *g);    /* the path (or origin) opened */
size_t txc_gguf_file_size(const txc_gguf *g);
txc_storage *txc_gguf_storage(const txc_gguf *g); /* the mapping (borrowed) */

/* Metadata, in file order: count and entry i (NULL out of range). */
int64_t txc_gguf_kv_count(const txc_gguf *g);
const txc_gguf_kv *txc_gguf_kv_at(const txc_gguf *g, int64_t i);
/* The value of `key`, NULL if absent (no error recorded). */
const txc_gguf_value *txc_gguf_find(const txc_gguf *g, const char *key);

/* Tensors, in file order: count, entry i, and by name (NULL if absent). */
int64_t txc_gguf_tensor_count(const txc_gguf *g);
const txc_gguf_tensor *txc_gguf_tensor_at(const txc_gguf *g, int64_t i);
const txc_gguf_tensor *txc_gguf_find_tensor(const txc_gguf *g, const char *name);

/* Typed lookups: true and *out when `key` is present with a fitting type
 * (any integer type that holds the value / any float or integer type for
 * _f64 / BOOL / STRING); false when absent. A present key of another type
 * (a string where a number is expected, -1 for _u64) records TXC_ERR_FORMAT
 * naming the key and both types, and sets *bad (which may be NULL). */
bool txc_gguf_get_i64(const txc_gguf *g, const char *key, int64_t *out, bool *bad);
bool txc_gguf_get_f64(const txc_gguf *g, const char *key, double *out, bool *bad);
bool txc_gguf_get_bool(const txc_gguf *g, const char *key, bool *out, bool *bad);
bool txc_gguf_get_str(const txc_gguf *g, const char *key, txc_gguf_str *out, bool *bad);

/* Element i of an ARRAY value of scalar elements, as int64 / double (0 for
 * a non-scalar element type or i out of range; floats truncate for _i64). */
int64_t txc_gguf_array_i64(const txc_gguf_value *v, uint64_t i);
double txc_gguf_array_f64(const txc_gguf_value *v, uint64_t i);

/* "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr",
 * "u64", "i64", "f64" (gguf-dump's short names); "?" otherwise. */
const char *txc_gguf_type_name(txc_gguf_type t);
/* Bytes of one scalar element (0 for STRING, ARRAY, unknown). */
size_t txc_gguf_type_size(txc_gguf_type t);

/* ggml's type names ("F32", "F16", "Q4_0", "Q4_K", "BF16", "IQ2_XXS", ...,
 * as ggml_type_name upper-cased, gguf-dump's spelling); NULL for an id ggml
 * does not define (4, 5, 31-33, 36-38 were removed; past 39). */
const char *txc_ggml_type_name(uint32_t ggml_type);
/* Elements per block and bytes per block (ggml's type_traits blck_size,
 * type_size); false for an unknown id. */
bool txc_ggml_type_block(uint32_t ggml_type, int64_t *block_size, size_t *type_size);
/* The txc dtype a tensor of this ggml type is computed in: F32, F16, BF16,
 * I32 (26), I64 (27) and the block-quantized Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q4_K, Q5_K, Q6_K (txc_dtype_from_ggml); false for the others (Q2_K, Q3_K,
 * IQ*, I8, I16, F64, ...). */
bool txc_gguf_type_to_dtype(uint32_t ggml_type, txc_dtype *out);

/* Whether `path` names a GGUF file by its name (ends in ".gguf"): how the
 * loaders that take a model folder (txc_model_load, txc_tokenizer_load,
 * txc_chat_template_load, txc_generation_config_load) tell a GGUF apart. */
bool txc_gguf_is_path(const char *path);

#ifdef __cplusplus
}
#endif
#endif
