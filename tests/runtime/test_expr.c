/* tests/runtime/test_expr.c - the break-condition expression language: a table of expressions
 * evaluated against one sample document (every operator, literal kind, precedence level, path
 * form, missing fields and mixed-type comparisons), a table of invalid expressions with the
 * exact error position and message, the limits, out-of-memory, and every prefix and many
 * single-byte mutations of valid expressions (which must parse or fail cleanly, never crash). */
#include "runtime/workflow/expr.h"
#include "support/failalloc.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sample =
    "{"
    "  \"score\": 0.93, \"threshold\": 0.9, \"count\": 3, \"zero\": 0, \"neg\": -2,"
    "  \"real_three\": 3.0, \"big\": 9007199254740993, \"big_minus_one\": 9007199254740992,"
    "  \"t\": true, \"f\": false, \"needs_revision\": false, \"approved\": true,"
    "  \"status\": \"approved\", \"empty\": \"\", \"nothing\": null, \"name\": \"h\\u00e9llo\","
    "  \"zero_real\": 0.0, \"quote\": \"it's \\\"q\\\"\", \"nl\": \"a\\nb\", \"tab\": \"a\\tb\","
    "  \"back\": \"a\\\\b\", \"result\": {\"issues\": [], \"summary\": \"ok\","
    "    \"items\": [{\"score\": 0.5, \"tags\": [\"a\", \"b\"]}, {\"score\": 0.95}]},"
    "  \"items\": [{\"score\": 0.8}, {\"score\": 0.2}], \"matrix\": [[1, 2], [3, 4]],"
    "  \"obj\": {\"a\": 1, \"b\": 2}, \"obj2\": {\"b\": 2, \"a\": 1}, \"emptyobj\": {},"
    "  \"emptyarr\": [], \"arr\": [1, 2], \"arr2\": [1, 2], \"with_len\": {\"length\": 42, \"x\": "
    "1},"
    "  \"kw\": {\"and\": 1, \"not\": true, \"null\": null}, \"_under_1\": 5"
    "}";

static json_t *
load_sample(void)
{
    json_error_t jerr;
    json_t *doc = json_loads(sample, 0, &jerr);

    if (doc == NULL) {
        fail_msg("sample JSON: %s at line %d", jerr.text, jerr.line);
    }
    return doc;
}

/* Parse and evaluate @p text against @p doc; fails the test on a parse error. */
static bool
eval_text(const char *text, const json_t *doc)
{
    struct expr *e = NULL;
    struct expr_error error;
    bool result = false;
    weft_err err = weft__expr_parse(text, &e, &error);

    if (err != WEFT_OK) {
        fail_msg("weft__expr_parse(\"%s\") returned %s: %s", text, weft_strerror(err),
                 error.message);
    }
    assert_string_equal(weft__expr_text(e), text);
    assert_weft_ok(weft__expr_eval(e, doc, &result));
    weft__expr_free(e);
    return result;
}

struct eval_case {
    const char *text;
    bool expected;
};

static void
run_eval_cases(const struct eval_case *cases, size_t count)
{
    json_t *doc = load_sample();

    for (size_t i = 0; i < count; i++) {
        bool got = eval_text(cases[i].text, doc);
        if (got != cases[i].expected) {
            json_decref(doc);
            fail_msg("\"%s\" evaluated to %s, expected %s", cases[i].text, got ? "true" : "false",
                     cases[i].expected ? "true" : "false");
        }
    }
    json_decref(doc);
}

#define RUN(cases) run_eval_cases((cases), sizeof(cases) / sizeof((cases)[0]))

