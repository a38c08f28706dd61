/*
 * txc bench — the torchax article's table for one model on this machine.
 *
 *   txc bench (--model DIR | --synthetic NAME) [--dtype f32|bf16|f16] [--seed N]
 *             [--new-tokens N] [--prompt-tokens N | --prompt TEXT] [--modes a,b,...]
 *             [--max-cache-len N] [--baseline-limit SECONDS] [--json]
 *             [--compile-cache DIR | --no-compile-cache] [--compile-cache-max-mb N] [--threads N] [--membw]
 *             [--mmap | --no-mmap | --weights mmap,copy] [--no-hugepages] [--profile]
 *   txc bench --membw          (the machine's read bandwidth only)
 *
 * One row per mode — a cache kind (none, dynamic, static) run eagerly or
 * compiled (txc/jit.h) — each with a fresh generator (so compilations are
 * counted from zero), the same prompt, greedy decoding and no stop on eos:
 * every row makes exactly N new tokens, except the no-cache baseline, which
 * stops early (and says so) once it has run --baseline-limit seconds. The
 * rows' token ids are compared with the reference row's (the first one
 * that made all N tokens) and the verdict is printed.
 *
 * Per row, the bytes a decode token reads (the weights it multiplies, the
 * embedding row, the valid prefix of the KV cache, averaged over the
 * decode steps), the GB/s that makes at the row's decode tokens/s, and the
 * row's peak RSS (VmHWM, reset before each row where the kernel allows,
 * else the process's peak so far) against the bound weights + KV cache +
 * the process's RSS before the load (libraries, MPI's buffers) + 64 MiB
 * (with --devices cpu:N, N devices' weights and caches: the process holds them all) (each load's own peak is printed with its time); with --membw, the machine's read bandwidth (a streaming
 * read of 1 GiB of huge pages on every thread with the decode GEMV's loads
 * and prefetch — txc_kern_read_bytes — median of 5 passes, measured after the rows
 * so that it does not count in their RSS) and each row's fraction of it. A
 * row whose bytes per token fit in the last-level cache is marked
 * cache-resident, one that reads faster than the measured bandwidth (from
 * cache in part, or the bandwidth pass was slowed by other work) "above bw",
 * instead of a fraction above what memory gives (the JSON keeps the number
 * and says so: cache_resident, above_bandwidth).
 *
 * Prefill: the useful float32 multiply-adds of the prompt (2 flops per
 * weight element per prompt token for every matrix but the embedding, the
 * head once for the last position, and causal attention's QK^T and PV;
 * padding to a compiled bucket is not counted) per prefill second, as
 * GFLOP/s (the prefill's compilation, if any, not counted), and its
 * fraction of the machine's peak for those weights, measured in the same run
 * on the same threads (tools/peak.h): AMX's bf16 tile multiply-add for bf16
 * weights where the prefill GEMMs run on AMX, AVX-512 BF16's VDPBF16PS for
 * bf16 weights where they run on it (SIMD level 2 with AVX512_BF16), else
 * the float32 FMA at the SIMD level the GEMM kernels use.
 *
 * Weights: --mmap / --no-mmap choose where they live (default: the copy,
 * TXC_WEIGHTS_DEFAULT_MODE; a synthetic model's file is a temporary one,
 * in /dev/shm where there is room); --weights mmap,copy runs every row
 * under each, the model reloaded (or regenerated) for each, and prints each
 * load's time (a synthetic model's includes making its weights).
 *
 * Exit status: 0 when the table was made, 2 on any error (one line on
 * stderr).
 */
#include "tools/bench_cmd.h"
#include "formats/files.h"
#include "txc/gguf.h"
#include "tools/cli.h"
#include "ops/kernels.h"
#include "tools/peak.h"

#include "txc/generate.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/synthetic.h"
#include "tools/bench_batch.h"
#include "tools/bench_profile.h"
#include "tools/bench_tp.h"
#include "txc/shard.h"
#include "txc/threads.h"
#include "txc/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#define DEFAULT_PROMPT "Once upon a time"
#define MAX_MODES 8

typedef struct bench_mode {
    const char *name;
    txc_cache_kind cache;
    bool jit;
} bench_mode;

static const bench_mode known_modes[] = {
    {"eager-none", TXC_CACHE_NONE, false},     {"eager-dynamic", TXC_CACHE_DYNAMIC, false},
    {"eager-static", TXC_CACHE_STATIC, false}, {"jit-static", TXC_CACHE_STATIC, true},
    {"jit-dynamic", TXC_CACHE_DYNAMIC, true},  {"jit-none", TXC_CACHE_NONE, true},
};
#define N_KNOWN_MODES ((int)(sizeof known_modes / sizeof *known_modes))
#define N_DEFAULT_MODES 5 /* the first five, in the article's order plus jit-dynamic */

typedef struct bench_row {
    const bench_mode *mode;
    int64_t n_new;
    bool capped; /* stopped by --baseline-limit */
    double total_s, prefill_ms, decode_ms, decode_tok_s, decode_tok_s_excl_compile, compile_ms;
    int64_t prefill_compilations, decode_compilations;
    int64_t cache_loads, cache_saves; /* compile cache: plans read instead of compiled, plans written */
    double trace_ms;                  /* the part of compile_ms spent tracing */
    int32_t *ids;
    bool tokens_match;
    int64_t compared; /* tokens compared with the reference row */
    double bytes_per_token, decode_gbps, peak_rss_mb;
    double prefill_gflops;   /* over the prefill time less its compilation */
    double prefill_compile_ms;
    double rss_bound_mb;     /* weights + KV cache + the RSS before the load + 64 MiB */
    int weights_index;       /* into bench_info.loads */
    /* --profile: the compiled prefill and decode steps' kernel time by op kind and GEMM shape */
    txc_bench_profile prefill_prof, decode_prof;
    double coll_s;        /* --tp: seconds in collectives, and their count */
    uint64_t coll_calls;
} bench_row;

/* One model load (one per weights mode). */
typedef struct bench_load {
    txc_weights_info info;
    double load_ms;
    bool hwm_reset; /* the peak RSS was reset before it */
    double peak_rss_mb; /* the peak RSS of the load itself */
} bench_load;




static bool parse_seconds(const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0) || isinf(v)) {
        fprintf(stderr, "txc: %s expects a number of seconds >= 0, got '%s'\n", flag, s);
        return false;
    }
    *out = v;
    return true;
}

static void usage_bench(FILE *f)
{
    fprintf(f,
            "usage: txc bench (--model DIR | --synthetic NAME) [--dtype f32|bf16|f16] [--seed N]\n"
            "                 [--new-tokens N] [--prompt-tokens N | --prompt TEXT] [--modes a,b,...]\n"
            "                 [--max-cache-len N] [--baseline-limit SECONDS] [--json]\n"
            "                 [--compile-cache DIR | --no-compile-cache] [--threads N] [--membw]\n"
            "                 [--mmap | --no-mmap | --weights mmap,copy] [--no-hugepages] [--profile]\n"
            "                 [--check-tensors] [--batch 1,2,4,8 [--no-batch-invariant]]\n"
            "\n"
            "The torchax article's table for one model on this machine: greedy generation of the\n"
            "same prompt in each mode, each with a fresh generator, no stop on eos.\n"
            "  --model DIR          a Hugging Face model folder\n"
            "  --synthetic NAME     random weights with a real checkpoint's config, no files:\n"
            "                       smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, stories260k\n"
            "  --dtype D            synthetic weights' dtype: f32 (default), bf16 or f16 (kept in\n"
            "                       memory); with --model, the weights converted once at load\n"
            "  --seed N             synthetic weights' and random prompt's seed (default 0)\n"
            "  --new-tokens N       new tokens per mode (default 256)\n"
            "  --prompt-tokens N    a prompt of N deterministic random ids (default 8; the default\n"
            "                       for --model is the text \"" DEFAULT_PROMPT "\")\n"
            "  --prompt TEXT        a text prompt (--model only: it needs the tokenizer)\n"
            "  --modes LIST         rows, comma-separated (default: eager-none,eager-dynamic,\n"
            "                       eager-static,jit-static,jit-dynamic; also jit-none)\n"
            "  --max-cache-len N    StaticCache length (default: prompt + new tokens)\n"
            "  --baseline-limit S   stop the no-cache rows after S seconds (default 120; 0: never)\n"
            "  --json               print one JSON object instead of the table\n"
            "  --batch LIST         instead of the table: B sequences decoded together (txc serve's\n"
            "                       slots, one forward per token for all rows) for each B of LIST:\n"
            "                       aggregate and per-sequence decode tok/s, and against batch 1\n"
            "  --no-batch-invariant let a batch of 2..32 rows take the GEMM whose summation order\n"
            "                       depends on the batch (txc serve --no-batch-invariant; the cost of\n"
            "                       batch invariance is the difference)\n"
            "  --compile-cache DIR  save compiled plans to DIR and load them from it (default:\n"
            "                       $XDG_CACHE_HOME/txc, else $HOME/.cache/txc)\n"
            "  --no-compile-cache   compile every plan in this process\n"
            TXC_CLI_COMPILE_CACHE_MAX_HELP
"  --threads N          threads, 1 to 256 (default: $TXC_THREADS, else the CPUs this process may use)\n"
            "  --tp N               tensor parallelism over N processes (mpirun -np N txc bench ... --tp N):\n"
            "                       adds this rank's weight bytes, an all_reduce's latency, the time in collectives\n"
            "  --membw              also measure this machine's read bandwidth and each row's fraction\n"
            "                       of it (alone: the bandwidth only)\n"
            "  --mmap, --no-mmap    use the weights in place from the mmap'd file, or copy\n"
            "                       them into anonymous memory (huge pages; the default)\n"
            "  --weights LIST       run the rows under each of mmap,copy (reloading the model)\n"
            "  --no-hugepages       with the copy: do not ask for transparent huge pages\n"
            "  --check-tensors      scan the weights at load for NaN and inf (llama.cpp's flag)\n"
            "  --profile            time each kernel of the compiled steps (two clock reads per\n"
            "                       kernel) and print, for the jit rows, the prefill and the decode\n"
            "                       step's kernel time by op, and their GEMMs' time by shape\n"
            "                       (M x N x K, calls, ms, share, GFLOP/s and fraction of the peak);\n"
            "                       with --batch, each batch's decode step (no peak fraction)\n");
}

