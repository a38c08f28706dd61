/* `txc bench --batch LIST`: aggregate and per-sequence decode tok/s of B
 * sequences generated together through txc/batch.h's slots (one decode
 * forward per token for all B rows), for each B of LIST. See
 * src/tools/bench_batch.h. */
#include "tools/bench_batch.h"
#include "tools/bench_profile.h"
#include "tools/cli.h"
#include "txc/batch.h"
#include "txc/ops.h"
#include "txc/threads.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This process's CPU time (all threads), ms: on a shared machine the wall
 * time of a step includes other processes' turns. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool txc_bench_parse_batch_list(const char *s, int *sizes, int max, int *n)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > TXC_BATCH_MAX_SLOTS || (*end && *end != ',') || *n >= max) {
            fprintf(stderr, "txc: --batch expects comma-separated sizes in [1, %d] (at most %d of them), got '%s'\n",
                    TXC_BATCH_MAX_SLOTS, max, s);
            return false;
        }
        sizes[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) {
        fprintf(stderr, "txc: --batch expects comma-separated sizes, got '%s'\n", s);
        return false;
    }
    return true;
}

typedef struct batch_row {
    int B;
    double decode_ms, prefill_ms, decode_cpu_ms;
    int64_t decode_tokens;
    int64_t compilations;
    txc_bench_profile decode_prof; /* --profile: the timed run's decode step */
} batch_row;

/* B requests of the prompt (row r: the prompt with its first id shifted by
 * r, so the rows are distinct sequences), each new_tokens long, no eos,
 * through the batch `b` of B slots; the decode rows count the steps of the
 * whole batch: after every row got its first token (the prefills of a
 * step run together within the batch's prefill_tokens) and before the
 * first row ends. The row's prefill_ms and
 * compilations are this run's (the batch's counters before and after). */
static txc_status run_batch(txc_batch *b, txc_model *model, int B, const int32_t *prompt, int64_t n_prompt,
                            int64_t new_tokens, batch_row *row)
{
    const int64_t V = txc_model_config(model)->vocab_size;
    txc_batch_stats before = txc_batch_get_stats(b);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_prompt * B));
    txc_status st = ids ? TXC_OK : txc_error(TXC_ERR_NOMEM, "out of memory (bench)");
    for (int r = 0; r < B && st == TXC_OK; r++) {
        memcpy(ids + r * n_prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
        ids[r * n_prompt] = (int32_t)(((int64_t)prompt[0] + r) % V);
        txc_batch_request q = txc_batch_default_request(model, NULL);
        q.id = (uint64_t)r;
        q.input_ids = ids + r * n_prompt;
        q.n_input = n_prompt;
        q.gen.max_new_tokens = new_tokens;
        q.gen.n_eos = 0;
        q.gen.do_sample = false;
        q.gen.repetition_penalty = 1.0;
        q.cache_prompt = false;
        int s;
        st = txc_batch_add(b, &q, &s);
    }
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    int started = 0, finished = 0;
    double t_decode = 0;
    while (st == TXC_OK && finished < B) {
        int n;
        bool decoding = started == B;
        double t0 = txc_cli_now_ms(), c0 = cpu_ms();
        st = txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n);
        double dt = txc_cli_now_ms() - t0, dc = cpu_ms() - c0;
        for (int k = 0; k < n && st == TXC_OK; k++) {
            started += ev[k].n_new == 1;
            finished += ev[k].finish != TXC_BATCH_RUNNING;
        }
        if (decoding && n == B) { /* a step of the whole batch: B rows in one decode forward */
            row->decode_tokens += n;
            t_decode += dt;
            row->decode_cpu_ms += dc;
        }
    }
    txc_batch_stats after = txc_batch_get_stats(b);
    row->B = B;
    row->decode_ms = t_decode;
    row->prefill_ms = after.prefill_ms - before.prefill_ms;
    row->compilations = after.compilations - before.compilations;
    free(ids);
    return st;
}

