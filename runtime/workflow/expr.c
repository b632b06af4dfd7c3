/* runtime/workflow/expr.c - parser and evaluator for break-condition expressions (grammar and
 * semantics in expr.h).
 *
 * Why a hand-written recursive-descent parser: the grammar is five precedence levels and a path
 * syntax, which fits in a few hundred lines; every error must name the exact character position
 * of the offending token and say what was expected there, which generated parsers make awkward;
 * and it adds no dependency (or build step) to the library.
 *
 * Shape: a one-token-lookahead lexer feeds the parser, which builds the syntax tree in a fixed
 * array of nodes inside a scratch parser (children are referred to by index, not by pointer) and
 * decodes identifiers and string literals into a byte pool beside it. On success the used nodes,
 * the pool and a copy of the text are moved into a single allocation, so an expression is one
 * block that is freed at once and is trivially immutable.
 *
 * Invariants: a parsed expression has 1..EXPR_MAX_NODES nodes, every child index is a valid
 * index smaller than 0xFFFF, every string in the pool is NUL-terminated, and the tree is at most
 * EXPR_MAX_NODES deep, so the evaluator's recursion is bounded. The parser's own recursion is
 * bounded by EXPR_MAX_DEPTH: only parentheses and negations recurse, and both count depth.
 *
 * The lexer avoids <ctype.h> and converts numbers in a locale-independent way, because the
 * meaning of an expression must not depend on the host process's setlocale().
 */
#include "runtime/workflow/expr.h"

#include "base/mem.h"
#include "base/utf8.h"

#include <assert.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_NODE        0xFFFFu
#define MAX_INDEX      1000000000u /* larger array indexes are surely mistakes */
#define SNIPPET_MAX    24          /* bytes of a token quoted in an error message */
#define POOL_MAX       (EXPR_MAX_TEXT + EXPR_MAX_NODES)
#define ERROR_NO_SPACE "out of memory"

typedef enum node_kind {
    N_NULL = 0,
    N_TRUE,
    N_FALSE,
    N_INT,
    N_REAL,
    N_STRING,
    N_PATH,  /* lhs: first step */
    N_KEY,   /* a path step: object key (pool string); rhs: next step */
    N_INDEX, /* a path step: array index; rhs: next step */
    N_NOT,   /* lhs */
    N_AND,   /* lhs, rhs */
    N_OR,    /* lhs, rhs */
    N_CMP    /* op, lhs, rhs */
} node_kind;

typedef enum cmp_op { CMP_EQ = 0, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } cmp_op;

struct node {
    unsigned char kind; /* node_kind */
    unsigned char op;   /* cmp_op, for N_CMP */
    unsigned short lhs;
    unsigned short rhs;
    union {
        long long integer; /* N_INT */
        double real;       /* N_REAL */
        size_t index;      /* N_INDEX */
        struct {
            size_t offset; /* into the pool */
            size_t length; /* bytes, without the NUL */
        } str;             /* N_STRING, N_KEY */
    } u;
};

/* One block: this header, the nodes, the pool, then the text. */
struct expr {
    const char *text;
    const char *pool;
    size_t count;
    unsigned short root;
    struct node nodes[];
};

/* ---- lexer ---------------------------------------------------------------------------- */

typedef enum tok_kind {
    T_END = 0,
    T_ERROR, /* the lexer already recorded the error */
    T_LPAREN,
    T_RPAREN,
    T_LBRACKET,
    T_RBRACKET,
    T_DOT,
    T_AND,
    T_OR,
    T_NOT,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_NUMBER,
    T_STRING,
    T_IDENT,
    T_TRUE,
    T_FALSE,
    T_NULL
} tok_kind;

struct token {
    tok_kind kind;
    size_t start; /* byte offset in the text */
    size_t len;
};

struct parser {
    const char *text;
    size_t len;
    size_t pos; /* next byte the lexer reads */
    struct token cur;
    struct token prev; /* the token before cur, for "expected a value after 'and'" */
    bool has_prev;
    bool started; /* cur holds a token */
    unsigned depth;
    bool failed;
    struct expr_error error;
    size_t count;
    struct node nodes[EXPR_MAX_NODES];
    /* Decoded names and strings. Each takes at most its source bytes plus a NUL, and each
     * belongs to a node, so POOL_MAX bytes always suffice. */
    size_t pool_len;
    char pool[POOL_MAX];
    char number[EXPR_MAX_TEXT + 1]; /* a number token, NUL-terminated for strtod */
};