static void
test_expr_logic_operators_and_precedence(void **state)
{
    static const struct eval_case cases[] = {
        {"t", true},
        {"f", false},
        {"t and t", true},
        {"t and f", false},
        {"f or t", true},
        {"f or f", false},
        {"not f", true},
        {"not t", false},
        {"t && t", true},
        {"t&&f", false},
        {"f || t", true},
        {"f||f", false},
        {"!f", true},
        {"!t", false},
        {"!!t", true},
        {"not not t", true},
        {"not !f", false},
        /* not binds tighter than and, and tighter than or. */
        {"not t and f or t", true}, /* ((not t) and f) or t */
        {"not f and f", false},     /* (not f) and f; not (f and f) would be true */
        {"t or f and f", true},     /* t or (f and f); (t or f) and f would be false */
        {"f and f or t", true},     /* (f and f) or t */
        {"(t or f) and f", false},  /* parentheses override */
        {"not (f or t)", false},    /* not of a parenthesised group */
        /* comparisons bind tighter than not: not (zero == 1) */
        {"not zero == 1", true},
        {"not count == 3", false},
        {"(count == 3) == true", true}, /* a boolean subexpression is a value */
        {"(count == 3) != t", false},
        /* short-circuit: the right side never matters once the left decides */
        {"f and missing.deep[3].x == 1", false},
        {"t or missing", true},
        {"score >= 0.9 and not needs_revision", true},
        {"result.issues.length == 0 or status == \"approved\"", true},
        {"  \t\n score\n>=\r0.9  ", true},
        {"((((t))))", true},
    };
    (void)state;
    RUN(cases);
}

static void
test_expr_comparisons_follow_the_type_rules(void **state)
{
    static const struct eval_case cases[] = {
        /* numbers: all six operators, int/real mixed */
        {"count == 3", true},
        {"count != 3", false},
        {"count < 4", true},
        {"count <= 3", true},
        {"count > 3", false},
        {"count >= 3", true},
        {"score > threshold", true},
        {"score < threshold", false},
        {"count == 3.0", true},
        {"real_three == 3", true},
        {"real_three == count", true},
        {"count < 3.5", true},
        {"neg == -2", true},
        {"neg < -1.5", true},
        {"-2 == neg", true},
        {"zero == -0", true},
        {"zero == 0.0", true},
        {"1e3 == 1000", true},
        {"2.5E-1 == 0.25", true},
        {"1e+2 > 99", true},
        {"score == 0.93", true},
        /* integers compare exactly, beyond double precision */
        {"big > big_minus_one", true},
        {"big == 9007199254740993", true},
        {"big == 9007199254740992", false},
        {"99999999999999999999 > big", true}, /* too large for an integer: a double */
        /* strings: bytewise, all six operators */
        {"status == \"approved\"", true},
        {"status == 'approved'", true},
        {"status != 'approved'", false},
        {"status < 'b'", true},
        {"status <= 'approved'", true},
        {"status > 'approve'", true},
        {"status >= 'approvec'", true},
        {"status >= 'approvee'", false},
        {"'abc' < 'abd'", true},
        {"'ab' < 'abc'", true},
        {"'B' < 'a'", true},
        {"empty == ''", true},
        {"name == 'h\xc3\xa9llo'", true},
        {"quote == 'it\\'s \"q\"'", true},
        {"quote == \"it's \\\"q\\\"\"", true},
        {"nl == 'a\\nb'", true},
        {"tab == \"a\\tb\"", true},
        {"back == 'a\\\\b'", true},
        /* booleans and null: equality only */
        {"t == true", true},
        {"t != false", true},
        {"needs_revision == false", true},
        {"true == true", true},
        {"t < true", false},
        {"f <= true", false},
        {"t >= true", false},
        {"nothing == null", true},
        {"nothing != null", false},
        {"missing == null", true},
        {"null == null", true},
        {"null <= null", false},
        {"null >= nothing", false},
        /* arrays and objects: deep equality, no order */
        {"arr == arr2", true},
        {"arr != arr2", false},
        {"obj == obj2", true},
        {"obj == arr", false},
        {"arr <= arr2", false},
        {"result.issues == emptyarr", true},
        {"emptyobj != obj", true},
        /* different types: == false, != true, orderings false */
        {"count == '3'", false},
        {"count != '3'", true},
        {"count < '4'", false},
        {"count > '2'", false},
        {"status == true", false},
        {"t == 1", false},
        {"f == 0", false},
        {"nothing == 0", false},
        {"nothing != 0", true},
        {"nothing == false", false},
        {"nothing < 1", false},
        {"missing == ''", false},
        {"missing > 0", false},
        {"missing <= 0", false},
        {"arr == 2", false},
        {"emptyarr == emptyobj", false},
    };
    (void)state;
    RUN(cases);
}

