/*
 * txc — the command line.
 *
 *   txc generate [--model DIR] [--prompt TEXT|- | --prompt-file FILE] [--max-new-tokens N]
 *                [--cache none|dynamic|static] [--max-cache-len N] [--jit|--no-jit] [--verbose]
 *                [--do-sample|--greedy] [--temperature F] [--top-k N] [--top-p F] [--min-p F]
 *                [--repetition-penalty F] [--seed N] [--stop STRING]...
 *                [--compile-cache DIR | --no-compile-cache]
 *   txc chat [--model DIR] [--system TEXT] ...   (tools/chat_cmd.c)
 *   txc bench ..., txc tokenize ...              (tools/bench_cmd.c, tokenize_cmd.c)
 *   txc quantize DIR OUT.gguf --type T           (tools/quantize_cmd.c)
 *
 * Exit status: 0 on success, 2 on any error (one line on stderr).
 */
#include "txc/generate.h"
#include "tools/generate_batch.h"
#include "txc/model.h"
#include "txc/threads.h"
#include "txc/tokenizer.h"
#include "tools/bench_cmd.h"
#include "tools/chat_cmd.h"
#include "tools/cli.h"
#include "tools/inspect_cmd.h"
#include "tools/quantize_cmd.h"
#include "tools/serve_cmd.h"
#include "tools/tokenize_cmd.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>







static void usage_generate(FILE *f)
{
    fprintf(f,
            "usage: txc generate [--model DIR] [--prompt TEXT | --prompt-file FILE] [--max-new-tokens N]\n"
            "                    [--cache none|dynamic|static] [--max-cache-len N] [--jit|--no-jit]\n"
            "                    [--verbose] [--do-sample|--greedy] [--temperature F] [--top-k N]\n"
            "                    [--top-p F] [--min-p F] [--repetition-penalty F] [--seed N]\n"
            "                    [--stop STRING]... [--compile-cache DIR | --no-compile-cache]\n"
            "                    [--dtype f32|bf16|f16] [--threads N] [--mmap|--no-mmap]\n"
            "                    [--prompt-file FILE [--batch-size N] [--json]]\n"
            "\n"
            "Text generation from a Hugging Face model folder (config.json,\n"
            "model.safetensors, tokenizer.json); the continuation is streamed to stdout.\n"
            "  --prompt-file FILE  one prompt a line, generated together (continuous batching over\n"
            "                      --batch-size slots); one output a line in the file's order\n"
            "                      (newlines in it as \\n), each the output of its prompt alone\n"
            "  --batch-size N      slots of --prompt-file, 1 to 32 (default 8)\n"
            "  --json              with --prompt-file: one JSON object a line (index, prompt, text,\n"
            "                      token_ids, finish_reason, prompt_tokens, completion_tokens)\n"
            "  --model DIR         model folder (default: $TXC_MODEL, else " DEFAULT_MODEL_REL ")\n"
            "  --prompt TEXT       prompt (default: empty, i.e. BOS only); \"-\": read it from stdin\n"
            "                      (UTF-8, at most 64 MiB; one final newline dropped, as llama.cpp's --file)\n"
            "  --max-new-tokens N  at most N new tokens (default: generation_config.json, else 256)\n"
            "  --cache KIND        none (re-run the sequence each step), dynamic (DynamicCache),\n"
            "                      static (StaticCache, the default)\n"
            "  --max-cache-len N   StaticCache length (default: prompt + max-new-tokens)\n"
            "  --verbose           timings on stderr: load, prefill, decode tokens/s, cache mode,\n"
            "                      compilations and why they happened\n"
            "  --stop STRING       stop when the text ends with STRING (not printed); repeatable\n"
            TXC_CLI_GEN_HELP);
}

#define MAX_STOP_STRINGS 32
#define TXC_CLI_MAX_BATCH 32 /* TXC_BATCH_MAX_SLOTS */

typedef struct stream_ctx {
    FILE *out; /* stdout, or /dev/null on a device that does not print */
    const txc_tokenizer *tok;
    txc_detok_stream *detok;
    bool failed;
    /* --stop: text not printed yet because it may begin a stop string */
    int n_stop;
    const char *stop[MAX_STOP_STRINGS];
    char *held;
    size_t n_held, cap_held;
    bool stopped; /* a stop string was found: generation ends there */
} stream_ctx;

