/* What the txc subcommands share; see tools/cli.h. */
#include "tools/cli.h"
#include "txc/gguf.h"
#include "txc/status.h"
#include "txc/threads.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

double txc_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *txc_cli_default_model(void)
{
    const char *env = getenv("TXC_MODEL");
    if (env && *env)
        return env;
    struct stat st;
    return stat(DEFAULT_MODEL_REL, &st) == 0 && S_ISDIR(st.st_mode) ? DEFAULT_MODEL_REL : NULL;
}

bool txc_cli_is_gguf(const char *path)
{
    size_t n = strlen(path);
    if (n >= 5 && strcasecmp(path + n - 5, ".gguf") == 0)
        return true;
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    bool gguf = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f)
        fclose(f);
    return gguf;
}

void txc_cli_model_not_folder(const char *path)
{
    struct stat st;
    const bool by_name = txc_gguf_is_path(path);
    if (stat(path, &st) != 0)
        fprintf(stderr, "txc: model %s %s does not exist\n", by_name ? "file" : "folder", path);
    else if (by_name)
        fprintf(stderr, "txc: --model %s is a %s, not a GGUF file\n", path,
                S_ISDIR(st.st_mode) ? "folder" : "special file");
    else if (S_ISREG(st.st_mode) && txc_cli_is_gguf(path))
        fprintf(stderr, "txc: %s is a GGUF file, but its name does not end in .gguf (txc tells a GGUF file by its "
                        "name: rename it or link it as NAME.gguf)\n", path);
    else
        fprintf(stderr, "txc: --model %s is a %s, not a model folder (a Hugging Face model folder holds "
                        "config.json, model.safetensors, tokenizer.json; or a .gguf file)\n", path,
                S_ISREG(st.st_mode) ? "file" : "special file");
}

const char *txc_cli_model_dir(const char *given)
{
    const char *dir = given ? given : txc_cli_default_model();
    struct stat st;
    if (!dir)
        fprintf(stderr, "txc: no model given: pass --model DIR (a Hugging Face model folder) or set TXC_MODEL; "
                        "the default %s was not found\n", DEFAULT_MODEL_REL);
    else if (txc_gguf_is_path(dir) ? stat(dir, &st) != 0 || !S_ISREG(st.st_mode)
                                   : stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        txc_cli_model_not_folder(dir);
    else
        return dir;
    return NULL;
}

int txc_cli_fail(const char *what)
{
    if (txc_cli_quiet())
        return EXIT_ERROR;
    if (*txc_last_error())
        fprintf(stderr, "txc: %s\n", txc_last_error());
    else
        fprintf(stderr, "txc: %s failed\n", what);
    return EXIT_ERROR;
}

int txc_cli_fail_in(const char *context)
{
    const char *e = txc_last_error();
    if (txc_cli_quiet())
        return EXIT_ERROR;
    if (!strncmp(e, context, strlen(context))) /* "chat template line 1: ..." names it already */
        context = "";
    fprintf(stderr, "txc: %s%s%s\n", context, !*e ? " failed" : *context ? ": " : "", e);
    return EXIT_ERROR;
}

bool txc_cli_parse_int(const char *flag, const char *s, int64_t min, int64_t *out)
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

bool txc_cli_parse_range(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end) {
        fprintf(stderr, "txc: %s expects an integer from %lld to %lld, got '%s'\n", flag, (long long)min,
                (long long)max, s);
        return false;
    }
    if (errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "txc: %s %s is out of range (an integer from %lld to %lld)\n", flag, s, (long long)min,
                (long long)max);
        return false;
    }
    *out = v;
    return true;
}

bool txc_cli_parse_threads(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > TXC_MAX_THREADS) {
        fprintf(stderr, "txc: --threads expects an integer from 1 to %d (TXC_MAX_THREADS), got '%s'\n",
                TXC_MAX_THREADS, s);
        return false;
    }
    *out = v;
    return true;
}