/* The 1-based character position of byte @p offset: UTF-8 continuation bytes do not count. */
static size_t
char_position(const char *text, size_t offset)
{
    return 1 + weft__utf8_chars(text, strnlen(text, offset));
}

static void
vset_error(struct expr_error *error, const char *text, size_t offset, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

static void
vset_error(struct expr_error *error, const char *text, size_t offset, const char *fmt, va_list ap)
{
    int prefix = 0;

    error->position = char_position(text, offset);
    prefix = snprintf(error->message, sizeof(error->message), "position %zu: ", error->position);
    if (prefix < 0 || (size_t)prefix >= sizeof(error->message)) {
        return;
    }
    vsnprintf(error->message + prefix, sizeof(error->message) - (size_t)prefix, fmt, ap);
}

static void
set_error(struct expr_error *error, const char *text, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
set_error(struct expr_error *error, const char *text, size_t offset, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vset_error(error, text, offset, fmt, ap);
    va_end(ap);
}

static void fail(struct parser *p, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record a parse error at byte @p offset. Only the first error is kept: later ones are
 * consequences of it. */
static void
fail(struct parser *p, size_t offset, const char *fmt, ...)
{
    va_list ap;

    if (p->failed) {
        return;
    }
    p->failed = true;
    va_start(ap, fmt);
    vset_error(&p->error, p->text, offset, fmt, ap);
    va_end(ap);
}

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool
is_ident_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool
is_ident_char(char c)
{
    return is_ident_start(c) || is_digit(c);
}

/* Quote a token for an error message: 'text' (shortened) or "end of input". */
static const char *
describe(const struct parser *p, const struct token *tok, char *buf, size_t size)
{
    if (tok->kind == T_END) {
        snprintf(buf, size, "end of input");
    } else if (tok->len > SNIPPET_MAX) {
        snprintf(buf, size, "'%.*s...'", SNIPPET_MAX, p->text + tok->start);
    } else {
        snprintf(buf, size, "'%.*s'", (int)tok->len, p->text + tok->start);
    }
    return buf;
}

/* Scan a quoted string starting at p->pos; escapes are checked here and decoded later. */
static tok_kind
lex_string(struct parser *p)
{
    const char quote = p->text[p->pos];
    size_t i = p->pos + 1;

    for (;;) {
        if (i >= p->len) {
            fail(p, p->pos, "unterminated string");
            return T_ERROR;
        }
        if (p->text[i] == quote) {
            p->pos = i + 1;
            return T_STRING;
        }
        if (p->text[i] == '\\') {
            char next = i + 1 < p->len ? p->text[i + 1] : '\0';
            if (next == '\0') {
                fail(p, p->pos, "unterminated string");
                return T_ERROR;
            }
            if (next != '"' && next != '\'' && next != '\\' && next != 'n' && next != 't') {
                fail(p, i, "unknown escape '\\%c' in string (use \\\" \\' \\\\ \\n or \\t)", next);
                return T_ERROR;
            }
            i += 2;
        } else {
            i++;
        }
    }
}

/* Scan -?digits(.digits)?([eE][+-]?digits)? starting at p->pos. */
static tok_kind
lex_number(struct parser *p)
{
    const char *t = p->text;
    size_t i = p->pos;

    if (t[i] == '-') {
        i++;
        if (!is_digit(t[i])) {
            fail(p, p->pos,
                 "'-' must be followed by a digit (only number literals can be "
                 "negative)");
            return T_ERROR;
        }
    }
    while (is_digit(t[i])) {
        i++;
    }
    if (t[i] == '.' && is_digit(t[i + 1])) {
        i += 2;
        while (is_digit(t[i])) {
            i++;
        }
    }
    if (t[i] == 'e' || t[i] == 'E') {
        size_t j = i + 1;
        if (t[j] == '+' || t[j] == '-') {
            j++;
        }
        if (is_digit(t[j])) {
            i = j;
            while (is_digit(t[i])) {
                i++;
            }
        }
    }
    /* "1.", "1e", "12ab": a letter or dot glued to a number is a typo, not two tokens. */
    if (is_ident_char(t[i]) || t[i] == '.') {
        size_t end = i;
        while (is_ident_char(t[end]) || t[end] == '.') {
            end++;
        }
        fail(p, p->pos, "malformed number '%.*s'",
             (int)(end - p->pos > SNIPPET_MAX ? SNIPPET_MAX : end - p->pos), t + p->pos);
        return T_ERROR;
    }
    p->pos = i;
    return T_NUMBER;
}

static tok_kind
keyword(const char *s, size_t len)
{
    static const struct {
        const char *word;
        tok_kind kind;
    } words[] = {{"and", T_AND},   {"or", T_OR},       {"not", T_NOT},
                 {"true", T_TRUE}, {"false", T_FALSE}, {"null", T_NULL}};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i].word) == len && memcmp(words[i].word, s, len) == 0) {
            return words[i].kind;
        }
    }
    return T_IDENT;
}

