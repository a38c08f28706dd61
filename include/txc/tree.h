/*
 * txc/tree.h — flatten/unflatten registry for C structs (JAX pytrees).
 *
 * A compiled call (txc/jit.h) takes and returns flat lists of tensors. A C
 * struct that must cross that boundary — a KV cache, a parameter set —
 * registers a type here: `flatten` lists its tensors (the leaves, in a fixed
 * order, with names for messages) and its static data (aux: plain bytes that
 * become part of the compile cache key, e.g. the number of layers);
 * `unflatten` builds a new object of the type over given leaves (e.g. the
 * traced tensors while compiling, or the outputs of a call). As
 * jax.tree_util.register_pytree_node.
 */
#ifndef TXC_TREE_H
#define TXC_TREE_H

#include <stddef.h>
#include "txc/env.h"
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_TREE_MAX_AUX 256

typedef struct txc_tree_def {
    const char *name; /* unique: "StaticCache", "DynamicCache", "Parameters" */
    /* Write up to `max` leaves (borrowed) to leaves[], their count to *n,
     * and the static data to aux (cap TXC_TREE_MAX_AUX bytes), its length
     * to *aux_len. Errors: TXC_ERR_CAPACITY when max is too small. */
    txc_status (*flatten)(const void *obj, txc_tensor **leaves, int max, int *n, void *aux, size_t *aux_len);
    /* A new object over `leaves` (n of them; the object takes references),
     * or NULL with an error. */
    void *(*unflatten)(const void *aux, size_t aux_len, txc_tensor *const *leaves, int n, txc_env *env);
    /* Free an object made by unflatten. */
    void (*free)(void *obj);
    /* Name of leaf i ("key_cache[3]") into buf; may be NULL. */
    void (*leaf_name)(const void *aux, size_t aux_len, int i, char *buf, size_t cap);
} txc_tree_def;

/* Register a type (the definition must outlive the process). Registering
 * the same definition twice is a no-op; another one under a taken name is
 * TXC_ERR_INVALID. At most 64 types (TXC_ERR_CAPACITY). Thread-safe. */
txc_status txc_tree_register(const txc_tree_def *def);
/* The registered type called `name`, or NULL (no error recorded). */
const txc_tree_def *txc_tree_find(const char *name);

/* Flatten `obj` of registered type `type` (errors: TXC_ERR_INVALID for an
 * unknown type, and the type's own). */
txc_status txc_tree_flatten(const char *type, const void *obj, txc_tensor **leaves, int max, int *n, void *aux,
                            size_t *aux_len);
/* Unflatten to a new object of `type`; free it with txc_tree_free. */
void *txc_tree_unflatten(const char *type, const void *aux, size_t aux_len, txc_tensor *const *leaves, int n,
                         txc_env *env);
void txc_tree_free(const char *type, void *obj);

#ifdef __cplusplus
}
#endif
#endif