/* ---- the machine ------------------------------------------------------------------ */

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* x86: "model name"; some ARM kernels: "Hardware" or "Processor". */
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Hardware", 8) == 0 ||
            strncmp(line, "Processor", 9) == 0) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            colon[strcspn(colon, "\n")] = 0;
            if (*colon) {
                snprintf(buf, cap, "%s", colon);
                break;
            }
        }
    }
    fclose(f);
}

/* ---- memory bandwidth ------------------------------------------------------------ */

typedef struct membw_ctx {
    const uint64_t *buf;
    size_t words;
    int64_t n_tasks;
    uint64_t sums[TXC_MAX_THREADS];
} membw_ctx;

static void membw_task(void *ctx, int64_t t)
{
    membw_ctx *c = ctx;
    size_t per = (c->words / (size_t)c->n_tasks) & ~(size_t)63;
    size_t lo = per * (size_t)t, hi = t == c->n_tasks - 1 ? c->words : lo + per;
    /* the GEMV's streaming loads and prefetch (ops/kernels.h) */
    c->sums[t] = txc_kern_read_bytes(c->buf + lo, (hi - lo) * sizeof *c->buf);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* `bytes` (a multiple of 2 MiB) aligned to 2 MiB, advised huge pages; NULL
 * on out-of-memory. */
static void *huge_alloc(size_t bytes)
{
    void *p = aligned_alloc(1 << 21, bytes);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* The median of v[0..n) (sorts v), n > 0. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* GB/s of a streaming read of `bytes` on every thread: median of `passes`
 * after one warm-up pass; 0 on out-of-memory. */
static double measure_membw(size_t bytes, int passes)
{
    uint64_t *buf = huge_alloc(bytes);
    if (!buf)
        return 0;
    for (size_t i = 0; i < bytes / 8; i++)
        buf[i] = i;
    static membw_ctx c;
    c.buf = buf;
    c.words = bytes / 8;
    c.n_tasks = txc_threads_get();
    double gbps[16];
    if (passes > 16)
        passes = 16;
    uint64_t check = 0;
    for (int p = -1; p < passes; p++) {
        double t0 = txc_cli_now_ms();
        txc_parallel_for(c.n_tasks, membw_task, &c);
        double ms = txc_cli_now_ms() - t0;
        for (int64_t t = 0; t < c.n_tasks; t++)
            check += c.sums[t];
        if (p >= 0)
            gbps[p] = ms > 0 ? (double)bytes / (ms * 1e6) : 0;
    }
    free(buf);
    if (check == 1) /* (keeps the sums alive) */
        fprintf(stderr, " ");
    return median(gbps, passes);
}

/* The reference for the weights' copy (--no-mmap): GB/s of a memcpy of
 * `bytes` into freshly allocated huge-page-advised memory, split over the
 * threads as the load's reads are — what the copy costs on this machine,
 * page faults and the kernel's zeroing of new pages included. Median of
 * `passes`, each into new memory; 0 on out-of-memory. */
typedef struct copy_ctx {
    const char *src;
    char *dst;
    size_t bytes;
    int64_t n_tasks;
} copy_ctx;

static void copy_task(void *ctx, int64_t t)
{
    copy_ctx *c = ctx;
    size_t per = (c->bytes / (size_t)c->n_tasks) & ~(size_t)4095;
    size_t lo = per * (size_t)t, hi = t == c->n_tasks - 1 ? c->bytes : lo + per;
    memcpy(c->dst + lo, c->src + lo, hi - lo);
}

static double measure_fresh_copy(size_t bytes, int passes)
{
    char *src = huge_alloc(bytes);
    if (!src)
        return 0;
    memset(src, 1, bytes);
    double gbps[16];
    passes = passes > 16 ? 16 : passes;
    int done = 0;
    for (int p = 0; p < passes; p++) {
        char *dst = huge_alloc(bytes);
        if (!dst)
            break;
        copy_ctx c = {src, dst, bytes, txc_threads_get()};
        double t0 = txc_cli_now_ms();
        txc_parallel_for(c.n_tasks, copy_task, &c);
        double ms = txc_cli_now_ms() - t0;
        if (dst[bytes - 1] == 1) /* (the copy is used) */
            gbps[done++] = ms > 0 ? (double)bytes / (ms * 1e6) : 0;
        free(dst);
    }
    free(src);
    return done ? median(gbps, done) : 0;
}

#define MEMBW_BYTES ((size_t)1 << 30)
#define MEMBW_PASSES 5

/* Reset the peak RSS (VmHWM) to the current RSS: "5" to /proc/self/clear_refs
 * (Linux >= 4.0), after handing the memory that earlier rows freed back to
 * the system (glibc keeps freed heap memory: the next row's peak would start
 * from it). False where the reset is refused. */
static bool reset_peak_rss(void)
{
    txc_hf_trim_heap();
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    ok &= fclose(f) == 0;
    return ok;
}

/* A "VmHWM:" / "VmRSS:" line of /proc/self/status in MiB, -1 where absent. */
static double status_mb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            kb = strtol(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kb > 0 ? (double)kb / 1024.0 : -1;
}

/* VmHWM in MB (since the last reset), else getrusage's peak of the process. */
static double peak_rss_mb(void)
{
    double hwm = status_mb("VmHWM:");
    if (hwm > 0)
        return hwm;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0; /* kilobytes on Linux */
}

/* The process's resident memory before the model exists (the binary, the
 * libraries, the thread pool; under mpirun Open MPI's libraries and buffers:
 * 14 MB a rank against 6.5 MB alone, measured on qwen2.5-0.5b): the RSS
 * bound's base. 0 where /proc is absent. */
static double base_rss_mb(void)
{
    double rss = status_mb("VmRSS:");
    return rss > 0 ? rss : 0;
}

/* Is `name` an input embedding (a row gather, no multiply)? */
static bool is_embedding(const char *name)
{
    size_t nl = strlen(name);
    return (nl >= 19 && strcmp(name + nl - 19, "embed_tokens.weight") == 0) ||
           (nl >= 10 && (strcmp(name + nl - 10, "wte.weight") == 0 || strcmp(name + nl - 10, "wpe.weight") == 0));
}

/* Useful flops of a prefill of n tokens: 2 per weight element per token for
 * every 2-d weight but the embeddings, the head once (only the last
 * position's logits are computed), and causal attention (QK^T and PV over
 * the keys at or before each query: 2 * 2 * heads * head_dim per pair). */
static double prefill_flops(const txc_model *m, int64_t n)
{
    const txc_hf_config *c = txc_model_config(m);
    const char *head = txc_model_lm_head_name(m);
    double f = 0;
    for (int i = 0; i < txc_model_num_parameters(m); i++) {
        const txc_tensor *t = txc_model_parameter(m, i);
        const char *name = txc_model_parameter_name(m, i);
        bool is_head = head && strcmp(name, head) == 0;
        if (txc_tensor_ndim(t) != 2)
            continue;
        double numel = (double)txc_tensor_numel(t);
        if (is_head)
            f += 2.0 * numel;
        else if (!is_embedding(name))
            f += 2.0 * numel * (double)n;
    }
    double pairs = (double)n * (double)(n + 1) / 2.0;
    f += 4.0 * (double)c->num_hidden_layers * (double)c->num_attention_heads * (double)c->head_dim * pairs;
    return f;
}

/* Bytes of the KV cache a row's generation holds at its end (float32 keys
 * and values per layer): the static cache's max_cache_len, the dynamic one's
 * prompt + new tokens, none for no cache. */
static double kv_bytes(const txc_model *m, const bench_mode *mode, int64_t max_cache_len, int64_t n_seq)
{
    const txc_hf_config *c = txc_model_config(m);
    int64_t len = mode->cache == TXC_CACHE_STATIC ? max_cache_len : mode->cache == TXC_CACHE_DYNAMIC ? n_seq : 0;
    return 2.0 * (double)c->num_hidden_layers * (double)c->num_key_value_heads * (double)c->head_dim * 4.0 *
           (double)len;
}

/* Bytes a decode token reads: every weight (an untied embedding only one
 * row) and the K/V of the valid prefix, averaged over decode steps. */
static double decode_bytes(const txc_model *m, const bench_mode *mode, int64_t n_prompt, int64_t n_new)
{
    const txc_hf_config *c = txc_model_config(m);
    double w = 0;
    for (int i = 0; i < txc_model_num_parameters(m); i++) {
        const txc_tensor *t = txc_model_parameter(m, i);
        size_t nb = 0; /* (a quantized weight: its blocks' bytes) */
        double b = txc_dtype_nbytes(txc_tensor_dtype(t), txc_tensor_numel(t), &nb) ? (double)nb : 0.0;
        const char *name = txc_model_parameter_name(m, i);
        bool embed = is_embedding(name);
        if (embed && (!c->tie_word_embeddings || strstr(name, "wpe")) && txc_tensor_ndim(t) == 2)
            b = b / (double)txc_tensor_size(t, 0); /* one row */
        w += b;
    }
    if (mode->cache == TXC_CACHE_NONE || n_new < 2)
        return w;
    double keys = (double)n_prompt + (double)n_new / 2.0; /* mean over decode steps of the keys read */
    return w + 2.0 * (double)c->num_hidden_layers * (double)c->num_key_value_heads * (double)c->head_dim * 4.0 * keys;
}

/* ---- running one mode ------------------------------------------------------------- */

typedef struct limit_ctx {
    double start_ms, limit_ms;
    int64_t n;
    bool hit;
    const txc_mesh *mesh; /* tensor-parallel: device 0's clock decides for every device */
    txc_env *env;
} limit_ctx;

static bool within_limit(void *ctx, int32_t id)
{
    (void)id;
    limit_ctx *l = ctx;
    l->n++;
    if (l->limit_ms <= 0 || l->n < 2)
        return true;
    bool over = txc_cli_now_ms() - l->start_ms > l->limit_ms;
    if (l->mesh) { /* the devices' clocks differ: each stopping on its own would leave the others waiting */
        int mark = txc_env_scope_begin(l->env);
        float v = over ? 1.0f : 0.0f;
        txc_tensor *t = txc_broadcast(txc_tensor_from_data(l->env, TXC_F32, 1, (int64_t[]){1}, &v), l->mesh, "tp", 0);
        over = !t || ((const float *)txc_tensor_data_ptr(t))[0] != 0.0f;
        txc_env_scope_end(l->env, mark);
    }
    if (over)
        l->hit = true;
    return !over;
}

static int64_t cache_max_bytes = -1; /* --compile-cache-max-mb in bytes; -1: the library's default */

static txc_status run_mode(txc_model *model, const bench_mode *mode, const int32_t *prompt, int64_t n_prompt,
                           int64_t new_tokens, int64_t max_cache_len, double baseline_limit_s, const char *cache_dir,
                           bool profile, const txc_mesh *mesh, bench_row *row)
{
    memset(row, 0, sizeof *row);
    row->mode = mode;
    txc_generator *gen = txc_generator_new(model);
    if (!gen)
        return txc_last_status();
    if (mode->jit && cache_dir &&
        (txc_generator_set_compile_cache(gen, cache_dir) != TXC_OK ||
         (cache_max_bytes >= 0 && txc_generator_set_compile_cache_max_bytes(gen, cache_max_bytes) != TXC_OK))) {
        txc_generator_free(gen);
        return txc_last_status();
    }
    if (profile && mode->jit)
        txc_generator_set_profile(gen, true);
    txc_generate_options o = txc_generate_default_options(model, NULL);
    o.n_eos = 0; /* every mode makes exactly new_tokens */
    o.max_new_tokens = new_tokens;
    o.cache = mode->cache;
    o.jit = mode->jit;
    o.max_cache_len = max_cache_len;
    limit_ctx lim = {.limit_ms = mode->cache == TXC_CACHE_NONE ? baseline_limit_s * 1e3 : 0, .mesh = mesh,
                     .env = txc_model_env(model)};
    o.on_token = within_limit;
    o.ctx = &lim;
    txc_generate_result res;
    lim.start_ms = txc_cli_now_ms();
    txc_status s = txc_generator_run(gen, prompt, n_prompt, &o, &res);
    double total_ms = txc_cli_now_ms() - lim.start_ms;
    if (s == TXC_OK) {
        int64_t n_decode = res.n_new > 1 ? res.n_new - 1 : 0;
        double decode_compile_ms = res.compile_ms - res.prefill_compile_ms; /* (either jit may compile per step) */
        row->prefill_compile_ms = res.prefill_compile_ms; /* (jit-none compiles at every step: not all of it) */
        row->n_new = res.n_new;
        row->capped = lim.hit;
        row->total_s = total_ms / 1e3;
        row->prefill_ms = res.prefill_ms;
        row->decode_ms = res.decode_ms;
        row->decode_tok_s = res.decode_ms > 0 ? (double)n_decode * 1e3 / res.decode_ms : 0;
        double steady = res.decode_ms - decode_compile_ms;
        row->decode_tok_s_excl_compile = steady > 0 ? (double)n_decode * 1e3 / steady : 0;
        row->prefill_compilations = res.prefill_compilations;
        row->decode_compilations = res.decode_compilations;
        row->compile_ms = res.compile_ms;
        if (mode->jit)
            for (int w = 0; w < 2; w++) {
                txc_jit_stats js = txc_generator_jit_stats(gen, w);
                row->cache_loads += (int64_t)js.cache_loads;
                row->cache_saves += (int64_t)js.cache_saves;
                row->trace_ms += js.trace_ms;
                if (js.cache_rejects) /* not errors of the run: said, not returned */
                    fprintf(stderr, "txc: compile cache: %llu %s plan file(s) in %s not usable (corrupt, stale, or not a regular file), recompiled\n",
                            (unsigned long long)js.cache_rejects, w ? "decode" : "prefill", cache_dir);
            }
        if (mode->jit) /* a plan not written: one warning line in the run, with the reason */
            txc_cli_warn_compile_cache(gen);
        if (profile && mode->jit) {
            txc_bench_profile_collect(gen, 0, &row->prefill_prof);
            txc_bench_profile_collect(gen, 1, &row->decode_prof);
        }
        row->ids = res.new_ids; /* taken over */
        res.new_ids = NULL;
        if (res.n_new != new_tokens && !lim.hit)
            s = txc_error(TXC_ERR_INTERNAL, "%s made %lld tokens instead of %lld (stopped on %s)", mode->name,
                          (long long)res.n_new, (long long)new_tokens, res.stop_reason);
    }
    txc_generate_result_free(&res);
    txc_generator_free(gen);
    return s;
}

/* ---- output ----------------------------------------------------------------------- */

typedef struct bench_info {
    const char *model;          /* the name or folder given */
    const txc_synthetic_info *synthetic;
    uint64_t seed;
    char file_dtype[64];        /* the dtype of the weights as stored (synthetic) or torch_dtype (folder) */
    char memory_dtype[64];      /* the parameters' dtypes in memory */
    int64_t parameters;
    int64_t n_prompt;
    bool prompt_is_text;
    const char *prompt_text;
    int64_t new_tokens, max_cache_len;
    double baseline_limit_s;
    char cpu[256];
    long cores;
    int threads;
    double membw_gbps; /* 0: not measured */
    double fresh_copy_gbps; /* a memcpy into fresh memory (measure_fresh_copy), 0: not measured */
    const char *profile_note; /* --profile with no row that has a compiled decode step: says so */
    const char *compile_cache; /* the folder, NULL: off */
    txc_peak peak;             /* the float32 FMA peak, measured in this run */
    size_t llc_bytes;          /* last-level cache, 0: unknown */
    bench_load loads[2];       /* one per weights mode (one for a synthetic model) */
    int n_loads;
    double base_rss_mb;        /* the RSS before the first load (base_rss_mb) */
    int64_t local_devices;     /* the devices in this process, each holding its shards */
} bench_info;

/* Does the row read from cache rather than memory: its bytes per token fit
 * in the last-level cache. */
static bool cache_resident(const bench_info *bi, const bench_row *r)
{
    return bi->llc_bytes > 0 && r->bytes_per_token <= (double)bi->llc_bytes;
}

/* Does it read faster than the bandwidth measured in the run (bw fraction
 * > 1: partly from cache, or the measurement was slowed by other work)? */
static bool above_bandwidth(const bench_info *bi, const bench_row *r)
{
    return bi->membw_gbps > 0 && r->decode_gbps > bi->membw_gbps;
}

static const char *row_weights(const bench_info *bi, const bench_row *r)
{
    return txc_weights_mode_name(bi->loads[r->weights_index].info.mode);
}

static const bench_row *eager_dynamic_row(const bench_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (rows[i].mode->cache == TXC_CACHE_DYNAMIC && !rows[i].mode->jit)
            return &rows[i];
    return NULL;
}

static double speedup(const bench_row *r, const bench_row *base)
{
    return base && base->decode_tok_s > 0 ? r->decode_tok_s / base->decode_tok_s : NAN;
}

static double round_to(double v, double q) { return round(v / q) * q; }

/* tp: the tensor-parallel object (txc_bench_tp_json, taken), NULL without --tp */
static void print_json(const bench_info *bi, const bench_row *rows, int n, bool agree, int ref, cJSON *tp)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", bi->model);
    cJSON_AddStringToObject(j, "source", bi->synthetic ? "synthetic" : "folder");
    if (bi->synthetic) {
        cJSON_AddStringToObject(j, "checkpoint", bi->synthetic->checkpoint);
        cJSON_AddNumberToObject(j, "seed", (double)bi->seed);
    }
    cJSON_AddNumberToObject(j, "parameters", (double)bi->parameters);
    cJSON_AddStringToObject(j, "dtype", bi->file_dtype);
    cJSON_AddStringToObject(j, "weights_in_memory", bi->memory_dtype);
    cJSON_AddStringToObject(j, "compute_dtype", "float32");
    cJSON_AddNumberToObject(j, "threads", bi->threads);
    cJSON *m = cJSON_AddObjectToObject(j, "machine");
    cJSON_AddStringToObject(m, "cpu", bi->cpu);
    cJSON_AddNumberToObject(m, "cores", (double)bi->cores);
    if (bi->membw_gbps > 0)
        cJSON_AddNumberToObject(m, "membw_gbps", round_to(bi->membw_gbps, 1e-3));
    else
        cJSON_AddNullToObject(m, "membw_gbps");
    if (bi->fresh_copy_gbps > 0)
        cJSON_AddNumberToObject(m, "fresh_copy_gbps", round_to(bi->fresh_copy_gbps, 1e-3));
    cJSON_AddNumberToObject(m, "peak_gflops", round_to(bi->peak.gflops, 1e-3));
    cJSON_AddStringToObject(m, "peak_kind", bi->peak.what);
    cJSON_AddNumberToObject(m, "llc_bytes", (double)bi->llc_bytes);
    cJSON_AddNumberToObject(j, "base_rss_mb", round_to(bi->base_rss_mb, 1e-1));
    cJSON *loads = cJSON_AddArrayToObject(j, "loads");
    for (int i = 0; i < bi->n_loads; i++) {
        const bench_load *l = &bi->loads[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "weights", txc_weights_mode_name(l->info.mode));
        cJSON_AddNumberToObject(o, "load_ms", round_to(l->load_ms, 1e-3));
        cJSON_AddNumberToObject(o, "weights_mb", round_to((double)l->info.param_bytes / 1e6, 1e-3));
        cJSON_AddNumberToObject(o, "file_mb", round_to((double)l->info.file_bytes / 1e6, 1e-3));
        cJSON_AddBoolToObject(o, "hugepages", l->info.hugepages);
        cJSON_AddNumberToObject(o, "copy_ms", round_to(l->info.copy_ms, 1e-3));
        cJSON_AddNumberToObject(o, "copy_gbps",
                                l->info.copy_ms > 0 ? round_to((double)l->info.file_bytes / (l->info.copy_ms * 1e6), 1e-4) : 0);
        cJSON_AddNumberToObject(o, "repacked_mb", round_to((double)l->info.repacked_bytes / 1e6, 1e-3));
        cJSON_AddNumberToObject(o, "repack_ms", round_to(l->info.repack_ms, 1e-3));
        cJSON_AddBoolToObject(o, "peak_rss_reset", l->hwm_reset);
        cJSON_AddNumberToObject(o, "peak_rss_mb", round_to(l->peak_rss_mb, 1e-1));
        cJSON_AddItemToArray(loads, o);
    }
    cJSON_AddNumberToObject(j, "prompt_tokens", (double)bi->n_prompt);
    if (bi->prompt_is_text)
        cJSON_AddStringToObject(j, "prompt", bi->prompt_text);
    cJSON_AddNumberToObject(j, "new_tokens", (double)bi->new_tokens);
    cJSON_AddNumberToObject(j, "max_cache_len", (double)bi->max_cache_len);
    cJSON_AddNumberToObject(j, "baseline_limit_s", bi->baseline_limit_s);
    if (bi->compile_cache)
        cJSON_AddStringToObject(j, "compile_cache", bi->compile_cache);
    else
        cJSON_AddNullToObject(j, "compile_cache");
    cJSON *notes = cJSON_AddArrayToObject(j, "notes");
    if (bi->synthetic && bi->synthetic->differs)
        cJSON_AddItemToArray(notes, cJSON_CreateString(bi->synthetic->differs));
    if (bi->profile_note)
        cJSON_AddItemToArray(notes, cJSON_CreateString(bi->profile_note));
    cJSON_AddBoolToObject(j, "tokens_agree", agree);
    cJSON_AddStringToObject(j, "reference_mode", rows[ref].mode->name);
    cJSON *ids = cJSON_AddArrayToObject(j, "reference_ids");
    for (int64_t k = 0; k < rows[ref].n_new; k++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(rows[ref].ids[k]));
    const bench_row *base = eager_dynamic_row(rows, n);
    cJSON *arr = cJSON_AddArrayToObject(j, "rows");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "mode", r->mode->name);
        cJSON_AddStringToObject(o, "weights", row_weights(bi, r));
        cJSON_AddNumberToObject(o, "load_ms", round_to(bi->loads[r->weights_index].load_ms, 1e-3));
        cJSON_AddNumberToObject(o, "new_tokens", (double)r->n_new);
        cJSON_AddNumberToObject(o, "total_s", round_to(r->total_s, 1e-4));
        cJSON_AddNumberToObject(o, "prefill_ms", round_to(r->prefill_ms, 1e-3));
        cJSON_AddNumberToObject(o, "decode_tok_s", round_to(r->decode_tok_s, 1e-3));
        cJSON_AddNumberToObject(o, "compilations", (double)(r->prefill_compilations + r->decode_compilations));
        cJSON_AddNumberToObject(o, "compile_ms", round_to(r->compile_ms, 1e-3));
        cJSON_AddBoolToObject(o, "tokens_match", r->tokens_match);
        cJSON_AddStringToObject(o, "cache", txc_cache_kind_name(r->mode->cache));
        cJSON_AddBoolToObject(o, "jit", r->mode->jit);
        cJSON_AddNumberToObject(o, "prefill_compilations", (double)r->prefill_compilations);
        cJSON_AddNumberToObject(o, "decode_compilations", (double)r->decode_compilations);
        cJSON_AddNumberToObject(o, "compile_cache_loads", (double)r->cache_loads);
        cJSON_AddNumberToObject(o, "compile_cache_saves", (double)r->cache_saves);
        cJSON_AddNumberToObject(o, "compile_trace_ms", round_to(r->trace_ms, 1e-3));
        cJSON_AddNumberToObject(o, "decode_ms", round_to(r->decode_ms, 1e-3));
        cJSON_AddNumberToObject(o, "decode_tok_s_excl_compile", round_to(r->decode_tok_s_excl_compile, 1e-3));
        double sp = speedup(r, base);
        if (isnan(sp))
            cJSON_AddNullToObject(o, "speedup_vs_eager_dynamic");
        else
            cJSON_AddNumberToObject(o, "speedup_vs_eager_dynamic", round_to(sp, 1e-4));
        cJSON_AddBoolToObject(o, "capped", r->capped);
        cJSON_AddNumberToObject(o, "tokens_compared", (double)r->compared);
        cJSON_AddNumberToObject(o, "bytes_per_token", round(r->bytes_per_token));
        cJSON_AddNumberToObject(o, "decode_gbps", round_to(r->decode_gbps, 1e-4));
        if (bi->membw_gbps > 0)
            cJSON_AddNumberToObject(o, "bw_fraction", round_to(r->decode_gbps / bi->membw_gbps, 1e-4));
        else
            cJSON_AddNullToObject(o, "bw_fraction");
        txc_bench_profile_json(o, "prefill_profile", &r->prefill_prof, bi->peak.gflops);
        txc_bench_profile_json(o, "decode_profile", &r->decode_prof, bi->peak.gflops);
        cJSON_AddBoolToObject(o, "cache_resident", cache_resident(bi, r));
        cJSON_AddBoolToObject(o, "above_bandwidth", above_bandwidth(bi, r));
        cJSON_AddNumberToObject(o, "prefill_gflops", round_to(r->prefill_gflops, 1e-4));
        cJSON_AddNumberToObject(o, "prefill_peak_fraction",
                                bi->peak.gflops > 0 ? round_to(r->prefill_gflops / bi->peak.gflops, 1e-5) : 0);
        cJSON_AddNumberToObject(o, "peak_rss_mb", round_to(r->peak_rss_mb, 1e-2));
        cJSON_AddNumberToObject(o, "rss_bound_mb", round_to(r->rss_bound_mb, 1e-2));
        cJSON_AddBoolToObject(o, "rss_within_bound", r->peak_rss_mb <= r->rss_bound_mb);
        if (tp && r->n_new > 0) { /* (txc_bench_tp_row's figures) */
            cJSON_AddNumberToObject(o, "collective_ms_per_token", round_to(r->coll_s * 1e3 / (double)r->n_new, 1e-4));
            cJSON_AddNumberToObject(o, "collective_calls_per_token", round_to((double)r->coll_calls / (double)r->n_new, 1e-2));
            cJSON_AddNumberToObject(o, "collective_fraction", r->total_s > 0 ? round_to(r->coll_s / r->total_s, 1e-4) : 0);
        }
        cJSON_AddItemToArray(arr, o);
    }
    if (tp)
        cJSON_AddItemToObject(j, "tensor_parallel", tp);
    char *text = cJSON_PrintUnformatted(j);
    if (text) {
        puts(text);
        cJSON_free(text);
    }
    cJSON_Delete(j);
}

