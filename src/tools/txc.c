/*
 * txc — the command line.
 *
 *   txc generate [--model DIR] [--prompt TEXT] [--max-new-tokens N]
 *                [--cache none|dynamic|static] [--max-cache-len N] [--jit|--no-jit] [--verbose]
 *
 * Exit status: 0 on success, 2 on any error (one line on stderr).
 */
#include "txc/generate.h"
#include "txc/model.h"
#include "txc/tokenizer.h"
#include "tools/bench_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EXIT_ERROR 2
#define DEFAULT_MODEL_REL "../shared/models/stories260K"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what)
{
    fprintf(stderr, "txc: %s%s%s\n", what, *txc_last_error() ? ": " : "", txc_last_error());
    return EXIT_ERROR;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* --model, else $TXC_MODEL, else ../shared/models/stories260K from the
 * current directory (the repository root in the README's commands). */
static const char *default_model(void)
{
    const char *env = getenv("TXC_MODEL");
    if (env && *env)
        return env;
    return is_dir(DEFAULT_MODEL_REL) ? DEFAULT_MODEL_REL : NULL;
}

static bool parse_int(const char *flag, const char *s, int64_t min, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min) {
        fprintf(stderr, "txc: %s expects an integer >= %lld, got '%s'\n", flag, (long long)min, s);
        return false;
    }
    *out = v;
    return true;
}

static void usage_generate(FILE *f)
{
    fprintf(f,
            "usage: txc generate [--model DIR] [--prompt TEXT] [--max-new-tokens N]\n"
            "                    [--cache none|dynamic|static] [--max-cache-len N] [--jit|--no-jit]\n"
            "                    [--verbose]\n"
            "\n"
            "Greedy generation from a Hugging Face model folder (config.json,\n"
            "model.safetensors, tokenizer.json); the continuation is streamed to stdout.\n"
            "  --model DIR         model folder (default: $TXC_MODEL, else " DEFAULT_MODEL_REL ")\n"
            "  --prompt TEXT       prompt (default: empty, i.e. BOS only)\n"
            "  --max-new-tokens N  at most N new tokens (default: generation_config.json, else 256)\n"
            "  --cache KIND        none (re-run the sequence each step), dynamic (DynamicCache),\n"
            "                      static (StaticCache, the default)\n"
            "  --max-cache-len N   StaticCache length (default: prompt + max-new-tokens)\n"
            "  --jit, --no-jit     compile the prefill and decode steps into cached plans (default)\n"
            "                      or run every op eagerly\n"
            "  --verbose           timings on stderr: load, prefill, decode tokens/s, cache mode,\n"
            "                      compilations and why they happened\n");
}

typedef struct stream_ctx {
    txc_detok_stream *detok;
    bool failed;
} stream_ctx;

static bool print_token(void *ctx, int32_t id)
{
    stream_ctx *s = ctx;
    const char *piece;
    size_t n;
    if (txc_detok_stream_put(s->detok, id, &piece, &n) != TXC_OK) {
        s->failed = true;
        return false;
    }
    fwrite(piece, 1, n, stdout);
    fflush(stdout);
    return true;
}

static int cmd_generate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = "", *cache_name = NULL;
    int64_t max_new_tokens = -1, max_cache_len = 0;
    bool verbose = false;
    int jit = -1;
    static const struct option longopts[] = {
        {"jit", no_argument, 0, 'J'},                  {"no-jit", no_argument, 0, 'E'},
        {"model", required_argument, 0, 'm'},          {"prompt", required_argument, 0, 'p'},
        {"max-new-tokens", required_argument, 0, 'n'}, {"cache", required_argument, 0, 'c'},
        {"max-cache-len", required_argument, 0, 'L'},  {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0; /* one line of our own instead of getopt's */
    int ch;
    while ((ch = getopt_long(argc, argv, "m:p:n:c:L:vh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'm': model_dir = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n':
            if (!parse_int("--max-new-tokens", optarg, 1, &max_new_tokens))
                return EXIT_ERROR;
            break;
        case 'c': cache_name = optarg; break;
        case 'L':
            if (!parse_int("--max-cache-len", optarg, 1, &max_cache_len))
                return EXIT_ERROR;
            break;
        case 'v': verbose = true; break;
        case 'J': jit = 1; break;
        case 'E': jit = 0; break;
        case 'h': usage_generate(stdout); return 0;
        default:
            fprintf(stderr, "txc: option '%s' is unknown or needs a value (see txc generate --help)\n",
                    argv[optind - 1]);
            return EXIT_ERROR;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "txc: unexpected argument '%s' (the prompt goes after --prompt)\n", argv[optind]);
        return EXIT_ERROR;
    }
    txc_cache_kind cache = TXC_CACHE_STATIC;
    if (cache_name && txc_cache_kind_parse(cache_name, &cache) != TXC_OK)
        return fail("--cache");
    if (!model_dir && !(model_dir = default_model())) {
        fprintf(stderr, "txc: no model given: pass --model DIR (a Hugging Face model folder) or set TXC_MODEL; "
                        "the default %s was not found\n", DEFAULT_MODEL_REL);
        return EXIT_ERROR;
    }
    if (!is_dir(model_dir)) {
        fprintf(stderr, "txc: model folder %s does not exist\n", model_dir);
        return EXIT_ERROR;
    }

    double t0 = now_ms();
    txc_model *model = NULL;
    txc_tokenizer *tok = NULL;
    if (txc_model_load(model_dir, NULL, &model) != TXC_OK)
        return fail(model_dir);
    if (txc_tokenizer_load(model_dir, &tok) != TXC_OK) {
        txc_model_free(model);
        return fail(model_dir);
    }
    double load_ms = now_ms() - t0;

    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    txc_generate_options opts = txc_generate_default_options(model, model_dir);
    opts.cache = cache;
    opts.max_cache_len = max_cache_len;
    if (max_new_tokens > 0)
        opts.max_new_tokens = max_new_tokens;
    if (jit >= 0)
        opts.jit = jit;
    stream_ctx sc = {.detok = txc_detok_stream_new(tok, true)};
    opts.on_token = print_token;
    opts.ctx = &sc;
    txc_generate_result res = {0};
    txc_generator *gen = txc_generator_new(model);
    if (!gen || !sc.detok || txc_tokenizer_encode(tok, prompt, strlen(prompt), true, &ids, &n_ids) != TXC_OK) {
        rc = fail("prompt");
    } else if (txc_generator_run(gen, ids, (int64_t)n_ids, &opts, &res) != TXC_OK || sc.failed) {
        fflush(stdout);
        rc = fail("generate");
    } else {
        const char *piece;
        size_t n;
        if (txc_detok_stream_flush(sc.detok, &piece, &n) == TXC_OK)
            fwrite(piece, 1, n, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        if (verbose) {
            int64_t n_decode = res.n_new > 1 ? res.n_new - 1 : 0;
            fprintf(stderr, "load: %.1f ms\n", load_ms);
            fprintf(stderr, "prefill: %.2f ms (%zu prompt tokens)\n", res.prefill_ms, n_ids);
            fprintf(stderr, "decode: %.1f tokens/s (%lld tokens in %.1f ms)\n",
                    res.decode_ms > 0 ? (double)n_decode * 1e3 / res.decode_ms : 0.0, (long long)n_decode,
                    res.decode_ms);
            if (cache == TXC_CACHE_STATIC)
                fprintf(stderr, "cache: static (max_cache_len %lld)\n", (long long)res.max_cache_len);
            else
                fprintf(stderr, "cache: %s\n", txc_cache_kind_name(cache));
            fprintf(stderr, "stop: %s\n", res.stop_reason);
            if (opts.jit) {
                fprintf(stderr, "jit: %lld prefill + %lld decode compilations, %.1f ms\n",
                        (long long)res.prefill_compilations, (long long)res.decode_compilations, res.compile_ms);
                for (int w = 0; w < 2; w++) {
                    txc_jit_stats js = txc_generator_jit_stats(gen, w);
                    if (js.misses)
                        fprintf(stderr, "jit %s: %d ops traced, %d kernels after passes, arena %.1f KiB, "
                                        "last recompile: %s\n",
                                w ? "decode" : "prefill", js.nodes_traced, js.nodes_compiled,
                                (double)js.arena_bytes / 1024.0, txc_generator_last_recompile_reason(gen, w));
                }
            } else {
                fprintf(stderr, "jit: off (eager)\n");
            }
        }
    }
    txc_generate_result_free(&res);
    txc_generator_free(gen);
    txc_detok_stream_free(sc.detok);
    free(ids);
    txc_tokenizer_free(tok);
    txc_model_free(model);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: txc <command> [options]\n"
               "commands:\n"
               "  generate   greedy text generation from a Hugging Face model folder\n"
               "  bench      the article's table: each cache mode, eager and compiled, timed\n"
               "run 'txc <command> --help' for its options; 'txc --version' for the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "txc: no command given (commands: generate, bench; see txc --help)\n");
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
        return cmd_generate(argc - 1, argv + 1);
    if (strcmp(argv[1], "bench") == 0)
        return txc_cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "txc: unknown command '%s' (commands: generate, bench; see txc --help)\n", argv[1]);
    return EXIT_ERROR;
}
