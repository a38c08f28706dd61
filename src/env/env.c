/* Environments: active stack, scopes, to(device); see include/txc/env.h. */
#include "env/env_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK 64

static txc_env default_env = {.name = "default", .device = {TXC_DEVICE_CPU, 0}};
static _Thread_local txc_env *stack[MAX_STACK];
static _Thread_local int stack_depth;

txc_env_options txc_env_default_options(void) { return (txc_env_options){.device = TXC_CPU, .name = NULL}; }

txc_env *txc_env_new(const txc_env_options *opts)
{
    txc_env_options o = opts ? *opts : txc_env_default_options();
    if (!txc_device_available(o.device)) {
        txc_error(TXC_ERR_UNSUPPORTED, "env: device %s is not available in this build", txc_device_name(o.device));
        return NULL;
    }
    txc_env *env = calloc(1, sizeof *env);
    if (!env) {
        txc_error(TXC_ERR_NOMEM, "out of memory (env)");
        return NULL;
    }
    static int counter; /* (atomic: in-process devices make envs on their threads) */
    if (o.name)
        snprintf(env->name, sizeof env->name, "%s", o.name);
    else
        snprintf(env->name, sizeof env->name, "env%d", __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    env->device = o.device;
    return env;
}

void txc_env_free(txc_env *env)
{
    if (!env || env == &default_env)
        return;
    txc_env_scope_end(env, 0);
    free(env->scope_items);
    free(env->scope_marks);
    free(env);
}

txc_env *txc_env_default(void) { return &default_env; }
txc_env *txc_env_active(void) { return stack_depth > 0 ? stack[stack_depth - 1] : &default_env; }

txc_status txc_env_enter(txc_env *env)
{
    if (stack_depth >= MAX_STACK)
        return txc_error(TXC_ERR_CAPACITY, "env: more than %d nested txc_env_enter", MAX_STACK);
    stack[stack_depth++] = env;
    return TXC_OK;
}

txc_status txc_env_exit(txc_env *env)
{
    if (stack_depth == 0 || stack[stack_depth - 1] != env)
        return txc_error(TXC_ERR_ENV, "env: txc_env_exit('%s') does not match the last txc_env_enter ('%s')",
                         env ? env->name : "(null)", stack_depth ? stack[stack_depth - 1]->name : "none");
    stack_depth--;
    return TXC_OK;
}

const char *txc_env_name(const txc_env *env) { return env->name; }
txc_device txc_env_device(const txc_env *env) { return env->device; }
uint64_t txc_env_op_count(const txc_env *env) { return env->op_count; }

int txc_env_scope_begin(txc_env *env)
{
    if (env->n_scopes == env->cap_scopes) {
        int cap = env->cap_scopes ? env->cap_scopes * 2 : 8;
        size_t *m = realloc(env->scope_marks, sizeof *m * (size_t)cap);
        if (!m) {
            txc_error(TXC_ERR_NOMEM, "out of memory (scope)");
            return -1;
        }
        env->scope_marks = m;
        env->cap_scopes = cap;
    }
    env->scope_marks[env->n_scopes] = env->n_scope_items;
    return env->n_scopes++;
}

void txc_env_scope_end(txc_env *env, int mark)
{
    if (mark < 0 || mark >= env->n_scopes)
        return;
    size_t from = env->scope_marks[mark];
    for (size_t i = env->n_scope_items; i > from; i--)
        txc_tensor_release(env->scope_items[i - 1]);
    env->n_scope_items = from;
    env->n_scopes = mark;
}

txc_tensor *txc_env_scope_adopt(txc_env *env, txc_tensor *t)
{
    if (!t || !env || env->n_scopes == 0)
        return t;
    if (env->n_scope_items == env->cap_scope_items) {
        size_t cap = env->cap_scope_items ? env->cap_scope_items * 2 : 256;
        txc_tensor **items = realloc(env->scope_items, sizeof *items * cap);
        if (!items) {
            txc_error(TXC_ERR_NOMEM, "out of memory (scope)");
            txc_tensor_release(t);
            return NULL;
        }
        env->scope_items = items;
        env->cap_scope_items = cap;
    }
    env->scope_items[env->n_scope_items++] = t;
    return t;
}

txc_tensor *txc_tensor_wrap(txc_env *env, txc_array *array)
{
    if (!array)
        return NULL;
    if (!env)
        env = txc_env_active();
    if (!txc_device_equal(txc_array_device(array), env->device)) {
        txc_error(TXC_ERR_ENV, "wrap: array on %s, env '%s' on %s", txc_device_name(txc_array_device(array)),
                  env->name, txc_device_name(env->device));
        return NULL;
    }
    int64_t strides[TXC_MAX_DIMS];
    txc_impl_contiguous_strides(array->ndim, array->shape, strides);
    return txc_env_scope_adopt(env, txc_impl_tensor_new(env, array, array->ndim, array->shape, strides, 0));
}

txc_tensor *txc_tensor_from_data(txc_env *env, txc_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    if (!env)
        env = txc_env_active();
    txc_array *a = txc_array_new(env->device, dtype, ndim, shape);
    if (!a)
        return NULL;
    if (data)
        memcpy(a->data, data, a->nbytes);
    txc_tensor *t = txc_tensor_wrap(env, a);
    txc_array_release(a);
    return t;
}

txc_tensor *txc_tensor_to(txc_tensor *t, txc_device device)
{
    if (!t)
        return NULL;
    if (!txc_device_available(device)) {
        txc_error(TXC_ERR_UNSUPPORTED, "to: device %s is not available in this build", txc_device_name(device));
        return NULL;
    }
    /* Only the CPU exists in this build, so the tensor is already there. */
    return txc_env_scope_adopt(t->env, txc_tensor_retain(t));
}

txc_tensor *txc_tensor_to_env(txc_tensor *t, txc_env *env)
{
    if (!t || !env)
        return NULL;
    if (!txc_device_equal(txc_tensor_device(t), env->device)) {
        txc_error(TXC_ERR_UNSUPPORTED, "to_env: moving from %s to %s is not available in this build",
                  txc_device_name(txc_tensor_device(t)), txc_device_name(env->device));
        return NULL;
    }
    return txc_env_scope_adopt(env, txc_impl_tensor_new(env, t->array, t->ndim, t->shape, t->strides, t->offset));
}
