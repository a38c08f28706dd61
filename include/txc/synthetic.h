/*
 * txc/synthetic.h — random-weight models with the exact configs of real
 * checkpoints, built without any files (for speed work: decode speed
 * depends on shapes, not values).
 *
 *   name            checkpoint                      model_type  params
 *   smollm2-135m    HuggingFaceTB/SmolLM2-135M      llama       134,515,008
 *   qwen2.5-0.5b    Qwen/Qwen2.5-0.5B               qwen2       494,032,768
 *   llama-3.2-1b    meta-llama/Llama-3.2-1B         llama     1,235,814,400
 *   stories260k     stories260K (../shared/models)  llama           260,160
 *
 * The configs are the checkpoints' config.json, field for field (Llama 3.2
 * with its rope_scaling of type llama3, factor 32).
 *
 * The weights: every matrix and bias is drawn from an approximately normal
 * distribution with mean 0 and standard deviation initializer_range (as
 * transformers' _init_weights; SmolLM2's is 1/24, the others 0.02); the
 * norms' weights are 1. The generator is counter-based and integer-only,
 * so the values are bit-for-bit the same on every run and every machine
 * (no rand(), no libm): element i of the tensor called N is a function of
 * (seed, N, i) alone — splitmix64 of a key derived from the seed and the
 * name, plus i; the 64 output bits are four 16-bit uniforms whose centred
 * sum, scaled, is the sample (the Irwin–Hall approximation of a normal,
 * bounded at ±3.46 standard deviations). About 4 ns per value on one
 * core; the tensors are filled in pieces by one thread per core (the
 * values do not depend on which thread computes them).
 *
 * How the model is made: the config and the generated weights are written
 * as config.json + model.safetensors into a fresh temporary folder (under
 * $TXC_SYNTHETIC_DIR when set, else /dev/shm when it has room — memory,
 * not disk — else $TMPDIR or /tmp),
 * loaded with txc_model_load (so the loader's full name/shape validation
 * runs, and the weights sit in memory exactly as a real checkpoint's
 * would), and the folder is deleted at once: f32 weights stay mapped
 * (zero copy) until the model is freed, bf16/f16 weights are converted by
 * the loader like any checkpoint's. Peak extra memory: the file itself.
 */
#ifndef TXC_SYNTHETIC_H
#define TXC_SYNTHETIC_H

#include <stdint.h>
#include "txc/dtype.h"
#include "txc/env.h"
#include "txc/hf_config.h"
#include "txc/model.h"
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txc_synthetic_info {
    const char *name;              /* "qwen2.5-0.5b" */
    const char *checkpoint;        /* "Qwen/Qwen2.5-0.5B" */
    double initializer_range;      /* standard deviation of the weights */
    const char *differs;           /* how it departs from the checkpoint's config, or NULL */
} txc_synthetic_info;

/* The known names, NULL-terminated, in a fixed order. */
const char *const *txc_synthetic_names(void);

/* The entry for `name` (case-insensitive; the checkpoint id, e.g.
 * "Qwen/Qwen2.5-0.5B", is accepted too), NULL when unknown (no error). */
const txc_synthetic_info *txc_synthetic_find(const char *name);

/* The config of `name` as txc_hf_config_load would read it, without
 * allocating any weight. Errors: TXC_ERR_INVALID for an unknown name (the
 * message lists the known ones). */
txc_status txc_synthetic_config(const char *name, txc_hf_config *out);

/* The config.json text of `name` (static; the one written to disk). */
const char *txc_synthetic_config_json(const char *name);

/* Number of parameter elements a model of this config has (the sum of the
 * loader's tensors: embed_tokens, per layer 2 norms + q/k/v/o + q/k/v
 * biases when present + gate/up/down, the final norm, lm_head unless
 * tied), computed from the config alone. */
int64_t txc_synthetic_parameter_count(const txc_hf_config *config);

/* Fill `n` values of the tensor called `tensor_name` as the synthetic
 * models do (normal-ish, standard deviation `std`), starting at element
 * `first`. Exposed for tests and for anyone who wants the same numbers. */
void txc_synthetic_fill(uint64_t seed, const char *tensor_name, double std, uint64_t first, float *out, uint64_t n);

/* Build the model `name` with random weights (see above) stored as `dtype`
 * (TXC_F32, TXC_BF16 or TXC_F16 in the temporary safetensors file; what
 * the model then holds in memory is whatever txc_model_load makes of it —
 * float32 today — readable with txc_tensor_dtype on its parameters).
 * `env` NULL: the active env. Errors: TXC_ERR_INVALID (unknown name, the
 * known ones listed; other dtypes), TXC_ERR_IO (no temporary folder with
 * room), TXC_ERR_NOMEM, and the loader's. */
txc_status txc_model_synthetic(const char *name, txc_dtype dtype, uint64_t seed, txc_env *env, txc_model **out);

/* The same with the loader's options (NULL: the defaults): opts->env, where
 * the weights live (opts->weights: the temporary file's mmap, or a copy in
 * anonymous memory, the default; the temporary file goes either way once
 * nothing maps it), opts->no_hugepages, opts->convert_dtype. Errors: as
 * txc_model_synthetic, and txc_model_load's for bad options. */
txc_status txc_model_synthetic_opts(const char *name, txc_dtype dtype, uint64_t seed, const txc_model_options *opts,
                                    txc_model **out);

#ifdef __cplusplus
}
#endif
#endif