/* Print streamed text, holding back what could be the start of a stop
 * string; returns false when a stop string is complete (the text before it
 * is printed, the rest dropped). `final`: no more text follows. */
static bool emit(stream_ctx *s, const char *piece, size_t n, bool final)
{
    if (s->n_stop == 0) {
        fwrite(piece, 1, n, s->out);
        fflush(s->out);
        return true;
    }
    if (s->n_held + n > s->cap_held) {
        size_t cap = s->cap_held ? s->cap_held : 64;
        while (cap < s->n_held + n)
            cap *= 2;
        char *p = realloc(s->held, cap);
        if (!p) {
            s->failed = true;
            return false;
        }
        s->held = p;
        s->cap_held = cap;
    }
    memcpy(s->held + s->n_held, piece, n);
    s->n_held += n;
    /* the earliest complete stop string */
    size_t cut = SIZE_MAX;
    for (int i = 0; i < s->n_stop; i++) {
        size_t m = strlen(s->stop[i]);
        for (size_t j = 0; j + m <= s->n_held && j < cut; j++)
            if (memcmp(s->held + j, s->stop[i], m) == 0) {
                cut = j;
                break;
            }
    }
    if (cut != SIZE_MAX) {
        fwrite(s->held, 1, cut, s->out);
        fflush(s->out);
        s->n_held = 0;
        s->stopped = true;
        return false;
    }
    /* keep the longest tail that is a proper prefix of a stop string */
    size_t keep = 0;
    for (int i = 0; i < s->n_stop && !final; i++) {
        size_t m = strlen(s->stop[i]);
        for (size_t k = m - 1 < s->n_held ? m - 1 : s->n_held; k > keep; k--)
            if (memcmp(s->held + s->n_held - k, s->stop[i], k) == 0) {
                keep = k;
                break;
            }
    }
    fwrite(s->held, 1, s->n_held - keep, s->out);
    fflush(s->out);
    memmove(s->held, s->held + s->n_held - keep, keep);
    s->n_held = keep;
    return true;
}

static bool print_token(void *ctx, int32_t id)
{
    stream_ctx *s = ctx;
    const char *piece;
    size_t n;
    if (txc_detok_stream_put(s->detok, id, &piece, &n) != TXC_OK) {
        txc_cli_name_hole(s->tok, id);
        s->failed = true;
        return false;
    }
    return emit(s, piece, n, false);
}

typedef struct generate_args {
    const char *model_dir, *prompt, *prompt_file;
    size_t prompt_len;
    const char *file_text; /* --prompt-file -: stdin's text, read once for every device and rank */
    size_t file_len;
    txc_cache_kind cache;
    int64_t max_new_tokens, max_cache_len, batch_size;
    bool verbose, json;
    const txc_cli_gen_flags *gf;
    const stream_ctx *sc; /* the --stop strings */
} generate_args;

