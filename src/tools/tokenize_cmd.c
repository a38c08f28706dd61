/*
 * txc tokenize — a model folder's tokenizer.json from the command line.
 *
 *   txc tokenize [--model DIR] [--no-special-tokens] [--ids] TEXT
 *   txc tokenize [--model DIR] --decode [--keep-special] ID...
 *   txc tokenize [--model DIR] [--no-special-tokens] --bench FILE [--repeat N] [--json]
 *
 * Encoding prints one token per line, "id<TAB>piece", the piece as the
 * vocabulary spells it ("Ġthe", "▁the", "<0x0A>") with control characters and
 * backslashes escaped C-style so that each token stays on its line; --ids
 * prints only the ids, space-separated, on one line. TEXT "-" reads stdin.
 * Decoding prints decode(ids, skip_special_tokens) and a newline.
 * --bench encodes the whole of FILE as one string, once to warm up and then
 * N times, and prints the median time (load excluded), MB/s (10^6 bytes),
 * tokens/s, the token count and an FNV-1a digest of the ids, so that the
 * count can be checked against the `tokenizers` package
 * (bench/tokenizer_speed.sh does that for every family).
 * Exit status: 0, or 2 on any error (one line on stderr).
 */
#include "tools/tokenize_cmd.h"
#include "tools/cli.h"
#include "txc/gguf.h"

#include "txc/tokenizer.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>



static void usage(FILE *f)
{
    fprintf(f,
            "usage: txc tokenize [--model DIR] [--no-special-tokens] [--ids] TEXT\n"
            "       txc tokenize [--model DIR] --decode [--keep-special] ID...\n"
            "       txc tokenize [--model DIR] [--no-special-tokens] --bench FILE [--repeat N] [--json]\n"
            "\n"
            "Encode TEXT (\"-\": stdin) with the tokenizer.json of DIR, or decode ids.\n"
            "  --model DIR          folder holding tokenizer.json (no weights needed), or the\n"
            "                       file itself (default: $TXC_MODEL, else " DEFAULT_MODEL_REL ")\n"
            "  --ids                print only the ids, space-separated, on one line (default:\n"
            "                       one \"id<TAB>piece\" line per token)\n"
            "  --no-special-tokens  leave out what the post-processor adds (BOS...)\n"
            "  --decode             the arguments are ids: print their decoded text\n"
            "  --keep-special       with --decode: keep special tokens (default: skip them)\n"
            "  --bench FILE         time encoding the whole of FILE (\"-\": stdin) as one string:\n"
            "                       one warm-up, then N runs; prints the median (load not\n"
            "                       included) in MB/s and tokens/s, and the token count\n"
            "  --repeat N           with --bench: the number of timed runs (default 5)\n"
            "  --json               with --bench: print one JSON object instead\n");
}


/* Print a token string readably: as in the vocab, but with '\\', control
 * characters and DEL escaped (\n, \t, \r, \\, else \xHH). */
static void print_piece(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '\\')
            fputs("\\\\", stdout);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7F)
            printf("\\x%02X", c);
        else
            putchar(c);
    }
}

/* All of f; NULL (errno set) on a read error or out of memory. */
/* The most text `tokenize -` and --bench read: past it a clear error, not
 * an unbounded read (--bench /dev/zero, `yes | txc tokenize -`). */
#define MAX_TEXT_BYTES ((size_t)1 << 30)

/* The whole stream, at most MAX_TEXT_BYTES; NULL with errno set (EFBIG:
 * longer than that). */
static char *read_stream(FILE *f, size_t *len)
{
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > MAX_TEXT_BYTES) {
        errno = EFBIG;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            if (cap > MAX_TEXT_BYTES) { /* one byte past the limit was read */
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            size_t want = cap * 2 > MAX_TEXT_BYTES + 1 ? MAX_TEXT_BYTES + 1 : cap * 2;
            char *b = realloc(buf, want);
            if (!b) {
                free(buf);
                errno = ENOMEM;
                return NULL;
            }
            buf = b;
            cap = want;
        }
    }
    if (!buf)
        errno = ENOMEM;
    if (buf && ferror(f)) {
        free(buf);
        if (!errno)
            errno = EIO;
        return NULL;
    }
    *len = n;
    return buf;
}

