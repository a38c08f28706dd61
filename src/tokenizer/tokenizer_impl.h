/*
 * Internals of the tokenizer.json loader (include/txc/tokenizer.h).
 *
 * The pipeline mirrors the `tokenizers` crate's TokenizerImpl:
 *
 *   text ─ AddedVocabulary split (non-normalized added tokens, on the raw text)
 *        ─ normalizer (each remaining piece)
 *        ─ AddedVocabulary split (normalized added tokens, on the normalized pieces)
 *        ─ pre-tokenizer (each remaining piece → sub-pieces)
 *        ─ model (each remaining piece → ids)
 *        ─ post-processor (the template: BOS...)
 *
 * and decode is ids → token strings → decoder chain → text.
 *
 * Every component is a tagged struct (kind + a union of its settings), kept
 * in a flat array (a JSON "Sequence" is flattened into it), and each kind has
 * one apply function, so a new kind (ByteLevel, Split with a regex, NFC...)
 * is a new enum value, a parse branch and an apply case; nothing else moves.
 *
 * Offsets are not tracked: txc needs ids, not alignments. The one place where
 * the crate reads an offset (Metaspace prepend_scheme "first": "does this
 * piece start at original offset 0?") is carried as a flag on each piece.
 *
 * Regexes (Split, Replace, the ByteLevel pre-tokenizer's GPT-2 pattern) run
 * on PCRE2 in UTF + UCP mode, with `\s`/`\S`/`\w`/`\W`/`\d` rewritten to the
 * classes the crate's Oniguruma engine gives them (tokenizer_unicode.c).
 * Unicode normalization forms and character classes come from utf8proc.
 * Scratch state of one encode call (PCRE2 match data, the BPE word cache)
 * lives in a tk_ctx, so a txc_tokenizer stays immutable.
 */
#ifndef TXC_TOKENIZER_IMPL_H
#define TXC_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txc/status.h"
#include "txc/tokenizer.h"

/* ---- growable byte buffer ------------------------------------------------ */

typedef struct tk_buf {
    char *p;
    size_t n, cap;
} tk_buf;

txc_status tk_buf_reserve(tk_buf *b, size_t extra);
txc_status tk_buf_append(tk_buf *b, const void *s, size_t n);
void tk_buf_free(tk_buf *b);

/* memmem (a GNU extension): the first occurrence of needle, or NULL. */
const char *tk_memmem(const char *hay, size_t n, const char *needle, size_t m);

/* ---- UTF-8 ------------------------------------------------------------- */

/* Strict validation (as Rust's str::from_utf8: no overlongs, no surrogates,
 * nothing above U+10FFFF). */
bool tk_utf8_valid(const char *s, size_t n);
/* Length in bytes of the (valid) UTF-8 sequence starting with lead byte c. */
static inline size_t tk_utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}
/* Decode one code point of valid UTF-8 at s; *n gets its length. */
uint32_t tk_utf8_decode(const char *s, size_t *n);
/* Encode cp; returns the length (1..4) written to out. */
size_t tk_utf8_encode(uint32_t cp, char *out);
/* Rust char::is_whitespace (Unicode White_Space). */
bool tk_is_whitespace(uint32_t cp);
/* The Rust regex crate's \w (Alphabetic, Mark, Decimal_Number,
 * Connector_Punctuation, Join_Control): what AddedVocabulary's single_word
 * test and the Whitespace pre-tokenizer call a word character. */
bool tk_is_word_char(uint32_t cp);
/* Rust char::is_numeric (general category Nd, Nl or No): Digits. */
bool tk_is_numeric(uint32_t cp);
/* ASCII punctuation or general category P* (of the unicode_categories
 * crate): the Punctuation pre-tokenizer. */
bool tk_is_punctuation(uint32_t cp);
/* General category M* as of Unicode 9.0 (unicode-normalization's
 * is_combining_mark): StripAccents. */
bool tk_is_mark(uint32_t cp);
/* Start of the UTF-8 character that ends at byte `end` (> 0) of s. */
static inline size_t tk_utf8_prev(const char *s, size_t end)
{
    size_t k = end - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    return k;
}