int txc_bench_batch(txc_model *model, const char *model_name, const int *sizes, int n_sizes, const int32_t *prompt,
                    int64_t n_prompt, int64_t new_tokens, int64_t max_cache_len, bool json, const char *cpu,
                    bool profile, FILE *out)
{
    batch_row rows[TXC_BENCH_MAX_BATCHES];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < n_sizes; i++) {
        const int B = sizes[i];
        /* the prefill gives every row its first token: the rows decode
         * together from the second on */
        if (new_tokens < 2) {
            fprintf(stderr, "txc: --batch %d needs --new-tokens >= 2 (the prefill gives the first token; the rows "
                            "decode together from the second), got %lld\n",
                    B, (long long)new_tokens);
            return EXIT_ERROR;
        }
        txc_batch_options o = txc_batch_default_options();
        o.n_slots = B;
        o.max_cache_len = max_cache_len;
        txc_batch *b = txc_batch_new(model, &o);
        if (!b)
            return txc_cli_fail_in("--batch");
        /* a short run first, through the same batch (its plans are its own):
         * B + 1 tokens a row, so one step of all B rows compiles the B-row
         * decode plan outside the timed run */
        batch_row warm = {0};
        txc_status st = run_batch(b, model, B, prompt, n_prompt, B + 1, &warm);
        const uint64_t warm_calls = txc_jit_get_stats(txc_batch_jit(b, 1)).calls;
        if (st == TXC_OK && profile)
            txc_batch_set_profile(b, true); /* from zero, the timed run only */
        if (st == TXC_OK)
            st = run_batch(b, model, B, prompt, n_prompt, new_tokens, &rows[i]);
        if (st == TXC_OK && profile && o.jit) {
            txc_bench_profile_collect_jit(txc_batch_jit(b, 1), &rows[i].decode_prof);
            rows[i].decode_prof.calls -= (int64_t)warm_calls; /* the timed run's steps */
        }
        txc_batch_free(b);
        if (st != TXC_OK)
            return txc_cli_fail_in("--batch");
        if (rows[i].decode_tokens == 0) { /* (a longer prompt than one prefill chunk takes more steps) */
            fprintf(stderr, "txc: --batch %d: no step decoded all %d rows together (--new-tokens %lld is too few "
                            "for --prompt-tokens %lld)\n",
                    B, B, (long long)new_tokens, (long long)n_prompt);
            return EXIT_ERROR;
        }
    }
    double base = 0;
    for (int i = 0; i < n_sizes; i++)
        if (rows[i].B == 1 && rows[i].decode_ms > 0)
            base = (double)rows[i].decode_tokens / rows[i].decode_ms * 1e3;
    if (json) {
        cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "batch_rows");
        cJSON_AddStringToObject(j, "model", model_name);
        cJSON_AddStringToObject(j, "cpu", cpu);
        cJSON_AddNumberToObject(j, "threads", txc_threads_get());
        cJSON_AddBoolToObject(j, "batch_invariant", txc_ops_batch_invariant());
        cJSON_AddNumberToObject(j, "prompt_tokens", (double)n_prompt);
        cJSON_AddNumberToObject(j, "new_tokens", (double)new_tokens);
        for (int i = 0; i < n_sizes; i++) {
            const batch_row *r = &rows[i];
            double agg = r->decode_ms > 0 ? (double)r->decode_tokens / r->decode_ms * 1e3 : 0;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "batch", r->B);
            cJSON_AddNumberToObject(o, "decode_tokens", (double)r->decode_tokens);
            cJSON_AddNumberToObject(o, "decode_ms", r->decode_ms);
            cJSON_AddNumberToObject(o, "decode_cpu_ms", r->decode_cpu_ms);
            cJSON_AddNumberToObject(o, "aggregate_tok_s", agg);
            cJSON_AddNumberToObject(o, "per_sequence_tok_s", agg / r->B);
            if (base > 0)
                cJSON_AddNumberToObject(o, "vs_batch_1", agg / base);
            cJSON_AddNumberToObject(o, "prefill_ms", r->prefill_ms);
            cJSON_AddNumberToObject(o, "compilations", (double)r->compilations);
            txc_bench_profile_json(o, "decode_profile", &r->decode_prof, 0);
            cJSON_AddItemToArray(arr, o);
        }
        char *s = cJSON_PrintUnformatted(j);
        fprintf(out, "%s\n", s ? s : "{}");
        free(s);
        cJSON_Delete(j);
        return 0;
    }
    fprintf(out, "model: %s; %s; %d threads\n", model_name, cpu, txc_threads_get());
    fprintf(out, "batched greedy decode (txc/batch.h slots, compiled): prompt %lld tokens, %lld new tokens per sequence, "
           "batch invariance %s\n",
           (long long)n_prompt, (long long)new_tokens, txc_ops_batch_invariant() ? "on" : "off (--no-batch-invariant)");
    fprintf(out, "%6s  %16s  %16s  %11s  %11s\n", "batch", "aggregate tok/s", "per-seq tok/s", "vs batch 1", "prefill ms");
    for (int i = 0; i < n_sizes; i++) {
        const batch_row *r = &rows[i];
        double agg = r->decode_ms > 0 ? (double)r->decode_tokens / r->decode_ms * 1e3 : 0;
        char vs[32] = "-";
        if (base > 0)
            snprintf(vs, sizeof vs, "%.2fx", agg / base);
        fprintf(out, "%6d  %16.2f  %16.2f  %11s  %11.1f\n", r->B, agg, agg / r->B, vs, r->prefill_ms);
    }
    for (int i = 0; i < n_sizes; i++) { /* --profile: where each batch's decode step spends its kernel time */
        char label[32], what[64];
        snprintf(label, sizeof label, "batch %d", rows[i].B);
        snprintf(what, sizeof what, "%lld steps", (long long)rows[i].decode_prof.calls);
        txc_bench_profile_print(label, "decode", what, &rows[i].decode_prof, 0);
    }
    return 0;
}