/* Case-insensitively a keyword but not exactly one: "AND", "True". */
static bool
is_miscased_keyword(const char *s, size_t len)
{
    static const char *const words[] = {"and", "or", "not", "true", "false", "null"};

    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
        size_t i = 0;
        if (strlen(words[w]) != len) {
            continue;
        }
        while (i < len && (s[i] | 0x20) == words[w][i]) {
            i++;
        }
        if (i == len) {
            return true;
        }
    }
    return false;
}

/* Read the next token into p->cur (and remember the previous one). */
static void
advance(struct parser *p)
{
    const char *t = p->text;
    tok_kind kind = T_END;
    size_t start = 0;

    if (p->started) {
        p->prev = p->cur;
        p->has_prev = true;
    }
    p->started = true;
    while (t[p->pos] == ' ' || t[p->pos] == '\t' || t[p->pos] == '\n' || t[p->pos] == '\r') {
        p->pos++;
    }
    start = p->pos;
    switch (t[start]) {
    case '\0':
        kind = T_END;
        break;
    case '(':
        kind = T_LPAREN;
        p->pos++;
        break;
    case ')':
        kind = T_RPAREN;
        p->pos++;
        break;
    case '[':
        kind = T_LBRACKET;
        p->pos++;
        break;
    case ']':
        kind = T_RBRACKET;
        p->pos++;
        break;
    case '.':
        kind = T_DOT;
        p->pos++;
        break;
    case '=':
        if (t[start + 1] == '=') {
            kind = T_EQ;
            p->pos += 2;
        } else {
            fail(p, start, "unknown operator '='; use '==' to compare");
            kind = T_ERROR;
        }
        break;
    case '!':
        kind = t[start + 1] == '=' ? T_NE : T_NOT;
        p->pos += kind == T_NE ? 2 : 1;
        break;
    case '<':
        if (t[start + 1] == '>') {
            fail(p, start, "unknown operator '<>'; use '!='");
            kind = T_ERROR;
        } else {
            kind = t[start + 1] == '=' ? T_LE : T_LT;
            p->pos += kind == T_LE ? 2 : 1;
        }
        break;
    case '>':
        kind = t[start + 1] == '=' ? T_GE : T_GT;
        p->pos += kind == T_GE ? 2 : 1;
        break;
    case '&':
    case '|':
        if (t[start + 1] == t[start]) {
            kind = t[start] == '&' ? T_AND : T_OR;
            p->pos += 2;
        } else {
            fail(p, start, "unknown operator '%c'; use '%c%c' or '%s'", t[start], t[start],
                 t[start], t[start] == '&' ? "and" : "or");
            kind = T_ERROR;
        }
        break;
    case '"':
    case '\'':
        kind = lex_string(p);
        break;
    default:
        if (t[start] == '-' || is_digit(t[start])) {
            kind = lex_number(p);
        } else if (is_ident_start(t[start])) {
            while (is_ident_char(t[p->pos])) {
                p->pos++;
            }
            kind = keyword(t + start, p->pos - start);
        } else if ((unsigned char)t[start] >= 0x20 && (unsigned char)t[start] < 0x7F) {
            fail(p, start, "unexpected character '%c'", t[start]);
            kind = T_ERROR;
        } else {
            fail(p, start, "unexpected byte 0x%02X", (unsigned)(unsigned char)t[start]);
            kind = T_ERROR;
        }
        break;
    }
    p->cur.kind = kind;
    p->cur.start = start;
    p->cur.len = p->pos - start;
}

/* ---- parser --------------------------------------------------------------------------- */

static unsigned short parse_or(struct parser *p);

static unsigned short
new_node(struct parser *p, node_kind kind, size_t offset)
{
    struct node *n = NULL;

    if (p->count == EXPR_MAX_NODES) {
        fail(p, offset, "expression too complex: more than %d nodes", EXPR_MAX_NODES);
        return NO_NODE;
    }
    n = &p->nodes[p->count];
    memset(n, 0, sizeof(*n));
    n->kind = (unsigned char)kind;
    n->lhs = NO_NODE;
    n->rhs = NO_NODE;
    return (unsigned short)p->count++;
}

