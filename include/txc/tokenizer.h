/*
 * txc/tokenizer.h — Hugging Face tokenizer.json: load, encode, decode, stream.
 *
 * The semantics are those of the `tokenizers` Rust crate (what transformers'
 * fast tokenizers run), component for component:
 *
 *   txc_tokenizer *tok;
 *   if (txc_tokenizer_load("models/stories260K", &tok)) { puts(txc_last_error()); ... }
 *   int32_t *ids; size_t n;
 *   txc_tokenizer_encode(tok, "Once upon a time", 16, true, &ids, &n); // [1, ...] BOS first
 *   char *text; size_t len;
 *   txc_tokenizer_decode(tok, ids, n, true, &text, &len);             // "Once upon a time"
 *   free(ids); free(text); txc_tokenizer_free(tok);
 *
 * Supported: the BPE families of Hugging Face models — byte-level BPE
 * (GPT-2, Llama 3, Qwen 2/2.5/3, DeepSeek V3, gpt-oss) and SentencePiece-style
 * BPE with byte fallback (Llama 2, TinyLlama, Mistral, Phi-3, Gemma 3,
 * stories260K). Every component the crate serializes for them:
 *   model           BPE: vocab, merges ("a b" strings or ["a","b"] pairs),
 *                   unk_token, fuse_unk, byte_fallback, ignore_merges;
 *                   dropout must be null/0, continuing_subword_prefix and
 *                   end_of_word_suffix null/"".
 *   normalizer      NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Strip,
 *                   StripAccents, Replace (String or Regex pattern), Prepend,
 *                   Sequence.
 *   pre_tokenizer   ByteLevel (add_prefix_space, use_regex: GPT-2's pattern),
 *                   Split (String or Regex pattern; behavior Removed,
 *                   Isolated, MergedWithPrevious, MergedWithNext, Contiguous;
 *                   invert), Digits (individual_digits), Punctuation
 *                   (behavior), Whitespace, WhitespaceSplit,
 *                   CharDelimiterSplit, Metaspace (replacement,
 *                   prepend_scheme always/first/never or legacy
 *                   add_prefix_space, split), Sequence.
 *   post_processor  TemplateProcessing ("single" template), ByteLevel (a
 *                   no-op on ids), Sequence.
 *   decoder         null (tokens joined by " "), ByteLevel, Replace (String
 *                   or Regex), ByteFallback, Fuse, Strip, Metaspace, Sequence.
 *   added_tokens    special, lstrip, rstrip, normalized, single_word: the input
 *                   is first split on added tokens (leftmost-longest match, as
 *                   the crate's AddedVocabulary), the pieces between them go
 *                   through normalizer, pre-tokenizer and model.
 * Regexes run on PCRE2 with the classes of the crate's Oniguruma engine
 * (\s is White_Space, \w Unicode word characters, \h a hex digit); a pattern
 * PCRE2 cannot express (onig's class intersection "&&", a variable-length
 * lookbehind) fails to load with TXC_ERR_UNSUPPORTED quoting it.
 * Anything else (model WordPiece/Unigram/WordLevel; pre-tokenizers
 * BertPreTokenizer, UnicodeScripts...; normalizers BertNormalizer,
 * Precompiled, Nmt; decoders WordPiece, CTC...; post-processors
 * RobertaProcessing, BertProcessing) fails to load with TXC_ERR_UNSUPPORTED
 * and a message naming the component, e.g. "tokenizer.json: pre_tokenizer
 * BertPreTokenizer not supported".
 *
 * Deviations from the crate, on purpose:
 *   - decode() rejects ids that are out of range (TXC_ERR_INVALID); the crate
 *     silently drops them.
 *   - "truncation" and "padding" in tokenizer.json are ignored, as
 *     transformers does (it turns them off unless a call asks for them).
 *   - token strings cannot hold a NUL character (cJSON strings).
 *   - Unicode data: the crate mixes versions (its regexes and Rust's char
 *     methods follow Unicode 16, its normalizers Unicode 9.0, Punctuation an
 *     older table); txc follows each, with tables read off the tokenizers
 *     package (src/tokenizer/tokenizer_unidata.c) on top of utf8proc and PCRE2. Not
 *     covered: a negated class inside a character class ([\W], [\P{L}])
 *     has PCRE2's Unicode version, as do \p{..} names other than general
 *     categories (scripts, binary properties).
 *
 * A txc_tokenizer is immutable after loading: encode/decode may run from
 * many threads at once. A txc_detok_stream belongs to one thread.
 */
