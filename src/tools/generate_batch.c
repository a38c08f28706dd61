/* `txc generate --prompt-file FILE [--batch-size N] [--json]`: one prompt
 * a line, generated together through txc/batch.h's slots, outputs in the
 * file's order. See src/tools/generate_batch.h. */
#include "tools/generate_batch.h"
#include "tools/cli.h"
#include "txc/batch.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* At most this many prompts per file. */
#define MAX_PROMPTS 100000

typedef struct row {
    char *prompt;
    int32_t *ids;
    size_t n_ids;
    int32_t *out;
    int64_t n_out;
    char *text;       /* the continuation so far (decoded) */
    size_t n_text, cap_text;
    txc_detok_stream *detok;
    const char *finish; /* "stop" / "length" when done */
    int64_t max_new;
    bool done;
} row;

/* The lines of `path` (a last line without a newline counts; "\r\n" ends a
 * line too), read by txc_cli_read_prompt: its size bound (64 MiB), UTF-8 and
 * file-type checks apply to the whole file; or `given` (given_len bytes, the
 * file's text read once already: stdin's). */
static char **read_lines(const char *path, const char *given, size_t given_len, size_t *n)
{
    *n = 0;
    size_t len = given_len;
    char *text = given ? malloc(given_len + 1) : txc_cli_read_prompt("--prompt-file", path, TXC_CLI_MAX_PROMPT_BYTES, &len);
    if (!text) {
        if (given)
            fprintf(stderr, "txc: out of memory (--prompt-file)\n");
        return NULL;
    }
    if (given) {
        memcpy(text, given, given_len);
        text[given_len] = 0;
    }
    size_t count = 0; /* txc_cli_read_prompt dropped one final newline */
    for (size_t i = 0; i <= len; i++)
        count += i == len || text[i] == '\n';
    if (count > MAX_PROMPTS) {
        fprintf(stderr, "txc: --prompt-file: more than %d prompts in '%s'\n", MAX_PROMPTS, path);
        free(text);
        return NULL;
    }
    char **lines = calloc(count, sizeof *lines);
    if (!lines) {
        fprintf(stderr, "txc: out of memory (--prompt-file)\n");
        free(text);
        return NULL;
    }
    for (size_t i = 0, start = 0; i <= len; i++) {
        if (i < len && text[i] != '\n')
            continue;
        size_t end = i;
        if (end > start && text[end - 1] == '\r')
            end--;
        if (!(lines[*n] = strndup(text + start, end - start))) {
            fprintf(stderr, "txc: out of memory (--prompt-file)\n");
            for (size_t j = 0; j < *n; j++)
                free(lines[j]);
            free(lines);
            free(text);
            *n = 0;
            return NULL;
        }
        (*n)++;
        start = i + 1;
    }
    free(text);
    if (*n == 1 && !lines[0][0]) {
        fprintf(stderr, "txc: --prompt-file: '%s' has no prompt (one prompt a line)\n", path);
        free(lines[0]);
        free(lines);
        *n = 0;
        return NULL;
    }
    return lines;
}

static bool append(row *r, const char *s, size_t n)
{
    if (r->n_text + n + 1 > r->cap_text) {
        size_t c = r->cap_text ? r->cap_text : 64;
        while (c < r->n_text + n + 1)
            c *= 2;
        char *p = realloc(r->text, c);
        if (!p)
            return false;
        r->text = p;
        r->cap_text = c;
    }
    memcpy(r->text + r->n_text, s, n);
    r->n_text += n;
    r->text[r->n_text] = 0;
    return true;
}

/* The first stop string in the text: cut there, true. */
static bool cut_stop(row *r, const char *const *stop, int n_stop)
{
    char *best = NULL;
    for (int i = 0; i < n_stop; i++) {
        char *p = r->text ? strstr(r->text, stop[i]) : NULL;
        if (p && (!best || p < best))
            best = p;
    }
    if (!best)
        return false;
    *best = 0;
    r->n_text = (size_t)(best - r->text);
    return true;
}

/* A line of text output: the continuation with \ and newlines escaped. */
static void print_text(FILE *out, const row *r)
{
    for (size_t i = 0; i < r->n_text; i++) {
        char c = r->text[i];
        if (c == '\\')
            fputs("\\\\", out);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\r')
            fputs("\\r", out);
        else
            fputc(c, out);
    }
    fputc('\n', out);
}

static bool print_json(FILE *out, const row *r, size_t index)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", (double)index);
    cJSON_AddStringToObject(j, "prompt", r->prompt);
    cJSON_AddStringToObject(j, "text", r->text ? r->text : "");
    cJSON *ids = cJSON_AddArrayToObject(j, "token_ids");
    for (int64_t i = 0; ids && i < r->n_out; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->out[i]));
    cJSON_AddStringToObject(j, "finish_reason", r->finish ? r->finish : "length");
    cJSON_AddNumberToObject(j, "prompt_tokens", (double)r->n_ids);
    cJSON_AddNumberToObject(j, "completion_tokens", (double)r->n_out);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        return false;
    fprintf(out, "%s\n", s);
    free(s);
    return true;
}

