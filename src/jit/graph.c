/* The traced graph: construction and printing. See jit/graph.h. */
#include "jit/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

txc_graph *txc_graph_new(void)
{
    txc_graph *g = calloc(1, sizeof *g);
    if (!g) {
        txc_error(TXC_ERR_NOMEM, "out of memory (graph)");
        return NULL;
    }
    int64_t zero = 0;
    g->placeholder = txc_array_new(TXC_CPU, TXC_F32, 1, &zero);
    if (!g->placeholder) {
        free(g);
        return NULL;
    }
    return g;
}

void txc_graph_free(txc_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].in);
        free(g->nodes[i].fused);
    }
    for (int i = 0; i < g->n_buffers; i++)
        txc_tensor_release(g->buffers[i].konst);
    free(g->values);
    free(g->nodes);
    free(g->buffers);
    free(g->inputs);
    free(g->outputs);
    txc_array_release(g->placeholder);
    free(g);
}

/* Grow *arr (element size `es`) to hold one more; false on OOM. */
static bool grow(void **arr, int *cap, int n, size_t es)
{
    if (n < *cap)
        return true;
    int c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, es * (size_t)c);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory (graph)");
        return false;
    }
    *arr = p;
    *cap = c;
    return true;
}

int txc_graph_add_value(txc_graph *g, const txc_value *v)
{
    if (!grow((void **)&g->values, &g->cap_values, g->n_values, sizeof *g->values))
        return -1;
    g->values[g->n_values] = *v;
    return g->n_values++;
}

int txc_graph_add_node(txc_graph *g, txc_op_id op, const int *in, int n_in, int out, const txc_op_attrs *a)
{
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof *g->nodes))
        return -1;
    txc_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->in = malloc(sizeof(int) * (size_t)(n_in > 0 ? n_in : 1));
    if (!n->in) {
        txc_error(TXC_ERR_NOMEM, "out of memory (graph)");
        return -1;
    }
    if (n_in > 0)
        memcpy(n->in, in, sizeof(int) * (size_t)n_in);
    n->op = op;
    n->n_in = n_in;
    n->out = out;
    n->attrs = *a;
    return g->n_nodes++;
}

bool txc_value_is_contiguous(const txc_value *v)
{
    int64_t st[TXC_MAX_DIMS];
    txc_impl_contiguous_strides(v->ndim, v->shape, st);
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] != 1 && v->strides[d] != st[d])
            return false;
    return true;
}

int txc_graph_add_buffer(txc_graph *g, txc_buffer_kind kind, txc_dtype dtype, int64_t numel)
{
    if (!grow((void **)&g->buffers, &g->cap_buffers, g->n_buffers, sizeof *g->buffers))
        return -1;
    txc_buffer *b = &g->buffers[g->n_buffers];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->dtype = dtype;
    b->numel = numel;
    b->input = -1;
    b->arena_offset = -1;
    b->first_use = b->last_use = -1;
    return g->n_buffers++;
}

static void dump_value(const txc_graph *g, int v, FILE *f)
{
    const txc_value *x = &g->values[v];
    fprintf(f, "%%%d:%s[", v, txc_dtype_name(x->dtype));
    for (int i = 0; i < x->ndim; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)x->shape[i]);
    fprintf(f, "]");
}

void txc_graph_dump(const txc_graph *g, FILE *f)
{
    static const char *const kinds[] = {"input", "const", "temp"};
    fprintf(f, "graph: %d inputs, %d outputs, %d nodes, %d buffers\n", g->n_inputs, g->n_outputs, g->n_nodes,
            g->n_buffers);
    for (int i = 0; i < g->n_inputs; i++) {
        fprintf(f, "  input %d: ", i);
        dump_value(g, g->inputs[i], f);
        fprintf(f, "\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        fprintf(f, "  ");
        dump_value(g, n->out, f);
        fprintf(f, " = %s%s%s(", n->fused ? "fused:" : "", txc_op_name(n->op), n->inplace ? "_" : "");
        for (int j = 0; j < n->n_in; j++) {
            fprintf(f, "%s%%%d", j ? ", " : "", n->in[j]);
        }
        const txc_buffer *b = &g->buffers[g->values[n->out].buffer];
        fprintf(f, ")%s  [%s buf %d]\n", n->is_view ? " view" : "", kinds[b->kind], g->values[n->out].buffer);
    }
    fprintf(f, "  return");
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, " %%%d", g->outputs[i]);
    fprintf(f, "\n");
}