/* The crate's own Unicode data where it differs from utf8proc's and
 * PCRE2's (tokenizer_unidata.c, generated from the tokenizers package by
 * scripts/gen_tokenizer_fixtures.py --unicode-tables). The crate mixes
 * versions: Rust's char methods and its regex engines follow Unicode 16, its
 * normalizers Unicode 9.0, its Punctuation an older table. */
typedef struct tk_urange {
    uint32_t lo, hi;
} tk_urange;
typedef struct tk_ulower {
    uint32_t cp, lower[2]; /* lower[1] == 0: one code point */
} tk_ulower;
typedef struct tk_uprop {
    const char *name; /* a general category ("L", "Lu"...) or "w" (onig's \w) */
    const char *add;  /* PCRE2 class items for the characters PCRE2 lacks */
} tk_uprop;
extern const tk_urange tk_ud_word[], tk_ud_numeric[], tk_ud_punct[], tk_ud_in9[];
extern const size_t tk_ud_word_n, tk_ud_numeric_n, tk_ud_punct_n, tk_ud_in9_n;
extern const tk_ulower tk_ud_lower[];
extern const size_t tk_ud_lower_n;
extern const tk_uprop tk_ud_props[];
extern const size_t tk_ud_props_n;
bool tk_urange_has(const tk_urange *r, size_t n, uint32_t c);

/* Unicode normalization forms (utf8proc, restricted to the code points of
 * Unicode 9.0 as the crate's normalizers: others pass through), in place. */
typedef enum tk_nf { TK_NFC, TK_NFD, TK_NFKC, TK_NFKD } tk_nf;
txc_status tk_unicode_normalize(tk_nf form, struct tk_buf *b);
/* Rust's char::to_lowercase on every character (Unicode 16), in place. */
txc_status tk_unicode_lowercase(struct tk_buf *b);
/* String::from_utf8_lossy: each maximal invalid subsequence becomes one
 * U+FFFD. Appends to out. */
txc_status tk_utf8_lossy(const char *s, size_t n, struct tk_buf *out);

/* The ByteLevel alphabet (GPT-2's bytes_to_unicode): byte → char, and the
 * byte of a char of the alphabet or -1. */
uint32_t tk_bytelevel_char(unsigned char b);
int tk_bytelevel_byte(uint32_t c);

/* ---- regexes (PCRE2) ------------------------------------------------------ */

typedef struct tk_regex tk_regex;

/* Per-call matching state (PCRE2 match data and JIT stack), created on
 * first use; one per thread. */
typedef struct tk_rx_scratch {
    void *md, *mctx, *jstack;
} tk_rx_scratch;
void tk_rx_scratch_free(tk_rx_scratch *sc);

/* Compile `pat` (len bytes) as onig would (literal: the crate's String
 * patterns, regex::escape'd). `what` names the component for messages.
 * Errors: TXC_ERR_UNSUPPORTED (a pattern PCRE2 rejects; the message quotes
 * PCRE2's reason), TXC_ERR_NOMEM. */
txc_status tk_regex_compile(const char *pat, size_t len, bool literal, const char *what,
                            tk_regex **out);
void tk_regex_free(tk_regex *re);
/* The next match in s[0..n) at or after `from` (onig's search: lookbehind
 * sees s[0..from)). *found false when none. */
txc_status tk_regex_search(const tk_regex *re, const char *s, size_t n, size_t from,
                           tk_rx_scratch *sc, bool *found, size_t *ms, size_t *me);

/* ---- string → int32 hash map (keys are copied) ------------------------- */

typedef struct tk_strmap_entry {
    char *key;
    uint32_t len;
    uint32_t hash;
    int32_t val;
} tk_strmap_entry;

typedef struct tk_strmap {
    uint32_t *slots; /* 0 = empty, else entry index + 1 */
    size_t cap;      /* power of two */
    tk_strmap_entry *ent;
    size_t n, ent_cap;
    char **blocks;      /* key storage, freed with the map */
    size_t n_blocks;
    char *blk;          /* current block */
    size_t blk_used, blk_cap;
} tk_strmap;

