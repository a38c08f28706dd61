/* txc chat: user turns from stdin, one per line; each turn renders the
 * whole conversation with the model's chat template (add_generation_prompt,
 * as transformers' apply_chat_template), tokenizes it without adding
 * special tokens (the template writes BOS), and streams the reply from a
 * generator session that keeps the conversation's KV cache (only the new
 * suffix is prefilled). See tools/chat_cmd.h and txc chat --help. */
#include "tools/chat_cmd.h"
#include "tools/cli.h"
#include "txc/chat_template.h"
#include "txc/generate.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage_chat(FILE *f)
{
    fprintf(f,
            "usage: txc chat [--model DIR] [--system TEXT] [--message ROLE:TEXT]... [--max-new-tokens N]\n"
            "                [--max-cache-len N]\n"
            "                [--cache static|dynamic|none] [--verbose] [--jit|--no-jit]\n"
            "                [--do-sample|--greedy] [--temperature F] [--top-k N] [--top-p F]\n"
            "                [--min-p F] [--repetition-penalty F] [--seed N]\n"
            "                [--compile-cache DIR | --no-compile-cache] [--dtype f32|bf16|f16] [--threads N]\n"
            "                [--mmap|--no-mmap]\n"
            "\n"
            "A conversation with a chat model: each line read from stdin is a user turn; the\n"
            "conversation is rendered with the model's chat template (tokenizer_config.json's\n"
            "chat_template, or chat_template.jinja) and the reply is streamed to stdout, then a\n"
            "newline. The KV cache is kept between turns: a turn prefills only the tokens the\n"
            "cache does not hold yet. On a terminal each turn is asked for with \"> \"; empty\n"
            "lines are skipped; end of input ends the chat.\n"
            "  --model DIR         model folder (default: $TXC_MODEL, else " DEFAULT_MODEL_REL ")\n"
            "  --system TEXT       a system message first\n"
            "  --message ROLE:TEXT a message of the conversation before the turns read from stdin\n"
            "                      (repeatable, in order, after --system: earlier turns, examples);\n"
            "                      when the last one is the user's, it is answered first\n"
            "  --max-new-tokens N  at most N tokens per reply (default: generation_config.json,\n"
            "                      else 256); a reply also stops at any eos_token_id\n"
            "  --max-cache-len N   the conversation's StaticCache length, prompt and replies\n"
            "                      (default: 4096, at most max_position_embeddings)\n"
            "  --cache KIND        static (the default), dynamic or none (re-run every step)\n"
            "  --verbose           per turn on stderr: prompt tokens, tokens reused from the\n"
            "                      cache, tokens prefilled, decode tokens/s\n" TXC_CLI_GEN_HELP
            "                      (sampled turns use the seeds N, N + 1, ...)\n");
}

#define MAX_MESSAGES 256 /* --message options */

/* The conversation (roles and contents owned). */
typedef struct conversation {
    txc_chat_message *msgs;
    size_t n, cap;
} conversation;

static bool conv_add(conversation *c, const char *role, const char *content)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        txc_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m)
            return false;
        c->msgs = m;
        c->cap = cap;
    }
    char *r = strdup(role), *copy = strdup(content);
    if (!r || !copy) {
        free(r);
        free(copy);
        return false;
    }
    c->msgs[c->n].role = r;
    c->msgs[c->n++].content = copy;
    return true;
}

static void conv_free(conversation *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free((char *)c->msgs[i].role);
        free((char *)c->msgs[i].content);
    }
    free(c->msgs);
}

typedef struct stream {
    const txc_tokenizer *tok;
    txc_detok_stream *detok;
    bool failed;
} stream;

static bool put_token(void *ctx, int32_t id)
{
    stream *s = ctx;
    const char *piece;
    size_t n;
    if (txc_detok_stream_put(s->detok, id, &piece, &n) != TXC_OK) {
        txc_cli_name_hole(s->tok, id);
        s->failed = true;
        return false;
    }
    fwrite(piece, 1, n, stdout);
    fflush(stdout);
    return true;
}

/* What every turn uses. */
typedef struct chat {
    conversation conv;
    const txc_chat_template *tpl;
    const txc_tokenizer *tok;
    txc_generator_session *sess;
    const txc_generator *gen; /* the session's */
    txc_cache_kind cache;
    txc_generate_options opts;
    const txc_generation_config *gcfg;
    int64_t max_new_flag;    /* --max-new-tokens, or -1 */
    int64_t default_max_new; /* generation_config.json's, else 256 */
    int64_t max_positions;   /* max_position_embeddings: the cache's cap */
    bool verbose;
} chat;