/* Append @p len bytes and a NUL to the pool; returns the offset. */
static size_t
pool_add(struct parser *p, const char *s, size_t len)
{
    size_t offset = p->pool_len;

    assert(p->pool_len + len + 1 <= POOL_MAX); /* see the comment on the pool */
    memcpy(p->pool + p->pool_len, s, len);
    p->pool_len += len;
    p->pool[p->pool_len++] = '\0';
    return offset;
}

static unsigned short
parse_string(struct parser *p)
{
    const struct token tok = p->cur;
    unsigned short n = new_node(p, N_STRING, tok.start);
    size_t offset = p->pool_len;

    if (n == NO_NODE) {
        return NO_NODE;
    }
    /* The lexer checked the escapes; the closing quote is the token's last byte. */
    for (size_t i = tok.start + 1; i + 1 < tok.start + tok.len; i++) {
        char c = p->text[i];
        if (c == '\\') {
            i++;
            c = p->text[i] == 'n' ? '\n' : p->text[i] == 't' ? '\t' : p->text[i];
        }
        assert(p->pool_len < POOL_MAX);
        p->pool[p->pool_len++] = c;
    }
    assert(p->pool_len < POOL_MAX);
    p->pool[p->pool_len++] = '\0';
    p->nodes[n].u.str.offset = offset;
    p->nodes[n].u.str.length = p->pool_len - offset - 1;
    advance(p);
    return n;
}

static unsigned short
parse_number(struct parser *p)
{
    const struct token tok = p->cur;
    bool is_integer = true;
    unsigned short n = NO_NODE;
    char point = '.';

    memcpy(p->number, p->text + tok.start, tok.len);
    p->number[tok.len] = '\0';
    for (size_t i = 0; i < tok.len; i++) {
        if (p->number[i] == '.' || p->number[i] == 'e' || p->number[i] == 'E') {
            is_integer = false;
        }
    }
    if (is_integer) {
        long long value = 0;
        errno = 0;
        value = strtoll(p->number, NULL, 10);
        if (errno != ERANGE) {
            n = new_node(p, N_INT, tok.start);
            if (n != NO_NODE) {
                p->nodes[n].u.integer = value;
                advance(p);
            }
            return n;
        }
        /* Too large for an integer: it still compares fine as a double. */
    }
    /* strtod honours LC_NUMERIC; write the locale's decimal point where the text has '.'. */
    point = localeconv()->decimal_point[0];
    for (size_t i = 0; point != '.' && point != '\0' && i < tok.len; i++) {
        if (p->number[i] == '.') {
            p->number[i] = point;
        }
    }
    {
        double value = strtod(p->number, NULL);
        if (isinf(value)) {
            fail(p, tok.start, "number out of range");
            return NO_NODE;
        }
        n = new_node(p, N_REAL, tok.start);
        if (n != NO_NODE) {
            p->nodes[n].u.real = value;
            advance(p);
        }
    }
    return n;
}

/* A name after '.': any identifier, including keywords. */
static bool
is_name(const struct parser *p, const struct token *tok)
{
    switch (tok->kind) {
    case T_IDENT:
    case T_AND:
    case T_OR:
    case T_NOT:
    case T_TRUE:
    case T_FALSE:
    case T_NULL:
        return is_ident_start(p->text[tok->start]); /* not "&&", "||", "!" */
    default:
        return false;
    }
}

static unsigned short
new_key(struct parser *p)
{
    unsigned short n = new_node(p, N_KEY, p->cur.start);

    if (n == NO_NODE) {
        return NO_NODE;
    }
    p->nodes[n].u.str.offset = pool_add(p, p->text + p->cur.start, p->cur.len);
    p->nodes[n].u.str.length = p->cur.len;
    advance(p);
    return n;
}

static unsigned short
new_index(struct parser *p)
{
    const struct token tok = p->cur;
    size_t value = 0;
    unsigned short n = NO_NODE;

    for (size_t i = 0; tok.kind == T_NUMBER && i < tok.len; i++) {
        if (!is_digit(p->text[tok.start + i])) {
            fail(p, tok.start, "array index must be a non-negative integer");
            return NO_NODE;
        }
    }
    if (tok.kind != T_NUMBER) {
        fail(p, tok.start, "array index must be a non-negative integer");
        return NO_NODE;
    }
    for (size_t i = 0; i < tok.len; i++) {
        value = value * 10 + (size_t)(p->text[tok.start + i] - '0');
        if (value > MAX_INDEX) {
            fail(p, tok.start, "array index too large (at most %u)", MAX_INDEX);
            return NO_NODE;
        }
    }
    n = new_node(p, N_INDEX, tok.start);
    if (n == NO_NODE) {
        return NO_NODE;
    }
    p->nodes[n].u.index = value;
    advance(p);
    if (p->cur.kind != T_RBRACKET) {
        fail(p, p->cur.start, "expected ']' after the array index");
        return NO_NODE;
    }
    advance(p);
    return n;
}