/* -1 when absent. */
int32_t tk_strmap_get(const tk_strmap *m, const char *key, size_t len);
/* The stored key for `key` (stable until the map is freed), or NULL. */
const tk_strmap_entry *tk_strmap_find(const tk_strmap *m, const char *key, size_t len);
/* Insert or overwrite. */
txc_status tk_strmap_put(tk_strmap *m, const char *key, size_t len, int32_t val);
void tk_strmap_free(tk_strmap *m);

/* ---- pieces of text flowing through the pipeline ------------------------ */

typedef struct tk_piece {
    size_t off, len; /* bytes in the owning tk_pieces' text */
    int32_t id;      /* >= 0: already a token (an added token); -1: text */
    bool at_origin;  /* starts at offset 0 of the original input */
} tk_piece;

typedef struct tk_pieces {
    tk_piece *v;
    size_t n, cap;
    tk_buf text;
} tk_pieces;

/* Append a text piece (copied; empty pieces are dropped as the crate's
 * PreTokenizedString::split does) or a token piece. */
txc_status tk_pieces_add_text(tk_pieces *ps, const char *s, size_t len, bool at_origin);
txc_status tk_pieces_add_token(tk_pieces *ps, int32_t id, bool at_origin);
void tk_pieces_free(tk_pieces *ps);

/* ---- pattern matches ------------------------------------------------------ */

/* The crate's Pattern::find_matches: consecutive spans covering a string,
 * each a match or not. */
typedef struct tk_seg {
    size_t start, end;
    bool match;
} tk_seg;

typedef struct tk_segs {
    tk_seg *v;
    size_t n, cap;
} tk_segs;

txc_status tk_segs_push(tk_segs *g, size_t start, size_t end, bool match);

/* A pattern: a regex, or a predicate on characters (each matching character
 * is one match, as the crate's `Fn(char) -> bool` patterns). */
typedef enum tk_char_class {
    TK_CC_NONE,       /* use the regex */
    TK_CC_WHITESPACE, /* char::is_whitespace */
    TK_CC_NUMERIC,    /* char::is_numeric */
    TK_CC_PUNCT,      /* the Punctuation pre-tokenizer's is_punc */
    TK_CC_CHAR,       /* one given character */
} tk_char_class;

typedef struct tk_pattern {
    tk_regex *re;
    tk_char_class cc;
    uint32_t ch; /* TK_CC_CHAR */
} tk_pattern;

/* find_matches of s[0..n) into g (cleared first); invert flips every flag. */
txc_status tk_find_matches(const tk_pattern *p, const char *s, size_t n, bool invert,
                           tk_rx_scratch *sc, tk_segs *g);

/* ---- scratch state of one encode call ------------------------------------- */

/* The BPE word cache: word → ids (the crate keeps one per model; txc keeps
 * one per call so that the tokenizer stays immutable and lock-free). */
typedef struct tk_bpe_cache {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t cap;      /* power of two */
    struct tk_cache_ent {
        uint32_t hash, key_len;
        size_t key_off, ids_off;
        uint32_t n_ids;
    } *ent;
    size_t n, ent_cap;
    tk_buf keys;
    int32_t *ids;
    size_t n_ids, ids_cap;
    /* Scratch of the merge loop (symbols and heap), kept between words so
     * that a word costs no malloc. */
    void *syms, *heap;
    size_t syms_cap, heap_cap; /* entries */
} tk_bpe_cache;

void tk_bpe_cache_free(tk_bpe_cache *c);

typedef struct tk_ctx {
    tk_rx_scratch rx;
    tk_segs segs;
    tk_buf tmp, tmp2;
    tk_bpe_cache cache;
} tk_ctx;

void tk_ctx_free(tk_ctx *cx);

/* ---- list of strings (decoder chain) ------------------------------------ */

typedef struct tk_strlist {
    tk_buf text;
    size_t *off, *len;
    size_t n, cap;
} tk_strlist;

txc_status tk_strlist_add(tk_strlist *l, const char *s, size_t len);
void tk_strlist_free(tk_strlist *l);
static inline const char *tk_strlist_at(const tk_strlist *l, size_t i) { return l->text.p + l->off[i]; }

/* ---- components ---------------------------------------------------------- */

