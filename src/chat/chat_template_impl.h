/* chat/chat_template_impl.h — the Jinja subset behind txc/chat_template.h
 * (internal to chat/): arenas and UTF-8 helpers (chat_template_arena.c),
 * values, the syntax tree, and the entry points of the parser
 * (chat_template_lex.c, chat_template_parse.c: chat/chat_template_syntax.h)
 * and the renderer (chat_template_eval.c and the files of
 * chat/chat_template_render.h). */
#ifndef TXC_CHAT_TEMPLATE_IMPL_H
#define TXC_CHAT_TEMPLATE_IMPL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txc/chat_template.h"
#include "txc/status.h"

/* ---- arena: everything a parse or a render allocates ------------------- */
typedef struct ct_chunk ct_chunk;
typedef struct ct_arena {
    ct_chunk *head;
    size_t used_bytes;  /* total allocated */
    size_t limit_bytes; /* 0: none */
    jmp_buf *fail;      /* longjmp target on allocation failure */
} ct_arena;

void *ct_alloc(ct_arena *a, size_t n);          /* zeroed; longjmps on failure */
char *ct_strndup(ct_arena *a, const char *s, size_t n);
void ct_arena_free(ct_arena *a);

/* ---- values ------------------------------------------------------------- */
typedef enum ct_kind {
    CT_UNDEF,
    CT_NONE,
    CT_BOOL,
    CT_INT,
    CT_FLOAT,
    CT_STR,
    CT_LIST, /* a list, a tuple (list.tuple) or a range (list.range) */
    CT_DICT,
    CT_NS,   /* namespace(): a dict whose attributes can be set */
    CT_FUNC, /* a builtin function or bound method, or a macro */
    CT_LOOP, /* the `loop` variable of a for loop */
} ct_kind;

typedef struct ct_value ct_value;
typedef struct ct_node ct_node;
typedef struct ct_loop ct_loop;

struct ct_value {
    ct_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t n;
            bool markup; /* a Markup string (|safe, |escape) */
        } str;
        struct {
            ct_value **items;
            size_t n;
            bool tuple;
            const int64_t *range; /* range(): {start, stop, step}; NULL for a list or tuple */
        } list;
        struct {
            ct_value **keys, **vals;
            size_t n, cap;
        } dict;
        struct {
            int id;                /* builtin / method id, or -1 for a macro */
            ct_value *self;        /* bound object of a method */
            const ct_node *macro;  /* N_MACRO */
            void *closure;         /* the frame a macro was defined in */
        } func;
        ct_loop *loop;
        const char *undef_msg;     /* the UndefinedError message if it is used */
    };
};

/* ---- syntax tree -------------------------------------------------------- */
typedef enum ct_node_kind {
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,        /* a = test, body, else_body (an elif is an N_IF in else_body) */
    N_FOR,       /* names = targets, a = iterable, b = filter (or NULL), body, else_body */
    N_SET,       /* names[0] = variable (or names = tuple targets), or a = namespace
                    expression and name = attribute; b = value */
    N_SETBLOCK,  /* names[0] = variable, body, filters (N_FILTER chain over a NULL input) */
    N_MACRO,     /* name, names = params, args = defaults (NULL entries: none), body */
    N_BREAK,
    N_CONTINUE,
    N_FILTERBLOCK, /* body, filters */
    N_BODY,        /* body only ({% generation %}) */
    N_WITH,        /* names = variables, args = their values, body */
    /* expressions */
    E_CONST,   /* value; op = 1: the integer literal 2^63 (value INT64_MIN), an error unless negated */
    E_NAME,    /* name */
    E_ATTR,    /* a . name */
    E_ITEM,    /* a [ b ] */
    E_SLICE,   /* a [ args[0] : args[1] : args[2] ] (NULL entries) */
    E_CALL,    /* a ( args, kwnames=kwargs ) */
    E_FILTER,  /* a | name ( args, kw ) — a NULL: the block's input */
    E_TEST,    /* a is [not] name ( args ) ; op = 1 when negated */
    E_NOT,
    E_NEG,
    E_POS,
    E_BINOP,   /* op: '+', '-', '*', '/', 'f' (//), '%', 'p' (**) */
    E_CONCAT,  /* args joined with ~ */
    E_AND,
    E_OR,
    E_CMP,     /* a op b, op: 'e' ==, 'n' !=, '<', 'l' <=, '>', 'g' >=, 'i' in, 'I' not in;
                  chained comparisons: b is another E_CMP with chain = 1 */
    E_COND,    /* b if a else c (c may be NULL) */
    E_LIST,    /* args */
    E_TUPLE,   /* args */
    E_DICT,    /* args = keys, kwargs = values */
} ct_node_kind;

struct ct_node {
    ct_node_kind kind;
    int line;
    int op;
    int id;               /* resolved filter / test id */
    bool chain;
    const char *name;     /* NUL-terminated, arena */
    ct_value *value;
    ct_node *a, *b, *c;
    ct_node **args;
    size_t nargs;
    const char **kwnames;
    ct_node **kwargs;
    size_t nkw;
    const char **names;
    size_t nnames;
    ct_node **body;
    size_t nbody;
    ct_node **else_body;
    size_t nelse;
    ct_node **filters;
    size_t nfilters;
};

/* Filters and tests the parser resolves by name (their ids index the tables
 * of chat_template_filters.c and chat_template_tests.c). -1: not supported. */
int ct_filter_id(const char *name);
int ct_test_id(const char *name);

/* ---- the template ------------------------------------------------------- */
typedef struct ct_var {
    char *name;
    char *json;    /* the value as JSON text (txc_chat_template_set_var_json) */
} ct_var;

struct txc_chat_template {
    ct_arena arena;    /* the tree and its constants */
    ct_node **body;
    size_t nbody;
    char *tokens[4];   /* bos, eos, unk, pad (malloc'd or NULL) */
    ct_var *vars;      /* extra variables */
    size_t nvars;
    uint64_t max_steps; /* the render's step budget (txc_chat_template_set_max_steps) */
};

extern const char *const ct_token_names[4];

/* Parse `src` into t->body (t->arena). Errors: TXC_ERR_FORMAT (syntax, with
 * the line), TXC_ERR_UNSUPPORTED, TXC_ERR_NOMEM. */
txc_status ct_parse(txc_chat_template *t, const char *src, size_t len);

/* Render (see txc_chat_template_render). */
txc_status ct_render(const txc_chat_template *t, const txc_chat_message *messages, size_t n,
                     bool add_generation_prompt, char **out, size_t *out_len);

/* The error of a parse or a render (then the caller longjmps): txc_error
 * with "chat template line N: <message>" (line <= 0: "chat template:
 * <message>"), the message cut to msg_max - 1 bytes (msg_max <= 768). */
void ct_verror(size_t msg_max, txc_status st, int line, const char *fmt, va_list ap);

/* A name table (filters, tests, methods): the id of `name`, -1 if absent. */
typedef struct ct_named_id {
    const char *name;
    int id;
} ct_named_id;
int ct_id_of(const ct_named_id *table, size_t n, const char *name);

/* UTF-8 helpers shared by the parser and the renderer. */
size_t ct_utf8_decode(const char *s, size_t n, uint32_t *cp); /* bytes used (>= 1) */
size_t ct_utf8_encode(uint32_t cp, char *out);                /* out: 4 bytes */
bool ct_py_isspace(uint32_t cp);                               /* Python str.isspace */

/* chat_template_gguf.c: txc_chat_template_load of a GGUF file. */
txc_status txc_chat_template_load_gguf(const char *path, txc_chat_template **out);

#endif