bool txc_cli_parse_float(const char *flag, const char *s, double lo, bool lo_open, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || (lo_open && v == lo) || v > hi) {
        if (hi < HUGE_VAL)
            fprintf(stderr, "txc: %s expects a number in %s%g, %g], got '%s'\n", flag, lo_open ? "(" : "[", lo, hi,
                    s);
        else
            fprintf(stderr, "txc: %s expects a number %s %g, got '%s'\n", flag, lo_open ? ">" : ">=", lo, s);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_seed(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    while (*s == ' ')
        s++;
    unsigned long long v = *s == '-' ? 0 : strtoull(s, &end, 10);
    if (*s == '-' || errno || end == s || *end) {
        fprintf(stderr, "txc: --seed expects an integer in [0, 2^64), got '%s'\n", s);
        return false;
    }
    *out = v;
    return true;
}

void txc_cli_gen_flags_init(txc_cli_gen_flags *f)
{
    memset(f, 0, sizeof *f);
    f->do_sample = f->jit = -1;
    f->temperature = f->top_p = f->min_p = f->repetition_penalty = NAN;
    f->top_k = -1;
    f->compile_cache_max_bytes = -1;
}

bool txc_cli_parse_cache_max_mb(const char *arg, int64_t *bytes)
{
    int64_t mb;
    if (!txc_cli_parse_int("--compile-cache-max-mb", arg, 0, &mb))
        return false;
    if (mb > ((int64_t)1 << 43)) {
        fprintf(stderr, "txc: --compile-cache-max-mb expects at most %lld, got '%s'\n", (long long)1 << 43, arg);
        return false;
    }
    *bytes = mb << 20;
    return true;
}

bool txc_cli_weights_option(int ch, txc_model_options *o)
{
    switch (ch) {
    case TXC_CLI_OPT_MMAP: o->weights = TXC_WEIGHTS_MMAP; return true;
    case TXC_CLI_OPT_NO_MMAP: o->weights = TXC_WEIGHTS_COPY; return true;
    case TXC_CLI_OPT_NO_HUGEPAGES: o->no_hugepages = true; return true;
    default: return false;
    }
}

void txc_cli_warn_overflow(const txc_model *model, const txc_model_options *mopts)
{
    txc_weights_info w = txc_model_weights_info(model);
    if (w.n_overflow_tensors == 0 || txc_cli_quiet())
        return;
    char more[64] = "";
    if (w.n_overflow_tensors > 1)
        snprintf(more, sizeof more, " (and %d more tensors)", w.n_overflow_tensors - 1);
    fprintf(stderr, "txc: warning: --dtype %s: %lld values of tensor '%s' overflow to inf in the conversion%s; "
                    "the text may be garbage (--check-tensors makes this an error)\n",
            txc_dtype_name(mopts->dtype), (long long)w.overflow_values, w.overflow_tensor, more);
}

void txc_cli_print_load(FILE *f, const txc_model *model, double load_ms)
{
    txc_weights_info w = txc_model_weights_info(model);
    fprintf(f, "load: %.1f ms (%s, %.1f MB%s; weights %.1f ms", load_ms, txc_weights_mode_name(w.mode),
            (double)w.param_bytes / 1e6, w.mode == TXC_WEIGHTS_COPY && w.hugepages ? ", huge pages" : "", w.load_ms);
    if (w.mode == TXC_WEIGHTS_COPY)
        fprintf(f, ", of which copy %.1f ms", w.copy_ms);
    fprintf(f, ")\n");
}

int txc_cli_gen_option(txc_cli_gen_flags *f, int ch, const char *arg)
{
    int64_t threads;
    if (txc_cli_weights_option(ch, &f->mopts))
        return 1;
    switch (ch) {
    case TXC_CLI_OPT_SAMPLE: f->do_sample = 1; return 1;
    case TXC_CLI_OPT_GREEDY: f->do_sample = 0; return 1;
    case TXC_CLI_OPT_TEMPERATURE:
        return txc_cli_parse_float("--temperature", arg, 0.0, true, HUGE_VAL, &f->temperature) ? 1 : -1;
    case TXC_CLI_OPT_TOP_K: return txc_cli_parse_int("--top-k", arg, 0, &f->top_k) ? 1 : -1;
    case TXC_CLI_OPT_TOP_P: return txc_cli_parse_float("--top-p", arg, 0.0, false, 1.0, &f->top_p) ? 1 : -1;
    case TXC_CLI_OPT_MIN_P: return txc_cli_parse_float("--min-p", arg, 0.0, false, 1.0, &f->min_p) ? 1 : -1;
    case TXC_CLI_OPT_REP:
        return txc_cli_parse_float("--repetition-penalty", arg, 0.0, true, HUGE_VAL, &f->repetition_penalty) ? 1 : -1;
    case TXC_CLI_OPT_SEED:
        if (!parse_seed(arg, &f->seed))
            return -1;
        f->have_seed = true;
        return 1;
    case TXC_CLI_OPT_CHECK_TENSORS: f->mopts.check_tensors = true; return 1;
    case TXC_CLI_OPT_TP: return txc_cli_parse_tp(arg, &f->tp) ? 1 : -1;
    case TXC_CLI_OPT_DEVICES: return txc_cli_parse_devices(arg, &f->devices) ? 1 : -1;
    case TXC_CLI_OPT_JIT: f->jit = 1; return 1;
    case TXC_CLI_OPT_NO_JIT: f->jit = 0; return 1;
    case TXC_CLI_OPT_COMPILE_CACHE: f->compile_cache = arg; return 1;
    case TXC_CLI_OPT_NO_COMPILE_CACHE: f->compile_cache = ""; return 1;
    case TXC_CLI_OPT_COMPILE_CACHE_MAX_MB: return txc_cli_parse_cache_max_mb(arg, &f->compile_cache_max_bytes) ? 1 : -1;
    case TXC_CLI_OPT_DTYPE:
        if (!txc_dtype_parse(arg, &f->mopts.dtype) || !txc_dtype_is_float(f->mopts.dtype)) {
            fprintf(stderr, "txc: --dtype expects f32, bf16 or f16, got '%s'\n", arg);
            return -1;
        }
        f->mopts.convert_dtype = true;
        return 1;
    case TXC_CLI_OPT_THREADS:
        if (!txc_cli_parse_threads(arg, &threads))
            return -1;
        if (txc_threads_set((int)threads) != TXC_OK) {
            txc_cli_fail("--threads");
            return -1;
        }
        return 1;
    default: return 0;
    }
}

int txc_cli_gen_getopt(txc_cli_gen_flags *f, int ch, char **argv, bool dash_ok)
{
    if (optarg && optarg[0] == '-' && optarg[1] == '-' && !dash_ok) {
        fprintf(stderr, "txc: %s needs a value (got the option '%s')\n",
                optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1], optarg);
        return -1;
    }
    return txc_cli_gen_option(f, ch, optarg);
}