/* Normalizers (tokenizers::normalizers). */
typedef enum tk_norm_kind {
    TK_NORM_PREPEND,      /* Prepend { prepend }: prefix a non-empty string */
    TK_NORM_REPLACE,      /* Replace { pattern: {String} | {Regex}, content } */
    TK_NORM_STRIP,        /* Strip { strip_left, strip_right }: Unicode whitespace */
    TK_NORM_NF,           /* NFC, NFD, NFKC, NFKD */
    TK_NORM_LOWERCASE,    /* Lowercase */
    TK_NORM_STRIP_ACCENTS /* StripAccents: drop combining marks */
} tk_norm_kind;

typedef struct tk_normalizer {
    tk_norm_kind kind;
    char *a; /* Prepend: prepend; Replace: pattern (String form) */
    size_t a_len;
    char *b; /* Replace: content */
    size_t b_len;
    tk_regex *re;     /* Replace with a Regex pattern */
    bool left, right; /* Strip */
    tk_nf form;       /* NF */
} tk_normalizer;

/* Pre-tokenizers (tokenizers::pre_tokenizers). */
typedef enum tk_pretok_kind {
    TK_PRETOK_METASPACE,
    TK_PRETOK_BYTELEVEL,  /* ByteLevel { add_prefix_space, use_regex } */
    TK_PRETOK_SPLIT,      /* Split { pattern, behavior, invert } */
    TK_PRETOK_DIGITS,     /* Digits { individual_digits } */
    TK_PRETOK_PUNCT,      /* Punctuation { behavior } */
    TK_PRETOK_WHITESPACE, /* Whitespace: \w+|[^\w\s]+ */
    TK_PRETOK_WSPLIT,     /* WhitespaceSplit */
    TK_PRETOK_CHARDELIM,  /* CharDelimiterSplit { delimiter } */
} tk_pretok_kind;

/* SplitDelimiterBehavior. */
typedef enum tk_split_behavior {
    TK_SPLIT_REMOVED,
    TK_SPLIT_ISOLATED,
    TK_SPLIT_MERGED_WITH_PREVIOUS,
    TK_SPLIT_MERGED_WITH_NEXT,
    TK_SPLIT_CONTIGUOUS,
} tk_split_behavior;

typedef enum tk_prepend_scheme {
    TK_PREPEND_ALWAYS,
    TK_PREPEND_FIRST,
    TK_PREPEND_NEVER,
} tk_prepend_scheme;

typedef struct tk_pretok {
    tk_pretok_kind kind;
    char repl[5]; /* Metaspace: replacement char, UTF-8 */
    size_t repl_len;
    tk_prepend_scheme scheme;
    bool split;
    bool add_prefix_space, use_regex; /* ByteLevel */
    tk_pattern pat;                   /* Split, ByteLevel (GPT-2 regex), Digits, ... */
    tk_split_behavior behavior;
    bool invert;
} tk_pretok;

/* Decoders (tokenizers::decoders). */
typedef enum tk_dec_kind {
    TK_DEC_REPLACE,      /* Replace { pattern: {String}, content } */
    TK_DEC_BYTEFALLBACK, /* <0xXX> tokens → bytes; invalid UTF-8 → one U+FFFD per byte */
    TK_DEC_FUSE,         /* join all tokens into one */
    TK_DEC_STRIP,        /* Strip { content, start, stop } per token */
    TK_DEC_METASPACE,    /* Metaspace { replacement, prepend_scheme } */
    TK_DEC_BYTELEVEL,    /* ByteLevel: chars → bytes, then from_utf8_lossy */
} tk_dec_kind;

typedef struct tk_decoder {
    tk_dec_kind kind;
    char *a; /* Replace: pattern (String form) */
    size_t a_len;
    tk_regex *re; /* Replace with a Regex pattern */
    char *b; /* Replace: content */
    size_t b_len;
    uint32_t ch;          /* Strip: content; Metaspace: replacement */
    size_t start, stop;   /* Strip */
    tk_prepend_scheme scheme; /* Metaspace */
} tk_decoder;

/* Post-processors. Only the "single" template is used (one sequence). */
typedef enum tk_post_kind {
    TK_POST_TEMPLATE,  /* TemplateProcessing: single = items */
    TK_POST_BYTELEVEL, /* ByteLevel: only trims offsets, ids untouched */
} tk_post_kind;