/* Load, generate, print: what every device runs (SPMD), one of them printing. */
static int generate_body(void *ctx, const txc_cli_device *dev)
{
    const generate_args *a = ctx;
    txc_model *model;
    txc_tokenizer *tok;
    txc_generation_config gcfg;
    double load_ms;
    txc_cli_gen_flags gf = *a->gf; /* this device's copy: its mesh */
    gf.mopts.tp_mesh = dev->mesh;
    stream_ctx sc = *a->sc;
    sc.out = dev->out;
    FILE *err = dev->lead ? stderr : dev->out; /* notes and --verbose: one device prints them */
    const char *model_dir = a->model_dir, *prompt = a->prompt, *prompt_file = a->prompt_file;
    const size_t prompt_len = a->prompt_len;
    const txc_cache_kind cache = a->cache;
    const int64_t max_new_tokens = a->max_new_tokens, max_cache_len = a->max_cache_len, batch_size = a->batch_size;
    const bool verbose = a->verbose && dev->lead, json = a->json;
    if (!txc_cli_load_model(model_dir, &gf.mopts, &model, &tok, &gcfg, &load_ms))
        return EXIT_ERROR;

    if (dev->lead)
        txc_cli_note_max_cache_len(max_cache_len, cache, txc_model_max_positions(model));
    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    txc_generate_options opts = txc_generate_default_options(model, model_dir);
    opts.cache = cache;
    opts.max_cache_len = max_cache_len;
    txc_cli_gen_flags_apply(&gf, &opts);
    sc.tok = tok;
    if (prompt_file) {
        txc_cli_batch_args ba = {.prompt_file = prompt_file, .text = a->file_text, .text_len = a->file_len,
                                 .batch_size = batch_size, .max_cache_len = max_cache_len,
                                 .json = json, .verbose = verbose, .max_new_tokens = max_new_tokens, .gcfg = &gcfg,
                                 .stop = sc.stop, .n_stop = sc.n_stop, .out = dev->out, .err = err};
        if (dev->lead)
            txc_cli_note_no_compile_cache(&gf, "generate --prompt-file");
        if (verbose)
            txc_cli_print_load(stderr, model, load_ms);
        rc = txc_cli_generate_file(model, tok, &opts, &ba);
        txc_tokenizer_free(tok);
        txc_model_free(model);
        return rc;
    }
    sc.detok = txc_detok_stream_new(tok, true);
    opts.on_token = print_token;
    opts.ctx = &sc;
    txc_generate_result res = {0};
    txc_generator *gen = txc_cli_generator_new(model, &gf, opts.jit);
    const char *compile_cache = gf.compile_cache;
    bool encoded = gen && sc.detok && txc_tokenizer_encode(tok, prompt, prompt_len, true, &ids, &n_ids) == TXC_OK;
    if (encoded)
        opts.max_new_tokens = txc_cli_max_new_tokens(max_new_tokens, &gcfg, (int64_t)n_ids, opts.max_new_tokens);
    if (!encoded) {
        rc = txc_cli_fail("prompt");
    } else if (txc_generator_run(gen, ids, (int64_t)n_ids, &opts, &res) != TXC_OK || sc.failed) {
        fflush(sc.out);
        rc = txc_cli_fail("generate");
    } else {
        const char *piece;
        size_t n;
        if (!sc.stopped && txc_detok_stream_flush(sc.detok, &piece, &n) == TXC_OK)
            emit(&sc, piece, n, true);
        else if (!sc.stopped)
            emit(&sc, "", 0, true);
        fputc('\n', sc.out);
        if (fflush(sc.out) != 0 || ferror(sc.out)) {
            fprintf(err, "txc: writing the output failed\n");
            rc = EXIT_ERROR;
        }
        if (dev->lead)
            txc_cli_warn_compile_cache(gen); /* after the text's line */
        if (!sc.stopped && res.stop_reason && (strcmp(res.stop_reason, "max_cache_len") == 0 ||
                                               strcmp(res.stop_reason, "max_position_embeddings") == 0)) {
            /* a cache already at max_position_embeddings cannot grow: no advice to raise it */
            const int64_t seq = (int64_t)n_ids + res.n_new;
            const bool can_grow = strcmp(res.stop_reason, "max_cache_len") == 0 && seq < txc_model_max_positions(model);
            fprintf(err, "txc: note: generation stopped at %s (%lld tokens)%s\n", res.stop_reason, (long long)seq,
                    can_grow ? "; raise --max-cache-len"
                             : strcmp(res.stop_reason, "max_cache_len") == 0 ? ", the model's max_position_embeddings"
                                                                             : "");
        }
        if (verbose) {
            int64_t n_decode = res.n_new > 1 ? res.n_new - 1 : 0;
            txc_cli_print_load(stderr, model, load_ms);
            fprintf(stderr, "prefill: %.2f ms (%zu prompt tokens)\n", res.prefill_ms, n_ids);
            if (n_decode > 0)
                fprintf(stderr, "decode: %.1f tokens/s (%lld tokens in %.1f ms)\n",
                        res.decode_ms > 0 ? (double)n_decode * 1e3 / res.decode_ms : 0.0, (long long)n_decode,
                        res.decode_ms);
            else
                fprintf(stderr, "decode: no decode step (the one new token came from the prefill)\n");
            if (cache == TXC_CACHE_STATIC)
                fprintf(stderr, "cache: static (max_cache_len %lld)\n", (long long)res.max_cache_len);
            else
                fprintf(stderr, "cache: %s\n", txc_cache_kind_name(cache));
            fprintf(stderr, "stop: %s\n", sc.stopped ? "stop string" : res.stop_reason);
            txc_cli_print_sampling(stderr, &opts);
            if (opts.jit) {
                txc_jit_stats ps[2] = {txc_generator_jit_stats(gen, 0), txc_generator_jit_stats(gen, 1)};
                /* a plan loaded from the compile cache is not a compilation */
                fprintf(stderr, "jit: %lld prefill + %lld decode plans (%llu of them loaded from the compile cache), "
                                "%.1f ms\n",
                        (long long)res.prefill_compilations, (long long)res.decode_compilations,
                        (unsigned long long)(ps[0].cache_loads + ps[1].cache_loads), res.compile_ms);
                for (int w = 0; w < 2; w++) {
                    txc_jit_stats js = txc_generator_jit_stats(gen, w);
                    if (js.misses)
                        fprintf(stderr, "jit %s: %d ops traced, %d kernels after passes (%d groups of sibling "
                                        "linears), arena %.1f KiB, last recompile: %s\n",
                                w ? "decode" : "prefill", js.nodes_traced, js.nodes_compiled, js.linear_groups,
                                (double)js.arena_bytes / 1024.0, txc_generator_last_recompile_reason(gen, w));
                }
                txc_jit_stats cs[2] = {txc_generator_jit_stats(gen, 0), txc_generator_jit_stats(gen, 1)};
                struct stat cst;
                if (compile_cache && *compile_cache && stat(compile_cache, &cst) == 0 && !S_ISDIR(cst.st_mode))
                    fprintf(stderr, "compile cache: %s is not a directory: nothing cached\n", compile_cache);
                else if (compile_cache && *compile_cache)
                    fprintf(stderr, "compile cache: %s: %llu plans loaded, %llu saved, %llu files rejected (corrupt, "
                                    "stale or not a regular file), %llu not written, %llu evicted (size cap)\n",
                            compile_cache, (unsigned long long)(cs[0].cache_loads + cs[1].cache_loads),
                            (unsigned long long)(cs[0].cache_saves + cs[1].cache_saves),
                            (unsigned long long)(cs[0].cache_rejects + cs[1].cache_rejects),
                            (unsigned long long)(cs[0].cache_errors + cs[1].cache_errors),
                            (unsigned long long)(cs[0].cache_evictions + cs[1].cache_evictions));
                else
                    fprintf(stderr, "compile cache: off\n");
            } else {
                fprintf(stderr, "jit: off (eager)\n");
            }
        }
    }
    txc_generate_result_free(&res);
    txc_generator_free(gen);
    txc_detok_stream_free(sc.detok);
    free(sc.held);
    free(ids);
    txc_tokenizer_free(tok);
    txc_model_free(model);
    return rc;
}