/* The ids in args (separated by spaces or commas, in one or many arguments). */
static int parse_ids(char **args, int n_args, int32_t **out, size_t *n_out)
{
    size_t n = 0, cap = 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "txc: out of memory\n");
        return EXIT_ERROR;
    }
    for (int a = 0; a < n_args; a++) {
        const char *p = args[a];
        for (;;) {
            while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
                p++;
            if (!*p)
                break;
            char *end;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || errno || v < INT32_MIN || v > INT32_MAX ||
                (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
                size_t w = strcspn(p, " ,\t\n");
                fprintf(stderr, "txc: bad id '%.*s' (ids are integers)\n", (int)w, p);
                free(ids);
                return EXIT_ERROR;
            }
            if (n == cap) {
                int32_t *q = realloc(ids, cap * 2 * sizeof *q);
                if (!q) {
                    free(ids);
                    fprintf(stderr, "txc: out of memory\n");
                    return EXIT_ERROR;
                }
                ids = q;
                cap *= 2;
            }
            ids[n++] = (int32_t)v;
            p = end;
        }
    }
    *out = ids;
    *n_out = n;
    return 0;
}

static bool is_integer(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* FNV-1a 64 over the ids as little-endian uint32 (the digest of
 * tests/fixtures/tokenizer_ids/bench_1mb.json and bench/tokenizer_speed.py). */
static uint64_t ids_fnv1a64(const int32_t *ids, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int k = 0; k < 4; k++)
            h = (h ^ ((v >> (8 * k)) & 0xFF)) * 0x100000001b3ull;
    }
    return h;
}

/* Sorts v[0..n) and returns its median. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* CPU time of this process in ms (what other load on the machine does not
 * inflate, unlike the wall clock). */
static double cpu_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --bench: encode the whole file `repeat` + 1 times (the first is a warm-up)
 * and print the median. */
static int run_bench(const txc_tokenizer *tok, const char *model, double load_ms, const char *path,
                     int repeat, bool add_special, bool json)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "txc: cannot open %s: %s\n", path, strerror(errno));
        return EXIT_ERROR;
    }
    size_t len = 0;
    errno = 0;
    char *text = read_stream(f, &len);
    int err = errno;
    if (f != stdin)
        fclose(f);
    if (!text) {
        if (err == EFBIG)
            fprintf(stderr, "txc: %s is larger than %zu MiB, the most --bench reads\n", path, MAX_TEXT_BYTES >> 20);
        else
            fprintf(stderr, "txc: cannot read %s: %s\n", path, strerror(err ? err : EIO));
        return EXIT_ERROR;
    }
    /* wall ms of the runs in order, then sorted; CPU ms (this process) sorted */
    double *ms = malloc(3 * (size_t)repeat * sizeof *ms);
    if (!ms) {
        free(text);
        fprintf(stderr, "txc: out of memory\n");
        return EXIT_ERROR;
    }
    int rc = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    for (int r = -1; r < repeat && !rc; r++) {
        free(ids);
        ids = NULL;
        txc_clear_error();
        double c0 = cpu_ms(), t0 = txc_cli_now_ms();
        if (txc_tokenizer_encode(tok, text, len, add_special, &ids, &n) != TXC_OK)
            rc = txc_cli_fail("encoding");
        double t1 = txc_cli_now_ms(), c1 = cpu_ms();
        if (r >= 0) {
            ms[r] = t1 - t0;
            ms[2 * repeat + r] = c1 - c0;
        }
    }
    if (!rc) {
        double *sorted = ms + repeat;
        memcpy(sorted, ms, (size_t)repeat * sizeof *ms);
        double *cpu = ms + 2 * repeat;
        double med = median(sorted, repeat), med_cpu = median(cpu, repeat);
        double mbs = med > 0 ? (double)len / 1e3 / med : 0;
        double tps = med > 0 ? (double)n * 1e3 / med : 0;
        char fnv[17];
        snprintf(fnv, sizeof fnv, "%016llx", (unsigned long long)ids_fnv1a64(ids, n));
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON *arr = cJSON_AddArrayToObject(j, "runs_ms");
            for (int r = 0; r < repeat; r++)
                cJSON_AddItemToArray(arr, cJSON_CreateNumber(ms[r]));
            cJSON_AddStringToObject(j, "tokenizer", model);
            cJSON_AddStringToObject(j, "file", path);
            cJSON_AddNumberToObject(j, "bytes", (double)len);
            cJSON_AddBoolToObject(j, "add_special_tokens", add_special);
            cJSON_AddNumberToObject(j, "load_ms", load_ms);
            cJSON_AddNumberToObject(j, "repeat", repeat);
            cJSON_AddNumberToObject(j, "median_ms", med);
            cJSON_AddNumberToObject(j, "min_ms", sorted[0]);
            cJSON_AddNumberToObject(j, "median_cpu_ms", med_cpu);
            cJSON_AddNumberToObject(j, "mb_per_s", mbs);
            cJSON_AddNumberToObject(j, "tokens_per_s", tps);
            cJSON_AddNumberToObject(j, "tokens", (double)n);
            cJSON_AddStringToObject(j, "ids_fnv1a64", fnv);
            char *out = cJSON_PrintUnformatted(j);
            if (out)
                puts(out);
            else
                rc = EXIT_ERROR, fprintf(stderr, "txc: out of memory\n");
            free(out);
            cJSON_Delete(j);
        } else {
            printf("tokenizer: %s (load %.1f ms)\n", model, load_ms);
            printf("text: %s (%zu bytes), add_special_tokens %s\n", path, len,
                   add_special ? "true" : "false");
            printf("encode: median %.1f ms of %d runs after 1 warm-up (min %.1f, max %.1f; "
                   "CPU time %.1f ms)\n",
                   med, repeat, sorted[0], sorted[repeat - 1], med_cpu);
            printf("speed: %.2f MB/s, %.0f tokens/s\n", mbs, tps);
            printf("tokens: %zu (ids fnv1a64 %s)\n", n, fnv);
        }
    }
    free(ids);
    free(ms);
    free(text);
    return rc;
}

