/* tests/runtime/test_dataset.c - datasets and experiments (include/weft/dataset.h) over the
 * SQLite state store: every case of tests/runtime/dataset_cases.h (runs made by real runs on the
 * scripted provider, JSONL and CSV files, bad lines, versions, rm, experiments), and the schema
 * migration of an existing state file to version 16. */
#include "dataset_cases.h"

#include <sqlite3.h>
#include <unistd.h>

static int
setup(void **state)
{
    struct ds_fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-dataset-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct ds_fx *f = *state;

    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* Readers never create the store: no database is WEFT_ENOTFOUND. */
static void
test_dataset_readers_need_a_database(void **state)
{
    struct ds_fx *f = *state;
    struct weft_dataset *all = NULL;
    struct weft_dataset_item *it = NULL;
    size_t n = 0;

    assert_int_equal(weft_datasets_list(f->state, &all, &n), WEFT_ENOTFOUND);
    assert_int_equal(weft_dataset_show(f->state, "x", 0, NULL, &it, &n), WEFT_ENOTFOUND);
    assert_int_equal(access(f->state, F_OK), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        DATASET_CASES(setup, teardown),
        cmocka_unit_test_setup_teardown(test_dataset_readers_need_a_database, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
