/*
 * Tensor parallelism of the decoder family (Megatron-LM's layout, as
 * Hugging Face's base_model_tp_plan writes it): q/k/v and gate/up
 * "colwise" (each rank its block of output rows: its heads, its share of
 * the intermediate), o and down "rowwise" (each rank its block of input
 * columns: a partial sum, then an all_reduce, then the bias once), the
 * embedding vocab-parallel (its rows of the vocabulary; other ids give
 * zeros, an all_reduce sums) and lm_head colwise over the vocabulary, then
 * gathered ("colwise_rep"). The KV cache holds this rank's kv heads.
 * Where the size is a multiple of num_key_value_heads but larger, each kv
 * head is replicated on size / num_key_value_heads ranks (vLLM's
 * QKVParallelLinear): a rank's query heads all read one kv head, whose k/v
 * rows it loads whole (those parameters carry no NamedSharding: they are
 * not one block of a split).
 *
 * Each rank reads only its slices of the file: a colwise weight's rows are
 * one contiguous range of the mapping (zero copy), a rowwise weight's
 * columns are copied out row by row into read-only anonymous memory of
 * the slice's exact size (and the tensor's pages of the mapping dropped
 * again: otherwise every rank's RSS keeps all of o and down). Norms and
 * o/down biases are replicated. Phi-3's fused qkv_proj / gate_up_proj are split block by
 * block (this rank's q rows, k rows, v rows: three zero-copy ranges, three
 * parameters), so the forward runs the unfused path. Where vocab_size
 * does not divide by the size, the embedding and lm_head are replicated (no
 * gather).
 *
 * GPT-2's Conv1D stores its weights (in, out), the transpose of
 * nn.Linear's: a colwise split (c_attn, c_fc) takes columns, a rowwise one
 * (attn.c_proj, mlp.c_proj) rows (txc_tp_conv1d_split). Its fused c_attn
 * (hidden, 3 * hidden) and bias (3 * hidden) are split per q | k | v block,
 * so a rank holds its heads' q, k and v (vLLM's GPT2Attention: a
 * QKVParallelLinear c_attn, RowParallelLinear c_proj; transformers'
 * GPT2Config has no base_model_tp_plan). GPT-2 has as many kv heads as
 * heads: they always split.
 */
#include "models/model_impl.h"
#include "txc/shard.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

txc_status txc_model_tp_check(const txc_hf_config *c, int64_t n)
{
    if (!c || n < 1)
        return txc_error(TXC_ERR_INVALID, "tensor parallelism: a config and a size >= 1");
    if (n == 1)
        return TXC_OK;
    const int64_t H = c->num_attention_heads, KV = c->num_key_value_heads, I = c->intermediate_size;
    /* a size works when it divides the heads and the intermediate size, and divides the kv heads or is a
     * multiple of them (replicated kv heads) */
#define TP_SIZE_WORKS(t) (H % (t) == 0 && I % (t) == 0 && KV > 0 && (KV % (t) == 0 || (t) % KV == 0))
    const char *bad = NULL;
    int64_t v = 0;
    if (H % n)
        bad = "num_attention_heads", v = H;
    else if (I % n)
        bad = "intermediate_size", v = I;
    else if (!TP_SIZE_WORKS(n))
        bad = "num_key_value_heads", v = KV;
    if (bad) {
        char ok[128];
        size_t o = 0;
        ok[0] = 0;
        for (int64_t t = 1; t <= 64 && o < sizeof ok; t++)
            if (TP_SIZE_WORKS(t))
                o += (size_t)snprintf(ok + o, sizeof ok - o, "%s%lld", o ? ", " : "", (long long)t);
        return txc_error(TXC_ERR_INVALID, "--tp %lld: %s %lld does not divide by %lld%s (tensor-parallel sizes that "
                                          "work: %s)",
                         (long long)n, bad, (long long)v, (long long)n,
                         v == KV && strcmp(bad, "num_key_value_heads") == 0 ? " nor is the size a multiple of it" : "", ok);
    }
#undef TP_SIZE_WORKS
    return TXC_OK;
}

