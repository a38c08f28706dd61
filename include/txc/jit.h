/*
 * txc/jit.h — trace a function of tensors into a compiled, cached plan.
 *
 * The analogue of jax.jit / torchax.interop.jax_jit. txc_jit_new wraps a C
 * function of tensors; txc_jit_call runs it:
 *
 *   1. The call's signature — every input's dtype, shape, strides and
 *      device, plus the static arguments (bytes whose value specialises the
 *      plan: flags such as use_cache, integers such as logits_to_keep) — is
 *      looked up among the plans compiled so far.
 *   2. On a miss the function is traced: the env switches to tracing mode
 *      and every op the function calls is recorded instead of run (traced
 *      tensors carry shape and dtype only). The graph goes through the passes
 *      (dead code, common subexpressions, constant folding, elementwise
 *      fusion) and memory planning into one arena, and the plan is cached.
 *      The reason for the recompilation — which input changed, old and new
 *      shape — is kept (txc_jit_last_recompile_reason), like JAX's
 *      explain-cache-misses.
 *   3. The plan runs: inputs are bound to the plan without copying, the
 *      kernels run in order into the arena, no heap allocation is made.
 *
 * Inputs are explicit: weights are inputs (the article's functional_call
 * point), never constants, so new weights of the same shapes reuse the plan.
 * Tensors the function reads that are not inputs (module buffers such as
 * RoPE's inv_freq) are captured as constants. State is never dropped: an
 * in-place op on an input (the StaticCache write, index_copy_) writes the
 * caller's buffer when the plan runs (donation); anything else the function
 * changes must be one of its outputs.
 *
 * Outputs are borrowed: they live in the plan's arena (or are the caller's
 * inputs) and stay valid until the next call of the same jit with the same
 * signature, or until TXC_JIT_MAX_PLANS calls with other signatures have
 * made the plan the least recently used one and it was dropped. Copy
 * (txc_clone) what must outlive that. Do not release them.
 *
 * Plans held: at most TXC_JIT_MAX_PLANS per jit, their arenas at most
 * TXC_JIT_MAX_PLAN_BYTES together; a new signature beyond either drops the
 * least recently used plans, never the new one (torch._dynamo's recompile
 * limit is 8 per frame; a DynamicCache compiled step makes a new signature
 * every token, each plan's arena holding the concatenated cache: holding 16
 * grew a 135M model's peak by 200 MB).
 *
 * Compile cache (off unless txc_jit_set_compile_cache names a folder): a
 * compiled plan is also written to <dir>/<name>-<key>.txcplan, the key
 * hashing the traced graph before the passes (ops, attributes, shapes,
 * strides, the bytes of captured constants), the signature and static
 * bytes, the txc version and the file format. A later process that traces
 * the same graph for the same signature reads the plan instead of running
 * the passes and the memory planner (tracing still happens: it is how the
 * key is known). Files are never trusted: a corrupt, truncated or stale
 * file is ignored, the plan recompiled and the file overwritten
 * (txc_jit_compile_cache_message says so); a FIFO, folder or device at a
 * plan's path is skipped without being opened for a blocking read. A folder that cannot be written
 * is not an error of the call: the plan is compiled and used as without a
 * cache, and the stats count it.
 *
 * Size cap (txc_jit_set_compile_cache_max_bytes, default
 * TXC_JIT_COMPILE_CACHE_MAX_BYTES): after each save the folder's plan files
 * (*.txcplan, of every jit and process using it) are kept within the cap by
 * deleting the least recently used first, as ccache's max_size does; a
 * file's modification time is its last use (set when saved, touched when
 * loaded). The plan just saved is kept, even alone over the cap.
 */
#ifndef TXC_JIT_H
#define TXC_JIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "txc/env.h"
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_JIT_MAX_IO 1024

/* The traced function. `inputs` are the call's tensors (traced while
 * compiling, concrete when called eagerly); `static_args` the call's static
 * bytes. It writes up to `max_outputs` result tensors to `outputs` and
 * their count to *n_outputs. It runs inside an env scope: its temporaries
 * are released after tracing. */
typedef txc_status (*txc_jit_fn)(void *ctx, txc_tensor *const *inputs, int n_inputs, const void *static_args,
                                 size_t static_len, txc_tensor **outputs, int max_outputs, int *n_outputs);

typedef struct txc_jit txc_jit;

typedef struct txc_jit_stats {
    uint64_t calls;        /* txc_jit_call()s */
    uint64_t hits;         /* calls that reused a plan */
    uint64_t misses;       /* plans made for a new signature: compiled, or loaded from the compile cache */
    double compile_ms;     /* total time making them: tracing + passes + planning (+ saving), or tracing +
                              reading the file when loaded */
    double last_compile_ms;
    int n_plans;           /* plans held (at most TXC_JIT_MAX_PLANS) */
    uint64_t evictions;    /* plans dropped, least recently used first, to stay within TXC_JIT_MAX_PLANS
                              and TXC_JIT_MAX_PLAN_BYTES */
    int64_t arena_bytes;   /* arena of the last plan run */
    int nodes_traced;      /* of the last compilation: ops recorded... */
    int nodes_compiled;    /* ...and kernel launches left after the passes */
    int linear_groups;     /* ...of which runs of sibling linears on one input (q/k/v, gate/up) executed as
                              one grouped GEMV: 2+ nodes each */
    /* the compile cache (txc_jit_set_compile_cache) */
    uint64_t cache_loads;   /* plans read from it instead of compiled (compilations = misses - cache_loads) */
    uint64_t cache_saves;   /* plans written to it */
    uint64_t cache_rejects; /* files found for a key but not used (corrupt, stale, not a regular file):
                               recompiled, overwritten */
    uint64_t cache_errors;  /* plans that could not be written (e.g. a read-only folder); the calls succeeded */
    char cache_save_error[1024]; /* why the first of them was not ("cannot write <file>: Permission denied",
                                    cut to fit); "" when none */
    uint64_t cache_evictions; /* plan files deleted to keep the folder within its size cap */
    double trace_ms;        /* the part of compile_ms spent tracing */
    const char *last_compile_source; /* of the last plan made: "compiled", "loaded from cache"; "" before any */
} txc_jit_stats;