static int cmd_generate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = "", *cache_name = NULL, *prompt_file = NULL;
    bool prompt_given = false;
    int64_t max_new_tokens = -1, max_cache_len = 0;
    bool verbose = false;
    txc_cli_gen_flags gf; /* decoding and running flags (shared with chat) */
    txc_cli_gen_flags_init(&gf);
    stream_ctx sc = {0};
    enum { OPT_STOP = 256, OPT_PROMPT_FILE, OPT_BATCH_SIZE, OPT_JSON };
    int64_t batch_size = 8;
    bool json = false;
    static const struct option longopts[] = {
        TXC_CLI_GEN_LONGOPTS,
        {"stop", required_argument, 0, OPT_STOP},
        {"prompt-file", required_argument, 0, OPT_PROMPT_FILE}, {"batch-size", required_argument, 0, OPT_BATCH_SIZE},
        {"json", no_argument, 0, OPT_JSON},
        {"model", required_argument, 0, 'm'},          {"prompt", required_argument, 0, 'p'},
        {"max-new-tokens", required_argument, 0, 'n'}, {"cache", required_argument, 0, 'c'},
        {"max-cache-len", required_argument, 0, 'L'},  {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0; /* one line of our own instead of getopt's */
    int ch;
    while ((ch = getopt_long(argc, argv, "m:p:n:c:L:vh", longopts, NULL)) != -1) {
        /* "--cache --max-new-tokens 3": the next option was taken as the value */
        int taken = txc_cli_gen_getopt(&gf, ch, argv, ch == 'p' || ch == OPT_STOP);
        if (taken < 0)
            return EXIT_ERROR;
        if (taken)
            continue;
        switch (ch) {
        case 'm': model_dir = optarg; break;
        case 'p': prompt = optarg, prompt_given = true; break;
        case OPT_PROMPT_FILE: prompt_file = optarg; break;
        case OPT_JSON: json = true; break;
        case OPT_BATCH_SIZE:
            if (!txc_cli_parse_int("--batch-size", optarg, 1, &batch_size))
                return EXIT_ERROR;
            if (batch_size > TXC_CLI_MAX_BATCH) {
                fprintf(stderr, "txc: --batch-size must be 1 to %d, got %lld\n", TXC_CLI_MAX_BATCH,
                        (long long)batch_size);
                return EXIT_ERROR;
            }
            break;
        case 'n':
            if (!txc_cli_parse_range("--max-new-tokens", optarg, 1, TXC_CLI_MAX_TOKENS, &max_new_tokens))
                return EXIT_ERROR;
            break;
        case 'c': cache_name = optarg; break;
        case 'L':
            if (!txc_cli_parse_range("--max-cache-len", optarg, 1, TXC_CLI_MAX_TOKENS, &max_cache_len))
                return EXIT_ERROR;
            break;
        case 'v': verbose = true; break;
        case OPT_STOP:
            if (!*optarg) {
                fprintf(stderr, "txc: --stop expects a non-empty string\n");
                return EXIT_ERROR;
            }
            if (sc.n_stop == MAX_STOP_STRINGS) {
                fprintf(stderr, "txc: at most %d --stop strings\n", MAX_STOP_STRINGS);
                return EXIT_ERROR;
            }
            sc.stop[sc.n_stop++] = optarg;
            break;
        case 'h': usage_generate(stdout); return 0;
        default: return txc_cli_unknown_option(argv, "generate");
        }
    }
    if (optind < argc) {
        fprintf(stderr, "txc: unexpected argument '%s' (the prompt goes after --prompt)\n", argv[optind]);
        return EXIT_ERROR;
    }
    txc_cache_kind cache = TXC_CACHE_STATIC;
    if (cache_name && txc_cache_kind_parse(cache_name, &cache) != TXC_OK)
        return txc_cli_fail("--cache");
    if (prompt_given && prompt_file) {
        fprintf(stderr, "txc: give --prompt or --prompt-file, not both\n");
        return EXIT_ERROR;
    }
    if (prompt_file && cache != TXC_CACHE_STATIC) {
        fprintf(stderr, "txc: --prompt-file runs its prompts on a StaticCache's slots (no --cache %s)\n", cache_name);
        return EXIT_ERROR;
    }
    if (!prompt_file && json) {
        fprintf(stderr, "txc: --json needs --prompt-file (the output of one prompt is streamed as text)\n");
        return EXIT_ERROR;
    }
    /* The prompt: the argument, or stdin ("--prompt -", "--prompt-file -"),
     * read once after the job is made (under mpirun rank 0 reads it, as
     * mpirun gives stdin to rank 0 alone, and broadcasts it; in-process
     * devices share it); a --prompt-file FILE is read by txc_cli_generate_file */
    char *prompt_buf = NULL;
    size_t prompt_len = strlen(prompt);
    const bool from_stdin = prompt_file ? strcmp(prompt_file, "-") == 0 : strcmp(prompt, "-") == 0;
    if (!prompt_file && !from_stdin && !txc_cli_text_ok(prompt, prompt_len)) {
        fprintf(stderr, "txc: --prompt is not UTF-8 text\n");
        return EXIT_ERROR;
    }
    if (!(model_dir = txc_cli_model_dir(model_dir)))
        return EXIT_ERROR;
    if (!txc_cli_parallel_setup(gf.tp, gf.devices, &gf.mopts) || !txc_cli_tp_config_ok(model_dir, gf.tp))
        return EXIT_ERROR;
    if (from_stdin) {
        bool read_ok = true;
        if (txc_cli_reads_stdin())
            read_ok = (prompt_buf = txc_cli_read_prompt(prompt_file ? "--prompt-file" : "--prompt -", "-",
                                                        TXC_CLI_MAX_PROMPT_BYTES, &prompt_len)) != NULL;
        if (!txc_cli_share_input(&prompt_buf, &prompt_len, read_ok)) {
            free(prompt_buf);
            return EXIT_ERROR;
        }
        if (!prompt_file)
            prompt = prompt_buf;
        else if (prompt_len == 0) { /* (said here, while the other ranks are quiet: once, not per device) */
            fprintf(stderr, "txc: --prompt-file: '-' has no prompt (one prompt a line)\n");
            free(prompt_buf);
            return EXIT_ERROR;
        }
    }
    txc_cli_unquiet_ranks();

    generate_args ga = {.model_dir = model_dir, .prompt = prompt, .prompt_len = prompt_len,
                        .file_text = prompt_file && from_stdin ? prompt_buf : NULL,
                        .file_len = prompt_file && from_stdin ? prompt_len : 0, .cache = cache,
                        .max_new_tokens = max_new_tokens, .max_cache_len = max_cache_len, .verbose = verbose,
                        .gf = &gf, .sc = &sc, .prompt_file = prompt_file, .batch_size = batch_size, .json = json};
    int rc = txc_cli_run_parallel(gf.tp, gf.devices, &gf.mopts, generate_body, &ga);
    free(prompt_buf);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: txc <command> [options]\n"
               "commands:\n"
               "  generate   greedy text generation from a Hugging Face model folder\n"
               "  chat       a conversation with a chat model (its chat template; KV cache kept)\n"
               "  bench      the article's table: each cache mode, eager and compiled, timed\n"
               "  tokenize   text to token ids and pieces (--decode: ids to text; --bench: speed)\n"
               "  inspect    a GGUF file's metadata and tensors, or a model folder's (gguf-dump)\n"
               "  quantize   a Hugging Face model folder to a GGUF file with quantized weights\n"
               "  serve      an OpenAI-compatible HTTP server (continuous batching over --parallel slots)\n"
               "run 'txc <command> --help' for its options; 'txc --version' for the version\n");
}