int txc_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL;
    const char *bench = NULL;
    int64_t repeat = 5;
    bool repeat_given = false, json = false;
    bool ids_only = false, no_special = false, do_decode = false, keep_special = false;
    char **pos = calloc((size_t)(argc > 0 ? argc : 1), sizeof *pos);
    int n_pos = 0;
    if (!pos) {
        fprintf(stderr, "txc: out of memory\n");
        return EXIT_ERROR;
    }
    int rc = 0;
    bool opts_done = false;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (opts_done || a[0] != '-' || !strcmp(a, "-") || is_integer(a)) {
            pos[n_pos++] = argv[i];
        } else if (!strcmp(a, "--")) {
            opts_done = true;
        } else if (!strcmp(a, "--model") || !strcmp(a, "-m")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "txc: %s needs a value (a folder holding tokenizer.json)\n", a);
                rc = EXIT_ERROR;
            } else {
                model = argv[++i];
            }
        } else if (!strncmp(a, "--model=", 8)) {
            model = a + 8;
        } else if (!strcmp(a, "--bench") || !strcmp(a, "--repeat")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "txc: %s needs a value (%s)\n", a,
                        a[2] == 'b' ? "a text file" : "a number of runs");
                rc = EXIT_ERROR;
            } else if (a[2] == 'b') {
                bench = argv[++i];
            } else if (!txc_cli_parse_int("--repeat", argv[++i], 1, &repeat)) {
                rc = EXIT_ERROR;
            } else if (repeat > 100000) {
                fprintf(stderr, "txc: --repeat expects at most 100000 runs, got %lld\n",
                        (long long)repeat);
                rc = EXIT_ERROR;
            } else {
                repeat_given = true;
            }
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--ids")) {
            ids_only = true;
        } else if (!strcmp(a, "--no-special-tokens")) {
            no_special = true;
        } else if (!strcmp(a, "--decode")) {
            do_decode = true;
        } else if (!strcmp(a, "--keep-special")) {
            keep_special = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(pos);
            return 0;
        } else {
            fprintf(stderr, "txc: unknown option '%s' (see txc tokenize --help)\n", a);
            rc = EXIT_ERROR;
        }
    }
    if (!rc && bench && (do_decode || ids_only || keep_special || n_pos)) {
        fprintf(stderr, "txc: --bench FILE takes no %s\n",
                do_decode ? "--decode" : ids_only ? "--ids" : keep_special ? "--keep-special"
                                                                             : "TEXT argument");
        rc = EXIT_ERROR;
    }
    if (!rc && !bench && (repeat_given || json)) {
        fprintf(stderr, "txc: %s goes with --bench FILE\n", json ? "--json" : "--repeat");
        rc = EXIT_ERROR;
    }
    if (!rc && do_decode && n_pos == 0) {
        fprintf(stderr, "txc: --decode needs at least one ID (see txc tokenize --help)\n");
        rc = EXIT_ERROR;
    }
    if (!rc && !bench && !do_decode && n_pos != 1) {
        fprintf(stderr, "txc: tokenize takes one TEXT argument, got %d (quote the text; see txc "
                        "tokenize --help)\n",
                n_pos);
        rc = EXIT_ERROR;
    }
    if (!rc && do_decode && (ids_only || no_special)) {
        fprintf(stderr, "txc: --decode does not take %s\n", ids_only ? "--ids" : "--no-special-tokens");
        rc = EXIT_ERROR;
    }
    if (!rc && !do_decode && keep_special) {
        fprintf(stderr, "txc: --keep-special goes with --decode\n");
        rc = EXIT_ERROR;
    }
    if (!rc && !model) {
        if (!(model = txc_cli_default_model())) {
            fprintf(stderr, "txc: no model given: pass --model DIR (a folder holding "
                            "tokenizer.json) or set TXC_MODEL\n");
            rc = EXIT_ERROR;
        }
    }
    struct stat sb;
    if (!rc && (stat(model, &sb) != 0 || (txc_gguf_is_path(model) ? !S_ISREG(sb.st_mode)
                                                                  : S_ISREG(sb.st_mode) && txc_cli_is_gguf(model)))) {
        txc_cli_model_not_folder(model); /* (another file is read as a tokenizer.json) */
        rc = EXIT_ERROR;
    }
    if (rc) {
        free(pos);
        return rc;
    }

    txc_clear_error();
    txc_tokenizer *tok = NULL;
    double t0 = txc_cli_now_ms();
    if (txc_tokenizer_load(model, &tok) != TXC_OK) {
        free(pos);
        return txc_cli_fail_in(model);
    }
    double load_ms = txc_cli_now_ms() - t0;
    int32_t *ids = NULL;
    size_t n = 0;
    if (bench) {
        rc = run_bench(tok, model, load_ms, bench, (int)repeat, !no_special, json);
    } else if (do_decode) {
        rc = parse_ids(pos, n_pos, &ids, &n);
        if (!rc && n == 0) {
            fprintf(stderr, "txc: --decode: no ids given (the arguments are empty)\n");
            rc = EXIT_ERROR;
        }
        /* an id below the vocab size without a token is a hole in the vocab, not out of range */
        for (size_t i = 0; !rc && i < n; i++)
            if (ids[i] >= 0 && ids[i] < txc_tokenizer_vocab_size(tok) && !txc_tokenizer_id_to_token(tok, ids[i])) {
                fprintf(stderr, "txc: --decode: id %d is a hole in the vocabulary: no token has it (ids go up to "
                                "%d)\n", (int)ids[i], (int)txc_tokenizer_vocab_size(tok) - 1);
                rc = EXIT_ERROR;
            }
        char *text = NULL;
        size_t len = 0;
        if (!rc && txc_tokenizer_decode(tok, ids, n, !keep_special, &text, &len) != TXC_OK)
            rc = txc_cli_fail("--decode");
        if (!rc) {
            fwrite(text, 1, len, stdout);
            putchar('\n');
        }
        free(text);
    } else {
        char *in = NULL;
        const char *text = pos[0];
        size_t len = strlen(text);
        if (!strcmp(text, "-")) {
            in = read_stream(stdin, &len);
            text = in;
            if (!in) {
                if (errno == EFBIG)
                    fprintf(stderr, "txc: stdin is longer than %zu MiB, the most tokenize reads\n",
                            MAX_TEXT_BYTES >> 20);
                else
                    fprintf(stderr, "txc: cannot read stdin: %s\n", strerror(errno));
                rc = EXIT_ERROR;
            }
        }
        if (!rc && txc_tokenizer_encode(tok, text, len, !no_special, &ids, &n) != TXC_OK)
            rc = txc_cli_fail("encoding");
        for (size_t i = 0; i < n && !rc; i++) {
            if (ids_only) {
                printf(i ? " %d" : "%d", (int)ids[i]);
            } else {
                const char *piece = txc_tokenizer_id_to_token(tok, ids[i]);
                printf("%d\t", (int)ids[i]);
                print_piece(piece ? piece : "");
                putchar('\n');
            }
        }
        if (!rc && ids_only)
            putchar('\n');
        free(in);
    }
    free(ids);
    free(pos);
    txc_tokenizer_free(tok);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "txc: cannot write the output\n");
        rc = EXIT_ERROR;
    }
    return rc;
}