#ifndef TXC_TOKENIZER_H
#define TXC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txc_tokenizer txc_tokenizer;

/* Load a tokenizer.json. `path` is the file, or a directory holding
 * "tokenizer.json". On success *out owns the tokenizer (txc_tokenizer_free).
 * Errors: TXC_ERR_INVALID (NULL argument), TXC_ERR_IO (missing/unreadable),
 * TXC_ERR_FORMAT (not UTF-8, not JSON, a field of the wrong type, a merge whose parts or
 * result are not in the vocab — as the crate's BpeBuilder; a vocab id of
 * 2 x the number of vocab tokens + 65536 or more: txc's id tables are dense,
 * and a real vocab has few holes), TXC_ERR_UNSUPPORTED
 * (a valid component txc does not implement; the message names it),
 * TXC_ERR_NOMEM. Added-token ids follow the crate's AddedVocabulary: a token
 * already in the model vocab keeps its id, others are numbered after it; a
 * token equal (content and flags) to the latest one of its id is skipped.
 * Loading takes time linear in the added tokens. */
txc_status txc_tokenizer_load(const char *path, txc_tokenizer **out);

/* Parse tokenizer.json text held in memory (`len` bytes, need not be
 * NUL-terminated), as txc_tokenizer_load does with a file's contents
 * (messages name it "tokenizer.json"). Errors: as txc_tokenizer_load but
 * TXC_ERR_IO; TXC_ERR_INVALID when out is NULL, or json_text is NULL with
 * len > 0. */
txc_status txc_tokenizer_parse(const char *json_text, size_t len, txc_tokenizer **out);

/* Free a tokenizer (NULL is ignored). */
void txc_tokenizer_free(txc_tokenizer *tok);

/* Encode `len` bytes of UTF-8 `text` (it may contain NUL; NULL is allowed
 * when len is 0) as Tokenizer::encode(text, add_special_tokens) does:
 * added-token split, normalizer, pre-tokenizer, BPE; add_special_tokens
 * applies the post-processor (the BOS of Llama's template).
 * On success *ids is malloc'd (caller frees; non-NULL even when *n_ids is 0).
 * Errors: TXC_ERR_INVALID (NULL argument, invalid UTF-8), TXC_ERR_FORMAT
 * (unk_token needed but absent from the vocab), TXC_ERR_NOMEM. Cost: O(n log n)
 * in the length of the longest word: a piece of the pre-tokenizer, or for a
 * SentencePiece vocab (Llama 2, Mistral, Gemma 3: no splitting pre-tokenizer)
 * the text cut before each "▁" that follows another character, where no merge
 * can span the cut; the BPE of each distinct word is computed once per call (a
 * word cache, as the crate's). `txc tokenize --bench` measures it. */
txc_status txc_tokenizer_encode(const txc_tokenizer *tok, const char *text, size_t len,
                                bool add_special_tokens, int32_t **ids, size_t *n_ids);