static void
test_expr_literals_and_values_have_truthiness(void **state)
{
    static const struct eval_case cases[] = {
        {"true", true},      {"false", false},
        {"null", false},     {"0", false},
        {"-0", false},       {"0.0", false},
        {"1", true},         {"-1", true},
        {"0.001", true},     {"1e-300", true},
        {"''", false},       {"\"\"", false},
        {"'x'", true},       {"' '", true},
        {"'0'", true},       {"count", true},
        {"zero", false},     {"zero_real", false},
        {"score", true},     {"neg", true},
        {"status", true},    {"empty", false},
        {"nothing", false},  {"missing", false},
        {"emptyarr", false}, {"arr", true},
        {"emptyobj", false}, {"obj", true},
        {"result", true},    {"result.issues", false},
        {"_under_1", true},  {"needs_revision", false},
    };
    (void)state;
    RUN(cases);
}

static void
test_expr_paths_resolve_keys_indexes_and_length(void **state)
{
    static const struct eval_case cases[] = {
        {"result.summary == 'ok'", true},
        {"result.items[0].score == 0.5", true},
        {"result.items[1].score > 0.9", true},
        {"result.items[0].tags[1] == 'b'", true},
        {"result.items[0].tags.length == 2", true},
        {"items[0].score == 0.8", true},
        {"items[1].score < items[0].score", true},
        {"matrix[1][0] == 3", true},
        {"matrix[0][1] == 2", true},
        {"matrix.length == 2 and matrix[1].length == 2", true},
        {"items [ 0 ] . score == 0.8", true}, /* whitespace between path parts */
        /* .length: array size, string characters (not bytes), object key count */
        {"items.length == 2", true},
        {"emptyarr.length == 0", true},
        {"status.length == 8", true},
        {"name.length == 5", true}, /* "héllo": 5 characters, 6 bytes */
        {"empty.length == 0", true},
        {"obj.length == 2", true},
        {"emptyobj.length == 0", true},
        {"result.issues.length == 0", true},
        /* a real "length" key wins */
        {"with_len.length == 42", true},
        {"with_len.length == 2", false},
        /* .length of something without a length is null */
        {"count.length == null", true},
        {"nothing.length == null", true},
        {"missing.length == null", true},
        {"t.length", false},
        /* a computed length is a number: it has no fields or items */
        {"items.length.x == null", true},
        {"items.length[0] == null", true},
        /* keywords are ordinary names after a dot */
        {"kw.and == 1", true},
        {"kw.not", true},
        {"kw.null == null", true},
        {"kw.true == null", true},
        /* anything unresolved is null */
        {"missing == null", true},
        {"missing.x.y == null", true},
        {"items[2] == null", true},
        {"items[999999999] == null", true},
        {"obj[0] == null", true},
        {"arr.x == null", true},
        {"status.x == null", true},
        {"status[0] == null", true},
        {"count.x == null", true},
        {"Score == null", true}, /* keys are case-sensitive */
        {"True == null", true},  /* not a keyword: a field named True */
    };
    (void)state;
    RUN(cases);
}

static void
test_expr_eval_on_non_object_root_gives_null_fields(void **state)
{
    struct expr *e = NULL;
    json_t *arr = json_pack("[i, i]", 1, 2);
    bool result = true;

    (void)state;
    assert_weft_ok(weft__expr_parse("length == 2 and x == null", &e, NULL));
    assert_weft_ok(weft__expr_eval(e, arr, &result));
    assert_true(result); /* `length` applies to the root itself */
    weft__expr_free(e);
    assert_weft_ok(weft__expr_parse("x", &e, NULL));
    assert_weft_ok(weft__expr_eval(e, json_null(), &result));
    assert_false(result);
    weft__expr_free(e);
    json_decref(arr);
}

