/* Buffers, UTF-8, hash map and piece lists for the tokenizer. */
#include "hf/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- tk_buf ---------------------------------------------------------------- */

txc_status tk_buf_reserve(tk_buf *b, size_t extra)
{
    if (b->cap - b->n > extra)
        return TXC_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n <= extra) {
        if (cap > SIZE_MAX / 2)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: buffer too large");
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return TXC_OK;
}

/* Always keeps a NUL after the content. */
txc_status tk_buf_append(tk_buf *b, const void *s, size_t n)
{
    txc_status st = tk_buf_reserve(b, n + 1);
    if (st)
        return st;
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return TXC_OK;
}

void tk_buf_free(tk_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---- UTF-8 ----------------------------------------------------------------- */

bool tk_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t min;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1, min = 0x80, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2, min = 0x800, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3, min = 0x10000, cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i - 1 < need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += need + 1;
    }
    return true;
}

uint32_t tk_utf8_decode(const char *str, size_t *n)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c = s[0];
    if (c < 0x80) {
        *n = 1;
        return c;
    }
    if (c < 0xE0) {
        *n = 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (c < 0xF0) {
        *n = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *n = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

size_t tk_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

bool tk_is_whitespace(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Rust's char::is_alphanumeric needs the Unicode Alphabetic and Numeric
 * tables; until utf8proc lands (issue 5) non-ASCII is approximated: a code
 * point is a word character unless it is whitespace or lies in a block of
 * punctuation, symbols, emoji or private use. Exact for ASCII and Latin-1. */
bool tk_is_word_char(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               c == '_';
    if (c < 0xC0)
        return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA ||
               (c >= 0xBC && c <= 0xBE);
    if (c == 0xD7 || c == 0xF7)
        return false;
    if (tk_is_whitespace(c))
        return false;
    static const uint32_t nonword[][2] = {
        {0x2000, 0x206F}, {0x20A0, 0x20CF}, {0x2190, 0x245F}, {0x2500, 0x2775},
        {0x2794, 0x2BFF}, {0x2E00, 0x2E7F}, {0x3000, 0x3004}, {0x3008, 0x3020},
        {0x3030, 0x3030}, {0xE000, 0xF8FF}, {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F},
        {0xFF00, 0xFF0F}, {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65},
        {0x1F000, 0x1FAFF},
    };
    for (size_t i = 0; i < sizeof nonword / sizeof nonword[0]; i++)
        if (c >= nonword[i][0] && c <= nonword[i][1])
            return false;
    return true;
}

/* ---- string map ------------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64, folded */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

const tk_strmap_entry *tk_strmap_find(const tk_strmap *m, const char *key, size_t len)
{
    if (!m->cap)
        return NULL;
    uint32_t h = hash_bytes(key, len);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t s = m->slots[i];
        if (!s)
            return NULL;
        const tk_strmap_entry *e = &m->ent[s - 1];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            return e;
    }
}

int32_t tk_strmap_get(const tk_strmap *m, const char *key, size_t len)
{
    const tk_strmap_entry *e = tk_strmap_find(m, key, len);
    return e ? e->val : -1;
}

static char *strmap_copy_key(tk_strmap *m, const char *key, size_t len)
{
    if (m->blk_cap - m->blk_used < len + 1) {
        size_t cap = len + 1 > 65536 ? len + 1 : 65536;
        char **blocks = realloc(m->blocks, (m->n_blocks + 1) * sizeof *blocks);
        if (!blocks)
            return NULL;
        m->blocks = blocks;
        char *blk = malloc(cap);
        if (!blk)
            return NULL;
        m->blocks[m->n_blocks++] = blk;
        m->blk = blk;
        m->blk_used = 0;
        m->blk_cap = cap;
    }
    char *k = m->blk + m->blk_used;
    memcpy(k, key, len);
    k[len] = '\0';
    m->blk_used += len + 1;
    return k;
}

static txc_status strmap_grow(tk_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t e = 0; e < m->n; e++) {
        size_t i = m->ent[e].hash & (cap - 1);
        while (slots[i])
            i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)(e + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return TXC_OK;
}

txc_status tk_strmap_put(tk_strmap *m, const char *key, size_t len, int32_t val)
{
    if (len > UINT32_MAX || m->n >= UINT32_MAX - 1)
        return txc_error(TXC_ERR_INVALID, "tokenizer: key too long or map too large");
    tk_strmap_entry *found = (tk_strmap_entry *)tk_strmap_find(m, key, len);
    if (found) {
        found->val = val;
        return TXC_OK;
    }
    if ((m->n + 1) * 2 > m->cap) {
        txc_status st = strmap_grow(m);
        if (st)
            return st;
    }
    if (m->n == m->ent_cap) {
        size_t cap = m->ent_cap ? m->ent_cap * 2 : 64;
        tk_strmap_entry *ent = realloc(m->ent, cap * sizeof *ent);
        if (!ent)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        m->ent = ent;
        m->ent_cap = cap;
    }
    char *k = strmap_copy_key(m, key, len);
    if (!k)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    uint32_t h = hash_bytes(key, len);
    tk_strmap_entry *e = &m->ent[m->n];
    e->key = k;
    e->len = (uint32_t)len;
    e->hash = h;
    e->val = val;
    size_t i = h & (m->cap - 1);
    while (m->slots[i])
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (uint32_t)(++m->n);
    return TXC_OK;
}

void tk_strmap_free(tk_strmap *m)
{
    for (size_t i = 0; i < m->n_blocks; i++)
        free(m->blocks[i]);
    free(m->blocks);
    free(m->slots);
    free(m->ent);
    memset(m, 0, sizeof *m);
}

/* ---- pieces ------------------------------------------------------------------- */

static txc_status pieces_push(tk_pieces *ps, tk_piece p)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 16;
        tk_piece *v = realloc(ps->v, cap * sizeof *v);
        if (!v)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = p;
    return TXC_OK;
}

txc_status tk_pieces_add_text(tk_pieces *ps, const char *s, size_t len, bool at_origin)
{
    if (len == 0)
        return TXC_OK;
    tk_piece p = {.off = ps->text.n, .len = len, .id = -1, .at_origin = at_origin};
    txc_status st = tk_buf_append(&ps->text, s, len);
    return st ? st : pieces_push(ps, p);
}

txc_status tk_pieces_add_token(tk_pieces *ps, int32_t id, bool at_origin)
{
    tk_piece p = {.off = ps->text.n, .len = 0, .id = id, .at_origin = at_origin};
    return pieces_push(ps, p);
}

void tk_pieces_free(tk_pieces *ps)
{
    free(ps->v);
    tk_buf_free(&ps->text);
    memset(ps, 0, sizeof *ps);
}

/* ---- string lists -------------------------------------------------------------- */

txc_status tk_strlist_add(tk_strlist *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        size_t *off = realloc(l->off, cap * sizeof *off);
        if (!off)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        l->off = off;
        size_t *ln = realloc(l->len, cap * sizeof *ln);
        if (!ln)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        l->len = ln;
        l->cap = cap;
    }
    size_t off = l->text.n;
    txc_status st = tk_buf_append(&l->text, s, len);
    if (st)
        return st;
    l->off[l->n] = off;
    l->len[l->n] = len;
    l->n++;
    return TXC_OK;
}

void tk_strlist_free(tk_strlist *l)
{
    tk_buf_free(&l->text);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}