/* 134515008 -> "134,515,008". */
static void thousands(int64_t v, char *buf, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0 && digits[i - 1] != '-')
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

static void print_table(const bench_info *bi, const bench_row *rows, int n, bool agree, int ref)
{
    char count[32];
    thousands(bi->parameters, count, sizeof count);
    if (bi->synthetic)
        printf("model: %s (synthetic: random weights, seed %llu, config of %s), %s parameters\n", bi->model,
               (unsigned long long)bi->seed, bi->synthetic->checkpoint, count);
    else
        printf("model: %s, %s parameters\n", bi->model, count);
    if (bi->synthetic && bi->synthetic->differs)
        printf("note: %s\n", bi->synthetic->differs);
    printf("dtype: %s weights%s; in memory: %s; compute: float32\n", bi->file_dtype,
           bi->synthetic ? " generated" : " in the files", bi->memory_dtype);
    printf("threads: %d; machine: %s, %ld cores\n", bi->threads, bi->cpu, bi->cores);
    if (bi->prompt_is_text)
        printf("prompt: \"%s\" (%lld tokens); ", bi->prompt_text, (long long)bi->n_prompt);
    else
        printf("prompt: %lld deterministic random ids (seed %llu); ", (long long)bi->n_prompt,
               (unsigned long long)bi->seed);
    printf("%lld new tokens per mode, greedy, no eos stop; static cache max_cache_len %lld\n\n",
           (long long)bi->new_tokens, (long long)bi->max_cache_len);

    for (int i = 0; i < bi->n_loads; i++) {
        const bench_load *l = &bi->loads[i];
        printf("weights: %s, %.1f MB", txc_weights_mode_name(l->info.mode), (double)l->info.param_bytes / 1e6);
        if (l->info.mode == TXC_WEIGHTS_COPY) {
            double gbps = l->info.copy_ms > 0 ? (double)l->info.file_bytes / (l->info.copy_ms * 1e6) : 0.0;
            printf(" (%.1f MB copied in %.1f ms, %.2f GB/s%s", (double)l->info.file_bytes / 1e6, l->info.copy_ms, gbps,
                   l->info.hugepages ? ", huge pages" : ", small pages");
            if (bi->fresh_copy_gbps > 0)
                printf(", %.2f of a memcpy into fresh memory", gbps / bi->fresh_copy_gbps);
            if (l->info.repacked_bytes)
                printf("; %.1f MB repacked in %.1f ms", (double)l->info.repacked_bytes / 1e6, l->info.repack_ms);
            printf(")");
        }
        else if (l->info.mode == TXC_WEIGHTS_MMAP)
            printf(" (%.1f MB in place in the mmap)", (double)l->info.file_bytes / 1e6);
        printf("; load %.1f ms, peak RSS %.1f MB\n", l->load_ms, l->peak_rss_mb);
    }
    int wcol = bi->n_loads > 1 ? 19 : 14;
    printf("%-*s %10s %9s %11s %13s %14s %11s %17s  %s\n", wcol, "mode", "new tokens", "total s", "prefill ms",
           "decode tok/s", "compilations", "compile ms", "vs eager-dynamic", "tokens match");
    const bench_row *base = eager_dynamic_row(rows, n);
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char comp[48], sp[24], match[48];
        if (r->mode->jit)
            snprintf(comp, sizeof comp, "%lld (%lld+%lld)", (long long)(r->prefill_compilations + r->decode_compilations),
                     (long long)r->prefill_compilations, (long long)r->decode_compilations);
        else
            snprintf(comp, sizeof comp, "0");
        double s = speedup(r, base);
        if (isnan(s))
            snprintf(sp, sizeof sp, "-");
        else
            snprintf(sp, sizeof sp, "%.2fx", s);
        if (i == ref)
            snprintf(match, sizeof match, "reference");
        else if (r->compared < r->n_new || r->compared < bi->new_tokens)
            snprintf(match, sizeof match, "%s (first %lld)", r->tokens_match ? "yes" : "NO", (long long)r->compared);
        else
            snprintf(match, sizeof match, "%s", r->tokens_match ? "yes" : "NO");
        char label[40];
        if (bi->n_loads > 1)
            snprintf(label, sizeof label, "%s/%s", r->mode->name, row_weights(bi, r));
        else
            snprintf(label, sizeof label, "%s", r->mode->name);
        printf("%-*s %10lld %9.3f %11.1f %13.1f %14s %11.1f %17s  %s\n", wcol, label, (long long)r->n_new,
               r->total_s, r->prefill_ms, r->decode_tok_s, comp, r->compile_ms, sp, match);
    }
    printf("\n");
    if (bi->membw_gbps > 0)
        printf("memory: read bandwidth %.2f GB/s (%d threads streaming 1 GiB, median of %d passes)\n", bi->membw_gbps,
               bi->threads, MEMBW_PASSES);
    if (bi->fresh_copy_gbps > 0)
        printf("memory: a memcpy of 1 GiB into freshly allocated huge-page memory %.2f GB/s (%d threads, median of 3; "
               "page faults and zeroing included): the weights copy's reference\n",
               bi->fresh_copy_gbps, bi->threads);
    printf("compute: peak %.1f GFLOP/s (%s, %d threads, measured in this run); last-level cache %.0f MiB\n",
           bi->peak.gflops, bi->peak.what, bi->threads, (double)bi->llc_bytes / (1 << 20));
    printf("  %-19s %12s %11s %14s %14s %8s %11s %12s\n", "memory / compute", "MB per token", "decode GB/s",
           "bw fraction", "prefill GFLOP/s", "of peak", "peak RSS MB", "bound MB");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char frac[24] = "-", label[40], bound[32];
        if (cache_resident(bi, r))
            snprintf(frac, sizeof frac, "cache-resident");
        else if (above_bandwidth(bi, r))
            snprintf(frac, sizeof frac, "above bw");
        else if (bi->membw_gbps > 0)
            snprintf(frac, sizeof frac, "%.3f", r->decode_gbps / bi->membw_gbps);
        if (bi->n_loads > 1)
            snprintf(label, sizeof label, "%s/%s", r->mode->name, row_weights(bi, r));
        else
            snprintf(label, sizeof label, "%s", r->mode->name);
        snprintf(bound, sizeof bound, "%.1f %s", r->rss_bound_mb, r->peak_rss_mb <= r->rss_bound_mb ? "ok" : "OVER");
        printf("  %-19s %12.2f %11.3f %14s %14.2f %7.1f%% %11.1f %12s\n", label, r->bytes_per_token / 1e6,
               r->decode_gbps, frac, r->prefill_gflops,
               bi->peak.gflops > 0 ? 100.0 * r->prefill_gflops / bi->peak.gflops : 0.0, r->peak_rss_mb, bound);
    }
    printf("(bound: weights + KV cache%s + the process's %.1f MB before the load + 64 MiB; peak RSS of each row's "
           "generation%s)\n",
           bi->local_devices > 1 ? " of every device in this process" : "", bi->base_rss_mb, bi->loads[0].hwm_reset ? "" : ", here since the process started: the kernel refused the reset");
    printf("\n");
    if (bi->profile_note)
        printf("note: %s\n", bi->profile_note);
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        if (!r->decode_prof.n_op && !r->prefill_prof.n_op)
            continue;
        char label[40], what[96];
        if (bi->n_loads > 1)
            snprintf(label, sizeof label, "%s/%s", r->mode->name, row_weights(bi, r));
        else
            snprintf(label, sizeof label, "%s", r->mode->name);
        snprintf(what, sizeof what, "%lld call%s for %lld prompt tokens", (long long)r->prefill_prof.calls,
                 r->prefill_prof.calls == 1 ? "" : "s", (long long)bi->n_prompt);
        txc_bench_profile_print(label, "prefill", what, &r->prefill_prof, bi->peak.gflops);
        snprintf(what, sizeof what, "%lld steps", (long long)(r->n_new > 1 ? r->n_new - 1 : 0));
        txc_bench_profile_print(label, "decode", what, &r->decode_prof, bi->peak.gflops);
    }
    for (int i = 0; i < n; i++)
        if (rows[i].mode->jit && bi->compile_cache)
            printf("compile cache %s: %s loaded %lld of its %lld plans from it, saved %lld\n", bi->compile_cache,
                   rows[i].mode->name, (long long)rows[i].cache_loads,
                   (long long)(rows[i].prefill_compilations + rows[i].decode_compilations),
                   (long long)rows[i].cache_saves);
    for (int i = 0; i < n; i++)
        if (rows[i].capped)
            printf("%s: capped at %lld of %lld new tokens (--baseline-limit %g s reached); its decode tok/s is over "
                   "those tokens only (it slows down as the sequence grows)\n",
                   rows[i].mode->name, (long long)rows[i].n_new, (long long)bi->new_tokens, bi->baseline_limit_s);
    if (agree) {
        printf("tokens: all modes agree (%lld new tokens", (long long)rows[ref].n_new);
        for (int i = 0; i < n; i++)
            if (rows[i].compared < rows[ref].n_new)
                printf("; %s checked on its first %lld", rows[i].mode->name, (long long)rows[i].compared);
        printf(")\n");
    } else {
        printf("tokens: modes DISAGREE with %s:", rows[ref].mode->name);
        for (int i = 0; i < n; i++)
            if (!rows[i].tokens_match) {
                int64_t k = 0;
                while (k < rows[i].compared && rows[i].ids[k] == rows[ref].ids[k])
                    k++;
                printf(" %s (first difference at new token %lld)", rows[i].mode->name, (long long)k);
            }
        printf("\n");
    }
}