static void
test_expr_rejects_null_arguments(void **state)
{
    struct expr *e = NULL;
    struct expr *sentinel = (struct expr *)&e;
    bool result = false;
    json_t *doc = json_object();

    (void)state;
    assert_weft_err(weft__expr_parse(NULL, &e, NULL), WEFT_EINVAL);
    assert_weft_err(weft__expr_parse("a", NULL, NULL), WEFT_EINVAL);
    e = sentinel;
    assert_weft_err(weft__expr_parse(NULL, &e, NULL), WEFT_EINVAL);
    assert_null(e);
    assert_weft_ok(weft__expr_parse("a", &e, NULL));
    assert_weft_err(weft__expr_eval(NULL, doc, &result), WEFT_EINVAL);
    assert_weft_err(weft__expr_eval(e, NULL, &result), WEFT_EINVAL);
    assert_weft_err(weft__expr_eval(e, doc, NULL), WEFT_EINVAL);
    assert_null(weft__expr_text(NULL));
    weft__expr_free(e);
    weft__expr_free(NULL);
    json_decref(doc);
}

struct error_case {
    const char *text;
    size_t position;
    const char *message; /* a substring of the message */
};

static const struct error_case error_cases[] = {
    {"", 1, "empty expression"},
    {"   ", 4, "empty expression"},
    {"a and", 6, "expected a value after 'and'"},
    {"score >= 0.9 and", 17, "expected a value after 'and'"},
    {"a &&", 5, "expected a value after '&&'"},
    {"a or )", 6, "expected a value after 'or', found ')'"},
    {"not", 4, "expected a value after 'not'"},
    {"!", 2, "expected a value after '!'"},
    {"a ==", 5, "expected a value after '=='"},
    {"a == == b", 6, "expected a value after '==', found '=='"},
    {"a <= and", 6, "expected a value after '<='"},
    {"()", 2, "expected a value after '('"},
    {"and b", 1, "expected a value, found 'and'"},
    {")", 1, "expected a value, found ')'"},
    {".a", 1, "expected a value, found '.'"},
    {"]", 1, "expected a value, found ']'"},
    {"a == \"abc", 6, "unterminated string"},
    {"'abc", 1, "unterminated string"},
    {"a == 'abc\\", 6, "unterminated string"},
    {"a == 'abc\\'", 6, "unterminated string"},
    {"a\n== \"x", 6, "unterminated string"},
    {"a == 'x\\q'", 8, "unknown escape '\\q'"},
    {"a == \"\\u0041\"", 7, "unknown escape '\\u'"},
    {"(a and b))", 10, "unexpected ')'"},
    {"a)", 2, "unexpected ')'"},
    {"a = 1", 3, "unknown operator '='; use '=='"},
    {"=", 1, "unknown operator '='"},
    {"a & b", 3, "unknown operator '&'; use '&&' or 'and'"},
    {"a | b", 3, "unknown operator '|'; use '||' or 'or'"},
    {"a <> b", 3, "unknown operator '<>'; use '!='"},
    {"a b", 3, "trailing input 'b'"},
    {"true false", 6, "trailing input 'false'"},
    {"a.b c", 5, "trailing input 'c'"},
    {"a == 1 2", 8, "trailing input"},
    {"a == 1 (", 8, "trailing input '('"},
    {"a AND b", 3, "keywords are lowercase"},
    {"a Or b", 3, "keywords are lowercase"},
    {"a < b < c", 7, "cannot be chained"},
    {"1 == 1 != t", 8, "cannot be chained"},
    {"(a and b", 9, "expected ')' to close the '(' at position 1, found end of input"},
    {"x or (a b)", 9, "expected ')' to close the '(' at position 6, found 'b'"},
    {"a == -b", 6, "'-' must be followed by a digit"},
    {"-", 1, "'-' must be followed by a digit"},
    {"a == 1.", 6, "malformed number '1.'"},
    {"a == 1e", 6, "malformed number '1e'"},
    {"a == 1e+", 6, "malformed number"},
    {"a == 12ab", 6, "malformed number '12ab'"},
    {"a == 1.2.3", 6, "malformed number '1.2.3'"},
    {"a == .5", 6, "expected a value after '==', found '.'"},
    {"a == 1e999", 6, "number out of range"},
    {"a == -1e999", 6, "number out of range"},
    {"a.", 3, "expected a field name after '.'"},
    {"a.5", 3, "expected a field name after '.'"},
    {"a.&&", 3, "expected a field name after '.'"},
    {"a..b", 3, "expected a field name after '.'"},
    {"a[", 3, "array index must be a non-negative integer"},
    {"a[-1]", 3, "array index must be a non-negative integer"},
    {"a[1.5]", 3, "array index must be a non-negative integer"},
    {"a[1e2]", 3, "array index must be a non-negative integer"},
    {"a[x]", 3, "array index must be a non-negative integer"},
    {"a[]", 3, "array index must be a non-negative integer"},
    {"a[1", 4, "expected ']' after the array index"},
    {"a[1 2]", 5, "expected ']' after the array index"},
    {"a[99999999999]", 3, "array index too large"},
    {"a[1]]", 5, "trailing input ']'"},
    {"[0]", 1, "expected a value, found '['"},
    {"1[0]", 2, "trailing input '['"},
    {"'s'.length", 4, "trailing input '.'"},
    {"#", 1, "unexpected character '#'"},
    {"a == $x", 6, "unexpected character '$'"},
    {"a == \x01", 6, "unexpected byte 0x01"},
    /* positions count characters, not bytes */
    {"a == \xc3\xa9", 6, "unexpected byte 0xC3"},
    {"'\xc3\xa9' == x y", 10, "trailing input 'y'"},
    {"name == '\xe2\x82\xac\xe2\x82\xac' or", 16, "expected a value after 'or'"},
};