/* Kernel time per op kind of a jit's calls, while profiling is on
 * (txc_jit_set_profile): `op` is the aten name ("aten::linear"), "fused
 * elementwise" for the fusion pass's programs, or "linear group" for
 * sibling linears run as one grouped GEMV; ms is wall time summed over the
 * calls, measured around each kernel launch (CLOCK_MONOTONIC). */
typedef struct txc_jit_op_time {
    const char *op;
    uint64_t calls;
    double ms;
} txc_jit_op_time;

/* On: time every kernel launch of the following calls (two clock reads
 * per launch); the counts start from zero. Off: stop timing, keep them. */
void txc_jit_set_profile(txc_jit *jit, bool on);
/* Up to `max` op kinds with their time, most time first; returns how many
 * kinds ran (may exceed max). */
int txc_jit_get_profile(const txc_jit *jit, txc_jit_op_time *out, int max);

/* Kernel time per GEMM shape of the same calls: each aten::linear and
 * aten::matmul launch (and each linear group) by its shape. `op` as in
 * txc_jit_op_time; M the rows (the output's elements over N: batch dims
 * folded in), N the output features (a group: the sum over its `parts`
 * linears, 1 otherwise), K the inner dim, so a launch is 2 M N K flops.
 * The first TXC_JIT_PROFILE_GEMM_SHAPES shapes seen are kept; launches of
 * later ones are summed in one entry with op "other shapes" and M = N = K
 * = parts = 0. */
typedef struct txc_jit_gemm_time {
    const char *op;
    int64_t M, N, K;
    int parts;
    uint64_t calls;
    double ms;
} txc_jit_gemm_time;
#define TXC_JIT_PROFILE_GEMM_SHAPES 32
/* Up to `max` shapes, most time first; returns how many there are (may
 * exceed max). */
int txc_jit_get_gemm_profile(const txc_jit *jit, txc_jit_gemm_time *out, int max);

/* Plans one jit holds at most, and the bytes of their arenas together (see
 * "Plans held" above; the newest plan is held whatever its size). */
#define TXC_JIT_MAX_PLANS 16
#define TXC_JIT_MAX_PLAN_BYTES ((int64_t)16 << 20)

/* A jit of `fn` in `env` (NULL: active). `name` is used in messages. */
txc_jit *txc_jit_new(txc_env *env, const char *name, txc_jit_fn fn, void *ctx);
void txc_jit_free(txc_jit *jit);

/* Run the function compiled for this signature (compiling it first if
 * needed). `input_names` (may be NULL) name the inputs in recompile reasons
 * ("past_key_values.key_cache[3]"). Outputs are borrowed (see above).
 * Errors: those of tracing (shapes), of compiling, and of the kernels at
 * run time (e.g. TXC_ERR_CAPACITY for a cache_position past the cache). */
txc_status txc_jit_call(txc_jit *jit, txc_tensor *const *inputs, int n_inputs, const char *const *input_names,
                        const void *static_args, size_t static_len, txc_tensor **outputs, int max_outputs,
                        int *n_outputs);

txc_jit_stats txc_jit_get_stats(const txc_jit *jit);
/* Why the last compilation happened ("first call", "input 3
 * 'past_key_values.key_cache[0]' shape [1, 4, 7, 8] -> [1, 4, 8, 8]"...),
 * "" when none happened. */
const char *txc_jit_last_recompile_reason(const txc_jit *jit);
/* Print the last compiled graph (after the passes) to `f`. */
void txc_jit_dump_last_graph(const txc_jit *jit, void *file);

/* Save compiled plans to, and load them from, the folder `dir` (created
 * when needed); NULL or "" turns the compile cache off (the default).
 * Errors: TXC_ERR_INVALID for a path too long, TXC_ERR_NOMEM. */
txc_status txc_jit_set_compile_cache(txc_jit *jit, const char *dir);
/* The default size cap of a compile cache folder: 256 MiB (a small model's
 * plans take tens of KB each, a 1B model's about a MB). */
#define TXC_JIT_COMPILE_CACHE_MAX_BYTES ((int64_t)256 << 20)

/* Cap the compile cache folder at max_bytes of plan files (0: no cap); see
 * "Size cap" above. Errors: TXC_ERR_INVALID for a negative size. */
txc_status txc_jit_set_compile_cache_max_bytes(txc_jit *jit, int64_t max_bytes);
/* The folder set, or NULL. */
const char *txc_jit_compile_cache(const txc_jit *jit);
/* What the compile cache did at the last compilation: "compile cache:
 * loaded <file>", "... saved <file>", "... <file> is corrupt (checksum),
 * recompiled", "... plan not saved: cannot write <file>: Permission
 * denied"; "" when the cache is off or nothing happened. */
const char *txc_jit_compile_cache_message(const txc_jit *jit);
/* The default folder of the command line: $XDG_CACHE_HOME/txc (an absolute
 * XDG_CACHE_HOME), else $HOME/.cache/txc. False (buf = "") when neither
 * variable is set, or the path does not fit in `cap`. */
bool txc_jit_default_compile_cache(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
