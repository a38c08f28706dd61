/* chat/chat_template_syntax.h — what the lexer (chat_template_lex.c) and
 * the parser (chat_template_parse.c) share (internal to chat/): tokens and
 * the parse context. */
#ifndef TXC_CHAT_TEMPLATE_SYNTAX_H
#define TXC_CHAT_TEMPLATE_SYNTAX_H

#include "chat/chat_template_impl.h"

typedef enum ttype { T_DATA, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF } ttype;

typedef struct tok {
    ttype t;
    int line;
    const char *s; /* DATA, NAME, STR: arena copy (decoded for STR); OP: the operator */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct pctx {
    txc_chat_template *t;
    ct_arena *ar;
    jmp_buf fail;
    const char *src;
    size_t len;
    tok *toks;
    size_t ntoks, cap;
    size_t pos; /* parser position in toks */
    int depth;
    int in_macro;
} pctx;

/* A parse error: "chat template line N: ..." with status st, then a
 * longjmp to c->fail. */
_Noreturn void ct_perr(pctx *c, txc_status st, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Tokenize c->src (newlines already normalized) into c->toks, ending with
 * T_EOF; errors through ct_perr. */
void ct_lex(pctx *c);

#endif