static void
test_expr_parse_errors_name_position_and_problem(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
        const struct error_case *c = &error_cases[i];
        struct expr *e = (struct expr *)&e; /* must be reset to NULL */
        struct expr_error error;
        char prefix[32];
        weft_err err = WEFT_OK;

        memset(&error, 0x5a, sizeof(error));
        err = weft__expr_parse(c->text, &e, &error);
        if (err != WEFT_EPARSE) {
            fail_msg("\"%s\": expected WEFT_EPARSE, got %s", c->text, weft_strerror(err));
        }
        assert_null(e);
        if (error.position != c->position || strstr(error.message, c->message) == NULL) {
            fail_msg("\"%s\": got \"%s\" (position %zu), expected position %zu and \"%s\"", c->text,
                     error.message, error.position, c->position, c->message);
        }
        snprintf(prefix, sizeof(prefix), "position %zu: ", c->position);
        if (strncmp(error.message, prefix, strlen(prefix)) != 0) {
            fail_msg("\"%s\": message \"%s\" lacks the prefix \"%s\"", c->text, error.message,
                     prefix);
        }
        /* The error is optional. */
        assert_weft_err(weft__expr_parse(c->text, &e, NULL), WEFT_EPARSE);
        assert_null(e);
    }
}

/* A string of @p n copies of @p unit between @p head and @p tail (caller frees). */
static char *
repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t len = strlen(head) + strlen(unit) * n + strlen(tail);
    char *s = malloc(len + 1);

    assert_non_null(s);
    strcpy(s, head);
    for (size_t i = 0; i < n; i++) {
        strcat(s, unit);
    }
    strcat(s, tail);
    return s;
}

static void
expect_parse_error(const char *text, size_t position, const char *message)
{
    struct expr *e = NULL;
    struct expr_error error;

    assert_weft_err(weft__expr_parse(text, &e, &error), WEFT_EPARSE);
    assert_null(e);
    if (error.position != position || strstr(error.message, message) == NULL) {
        fail_msg("got \"%s\" (position %zu), expected position %zu and \"%s\"", error.message,
                 error.position, position, message);
    }
}

static void
expect_result(const char *text, bool expected)
{
    json_t *doc = load_sample();

    assert_int_equal(eval_text(text, doc), expected);
    json_decref(doc);
}

