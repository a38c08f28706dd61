/*
 * Streaming detokenizer: decode(all ids) emitted piece by piece, exactly.
 *
 * State: ids (special ones already dropped when skipping), a window start p,
 * the stable end r (decode(ids[0..r]) has been emitted in full) and base, the
 * length of decode(ids[p..r]). A put decodes ids[p..k], where k leaves out a
 * trailing run of byte tokens (the ByteFallback decoder groups consecutive
 * byte tokens, so the run can still change), and emits what lies past base.
 *
 * Why a window is exact: every decoder here acts per token, per byte-token
 * group, or (Strip after Fuse) on the start of the whole string. Decoding from
 * p instead of 0 changes only what the first token of the window becomes
 * (Metaspace drops its "▁", Strip its leading space) — the same in the
 * prefix and in the longer decode, so the difference is right — provided the
 * prefix decode(ids[p..r]) is not empty (else Strip could reach the next
 * token). So the window moves to an earlier stable point q only when
 * decode(ids[q..r]) is non-empty.
 */
#include "tokenizer/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

enum { WINDOW = 16 }; /* tokens kept behind the stable end before sliding */

struct txc_detok_stream {
    const txc_tokenizer *tok;
    bool skip;
    bool byte_fb; /* the decoder chain has ByteFallback */
    int32_t *ids;
    size_t n, cap;
    size_t p, r, prev_r, base;
    tk_buf text;  /* scratch decode */
    tk_buf piece; /* what the last call returned */
};

txc_detok_stream *txc_detok_stream_new(const txc_tokenizer *tok, bool skip_special_tokens)
{
    if (!tok) {
        txc_error(TXC_ERR_INVALID, "txc_detok_stream_new: NULL tokenizer");
        return NULL;
    }
    txc_detok_stream *s = calloc(1, sizeof *s);
    if (!s) {
        txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    s->tok = tok;
    s->skip = skip_special_tokens;
    s->byte_fb = tk_has_byte_fallback_decoder(tok);
    return s;
}

void txc_detok_stream_free(txc_detok_stream *s)
{
    if (!s)
        return;
    free(s->ids);
    tk_buf_free(&s->text);
    tk_buf_free(&s->piece);
    free(s);
}

static txc_status set_piece(txc_detok_stream *s, const char *p, size_t n, const char **piece,
                            size_t *piece_len)
{
    s->piece.n = 0;
    txc_status st = tk_buf_append(&s->piece, p, n);
    if (st)
        return st;
    *piece = s->piece.p;
    *piece_len = n;
    return TXC_OK;
}

static bool ends_with_fffd(const tk_buf *b)
{
    return b->n >= 3 && !memcmp(b->p + b->n - 3, "\xEF\xBF\xBD", 3);
}

/* Emit decode(ids[p..k]) past base; the caller has checked k > r. */
static txc_status advance(txc_detok_stream *s, size_t k, bool final, const char **piece,
                          size_t *piece_len)
{
    s->text.n = 0;
    txc_status st = tk_decode_ids(s->tok, s->ids + s->p, k - s->p, &s->text);
    if (st)
        return st;
    if (!final && !s->byte_fb && ends_with_fffd(&s->text))
        return set_piece(s, "", 0, piece, piece_len); /* an incomplete character */
    size_t from = s->base <= s->text.n ? s->base : s->text.n;
    st = set_piece(s, s->text.p + from, s->text.n - from, piece, piece_len);
    if (st)
        return st;
    s->prev_r = s->r;
    s->r = k;
    s->base = s->text.n;
    /* Slide the window to the previous stable point when its decode is
     * not empty (see above). */
    if (s->r - s->p > WINDOW && s->prev_r > s->p) {
        s->text.n = 0;
        st = tk_decode_ids(s->tok, s->ids + s->prev_r, s->r - s->prev_r, &s->text);
        if (st)
            return st;
        if (s->text.n) {
            s->p = s->prev_r;
            s->base = s->text.n;
        }
    }
    /* Drop ids before the window. */
    if (s->p > 4 * WINDOW && s->p * 2 > s->n) {
        size_t d = s->p;
        memmove(s->ids, s->ids + d, (s->n - d) * sizeof *s->ids);
        s->n -= d, s->p -= d, s->r -= d, s->prev_r = s->prev_r >= d ? s->prev_r - d : 0;
    }
    return TXC_OK;
}

txc_status txc_detok_stream_put(txc_detok_stream *s, int32_t id, const char **piece,
                                size_t *piece_len)
{
    if (!s || !piece || !piece_len)
        return txc_error(TXC_ERR_INVALID, "txc_detok_stream_put: NULL argument");
    *piece = "";
    *piece_len = 0;
    size_t tl;
    const char *tokstr = tk_token_of(s->tok, id, &tl);
    if (!tokstr)
        return txc_error(TXC_ERR_INVALID, "tokenizer: id %d is out of range (vocab size %d)",
                         (int)id, (int)s->tok->n_ids);
    if (s->skip && tk_strmap_get(&s->tok->special_set, tokstr, tl) >= 0)
        return set_piece(s, "", 0, piece, piece_len);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        int32_t *v = realloc(s->ids, cap * sizeof *v);
        if (!v)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        s->ids = v;
        s->cap = cap;
    }
    s->ids[s->n++] = id;
    size_t k = s->n;
    if (s->byte_fb)
        while (k > s->r && tk_is_byte_token(s->tok, s->ids[k - 1]))
            k--;
    if (k <= s->r)
        return set_piece(s, "", 0, piece, piece_len);
    txc_status st = advance(s, k, false, piece, piece_len);
    if (st)
        *piece = "", *piece_len = 0;
    return st;
}

txc_status txc_detok_stream_flush(txc_detok_stream *s, const char **piece, size_t *piece_len)
{
    if (!s || !piece || !piece_len)
        return txc_error(TXC_ERR_INVALID, "txc_detok_stream_flush: NULL argument");
    *piece = "";
    *piece_len = 0;
    if (s->n <= s->r)
        return set_piece(s, "", 0, piece, piece_len);
    txc_status st = advance(s, s->n, true, piece, piece_len);
    if (st)
        *piece = "", *piece_len = 0;
    return st;
}
