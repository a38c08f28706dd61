/*
 * Rotary position embeddings: transformers' LlamaRotaryEmbedding and the
 * rope_scaling types of modeling_rope_utils.py (ROPE_INIT_FUNCTIONS):
 * default, linear, dynamic (NTK), llama3, yarn, longrope (Phi-3; its
 * config's "su" and "yarn" mean longrope, as Phi3Config converts them).
 *
 * The static tables (default, linear, llama3, yarn) are computed at load
 * with transformers' float32 arithmetic, op by op, so the table equals
 * torch's: `1.0 / t` is torch's reciprocal, `x / factor` divides by the
 * factor rounded to float32, comparisons with Python numbers compare in
 * float32, one statement per torch op so that no compiler fuses a multiply
 * and an add. (torch's pow is SLEEF's, within 1 ulp of the correctly
 * rounded powf used here: Llama 3.1/3.2's tables are equal, a few entries
 * of other tables are one ulp apart; tests/test_arch.c checks both.)
 *
 * Dynamic NTK recomputes the table from the sequence length, max(position)
 * + 1, once past max_position_embeddings: here in the graph, from the
 * positions (a runtime input of a compiled step), with the same float32
 * ops transformers runs (its dynamic_rope_update). transformers also keeps
 * the largest table seen across calls until a short sequence resets it;
 * txc computes it per call, which is the same within one generation.
 * longrope picks its long_factor table once max(position) + 1 passes
 * original_max_position_embeddings, short_factor's before (the same
 * where() transformers runs), so both tables are captured constants.
 */
#include "models/model_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static txc_tensor *table(txc_env *env, const float *v, int64_t n)
{
    return txc_tensor_from_data(env, TXC_F32, 1, &n, v);
}