/* What to suggest when the conversation no longer fits the cache: a larger
 * --max-cache-len only while the cache is below the model's positions. */
static const char *cache_advice(const chat *c)
{
    return txc_generator_session_max_cache_len(c->sess) < c->max_positions
               ? "start a new chat or pass a larger --max-cache-len"
               : "start a new chat (the cache already holds max_position_embeddings tokens)";
}

/* One turn: render, tokenize, generate (streamed), record the reply. */
static int chat_turn(chat *c, int turn)
{
    conversation *conv = &c->conv;
    const txc_tokenizer *tok = c->tok;
    txc_generate_options *opts = &c->opts;
    char *text = NULL, *reply = NULL;
    size_t text_len, reply_len;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    txc_generate_result res = {0};
    stream st = {0};
    int rc = 0;
    /* The template writes the special tokens (BOS...): tokenized without
     * the post-processor's, as apply_chat_template(tokenize=True) does. */
    if (txc_chat_template_render(c->tpl, conv->msgs, conv->n, true, &text, &text_len) != TXC_OK) {
        rc = txc_cli_fail_in("chat template");
        goto out;
    }
    if (txc_tokenizer_encode(tok, text, text_len, false, &ids, &n_ids) != TXC_OK) {
        rc = txc_cli_fail("tokenizing the conversation");
        goto out;
    }
    opts->max_new_tokens = txc_cli_max_new_tokens(c->max_new_flag, c->gcfg, (int64_t)n_ids, c->default_max_new);
    st.tok = tok;
    if (!(st.detok = txc_detok_stream_new(tok, true))) {
        rc = txc_cli_fail("detokenizer");
        goto out;
    }
    opts->on_token = put_token;
    opts->ctx = &st;
    txc_status s = txc_generator_session_run(c->sess, ids, (int64_t)n_ids, opts, &res);
    if (s == TXC_ERR_CAPACITY) {
        /* the sequence holds at most max_cache_len (static) or
         * max_position_embeddings tokens, a reply included */
        const bool fixed =
            c->cache == TXC_CACHE_STATIC && txc_generator_session_max_cache_len(c->sess) < c->max_positions;
        const int64_t limit = fixed ? txc_generator_session_max_cache_len(c->sess) : c->max_positions;
        const char *what = fixed ? "max_cache_len" : "max_position_embeddings";
        if (turn == 1) /* nothing of the chat is in the cache yet: the prompt itself is too long */
            fprintf(stderr, "txc: the prompt is too long: the first turn renders to %zu tokens, with a reply more "
                            "than %s %lld; shorten it%s\n",
                    n_ids, what, (long long)limit,
                    fixed ? " or pass a larger --max-cache-len" : "");
        else
            fprintf(stderr, "txc: the conversation has %zu tokens: with a reply it exceeds %s %lld; %s\n", n_ids,
                    what, (long long)limit,
                    cache_advice(c));
        rc = EXIT_ERROR;
        goto out;
    }
    if (s != TXC_OK || st.failed) {
        fflush(stdout);
        rc = txc_cli_fail("generate");
        goto out;
    }
    const char *piece;
    size_t n;
    if (txc_detok_stream_flush(st.detok, &piece, &n) == TXC_OK)
        fwrite(piece, 1, n, stdout);
    fputc('\n', stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "txc: writing the output failed\n");
        rc = EXIT_ERROR;
        goto out;
    }
    txc_cli_warn_compile_cache(c->gen); /* after the reply's line */
    /* The reply as the next turn's assistant message: its text without the
     * special tokens (the eos id), as decode(skip_special_tokens=True). */
    if (txc_tokenizer_decode(tok, res.new_ids, (size_t)res.n_new, true, &reply, &reply_len) != TXC_OK ||
        !conv_add(conv, "assistant", reply)) {
        rc = txc_cli_fail("the reply");
        goto out;
    }
    if (c->verbose) {
        int32_t bos = txc_tokenizer_bos_id(tok);
        size_t n_bos = 0;
        for (size_t i = 0; i < n_ids; i++)
            n_bos += ids[i] == bos;
        int64_t n_decode = res.n_new > 1 ? res.n_new - 1 : 0;
        fprintf(stderr, "turn %d: %zu prompt tokens", turn, n_ids);
        if (bos >= 0)
            fprintf(stderr, " (%zu BOS)", n_bos);
        fprintf(stderr, ", %lld reused from the cache, %lld prefilled in %.2f ms; decode %.1f tokens/s "
                        "(%lld new tokens); stop: %s\n",
                (long long)res.n_reused, (long long)res.n_prefilled, res.prefill_ms,
                res.decode_ms > 0 ? (double)n_decode * 1e3 / res.decode_ms : 0.0, (long long)res.n_new,
                res.stop_reason);
    }
    if (res.stop_reason && strcmp(res.stop_reason, "max_cache_len") == 0)
        fprintf(stderr, "txc: note: the reply stopped at the end of the cache (max_cache_len %lld); before the next "
                        "turn, %s\n",
                (long long)res.max_cache_len, cache_advice(c));
