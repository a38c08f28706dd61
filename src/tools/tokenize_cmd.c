/*
 * txc tokenize — a model folder's tokenizer.json from the command line.
 *
 *   txc tokenize [--model DIR] [--no-special-tokens] [--ids] TEXT
 *   txc tokenize [--model DIR] --decode [--keep-special] ID...
 *
 * Encoding prints one token per line, "id<TAB>piece", the piece as the
 * vocabulary spells it ("Ġthe", "▁the", "<0x0A>") with control characters and
 * backslashes escaped C-style so that each token stays on its line; --ids
 * prints only the ids, space-separated, on one line. TEXT "-" reads stdin.
 * Decoding prints decode(ids, skip_special_tokens) and a newline.
 * Exit status: 0, or 2 on any error (one line on stderr).
 */
#include "tools/tokenize_cmd.h"
#include "tools/cli.h"

#include "txc/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>



static void usage(FILE *f)
{
    fprintf(f,
            "usage: txc tokenize [--model DIR] [--no-special-tokens] [--ids] TEXT\n"
            "       txc tokenize [--model DIR] --decode [--keep-special] ID...\n"
            "\n"
            "Encode TEXT (\"-\": stdin) with the tokenizer.json of DIR, or decode ids.\n"
            "  --model DIR          folder holding tokenizer.json (no weights needed), or the\n"
            "                       file itself (default: $TXC_MODEL, else " DEFAULT_MODEL_REL ")\n"
            "  --ids                print only the ids, space-separated, on one line (default:\n"
            "                       one \"id<TAB>piece\" line per token)\n"
            "  --no-special-tokens  leave out what the post-processor adds (BOS...)\n"
            "  --decode             the arguments are ids: print their decoded text\n"
            "  --keep-special       with --decode: keep special tokens (default: skip them)\n");
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

static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
    }
    if (buf && ferror(stdin)) {
        free(buf);
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

int txc_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL;
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
    if (!rc && !do_decode && n_pos != 1) {
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
    if (!rc && stat(model, &sb) != 0) {
        fprintf(stderr, "txc: model folder %s does not exist\n", model);
        rc = EXIT_ERROR;
    }
    if (rc) {
        free(pos);
        return rc;
    }

    txc_clear_error();
    txc_tokenizer *tok = NULL;
    if (txc_tokenizer_load(model, &tok) != TXC_OK) {
        free(pos);
        return txc_cli_fail_in(model);
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (do_decode) {
        rc = parse_ids(pos, n_pos, &ids, &n);
        char *text = NULL;
        size_t len = 0;
        if (!rc && txc_tokenizer_decode(tok, ids, n, !keep_special, &text, &len) != TXC_OK)
            rc = txc_cli_fail_in("--decode");
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
            in = read_stdin(&len);
            text = in;
            if (!in) {
                fprintf(stderr, "txc: cannot read stdin: %s\n", strerror(errno));
                rc = EXIT_ERROR;
            }
        }
        if (!rc && txc_tokenizer_encode(tok, text, len, !no_special, &ids, &n) != TXC_OK)
            rc = txc_cli_fail_in("tokenize");
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
