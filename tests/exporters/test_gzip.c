/* tests/exporters/test_gzip.c - gzip round trips, caps and corrupt input; the libdeflate
 * compressor against zlib's. */
#include "base/buf.h"
#include "exporters/gzip.h"
#include "support/weft_test.h"

#include <string.h>

static void
test_gzip_round_trip_restores_bytes(void **state)
{
    struct weft__buf in;
    struct weft__buf gz;
    struct weft__buf out;

    (void)state;
    weft__buf_init(&in, 0);
    weft__buf_init(&gz, 0);
    weft__buf_init(&out, 0);
    for (int i = 0; i < 20000; i++) {
        weft__buf_printf(&in, "span-%d;", i % 97);
    }
    assert_weft_ok(weft__gzip_compress(in.data, in.len, 1, &gz));
    assert_true(gz.len < in.len / 4);
    /* A gzip member starts with 1f 8b 08 (RFC 1952). */
    assert_int_equal((unsigned char)gz.data[0], 0x1f);
    assert_int_equal((unsigned char)gz.data[1], 0x8b);
    assert_int_equal((unsigned char)gz.data[2], 0x08);
    assert_weft_ok(weft__gzip_decompress(gz.data, gz.len, &out));
    assert_int_equal(out.len, in.len);
    assert_memory_equal(out.data, in.data, in.len);
    weft__buf_cleanup(&in);
    weft__buf_cleanup(&gz);
    weft__buf_cleanup(&out);
}

static void
test_gzip_empty_input_is_a_valid_stream(void **state)
{
    struct weft__buf gz;
    struct weft__buf out;

    (void)state;
    weft__buf_init(&gz, 0);
    weft__buf_init(&out, 0);
    assert_weft_ok(weft__gzip_compress("", 0, -1, &gz));
    assert_true(gz.len >= 18); /* header + empty deflate block + trailer */
    assert_weft_ok(weft__gzip_decompress(gz.data, gz.len, &out));
    assert_int_equal(out.len, 0);
    weft__buf_cleanup(&gz);
    weft__buf_cleanup(&out);
}

static void
test_gzip_decompress_respects_the_cap(void **state)
{
    static char zeros[1 << 20];
    struct weft__buf gz;
    struct weft__buf out;

    (void)state;
    weft__buf_init(&gz, 0);
    weft__buf_init(&out, 4096);
    assert_weft_ok(weft__gzip_compress(zeros, sizeof(zeros), 6, &gz));
    assert_weft_err(weft__gzip_decompress(gz.data, gz.len, &out), WEFT_ELIMIT);
    assert_int_equal(out.len, 0);
    weft__buf_cleanup(&gz);
    weft__buf_cleanup(&out);
}

static void
test_gzip_compress_respects_the_cap_and_restores_length(void **state)
{
    struct weft__buf gz;

    (void)state;
    weft__buf_init(&gz, 16);
    assert_weft_ok(weft__buf_append_str(&gz, "keep"));
    assert_weft_err(weft__gzip_compress("some text to compress", 21, 1, &gz), WEFT_ELIMIT);
    assert_int_equal(gz.len, 4);
    assert_string_equal(gz.data, "keep");
    weft__buf_cleanup(&gz);
}

static void
test_gzip_corrupt_or_truncated_input_is_a_parse_error(void **state)
{
    struct weft__buf gz;
    struct weft__buf out;

    (void)state;
    weft__buf_init(&gz, 0);
    weft__buf_init(&out, 0);
    assert_weft_err(weft__gzip_decompress("not gzip at all", 15, &out), WEFT_EPARSE);
    assert_weft_ok(weft__gzip_compress("hello hello hello", 17, 1, &gz));
    assert_weft_err(weft__gzip_decompress(gz.data, gz.len - 6, &out), WEFT_EPARSE);
    assert_int_equal(out.len, 0);
    weft__buf_cleanup(&gz);
    weft__buf_cleanup(&out);
}

static void
test_gzip_libdeflate_and_zlib_agree(void **state)
{
    struct weft__buf in;
    struct weft__buf fast;
    struct weft__buf slow;
    struct weft__buf out;

    (void)state;
    weft__buf_init(&in, 0);
    weft__buf_init(&fast, 0);
    weft__buf_init(&slow, 0);
    weft__buf_init(&out, 0);
    for (int i = 0; i < 5000; i++) {
        weft__buf_printf(&in, "gen_ai.agent.name=planner-%d\x01", i * 7919 % 1000);
    }
    /* Appends after what the buffer holds, at every zlib level. */
    for (int level = -1; level <= 9; level++) {
        weft__buf_reset(&fast);
        weft__buf_reset(&out);
        weft__buf_append_str(&fast, "prefix");
        assert_weft_ok(weft__gzip_compress(in.data, in.len, level, &fast));
        assert_memory_equal(fast.data, "prefix", 6);
        assert_weft_ok(weft__gzip_decompress(fast.data + 6, fast.len - 6, &out));
        assert_int_equal(out.len, in.len);
        assert_memory_equal(out.data, in.data, in.len);
    }
    assert_weft_ok(weft__gzip_compress_zlib(in.data, in.len, 1, &slow));
    weft__buf_reset(&fast);
    assert_weft_ok(weft__gzip_compress(in.data, in.len, 1, &fast));
    /* Same format, and no worse a ratio than zlib's (within a quarter). */
    assert_true(fast.len * 4 < slow.len * 5);
    assert_weft_err(weft__gzip_compress(in.data, in.len, 10, &fast), WEFT_EINVAL);
    weft__buf_cleanup(&in);
    weft__buf_cleanup(&fast);
    weft__buf_cleanup(&slow);
    weft__buf_cleanup(&out);
}

static void
test_gzip_output_that_fits_under_the_cap_is_accepted(void **state)
{
    /* Compressible input whose worst-case bound exceeds the cap while the real output fits. */
    static char zeros[100000];
    struct weft__buf gz;
    struct weft__buf out;

    (void)state;
    weft__buf_init(&gz, 2000);
    weft__buf_init(&out, 0);
    assert_weft_ok(weft__gzip_compress(zeros, sizeof(zeros), 1, &gz));
    assert_true(gz.len < 2000);
    assert_weft_ok(weft__gzip_decompress(gz.data, gz.len, &out));
    assert_int_equal(out.len, sizeof(zeros));
    weft__buf_cleanup(&gz);
    weft__buf_cleanup(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gzip_round_trip_restores_bytes),
        cmocka_unit_test(test_gzip_empty_input_is_a_valid_stream),
        cmocka_unit_test(test_gzip_decompress_respects_the_cap),
        cmocka_unit_test(test_gzip_compress_respects_the_cap_and_restores_length),
        cmocka_unit_test(test_gzip_corrupt_or_truncated_input_is_a_parse_error),
        cmocka_unit_test(test_gzip_libdeflate_and_zlib_agree),
        cmocka_unit_test(test_gzip_output_that_fits_under_the_cap_is_accepted),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