static void
test_expr_nesting_is_limited_to_32(void **state)
{
    char *s = NULL;

    (void)state;
    s = repeat("", "(", EXPR_MAX_DEPTH, "t");
    {
        char *closed = repeat(s, ")", EXPR_MAX_DEPTH, "");
        expect_result(closed, true);
        free(closed);
    }
    free(s);
    s = repeat("", "(", EXPR_MAX_DEPTH + 1, "t)");
    expect_parse_error(s, EXPR_MAX_DEPTH + 1, "nesting deeper than 32 levels");
    free(s);

    s = repeat("", "not ", EXPR_MAX_DEPTH, "f"); /* 32 negations of false: false */
    expect_result(s, false);
    free(s);
    s = repeat("", "not ", EXPR_MAX_DEPTH + 1, "f");
    expect_parse_error(s, 4 * EXPR_MAX_DEPTH + 1, "nesting deeper than 32 levels");
    free(s);
    s = repeat("", "!", EXPR_MAX_DEPTH + 1, "f");
    expect_parse_error(s, EXPR_MAX_DEPTH + 1, "nesting deeper");
    free(s);

    /* Parentheses and negations count together; siblings do not add up. */
    s = repeat("", "(not ", EXPR_MAX_DEPTH / 2, "t");
    {
        char *closed = repeat(s, ")", EXPR_MAX_DEPTH / 2, " and (((t)))");
        expect_result(closed, true); /* an even number of negations */
        free(closed);
    }
    free(s);
    s = repeat("", "(not ", EXPR_MAX_DEPTH / 2, "(t)");
    expect_parse_error(s, 5 * (EXPR_MAX_DEPTH / 2) + 1, "nesting deeper");
    free(s);
}

static void
test_expr_nodes_are_limited_to_256(void **state)
{
    char *s = NULL;

    (void)state;
    /* 128 literals and 127 'or's and one 'not': exactly 256 nodes. */
    s = repeat("not (", "0 or ", EXPR_MAX_NODES / 2 - 1, "0)");
    expect_result(s, true);
    free(s);
    /* 129 literals: the 128th 'or' (at 5 * 127 + 3) would be node 257. */
    s = repeat("", "1 or ", EXPR_MAX_NODES / 2, "1");
    expect_parse_error(s, 5 * (EXPR_MAX_NODES / 2 - 1) + 3, "more than 256 nodes");
    free(s);
    /* Path steps count too: a path of 256 keys needs 257 nodes. */
    s = repeat("a", ".a", EXPR_MAX_NODES - 2, "");
    expect_result(s, false);
    free(s);
    s = repeat("a", ".a", EXPR_MAX_NODES - 1, "");
    expect_parse_error(s, 2 * (EXPR_MAX_NODES - 1) + 1, "more than 256 nodes");
    free(s);
    s = repeat("a", "[0]", EXPR_MAX_NODES - 1, "");
    expect_parse_error(s, 3 * (EXPR_MAX_NODES - 1), "more than 256 nodes");
    free(s);
}

static void
test_expr_text_is_limited_to_4096_bytes(void **state)
{
    char *s = NULL;

    (void)state;
    s = repeat("t", " ", EXPR_MAX_TEXT - 1, "");
    expect_result(s, true);
    free(s);
    s = repeat("t", " ", EXPR_MAX_TEXT, "");
    expect_parse_error(s, EXPR_MAX_TEXT + 1, "longer than 4096 bytes");
    free(s);
    /* A long string literal fills the pool to its bound. */
    s = repeat("'", "x", EXPR_MAX_TEXT - 2, "'");
    expect_result(s, true);
    free(s);
    /* Many short names: each takes its bytes plus a NUL in the pool. */
    s = repeat("a", ".a", EXPR_MAX_NODES - 2, "");
    expect_result(s, false);
    free(s);
    /* A long number literal still converts. */
    s = repeat("1.", "0", EXPR_MAX_TEXT - 10, " == 1");
    expect_result(s, true);
    free(s);
    s = repeat("1", "0", 300, " > big"); /* a double: too large for an integer */
    expect_result(s, true);
    free(s);
}

