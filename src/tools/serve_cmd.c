/* txc serve: an OpenAI-compatible HTTP server over one model
 * (include/txc/serve.h). The main thread loads the model, starts the
 * server and waits for SIGINT or SIGTERM (blocked in every thread, taken
 * with sigwait); then the server stops accepting, finishes what runs (up to
 * a grace time, then cancels it) and the process exits 0. */
#include "tools/serve_cmd.h"
#include "tools/cli.h"
#include "txc/batch.h"
#include "txc/chat_template.h"
#include "txc/ops.h"
#include "txc/serve.h"
#include "txc/shard.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRACE_MS 5000

static void usage_serve(FILE *f)
{
    fprintf(f,
            "usage: txc serve [--model DIR] [--host ADDR] [--port N] [--parallel N] [--max-cache-len N]\n"
            "                 [--api-key KEY] [--max-queue N] [--max-tokens N] [--alias NAME] [--timeout S]\n"
            "                 [--verbose] [--no-batch-invariant]\n"
            "                 [--do-sample|--greedy] [--temperature F] [--top-k N] [--top-p F] [--min-p F]\n"
            "                 [--repetition-penalty F] [--seed N] [--jit|--no-jit] [--dtype f32|bf16|f16]\n"
            "                 [--threads N] [--mmap|--no-mmap]\n"
            "\n"
            "An OpenAI-compatible HTTP server (GET /health, GET /v1/models, POST /v1/completions,\n"
            "POST /v1/chat/completions, GET /metrics) with continuous batching: --parallel slots\n"
            "decode together, a request takes a free slot between two steps. SIGINT or SIGTERM\n"
            "stops it: no new requests, running ones finish (up to 5 s), exit status 0.\n"
            "mpirun -np N txc serve --tp N: tensor-parallel, rank 0 serves HTTP and the other ranks\n"
            "run the same batch steps on their shards (SIGTERM to rank 0 stops them all).\n"
            "  --model DIR         model folder (default: $TXC_MODEL, else " DEFAULT_MODEL_REL ")\n"
            "  --host ADDR         address to listen on (default 127.0.0.1)\n"
            "  --port N            TCP port (default 8080; 0: any free port, printed at the start)\n"
            "  --parallel N        slots, requests decoded together, 1 to %d (default 8)\n"
            "  --max-cache-len N   tokens per slot, prompt + completion (default: 4096, at most\n"
            "                      max_position_embeddings)\n"
            "  --api-key KEY       require 'Authorization: Bearer KEY' (GET /health excepted)\n"
            "  --max-queue N       requests waiting for a slot before 503 (default 64)\n"
            "  --max-tokens N      a request's max_tokens when it gives none (default:\n"
            "                      generation_config.json's max_new_tokens, else 256)\n"
            "  --alias NAME        the model's name in /v1/models and the responses (default: the\n"
            "                      folder's name); requests naming another model get 404\n"
            "  --timeout S         close a connection that sends or reads nothing for S seconds\n"
            "                      (a slow or stalled client; default 30); a stream with nothing\n"
            "                      to send for about that long (queued behind busy slots) ends\n"
            "                      with an error event (503, code \"timeout\") and [DONE]\n"
            "  --verbose           one line per request on stderr\n"
            "  --no-batch-invariant  let a batch of 2..32 rows take the GEMM whose summation order\n"
            "                      depends on the batch (default: every request's logits are those it\n"
            "                      gets alone, whatever else is decoded with it)\n"
            "Sampling defaults of the requests (a request's own fields override them):\n" TXC_CLI_GEN_HELP,
            TXC_BATCH_MAX_SLOTS);
}

static const char *base_name(const char *dir, char *buf, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    snprintf(buf, cap, "%.*s", (int)(n - b), dir + b);
    return buf;
}

/* mpirun -np N txc serve --tp N, ranks 1..N-1: their shard of the model,
 * the batch steps rank 0 broadcasts (txc_serve_follow), until it stops. */