out:
    txc_generate_result_free(&res);
    txc_detok_stream_free(st.detok);
    free(reply);
    free(ids);
    free(text);
    return rc;
}

int txc_cmd_chat(int argc, char **argv)
{
    const char *model_dir = NULL, *system = NULL, *cache_name = NULL;
    int64_t max_new_tokens = -1, max_cache_len = 0;
    bool verbose = false;
    txc_cli_gen_flags gf;
    txc_cli_gen_flags_init(&gf);
    enum { OPT_SYSTEM = 256, OPT_MESSAGE };
    const char *messages[MAX_MESSAGES]; /* --message ROLE:TEXT, in order */
    int n_messages = 0;
    static const struct option longopts[] = {
        TXC_CLI_GEN_LONGOPTS,
        {"model", required_argument, 0, 'm'},
        {"system", required_argument, 0, OPT_SYSTEM},
        {"message", required_argument, 0, OPT_MESSAGE},
        {"max-new-tokens", required_argument, 0, 'n'},
        {"max-cache-len", required_argument, 0, 'L'},
        {"cache", required_argument, 0, 'c'},
        {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:n:L:c:vh", longopts, NULL)) != -1) {
        int taken = txc_cli_gen_getopt(&gf, ch, argv, ch == OPT_SYSTEM || ch == OPT_MESSAGE);
        if (taken < 0)
            return EXIT_ERROR;
        if (taken)
            continue;
        switch (ch) {
        case 'm': model_dir = optarg; break;
        case OPT_SYSTEM: system = optarg; break;
        case OPT_MESSAGE:
            if (optarg[0] == ':' || !strchr(optarg, ':') || strchr(optarg, ':') - optarg > 64) {
                fprintf(stderr, "txc: --message expects ROLE:TEXT (e.g. user:Hello), got '%s'\n", optarg);
                return EXIT_ERROR;
            }
            if (n_messages == MAX_MESSAGES) {
                fprintf(stderr, "txc: at most %d --message options\n", MAX_MESSAGES);
                return EXIT_ERROR;
            }
            messages[n_messages++] = optarg;
            break;
        case 'n':
            if (!txc_cli_parse_range("--max-new-tokens", optarg, 1, TXC_CLI_MAX_TOKENS, &max_new_tokens))
                return EXIT_ERROR;
            break;
        case 'L':
            if (!txc_cli_parse_range("--max-cache-len", optarg, 1, TXC_CLI_MAX_TOKENS, &max_cache_len))
                return EXIT_ERROR;
            break;
        case 'c': cache_name = optarg; break;
        case 'v': verbose = true; break;
        case 'h': usage_chat(stdout); return 0;
        default: return txc_cli_unknown_option(argv, "chat");
        }
    }
    if (optind < argc) {
        fprintf(stderr, "txc: unexpected argument '%s' (txc chat reads the user's turns from stdin)\n", argv[optind]);
        return EXIT_ERROR;
    }
    txc_cache_kind cache = TXC_CACHE_STATIC;
    if (cache_name && txc_cache_kind_parse(cache_name, &cache) != TXC_OK)
        return txc_cli_fail("--cache");
    /* stdin before anything is opened: a closed one would be the first file
     * opened (fd 0) and read as the user's turns; a folder cannot be read */
    struct stat in_st;
    const bool in_ok = fstat(STDIN_FILENO, &in_st) == 0;
    if (!in_ok || S_ISDIR(in_st.st_mode)) {
        fprintf(stderr, "txc: chat reads the user's turns from stdin, but stdin is %s\n",
                in_ok ? "a directory" : errno == EBADF ? "closed" : strerror(errno));
        return EXIT_ERROR;
    }
    if (gf.tp || gf.devices) { /* (the devices would read different input: stdin / HTTP reach one only) */
        fprintf(stderr, "txc: txc chat does not run tensor-parallel yet (--tp: txc generate and txc bench do)\n");
        return EXIT_ERROR;
    }
    if (!(model_dir = txc_cli_model_dir(model_dir)))
        return EXIT_ERROR;
    /* The template first: a model without one is refused before loading. */
    txc_chat_template *tpl = NULL;
    if (txc_chat_template_load(model_dir, &tpl) != TXC_OK)
        return txc_cli_fail("chat template");
    txc_model *model;
    txc_tokenizer *tok;
    txc_generation_config gcfg;
    double load_ms;
    if (!txc_cli_load_model(model_dir, &gf.mopts, &model, &tok, &gcfg, &load_ms)) {
        txc_chat_template_free(tpl);
        return EXIT_ERROR;
    }
    txc_cli_note_max_cache_len(max_cache_len, cache, txc_model_max_positions(model));
    txc_generate_options opts = txc_generate_default_options(model, model_dir);
    const int64_t default_max_new = opts.max_new_tokens;
    txc_cli_gen_flags_apply(&gf, &opts);
    const uint64_t seed = opts.seed;
    int rc = 0;
    txc_generator *gen = txc_cli_generator_new(model, &gf, opts.jit);
    txc_generator_session *sess = gen ? txc_generator_session_new(gen, cache, max_cache_len) : NULL;
    chat c = {.tpl = tpl, .tok = tok, .sess = sess, .gen = gen, .cache = cache, .opts = opts, .gcfg = &gcfg,
              .max_new_flag = max_new_tokens, .default_max_new = default_max_new,
              .max_positions = txc_model_max_positions(model), .verbose = verbose};
    if (!sess)
        rc = txc_cli_fail("chat session");
    else if (system && !txc_cli_text_ok(system, strlen(system))) {
        fprintf(stderr, "txc: --system is not UTF-8 text\n");
        rc = EXIT_ERROR;
    } else if (system && !conv_add(&c.conv, "system", system))
        rc = txc_cli_fail("--system");
    for (int i = 0; i < n_messages && rc == 0; i++) {
        const char *colon = strchr(messages[i], ':');
        char role[80];
        snprintf(role, sizeof role, "%.*s", (int)(colon - messages[i]), messages[i]);
        if (!txc_cli_text_ok(messages[i], strlen(messages[i]))) {
            fprintf(stderr, "txc: --message %d is not UTF-8 text\n", i + 1);
            rc = EXIT_ERROR;
        } else if (!conv_add(&c.conv, role, colon + 1))
            rc = txc_cli_fail("--message");
    }
    if (rc == 0 && verbose) {
        txc_cli_print_load(stderr, model, load_ms);
        if (cache == TXC_CACHE_STATIC)
            fprintf(stderr, "cache: static (max_cache_len %lld), kept between turns\n",
                    (long long)txc_generator_session_max_cache_len(sess));
        else
            fprintf(stderr, "cache: %s%s\n", txc_cache_kind_name(cache),
                    cache == TXC_CACHE_NONE ? "" : ", kept between turns");
        txc_cli_print_sampling(stderr, &opts);
        fprintf(stderr, "jit: %s\n", opts.jit ? "on" : "off (eager)");
    }
    const bool tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    int turn = 1, line_no = 0;
    if (rc == 0 && c.conv.n > 0 && strcmp(c.conv.msgs[c.conv.n - 1].role, "user") == 0) {
        c.opts.seed = seed; /* --message user:...: answered first */
        rc = chat_turn(&c, turn++);
    }
    while (rc == 0) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        errno = 0;
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0 && ferror(stdin)) { /* a read error is not the end of the chat */
            fprintf(stderr, "txc: reading stdin failed after line %d: %s\n", line_no,
                    strerror(errno ? errno : EIO));
            rc = EXIT_ERROR;
            break;
        }
        if (len < 0)
            break;
        line_no++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0) /* an empty line is no turn */
            continue;
        if (!txc_cli_text_ok(line, (size_t)len)) {
            fprintf(stderr, "txc: input line %d is not UTF-8 text (invalid bytes or a NUL byte)\n", line_no);
            rc = EXIT_ERROR;
            break;
        }
        if (!conv_add(&c.conv, "user", line)) {
            rc = txc_cli_fail("chat");
            break;
        }
        c.opts.seed = seed + (uint64_t)(turn - 1);
        rc = chat_turn(&c, turn++);
    }
    if (tty && rc == 0)
        fputc('\n', stdout);
    if (rc == 0 && verbose && opts.jit) {
        txc_jit_stats ps = txc_generator_jit_stats(gen, 0), ds = txc_generator_jit_stats(gen, 1);
        fprintf(stderr, "jit: %llu prefill + %llu decode plans for the chat (%llu loaded from the compile cache)\n",
                (unsigned long long)ps.misses, (unsigned long long)ds.misses,
                (unsigned long long)(ps.cache_loads + ds.cache_loads));
    }
    free(line);
    conv_free(&c.conv);
    txc_generator_session_free(sess);
    txc_generator_free(gen);
    txc_tokenizer_free(tok);
    txc_model_free(model);
    txc_chat_template_free(tpl);
    return rc;
}
