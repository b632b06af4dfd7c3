/* runtime/workflow/expr.h - a small, safe expression language for flow loop `break_condition`s,
 * e.g.
 *
 *     score >= 0.9 and not needs_revision
 *     result.issues.length == 0 or status == "approved"
 *
 * An expression is parsed once, when the workflow is loaded (errors carry the 1-based character
 * position of the offending token), and then evaluated any number of times against a node's
 * JSON result. Evaluation cannot fail: a missing field is null and a comparison between values
 * of different types is false (see the rules below).
 *
 * Grammar (keywords are case-sensitive; `||`, `&&` and `!` are synonyms of or, and, not):
 *
 *     expr       := and_expr (('or' | '||') and_expr)*
 *     and_expr   := unary (('and' | '&&') unary)*
 *     unary      := ('not' | '!') unary | comparison
 *     comparison := primary (('==' | '!=' | '<' | '<=' | '>' | '>=') primary)?   no chaining
 *     primary    := '(' expr ')' | number | string | 'true' | 'false' | 'null' | path
 *     path       := ident ('.' name | '[' digits ']')*        ident: [A-Za-z_][A-Za-z0-9_]*
 *     number     := '-'? digits ('.' digits)? ([eE] [+-]? digits)?
 *     string     := "..." or '...' with the escapes \" \' \\ \n \t
 *
 * After a '.', keywords are ordinary names (`a.not` looks up the key "not").
 *
 * Paths look up keys of the root object, `[N]` indexes an array. The name `length` is special
 * only when the value it is applied to has no real key of that name: then it gives an array's
 * size, a string's length in characters (UTF-8 code points) or an object's key count, and null
 * for anything else. A real "length" key always wins. Anything that does not resolve (missing
 * key, index out of range, a field of a non-object) is null.
 *
 * Truthiness of a value: false for null, false, 0, "", [] and {}; true otherwise. The result
 * of an expression is the truthiness of its value.
 *
 * Comparisons: numbers compare numerically (integers exactly, mixed integer/real as doubles);
 * strings compare bytewise with all six operators; booleans, null, arrays and objects support
 * only == and != (arrays and objects compare by deep equality); an ordering between them is
 * false. Between values of different types == is false, != is true and every ordering is false.
 *
 * Limits: at most EXPR_MAX_TEXT bytes of text, EXPR_MAX_NODES syntax nodes (each literal,
 * operator, path and path step is one) and EXPR_MAX_DEPTH nested parentheses or `not`s.
 *
 * Thread-safety: a parsed expression is immutable; any number of threads may evaluate it at
 * once (against JSON values nobody is modifying).
 */
#ifndef WEFT_RUNTIME_EXPR_H
#define WEFT_RUNTIME_EXPR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <weft/common.h>

#define EXPR_MAX_TEXT  4096 /* bytes of source text */
#define EXPR_MAX_NODES 256  /* syntax nodes */
#define EXPR_MAX_DEPTH 32   /* nested parentheses and negations */

struct expr; /* a parsed expression; immutable, thread-safe to evaluate */

/* Why a parse failed. */
struct expr_error {
    size_t position; /* 1-based character (not byte) offset of the offending token; 0 for ENOMEM */
    char message[160]; /* complete, e.g. "position 12: expected a value after 'and'" */
};

/** Parse @p text.
 * @param text the expression (NUL-terminated, at most EXPR_MAX_TEXT bytes)
 * @param out receives the parsed expression; NULL on failure
 * @param error optional; filled when the parse fails
 * @return WEFT_OK, WEFT_EINVAL (NULL @p text or @p out), WEFT_EPARSE (@p error filled),
 * WEFT_ENOMEM.
 * Ownership: copies @p text; caller owns *out (release with weft__expr_free()).
 * Thread notes: reentrant. */
weft_err weft__expr_parse(const char *text, struct expr **out, struct expr_error *error);

/** Release @p e. NULL is a no-op. */
void weft__expr_free(struct expr *e);

/** Evaluate @p e against @p root (normally a JSON object: paths look up keys in it).
 * @param e a parsed expression
 * @param root the JSON value field paths start from
 * @param result receives the truthiness of the expression's value
 * @return WEFT_OK, or WEFT_EINVAL for a NULL argument. Evaluation never fails otherwise.
 * Ownership: borrows @p e and @p root for the call.
 * Thread notes: safe to call concurrently on the same expression. */
weft_err weft__expr_eval(const struct expr *e, const json_t *root, bool *result);

/** The source text of @p e.
 * Ownership: returns borrowed (valid until weft__expr_free(@p e)); NULL when @p e is NULL. */
const char *weft__expr_text(const struct expr *e);

#endif /* WEFT_RUNTIME_EXPR_H */
