/* fuzz_tp_step: the step messages the ranks but 0 of `mpirun -np N txc
 * serve --tp N` replay (src/serve/tp_serve.c, serve_tp_follow_records) on a
 * batch of stories260K (<shared>/models/stories260K; 4 slots, 64 positions,
 * eager). Input: int64 words (little-endian; a trailing partial word is
 * dropped): ADD slot n_input <request words> ids..., CANCEL slot, EVENTS n
 * (slot token finish)*n, anything else. Each ADD's request words are
 * replaced by a real request's bytes (txc_batch_default_request with a
 * fuzzed max_new_tokens and seed): rank 0 sends the struct as it holds it,
 * so the fuzzed part is the framing, the counts, the slots and the ids.
 * Properties: the walk ends with TXC_OK or a status and a message naming the
 * rank; no crash, leak or UB; the batch stays usable (every slot cancelled
 * after each input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzutil.h"
#include "serve/serve_impl.h"
#include "txc/batch.h"
#include "txc/model.h"

#define SLOTS 4

static txc_model *model;
static txc_batch *batch;
static txc_batch_request req;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/stories260K", fz_shared_dir());
    if (txc_model_load(dir, NULL, &model) != TXC_OK)
        fz_die("fuzz_tp_step: the stories260K model (set TXC_SHARED_DIR)");
    txc_batch_options bo = txc_batch_default_options();
    bo.n_slots = SLOTS, bo.max_cache_len = 64, bo.jit = false;
    if (!(batch = txc_batch_new(model, &bo)))
        fz_die("fuzz_tp_step: the batch");
    req = txc_batch_default_request(model, dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t n = (int64_t)(size / 8);
    int64_t *w = malloc(sizeof *w * (size_t)(n ? n : 1));
    if (!w)
        return 0;
    memcpy(w, data, sizeof *w * (size_t)n);
    /* the ADD records' request words: a real request (as rank 0 holds it), walked as the decoder walks */
    for (int64_t i = 0; i < n;) {
        if (w[i] == SERVE_TP_REC_ADD && i + 3 + SERVE_TP_REQ_WORDS <= n && w[i + 2] >= 1 &&
            w[i + 2] <= n - i - 3 - SERVE_TP_REQ_WORDS) {
            txc_batch_request q = req;
            q.gen.max_new_tokens = 1 + (int64_t)((uint64_t)w[i + 3] % 80);
            q.gen.seed = (uint64_t)w[i + 4];
            q.id = (uint64_t)i;
            memset(w + i + 3, 0, sizeof *w * (size_t)SERVE_TP_REQ_WORDS);
            memcpy(w + i + 3, &q, sizeof q);
            i += 3 + SERVE_TP_REQ_WORDS + w[i + 2];
        } else if (w[i] == SERVE_TP_REC_CANCEL && i + 2 <= n) {
            i += 2;
        } else if (w[i] == SERVE_TP_REC_EVENTS && i + 2 <= n && w[i + 1] >= 0 && w[i + 1] <= (n - i - 2) / 3) {
            i += 2 + 3 * w[i + 1];
        } else {
            break;
        }
    }
    txc_clear_error();
    txc_status s = serve_tp_follow_records(batch, w, n, NULL, 0, 1);
    if (s != TXC_OK && !strstr(txc_last_error(), "rank 1"))
        fz_die("fuzz_tp_step: an error that does not name the rank");
    for (int k = 0; k < SLOTS; k++)
        txc_batch_cancel(batch, k); /* (a free slot: an error, ignored) */
    free(w);
    return 0;
}
