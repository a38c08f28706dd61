/* Graph passes: common subexpressions, constant folding, elementwise
 * fusion. See jit/graph.h. */
#include "jit/graph.h"

int txc_pass_cse(txc_graph *g)
{
    (void)g;
    return 0;
}

int txc_pass_fold(txc_graph *g, txc_env *env)
{
    (void)g;
    (void)env;
    return 0;
}

int txc_pass_fuse(txc_graph *g)
{
    (void)g;
    return 0;
}

txc_status txc_fused_run(const txc_fused *f, txc_tensor *out, txc_tensor *const *in, int n_in)
{
    (void)f;
    (void)out;
    (void)in;
    (void)n_in;
    return txc_error(TXC_ERR_INTERNAL, "fused kernels are not built yet");
}
