/* tests/runtime_pg/test_dataset_pg.c - datasets and experiments (include/weft/dataset.h) over a
 * real PostgreSQL (tests/support/pg_server.h, one server for the file, a fresh database per
 * test): every case of tests/runtime/dataset_cases.h, the same behaviour the SQLite backend has
 * (runs made by real runs stored in PostgreSQL, files, bad lines adding nothing, versions, rm,
 * experiments). A server that cannot start fails the file: it never skips. */
#include "support/pg_server.h"
#include "tests/runtime/dataset_cases.h"

#include <unistd.h>

static struct weft_test_pg *server;
static unsigned databases;

static int
group_setup(void **state)
{
    char err[512] = "";

    (void)state;
    server = weft_test_pg_start(NULL, err, sizeof(err));
    if (server == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    return 0;
}

static int
group_teardown(void **state)
{
    (void)state;
    weft_test_pg_stop(server);
    return 0;
}

static int
setup(void **state)
{
    struct ds_fx *f = calloc(1, sizeof(*f));
    char name[32];

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-dataset-pg-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(name, sizeof(name), "d%u", ++databases);
    if (weft_test_pg_createdb(server, name, f->state, sizeof(f->state)) != 0) {
        fail_msg("createdb %s", name);
    }
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        DATASET_CASES(setup, teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