typedef struct tk_post {
    tk_post_kind kind;
    /* TEMPLATE: the ids of "single", with -1 standing for $A (the sequence). */
    int32_t *single;
    size_t n_single;
} tk_post;

/* ---- BPE model ----------------------------------------------------------- */

typedef struct tk_merge_slot {
    uint64_t key; /* (a << 32 | b) + 1; 0 = empty */
    uint32_t rank;
    int32_t new_id;
} tk_merge_slot;

/* Vocab ids are below 2 x the number of vocab tokens + this (the id tables
 * are dense; see txc_tokenizer_load). */
#define TK_VOCAB_ID_SLACK 65536

typedef struct tk_bpe {
    tk_strmap vocab;     /* token → id */
    const char **id_tok; /* id → token (pointer into vocab keys), NULL in gaps */
    uint32_t *id_len;
    int32_t n_ids;       /* max id + 1 */
    size_t vocab_len;    /* number of entries (the crate's get_vocab_size) */
    tk_merge_slot *merges;
    size_t merges_cap; /* power of two */
    size_t n_merges;
    char *unk_token; /* NULL when none */
    bool fuse_unk, byte_fallback, ignore_merges;
    /* Words may be cut before each "▁" that follows another character:
     * "▁" is a token and no token holds "▁" after anything but "▁", so no
     * merge can span such a cut (true of most SentencePiece vocabs). A few
     * tokens that do (Gemma 3's ">▁</") are listed with the offset of such a
     * "▁" in them: where the text around a cut spells one, there is no cut. */
    bool cut_at_meta;
    struct tk_meta_exc {
        const char *tok; /* a vocab key */
        uint32_t len, off;
    } *meta_exc;
    size_t n_meta_exc;
    int32_t byte_ids[256]; /* id of "<0xXX>" or -1 */
    int32_t char_ids[0x800]; /* id of each char U+0000..U+07FF (1 or 2 bytes, which covers
                                the ByteLevel alphabet), or -1: a lookup cache */
} tk_bpe;

/* Parse the "model" object. Errors: TXC_ERR_FORMAT, TXC_ERR_UNSUPPORTED. */
struct cJSON;
txc_status tk_bpe_load(tk_bpe *m, const struct cJSON *model);
void tk_bpe_free(tk_bpe *m);
/* Append the ids of one piece (model.tokenize): chars → vocab ids (byte
 * fallback, unk fusing), then priority merges. `cache` (may be NULL) keeps
 * the ids of words already seen. */
txc_status tk_bpe_tokenize(const tk_bpe *m, const char *s, size_t len, tk_bpe_cache *cache,
                           int32_t **ids, size_t *n, size_t *cap);

/* ---- added vocabulary ---------------------------------------------------- */

typedef struct tk_added {
    char *content;
    size_t len;
    /* The string decode uses: the normalized content for a normalized token
     * that the normalizer changes (the crate's normalized_cache, 0.23), else
     * NULL (content). */
    char *dec;
    size_t dec_len;
    int32_t id;
    bool special, lstrip, rstrip, normalized, single_word;
} tk_added;

/* A byte trie over the added tokens' contents, for the leftmost-longest
 * scan (the crate uses aho-corasick with MatchKind::LeftmostLongest). */
typedef struct tk_trie {
    uint32_t *edge_keys; /* (node << 8 | byte) + 1; 0 = empty */
    uint32_t *edge_vals; /* child node */
    size_t edge_cap, n_edges;
    int32_t *term; /* node → added-token index (first inserted), -1 */
    size_t n_nodes, nodes_cap;
    uint8_t first[32]; /* bitmap of first bytes */
} tk_trie;

/* ---- the tokenizer ------------------------------------------------------- */

struct txc_tokenizer {
    tk_bpe bpe;

    tk_added *added; /* in file order, duplicates dropped */
    size_t n_added;
    tk_strmap added_map;  /* content → id */
    int32_t *added_by_id; /* id → index in added, -1 (size n_ids) */
    tk_strmap special_set; /* contents of special added tokens */
    tk_trie trie_raw;      /* non-normalized added tokens */
    tk_trie trie_norm;     /* normalized ones (patterns normalized) */