void txc_cli_note_no_compile_cache(const txc_cli_gen_flags *f, const char *command)
{
    if ((f->compile_cache && f->compile_cache[0]) || f->compile_cache_max_bytes >= 0)
        fprintf(stderr, "txc %s: note: --compile-cache and --compile-cache-max-mb are not used here (the batch "
                        "compiles its plans in the process)\n", command);
}

int txc_cli_unknown_option(char **argv, const char *command)
{
    fprintf(stderr, "txc: option '%s' is unknown or needs a value (see txc %s --help)\n", argv[optind - 1], command);
    return EXIT_ERROR;
}

void txc_cli_gen_flags_apply(txc_cli_gen_flags *f, txc_generate_options *o)
{
    if (f->jit >= 0)
        o->jit = f->jit;
    if (f->do_sample >= 0)
        o->do_sample = f->do_sample;
    if (!isnan(f->temperature))
        o->temperature = f->temperature;
    if (f->top_k >= 0)
        o->top_k = f->top_k;
    if (!isnan(f->top_p))
        o->top_p = f->top_p;
    if (!isnan(f->min_p))
        o->min_p = f->min_p;
    if (!isnan(f->repetition_penalty))
        o->repetition_penalty = f->repetition_penalty;
    if (!f->have_seed) { /* a fresh seed per run, shown by --verbose */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        f->seed = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        f->have_seed = true;
    }
    o->seed = f->seed;
}

