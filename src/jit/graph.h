/*
 * jit/graph.h — the traced graph (IR) and the compiled plan (internal).
 *
 * Tracing (env in trace mode, src/env/dispatch.c) records every op call as
 * a node over values. A value is one tensor: its dtype, shape and strides
 * (static: they are part of the plan's signature), and where its bytes
 * live — a buffer, at an element offset. Buffers are of three kinds:
 *   INPUT  bound to a caller's array at each call (weights, caches, ids);
 *   CONST  a concrete tensor captured while tracing (e.g. RoPE's inv_freq),
 *          or the folded result of a shape-only computation;
 *   TEMP   produced by a node; placed in the plan's arena by the memory
 *          planner (several TEMP buffers share bytes when their lifetimes
 *          do not overlap).
 * A view op's value aliases its input's buffer (no node runs); an in-place
 * op's value is a new version of its input, in the same buffer (donation).
 *
 * Passes (src/jit/passes.c) rewrite the node list; the planner assigns
 * arena offsets; the executor (src/jit/exec.c) runs the plan with no heap
 * allocation per call.
 */
#ifndef TXC_JIT_GRAPH_H
#define TXC_JIT_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "core/impl.h"
#include "ops/registry.h"

typedef enum txc_buffer_kind { TXC_BUF_INPUT, TXC_BUF_CONST, TXC_BUF_TEMP } txc_buffer_kind;

typedef struct txc_buffer {
    txc_buffer_kind kind;
    txc_dtype dtype;
    int64_t numel;     /* elements (TEMP: the producing node's output size) */
    int input;         /* INPUT: index of the graph input */
    txc_tensor *konst; /* CONST: the captured tensor (one reference) */
    int64_t arena_offset; /* TEMP: byte offset in the arena (planner), -1 before */
    int first_use, last_use; /* TEMP: node indices of its live range (planner) */
} txc_buffer;

typedef struct txc_value {
    txc_dtype dtype;
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    int64_t strides[TXC_MAX_DIMS];
    int64_t offset; /* elements from the start of the buffer's array */
    int buffer;
    int producer;   /* node index, -1 for inputs / constants */
} txc_value;

/* A fused chain of elementwise ops (jit/fusion.c). */
typedef struct txc_fused txc_fused;

typedef struct txc_node {
    txc_op_id op;
    int n_in;
    int *in;        /* value ids (n_in) */
    int out;        /* value id */
    txc_op_attrs attrs;
    bool is_view;   /* no kernel: out aliases in[0]'s buffer */
    bool inplace;   /* writes in[0]'s buffer (out is its new version) */
    bool dead;      /* removed by a pass */
    txc_fused *fused; /* non-NULL: run the fused program instead of op */
} txc_node;

typedef struct txc_graph {
    txc_value *values;
    int n_values, cap_values;
    txc_node *nodes;
    int n_nodes, cap_nodes;
    txc_buffer *buffers;
    int n_buffers, cap_buffers;
    int *inputs;  /* value id of each graph input */
    int n_inputs;
    int *outputs; /* value ids returned */
    int n_outputs;
    txc_array *placeholder; /* zero-size array traced tensors point at */
} txc_graph;

txc_graph *txc_graph_new(void);
void txc_graph_free(txc_graph *g);
/* Append a value / node / buffer; return its index or -1 (TXC_ERR_NOMEM). */
int txc_graph_add_value(txc_graph *g, const txc_value *v);
int txc_graph_add_node(txc_graph *g, txc_op_id op, const int *in, int n_in, int out, const txc_op_attrs *a);
int txc_graph_add_buffer(txc_graph *g, txc_buffer_kind kind, txc_dtype dtype, int64_t numel);
/* Whether the value's strides are the contiguous ones of its shape (size-1
 * dims may have any stride). */
bool txc_value_is_contiguous(const txc_value *v);
/* Print the graph (debugging, and the tests of the passes). */
void txc_graph_dump(const txc_graph *g, FILE *f);

/* Run a fused node: out = program(ins). */
txc_status txc_fused_run(const txc_fused *f, txc_tensor *out, txc_tensor *const *in, int n_in);

/* ---- passes (jit/passes.c); each returns the number of nodes changed ---- */

/* Dead-code elimination: drop nodes whose values reach no output, keeping
 * in-place writes to INPUT buffers (side effects on donated state). */
int txc_pass_dce(txc_graph *g);
/* Common-subexpression elimination: a node with the same op, attrs and
 * inputs as an earlier one reuses its value (in-place nodes never merge). */
int txc_pass_cse(txc_graph *g);
/* Constant folding of shape-only computations: nodes whose inputs are all
 * constants (arange, full, views and elementwise ops of them) are run at
 * compile time and become CONST buffers. */
int txc_pass_fold(txc_graph *g, txc_env *env);
/* Elementwise fusion: chains of float32 elementwise ops whose
 * intermediates have one consumer become one node running a fused program. */
int txc_pass_fuse(txc_graph *g);
/* Pattern rewrites (jit/patterns.c): transformers' decomposed LlamaRMSNorm
 * (to(float32), pow, mean, add eps, rsqrt, mul, to(dtype), mul weight)
 * becomes one aten::rms_norm node, apply_rotary_pos_emb's x * cos +
 * rotate_half(x) * sin one txc::rotary_embedding node; the pattern's last
 * node keeps its value and becomes the kernel, the others die. Returns the
 * number of nodes removed. */
int txc_pass_patterns(txc_graph *g);
/* Whether node `root` of the traced graph `traced` (before any pass) is the
 * last node of a pattern that txc_pass_patterns rewrites into n's op and
 * attributes (the compile cache's loader: a rewritten node read from a
 * file must be one the pass would make; its inputs may differ by CSE). */
bool txc_pattern_check(const txc_graph *traced, int root, const txc_node *n);
/* Residual adds into the linear before them: add(linear(...), r) becomes
 * one linear node with TXC_ATTR_RESIDUAL (r added after the bias, the
 * same bits), when the linear's result has no other reader and r is
 * ready, of the same shape and of the result's dtype (float32, or
 * bfloat16/float16, where the linear rounds its result before adding as
 * the separate ops do). */
int txc_pass_residual(txc_graph *g);
/* Memory planning: live ranges of TEMP buffers, first-fit offsets in one
 * arena (64-byte aligned); returns the arena size in bytes. */
int64_t txc_plan_memory(txc_graph *g);
/* Sibling linears (one input) group in the plan when they are at most
 * TXC_GROUP_HOP_MAX executed nodes past the group's last member and
 * commute with the nodes in between (jit.c); the memory plan keeps the
 * results of linears of one input within TXC_GROUP_HOP_MAX +
 * TXC_GROUP_SPAN_MAX executed nodes of each other apart. */
#define TXC_GROUP_HOP_MAX 4
#define TXC_GROUP_SPAN_MAX 8

#endif