txc_status txc_tp_setup(txc_model *m, txc_mesh *mesh)
{
    m->tp_size = 1;
    m->kv_rep = 1;
    if (!mesh)
        return TXC_OK;
    int64_t n = txc_mesh_axis_size(mesh, "tp");
    if (n < 1)
        return txc_error(TXC_ERR_INVALID, "tensor parallelism: the mesh has no axis 'tp'");
    m->tp_mesh = mesh;
    m->tp_size = n;
    m->tp_rank = txc_mesh_axis_index(mesh, "tp");
    if (n == 1)
        return TXC_OK;
    const txc_hf_config *c = &m->config;
    txc_status s = txc_model_tp_check(c, n);
    if (s != TXC_OK)
        return s;
    const int64_t KV = c->num_key_value_heads;
    m->kv_rep = KV % n == 0 ? 1 : n / KV;
    m->tp_global_kv_heads = KV; /* (the k/v blocks of TP_KV_ROWS, during the load) */
    m->vocab_split = c->vocab_size % n == 0;
    m->vocab_off = m->vocab_split ? m->tp_rank * (c->vocab_size / n) : 0;
    if (!(m->sh_rows = txc_named_sharding(mesh, TXC_P("tp", NULL))) ||
        !(m->sh_cols = txc_named_sharding(mesh, TXC_P(NULL, "tp"))) ||
        !(m->sh_vec = txc_named_sharding(mesh, TXC_P("tp"))))
        return txc_last_status();
    return TXC_OK;
}

int txc_tp_split(const txc_model *m, int role, bool global)
{
    if (m->tp_size <= 1)
        return TP_REPLICATED;
    if (global)
        return (role == G_EMBED || role == G_LM_HEAD) && m->vocab_split ? TP_ROWS : TP_REPLICATED;
    switch (role) {
    case L_K: case L_V: case L_K_BIAS: case L_V_BIAS:
        return m->kv_rep > 1 ? TP_KV_ROWS : TP_ROWS;
    case L_Q: case L_GATE: case L_UP: case L_FC:
    case L_Q_BIAS: case L_GATE_BIAS: case L_UP_BIAS: case L_FC_BIAS:
        return TP_ROWS;
    case L_O: case L_DOWN:
        return TP_COLS;
    default:
        return TP_REPLICATED;
    }
}

int64_t txc_tp_blocks(const txc_model *m, int split)
{
    return split == TP_KV_ROWS ? m->tp_global_kv_heads : m->tp_size;
}

/* This rank's block of a split: its index (of txc_tp_blocks). */
static int64_t tp_block(const txc_model *m, int split)
{
    return split == TP_KV_ROWS ? m->tp_rank / m->kv_rep : m->tp_rank;
}

/* An anonymous storage's copy done: read-only (another kind: left as is). */
static void seal(txc_array *a)
{
    txc_storage *s = txc_array_storage(a);
    if (txc_storage_get_kind(s) == TXC_STORAGE_ANON)
        (void)txc_storage_seal(s);
}

/* The array of a rowwise slice's copied columns: anonymous memory of the
 * slice's exact size (txc_array_new rounds an array of 2 MiB or more up to
 * whole 2 MiB and zeroes the tail: over Qwen2.5-0.5B's 24 down_proj slices
 * of 4.2 MiB at tp 2 that was 44 MiB of every rank's RSS), with
 * madvise(MADV_HUGEPAGE) asked for its whole 2 MiB blocks only (a huge page
 * over the tail would be the same waste); a kernel that refuses keeps small
 * pages. Sealed read-only after the copy (seal), as the weights
 * copy is. */
static txc_array *cols_array(const txc_model *m, txc_dtype dtype, int ndim, const int64_t *shape)
{
    txc_device dev = txc_env_device(m->env);
    if (dev.type != TXC_DEVICE_CPU)
        return txc_array_new(dev, dtype, ndim, shape);
    size_t nbytes = txc_dtype_size(dtype);
    for (int d = 0; d < ndim; d++)
        nbytes *= (size_t)shape[d];
    txc_storage *s = txc_storage_new_anon(nbytes ? nbytes : 1, false);
    if (!s)
        return NULL;
#ifdef MADV_HUGEPAGE
    const size_t huge = (size_t)2 << 20, whole = nbytes & ~(huge - 1); /* the base is 2 MiB-aligned */
    if (whole)
        (void)madvise(txc_storage_data(s), whole, MADV_HUGEPAGE); /* refused: small pages */
#endif
    txc_array *a = txc_array_from_storage(s, 0, dtype, ndim, shape);
    txc_storage_release(s); /* the array holds it */
    return a;
}