txc_generator *txc_cli_generator_new(txc_model *model, txc_cli_gen_flags *f, bool jit)
{
    txc_generator *gen = txc_generator_new(model);
    if (!f->compile_cache && txc_jit_default_compile_cache(f->default_cache, sizeof f->default_cache))
        f->compile_cache = f->default_cache;
    if (gen && jit && f->compile_cache && *f->compile_cache &&
        (txc_generator_set_compile_cache(gen, f->compile_cache) != TXC_OK ||
         (f->compile_cache_max_bytes >= 0 &&
          txc_generator_set_compile_cache_max_bytes(gen, f->compile_cache_max_bytes) != TXC_OK))) {
        txc_generator_free(gen);
        gen = NULL;
    }
    return gen;
}

void txc_cli_warn_compile_cache(const txc_generator *gen)
{
    static bool warned; /* once per process: every later plan fails alike */
    for (int w = 0; gen && w < 2 && !warned; w++) {
        txc_jit_stats js = txc_generator_jit_stats(gen, w);
        if (js.cache_errors) {
            fprintf(stderr, "txc: warning: compile cache: a compiled plan was not saved (%s); it is used in memory for "
                            "this run only\n",
                    *js.cache_save_error ? js.cache_save_error : "unknown reason");
            warned = true;
        }
    }
}

int64_t txc_cli_max_new_tokens(int64_t flag, const txc_generation_config *g, int64_t n_prompt, int64_t fallback)
{
    if (flag > 0)
        return flag;
    if (g->present && g->max_new_tokens > 0)
        return g->max_new_tokens;
    if (g->present && g->max_length >= 0) /* 0 (or less than the prompt): one new token, as transformers */
        return g->max_length > n_prompt ? g->max_length - n_prompt : 1;
    return fallback;
}

bool txc_cli_load_model(const char *model_dir, const txc_model_options *mopts, txc_model **model,
                        txc_tokenizer **tok, txc_generation_config *gcfg, double *load_ms)
{
    double t0 = txc_cli_now_ms();
    *model = NULL;
    *tok = NULL;
    /* The tokenizer first: parsing a large tokenizer.json peaks at several
     * times the file (cJSON's tree, freed and handed back at the end of the
     * load), which then does not sit on top of the weights (Qwen2.5-0.5B:
     * ~55 MiB off the peak RSS). A model that fails is still the error
     * reported, as when the model loaded first. */
    char tok_err[512] = "";
    txc_status ts = txc_tokenizer_load(model_dir, tok);
    if (ts != TXC_OK)
        snprintf(tok_err, sizeof tok_err, "%s", txc_last_error());
    if (txc_model_load(model_dir, mopts, model) != TXC_OK) {
        txc_cli_fail(model_dir);
        txc_tokenizer_free(*tok);
        *tok = NULL;
        return false;
    }
    if (ts != TXC_OK) {
        if (*tok_err)
            txc_error(ts, "%s", tok_err);
        txc_cli_fail(model_dir);
        txc_model_free(*model);
        *model = NULL;
        return false;
    }
    *load_ms = txc_cli_now_ms() - t0;
    txc_cli_warn_overflow(*model, mopts);
    const txc_hf_config *mcfg = txc_model_config(*model);
    bool ok = true;
    if (txc_generation_config_load(model_dir, gcfg) != TXC_OK) {
        txc_cli_fail("generation_config.json");
        ok = false;
    }
    for (int i = 0; ok && !txc_cli_quiet() && i < gcfg->n_ignored; i++) /* one line per key, as transformers warns */
        fprintf(stderr, "txc: warning: generation_config.json: %s is not implemented by txc and is ignored\n",
                gcfg->ignored[i]);
    if (ok && txc_tokenizer_vocab_size(*tok) > mcfg->vocab_size) {
        /* name the first token past the embedding rows (an added token, as a rule) */
        int32_t id = (int32_t)mcfg->vocab_size;
        while (id < txc_tokenizer_vocab_size(*tok) && !txc_tokenizer_id_to_token(*tok, id))
            id++;
        const char *t = txc_tokenizer_id_to_token(*tok, id);
        if (!txc_cli_quiet())
            fprintf(stderr, "txc: tokenizer.json has ids up to %d, but config.json's vocab_size is %lld: %s '%.60s' "
                        "has id %d\n",
                txc_tokenizer_vocab_size(*tok) - 1, (long long)mcfg->vocab_size,
                txc_tokenizer_is_added(*tok, id) ? "the added token" : "the vocab's token", t ? t : "?", (int)id);
        ok = false;
    }
    if (!ok) {
        txc_tokenizer_free(*tok);
        txc_model_free(*model);
        *tok = NULL;
        *model = NULL;
    }
    return ok;
}

