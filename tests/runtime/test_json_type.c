/* tests/runtime/test_json_type.c - JSON type names in messages (runtime/common/json_type.c): every
 * type's word, both booleans alike, NULL as null. */
#include "support/weft_test.h"

#include "runtime/common/json_type.h"

static void
test_json_type_names_every_type(void **state)
{
    json_t *v = json_pack("{s:{}, s:[], s:s, s:i, s:f, s:b, s:b, s:n}", "o", "a", "s", "x", "i", 1,
                          "r", 1.5, "t", 1, "f", 0, "n");
    static const char *const want[][2] = {{"o", "object"},  {"a", "array"},  {"s", "string"},
                                          {"i", "integer"}, {"r", "number"}, {"t", "boolean"},
                                          {"f", "boolean"}, {"n", "null"}};

    (void)state;
    assert_non_null(v);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const json_t *m = json_object_get(v, want[i][0]);

        assert_string_equal(weft__json_type_name(m), want[i][1]);
        assert_string_equal(weft__json_type_expected(json_typeof(m)), want[i][1]);
    }
    assert_string_equal(weft__json_type_name(NULL), "null");
    json_decref(v);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_type_names_every_type),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