/* The environment's knobs, checked once: a value that is not what the
 * library reads would otherwise be ignored without a word. */
static bool env_ok(void)
{
    const char *t = getenv("TXC_THREADS"), *l = getenv("TXC_SIMD_LEVEL");
    if (t && *t) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 1 || v > TXC_MAX_THREADS) {
            fprintf(stderr, "txc: TXC_THREADS must be an integer from 1 to %d (got '%s'); unset it for the default\n",
                    TXC_MAX_THREADS, t);
            return false;
        }
    }
    if (l && *l && !(l[0] >= '0' && l[0] <= '3' && !l[1])) {
        fprintf(stderr, "txc: TXC_SIMD_LEVEL must be 0 (portable), 1 (AVX2), 2 (AVX-512) or 3 (AMX) (got '%s')\n", l);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    txc_cli_quiet_ranks(); /* under mpirun: rank 0 alone prints an argument error */
    if (!env_ok())
        return EXIT_ERROR;
    if (argc >= 2 && argv[1][0] != '-' && strcmp(argv[1], "generate") != 0 && strcmp(argv[1], "bench") != 0 &&
        strcmp(argv[1], "serve") != 0 &&
        !txc_cli_mpirun_ok(argv[1])) /* (the others run one copy per process) */
        return EXIT_ERROR;
    if (argc < 2) {
        fprintf(stderr, "txc: no command given (commands: generate, chat, bench, tokenize, serve, inspect, quantize; see txc --help)\n");
        return EXIT_ERROR;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("txc %s\n", TXC_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "generate") == 0)
        return txc_cli_exit_status(cmd_generate(argc - 1, argv + 1));
    if (strcmp(argv[1], "chat") == 0)
        return txc_cmd_chat(argc - 1, argv + 1);
    if (strcmp(argv[1], "tokenize") == 0)
        return txc_cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(argv[1], "inspect") == 0)
        return txc_cmd_inspect(argc - 1, argv + 1);
    if (strcmp(argv[1], "quantize") == 0)
        return txc_cmd_quantize(argc - 1, argv + 1);
    if (strcmp(argv[1], "serve") == 0)
        return txc_cli_exit_status(txc_cmd_serve(argc - 1, argv + 1));
    if (strcmp(argv[1], "bench") == 0) {
        int rc = txc_cmd_bench(argc - 1, argv + 1);
        if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) { /* (a full disk, a closed pipe) */
            fprintf(stderr, "txc: writing the output failed\n");
            rc = EXIT_ERROR;
        }
        return txc_cli_exit_status(rc);
    }
    fprintf(stderr, "txc: unknown command '%s' (commands: generate, chat, bench, tokenize, serve, inspect, quantize; see txc --help)\n", argv[1]);
    return EXIT_ERROR;
}