static int follow(const char *model_dir, const txc_cli_gen_flags *gf)
{
    txc_model *model;
    txc_tokenizer *tok;
    txc_generation_config gcfg;
    double load_ms;
    txc_model_options mo = gf->mopts;
    if (!txc_cli_load_model(model_dir, &mo, &model, &tok, &gcfg, &load_ms))
        return EXIT_ERROR;
    int rc = txc_serve_follow(model) == TXC_OK ? 0 : txc_cli_fail("serve --tp");
    txc_tokenizer_free(tok);
    txc_model_free(model);
    return rc;
}

int txc_cmd_serve(int argc, char **argv)
{
    const char *model_dir = NULL, *alias = NULL;
    txc_serve_options so = txc_serve_default_options();
    int64_t v, max_tokens = -1;
    txc_cli_gen_flags gf;
    txc_cli_gen_flags_init(&gf);
    enum { OPT_HOST = 256, OPT_PORT, OPT_PARALLEL, OPT_API_KEY, OPT_MAX_QUEUE, OPT_ALIAS, OPT_MAX_TOKENS, OPT_TIMEOUT,
           OPT_NO_BATCH_INVARIANT };
    static const struct option longopts[] = {
        TXC_CLI_GEN_LONGOPTS,
        {"model", required_argument, 0, 'm'},
        {"host", required_argument, 0, OPT_HOST},
        {"port", required_argument, 0, OPT_PORT},
        {"parallel", required_argument, 0, OPT_PARALLEL},
        {"max-cache-len", required_argument, 0, 'L'},
        {"api-key", required_argument, 0, OPT_API_KEY},
        {"max-queue", required_argument, 0, OPT_MAX_QUEUE},
        {"max-tokens", required_argument, 0, OPT_MAX_TOKENS},
        {"alias", required_argument, 0, OPT_ALIAS},
        {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"verbose", no_argument, 0, 'v'},
        {"no-batch-invariant", no_argument, 0, OPT_NO_BATCH_INVARIANT},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:L:vh", longopts, NULL)) != -1) {
        int taken = txc_cli_gen_getopt(&gf, ch, argv, false);
        if (taken < 0)
            return EXIT_ERROR;
        if (taken)
            continue;
        switch (ch) {
        case 'm': model_dir = optarg; break;
        case OPT_HOST: so.host = optarg; break;
        case OPT_PORT:
            if (!txc_cli_parse_int("--port", optarg, 0, &v))
                return EXIT_ERROR;
            if (v > 65535) {
                fprintf(stderr, "txc: --port must be at most 65535, got %lld\n", (long long)v);
                return EXIT_ERROR;
            }
            so.port = (int)v;
            break;
        case OPT_PARALLEL:
            if (!txc_cli_parse_int("--parallel", optarg, 1, &v))
                return EXIT_ERROR;
            if (v > TXC_BATCH_MAX_SLOTS) {
                fprintf(stderr, "txc: --parallel must be at most %d, got %lld\n", TXC_BATCH_MAX_SLOTS, (long long)v);
                return EXIT_ERROR;
            }
            so.parallel = (int)v;
            break;
        case 'L':
            if (!txc_cli_parse_int("--max-cache-len", optarg, 1, &so.max_cache_len))
                return EXIT_ERROR;
            break;
        case OPT_API_KEY:
            if (!optarg[0]) {
                fprintf(stderr, "txc: --api-key must not be empty\n");
                return EXIT_ERROR;
            }
            so.api_key = optarg;
            break;
        case OPT_MAX_QUEUE:
            if (!txc_cli_parse_int("--max-queue", optarg, 0, &v))
                return EXIT_ERROR;
            if (v > 1000000) {
                fprintf(stderr, "txc: --max-queue must be at most 1000000, got %lld\n", (long long)v);
                return EXIT_ERROR;
            }
            so.max_queue = (int)v;
            break;
        case OPT_MAX_TOKENS:
            if (!txc_cli_parse_int("--max-tokens", optarg, 1, &max_tokens))
                return EXIT_ERROR;
            break;
        case OPT_ALIAS: alias = optarg; break;
        case OPT_TIMEOUT:
            if (!txc_cli_parse_int("--timeout", optarg, 1, &v))
                return EXIT_ERROR;
            if (v > 86400) {
                fprintf(stderr, "txc: --timeout must be at most 86400 s, got %lld\n", (long long)v);
                return EXIT_ERROR;
            }
            so.idle_timeout_s = (unsigned)v;
            break;
        case 'v': so.verbose = true; break;
        case OPT_NO_BATCH_INVARIANT: txc_ops_set_batch_invariant(false); break;
        case 'h': usage_serve(stdout); return 0;
        default: return txc_cli_unknown_option(argv, "serve");
        }
    }
    if (optind < argc) {
        fprintf(stderr, "txc: unexpected argument '%s' (see txc serve --help)\n", argv[optind]);
        return EXIT_ERROR;
    }
    txc_cli_note_no_compile_cache(&gf, "serve");
    /* SIGINT/SIGTERM are taken by this thread alone (sigwait): blocked
     * before any thread starts (the model's thread pool, the server's), as
     * every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (gf.devices) { /* (the server's scheduler thread is not a device's thread) */
        fprintf(stderr, "txc: txc serve does not run on --devices yet (mpirun -np %lld txc serve --tp %lld does: "
                        "rank 0 serves, the others follow)\n", (long long)gf.devices, (long long)gf.devices);
        return EXIT_ERROR;
    }
    if (!(model_dir = txc_cli_model_dir(model_dir)))
        return EXIT_ERROR;
    if (!txc_cli_parallel_setup(gf.tp, 0, &gf.mopts) || /* mpirun -np N ... --tp N: the mesh */
        !txc_cli_tp_config_ok(model_dir, gf.tp))
        return EXIT_ERROR;
    txc_cli_unquiet_ranks();
    if (gf.mopts.tp_mesh && txc_process_index() != 0) /* a rank but 0: no socket, the same steps as rank 0 */
        return follow(model_dir, &gf);
    /* A chat template when the folder has one; without, chat requests are a 400. */
    txc_chat_template *tpl = NULL;
    if (txc_chat_template_load(model_dir, &tpl) != TXC_OK) {
        if (!strstr(txc_last_error(), "has no chat_template"))
            return txc_cli_fail_in("chat template");
        tpl = NULL;
        txc_clear_error();
    }
    txc_model *model;
    txc_tokenizer *tok;
    txc_generation_config gcfg;
    double load_ms;
    if (!txc_cli_load_model(model_dir, &gf.mopts, &model, &tok, &gcfg, &load_ms)) {
        txc_chat_template_free(tpl);
        return EXIT_ERROR;
    }
    so.defaults = txc_generate_default_options(model, model_dir);
    txc_cli_gen_flags_apply(&gf, &so.defaults);
    if (max_tokens > 0)
        so.defaults.max_new_tokens = max_tokens;
    char name[256];
    so.model_id = alias ? alias : base_name(model_dir, name, sizeof name);
    if (so.verbose) {
        txc_cli_print_load(stderr, model, load_ms);
        txc_cli_print_sampling(stderr, &so.defaults);
        if (!tpl)
            fprintf(stderr, "txc serve: %s has no chat template: /v1/chat/completions answers 400\n", model_dir);
    }
    txc_server *srv = NULL;
    int rc = 0;
    if (txc_server_start(model, tok, tpl, &so, &srv) != TXC_OK)
        rc = txc_cli_fail("serve");
    else {
        fprintf(stderr, "txc serve: listening on http://%s%s%s:%d (model %s, %d slots, max_cache_len %lld%s)\n",
                strchr(so.host, ':') ? "[" : "", so.host, strchr(so.host, ':') ? "]" : "", txc_server_port(srv),
                so.model_id, so.parallel, (long long)txc_server_max_cache_len(srv),
                txc_ops_batch_invariant() ? "" : ", batch invariance off");
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "txc serve: %s: stopping (running requests get up to %d s)\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM", GRACE_MS / 1000);
        txc_server_stop(srv, GRACE_MS);
        txc_server_free(srv);
        fprintf(stderr, "txc serve: stopped\n");
    }
    txc_tokenizer_free(tok);
    txc_model_free(model);
    txc_chat_template_free(tpl);
    return rc;
}