txc_status txc_tp_slice(const txc_model *m, const txc_st_tensor *t, int split, txc_array **out)
{
    *out = NULL;
    const int64_t n = txc_tp_blocks(m, split), r = tp_block(m, split);
    if (txc_dtype_is_quantized(t->dtype))
        return txc_error(TXC_ERR_UNSUPPORTED, "--tp: tensor '%s' is %s; tensor parallelism reads float weights "
                                              "(safetensors)", t->name, txc_dtype_name(t->dtype));
    const int dim = split == TP_COLS ? 1 : 0;
    if (t->ndim <= dim || t->shape[dim] % n)
        return txc_error(TXC_ERR_FORMAT, "--tp %lld: tensor '%s' dim %d does not divide by %lld", (long long)n,
                         t->name, dim, (long long)n);
    const size_t es = txc_dtype_size(t->dtype);
    int64_t shape[TXC_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[dim] /= n;
    if (split != TP_COLS) {
        size_t row = es, skip;
        for (int d = 1; d < t->ndim; d++)
            row *= (size_t)t->shape[d];
        skip = (size_t)(r * shape[0]) * row;
        if (t->aligned) /* a contiguous range of the mapping: zero copy */
            *out = txc_array_from_storage(t->storage, t->byte_offset + skip, t->dtype, t->ndim, shape);
        else if ((*out = txc_array_new(txc_env_device(m->env), t->dtype, t->ndim, shape)))
            memcpy(txc_array_data(*out), (const char *)t->data + skip, (size_t)shape[0] * row);
    } else { /* columns [r*K/n, (r+1)*K/n) of every row: copied */
        if ((*out = cols_array(m, t->dtype, t->ndim, shape))) {
            const size_t part = (size_t)shape[1] * es, full = (size_t)t->shape[1] * es;
            char *dst = txc_array_data(*out);
            const char *src = (const char *)t->data + (size_t)r * part;
            for (int64_t i = 0; i < t->shape[0]; i++)
                memcpy(dst + (size_t)i * part, src + (size_t)i * full, part);
            txc_impl_drop_mapped_pages(t->data, t->nbytes); /* every row's pages were read */
            seal(*out);
        }
    }
    return *out ? TXC_OK : txc_last_status();
}

txc_status txc_tp_slice_part(const txc_model *m, const txc_st_tensor *t, int64_t off, int64_t len, int split,
                             txc_array **out)
{
    *out = NULL;
    const int64_t n = txc_tp_blocks(m, split);
    const int dim = split == TP_COLS ? 1 : 0;
    if (txc_dtype_is_quantized(t->dtype) || t->ndim < 1 || t->ndim > 2 || t->ndim <= dim || len % n || off < 0 ||
        len < 0 || off + len > t->shape[dim])
        return txc_error(TXC_ERR_FORMAT, "--tp %lld: tensor '%s': dim %d [%lld, %lld) does not split by %lld",
                         (long long)n, t->name, dim, (long long)off, (long long)(off + len), (long long)n);
    const size_t es = txc_dtype_size(t->dtype);
    const int64_t mine = len / n, first = off + tp_block(m, split) * mine;
    int64_t shape[2] = {t->shape[0], t->ndim == 2 ? t->shape[1] : 1};
    shape[dim] = mine;
    if (dim == 0) { /* rows [first, first + mine): one contiguous range */
        const size_t row = es * (size_t)shape[1], skip = (size_t)first * row;
        if (t->aligned)
            *out = txc_array_from_storage(t->storage, t->byte_offset + skip, t->dtype, t->ndim, shape);
        else if ((*out = txc_array_new(txc_env_device(m->env), t->dtype, t->ndim, shape)))
            memcpy(txc_array_data(*out), (const char *)t->data + skip, (size_t)mine * row);
    } else if ((*out = cols_array(m, t->dtype, 2, shape))) {
        /* columns [first, first + mine) of every row: copied */
        const size_t part = (size_t)mine * es, full = (size_t)t->shape[1] * es;
        char *dst = txc_array_data(*out);
        const char *src = (const char *)t->data + (size_t)first * es;
        for (int64_t i = 0; i < t->shape[0]; i++)
            memcpy(dst + (size_t)i * part, src + (size_t)i * full, part);
        txc_impl_drop_mapped_pages(t->data, t->nbytes);
        seal(*out);
    }
    return *out ? TXC_OK : txc_last_status();
}

int txc_tp_conv1d_split(int split)
{
    return split == TP_ROWS ? TP_COLS : split == TP_COLS ? TP_ROWS : split;
}

const txc_sharding *txc_tp_sharding(const txc_model *m, int split, int ndim)
{
    if (split == TP_ROWS)
        return ndim == 1 ? m->sh_vec : m->sh_rows;
    return split == TP_COLS ? m->sh_cols : NULL;
}

void txc_tp_localize(txc_model *m)
{
    if (m->tp_size <= 1)
        return;
    txc_hf_config *c = &m->config;
    m->tp_global_heads = c->num_attention_heads;
    m->tp_global_kv_heads = c->num_key_value_heads;
    m->tp_global_intermediate = c->intermediate_size;
    c->num_attention_heads /= m->tp_size;
    c->num_key_value_heads = m->kv_rep > 1 ? 1 : c->num_key_value_heads / m->tp_size;
    c->intermediate_size /= m->tp_size;
}

int64_t txc_model_tp_size(const txc_model *m) { return m ? m->tp_size : 1; }
int64_t txc_model_tp_rank(const txc_model *m) { return m ? m->tp_rank : 0; }
const txc_mesh *txc_model_tp_mesh(const txc_model *m) { return m && m->tp_size > 1 ? m->tp_mesh : NULL; }
