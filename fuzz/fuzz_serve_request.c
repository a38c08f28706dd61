/* fuzz_serve_request: txc serve's request parser (src/serve/protocol.c,
 * serve_parse_request) on arbitrary bodies, with stories260K's tokenizer
 * (<shared>/models/stories260K) and a ChatML chat template. Input: byte 0's
 * low bit picks the endpoint (/v1/completions or /v1/chat/completions), the
 * rest is the JSON body. Properties: a body is accepted or refused with a
 * 4xx status, an error type and a message (never a 5xx from user input);
 * an accepted request has max_tokens >= 1, a prompt of 1 to context - 1
 * ids, each within the vocabulary; the error JSON can be written; nothing
 * leaks
 * (serve_request_free on both paths). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzutil.h"
#include "serve/serve_impl.h"
#include "txc/chat_template.h"
#include "txc/tokenizer.h"

static const char CHATML[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static txc_tokenizer *tok;
static txc_chat_template *tpl;
static pthread_mutex_t tpl_mu = PTHREAD_MUTEX_INITIALIZER, mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seed_counter;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/stories260K", fz_shared_dir());
    if (txc_tokenizer_load(dir, &tok) != TXC_OK)
        fz_die("fuzz_serve_request: the stories260K tokenizer (set TXC_SHARED_DIR)");
    if (txc_chat_template_parse(CHATML, strlen(CHATML), &tpl) != TXC_OK)
        fz_die("fuzz_serve_request: the ChatML template");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    serve_context c = {
        .tok = tok, .tpl = tpl, .tpl_mu = &tpl_mu, .model_id = "stories260K", .context_len = 512,
        .vocab_size = (int32_t)txc_tokenizer_vocab_size(tok), .default_max_tokens = 64,
        .defaults = {.temperature = 1.0, .top_p = 1.0, .repetition_penalty = 1.0},
        .seed_counter = &seed_counter, .mu = &mu,
    };
    serve_endpoint ep = (data[0] & 1) ? SERVE_CHAT : SERVE_COMPLETIONS;
    serve_request r;
    memset(&r, 0, sizeof r);
    serve_error e;
    memset(&e, 0, sizeof e);
    if (serve_parse_request(&c, ep, (const char *)data + 1, size - 1, &r, &e)) {
        if (r.max_tokens < 1 || r.n_ids < 1 || r.n_ids >= c.context_len || r.n_stop < 0 || r.n_stop > SERVE_MAX_STOP)
            abort();
        for (int64_t i = 0; i < r.n_ids; i++)
            if (r.ids[i] < 0 || r.ids[i] >= c.vocab_size)
                abort();
    } else {
        if (e.status < 400 || e.status > 499 || !e.message[0])
            abort();
        char *j = serve_error_json(&e);
        if (!j)
            abort();
        free(j);
    }
    serve_request_free(&r);
    return 0;
}
