/* tests/base/test_utf8.c - the one UTF-8 implementation: well-formedness per Unicode table 3-7,
 * maximal invalid subparts, cutting on a character boundary, completing text a cap cut short,
 * counting characters and repairing invalid text. */
#include "base/buf.h"
#include "base/utf8.h"
#include "support/weft_test.h"

#include <string.h>

static size_t
seq(const char *s, size_t avail, bool *is_valid)
{
    return weft__utf8_seq((const uint8_t *)s, avail, is_valid);
}

static void
test_seq_well_formed_and_maximal_subparts(void **state)
{
    bool ok = false;

    (void)state;
    assert_int_equal(seq("a", 1, &ok), 1);
    assert_true(ok);
    assert_int_equal(seq("\xC3\xA9", 2, &ok), 2); /* é */
    assert_true(ok);
    assert_int_equal(seq("\xE2\x82\xAC", 3, &ok), 3); /* € */
    assert_true(ok);
    assert_int_equal(seq("\xF0\x9F\x98\x80", 4, &ok), 4); /* U+1F600 */
    assert_true(ok);
    /* Overlong forms, surrogates, above U+10FFFF and stray bytes: one byte each. */
    assert_int_equal(seq("\xC0\xAF", 2, &ok), 1);
    assert_false(ok);
    assert_int_equal(seq("\xE0\x80\x80", 3, &ok), 1);
    assert_false(ok);
    assert_int_equal(seq("\xED\xA0\x80", 3, &ok), 1);
    assert_false(ok);
    assert_int_equal(seq("\xF4\x90\x80\x80", 4, &ok), 1);
    assert_false(ok);
    assert_int_equal(seq("\x80", 1, &ok), 1);
    assert_false(ok);
    assert_int_equal(seq("\xFF", 1, &ok), 1);
    assert_false(ok);
    /* A truncated sequence is one maximal subpart as long as what is there. */
    assert_int_equal(seq("\xF0\x9F\x98", 3, &ok), 3);
    assert_false(ok);
    assert_int_equal(seq("\xE2\x82x", 3, &ok), 2);
    assert_false(ok);
}

static void
test_valid(void **state)
{
    const char *long_ascii = "0123456789abcdefghijklmnopqrstuvwxyz";
    char buf[64];

    (void)state;
    assert_true(weft__utf8_valid("", 0));
    assert_true(weft__utf8_valid(long_ascii, strlen(long_ascii)));
    assert_true(weft__utf8_valid("caf\xC3\xA9 \xE2\x82\xAC", 9));
    assert_false(weft__utf8_valid("caf\xC3", 4));
    /* An invalid byte after a run of eight-byte ASCII words is still found. */
    snprintf(buf, sizeof(buf), "%s\xFF", long_ascii);
    assert_false(weft__utf8_valid(buf, strlen(buf)));
    assert_false(weft__utf8_valid("\xED\xB0\x80", 3)); /* a lone low surrogate */
}

static void
test_cut_and_complete(void **state)
{
    const char *euro3 = "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"; /* €€€, 9 bytes */

    (void)state;
    assert_int_equal(weft__utf8_cut("hello", 5, 10), 5);
    assert_int_equal(weft__utf8_cut("hello", 5, 3), 3);
    assert_int_equal(weft__utf8_cut(euro3, 9, 9), 9);
    assert_int_equal(weft__utf8_cut(euro3, 9, 8), 6);
    assert_int_equal(weft__utf8_cut(euro3, 9, 7), 6);
    assert_int_equal(weft__utf8_cut(euro3, 9, 6), 6);
    assert_int_equal(weft__utf8_cut(euro3, 9, 2), 0);
    assert_int_equal(weft__utf8_cut("\xF0\x9F\x98\x80x", 5, 4), 4);
    assert_int_equal(weft__utf8_cut("\xF0\x9F\x98\x80x", 5, 3), 0);

    assert_int_equal(weft__utf8_complete("abc", 3), 3);
    assert_int_equal(weft__utf8_complete("ab\xE2\x82", 4), 2);
    assert_int_equal(weft__utf8_complete("ab\xE2", 3), 2);
    assert_int_equal(weft__utf8_complete("ab\xE2\x82\xAC", 5), 5);
    /* Garbage is not a cut character: it stays for the caller to repair. */
    assert_int_equal(weft__utf8_complete("ab\x80", 3), 3);
    assert_int_equal(weft__utf8_complete("ab\xFF", 3), 3);
    assert_int_equal(weft__utf8_complete("\x80\x80\x80\x80", 4), 4);
}

static void
test_chars_and_prefix(void **state)
{
    (void)state;
    assert_int_equal(weft__utf8_chars("", 0), 0);
    assert_int_equal(weft__utf8_chars("caf\xC3\xA9", 5), 4);
    assert_int_equal(weft__utf8_chars("\xF0\x9F\x98\x80!", 5), 2);
    assert_int_equal(weft__utf8_prefix("caf\xC3\xA9!", 6, 4), 5);
    assert_int_equal(weft__utf8_prefix("caf\xC3\xA9!", 6, 3), 3);
    assert_int_equal(weft__utf8_prefix("abc", 3, 10), 3);
    /* A lead byte at the end never reaches past the text. */
    assert_int_equal(weft__utf8_prefix("a\xF0\x9F", 3, 2), 3);
}

static void
test_sanitize(void **state)
{
    struct weft__buf out;

    (void)state;
    weft__buf_init(&out, 0);
    assert_int_equal(weft__utf8_sanitize("ok \xC3\xA9", 5, WEFT__UTF8_REPLACEMENT, &out), WEFT_OK);
    assert_string_equal(out.data, "ok \xC3\xA9");
    weft__buf_reset(&out);
    /* One replacement per maximal invalid subpart: F0 9F 98 is one, FF another. */
    assert_int_equal(weft__utf8_sanitize("a\xF0\x9F\x98z\xFF", 6, "?", &out), WEFT_OK);
    assert_string_equal(out.data, "a?z?");
    weft__buf_cleanup(&out);

    /* At the buffer's cap the append fails and the buffer keeps what it had. */
    weft__buf_init(&out, 8);
    assert_int_equal(weft__buf_append_str(&out, "abc"), WEFT_OK);
    assert_int_equal(weft__utf8_sanitize("\xFF\xFF\xFF\xFF", 4, WEFT__UTF8_REPLACEMENT, &out),
                     WEFT_ELIMIT);
    assert_int_equal(out.len, 3);
    assert_string_equal(out.data, "abc");
    weft__buf_cleanup(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq_well_formed_and_maximal_subparts),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_cut_and_complete),
        cmocka_unit_test(test_chars_and_prefix),
        cmocka_unit_test(test_sanitize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