    tk_normalizer *norm;
    size_t n_norm;
    tk_pretok *pretok;
    size_t n_pretok;
    tk_post *post;
    size_t n_post;
    tk_decoder *dec;
    size_t n_dec;
    bool has_decoder; /* false: tokens joined with " " */

    int32_t n_ids; /* max id + 1 over model and added tokens */
    int32_t bos_id;
};

/* JSON field helpers shared by the component parsers (tokenizer_util.c).
 * `what` names the component in messages. */
bool tk_json_is_null(const struct cJSON *j);
const char *tk_json_type(const struct cJSON *j);
txc_status tk_json_dup_string(const struct cJSON *j, const char *what, const char *field,
                              char **out, size_t *len);
txc_status tk_json_char(const struct cJSON *j, const char *what, const char *field, uint32_t *cp);
txc_status tk_json_bool(const struct cJSON *obj, const char *what, const char *field, bool dflt,
                        bool *out);
txc_status tk_json_prepend_scheme(const struct cJSON *obj, const char *what,
                                  tk_prepend_scheme *out);
/* A {"String": s} or {"Regex": r} pattern: *re compiled (literal for
 * String); *str also gets the String form (NULL for Regex) when str != NULL. */
txc_status tk_json_pattern(const struct cJSON *obj, const char *what, tk_regex **re, char **str,
                           size_t *str_len);
/* NormalizedString::replace with a string pattern: non-overlapping, left to right. */
txc_status tk_replace_all(const char *s, size_t n, const char *pat, size_t plen, const char *with,
                          size_t wlen, tk_buf *out);

/* Component parsing and application (tokenizer_components.c). Parse
 * functions append to the tokenizer's arrays; `what` names the field for
 * messages ("normalizer", "pre_tokenizer"...). */
txc_status tk_parse_normalizer(txc_tokenizer *t, const struct cJSON *j);
txc_status tk_parse_pretokenizer(txc_tokenizer *t, const struct cJSON *j);
txc_status tk_parse_decoder(txc_tokenizer *t, const struct cJSON *j);
txc_status tk_parse_post_processor(txc_tokenizer *t, const struct cJSON *j);
void tk_components_free(txc_tokenizer *t);

/* Run the normalizer chain on `b` in place (cx: scratch; NULL makes a
 * temporary one). */
txc_status tk_normalize(const txc_tokenizer *t, tk_buf *b, tk_ctx *cx);
/* Run the pre-tokenizer chain: replaces *ps. */
txc_status tk_pretokenize(const txc_tokenizer *t, tk_pieces *ps, tk_ctx *cx);
/* Pre-tokenizer parsing (tokenizer_pretok.c). */
void tk_pretok_free(tk_pretok *p);
/* Run the decoder chain on the token strings, producing the text. */
txc_status tk_decode_tokens(const txc_tokenizer *t, tk_strlist *tokens, tk_buf *out);

/* Decode ids[0..n] that are already filtered and in range (the stream). */
txc_status tk_decode_ids(const txc_tokenizer *t, const int32_t *ids, size_t n, tk_buf *out);
/* Token string of a valid id (added token content first, then the model). */
const char *tk_token_of(const txc_tokenizer *t, int32_t id, size_t *len);
/* Whether the decoder chain holds a ByteFallback (for the stream). */
bool tk_has_byte_fallback_decoder(const txc_tokenizer *t);
/* Whether id is a "<0xXX>" token as the ByteFallback decoder reads it. */
bool tk_is_byte_token(const txc_tokenizer *t, int32_t id);

/* tokenizer_gguf.c: the tokenizer.json tree transformers builds from a GGUF
 * file's tokenizer.ggml.* metadata (*out owned by the caller). Errors:
 * TXC_ERR_IO / TXC_ERR_FORMAT (the file, a missing or mistyped key),
 * TXC_ERR_UNSUPPORTED (a tokenizer.ggml.model or .pre txc cannot run). */
struct cJSON;
txc_status tk_gguf_tree(const char *path, struct cJSON **out);

#endif
