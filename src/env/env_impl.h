/* env/env_impl.h — the environment's state, and dispatch (internal). */
#ifndef TXC_ENV_IMPL_H
#define TXC_ENV_IMPL_H

#include "core/impl.h"
#include "ops/registry.h"
#include "txc/env.h"

/* A tracing hook (installed by the jit layer): records an op call instead
 * of running it and returns the traced result tensor (owned by the caller
 * as a dispatch result is). */
typedef txc_tensor *(*txc_trace_hook)(void *ctx, txc_env *env, txc_op_id op, txc_tensor *const *in, int n_in,
                                      const txc_op_attrs *attrs);

struct txc_env {
    char name[64];
    txc_device device;
    uint64_t op_count;
    /* scopes: tensors owned by open scopes, and where each scope starts */
    txc_tensor **scope_items;
    size_t n_scope_items, cap_scope_items;
    size_t *scope_marks;
    int n_scopes, cap_scopes;
    /* tracing mode: non-NULL while a jit traces a function in this env */
    txc_trace_hook trace_hook;
    void *trace_ctx;
};

/* Sharding propagation (installed by the shard layer, shard/rules.c, when
 * the first NamedSharding is made): runs an op call one of whose inputs
 * carries a sharding, outside a shard_map body — the rule of the op for
 * the specs it meets, its local ops through txc_dispatch_local — and sets
 * the result's sharding. Same contract as txc_dispatch. */
typedef txc_tensor *(*txc_shard_hook)(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in,
                                      const txc_op_attrs *attrs);
void txc_env_set_shard_hook(txc_shard_hook hook);
/* Depth of txc_shard_map_begin on the calling thread (0: propagation on). */
int txc_env_shard_map_depth(void);
void txc_env_shard_map_add(int delta);

/* Run op `op` on `in` (n_in tensors) with `attrs` in the inputs' env (or
 * `env` for ops without tensor inputs; NULL = active). Checks envs and
 * devices, infers, allocates, runs the kernel, hands the result to the open
 * scope. NULL on error (message names the op). */
txc_tensor *txc_dispatch(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in,
                         const txc_op_attrs *attrs);
/* txc_dispatch without sharding propagation: the op on the local tensors
 * as they are, the result without a sharding (shard_map semantics; what
 * the rules call for their local steps). */
txc_tensor *txc_dispatch_local(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in,
                               const txc_op_attrs *attrs);

#endif
