/* Dispatch: every op on tensors goes through here (torchax's
 * Environment.dispatch). See env/env_impl.h. */
#include "env/env_impl.h"

#include <string.h>

static txc_status check_envs(const char *op, txc_env *env, txc_tensor *const *in, int n_in)
{
    for (int i = 1; i < n_in; i++)
        if (in[i]->env != env)
            return txc_error(TXC_ERR_ENV,
                             "%s: inputs belong to two environments ('%s' and '%s'); move one with "
                             "txc_tensor_to_env() before calling the op",
                             op, env->name, in[i]->env->name);
    txc_env *active = txc_env_active();
    if (env != active)
        return txc_error(TXC_ERR_ENV,
                         "%s: the tensors belong to environment '%s', which is not active (active: '%s'); "
                         "call txc_env_enter() on it first, or move them with txc_tensor_to_env()",
                         op, env->name, active->name);
    for (int i = 0; i < n_in; i++)
        if (!txc_device_equal(txc_tensor_device(in[i]), env->device))
            return txc_error(TXC_ERR_ENV, "%s: input %d is on %s, env '%s' computes on %s; move it with txc_tensor_to()",
                             op, i, txc_device_name(txc_tensor_device(in[i])), env->name,
                             txc_device_name(env->device));
    return TXC_OK;
}

static txc_shard_hook shard_hook; /* set once by the shard layer */
static _Thread_local int shard_map_depth;

void txc_env_set_shard_hook(txc_shard_hook hook) { __atomic_store_n(&shard_hook, hook, __ATOMIC_RELEASE); }
int txc_env_shard_map_depth(void) { return shard_map_depth; }
void txc_env_shard_map_add(int delta) { shard_map_depth += delta; }

static txc_tensor *dispatch(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in, const txc_op_attrs *attrs,
                            bool propagate)
{
    const txc_op_def *def = txc_op_get(op);
    const char *name = txc_op_name(op);
    if (!def || n_in < 0 || n_in > TXC_MAX_OP_INPUTS) {
        txc_error(TXC_ERR_INTERNAL, "%s: bad op call (%d inputs)", name, n_in);
        return NULL;
    }
    for (int i = 0; i < n_in; i++)
        if (!in[i]) {
            /* An earlier op failed: keep its message (the root cause). */
            txc_error(TXC_ERR_INVALID, "%s: input %d is NULL", name, i);
            return NULL;
        }
    if (n_in > 0)
        env = in[0]->env;
    else if (!env)
        env = txc_env_active();
    if (check_envs(name, env, in, n_in) != TXC_OK)
        return NULL;
    /* block-quantized weights (GGUF) are read by linear and embedding only */
    for (int i = 0; i < n_in; i++)
        if (txc_dtype_is_quantized(in[i]->dtype) && op != TXC_OP_LINEAR && op != TXC_OP_EMBEDDING) {
            txc_error(TXC_ERR_UNSUPPORTED, "%s: input %d is a %s (block-quantized) tensor, which only linear and "
                                           "embedding read", name, i, txc_dtype_name(in[i]->dtype));
            return NULL;
        }
    txc_op_attrs zero = {0};
    if (!attrs)
        attrs = &zero;
    if (propagate) /* a sharded input outside shard_map: its sharding rule (shard/rules.c) */
        for (int i = 0; i < n_in; i++)
            if (in[i]->sharding) {
                txc_shard_hook hook = __atomic_load_n(&shard_hook, __ATOMIC_ACQUIRE);
                if (hook && shard_map_depth == 0)
                    return hook(op, env, in, n_in, attrs);
                break;
            }
    env->op_count++;
    if (env->trace_hook) /* tracing: record, do not run */
        return txc_env_scope_adopt(env, env->trace_hook(env->trace_ctx, env, op, in, n_in, attrs));

    if (def->view) {
        txc_view_meta vm;
        if (def->view(in[0], attrs, &vm) != TXC_OK)
            return NULL;
        return txc_env_scope_adopt(env, txc_impl_tensor_new(env, in[0]->array, vm.ndim, vm.shape, vm.strides,
                                                            vm.offset));
    }
    if (!def->infer || !def->cpu) {
        txc_error(TXC_ERR_UNSUPPORTED, "%s: no CPU kernel registered", name);
        return NULL;
    }
    txc_meta m;
    if (def->infer(in, n_in, attrs, &m) != TXC_OK)
        return NULL;

    txc_tensor *out;
    if (attrs->flags & TXC_ATTR_INPLACE) {
        txc_tensor *self = in[0];
        if (!txc_tensor_is_contiguous(self) || txc_storage_is_readonly(self->array->storage)) {
            txc_error(TXC_ERR_INVALID, "%s_: self must be a contiguous, writable tensor", name);
            return NULL;
        }
        out = txc_tensor_retain(self);
    } else {
        txc_array *arr = txc_array_new(env->device, m.dtype, m.ndim, m.shape);
        if (!arr)
            return NULL;
        int64_t strides[TXC_MAX_DIMS];
        txc_impl_contiguous_strides(m.ndim, m.shape, strides);
        out = txc_impl_tensor_new(env, arr, m.ndim, m.shape, strides, 0);
        txc_array_release(arr);
        if (!out)
            return NULL;
    }
    if (def->cpu(out, in, n_in, attrs) != TXC_OK) {
        txc_tensor_release(out);
        return NULL;
    }
    return txc_env_scope_adopt(env, out);
}

txc_tensor *txc_dispatch(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in, const txc_op_attrs *attrs)
{
    return dispatch(op, env, in, n_in, attrs, true);
}

txc_tensor *txc_dispatch_local(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in,
                               const txc_op_attrs *attrs)
{
    return dispatch(op, env, in, n_in, attrs, false);
}