/* path := ident ('.' name | '[' digits ']')* ; p->cur is the first identifier. */
static unsigned short
parse_path(struct parser *p)
{
    unsigned short path = new_node(p, N_PATH, p->cur.start);
    unsigned short last = NO_NODE;
    unsigned short step = NO_NODE;

    if (path == NO_NODE) {
        return NO_NODE;
    }
    step = new_key(p);
    if (step == NO_NODE) {
        return NO_NODE;
    }
    p->nodes[path].lhs = step;
    last = step;
    for (;;) {
        if (p->cur.kind == T_DOT) {
            advance(p);
            if (!is_name(p, &p->cur)) {
                fail(p, p->cur.start, "expected a field name after '.'");
                return NO_NODE;
            }
            step = new_key(p);
        } else if (p->cur.kind == T_LBRACKET) {
            advance(p);
            step = new_index(p); /* consumes the index and the ']' */
        } else {
            return path;
        }
        if (step == NO_NODE) {
            return NO_NODE;
        }
        p->nodes[last].rhs = step;
        last = step;
    }
}

static bool
enter(struct parser *p, size_t offset)
{
    if (p->depth == EXPR_MAX_DEPTH) {
        fail(p, offset, "nesting deeper than %d levels", EXPR_MAX_DEPTH);
        return false;
    }
    p->depth++;
    return true;
}

static unsigned short
parse_primary(struct parser *p)
{
    char found[SNIPPET_MAX + 8];
    char after[SNIPPET_MAX + 8];

    switch (p->cur.kind) {
    case T_LPAREN: {
        const struct token open = p->cur;
        unsigned short inner = NO_NODE;
        if (!enter(p, open.start)) {
            return NO_NODE;
        }
        advance(p);
        inner = parse_or(p);
        p->depth--;
        if (inner == NO_NODE) {
            return NO_NODE;
        }
        if (p->cur.kind != T_RPAREN) {
            fail(p, p->cur.start, "expected ')' to close the '(' at position %zu, found %s",
                 char_position(p->text, open.start), describe(p, &p->cur, found, sizeof(found)));
            return NO_NODE;
        }
        advance(p);
        return inner;
    }
    case T_NUMBER:
        return parse_number(p);
    case T_STRING:
        return parse_string(p);
    case T_TRUE:
    case T_FALSE:
    case T_NULL: {
        node_kind kind = p->cur.kind == T_TRUE ? N_TRUE : p->cur.kind == T_FALSE ? N_FALSE : N_NULL;
        unsigned short n = new_node(p, kind, p->cur.start);
        if (n != NO_NODE) {
            advance(p);
        }
        return n;
    }
    case T_IDENT:
        return parse_path(p);
    case T_ERROR:
        return NO_NODE;
    default:
        break;
    }
    if (!p->has_prev && p->cur.kind == T_END) {
        fail(p, p->cur.start, "empty expression");
    } else if (!p->has_prev) {
        fail(p, p->cur.start, "expected a value, found %s",
             describe(p, &p->cur, found, sizeof(found)));
    } else if (p->cur.kind == T_END) {
        fail(p, p->cur.start, "expected a value after %s",
             describe(p, &p->prev, after, sizeof(after)));
    } else {
        fail(p, p->cur.start, "expected a value after %s, found %s",
             describe(p, &p->prev, after, sizeof(after)),
             describe(p, &p->cur, found, sizeof(found)));
    }
    return NO_NODE;
}

static bool
to_cmp(tok_kind kind, cmp_op *op)
{
    switch (kind) {
    case T_EQ:
        *op = CMP_EQ;
        return true;
    case T_NE:
        *op = CMP_NE;
        return true;
    case T_LT:
        *op = CMP_LT;
        return true;
    case T_LE:
        *op = CMP_LE;
        return true;
    case T_GT:
        *op = CMP_GT;
        return true;
    case T_GE:
        *op = CMP_GE;
        return true;
    default:
        return false;
    }
}

