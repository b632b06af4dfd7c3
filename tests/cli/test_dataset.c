/* tests/cli/test_dataset.c - `weft dataset create|add|list|show|rm` as a user types them, with
 * the built `weft` binary in a temporary WEFT_HOME: a failed run and a completed run made by
 * `weft run` on the scripted provider, a dataset of the failures (its failing step shown), a JSONL
 * file added (version 2), bad CSV (a short row, a column named twice, a cell not UTF-8)
 * reported as FILE:LINE and adding nothing, show @1 and
 * --json, rm of an item by prefix (version 3), rm --all --force, list --json, bad usage. */
#include "support/cli_run.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEFT_BIN WEFT_BINARY_DIR "/weft"

static int
setup(void **state)
{
    struct weft_test_cli *f = weft_test_cli_new(WEFT_BIN, "weft-dataset-cli");

    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"a\": {\"act\": [{\"content\": \"docs\"}]}}}");
    weft_test_write_file(
        f->dir, "fails.json",
        "{\"name\": \"builds\", \"models\": {\"m\": {\"provider\": \"scripted\","
        " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
        "{\"id\": \"docs\", \"agent\": \"a\", \"task\": \"Write docs\"},"
        "{\"id\": \"build\", \"executor\": \"command\", \"task\": \"Build\","
        " \"depends_on\": [\"docs\"], \"argv\": [\"sh\", \"-c\", \"exit 2\"]}]}");
    weft_test_write_file(f->dir, "ok.json",
                         "{\"name\": \"fine\", \"models\": {\"m\": {\"provider\": \"scripted\","
                         " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                         " \"plan\": [{\"id\": \"docs\", \"agent\": \"a\", \"task\": \"Do\"}]}");
    weft_test_write_file(f->dir, "items.jsonl",
                         "{\"input\": \"add 2 and 2\", \"expected\": \"4\"}\n"
                         "{\"input\": \"add 3 and 3\", \"expected\": \"6\","
                         " \"metadata\": {\"level\": \"easy\"}}\n");
    weft_test_write_file(f->dir, "bad.csv", "input,expected\nq1,a1\nq2\n");
    weft_test_write_file(f->dir, "twice.csv", "input,input\nq1,q2\n");
    weft_test_write_file(f->dir, "latin1.csv", "input,note\nq1,caf\xe9\n");
    weft_test_write_file(f->dir, "evaluators.json", "{\"exact\": {\"field\": \"output\"}}");
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    weft_test_cli_free(*state);
    return 0;
}

static void
test_dataset_commands(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r =
        WEFT_TEST_CLI_RUN(f, "run", "fails.json", "--state", f->state, "--input", "ship it", "-q");
    json_t *doc = NULL;
    json_t *items = NULL;
    char prefix[9];

    if (r.status != 1) {
        fail_msg("weft run: %d: %s", r.status, r.err);
    }
    r = WEFT_TEST_CLI_RUN(f, "run", "ok.json", "--state", f->state, "--input", "all good", "-q");
    assert_int_equal(r.status, 0);

    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "regressions", "--from-runs", "--status",
                          "failed", "--evaluators", "evaluators.json", "--description",
                          "builds that broke", "--state", f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "created regressions: 1 item added, version 1"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "show", "regressions", "--state", f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"ship it\""));
    assert_non_null(strstr(r.out, "build")); /* the failing step */

    r = WEFT_TEST_CLI_RUN(f, "dataset", "add", "regressions", "--file", "items.jsonl", "--state",
                          f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "2 items added, version 2"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "add", "regressions", "--file", "bad.csv", "--state",
                          f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "bad.csv:3: expected 2 cells as the header has, got 1"));
    /* A column named twice, or a cell that is not UTF-8, is refused, not dropped. */
    r = WEFT_TEST_CLI_RUN(f, "dataset", "add", "regressions", "--file", "twice.csv", "--state",
                          f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "twice.csv:1: header: column 'input' appears twice"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "add", "regressions", "--file", "latin1.csv", "--state",
                          f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "latin1.csv:2: note: expected UTF-8 text"));
    /* A file that cannot be read (a directory) fails; it is not an empty file of no items. */
    r = WEFT_TEST_CLI_RUN(f, "dataset", "add", "regressions", "--file", ".", "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, ".:1: cannot read it"));

    r = WEFT_TEST_CLI_RUN(f, "dataset", "show", "regressions@1", "--json", "--state", f->state);
    assert_int_equal(r.status, 0);
    doc = weft_test_json_parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.dataset/v1");
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), 1);
    items = json_object_get(doc, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "fail_step")),
                        "build");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "input")),
                        "ship it");
    json_decref(doc);

    r = WEFT_TEST_CLI_RUN(f, "dataset", "show", "regressions", "--json", "--state", f->state);
    doc = weft_test_json_parse(r.out);
    items = json_object_get(doc, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(items, 2), "metadata"), "level")),
                        "easy");
    snprintf(prefix, sizeof(prefix), "%.8s",
             json_string_value(json_object_get(json_array_get(items, 1), "id")));
    json_decref(doc);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "rm", "regressions", prefix, "--state", f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "1 item removed, version 3"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "rm", "regressions", prefix, "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no item"));
    /* A refusal is said once, as itself: the rolled-back transaction is not a store failure. */
    assert_null(strstr(r.err, "commit failed"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "regressions", "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_null(strstr(r.err, "commit failed"));

    r = WEFT_TEST_CLI_RUN(f, "dataset", "list", "--json", "--state", f->state);
    assert_int_equal(r.status, 0);
    doc = weft_test_json_parse(r.out);
    items = json_array_get(json_object_get(doc, "datasets"), 0);
    assert_string_equal(json_string_value(json_object_get(items, "name")), "regressions");
    assert_int_equal(json_integer_value(json_object_get(items, "version")), 3);
    assert_int_equal(json_integer_value(json_object_get(items, "items")), 2);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(items, "evaluators"), "exact"), "field")),
        "output");
    json_decref(doc);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "list", "--state", f->state);
    assert_non_null(strstr(r.out, "builds that broke"));

    r = WEFT_TEST_CLI_RUN(f, "dataset", "rm", "regressions", "--all", "--state", f->state);
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "rm", "regressions", "--all", "--force", "--state",
                          f->state);
    assert_int_equal(r.status, 0);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "list", "--state", f->state);
    assert_non_null(strstr(r.out, "no datasets yet"));
}

static void
test_dataset_usage_errors(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r = WEFT_TEST_CLI_RUN(f, "dataset");

    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "frob");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "add", "x");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "add what?"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "x", "--from", "yesterday");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--from: expected a UTC date"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "x", "--reward-below", "lots");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "x", "--verdict", "MEH");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "show", "x@zero");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "show", "nothing", "--state", f->state);
    assert_int_equal(r.status, 1);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "x", "--run", "ffffffff", "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "run ffffffff: no such run"));
    r = WEFT_TEST_CLI_RUN(f, "dataset", "--help");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "weft dataset create NAME"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dataset_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dataset_usage_errors, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
