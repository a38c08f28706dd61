/* Dead-code elimination and memory planning. See jit/graph.h. */
#include "jit/graph.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int txc_pass_dce(txc_graph *g)
{
    /* Mark backwards from the outputs and from in-place writes into input
     * buffers (the donated state the caller sees after the call). */
    bool *live = calloc((size_t)g->n_values + 1, sizeof *live);
    if (!live)
        return 0;
    for (int i = 0; i < g->n_outputs; i++)
        live[g->outputs[i]] = true;
    int removed = 0;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        txc_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        bool side_effect = n->inplace && g->buffers[g->values[n->out].buffer].kind == TXC_BUF_INPUT;
        if (!live[n->out] && !side_effect) {
            n->dead = true;
            removed++;
            continue;
        }
        for (int j = 0; j < n->n_in; j++)
            live[n->in[j]] = true;
    }
    free(live);
    return removed;
}

typedef struct placed {
    int64_t offset, size;
    int first, last;
} placed;

static int by_size_desc(const void *a, const void *b, void *ctx)
{
    const txc_graph *g = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    int64_t sa = g->buffers[ia].numel * (int64_t)txc_dtype_size(g->buffers[ia].dtype);
    int64_t sb = g->buffers[ib].numel * (int64_t)txc_dtype_size(g->buffers[ib].dtype);
    if (sa != sb)
        return sa > sb ? -1 : 1;
    return ia - ib;
}

/* qsort_r is not C11; a small insertion sort keeps this portable (the
 * buffer count is in the thousands at most). */
static void sort_buffers(int *idx, int n, txc_graph *g)
{
    for (int i = 1; i < n; i++) {
        int x = idx[i], j = i - 1;
        while (j >= 0 && by_size_desc(&idx[j], &x, g) > 0) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = x;
    }
}

int64_t txc_plan_memory(txc_graph *g)
{
    for (int b = 0; b < g->n_buffers; b++) {
        g->buffers[b].first_use = INT_MAX;
        g->buffers[b].last_use = -1;
        g->buffers[b].arena_offset = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        txc_buffer *ob = &g->buffers[g->values[n->out].buffer];
        if (i < ob->first_use)
            ob->first_use = i;
        if (i > ob->last_use)
            ob->last_use = i;
        for (int j = 0; j < n->n_in; j++) {
            txc_buffer *ib = &g->buffers[g->values[n->in[j]].buffer];
            if (i > ib->last_use)
                ib->last_use = i;
        }
    }
    /* A linear of the same input as a linear a few nodes before it may run
     * in that one's group (jit.c's find_groups moves it up past the nodes in
     * between): its result lives from the first one's node, so it shares no
     * memory with the first's result or with what the nodes in between read
     * and write. */
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *n = &g->nodes[i];
        if (n->dead || n->is_view || n->op != TXC_OP_LINEAR || n->fused || (n->attrs.flags & TXC_ATTR_RESIDUAL))
            continue;
        for (int k = i + 1, seen = 0; k < g->n_nodes && seen < TXC_GROUP_HOP_MAX + TXC_GROUP_SPAN_MAX; k++) {
            const txc_node *m = &g->nodes[k];
            if (m->dead || m->is_view)
                continue;
            seen++;
            if (m->op != TXC_OP_LINEAR || m->fused || m->in[0] != n->in[0])
                continue;
            txc_buffer *mb = &g->buffers[g->values[m->out].buffer];
            if (i < mb->first_use)
                mb->first_use = i;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) /* outputs live until the next call */
        g->buffers[g->values[g->outputs[i]].buffer].last_use = INT_MAX;

    int n = 0;
    int *idx = malloc(sizeof(int) * (size_t)(g->n_buffers + 1));
    placed *done = malloc(sizeof(placed) * (size_t)(g->n_buffers + 1));
    if (!idx || !done) {
        free(idx);
        free(done);
        txc_error(TXC_ERR_NOMEM, "out of memory (memory planning)");
        return -1;
    }
    for (int b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].kind == TXC_BUF_TEMP && g->buffers[b].first_use != INT_MAX)
            idx[n++] = b;
    sort_buffers(idx, n, g);
    int n_done = 0;
    int64_t arena = 0;
    for (int k = 0; k < n; k++) {
        txc_buffer *b = &g->buffers[idx[k]];
        int64_t size = (b->numel * (int64_t)txc_dtype_size(b->dtype) + 63) & ~(int64_t)63;
        if (size == 0)
            size = 64;
        /* lowest offset that overlaps no live-range-overlapping block */
        int64_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int j = 0; j < n_done; j++) {
                const placed *p = &done[j];
                bool time = !(p->last < b->first_use || b->last_use < p->first);
                bool space = off < p->offset + p->size && p->offset < off + size;
                if (time && space) {
                    off = p->offset + p->size;
                    moved = true;
                }
            }
        }
        b->arena_offset = off;
        done[n_done++] = (placed){off, size, b->first_use, b->last_use};
        if (off + size > arena)
            arena = off + size;
    }
    free(idx);
    free(done);
    return arena;
}