void txc_cli_note_max_cache_len(int64_t flag, txc_cache_kind kind, int64_t max_positions)
{
    if (flag <= 0)
        return;
    if (kind != TXC_CACHE_STATIC)
        fprintf(stderr, "txc: warning: --max-cache-len is ignored with --cache %s (only the static cache has a set "
                        "length)\n", txc_cache_kind_name(kind));
    else if (flag > max_positions)
        fprintf(stderr, "txc: note: --max-cache-len %lld is more than max_position_embeddings %lld: the cache holds "
                        "%lld tokens\n", (long long)flag, (long long)max_positions, (long long)max_positions);
}

void txc_cli_print_sampling(FILE *f, const txc_generate_options *o)
{
    if (o->do_sample)
        fprintf(f, "sampling: seed %llu, temperature %g, top_k %lld, top_p %g, min_p %g, repetition_penalty %g\n",
                (unsigned long long)o->seed, o->temperature, (long long)o->top_k, o->top_p, o->min_p,
                o->repetition_penalty);
    else
        fprintf(f, "sampling: off (greedy), repetition_penalty %g\n", o->repetition_penalty);
}

bool txc_cli_text_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0 || cp == 0)
            return false;
        i += (size_t)k;
    }
    return true;
}

char *txc_cli_read_prompt(const char *flag, const char *path, size_t max_bytes, size_t *len)
{
    const bool is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "stdin" : path;
    /* a blocking open, as cat's: a FIFO is read once a writer has opened it
     * (a non-blocking open read a FIFO without a writer as empty) */
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "txc: %s: cannot read %s: %s\n", flag, name, errno == EBADF && is_stdin ? "it is closed"
                                                                                          : strerror(errno));
        if (fd >= 0 && !is_stdin)
            close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "txc: %s: %s is a directory, not a text file\n", flag, name);
        if (!is_stdin)
            close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    bool failed = !buf, too_large = false;
    int err = buf ? 0 : ENOMEM;
    while (!failed) {
        if (n == cap) {
            if (cap > max_bytes) { /* one byte past the limit was read */
                too_large = true;
                break;
            }
            size_t want = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
            char *b = realloc(buf, want + 1);
            if (!b) {
                failed = true, err = ENOMEM;
                break;
            }
            buf = b, cap = want;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            failed = true, err = errno;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (!is_stdin)
        close(fd);
    if (!failed && !too_large && n > max_bytes)
        too_large = true;
    if (failed || too_large) {
        if (too_large)
            fprintf(stderr, "txc: %s: %s is larger than %zu MiB, the longest prompt read\n", flag, name,
                    max_bytes >> 20);
        else
            fprintf(stderr, "txc: %s: reading %s failed: %s\n", flag, name, strerror(err));
        free(buf);
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\n') /* one final newline is the file's, not the prompt's (llama.cpp's -f) */
        n--;
    buf[n] = '\0';
    if (!txc_cli_text_ok(buf, n)) {
        fprintf(stderr, "txc: %s: %s is not UTF-8 text (invalid bytes or a NUL byte)\n", flag, name);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

void txc_cli_name_hole(const txc_tokenizer *tok, int32_t id)
{
    if (id >= 0 && id < txc_tokenizer_vocab_size(tok) && !txc_tokenizer_id_to_token(tok, id))
        txc_error_replace(TXC_ERR_INVALID, "the model chose id %d, a hole in tokenizer.json's vocabulary (no token "
                                           "has it; ids go up to %d)",
                          (int)id, (int)txc_tokenizer_vocab_size(tok) - 1);
}