/* get_mscale of _compute_yarn_parameters. */
static double yarn_mscale(double scale, double mscale)
{
    return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* find_correction_dim of _compute_yarn_parameters (Python's evaluation order). */
static double yarn_correction_dim(double num_rotations, double dim, double base, double max_pos)
{
    return (dim * log(max_pos / (num_rotations * 2 * M_PI))) / (2 * log(base));
}

txc_status txc_rope_init(txc_rope *r, const txc_hf_config *c, txc_env *env, bool partial_rotary)
{
    memset(r, 0, sizeof *r);
    r->attention_scaling = 1.0;
    const char *type = c->has_rope_scaling && c->rope_scaling_type[0] ? c->rope_scaling_type : "default";
    if (strcmp(c->model_type, "phi3") == 0 && (strcmp(type, "su") == 0 || strcmp(type, "yarn") == 0))
        type = "longrope"; /* Phi3Config's conversion */
    const bool scaled = strcmp(type, "default") != 0;
    /* The default table of llama-style models uses the whole head_dim
     * (compute_default_rope_parameters ignores partial_rotary_factor); the
     * scaling types and phi3 take int(head_dim * partial_rotary_factor). */
    int64_t dim = c->head_dim;
    if (partial_rotary || scaled)
        dim = (int64_t)((double)c->head_dim * c->partial_rotary_factor);
    if (scaled && !partial_rotary && dim != c->head_dim)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: partial_rotary_factor %g with rope_scaling '%s' is not "
                                              "supported for model_type '%s'", c->partial_rotary_factor, type,
                         c->model_type);
    if (dim < 2 || dim % 2)
        return txc_error(TXC_ERR_FORMAT, "config.json: the rotary dimension %lld (head_dim %lld, "
                                         "partial_rotary_factor %g) must be even and positive", (long long)dim,
                         (long long)c->head_dim, c->partial_rotary_factor);
    const int64_t half = dim / 2;
    const double base = c->rope_theta;
    const float basef = (float)base;
    r->dim = dim;
    r->kind = ROPE_STATIC;

    float *inv = calloc((size_t)half, sizeof *inv), *expo = calloc((size_t)half, sizeof *expo);
    float *inv_long = calloc((size_t)half, sizeof *inv_long);
    txc_status s = TXC_OK;
    if (!inv || !expo || !inv_long) {
        s = txc_error(TXC_ERR_NOMEM, "out of memory (inv_freq)");
        goto out;
    }
    /* base ** (arange(0, dim, 2).float() / dim), then torch's reciprocal */
    for (int64_t i = 0; i < half; i++) {
        expo[i] = (float)(2 * i) / (float)dim;
        inv[i] = 1.0f / powf(basef, expo[i]);
    }
    const double factor = c->rope_factor;
    if (strcmp(type, "default") == 0) {
        /* as is */
    } else if (strcmp(type, "linear") == 0) {
        if (!(factor > 0)) {
            s = txc_error(TXC_ERR_FORMAT, "config.json: rope_scaling of type 'linear' needs a positive 'factor'");
            goto out;
        }
        for (int64_t i = 0; i < half; i++)
            inv[i] = inv[i] / (float)factor;
    } else if (strcmp(type, "dynamic") == 0) {
        if (!(factor > 0)) {
            s = txc_error(TXC_ERR_FORMAT, "config.json: rope_scaling of type 'dynamic' needs a positive 'factor'");
            goto out;
        }
        /* At load: the table for seq_len = max_position_embeddings. */
        double m = (double)c->max_position_embeddings;
        double b = base * pow((factor * m / m) - (factor - 1), (double)dim / (double)(dim - 2));
        for (int64_t i = 0; i < half; i++)
            inv[i] = 1.0f / powf((float)b, expo[i]);
        r->kind = ROPE_DYNAMIC;
        r->base = base;
        r->factor = factor;
        r->max_position_embeddings = c->max_position_embeddings;
    } else if (strcmp(type, "llama3") == 0) {
        const double lff = c->low_freq_factor, hff = c->high_freq_factor;
        const double ocl = (double)c->original_max_position_embeddings;
        if (!(factor > 0) || !(lff > 0) || !(hff > 0) || !(ocl > 0) || hff == lff) {
            s = txc_error(TXC_ERR_FORMAT, "config.json: rope_scaling of type 'llama3' needs 'factor', "
                                          "'low_freq_factor', 'high_freq_factor' (different) and "
                                          "'original_max_position_embeddings'");
            goto out;
        }
        const float low_wl = (float)(ocl / lff), high_wl = (float)(ocl / hff);
        for (int64_t i = 0; i < half; i++) {
            float wavelen = (1.0f / inv[i]) * (float)(2 * M_PI);
            float llama = wavelen > low_wl ? inv[i] / (float)factor : inv[i];
            float t = (1.0f / wavelen) * (float)ocl; /* one rounding per torch op (no fused multiply-add) */
            float smooth = (t - (float)lff) / (float)(hff - lff);
            float a = (1.0f - smooth) * llama;
            float b = a / (float)factor;
            float d = smooth * llama;
            float smoothed = b + d;
            bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
            inv[i] = medium ? smoothed : llama;
        }
    } else if (strcmp(type, "yarn") == 0) {
        double ompe = (double)(c->original_max_position_embeddings ? c->original_max_position_embeddings
                                                                    : c->max_position_embeddings);
        double f = factor > 0 ? factor : (double)c->max_position_embeddings / ompe;
        double af = c->attention_factor;
        if (!(af > 0))
            af = c->mscale > 0 && c->mscale_all_dim > 0 ? yarn_mscale(f, c->mscale) / yarn_mscale(f, c->mscale_all_dim)
                                                         : yarn_mscale(f, 1);
        double beta_fast = c->beta_fast != 0 ? c->beta_fast : 32, beta_slow = c->beta_slow != 0 ? c->beta_slow : 1;
        double low = yarn_correction_dim(beta_fast, (double)dim, base, ompe);
        double high = yarn_correction_dim(beta_slow, (double)dim, base, ompe);
        if (c->rope_truncate) {
            low = floor(low);
            high = ceil(high);
        }
        low = low > 0 ? low : 0;
        high = high < (double)(dim - 1) ? high : (double)(dim - 1);
        if (low == high)
            high += 0.001; /* linear_ramp_factor's guard */
        for (int64_t i = 0; i < half; i++) {
            float pos_freq = powf(basef, expo[i]);
            float extrapolation = 1.0f / pos_freq;
            float interpolation = 1.0f / ((float)f * pos_freq);
            float ramp = ((float)i - (float)low) / (float)(high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            float extra_factor = 1.0f - ramp;
            float a = interpolation * (1.0f - extra_factor);
            float b = extrapolation * extra_factor;
            inv[i] = a + b;
        }
        r->attention_scaling = af;
    } else if (strcmp(type, "longrope") == 0) {
        int64_t ompe = c->original_max_position_embeddings ? c->original_max_position_embeddings
                                                             : c->max_position_embeddings;
        if (c->n_short_factor != half || c->n_long_factor != half) {
            s = txc_error(TXC_ERR_FORMAT, "config.json: rope_scaling of type 'longrope' needs 'short_factor' and "
                                          "'long_factor' of %lld numbers (rotary dimension / 2); got %d and %d",
                          (long long)half, c->n_short_factor, c->n_long_factor);
            goto out;
        }
        double f = factor > 0 ? factor : (double)c->max_position_embeddings / (double)ompe;
        double af = c->attention_factor;
        if (!(af > 0))
            af = f <= 1.0 ? 1.0 : sqrt(1 + log(f) / log((double)ompe));
        /* 1.0 / (ext_factors * base ** (arange(0, dim, 2).float() / dim)) */
        for (int64_t i = 0; i < half; i++) {
            float p = powf(basef, expo[i]);
            inv[i] = 1.0f / ((float)c->short_factor[i] * p);
            inv_long[i] = 1.0f / ((float)c->long_factor[i] * p);
        }
        r->kind = ROPE_LONGROPE;
        r->attention_scaling = af;
        r->original_max_position_embeddings = ompe;
    } else {
        s = txc_error(TXC_ERR_UNSUPPORTED, "config.json: rope_scaling of type '%s' is not supported (supported: "
                                           "default, linear, dynamic, llama3, yarn, longrope)", type);
        goto out;
    }
    if (!(r->inv_freq = table(env, inv, half)))
        s = txc_last_status();
    else if (r->kind == ROPE_DYNAMIC && !(r->exponents = table(env, expo, half)))
        s = txc_last_status();
    else if (r->kind == ROPE_LONGROPE && !(r->inv_long = table(env, inv_long, half)))
        s = txc_last_status();
out:
    free(inv);
    free(expo);
    free(inv_long);
    if (s != TXC_OK)
        txc_rope_free(r);
    return s;
}

void txc_rope_free(txc_rope *r)
{
    txc_tensor_release(r->inv_freq);
    txc_tensor_release(r->exponents);
    txc_tensor_release(r->inv_long);
    r->inv_freq = r->exponents = r->inv_long = NULL;
}

static txc_status move(txc_tensor **t, txc_device device)
{
    if (!*t)
        return TXC_OK;
    txc_tensor *moved = txc_tensor_to(*t, device);
    if (!moved)
        return txc_last_status();
    txc_tensor_release(*t);
    *t = moved;
    return TXC_OK;
}

txc_status txc_rope_to(txc_rope *r, txc_device device)
{
    txc_status s = move(&r->inv_freq, device);
    if (s == TXC_OK)
        s = move(&r->exponents, device);
    return s == TXC_OK ? move(&r->inv_long, device) : s;
}

/* dynamic_frequency_update + _compute_dynamic_ntk_parameters, in the graph:
 * seq_len = max(positions) + 1; past max_position_embeddings
 *   base' = base * ((factor * seq_len / mpe) - (factor - 1)) ** (dim / (dim - 2))
 *   inv_freq = 1 / base' ** (arange(0, dim, 2) / dim)
 * (float32, each op rounded as torch's), else the table at load. */
static txc_tensor *dynamic_inv_freq(const txc_rope *r, txc_tensor *positions)
{
    txc_env *env = txc_tensor_env(positions);
    const int64_t one = 1;
    txc_tensor *seq = txc_add_scalar(txc_unsqueeze(txc_max_all(positions), 0), 1); /* int64 (1) */
    txc_tensor *mpe = txc_full(env, 1, &one, (double)r->max_position_embeddings, TXC_I64);
    txc_tensor *s = txc_to_dtype(txc_maximum(seq, mpe), TXC_F32);
    s = txc_mul_scalar(s, (float)r->factor);
    s = txc_div_scalar(s, (float)r->max_position_embeddings);
    s = txc_sub_scalar(s, (float)(r->factor - 1));
    s = txc_pow_scalar(s, (float)((double)r->dim / (double)(r->dim - 2)));
    s = txc_mul_scalar(s, (float)r->base);
    txc_tensor *inv = txc_div(txc_full(env, 1, &one, 1.0, TXC_F32), txc_pow(s, r->exponents));
    return txc_where(txc_gt(seq, mpe), inv, r->inv_freq);
}

txc_status txc_rope_cos_sin(const txc_rope *r, txc_tensor *position_ids, txc_tensor *seq_positions, txc_tensor **cos,
                            txc_tensor **sin)
{
    *cos = *sin = NULL;
    txc_tensor *inv = r->inv_freq;
    if (r->kind == ROPE_DYNAMIC) {
        inv = dynamic_inv_freq(r, seq_positions);
    } else if (r->kind == ROPE_LONGROPE) { /* longrope_frequency_update */
        /* Each row by its own longest position (B, 1, 1): transformers takes
         * the batch's, which is the same for one sequence; per row, a row's
         * table does not depend on the other rows (txc/batch.h). */
        const int64_t one = 1;
        txc_tensor *seq = txc_add_scalar(txc_unsqueeze(txc_max(seq_positions, 1, true), 2), 1);
        txc_tensor *ompe = txc_full(txc_tensor_env(position_ids), 1, &one,
                                    (double)r->original_max_position_embeddings, TXC_I64);
        inv = txc_where(txc_gt(seq, ompe), r->inv_long, r->inv_freq); /* (B, 1, dim / 2) */
    }
    /* freqs = position_ids[..., None].float() * inv_freq; emb = cat(freqs, freqs) */
    txc_tensor *pos = txc_unsqueeze(txc_to_dtype(position_ids, TXC_F32), -1); /* (B, L, 1) */
    txc_tensor *freqs = txc_mul(pos, inv);                                    /* (B, L, dim/2) */
    txc_tensor *emb = txc_cat((txc_tensor *[]){freqs, freqs}, 2, -1);         /* (B, L, dim) */
    txc_tensor *c = txc_cos(emb), *s = txc_sin(emb);
    if (r->attention_scaling != 1.0) {
        c = txc_mul_scalar(c, (float)r->attention_scaling);
        s = txc_mul_scalar(s, (float)r->attention_scaling);
    }
    *cos = txc_unsqueeze(c, 1);
    *sin = txc_unsqueeze(s, 1);
    return *cos && *sin ? TXC_OK : txc_last_status();
}

txc_tensor *txc_rope_apply(const txc_rope *r, txc_tensor *x, txc_tensor *cos, txc_tensor *sin)
{
    if (!x)
        return NULL;
    int64_t d = txc_tensor_size(x, -1), rd = r->dim;
    if (rd == d)
        return txc_rotary_embedding(x, cos, sin);
    txc_tensor *rot = txc_narrow(x, -1, 0, rd), *pass = txc_narrow(x, -1, rd, d - rd);
    return txc_cat((txc_tensor *[]){txc_rotary_embedding(rot, cos, sin), pass}, 2, -1);
}