static unsigned short
parse_comparison(struct parser *p)
{
    unsigned short lhs = parse_primary(p);
    unsigned short rhs = NO_NODE;
    unsigned short n = NO_NODE;
    struct token tok;
    cmp_op op = CMP_EQ;
    cmp_op chained = CMP_EQ;

    if (lhs == NO_NODE || !to_cmp(p->cur.kind, &op)) {
        return lhs;
    }
    tok = p->cur;
    advance(p);
    rhs = parse_primary(p);
    if (rhs == NO_NODE) {
        return NO_NODE;
    }
    if (to_cmp(p->cur.kind, &chained)) {
        fail(p, p->cur.start, "comparisons cannot be chained; join them with 'and'");
        return NO_NODE;
    }
    n = new_node(p, N_CMP, tok.start);
    if (n == NO_NODE) {
        return NO_NODE;
    }
    p->nodes[n].op = (unsigned char)op;
    p->nodes[n].lhs = lhs;
    p->nodes[n].rhs = rhs;
    return n;
}

static unsigned short
parse_unary(struct parser *p)
{
    const struct token tok = p->cur;
    unsigned short operand = NO_NODE;
    unsigned short n = NO_NODE;

    if (tok.kind != T_NOT) {
        return parse_comparison(p);
    }
    if (!enter(p, tok.start)) {
        return NO_NODE;
    }
    advance(p);
    operand = parse_unary(p);
    p->depth--;
    if (operand == NO_NODE) {
        return NO_NODE;
    }
    n = new_node(p, N_NOT, tok.start);
    if (n != NO_NODE) {
        p->nodes[n].lhs = operand;
    }
    return n;
}

/* Left-associative chains of @p op_tok with operands from @p operand, as nodes of @p kind. */
static unsigned short
parse_chain(struct parser *p,
            tok_kind op_tok,
            node_kind kind,
            unsigned short (*operand)(struct parser *))
{
    unsigned short lhs = operand(p);

    while (lhs != NO_NODE && p->cur.kind == op_tok) {
        const struct token tok = p->cur;
        unsigned short rhs = NO_NODE;
        unsigned short n = NO_NODE;
        advance(p);
        rhs = operand(p);
        if (rhs == NO_NODE) {
            return NO_NODE;
        }
        n = new_node(p, kind, tok.start);
        if (n == NO_NODE) {
            return NO_NODE;
        }
        p->nodes[n].lhs = lhs;
        p->nodes[n].rhs = rhs;
        lhs = n;
    }
    return lhs;
}

static unsigned short
parse_and(struct parser *p)
{
    return parse_chain(p, T_AND, N_AND, parse_unary);
}

static unsigned short
parse_or(struct parser *p)
{
    return parse_chain(p, T_OR, N_OR, parse_and);
}

static void
no_memory(struct expr_error *error)
{
    if (error != NULL) {
        error->position = 0;
        snprintf(error->message, sizeof(error->message), "%s", ERROR_NO_SPACE);
    }
}

/* Input left after a whole expression was parsed: an error that names the likely cause
 * (an unmatched ')', a keyword in the wrong case, a missing 'and'/'or'). */
static void
fail_trailing(struct parser *p)
{
    char found[SNIPPET_MAX + 8];

    if (p->cur.kind == T_RPAREN) {
        fail(p, p->cur.start, "unexpected ')' without a matching '('");
    } else if (p->cur.kind == T_IDENT && is_miscased_keyword(p->text + p->cur.start, p->cur.len)) {
        fail(p, p->cur.start, "trailing input %s (keywords are lowercase)",
             describe(p, &p->cur, found, sizeof(found)));
    } else {
        fail(p, p->cur.start, "trailing input %s; expected 'and', 'or' or the end",
             describe(p, &p->cur, found, sizeof(found)));
    }
}

/* Copy the parsed tree of @p p (rooted at @p root) into one block: the expression, its nodes,
 * its decoded strings and the source text. @return new (free with weft__expr_free), or NULL
 * when out of memory. */
static struct expr *
expr_from_parser(const struct parser *p, unsigned short root)
{
    size_t nodes_size = p->count * sizeof(struct node);
    char *block = weft__malloc(sizeof(struct expr) + nodes_size + p->pool_len + p->len + 1);
    struct expr *e = NULL;

    if (block == NULL) {
        return NULL;
    }
    e = (struct expr *)(void *)block;
    memcpy(e->nodes, p->nodes, nodes_size);
    memcpy(block + sizeof(struct expr) + nodes_size, p->pool, p->pool_len);
    memcpy(block + sizeof(struct expr) + nodes_size + p->pool_len, p->text, p->len + 1);
    e->pool = block + sizeof(struct expr) + nodes_size;
    e->text = e->pool + p->pool_len;
    e->count = p->count;
    e->root = root;
    return e;
}

