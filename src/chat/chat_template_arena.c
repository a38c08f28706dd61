/* Chat templates: the arena that holds a parsed template and a render's
 * values, and the UTF-8 helpers the parser and the renderer share (see
 * chat/chat_template_impl.h). */
#include "chat/chat_template_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- arena -------------------------------------------------------------- */
struct ct_chunk {
    ct_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define CT_CHUNK (64u << 10)

void *ct_alloc(ct_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    ct_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > CT_CHUNK / 4 ? n : CT_CHUNK;
        if (a->limit_bytes && a->used_bytes + sz > a->limit_bytes) {
            txc_error(TXC_ERR_CAPACITY, "chat template: rendering needs more than %zu MiB of memory",
                      a->limit_bytes >> 20);
            longjmp(*a->fail, 1);
        }
        c = malloc(sizeof *c + sz);
        if (!c) {
            txc_error(TXC_ERR_NOMEM, "chat template: out of memory");
            longjmp(*a->fail, 1);
        }
        a->used_bytes += sz;
        c->size = sz;
        c->used = 0;
        if (sz == CT_CHUNK || !a->head) {
            c->next = a->head;
            a->head = c;
        } else { /* a big block: keep the current chunk for small ones */
            c->next = a->head->next;
            a->head->next = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *ct_strndup(ct_arena *a, const char *s, size_t n)
{
    char *p = ct_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void ct_arena_free(ct_arena *a)
{
    ct_chunk *c = a->head;
    while (c) {
        ct_chunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

/* ---- errors and name tables ---------------------------------------------- */
void ct_verror(size_t msg_max, txc_status st, int line, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, msg_max < sizeof msg ? msg_max : sizeof msg, fmt, ap);
    if (line > 0)
        txc_error(st, "chat template line %d: %s", line, msg);
    else
        txc_error(st, "chat template: %s", msg);
}

int ct_id_of(const ct_named_id *table, size_t n, const char *name)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(table[k].name, name))
            return table[k].id;
    return -1;
}

/* ---- UTF-8 -------------------------------------------------------------- */
size_t ct_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) {
        *cp = u[0];
        return 1;
    }
    int len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 1;
    if (len == 1 || (size_t)len > n) {
        *cp = u[0];
        return 1;
    }
    uint32_t c = u[0] & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) {
            *cp = u[0];
            return 1;
        }
        c = (c << 6) | (u[k] & 0x3F);
    }
    *cp = c;
    return (size_t)len;
}

size_t ct_utf8_encode(uint32_t cp, char *out)
{
    /* utf8proc writes 1-4 bytes; 0 for a value past U+10FFFF, replaced */
    utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)(cp > 0x10FFFF ? 0xFFFD : cp), (utf8proc_uint8_t *)out);
    return n > 0 ? (size_t)n : 0;
}

bool ct_py_isspace(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}
