/*
 * txc/env.h — the environment: where every op goes.
 *
 * As in torchax, an environment (txc_env) owns the op table, the default
 * device and the runtime state, and intercepts every op called on its
 * tensors (txc/ops.h): it checks the tensors belong to it, infers the result
 * shape and dtype, and runs the backend kernel (eager mode; issue 3 adds a
 * tracing mode that records instead).
 *
 * Active environment: a per-thread stack. txc_env_enter(env) pushes,
 * txc_env_exit(env) pops (like `with env:`). With nothing entered, the
 * default env (txc_env_default()) is active. An op on tensors of an env that
 * is not active, or on tensors of two envs, fails with TXC_ERR_ENV and a
 * message naming the op and the fix.
 *
 * Scopes: txc_env_scope_begin/end bracket a region whose op results are
 * owned by the scope and released at its end (like an autorelease pool):
 * model code can chain ops without releasing every temporary. Retain what
 * must outlive the scope.
 */
#ifndef TXC_ENV_H
#define TXC_ENV_H

#include <stdint.h>
#include "txc/backend.h"
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txc_env_options {
    txc_device device; /* default device of tensors it creates (TXC_CPU) */
    const char *name;  /* for messages ("default", "env1"...) */
} txc_env_options;

txc_env_options txc_env_default_options(void);

/* A new environment. NULL + TXC_ERR_NOMEM / TXC_ERR_UNSUPPORTED (device). */
txc_env *txc_env_new(const txc_env_options *opts);
/* Free an environment. Its tensors must have been released (they hold a
 * pointer to it). Open scopes are ended. Never free the default env. */
void txc_env_free(txc_env *env);
/* The process-wide default environment (cpu), created on first use. */
txc_env *txc_env_default(void);
/* The active environment of this thread: the top of the stack, else default. */
txc_env *txc_env_active(void);
/* Push/pop the active-env stack. txc_env_exit fails (TXC_ERR_ENV) when
 * `env` is not the top. Stack depth at most 64 (TXC_ERR_CAPACITY). */
txc_status txc_env_enter(txc_env *env);
txc_status txc_env_exit(txc_env *env);

const char *txc_env_name(const txc_env *env);
txc_device txc_env_device(const txc_env *env);

/* Open a scope; returns a mark to pass to txc_env_scope_end (-1 on OOM). */
int txc_env_scope_begin(txc_env *env);
/* Release every tensor the scopes opened since `mark` own, and close them. */
void txc_env_scope_end(txc_env *env, int mark);
/* Hand ownership of `t` to the env's current scope (no-op without one);
 * used by constructors outside ops. Returns t. */
txc_tensor *txc_env_scope_adopt(txc_env *env, txc_tensor *t);

/* Number of ops this env has dispatched (all kinds) since creation. */
uint64_t txc_env_op_count(const txc_env *env);

/* Wrap an array as a tensor of `env` (NULL: the active env), zero copy
 * (torchax's torch_view / env.j2t_iso): the tensor takes its own reference
 * to the array, and txc_tensor_unwrap() gives the very same pointer back.
 * TXC_ERR_ENV when the array's device is not the env's. */
txc_tensor *txc_tensor_wrap(txc_env *env, txc_array *array);
/* A new tensor of `env` (NULL: active) with shape/dtype, filled by copying
 * numel elements of `dtype` from host memory `data` (NULL: zeros). */
txc_tensor *txc_tensor_from_data(txc_env *env, txc_dtype dtype, int ndim, const int64_t *shape,
                                 const void *data);

/* Move a tensor to `device` (torch `.to(device)`): the same tensor, retained,
 * when it is already there (zero copy); else a contiguous copy. Errors:
 * TXC_ERR_UNSUPPORTED when the device is not available in this build. */
txc_tensor *txc_tensor_to(txc_tensor *t, txc_device device);
/* Rewrap a tensor for another env, zero copy (same array, same view), when
 * both envs share the device; a copy otherwise (torchax `tensor.to('jax')`). */
txc_tensor *txc_tensor_to_env(txc_tensor *t, txc_env *env);

#ifdef __cplusplus
}
#endif
#endif
