/* tests/base/test_uuid.c - random UUIDs: canonical form, version and variant bits, no repeats,
 * and the validity check. */
#include "base/uuid.h"
#include "support/weft_test.h"

#include <stdlib.h>
#include <string.h>

static int
cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void
test_v4_form_and_uniqueness(void **state)
{
    enum { N = 4096 };
    char(*ids)[WEFT_UUID_LEN + 1] = calloc(N, sizeof(*ids));

    (void)state;
    assert_non_null(ids);
    for (size_t i = 0; i < N; i++) {
        weft__uuid_v4(ids[i]);
        assert_int_equal(strlen(ids[i]), WEFT_UUID_LEN);
        assert_true(weft__uuid_is_valid(ids[i]));
        assert_int_equal(ids[i][14], '4');           /* version */
        assert_non_null(strchr("89ab", ids[i][19])); /* variant 10xx */
        for (size_t k = 0; k < WEFT_UUID_LEN; k++) {
            assert_false(ids[i][k] >= 'A' && ids[i][k] <= 'F'); /* lowercase */
        }
    }
    qsort(ids, N, sizeof(*ids), cmp_str);
    for (size_t i = 1; i < N; i++) {
        assert_true(strcmp(ids[i - 1], ids[i]) != 0);
    }
    free(ids);
}

static void
test_is_valid(void **state)
{
    (void)state;
    assert_true(weft__uuid_is_valid("123e4567-E89B-12d3-a456-426614174000"));
    assert_false(weft__uuid_is_valid(NULL));
    assert_false(weft__uuid_is_valid(""));
    assert_false(weft__uuid_is_valid("123e4567e89b12d3a456426614174000"));      /* no hyphens */
    assert_false(weft__uuid_is_valid("123e4567-e89b-12d3-a456-42661417400"));   /* short */
    assert_false(weft__uuid_is_valid("123e4567-e89b-12d3-a456-4266141740000")); /* long */
    assert_false(weft__uuid_is_valid("123e4567-e89b-12d3-a456_426614174000"));  /* separator */
    assert_false(weft__uuid_is_valid("g23e4567-e89b-12d3-a456-426614174000"));  /* not hex */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4_form_and_uniqueness),
        cmocka_unit_test(test_is_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