weft_err
weft__expr_parse(const char *text, struct expr **out, struct expr_error *error)
{
    struct parser *p = NULL;
    struct expr *e = NULL;
    unsigned short root = NO_NODE;
    size_t len = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (text == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    /* Stop counting past the limit: the text may be arbitrarily long. */
    while (len <= EXPR_MAX_TEXT && text[len] != '\0') {
        len++;
    }
    if (len > EXPR_MAX_TEXT) {
        if (error != NULL) {
            set_error(error, text, EXPR_MAX_TEXT, "expression longer than %d bytes", EXPR_MAX_TEXT);
        }
        return WEFT_EPARSE;
    }

    p = weft__malloc(sizeof(*p));
    if (p == NULL) {
        no_memory(error);
        return WEFT_ENOMEM;
    }
    p->text = text;
    p->len = len;
    p->pos = 0;
    p->cur.kind = T_END;
    p->cur.start = 0;
    p->cur.len = 0;
    p->prev = p->cur;
    p->has_prev = false;
    p->started = false;
    p->depth = 0;
    p->failed = false;
    p->count = 0;
    p->pool_len = 0;

    advance(p);
    root = parse_or(p);
    if (root != NO_NODE && p->cur.kind != T_END) {
        fail_trailing(p);
    }
    if (p->failed) {
        if (error != NULL) {
            *error = p->error;
        }
        err = WEFT_EPARSE;
        goto out;
    }
    assert(root != NO_NODE && p->count > 0);
    e = expr_from_parser(p, root);
    if (e == NULL) {
        no_memory(error);
        err = WEFT_ENOMEM;
        goto out;
    }
    *out = e;
out:
    weft__free(p);
    return err;
}

void
weft__expr_free(struct expr *e)
{
    weft__free(e);
}

const char *
weft__expr_text(const struct expr *e)
{
    return e != NULL ? e->text : NULL;
}

/* ---- evaluator ------------------------------------------------------------------------ */

typedef enum val_type { V_NULL = 0, V_BOOL, V_INT, V_REAL, V_STRING, V_ARRAY, V_OBJECT } val_type;

/* A value during evaluation: a literal, a JSON value (borrowed) or a computed boolean. */
struct val {
    val_type type;
    bool boolean;
    long long integer;
    double real;
    const char *str;
    size_t len;
    const json_t *json; /* V_ARRAY, V_OBJECT */
};

static struct val
make_val(val_type type)
{
    struct val v;

    memset(&v, 0, sizeof(v));
    v.type = type;
    return v;
}

static struct val
make_bool(bool b)
{
    struct val v = make_val(V_BOOL);

    v.boolean = b;
    return v;
}

static struct val
make_int(long long i)
{
    struct val v = make_val(V_INT);

    v.integer = i;
    return v;
}

static struct val
from_json(const json_t *json)
{
    struct val v = make_val(V_NULL);

    if (json == NULL) {
        return v;
    }
    switch (json_typeof(json)) {
    case JSON_TRUE:
        return make_bool(true);
    case JSON_FALSE:
        return make_bool(false);
    case JSON_INTEGER:
        return make_int((long long)json_integer_value(json));
    case JSON_REAL:
        v.type = V_REAL;
        v.real = json_real_value(json);
        return v;
    case JSON_STRING:
        v.type = V_STRING;
        v.str = json_string_value(json);
        v.len = json_string_length(json);
        return v;
    case JSON_ARRAY:
        v.type = V_ARRAY;
        v.json = json;
        return v;
    case JSON_OBJECT:
        v.type = V_OBJECT;
        v.json = json;
        return v;
    case JSON_NULL:
    default:
        return v;
    }
}

/* The computed `.length` of @p json: see expr.h. */
static struct val
length_of(const json_t *json)
{
    size_t count = 0;

    if (json_is_array(json)) {
        return make_int((long long)json_array_size(json));
    }
    if (json_is_object(json)) {
        return make_int((long long)json_object_size(json));
    }
    if (json_is_string(json)) {
        const char *s = json_string_value(json);
        count = weft__utf8_chars(s, json_string_length(json));
        return make_int((long long)count);
    }
    return make_val(V_NULL);
}

static struct val
resolve(const struct expr *e, const struct node *path, const json_t *root)
{
    const json_t *cur = root;

    for (unsigned short s = path->lhs; s != NO_NODE; s = e->nodes[s].rhs) {
        const struct node *step = &e->nodes[s];
        if (step->kind == N_INDEX) {
            cur = json_is_array(cur) ? json_array_get(cur, step->u.index) : NULL;
        } else {
            const char *name = e->pool + step->u.str.offset;
            const json_t *child = json_is_object(cur) ? json_object_get(cur, name) : NULL;
            if (child == NULL && strcmp(name, "length") == 0) {
                /* A computed length is a number, and a number has no fields or items. */
                return step->rhs == NO_NODE ? length_of(cur) : make_val(V_NULL);
            }
            cur = child;
        }
        if (cur == NULL) {
            return make_val(V_NULL);
        }
    }
    return from_json(cur);
}

static bool
truthy(struct val v)
{
    switch (v.type) {
    case V_BOOL:
        return v.boolean;
    case V_INT:
        return v.integer != 0;
    case V_REAL:
        return v.real != 0.0;
    case V_STRING:
        return v.len > 0;
    case V_ARRAY:
        return json_array_size(v.json) > 0;
    case V_OBJECT:
        return json_object_size(v.json) > 0;
    case V_NULL:
    default:
        return false;
    }
}

static bool
is_number(const struct val *v)
{
    return v->type == V_INT || v->type == V_REAL;
}

static double
as_double(const struct val *v)
{
    return v->type == V_INT ? (double)v->integer : v->real;
}

static bool
apply_order(cmp_op op, int order)
{
    switch (op) {
    case CMP_EQ:
        return order == 0;
    case CMP_NE:
        return order != 0;
    case CMP_LT:
        return order < 0;
    case CMP_LE:
        return order <= 0;
    case CMP_GT:
        return order > 0;
    case CMP_GE:
    default:
        return order >= 0;
    }
}

static bool
compare(cmp_op op, const struct val *a, const struct val *b)
{
    bool equal = false;

    if (is_number(a) && is_number(b)) {
        if (a->type == V_INT && b->type == V_INT) {
            return apply_order(op, (a->integer > b->integer) - (a->integer < b->integer));
        }
        /* JSON has no NaN or infinity, so doubles are totally ordered here. */
        return apply_order(op, (as_double(a) > as_double(b)) - (as_double(a) < as_double(b)));
    }
    if (a->type != b->type) {
        return op == CMP_NE;
    }
    switch (a->type) {
    case V_STRING: {
        int order = memcmp(a->str, b->str, a->len < b->len ? a->len : b->len);
        if (order == 0) {
            order = (a->len > b->len) - (a->len < b->len);
        }
        return apply_order(op, order);
    }
    case V_BOOL:
        equal = a->boolean == b->boolean;
        break;
    case V_ARRAY:
    case V_OBJECT:
        equal = json_equal(a->json, b->json) != 0;
        break;
    case V_NULL:
    default:
        equal = true;
        break;
    }
    /* These types have equality but no order. */
    return op == CMP_EQ ? equal : op == CMP_NE ? !equal : false;
}

static struct val
eval_node(const struct expr *e, unsigned short index, const json_t *root)
{
    const struct node *n = &e->nodes[index];
    struct val v = make_val(V_NULL);

    switch ((node_kind)n->kind) {
    case N_TRUE:
        return make_bool(true);
    case N_FALSE:
        return make_bool(false);
    case N_INT:
        return make_int(n->u.integer);
    case N_REAL:
        v.type = V_REAL;
        v.real = n->u.real;
        return v;
    case N_STRING:
        v.type = V_STRING;
        v.str = e->pool + n->u.str.offset;
        v.len = n->u.str.length;
        return v;
    case N_PATH:
        return resolve(e, n, root);
    case N_NOT:
        return make_bool(!truthy(eval_node(e, n->lhs, root)));
    case N_AND:
        return make_bool(truthy(eval_node(e, n->lhs, root)) && truthy(eval_node(e, n->rhs, root)));
    case N_OR:
        return make_bool(truthy(eval_node(e, n->lhs, root)) || truthy(eval_node(e, n->rhs, root)));
    case N_CMP: {
        struct val a = eval_node(e, n->lhs, root);
        struct val b = eval_node(e, n->rhs, root);
        return make_bool(compare((cmp_op)n->op, &a, &b));
    }
    case N_NULL:
    case N_KEY:
    case N_INDEX:
    default:
        return v;
    }
}

weft_err
weft__expr_eval(const struct expr *e, const json_t *root, bool *result)
{
    if (e == NULL || root == NULL || result == NULL) {
        return WEFT_EINVAL;
    }
    *result = truthy(eval_node(e, e->root, root));
    return WEFT_OK;
}
