/*
 * jit/persist.h — the on-disk cache of compiled plans (internal).
 *
 * A compiled plan (the graph after the passes, with its fused programs,
 * folded constants and arena offsets) is written to
 * <dir>/<name>-<key>.txcplan, where the key hashes everything that defines
 * the computation: the traced graph before the passes (ops, attributes,
 * values, buffers, the bytes of captured constants), the call's signature
 * (input dtypes, shapes, strides, devices, static bytes), the txc version,
 * the file format and the op table. Another process that traces the same
 * graph for the same signature reads the plan instead of running the
 * passes and the memory planner.
 *
 * A file is never trusted: it is read whole, its checksum, header and every
 * index, size and offset are checked, shapes are inferred again for every
 * kernel node, and captured constants are compared with the traced ones.
 * Anything wrong and the caller recompiles (and overwrites the file).
 *
 * The format (native byte order, checked by a tag; see persist.c):
 *   header   "TXCPLAN\n", u32 format, u32 byte-order tag, txc version
 *            (u32 length + bytes), u64 op-table fingerprint, u64[2] key,
 *            jit name (u32 length + bytes)
 *   body     i64 arena bytes; i32 counts of values, nodes, buffers, inputs,
 *            outputs; the values; the buffers (CONST: u64 length + bytes);
 *            the nodes (attributes, flags, fused program: u32 length +
 *            bytes); the input and output value ids
 *   trailer  u64[2] checksum of everything before it
 */
#ifndef TXC_JIT_PERSIST_H
#define TXC_JIT_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jit/graph.h"

#define TXC_PLAN_FORMAT 2 /* 2: nodes rewritten by the pattern pass (jit/patterns.c) */
#define TXC_PLAN_MAX_FILE ((int64_t)1 << 30)

typedef struct txc_plan_key {
    uint64_t h[2];
} txc_plan_key;

/* The key of `traced` (the graph as traced, before any pass) called with
 * the inputs `in` and the static bytes. */
txc_plan_key txc_persist_key(const txc_graph *traced, txc_tensor *const *in, int n, const void *statics,
                             size_t len);

/* The 128-bit hash used for keys and for the file's trailing checksum (the
 * checksum is that of all the bytes before it). */
txc_plan_key txc_persist_hash(const void *p, size_t n);

/* "<dir>/<name>-<32 hex digits>.txcplan" (name reduced to [A-Za-z0-9._-]).
 * False when it does not fit in `cap`. */
bool txc_persist_path(char *buf, size_t cap, const char *dir, const char *name, txc_plan_key key);

typedef enum txc_persist_result {
    TXC_PERSIST_LOADED,   /* *out holds the plan's graph */
    TXC_PERSIST_ABSENT,   /* no file for this key */
    TXC_PERSIST_REJECTED, /* a file exists but is not usable: `why` says why */
} txc_persist_result;

/* Read the plan at `path` for `key`: the graph after the passes (CONST
 * buffers own copies of their bytes) and its arena size. `traced` is the
 * graph the caller traced for this call (its captured constants must match
 * the file's), `in`/`n` the call's inputs (their geometry must match the
 * plan's inputs). Records no error (txc_last_error() is left as it was). */
txc_persist_result txc_persist_load(const char *path, txc_plan_key key, const txc_graph *traced, txc_env *env,
                                    txc_tensor *const *in, int n, txc_graph **out, int64_t *arena_bytes, char *why,
                                    size_t why_cap);

/* Write the compiled graph `g` (after the passes and the planner) and its
 * arena size to `path`, atomically (a temporary file in the same folder,
 * then rename), creating the folder if needed. False with `why` on any
 * failure; records no error. */
bool txc_persist_save(const char *path, const char *name, txc_plan_key key, const txc_graph *g, int64_t arena_bytes,
                      char *why, size_t why_cap);

/* Keep the plan files (*.txcplan) of the folder `dir` within max_bytes:
 * delete the least recently used first (a file's mtime is its last use:
 * saved or loaded), never `keep` (the path of the plan just written; may be
 * NULL). Returns the files deleted; *bytes_left (may be NULL) the plan
 * bytes left. A folder that cannot be read deletes nothing. Records no
 * error. (jit/persist_evict.c) */
int txc_persist_trim(const char *dir, int64_t max_bytes, const char *keep, int64_t *bytes_left);

/* ---- fused programs (jit/fusion.c) ---- */

/* An identifier of the program encoding (opcode set, limits), part of the
 * op-table fingerprint of a plan file. */
uint32_t txc_fused_format(void);
/* Encode `f` into buf (up to cap bytes); returns the size needed (nothing
 * is written when cap is smaller). */
size_t txc_fused_serialize(const txc_fused *f, unsigned char *buf, size_t cap);
/* Decode and validate a program for a node of `n_in` inputs (opcodes,
 * register indices, counts within the limits): a malloc'd program, or NULL
 * when the bytes are not a valid one. Records no error. */
txc_fused *txc_fused_deserialize(const unsigned char *buf, size_t len, int n_in);

#endif
