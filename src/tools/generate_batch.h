/* `txc generate --prompt-file FILE [--batch-size N] [--json]`
 * (src/tools/generate_batch.c). */
#ifndef TXC_TOOLS_GENERATE_BATCH_H
#define TXC_TOOLS_GENERATE_BATCH_H

#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include "txc/generate.h"
#include "txc/hf_config.h"
#include "txc/tokenizer.h"

typedef struct txc_cli_batch_args {
    const char *prompt_file;   /* one prompt a line */
    const char *text;          /* or its text, read once already ("-": stdin's), text_len bytes; NULL: read it */
    size_t text_len;
    int64_t batch_size;        /* slots (1..TXC_BATCH_MAX_SLOTS) */
    int64_t max_cache_len;     /* per slot; 0: the longest prompt + max_new_tokens */
    bool json, verbose;
    int64_t max_new_tokens;    /* --max-new-tokens, or -1: per prompt as txc generate (txc_cli_max_new_tokens) */
    const txc_generation_config *gcfg;
    const char *const *stop;   /* --stop strings */
    int n_stop;
    FILE *out, *err;           /* the outputs and the messages (NULL: stdout, stderr; an in-process device but
                                  0 passes its /dev/null for both) */
} txc_cli_batch_args;

/* Every prompt of the file (BOS added as txc generate does) generated with
 * `opts` (sampling, seed, max_new_tokens, eos, jit) through a batch of
 * batch_size slots, prompts taking slots as they free up; outputs printed
 * in the file's order: a line per prompt (the continuation, "\\" and
 * newlines escaped as \\\\ and \\n), or with json one JSON object a line
 * ({"index", "prompt", "text", "token_ids", "finish_reason": "stop" |
 * "length", "prompt_tokens", "completion_tokens"}). Each output is that of
 * its prompt alone (txc/batch.h's batch invariance). Returns the exit status
 * (2 after one line on stderr). */
int txc_cli_generate_file(txc_model *model, const txc_tokenizer *tok, const txc_generate_options *opts,
                          const txc_cli_batch_args *a);

#endif