int txc_cli_generate_file(txc_model *model, const txc_tokenizer *tok, const txc_generate_options *opts,
                          const txc_cli_batch_args *a)
{
    FILE *out = a->out ? a->out : stdout, *err = a->err ? a->err : stderr;
    size_t n = 0;
    char **lines = read_lines(a->prompt_file, a->text, a->text_len, &n);
    if (!lines)
        return EXIT_ERROR;
    row *rows = calloc(n, sizeof *rows);
    int rc = 0;
    txc_batch *b = NULL;
    if (!rows) {
        fprintf(err, "txc: out of memory (--prompt-file)\n");
        rc = EXIT_ERROR;
        goto done;
    }
    int64_t longest = 0, most_new = 1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rows[i].prompt = lines[i];
        lines[i] = NULL;
        if (txc_tokenizer_encode(tok, rows[i].prompt, strlen(rows[i].prompt), true, &rows[i].ids, &rows[i].n_ids) !=
                TXC_OK ||
            !(rows[i].detok = txc_detok_stream_new(tok, true))) {
            char what[64];
            snprintf(what, sizeof what, "prompt %zu", i + 1);
            rc = txc_cli_fail_in(what);
        } else if (rows[i].n_ids == 0) {
            fprintf(err, "txc: prompt %zu encodes to no tokens (the tokenizer adds no BOS)\n", i + 1);
            rc = EXIT_ERROR;
        }
        longest = (int64_t)rows[i].n_ids > longest ? (int64_t)rows[i].n_ids : longest;
        rows[i].max_new = txc_cli_max_new_tokens(a->max_new_tokens, a->gcfg, (int64_t)rows[i].n_ids,
                                                 opts->max_new_tokens);
        most_new = rows[i].max_new > most_new ? rows[i].max_new : most_new;
    }
    if (rc)
        goto done;
    txc_batch_options bo = txc_batch_default_options();
    bo.n_slots = (int)(a->batch_size < (int64_t)n ? a->batch_size : (int64_t)n);
    bo.jit = opts->jit;
    /* the default length: as txc generate's (prompt + max_new_tokens), for the longest prompt */
    bo.max_cache_len = a->max_cache_len > 0 ? a->max_cache_len : longest + most_new;
    if (!(b = txc_batch_new(model, &bo))) {
        rc = txc_cli_fail("generate");
        goto done;
    }
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    int slot_row[TXC_BATCH_MAX_SLOTS];
    size_t next = 0, finished = 0, printed = 0;
    while (finished < n && rc == 0) {
        while (next < n && txc_batch_busy(b) < bo.n_slots) {
            txc_batch_request q;
            memset(&q, 0, sizeof q);
            q.id = next;
            q.input_ids = rows[next].ids;
            q.n_input = (int64_t)rows[next].n_ids;
            q.gen = *opts;
            q.gen.max_new_tokens = rows[next].max_new;
            q.cache_prompt = false; /* every output exactly that of its prompt alone */
            int s;
            int64_t cap = rows[next].max_new < bo.max_cache_len ? rows[next].max_new : bo.max_cache_len;
            if (!(rows[next].out = malloc(sizeof(int32_t) * (size_t)(cap > 0 ? cap : 1))) ||
                txc_batch_add(b, &q, &s) != TXC_OK) {
                char what[64];
                snprintf(what, sizeof what, "prompt %zu", next + 1);
                rc = rows[next].out ? txc_cli_fail_in(what) : (fprintf(err, "txc: out of memory\n"), EXIT_ERROR);
                break;
            }
            slot_row[s] = (int)next;
            next++;
        }
        int n_ev = 0;
        if (rc == 0 && txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n_ev) != TXC_OK)
            rc = txc_cli_fail("generate");
        for (int k = 0; k < n_ev && rc == 0; k++) {
            row *r = &rows[ev[k].id];
            const char *piece;
            size_t len;
            r->out[r->n_out++] = ev[k].token_id;
            bool ended = ev[k].finish != TXC_BATCH_RUNNING;
            if (txc_detok_stream_put(r->detok, ev[k].token_id, &piece, &len) != TXC_OK || !append(r, piece, len) ||
                (ended && (txc_detok_stream_flush(r->detok, &piece, &len) != TXC_OK || !append(r, piece, len)))) {
                rc = txc_cli_fail("decode");
                break;
            }
            if (!ended && cut_stop(r, a->stop, a->n_stop)) { /* a stop string: the slot is free at once */
                txc_batch_cancel(b, ev[k].slot);
                ended = true;
                r->finish = "stop";
            } else if (ended) {
                cut_stop(r, a->stop, a->n_stop);
                r->finish = ev[k].finish == TXC_BATCH_STOP ? "stop" : "length";
            }
            if (ended) {
                r->done = true;
                finished++;
            }
        }
        /* print in the file's order as soon as the next one is done */
        while (rc == 0 && printed < n && rows[printed].done) {
            if (a->json ? !print_json(out, &rows[printed], printed) : (print_text(out, &rows[printed]), false)) {
                fprintf(err, "txc: out of memory (--json)\n");
                rc = EXIT_ERROR;
            }
            printed++;
        }
        fflush(out);
        (void)slot_row;
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) {
        fprintf(err, "txc: writing the output failed\n");
        rc = EXIT_ERROR;
    }
    if (rc == 0 && a->verbose) {
        txc_batch_stats st = txc_batch_get_stats(b);
        fprintf(err, "batch: %zu prompts, %d slots, max_cache_len %lld; prefill %lld tokens in %.1f ms; decode "
                        "%lld tokens in %.1f ms (%.1f tokens/s aggregate); %lld plans compiled\n",
                n, bo.n_slots, (long long)txc_batch_max_cache_len(b), (long long)st.prefill_tokens, st.prefill_ms,
                (long long)st.decode_tokens, st.decode_ms,
                st.decode_ms > 0 ? (double)st.decode_tokens * 1e3 / st.decode_ms : 0.0, (long long)st.compilations);
    }
done:
    txc_batch_free(b);
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].prompt);
        free(rows[i].ids);
        free(rows[i].out);
        free(rows[i].text);
        txc_detok_stream_free(rows[i].detok);
    }
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    free(rows);
    return rc;
}