static void
test_expr_parse_survives_out_of_memory(void **state)
{
    static const char *const text = "score >= 0.9 and not needs_revision or "
                                    "result.items[1].tags.length == 0 and status == 'approved'";
    json_t *doc = load_sample();
    bool is_done = false;
    long failures = 0;

    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 50 && !is_done; budget++) {
        struct expr *e = (struct expr *)&e;
        struct expr_error error;
        bool result = false;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__expr_parse(text, &e, &error);
        failalloc_budget = -1;
        if (err == WEFT_ENOMEM) {
            assert_null(e);
            assert_int_equal(error.position, 0);
            assert_string_equal(error.message, "out of memory");
            failures++;
            continue;
        }
        assert_weft_ok(err);
        assert_weft_ok(weft__expr_eval(e, doc, &result));
        assert_true(result);
        weft__expr_free(e);
        is_done = true;
    }
    weft_set_allocator(NULL, NULL, NULL);
    json_decref(doc);
    assert_true(is_done);
    assert_true(failures >= 2); /* the scratch parser and the final block */
}

/* Parse @p text (which may be invalid); if it parses, evaluate it. Never crashes. */
static void
parse_anything(const char *text, const json_t *doc)
{
    struct expr *e = NULL;
    struct expr_error error;
    weft_err err = weft__expr_parse(text, &e, &error);

    if (err == WEFT_OK) {
        bool result = false;
        assert_non_null(e);
        assert_weft_ok(weft__expr_eval(e, doc, &result));
        weft__expr_free(e);
        return;
    }
    assert_int_equal(err, WEFT_EPARSE);
    assert_null(e);
    assert_true(error.position >= 1 && error.position <= strlen(text) + 1);
    assert_true(strncmp(error.message, "position ", 9) == 0);
    assert_non_null(memchr(error.message, '\0', sizeof(error.message)));
}

static void
test_expr_every_prefix_and_mutation_fails_cleanly(void **state)
{
    static const char *const texts[] = {
        "score >= 0.9 and not needs_revision",
        "result.issues.length == 0 or status == \"approved\"",
        "(items[1].score < -1.5e-3 || !kw.not) && name != 'h\\'\\n\\t\\\\\xc3\xa9'",
        "matrix[0][1] <= 2 and (t != null or f == false) and with_len.length >= 42",
    };
    static const char mutations[] = "()[].!=<>&|'\"\\-0e9a _\x80";
    json_t *doc = load_sample();
    char buf[256];

    (void)state;
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        size_t len = strlen(texts[t]);
        assert_true(len < sizeof(buf));
        for (size_t n = 0; n <= len; n++) {
            memcpy(buf, texts[t], n);
            buf[n] = '\0';
            parse_anything(buf, doc);
        }
        for (size_t i = 0; i < len; i++) {
            for (size_t m = 0; m + 1 < sizeof(mutations); m++) {
                memcpy(buf, texts[t], len + 1);
                buf[i] = mutations[m];
                parse_anything(buf, doc);
                /* and the same mutation cut short right after it */
                buf[i + 1] = '\0';
                parse_anything(buf, doc);
            }
        }
    }
    json_decref(doc);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expr_logic_operators_and_precedence),
        cmocka_unit_test(test_expr_comparisons_follow_the_type_rules),
        cmocka_unit_test(test_expr_literals_and_values_have_truthiness),
        cmocka_unit_test(test_expr_paths_resolve_keys_indexes_and_length),
        cmocka_unit_test(test_expr_eval_on_non_object_root_gives_null_fields),
        cmocka_unit_test(test_expr_rejects_null_arguments),
        cmocka_unit_test(test_expr_parse_errors_name_position_and_problem),
        cmocka_unit_test(test_expr_nesting_is_limited_to_32),
        cmocka_unit_test(test_expr_nodes_are_limited_to_256),
        cmocka_unit_test(test_expr_text_is_limited_to_4096_bytes),
        cmocka_unit_test(test_expr_parse_survives_out_of_memory),
        cmocka_unit_test(test_expr_every_prefix_and_mutation_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
