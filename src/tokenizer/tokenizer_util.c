/* Buffers, UTF-8, hash map, piece lists and JSON field helpers for the tokenizer. */
#include "tokenizer/tokenizer_impl.h"

#include <cjson/cJSON.h>
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

const char *tk_memmem(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0)
        return hay;
    while (n >= m) {
        const char *p = memchr(hay, needle[0], n - m + 1);
        if (!p)
            return NULL;
        if (!memcmp(p, needle, m))
            return p;
        n -= (size_t)(p - hay) + 1;
        hay = p + 1;
    }
    return NULL;
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

/* ---- JSON fields ------------------------------------------------------------------ */

bool tk_json_is_null(const cJSON *j) { return !j || cJSON_IsNull(j); }

const char *tk_json_type(const cJSON *j)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

txc_status tk_json_dup_string(const cJSON *j, const char *what, const char *field, char **out,
                              size_t *len)
{
    if (!cJSON_IsString(j))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a string", what, field);
    *len = strlen(j->valuestring);
    *out = malloc(*len + 1);
    if (!*out)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(*out, j->valuestring, *len + 1);
    return TXC_OK;
}

txc_status tk_json_char(const cJSON *j, const char *what, const char *field, uint32_t *cp)
{
    if (!cJSON_IsString(j) || !j->valuestring[0])
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a character", what,
                         field);
    size_t n = strlen(j->valuestring), cl;
    if (!tk_utf8_valid(j->valuestring, n) || (*cp = tk_utf8_decode(j->valuestring, &cl), cl != n))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not one character", what,
                         field);
    return TXC_OK;
}

txc_status tk_json_bool(const cJSON *obj, const char *what, const char *field, bool dflt,
                        bool *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (tk_json_is_null(j)) {
        *out = dflt;
        return TXC_OK;
    }
    if (!cJSON_IsBool(j))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a boolean", what, field);
    *out = cJSON_IsTrue(j);
    return TXC_OK;
}

/* Metaspace's prepend scheme, new ("prepend_scheme") or legacy
 * ("add_prefix_space") form; the crate defaults to "always". */
txc_status tk_json_prepend_scheme(const cJSON *obj, const char *what, tk_prepend_scheme *out)
{
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(obj, "prepend_scheme");
    const cJSON *aps = cJSON_GetObjectItemCaseSensitive(obj, "add_prefix_space");
    *out = TK_PREPEND_ALWAYS;
    if (!tk_json_is_null(ps)) {
        if (!cJSON_IsString(ps))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: prepend_scheme is not a string",
                             what);
        if (!strcmp(ps->valuestring, "always"))
            *out = TK_PREPEND_ALWAYS;
        else if (!strcmp(ps->valuestring, "first"))
            *out = TK_PREPEND_FIRST;
        else if (!strcmp(ps->valuestring, "never"))
            *out = TK_PREPEND_NEVER;
        else
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: unknown prepend_scheme '%s'",
                             what, ps->valuestring);
    } else if (!tk_json_is_null(aps)) {
        if (!cJSON_IsBool(aps))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: add_prefix_space is not a boolean",
                             what);
        *out = cJSON_IsTrue(aps) ? TK_PREPEND_ALWAYS : TK_PREPEND_NEVER;
    }
    return TXC_OK;
}

txc_status tk_json_pattern(const cJSON *obj, const char *what, tk_regex **re, char **str,
                           size_t *str_len)
{
    *re = NULL;
    if (str)
        *str = NULL;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(obj, "pattern");
    if (!cJSON_IsObject(pat))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"pattern\" is not an object", what);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *j = s ? s : r;
    if (!j)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: unknown pattern kind", what);
    if (!cJSON_IsString(j))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: the pattern is not a string", what);
    size_t n = strlen(j->valuestring);
    txc_status st = tk_regex_compile(j->valuestring, n, s != NULL, what, re);
    if (!st && s && str) {
        st = tk_json_dup_string(s, what, "pattern", str, str_len);
        if (st) {
            tk_regex_free(*re);
            *re = NULL;
        }
    }
    return st;
}

txc_status tk_replace_all(const char *s, size_t n, const char *pat, size_t plen, const char *with,
                          size_t wlen, tk_buf *out)
{
    txc_status st = TXC_OK;
    size_t i = 0, last = 0;
    while (!st && plen && i + plen <= n) {
        const char *hit = memchr(s + i, pat[0], n - i - plen + 1);
        if (!hit)
            break;
        i = (size_t)(hit - s);
        if (memcmp(hit, pat, plen) == 0) {
            st = tk_buf_append(out, s + last, i - last);
            if (!st)
                st = tk_buf_append(out, with, wlen);
            i += plen;
            last = i;
        } else {
            i++;
        }
    }
    if (!st)
        st = tk_buf_append(out, s + last, n - last);
    return st;
}
