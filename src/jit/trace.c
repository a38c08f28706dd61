/* Tracing: the env's hook records each op call into the graph instead of
 * running it (see jit/graph.h, env/env_impl.h). */
#include "jit/trace.h"

#include <string.h>

/* A traced tensor for value `v`: the value's geometry over the graph's
 * zero-size placeholder array (it has no data). */
txc_tensor *txc_trace_tensor(txc_graph *g, txc_env *env, int v)
{
    const txc_value *x = &g->values[v];
    txc_tensor *t = txc_impl_tensor_new(env, g->placeholder, x->ndim, x->shape, x->strides, x->offset);
    if (t) {
        t->dtype = x->dtype;
        t->value = v;
    }
    return t;
}

/* The value of an op input: a traced tensor's own, or — for a concrete
 * tensor the function reads without taking it as an input (a module
 * buffer) — a constant capturing it (once per tensor). */
static int value_of(txc_trace *tr, txc_tensor *t)
{
    if (t->value >= 0)
        return t->value;
    for (int i = 0; i < tr->n_captured; i++)
        if (tr->captured[i].tensor == t)
            return tr->captured[i].value;
    if (tr->n_captured == TXC_TRACE_MAX_CAPTURES) {
        txc_error(TXC_ERR_CAPACITY, "jit: the traced function reads more than %d tensors that are not its inputs",
                  TXC_TRACE_MAX_CAPTURES);
        return -1;
    }
    txc_graph *g = tr->graph;
    int b = txc_graph_add_buffer(g, TXC_BUF_CONST, t->dtype, t->array->numel);
    if (b < 0)
        return -1;
    g->buffers[b].konst = txc_tensor_retain(t);
    txc_value v = {.dtype = t->dtype, .ndim = t->ndim, .offset = t->offset, .buffer = b, .producer = -1};
    memcpy(v.shape, t->shape, sizeof v.shape);
    memcpy(v.strides, t->strides, sizeof v.strides);
    int id = txc_graph_add_value(g, &v);
    if (id >= 0) {
        tr->captured[tr->n_captured].tensor = t;
        tr->captured[tr->n_captured++].value = id;
    }
    return id;
}

txc_tensor *txc_trace_record(void *ctx, txc_env *env, txc_op_id op, txc_tensor *const *in, int n_in,
                             const txc_op_attrs *a)
{
    txc_trace *tr = ctx;
    txc_graph *g = tr->graph;
    const txc_op_def *def = txc_op_get(op);
    int ids[TXC_MAX_OP_INPUTS];
    for (int i = 0; i < n_in; i++)
        if ((ids[i] = value_of(tr, in[i])) < 0)
            return NULL;

    txc_value out = {.producer = g->n_nodes};
    if (def->view) {
        txc_view_meta vm;
        if (def->view(in[0], a, &vm) != TXC_OK)
            return NULL;
        const txc_value *base = &g->values[ids[0]];
        out.dtype = base->dtype;
        out.ndim = vm.ndim;
        memcpy(out.shape, vm.shape, sizeof out.shape);
        memcpy(out.strides, vm.strides, sizeof out.strides);
        out.offset = vm.offset;
        out.buffer = base->buffer;
    } else {
        if (!def->infer || !def->cpu) {
            txc_error(TXC_ERR_UNSUPPORTED, "%s: no CPU kernel registered", txc_op_name(op));
            return NULL;
        }
        txc_meta m;
        if (def->infer(in, n_in, a, &m) != TXC_OK)
            return NULL;
        if (a->flags & TXC_ATTR_INPLACE) { /* a new version of in[0], same bytes */
            const txc_value *self = &g->values[ids[0]];
            if (g->buffers[self->buffer].kind == TXC_BUF_CONST) {
                txc_error(TXC_ERR_INVALID, "%s_: the traced function writes in place into a tensor that is not "
                                           "one of its inputs; pass it as an input", txc_op_name(op));
                return NULL;
            }
            out = *self;
            out.producer = g->n_nodes;
        } else {
            out.dtype = m.dtype;
            out.ndim = m.ndim;
            memcpy(out.shape, m.shape, sizeof out.shape);
            txc_impl_contiguous_strides(m.ndim, m.shape, out.strides);
            out.offset = 0;
            out.buffer = txc_graph_add_buffer(g, TXC_BUF_TEMP, m.dtype, txc_shape_numel(m.ndim, m.shape));
            if (out.buffer < 0)
                return NULL;
        }
    }
    int vid = txc_graph_add_value(g, &out);
    if (vid < 0)
        return NULL;
    int nid = txc_graph_add_node(g, op, ids, n_in, vid, a);
    if (nid < 0)
        return NULL;
    g->nodes[nid].is_view = def->view != NULL;
    g->nodes[nid].inplace = (a->flags & TXC_ATTR_INPLACE) != 0;
    if (g->nodes[nid].inplace) {
        /* The caller's tensor object now stands for the new version. */
        in[0]->value = vid;
        return txc_tensor_retain(in[0]);
    }
    return txc_trace_tensor(g, env, vid);
}
