/* tests/cli/test_sampling.c - tail sampling from the terminal (cli/execute.c, cli/runs_cmd.c):
 * the built `weft` binary runs examples/code_review into a temporary WEFT_HOME with
 * --sampling, WEFT_SAMPLING or a workflow's "sampling", and what each place says agrees: the
 * summary, --json, `weft runs`, `weft run show`, the local span store (a dropped trace has no
 * span there, a kept one all) and the stored run. A bad policy is refused with exit status 2
 * and the rule it could not read. */
#include "support/weft_test.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define EXAMPLE    WEFT_SOURCE_DIR "/examples/code_review/workflow.json"
#define MAX_OUTPUT (1u << 20)

struct fixture {
    char dir[64];
    char *out;
    char *err;
};

static int
run_weft(struct fixture *f, const char *const *args)
{
    return weft_test_run_captured(WEFT_BIN, args, f->dir, f->out, MAX_OUTPUT, f->err, MAX_OUTPUT);
}

#define RUN(f, ...) run_weft((f), (const char *const[]){__VA_ARGS__, NULL})

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->out = malloc(MAX_OUTPUT);
    f->err = malloc(MAX_OUTPUT);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-sampling-cli-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    weft_test_setenv("WEFT_HOME", f->dir);
    weft_test_setenv("WEFT_SAMPLING", NULL);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_setenv("WEFT_SAMPLING", NULL);
    weft_test_rmtree(f->dir);
    free(f->out);
    free(f->err);
    free(f);
    return 0;
}

/* Spans of @p trace_id in the local store ($WEFT_HOME/weft.db). */
static long long
stored_spans(const struct fixture *f, const char *trace_id)
{
    char path[128];
    char sql[160];
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    long long n = -1;

    snprintf(path, sizeof(path), "%s/weft.db", f->dir);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM spans WHERE trace_id = '%s'", trace_id);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    }
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        n = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
}

/* `weft run ... --json` with @p sampling (NULL: none) into a parsed document. */
static json_t *
run_json(struct fixture *f, const char *sampling)
{
    json_error_t jerr;
    json_t *doc = NULL;
    int status = sampling != NULL ? RUN(f, "run", EXAMPLE, "-q", "--json", "--sampling", sampling)
                                  : RUN(f, "run", EXAMPLE, "-q", "--json");

    assert_int_equal(status, 0);
    doc = json_loads(f->out, 0, &jerr);
    if (doc == NULL) {
        fail_msg("--json output is not JSON (%s): %s", jerr.text, f->out);
    }
    return doc;
}

static void
test_cli_sampling_dropped_run_reads_the_same_everywhere(void **state)
{
    struct fixture *f = *state;
    json_t *doc = run_json(f, "failed,stuck,0%");
    json_t *s = json_object_get(doc, "sampling");
    char trace_id[40];
    char run_id[40];
    char needle[128];

    snprintf(trace_id, sizeof(trace_id), "%s", json_string_value(json_object_get(doc, "trace_id")));
    snprintf(run_id, sizeof(run_id), "%s", json_string_value(json_object_get(doc, "run_id")));
    assert_true(json_is_false(json_object_get(s, "kept")));
    assert_string_equal(json_string_value(json_object_get(s, "rule")), "sample");
    assert_int_equal(json_integer_value(json_object_get(s, "spans_kept")), 0);
    /* Every span the run recorded was sampled out, in both batched exporters' count. */
    assert_true(json_integer_value(json_object_get(s, "spans_sampled_out")) >=
                json_integer_value(json_object_get(json_object_get(doc, "spans"), "recorded")));
    assert_int_equal(stored_spans(f, trace_id), 0);
    json_decref(doc);

    /* The runs list and run show say why the trace is missing. */
    assert_int_equal(RUN(f, "runs"), 0);
    assert_non_null(strstr(f->out, "(trace not kept (rule sample))"));
    assert_int_equal(RUN(f, "run", "show", run_id), 0);
    assert_non_null(strstr(f->out, "(trace not kept (rule sample))"));
    assert_int_equal(RUN(f, "runs", "--json"), 0);
    snprintf(needle, sizeof(needle), "\"rule\": \"sample\"");
    assert_non_null(strstr(f->out, "\"trace_sampling\""));
    assert_non_null(strstr(f->out, needle));

    /* The terminal summary says it too, and prints no tree. */
    assert_int_equal(RUN(f, "run", EXAMPLE, "-q", "--sampling", "0%"), 0);
    assert_non_null(strstr(f->out, "  sampling: trace not kept (rule sample)"));
    assert_non_null(strstr(f->out, "trace not kept (rule sample)\n"));
    assert_null(strstr(f->out, "invoke_workflow"));
}

