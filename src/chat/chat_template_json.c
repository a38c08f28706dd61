/* Chat templates: tojson, as transformers replaces jinja's: json.dumps
 * (ensure_ascii=False by default, indent, separators, sort_keys) of a value
 * (see chat/chat_template_render.h). */
#include "chat/chat_template_render.h"

#include <stdio.h>
#include <string.h>

/* ---- JSON (transformers' tojson: json.dumps(ensure_ascii=False)) -------- */
static void json_str(rctx *c, sbuf *b, const char *s, size_t n, bool ascii)
{
    ct_sb_put(c, b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        if (ascii && ch >= 0x80) { /* ensure_ascii: \uXXXX, surrogate pairs past the BMP */
            uint32_t cp;
            size_t w = ct_utf8_decode(s + i, n - i, &cp);
            ct_sb_put(c, b, s + i - run, run);
            run = 0;
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            }
            ct_sb_puts(c, b, tmp);
            i += w - 1;
            continue;
        }
        if (ch == '"')
            esc = "\\\"";
        else if (ch == '\\')
            esc = "\\\\";
        else if (ch == '\n')
            esc = "\\n";
        else if (ch == '\r')
            esc = "\\r";
        else if (ch == '\t')
            esc = "\\t";
        else if (ch == '\b')
            esc = "\\b";
        else if (ch == '\f')
            esc = "\\f";
        else if (ch < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", ch);
            esc = tmp;
        }
        if (esc) {
            ct_sb_put(c, b, s + i - run, run);
            run = 0;
            ct_sb_puts(c, b, esc);
        } else {
            run++;
        }
    }
    ct_sb_put(c, b, s + n - run, run);
    ct_sb_put(c, b, "\"", 1);
}

static void json_newline(rctx *c, sbuf *b, const jopts *o, int level)
{
    ct_sb_put(c, b, "\n", 1);
    for (int k = 0; k < level; k++)
        ct_sb_put(c, b, o->indent, o->indent_n);
}

void ct_json_dump(rctx *c, sbuf *b, const ct_value *v, const jopts *o, int level, int line)
{
    if (level > 200)
        ct_rfail(c, TXC_ERR_CAPACITY, line, "tojson: a value nested deeper than 200 levels (or containing itself)");
    switch (v->kind) {
    case CT_NONE: ct_sb_puts(c, b, "null"); return;
    case CT_BOOL: ct_sb_puts(c, b, v->b ? "true" : "false"); return;
    case CT_INT: ct_sb_printf(c, b, "%lld", (long long)v->i); return;
    case CT_FLOAT: ct_float_repr(c, b, v->f, true); return;
    case CT_STR: json_str(c, b, v->str.s, v->str.n, o->ascii); return;
    case CT_LIST:
        if (v->list.range)
            ct_rfail(c, TXC_ERR_INVALID, line, "Object of type range is not JSON serializable");
        if (v->list.n == 0) {
            ct_sb_puts(c, b, "[]");
            return;
        }
        ct_sb_put(c, b, "[", 1);
        for (size_t i = 0; i < v->list.n; i++) {
            if (i)
                ct_sb_put(c, b, o->item_sep, o->item_sep_n);
            if (o->indent)
                json_newline(c, b, o, level + 1);
            ct_json_dump(c, b, v->list.items[i], o, level + 1, line);
        }
        if (o->indent)
            json_newline(c, b, o, level);
        ct_sb_put(c, b, "]", 1);
        return;
    case CT_DICT: {
        if (v->dict.n == 0) {
            ct_sb_puts(c, b, "{}");
            return;
        }
        size_t n = v->dict.n;
        size_t *order = ct_alloc(&c->ar, n * sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        if (o->sort_keys) /* insertion sort by key (Python sorts the keys; mixed types are a TypeError) */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && ct_compare(c, v->dict.keys[order[j - 1]], v->dict.keys[order[j]], "<", line) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        ct_sb_put(c, b, "{", 1);
        for (size_t q = 0; q < n; q++) {
            size_t i = order[q];
            if (q)
                ct_sb_put(c, b, o->item_sep, o->item_sep_n);
            if (o->indent)
                json_newline(c, b, o, level + 1);
            const ct_value *k = v->dict.keys[i];
            if (k->kind == CT_STR) {
                json_str(c, b, k->str.s, k->str.n, o->ascii);
            } else if (k->kind == CT_INT || k->kind == CT_FLOAT || k->kind == CT_BOOL || k->kind == CT_NONE) {
                sbuf kb = {0};
                ct_json_dump(c, &kb, k, o, level + 1, line);
                json_str(c, b, kb.p, kb.n, o->ascii);
            } else {
                ct_rfail(c, TXC_ERR_INVALID, line, "keys must be str, int, float, bool or None, not %s", ct_type_name(k));
            }
            ct_sb_put(c, b, o->key_sep, o->key_sep_n);
            ct_json_dump(c, b, v->dict.vals[i], o, level + 1, line);
        }
        if (o->indent)
            json_newline(c, b, o, level);
        ct_sb_put(c, b, "}", 1);
        return;
    }
    default:
        ct_rfail(c, TXC_ERR_INVALID, line, "Object of type %s is not JSON serializable", ct_type_name(v));
    }
}