/* ---- the command -------------------------------------------------------------------- */

static bool parse_modes(const char *list, const bench_mode **modes, int *n)
{
    *n = 0;
    const char *p = list;
    while (true) {
        size_t len = strcspn(p, ",");
        const bench_mode *found = NULL;
        for (int i = 0; i < N_KNOWN_MODES; i++)
            if (strlen(known_modes[i].name) == len && strncmp(known_modes[i].name, p, len) == 0)
                found = &known_modes[i];
        if (!found) {
            char known[256] = "";
            for (int i = 0; i < N_KNOWN_MODES; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                         known_modes[i].name);
            fprintf(stderr, "txc: unknown mode '%.*s' in --modes (known: %s)\n", (int)len, p, known);
            return false;
        }
        for (int i = 0; i < *n; i++)
            if (modes[i] == found) {
                fprintf(stderr, "txc: mode '%s' is listed twice in --modes\n", found->name);
                return false;
            }
        modes[(*n)++] = found;
        if (!p[len])
            return true;
        p += len + 1;
    }
}

/* --weights: "mmap", "copy", or both comma-separated (each once). */
static bool parse_weights(const char *list, txc_weights_mode *out, int *n)
{
    *n = 0;
    const char *p = list;
    while (true) {
        size_t len = strcspn(p, ",");
        txc_weights_mode m;
        if (len == 4 && strncmp(p, "mmap", 4) == 0)
            m = TXC_WEIGHTS_MMAP;
        else if (len == 4 && strncmp(p, "copy", 4) == 0)
            m = TXC_WEIGHTS_COPY;
        else {
            fprintf(stderr, "txc: unknown weights mode '%.*s' in --weights (known: mmap, copy)\n", (int)len, p);
            return false;
        }
        for (int i = 0; i < *n; i++)
            if (out[i] == m) {
                fprintf(stderr, "txc: weights mode '%s' is listed twice in --weights\n", txc_weights_mode_name(m));
                return false;
            }
        out[(*n)++] = m;
        if (!p[len])
            return true;
        p += len + 1;
    }
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void describe_memory_dtypes(const txc_model *m, char *buf, size_t cap)
{
    bool seen[TXC_DTYPE_COUNT] = {0};
    for (int i = 0; i < txc_model_num_parameters(m); i++) {
        txc_dtype d = txc_tensor_dtype(txc_model_parameter(m, i));
        if ((int)d >= 0 && d < TXC_DTYPE_COUNT)
            seen[d] = true;
    }
    buf[0] = 0;
    for (int d = 0; d < TXC_DTYPE_COUNT; d++)
        if (seen[d])
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", *buf ? "+" : "", txc_dtype_name((txc_dtype)d));
}

typedef struct bench_args {
    const char *model_dir, *synthetic, *dtype_name, *prompt_text, *compile_cache;
    int64_t new_tokens, prompt_tokens, max_cache_len, seed;
    double baseline_limit;
    bool json, membw, profile;
    txc_model_options wopts;
    txc_dtype dtype;
    txc_weights_mode wmodes[2];
    int n_wmodes;
    const int *batch_sizes;
    int n_batch_sizes;
    const bench_mode *const *modes;
    int n_modes;
    int64_t local_devices; /* the devices in this process (--devices cpu:N: N, else 1) */
    double base_rss_mb;    /* the process's RSS before any device loads (base_rss_mb) */
} bench_args;

/* Load, run every mode, print: what every device runs (SPMD), one of them printing. */
static int bench_body(void *ctx, const txc_cli_device *dev)
{
    const bench_args *a = ctx;
    const char *model_dir = a->model_dir, *synthetic = a->synthetic, *dtype_name = a->dtype_name,
               *prompt_text = a->prompt_text, *compile_cache = a->compile_cache;
    const int64_t new_tokens = a->new_tokens, prompt_tokens = a->prompt_tokens, seed = a->seed;
    int64_t max_cache_len = a->max_cache_len;
    const double baseline_limit = a->baseline_limit;
    const bool json = a->json, membw = a->membw && dev->lead, profile = a->profile;
    const txc_model_options wopts = a->wopts;
    const txc_dtype dtype = a->dtype;
    txc_weights_mode wmodes[2] = {a->wmodes[0], a->wmodes[1]};
    const int n_wmodes = a->n_wmodes, n_batch_sizes = a->n_batch_sizes;
    const int *batch_sizes = a->batch_sizes;
    const bench_mode *modes[MAX_MODES];
    int n_modes = a->n_modes;
    memcpy(modes, a->modes, sizeof *modes * (size_t)n_modes);
    bool progress = isatty(STDERR_FILENO) && dev->lead;
    bench_info bi = {.model = model_dir ? model_dir : synthetic, .seed = (uint64_t)seed,
                     .baseline_limit_s = baseline_limit, .compile_cache = compile_cache};
    txc_model *model = NULL;
    /* (a synthetic model's --dtype is its file's dtype: nothing to convert) */
    txc_model_options mo = {.convert_dtype = dtype_name != NULL && !synthetic, .dtype = dtype, .weights = wmodes[0],
                            .no_hugepages = wopts.no_hugepages, .check_tensors = wopts.check_tensors,
                            .tp_mesh = dev->mesh};
    bi.base_rss_mb = a->base_rss_mb;
    bi.local_devices = a->local_devices;
    bi.loads[0].hwm_reset = reset_peak_rss();
    double t0 = txc_cli_now_ms();
    if (synthetic) {
        bi.synthetic = txc_synthetic_find(synthetic);
        bi.model = bi.synthetic->name;
        if (progress)
            fprintf(stderr, "bench: generating %s weights (%s)...\n", bi.model, txc_dtype_name(dtype));
        if (txc_model_synthetic_opts(synthetic, dtype, (uint64_t)seed, &mo, &model) != TXC_OK)
            return txc_cli_fail_in(synthetic);
        snprintf(bi.file_dtype, sizeof bi.file_dtype, "%s", txc_dtype_name(dtype));
    } else {
        if (progress)
            fprintf(stderr, "bench: loading %s (%s)...\n", model_dir, txc_weights_mode_name(wmodes[0]));
        if (txc_model_load(model_dir, &mo, &model) != TXC_OK)
            return txc_cli_fail_in(model_dir);
        txc_cli_warn_overflow(model, &mo);
        const char *td = txc_model_config(model)->torch_dtype;
        snprintf(bi.file_dtype, sizeof bi.file_dtype, "%s", *td ? td : "unknown"); /* (the model may be reloaded) */
    }
    bi.loads[0].load_ms = txc_cli_now_ms() - t0;
    bi.loads[0].peak_rss_mb = peak_rss_mb();
    bi.loads[0].info = txc_model_weights_info(model);
    bi.n_loads = 1;
    describe_memory_dtypes(model, bi.memory_dtype, sizeof bi.memory_dtype);
    bi.parameters = txc_model_parameter_count(model);
    const txc_hf_config *cfg = txc_model_config(model);

    /* The prompt: text through the tokenizer, or deterministic random ids. */
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    if (model_dir && prompt_tokens < 0) {
        bi.prompt_is_text = true;
        bi.prompt_text = prompt_text ? prompt_text : DEFAULT_PROMPT;
        txc_tokenizer *tok = NULL;
        if (txc_tokenizer_load(model_dir, &tok) != TXC_OK) {
            txc_model_free(model);
            return txc_cli_fail_in(model_dir);
        }
        txc_status s = txc_tokenizer_encode(tok, bi.prompt_text, strlen(bi.prompt_text), true, &prompt, &n_prompt);
        txc_tokenizer_free(tok);
        if (s != TXC_OK || n_prompt == 0) {
            free(prompt);
            txc_model_free(model);
            if (s == TXC_OK)
                fprintf(stderr, "txc: --prompt: the prompt encodes to no tokens\n");
            return s == TXC_OK ? EXIT_ERROR : txc_cli_fail_in("--prompt");
        }
    } else {
        n_prompt = (size_t)(prompt_tokens > 0 ? prompt_tokens : 8);
        prompt = malloc(sizeof(int32_t) * n_prompt);
        if (!prompt) {
            txc_model_free(model);
            fprintf(stderr, "txc: out of memory (prompt)\n");
            return EXIT_ERROR;
        }
        uint64_t key = mix64((uint64_t)seed ^ 0x70726f6d7074ULL); /* "prompt" */
        for (size_t i = 0; i < n_prompt; i++)
            prompt[i] = (int32_t)(mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL) % (uint64_t)cfg->vocab_size);
    }
    bi.n_prompt = (int64_t)n_prompt;
    bi.new_tokens = new_tokens;
    int64_t need = (int64_t)n_prompt + new_tokens;
    bi.max_cache_len = max_cache_len > 0 ? max_cache_len : need;
    if (max_cache_len > 0 && max_cache_len < need) {
        fprintf(stderr, "txc: --max-cache-len %lld is shorter than the prompt + new tokens (%lld)\n",
                (long long)max_cache_len, (long long)need);
        free(prompt);
        txc_model_free(model);
        return EXIT_ERROR;
    }
    if (need > cfg->max_position_embeddings) {
        fprintf(stderr, "txc: the prompt + new tokens (%lld) exceed max_position_embeddings %lld\n", (long long)need,
                (long long)cfg->max_position_embeddings);
        free(prompt);
        txc_model_free(model);
        return EXIT_ERROR;
    }
    cpu_model(bi.cpu, sizeof bi.cpu);
    bi.cores = sysconf(_SC_NPROCESSORS_ONLN);
    bi.threads = txc_threads_get();
    if (n_batch_sizes > 0) { /* --batch: the batched decode rows instead of the table */
        int brc = txc_bench_batch(model, bi.model, batch_sizes, n_batch_sizes, prompt, (int64_t)n_prompt, new_tokens,
                                  bi.max_cache_len, json, bi.cpu, profile, dev->out);
        free(prompt);
        txc_model_free(model);
        return brc;
    }

    if (progress)
        fprintf(stderr, "bench: compute peak...\n");
    bi.peak = txc_measure_peak(strstr(bi.memory_dtype, "bfloat16") != NULL);
    bi.llc_bytes = txc_llc_bytes();

    bench_row rows[2 * MAX_MODES];
    memset(rows, 0, sizeof rows);
    int rc = 0, done = 0;
    double pflops = prefill_flops(model, (int64_t)n_prompt);
    for (int w = 0; w < n_wmodes && rc == 0; w++) {
        if (w > 0) { /* the next weights mode: a fresh load, the peak RSS counted from it */
            txc_model_free(model);
            model = NULL;
            bi.loads[w].hwm_reset = reset_peak_rss();
            mo.weights = wmodes[w];
            if (progress)
                fprintf(stderr, "bench: loading %s (%s)...\n", bi.model, txc_weights_mode_name(wmodes[w]));
            t0 = txc_cli_now_ms();
            if ((synthetic ? txc_model_synthetic_opts(synthetic, dtype, (uint64_t)seed, &mo, &model)
                           : txc_model_load(model_dir, &mo, &model)) != TXC_OK) {
                rc = txc_cli_fail_in(bi.model);
                break;
            }
            bi.loads[w].load_ms = txc_cli_now_ms() - t0;
            bi.loads[w].peak_rss_mb = peak_rss_mb();
            bi.loads[w].info = txc_model_weights_info(model);
            bi.n_loads++;
        }
        for (int i = 0; i < n_modes; i++) {
            bench_row *r = &rows[done];
            if (progress)
                fprintf(stderr, "bench: %s (%s)...\n", modes[i]->name, txc_weights_mode_name(wmodes[w]));
            txc_clear_error();
            reset_peak_rss(); /* this row's generation only (the load's peak is its own) */
            /* tensor-parallel: every device starts the row together (a device still loading, or still
             * measuring the peak, would otherwise show up as the others' first collective) */
            if (txc_model_tp_size(model) > 1 && txc_sync_global_devices() != TXC_OK) {
                rc = txc_cli_fail_in(modes[i]->name);
                break;
            }
            txc_collective_stats_reset();
            if (run_mode(model, modes[i], prompt, (int64_t)n_prompt, new_tokens, max_cache_len, baseline_limit,
                         compile_cache, profile, txc_model_tp_size(model) > 1 ? dev->mesh : NULL, r) != TXC_OK) {
                rc = txc_cli_fail_in(modes[i]->name);
                break;
            }
            r->weights_index = w;
            txc_collective_stats(&r->coll_s, &r->coll_calls, NULL);
            r->peak_rss_mb = peak_rss_mb();
            r->bytes_per_token = decode_bytes(model, modes[i], (int64_t)n_prompt, r->n_new);
            r->decode_gbps = r->bytes_per_token * r->decode_tok_s / 1e9;
            double pms = r->prefill_ms - r->prefill_compile_ms;
            r->prefill_gflops = pms > 0 ? pflops / (pms * 1e6) : 0;
            /* (every in-process device holds its own shards: the process holds them all) */
            r->rss_bound_mb = (double)a->local_devices *
                                  ((double)bi.loads[w].info.param_bytes +
                                   kv_bytes(model, modes[i], bi.max_cache_len, (int64_t)n_prompt + r->n_new)) /
                                  (1 << 20) + bi.base_rss_mb + 64.0;
            done++;
        }
    }
    n_modes = done; /* the rows from here on */
    bool profiled = false;
    for (int i = 0; i < n_modes; i++)
        profiled |= rows[i].decode_prof.n_op > 0;
    if (profile && !profiled)
        bi.profile_note = "--profile: no row ran a compiled decode step (jit-static or jit-dynamic), nothing to profile";
    if (rc == 0 && membw) {
        if (progress)
            fprintf(stderr, "bench: memory bandwidth...\n");
        bi.membw_gbps = measure_membw(MEMBW_BYTES, MEMBW_PASSES);
        for (int w = 0; w < bi.n_loads; w++)
            if (bi.loads[w].info.mode == TXC_WEIGHTS_COPY && bi.loads[w].info.file_bytes > 0 && !bi.fresh_copy_gbps)
                bi.fresh_copy_gbps = measure_fresh_copy(MEMBW_BYTES, 3);
    }
    if (rc == 0) {
        /* The reference: the first row that made every token. */
        int ref = 0;
        for (int i = n_modes - 1; i >= 0; i--)
            if (!rows[i].capped)
                ref = i;
        bool agree = true;
        for (int i = 0; i < n_modes; i++) {
            int64_t k = rows[i].n_new < rows[ref].n_new ? rows[i].n_new : rows[ref].n_new;
            rows[i].compared = k;
            rows[i].tokens_match = memcmp(rows[i].ids, rows[ref].ids, sizeof(int32_t) * (size_t)k) == 0;
            agree &= rows[i].tokens_match;
        }
        const bool tp = txc_model_tp_size(model) > 1;
        txc_bench_tp_info tpi = {0};
        if (tp) /* (every device: the all_reduce is a collective) */
            txc_bench_tp_measure(model, &tpi);
        if (json && dev->lead)
            print_json(&bi, rows, n_modes, agree, ref, tp ? txc_bench_tp_json(model, &tpi) : NULL);
        else if (dev->lead)
            print_table(&bi, rows, n_modes, agree, ref);
        if (!json && tp) {
            txc_bench_tp_header(dev->out, model, &tpi);
            for (int i = 0; i < done; i++)
                txc_bench_tp_row(dev->out, rows[i].mode->name, rows[i].coll_s, rows[i].coll_calls, rows[i].total_s,
                                 rows[i].n_new);
        }
        fflush(dev->out);
    }
    for (int i = 0; i < done; i++)
        free(rows[i].ids);
    free(prompt);
    txc_model_free(model);
    return rc;
}

