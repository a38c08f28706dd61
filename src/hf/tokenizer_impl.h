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
 */
#ifndef TXC_HF_TOKENIZER_IMPL_H
#define TXC_HF_TOKENIZER_IMPL_H

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
/* Rust char::is_alphanumeric() || '_' (the crate's is_word_character);
 * exact for ASCII, see tokenizer_util.c for the rest. */
bool tk_is_word_char(uint32_t cp);

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
    TK_NORM_PREPEND, /* Prepend { prepend }: prefix a non-empty string */
    TK_NORM_REPLACE, /* Replace { pattern: {String}, content } */
    TK_NORM_STRIP,   /* Strip { strip_left, strip_right }: Unicode whitespace */
} tk_norm_kind;

typedef struct tk_normalizer {
    tk_norm_kind kind;
    char *a; /* Prepend: prepend; Replace: pattern */
    size_t a_len;
    char *b; /* Replace: content */
    size_t b_len;
    bool left, right; /* Strip */
} tk_normalizer;

/* Pre-tokenizers (tokenizers::pre_tokenizers). */
typedef enum tk_pretok_kind {
    TK_PRETOK_METASPACE,
} tk_pretok_kind;

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
} tk_pretok;

/* Decoders (tokenizers::decoders). */
typedef enum tk_dec_kind {
    TK_DEC_REPLACE,      /* Replace { pattern: {String}, content } */
    TK_DEC_BYTEFALLBACK, /* <0xXX> tokens → bytes; invalid UTF-8 → one U+FFFD per byte */
    TK_DEC_FUSE,         /* join all tokens into one */
    TK_DEC_STRIP,        /* Strip { content, start, stop } per token */
    TK_DEC_METASPACE,    /* Metaspace { replacement, prepend_scheme } */
} tk_dec_kind;

typedef struct tk_decoder {
    tk_dec_kind kind;
    char *a; /* Replace: pattern */
    size_t a_len;
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
     * merge can span such a cut (true of every SentencePiece vocab). */
    bool cut_at_meta;
    int32_t byte_ids[256]; /* id of "<0xXX>" or -1 */
    int32_t ascii_ids[128]; /* id of each 1-byte char, or -1 (a lookup cache) */
} tk_bpe;

/* Parse the "model" object. Errors: TXC_ERR_FORMAT, TXC_ERR_UNSUPPORTED. */
struct cJSON;
txc_status tk_bpe_load(tk_bpe *m, const struct cJSON *model);
void tk_bpe_free(tk_bpe *m);
/* Append the ids of one piece (model.tokenize): chars → vocab ids (byte
 * fallback, unk fusing), then priority merges. */
txc_status tk_bpe_tokenize(const tk_bpe *m, const char *s, size_t len, int32_t **ids,
                           size_t *n, size_t *cap);

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

/* Component parsing and application (tokenizer_components.c). Parse
 * functions append to the tokenizer's arrays; `what` names the field for
 * messages ("normalizer", "pre_tokenizer"...). */
txc_status tk_parse_normalizer(txc_tokenizer *t, const struct cJSON *j);
txc_status tk_parse_pretokenizer(txc_tokenizer *t, const struct cJSON *j);
txc_status tk_parse_decoder(txc_tokenizer *t, const struct cJSON *j);
txc_status tk_parse_post_processor(txc_tokenizer *t, const struct cJSON *j);
void tk_components_free(txc_tokenizer *t);

/* Run the normalizer chain on `b` in place. */
txc_status tk_normalize(const txc_tokenizer *t, tk_buf *b);
/* Run the pre-tokenizer chain: replaces *ps. */
txc_status tk_pretokenize(const txc_tokenizer *t, tk_pieces *ps);
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

#endif
