/* tests/runtime/test_json_write.c - compact JSON text (runtime/common/json_write.c): the same
 * text as json_dumps(JSON_COMPACT) for an LLM exchange and for every escape, reals that read
 * back equal, a limit on nesting, and out of memory reported as NULL. */
#include "support/failalloc.h"
#include "support/weft_test.h"

#include "runtime/common/json_write.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

/* The text jansson writes and ours, compared. */
static void
assert_same_as_jansson(const json_t *v)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = weft__json_compact(v);

    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(want);
    weft__free(got);
}

static void
test_json_write_an_exchange_reads_as_json_dumps_writes_it(void **state)
{
    json_t *v =
        json_pack("{s:s, s:s, s:{s:i, s:i}, s:{s:s, s:[{s:s, s:s}, {s:s, s:s}]}, s:b,"
                  " s:b, s:n, s:[], s:{}}",
                  "provider", "scripted", "content", "result 7", "usage", "input_tokens", 100,
                  "output_tokens", -20, "request", "model", "bench-model", "messages", "role",
                  "system", "content", "You are a helpful agent.", "role", "user", "content",
                  "Task: step 8\n\nResult of s7: \"ok\"", "t", 1, "f", 0, "n", "a", "o");

    (void)state;
    assert_non_null(v);
    assert_same_as_jansson(v);
    json_decref(v);
}

static void
test_json_write_escapes_as_jansson_does(void **state)
{
    static const char text[] = "quote \" backslash \\ slash / \b\f\n\r\t \x01\x1f\x7f é 中 😀";
    json_t *v = json_string(text);
    json_t *keyed = json_pack("{s:s}", "k\"\n\x02", "v");

    (void)state;
    assert_non_null(v);
    assert_same_as_jansson(v);
    assert_same_as_jansson(keyed);
    json_decref(v);
    json_decref(keyed);
    /* A string with a NUL inside (json_stringn) keeps it, escaped. */
    v = json_stringn("a\0b", 3);
    assert_same_as_jansson(v);
    json_decref(v);
}

static void
test_json_write_reals_read_back_equal(void **state)
{
    static const double reals[] = {0.1, -2.5, 1e300, 3.0, 1.0 / 3.0, -0.0};
    json_error_t jerr;

    (void)state;
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
        json_t *v = json_real(reals[i]);
        char *text = weft__json_compact(v);
        json_t *back = json_loads(text, JSON_DECODE_ANY, &jerr);

        assert_non_null(back);
        assert_true(json_is_real(back));
        assert_true(json_real_value(back) == reals[i]);
        json_decref(back);
        weft__free(text);
        json_decref(v);
    }
    assert_null(weft__json_compact(NULL));
}

static void
test_json_write_refuses_deep_nesting(void **state)
{
    json_t *root = json_array();
    json_t *cur = root;
    char *text = NULL;

    (void)state;
    for (int i = 0; i < 2100; i++) {
        json_t *inner = json_array();
        json_array_append_new(cur, inner);
        cur = inner;
    }
    text = weft__json_compact(root);
    assert_null(text);
    json_decref(root);
}

static void
test_json_write_out_of_memory_is_null(void **state)
{
    json_t *v = json_pack("{s:s, s:[s, s, i]}", "a", "some text", "b", "x", "y", 3);
    bool is_done = false;

    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (int budget = 0; !is_done && budget < 100; budget++) {
        char *text = NULL;
        failalloc_budget = budget;
        text = weft__json_compact(v);
        failalloc_budget = -1;
        is_done = text != NULL;
        weft__free(text);
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    json_decref(v);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_write_an_exchange_reads_as_json_dumps_writes_it),
        cmocka_unit_test(test_json_write_escapes_as_jansson_does),
        cmocka_unit_test(test_json_write_reals_read_back_equal),
        cmocka_unit_test(test_json_write_refuses_deep_nesting),
        cmocka_unit_test(test_json_write_out_of_memory_is_null),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