int txc_cmd_bench(int argc, char **argv)
{
    const char *model_dir = NULL, *synthetic = NULL, *dtype_name = NULL, *prompt_text = NULL, *modes_list = NULL;
    int64_t new_tokens = 256, prompt_tokens = -1, max_cache_len = 0, seed = 0;
    double baseline_limit = 120;
    bool json = false, no_compile_cache = false, membw = false, profile = false;
    int64_t threads = 0, tp = 0, devices = 0;
    const char *compile_cache = NULL, *weights_list = NULL;
    txc_model_options wopts = {0}; /* --mmap / --no-mmap / --no-hugepages */
    int batch_sizes[TXC_BENCH_MAX_BATCHES], n_batch_sizes = 0; /* --batch */
    static const struct option longopts[] = {
        {"model", required_argument, 0, 'm'},        {"synthetic", required_argument, 0, 's'},
        {"dtype", required_argument, 0, 'd'},        {"seed", required_argument, 0, 'S'},
        {"new-tokens", required_argument, 0, 'n'},   {"prompt-tokens", required_argument, 0, 'P'},
        {"prompt", required_argument, 0, 'p'},       {"modes", required_argument, 0, 'M'},
        {"max-cache-len", required_argument, 0, 'L'}, {"baseline-limit", required_argument, 0, 'B'},
        {"json", no_argument, 0, 'j'},               {"help", no_argument, 0, 'h'},
        {"compile-cache", required_argument, 0, 'C'}, {"no-compile-cache", no_argument, 0, 'N'},
        {"compile-cache-max-mb", required_argument, 0, 'X'},
        {"threads", required_argument, 0, 'T'},      {"membw", no_argument, 0, 'W'},
        {"profile", no_argument, 0, 'R'},           {"check-tensors", no_argument, 0, 'K'},
        {"batch", required_argument, 0, 'b'},        {"tp", required_argument, 0, 'Q'},
        {"no-batch-invariant", no_argument, 0, 'I'},
        {"devices", required_argument, 0, 'D'},
        {"weights", required_argument, 0, 'w'},      TXC_CLI_WEIGHTS_LONGOPTS,
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:p:n:h", longopts, NULL)) != -1) {
        if (txc_cli_weights_option(ch, &wopts))
            continue;
        switch (ch) {
        case 'w': weights_list = optarg; break;
        case 'Q':
            if (!txc_cli_parse_tp(optarg, &tp))
                return EXIT_ERROR;
            break;
        case 'D':
            if (!txc_cli_parse_devices(optarg, &devices))
                return EXIT_ERROR;
            break;
        case 'm': model_dir = optarg; break;
        case 's': synthetic = optarg; break;
        case 'd': dtype_name = optarg; break;
        case 'p': prompt_text = optarg; break;
        case 'M': modes_list = optarg; break;
        case 'j': json = true; break;
        case 'C': compile_cache = optarg, no_compile_cache = false; break;
        case 'N': no_compile_cache = true; break;
        case 'X':
            if (!txc_cli_parse_cache_max_mb(optarg, &cache_max_bytes))
                return EXIT_ERROR;
            break;
        case 'W': membw = true; break;
        case 'R': profile = true; break;
        case 'K': wopts.check_tensors = true; break;
        case 'I': txc_ops_set_batch_invariant(false); break;
        case 'b':
            if (!txc_bench_parse_batch_list(optarg, batch_sizes, TXC_BENCH_MAX_BATCHES, &n_batch_sizes))
                return EXIT_ERROR;
            break;
        case 'T':
            if (!txc_cli_parse_threads(optarg, &threads))
                return EXIT_ERROR;
            if (txc_threads_set((int)threads) != TXC_OK)
                return txc_cli_fail_in("--threads");
            break;
        case 'S':
            if (!txc_cli_parse_int("--seed", optarg, 0, &seed))
                return EXIT_ERROR;
            break;
        case 'n':
            if (!txc_cli_parse_range("--new-tokens", optarg, 1, TXC_CLI_MAX_TOKENS, &new_tokens))
                return EXIT_ERROR;
            break;
        case 'P':
            if (!txc_cli_parse_range("--prompt-tokens", optarg, 1, TXC_CLI_MAX_TOKENS, &prompt_tokens))
                return EXIT_ERROR;
            break;
        case 'L':
            if (!txc_cli_parse_range("--max-cache-len", optarg, 1, TXC_CLI_MAX_TOKENS, &max_cache_len))
                return EXIT_ERROR;
            break;
        case 'B':
            if (!parse_seconds("--baseline-limit", optarg, &baseline_limit))
                return EXIT_ERROR;
            break;
        case 'h': usage_bench(stdout); return 0;
        default:
            fprintf(stderr, "txc: option '%s' is unknown or needs a value (see txc bench --help)\n", argv[optind - 1]);
            return EXIT_ERROR;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "txc: unexpected argument '%s' (see txc bench --help)\n", argv[optind]);
        return EXIT_ERROR;
    }
    if (!txc_cli_parallel_setup(tp, devices, &wopts))
        return EXIT_ERROR;
    if (membw && !model_dir && !synthetic) { /* the bandwidth alone */
        double g = measure_membw(MEMBW_BYTES, MEMBW_PASSES);
        if (!(g > 0)) {
            fprintf(stderr, "txc: --membw: out of memory for the 1 GiB buffer\n");
            return EXIT_ERROR;
        }
        char cpu[256];
        cpu_model(cpu, sizeof cpu);
        if (json)
            printf("{\"machine\":{\"cpu\":\"%s\",\"membw_gbps\":%.3f},\"threads\":%d}\n", cpu, g, txc_threads_get());
        else
            printf("memory: read bandwidth %.2f GB/s (%d threads streaming 1 GiB, median of %d passes); %s\n", g,
                   txc_threads_get(), MEMBW_PASSES, cpu);
        return 0;
    }
    if (!model_dir == !synthetic) {
        fprintf(stderr, "txc: bench needs exactly one of --model DIR or --synthetic NAME (see txc bench --help)\n");
        return EXIT_ERROR;
    }
    txc_weights_mode wmodes[2] = {wopts.weights};
    int n_wmodes = 1;
    if (weights_list && !parse_weights(weights_list, wmodes, &n_wmodes))
        return EXIT_ERROR;
    if (weights_list && wopts.weights != TXC_WEIGHTS_DEFAULT) {
        fprintf(stderr, "txc: give --weights LIST or --mmap / --no-mmap, not both\n");
        return EXIT_ERROR;
    }
    if (wmodes[0] == TXC_WEIGHTS_DEFAULT)
        wmodes[0] = TXC_WEIGHTS_DEFAULT_MODE;
    if (synthetic && !txc_synthetic_find(synthetic)) {
        txc_hf_config unused;
        txc_clear_error();
        txc_synthetic_config(synthetic, &unused); /* its message lists the known names */
        return txc_cli_fail_in("--synthetic");
    }
    txc_dtype dtype = TXC_F32;
    if (dtype_name) {
        if (!txc_dtype_parse(dtype_name, &dtype) || !txc_dtype_is_float(dtype)) {
            fprintf(stderr, "txc: --dtype expects f32, bf16 or f16, got '%s'\n", dtype_name);
            return EXIT_ERROR;
        }
    }
    if (prompt_text && synthetic) {
        fprintf(stderr, "txc: --prompt needs --model (a synthetic model has no tokenizer; use --prompt-tokens N)\n");
        return EXIT_ERROR;
    }
    if (prompt_text && prompt_tokens > 0) {
        fprintf(stderr, "txc: give --prompt or --prompt-tokens, not both\n");
        return EXIT_ERROR;
    }
    const bench_mode *modes[MAX_MODES];
    int n_modes = 0;
    if (modes_list) {
        if (!parse_modes(modes_list, modes, &n_modes))
            return EXIT_ERROR;
    } else {
        for (int i = 0; i < N_DEFAULT_MODES; i++)
            modes[n_modes++] = &known_modes[i];
    }
    if (model_dir && !txc_cli_model_dir(model_dir))
        return EXIT_ERROR;

    /* The counts against the model's positions before anything is sized by
     * them (a --prompt-tokens prompt is N ids, the caches hold the prompt
     * and the new tokens): config.json (or the GGUF metadata) alone says. */
    txc_hf_config pre;
    if ((synthetic ? txc_synthetic_config(synthetic, &pre) : txc_model_config_load(model_dir, &pre)) != TXC_OK)
        return txc_cli_fail_in(synthetic ? synthetic : model_dir);
    if (tp > 1 && txc_model_tp_check(&pre, tp) != TXC_OK) /* (once: the other ranks are still quiet) */
        return txc_cli_fail_in(synthetic ? synthetic : model_dir);
    const bool exact = prompt_tokens > 0 || synthetic; /* a text prompt's length is known after tokenizing */
    const int64_t min_need = (prompt_tokens > 0 ? prompt_tokens : synthetic ? 8 : 1) + new_tokens;
    if (min_need > pre.max_position_embeddings) {
        fprintf(stderr, "txc: the prompt + new tokens (%s%lld) exceed max_position_embeddings %lld\n",
                exact ? "" : "at least ", (long long)min_need, (long long)pre.max_position_embeddings);
        return EXIT_ERROR;
    }

    if (max_cache_len > pre.max_position_embeddings) { /* (the generator cuts it there too) */
        fprintf(stderr, "txc: note: --max-cache-len %lld is more than max_position_embeddings %lld: the static "
                        "cache holds %lld tokens\n", (long long)max_cache_len, (long long)pre.max_position_embeddings,
                (long long)pre.max_position_embeddings);
        max_cache_len = pre.max_position_embeddings;
    }

    char default_cache[4096];
    if (no_compile_cache)
        compile_cache = NULL;
    else if (!compile_cache && txc_jit_default_compile_cache(default_cache, sizeof default_cache))
        compile_cache = default_cache;
    if (compile_cache && !*compile_cache)
        compile_cache = NULL;

    txc_cli_unquiet_ranks(); /* (the arguments are read: from here on every rank's own errors) */
    bench_args ba = {.model_dir = model_dir, .synthetic = synthetic, .dtype_name = dtype_name,
                     .prompt_text = prompt_text, .compile_cache = compile_cache, .new_tokens = new_tokens,
                     .prompt_tokens = prompt_tokens, .max_cache_len = max_cache_len, .seed = seed,
                     .baseline_limit = baseline_limit, .json = json, .membw = membw, .profile = profile,
                     .wopts = wopts, .dtype = dtype, .wmodes = {wmodes[0], wmodes[1]}, .n_wmodes = n_wmodes,
                     .batch_sizes = batch_sizes, .n_batch_sizes = n_batch_sizes, .modes = modes, .n_modes = n_modes,
                     .local_devices = devices > 0 ? devices : 1, .base_rss_mb = base_rss_mb()};
    return txc_cli_run_parallel(tp, devices, &wopts, bench_body, &ba);
}