static void
test_cli_sampling_kept_run_is_stored_whole(void **state)
{
    struct fixture *f = *state;
    json_t *doc = run_json(f, "everything=all");
    json_t *s = json_object_get(doc, "sampling");
    long long recorded =
        json_integer_value(json_object_get(json_object_get(doc, "spans"), "recorded"));

    assert_true(json_is_true(json_object_get(s, "kept")));
    assert_string_equal(json_string_value(json_object_get(s, "rule")), "everything");
    assert_true(recorded > 10);
    assert_int_equal(stored_spans(f, json_string_value(json_object_get(doc, "trace_id"))),
                     recorded);
    assert_int_equal(json_integer_value(json_object_get(s, "spans_kept")), recorded);
    json_decref(doc);
}

/* Kept spans an exporter behind the buffer could not deliver are not reported as delivered:
 * the exporter lines say the spans went to tail sampling, stderr says how many kept spans did
 * not arrive; the store still has the trace, so the run's exit status stays 0. */
static void
test_cli_sampling_failed_delivery_is_reported(void **state)
{
    struct fixture *f = *state;

    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1");
    weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    assert_int_equal(RUN(f, "run", EXAMPLE, "-q", "--no-trace", "--sampling", "all"), 0);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", NULL);
    assert_non_null(strstr(f->out, "otlp: "));
    assert_non_null(strstr(f->out, " taken by tail sampling"));
    assert_null(strstr(f->out, " delivered"));
    assert_non_null(strstr(f->err, "kept spans did not reach their exporter"));
    assert_non_null(strstr(f->out, " failed"));
}

static void
test_cli_sampling_workflow_policy_and_env_override(void **state)
{
    struct fixture *f = *state;
    char *text = weft_test_read_file(EXAMPLE);
    char *at = NULL;
    char path[160];
    json_t *doc = NULL;

    /* The example with a "sampling" policy, in a copy beside a copy of its script. */
    assert_non_null(text);
    at = strstr(text, "\"name\"");
    assert_non_null(at);
    snprintf(path, sizeof(path), "%s/sampled.json", f->dir);
    {
        FILE *out = fopen(path, "w");
        char *script = weft_test_read_file(WEFT_SOURCE_DIR "/examples/code_review/script.json");

        assert_non_null(out);
        assert_non_null(script);
        fprintf(out, "%.*s\"sampling\": [\"failed\", \"0%%\"], %s", (int)(at - text), text, at);
        fclose(out);
        weft_test_write_file(f->dir, "script.json", script);
        free(script);
    }
    free(text);
    assert_int_equal(RUN(f, "run", path, "-q", "--json"), 0);
    doc = json_loads(f->out, 0, NULL);
    assert_non_null(doc);
    assert_true(json_is_false(json_object_get(json_object_get(doc, "sampling"), "kept")));
    json_decref(doc);
    /* WEFT_SAMPLING=off turns the workflow's policy off: no decision, the trace kept whole. */
    weft_test_setenv("WEFT_SAMPLING", "off");
    assert_int_equal(RUN(f, "run", path, "-q", "--json"), 0);
    doc = json_loads(f->out, 0, NULL);
    assert_non_null(doc);
    assert_true(json_is_null(json_object_get(doc, "sampling")));
    assert_true(stored_spans(f, json_string_value(json_object_get(doc, "trace_id"))) > 10);
    json_decref(doc);
    /* WEFT_SAMPLING wins over the workflow's. */
    weft_test_setenv("WEFT_SAMPLING", "all");
    assert_int_equal(RUN(f, "run", path, "-q", "--json"), 0);
    doc = json_loads(f->out, 0, NULL);
    assert_true(json_is_true(json_object_get(json_object_get(doc, "sampling"), "kept")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "sampling"), "rule")), "all");
    json_decref(doc);
}

static void
test_cli_sampling_bad_policies_are_refused(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(RUN(f, "run", EXAMPLE, "-q", "--sampling", "failed,loopy"), 2);
    assert_non_null(strstr(f->err, "weft run: --sampling: sampling rule 'loopy': expected"));
    weft_test_setenv("WEFT_SAMPLING", "200%");
    assert_int_equal(RUN(f, "run", EXAMPLE, "-q"), 2);
    assert_non_null(strstr(f->err, "weft run: WEFT_SAMPLING: sampling rule '200%'"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_sampling_dropped_run_reads_the_same_everywhere,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_sampling_kept_run_is_stored_whole, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_sampling_failed_delivery_is_reported, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_sampling_workflow_policy_and_env_override, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_sampling_bad_policies_are_refused, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
