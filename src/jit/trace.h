/* jit/trace.h — the tracing hook (internal). */
#ifndef TXC_JIT_TRACE_H
#define TXC_JIT_TRACE_H

#include "env/env_impl.h"
#include "jit/graph.h"

#define TXC_TRACE_MAX_CAPTURES 256

typedef struct txc_trace {
    txc_graph *graph;
    struct {
        txc_tensor *tensor;
        int value;
    } captured[TXC_TRACE_MAX_CAPTURES];
    int n_captured;
} txc_trace;

/* A traced tensor standing for value `v` of `g`. */
txc_tensor *txc_trace_tensor(txc_graph *g, txc_env *env, int v);
/* The env hook (env->trace_hook with env->trace_ctx = a txc_trace). */
txc_tensor *txc_trace_record(void *ctx, txc_env *env, txc_op_id op, txc_tensor *const *in, int n_in,
                             const txc_op_attrs *a);

#endif
