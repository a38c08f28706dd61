/* The tokenizer of a Hugging Face folder as GGUF's tokenizer.ggml.* metadata,
 * for `txc quantize` (src/tools/quantize_vocab.c). */
#ifndef TXC_TOOLS_QUANTIZE_VOCAB_H
#define TXC_TOOLS_QUANTIZE_VOCAB_H

#include <stdint.h>
#include <stddef.h>

#include "txc/gguf_write.h"
#include "txc/hf_config.h"
#include "txc/status.h"

typedef struct quantize_vocab {
    const char *model;   /* tokenizer.ggml.model: "gpt2" or "llama" */
    const char *pre;     /* tokenizer.ggml.pre (gpt2 only) */
    char **tokens;       /* vocab_size strings, every one distinct */
    int32_t *types;      /* llama.cpp's LLAMA_TOKEN_TYPE_*: 1 normal, 2 unknown, 3 control, 4 user-defined,
                          * 5 unused, 6 byte */
    float *scores;       /* llama only */
    int64_t n;
    char **merges;       /* gpt2 only: "a b" */
    size_t n_merges;
    int64_t unk_id;      /* -1: none */
    char *chat_template;
    int add_bos, add_eos; /* -1 unknown */
} quantize_vocab;

/* DIR/tokenizer.json (and tokenizer_config.json) as tokenizer.ggml.*:
 *   a byte-level BPE: model "gpt2", the pre-tokenizer named as llama.cpp
 *     names it (gpt-2, smollm, llama-bpe, qwen2), tokens, token types and
 *     merges (convert_hf_to_gguf's _set_vocab_gpt2);
 *   a SentencePiece-style BPE (byte_fallback, the normalizer Prepend("▁") +
 *     Replace(" ", "▁"), no pre-tokenizer: Llama 2, Mistral, stories260K):
 *     model "llama", tokens, token types (<0xNN> byte, the unk token
 *     unknown, special added tokens control) and scores: a piece's score is
 *     minus one minus the rank of the first merge that makes it (0 for the
 *     pieces no merge makes), so that the merges llama.cpp's SentencePiece
 *     tokenizer and transformers' GGUF converter derive from the scores
 *     (every split of a piece into two pieces, by the piece's score) are the
 *     folder's merges, in their order — checked here, and refused when they
 *     would not be (merges that are not those of a SentencePiece model).
 *     (convert_hf_to_gguf's _set_vocab_llama_hf writes -1000 for every
 *     score, which llama.cpp then merges left to right.)
 * Ids past config's vocab_size are cut (the embedding has no row for them),
 * ids without a token become "[PAD<id>]" (unused). A string twice is
 * refused (llama.cpp's loader asserts it never is). Errors (one message):
 * TXC_ERR_IO, TXC_ERR_FORMAT, TXC_ERR_UNSUPPORTED (another tokenizer),
 * TXC_ERR_NOMEM. */
txc_status quantize_vocab_load(const char *dir, const txc_hf_config *c, quantize_vocab *v);
void quantize_vocab_free(quantize_vocab *v);
/* v's tokenizer.ggml.* keys (and bos/eos/padding ids from c) into w. */
txc_status quantize_vocab_write(txc_gguf_writer *w, const quantize_vocab *v, const txc_hf_config *c);

#endif
