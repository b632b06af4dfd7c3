/* tests/cli/test_dataset.c - `weft dataset create|add|list|show|rm` as a user types them, with
 * the built `weft` binary in a temporary WEFT_HOME: a failed run and a completed run made by
 * `weft run` on the scripted provider, a dataset of the failures (its failing step shown), a JSONL
 * file added (version 2), a bad CSV line reported as FILE:LINE and adding nothing, show @1 and
 * --json, rm of an item by prefix (version 3), rm --all --force, list --json, bad usage. */
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define MAX_OUTPUT (1u << 20)

struct fixture {
    char dir[64];
    char state[128];
    char *out;
    char *err;
};

struct run {
    int status;
    const char *out;
    const char *err;
};

/* Run the weft binary with @p args (NULL-terminated) from the fixture's directory, so that
 * the file names the test passes are relative to it, as a user's would be. */
static struct run
run_weft(struct fixture *f, const char *const *args)
{
    struct run r = {0};
    char cwd[512];

    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(f->dir), 0);
    r.status =
        weft_test_run_captured(WEFT_BIN, args, f->dir, f->out, MAX_OUTPUT, f->err, MAX_OUTPUT);
    assert_int_equal(chdir(cwd), 0);
    r.out = f->out;
    r.err = f->err;
    return r;
}

#define RUN(f, ...) run_weft((f), (const char *const[]){__VA_ARGS__, NULL})

static json_t *
parse(const char *text)
{
    json_error_t error;
    json_t *doc = json_loads(text, 0, &error);

    if (doc == NULL) {
        fail_msg("not JSON: %s (line %d): %s", error.text, error.line, text);
    }
    return doc;
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->out = malloc(MAX_OUTPUT);
    f->err = malloc(MAX_OUTPUT);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-dataset-cli-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    weft_test_setenv("WEFT_HOME", f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
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
    weft_test_write_file(f->dir, "evaluators.json", "{\"exact\": {\"field\": \"output\"}}");
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_rmtree(f->dir);
    free(f->out);
    free(f->err);
    free(f);
    return 0;
}

static void
test_dataset_commands(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "run", "fails.json", "--state", f->state, "--input", "ship it", "-q");
    json_t *doc = NULL;
    json_t *items = NULL;
    char prefix[9];

    if (r.status != 1) {
        fail_msg("weft run: %d: %s", r.status, r.err);
    }
    r = RUN(f, "run", "ok.json", "--state", f->state, "--input", "all good", "-q");
    assert_int_equal(r.status, 0);

    r = RUN(f, "dataset", "create", "regressions", "--from-runs", "--status", "failed",
            "--evaluators", "evaluators.json", "--description", "builds that broke", "--state",
            f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "created regressions: 1 item added, version 1"));
    r = RUN(f, "dataset", "show", "regressions", "--state", f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"ship it\""));
    assert_non_null(strstr(r.out, "build")); /* the failing step */

    r = RUN(f, "dataset", "add", "regressions", "--file", "items.jsonl", "--state", f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "2 items added, version 2"));
    r = RUN(f, "dataset", "add", "regressions", "--file", "bad.csv", "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "bad.csv:3: expected 2 cells as the header has, got 1"));

    r = RUN(f, "dataset", "show", "regressions@1", "--json", "--state", f->state);
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.dataset/v1");
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), 1);
    items = json_object_get(doc, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "fail_step")),
                        "build");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "input")),
                        "ship it");
    json_decref(doc);

    r = RUN(f, "dataset", "show", "regressions", "--json", "--state", f->state);
    doc = parse(r.out);
    items = json_object_get(doc, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(items, 2), "metadata"), "level")),
                        "easy");
    snprintf(prefix, sizeof(prefix), "%.8s",
             json_string_value(json_object_get(json_array_get(items, 1), "id")));
    json_decref(doc);
    r = RUN(f, "dataset", "rm", "regressions", prefix, "--state", f->state);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "1 item removed, version 3"));
    r = RUN(f, "dataset", "rm", "regressions", prefix, "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no item"));

    r = RUN(f, "dataset", "list", "--json", "--state", f->state);
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    items = json_array_get(json_object_get(doc, "datasets"), 0);
    assert_string_equal(json_string_value(json_object_get(items, "name")), "regressions");
    assert_int_equal(json_integer_value(json_object_get(items, "version")), 3);
    assert_int_equal(json_integer_value(json_object_get(items, "items")), 2);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(items, "evaluators"), "exact"), "field")),
        "output");
    json_decref(doc);
    r = RUN(f, "dataset", "list", "--state", f->state);
    assert_non_null(strstr(r.out, "builds that broke"));

    r = RUN(f, "dataset", "rm", "regressions", "--all", "--state", f->state);
    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "rm", "regressions", "--all", "--force", "--state", f->state);
    assert_int_equal(r.status, 0);
    r = RUN(f, "dataset", "list", "--state", f->state);
    assert_non_null(strstr(r.out, "no datasets yet"));
}

static void
test_dataset_usage_errors(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "dataset");

    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "frob");
    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "create");
    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "add", "x");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "add what?"));
    r = RUN(f, "dataset", "create", "x", "--from", "yesterday");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--from: expected a UTC date"));
    r = RUN(f, "dataset", "create", "x", "--reward-below", "lots");
    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "create", "x", "--verdict", "MEH");
    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "show", "x@zero");
    assert_int_equal(r.status, 2);
    r = RUN(f, "dataset", "show", "nothing", "--state", f->state);
    assert_int_equal(r.status, 1);
    r = RUN(f, "dataset", "create", "x", "--run", "ffffffff", "--state", f->state);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "run ffffffff: no such run"));
    r = RUN(f, "dataset", "--help");
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
