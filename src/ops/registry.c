/* The op table; see ops/registry.h. */
#include "ops/registry.h"

#include <assert.h>
#include <pthread.h>

static const char *const op_names[] = {
    "aten::full", "aten::arange",
    "aten::view", "aten::permute", "aten::slice", "aten::select", "aten::expand",
    "aten::unsqueeze", "aten::squeeze",
    "aten::_to_copy",
    "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::pow", "aten::maximum",
    "aten::minimum", "aten::rsub",
    "aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
    "aten::logical_and",
    "aten::neg", "aten::abs", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt",
    "aten::sin", "aten::cos", "aten::tanh", "aten::sigmoid", "aten::silu", "aten::gelu",
    "aten::relu", "aten::logical_not",
    "aten::where", "aten::masked_fill",
    "aten::sum", "aten::mean", "aten::max", "aten::argmax", "aten::_softmax", "aten::_log_softmax",
    "aten::matmul", "aten::linear", "aten::embedding", "aten::rms_norm", "aten::layer_norm",
    "aten::cat", "aten::stack", "aten::index_select", "aten::index_copy", "aten::tril",
    "aten::triu", "aten::scaled_dot_product_attention", "txc::causal_attention", "txc::rotary_embedding",
    "txc::rng_uniform", "txc::rng_advance", "txc::sample",
    "_c10d_functional::all_reduce", "_c10d_functional::all_gather_into_tensor",
    "_c10d_functional::reduce_scatter_tensor", "_c10d_functional::broadcast", "txc::vocab_parallel_embedding",
    "aten::logical_or", "aten::cumsum", "aten::bitwise_and", "aten::bitwise_or",
};
_Static_assert(sizeof op_names / sizeof op_names[0] == TXC_OP_COUNT,
               "every op needs a name: update op_names with txc_op_id");

static txc_op_def table[TXC_OP_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_table(void)
{
    txc_ops_register_views(table);
    txc_ops_register_elementwise(table);
    txc_ops_register_reduce(table);
    txc_ops_register_linalg(table);
    txc_ops_register_nn(table);
    txc_ops_register_attention(table);
    txc_ops_register_sample(table);
    txc_ops_register_collective(table);
    txc_ops_register_scan(table);
    for (int i = 0; i < TXC_OP_COUNT; i++)
        table[i].name = op_names[i];
}

const txc_op_def *txc_op_get(txc_op_id id)
{
    pthread_once(&once, init_table);
    return (unsigned)id < TXC_OP_COUNT ? &table[id] : NULL;
}

const char *txc_op_name(txc_op_id id) { return (unsigned)id < TXC_OP_COUNT ? op_names[id] : "aten::?"; }