/* Decode ids to UTF-8 as Tokenizer::decode(ids, skip_special_tokens): each id
 * becomes its token string (added tokens' content, else the model's),
 * special added tokens are dropped when skip_special_tokens, then the decoder
 * chain runs (ByteFallback turns "<0xXX>" runs into bytes; a run that is not
 * valid UTF-8 becomes one U+FFFD per byte, as the crate). No
 * clean_up_tokenization_spaces (transformers' option; false for Llama).
 * On success *text is malloc'd and NUL-terminated, *len its length without
 * the NUL (len may be NULL). Errors: TXC_ERR_INVALID (NULL argument, an id < 0
 * or without a token), TXC_ERR_NOMEM. */
txc_status txc_tokenizer_decode(const txc_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                bool skip_special_tokens, char **text, size_t *len);

/* Number of ids: max id + 1 over the model vocab and the added tokens (the
 * embedding rows a model needs). 32000 for Llama-2, 32045 for Phi-3-vision. */
int32_t txc_tokenizer_vocab_size(const txc_tokenizer *tok);
/* The token string of `id` (added token content first, as the crate's
 * id_to_token); NULL when out of range or a gap. Valid while tok lives. */
const char *txc_tokenizer_id_to_token(const txc_tokenizer *tok, int32_t id);
/* The id of a token string (added tokens first, then the model vocab), -1
 * when absent. */
int32_t txc_tokenizer_token_to_id(const txc_tokenizer *tok, const char *token);
/* Whether id is an added token's (tokenizer.json's added_tokens). */
bool txc_tokenizer_is_added(const txc_tokenizer *tok, int32_t id);
/* Whether id is an added token marked "special" (what skip_special_tokens drops). */
bool txc_tokenizer_is_special(const txc_tokenizer *tok, int32_t id);
/* The BOS id: the first SpecialToken of the post-processor's "single"
 * template when it comes before $A; otherwise a special added token named
 * "<s>", "<bos>", "<|begin_of_text|>" or "<|startoftext|>"; -1 if none. */
int32_t txc_tokenizer_bos_id(const txc_tokenizer *tok);

/* ---- streaming detokenizer -------------------------------------------------
 *
 * Prints generated tokens as they come, as transformers' TextStreamer means
 * to: the text is decode(all ids so far) and each put() returns only the new
 * part that can no longer change. The concatenation of everything put() and
 * flush() return equals txc_tokenizer_decode() of all the ids, exactly:
 *   - a trailing run of "<0xXX>" byte tokens (ByteFallback decoder) is held
 *     back until a non-byte token (or flush) closes it, since the next byte
 *     could complete it — or turn all of it into U+FFFD, as the crate does;
 *     with other decoders, text ending in U+FFFD is held back;
 *   - Strip's removal of the leading space applies to the start of the whole
 *     text only (the stream decodes a sliding window whose own start effects
 *     cancel out), so cost per token stays O(window), not O(text).
 */
typedef struct txc_detok_stream txc_detok_stream;

/* A new stream over `tok` (which must outlive it). NULL + TXC_ERR_INVALID
 * (tok NULL) or TXC_ERR_NOMEM. */
txc_detok_stream *txc_detok_stream_new(const txc_tokenizer *tok, bool skip_special_tokens);
/* Append one id; *piece gets the newly printable text (a pointer into the
 * stream, valid until the next call; NUL-terminated), *piece_len its length,
 * possibly 0. Errors: TXC_ERR_INVALID (NULL argument, id out of range; the
 * stream is unchanged), TXC_ERR_NOMEM. */
txc_status txc_detok_stream_put(txc_detok_stream *s, int32_t id, const char **piece,
                                size_t *piece_len);
/* Emit whatever is held back (end of generation). What flush emits is
 * final: put() may go on afterwards, and the concatenation still equals
 * decode(all ids) unless the next ids are byte tokens that continue a
 * flushed byte run (decode would then join them into one run). */
txc_status txc_detok_stream_flush(txc_detok_stream *s, const char **piece, size_t *piece_len);
/* Free a stream (NULL is ignored). */
void txc_detok_stream_free(txc_detok_stream *s);

#ifdef __cplusplus
}
#endif
#endif
