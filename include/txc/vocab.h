/*
 * txc/vocab.h — a vocabulary's pieces as a string -> id map, and the merges
 * that a SentencePiece vocabulary's scores imply.
 *
 * The merges are those of transformers' SentencePieceExtractor.extract
 * (convert_slow_tokenizer.py, used by its GGUF converter
 * integrations/ggml.py GGUFLlamaConverter) and of llama.cpp's SentencePiece
 * tokenizer (llm_tokenizer_spm, which merges the pair whose joined piece has
 * the best score): every split of every piece into two pieces. The tokenizer
 * of a GGUF file (src/tokenizer/tokenizer_gguf.c) builds its tokenizer.json
 * merges from them; `txc quantize` (src/tools/quantize_vocab.c) checks that
 * the scores it writes give a folder's merges back.
 */
#ifndef TXC_VOCAB_H
#define TXC_VOCAB_H

#include <stddef.h>
#include <stdint.h>
#include "txc/status.h"

/* The Split regexes of the Llama 3 and Qwen2 pre-tokenizers, as their
 * tokenizer.json writes them (llama.cpp's tokenizer.ggml.pre llama-bpe and
 * qwen2): what `txc quantize` recognizes in a folder and the GGUF
 * tokenizer writes back. */
#define TXC_LLAMA3_SPLIT_RE                                                                                           \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define TXC_QWEN2_SPLIT_RE                                                                                            \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Open addressing over FNV-1a hashes of the pieces' bytes. */
typedef struct txc_vocab_map {
    uint64_t cap;              /* slots: a power of two, at least twice n */
    int64_t *slot;             /* id + 1; 0 = empty */
    const char *const *pieces; /* borrowed: pieces[id], lens[id] bytes */
    const size_t *lens;
    int64_t n;
} txc_vocab_map;

/* The map of pieces[0, n): pieces[id] is lens[id] bytes (any bytes, no NUL
 * needed). A string that stands at several ids maps to the first (the
 * callers refuse a string twice, apart from a GGUF's empty pieces, as
 * llama.cpp's llama_vocab::load does). The arrays are borrowed: they must
 * outlive the map.
 * Errors: TXC_ERR_INVALID (n < 0 or past 2^61), TXC_ERR_NOMEM; *m is then
 * empty (txc_vocab_map_free is safe on it). */
txc_status txc_vocab_map_init(txc_vocab_map *m, const char *const *pieces, const size_t *lens, int64_t n);

/* The first id of the piece s (len bytes); -1 when no piece is s. */
int64_t txc_vocab_map_get(const txc_vocab_map *m, const char *s, size_t len);

/* Frees the slots (not the borrowed pieces); *m is left empty. */
void txc_vocab_map_free(txc_vocab_map *m);

/* One merge: the piece `id` (score `score`) is the pieces left + right. */
typedef struct txc_spm_merge {
    float score;
    int64_t id, left, right;
} txc_spm_merge;

/* SentencePieceExtractor.extract over the map's pieces: for each id whose
 * piece maps back to it (the first id of a string), every split of its
 * bytes at a UTF-8 character boundary (Python str indices) into two pieces
 * that are both in the map, as (score, id, left, right), ordered by score
 * descending, then id, left and right ascending. scores: one float32 per id
 * (tokenizer.ggml.scores); NULL: -id (the order of the ids).
 * *out is malloc'd (the caller frees it; NULL when *n_out is 0).
 * Errors: TXC_ERR_NOMEM (*out NULL, *n_out 0). */
txc_status txc_spm_merges(const txc_vocab_map *m, const float *scores, txc_spm_merge **out, size_t *n_out);

#endif
