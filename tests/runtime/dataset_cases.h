/* tests/runtime/dataset_cases.h - datasets and experiments (include/weft/dataset.h) over one state
 * backend, included by tests/runtime/test_dataset.c (SQLite) and
 * tests/runtime_pg/test_dataset_pg.c (a real PostgreSQL): the includer defines struct ds_fx's
 * setup (a temporary directory and the state location) and lists DATASET_CASES(setup,
 * teardown). The runs are real runs of workflows on the scripted provider: one whose command step
 * fails after an agent step completed, the stuck-loop example (examples/stuck_loops/handoff.json),
 * and one that completes. */
#ifndef WEFT_TESTS_DATASET_CASES_H
#define WEFT_TESTS_DATASET_CASES_H

#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

struct ds_fx {
    char dir[64];
    char state[256];
};

/* Run workflow file @p path with @p input into the fixture's state; @return the new run id. */
static char *
ds_run(struct ds_fx *f, const char *path, const char *input, weft_run_status want)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char error[256] = "";
    char *id = NULL;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct mem_exporter *mem = NULL;

    /* Traced, so that the run has a trace id to keep. */
    assert_weft_ok(mem_provider_new(NULL, &provider, &tracer, &mem));
    assert_weft_ok(weft_workflow_load(path, &wf, &d));
    weft_diags_cleanup(&d);
    memset(&ro, 0, sizeof(ro));
    ro.state_path = f->state;
    ro.workspace = f->dir;
    ro.input = input;
    ro.provider = provider;
    assert_weft_ok(weft_run(wf, &ro, &r, error, sizeof(error)));
    assert_int_equal(r->status, want);
    id = strdup(r->run_id);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    weft_provider_shutdown(provider, 1000);
    weft_provider_free(provider);
    return id;
}

/* docs (agent, completes) -> build (command, exit 2) -> test (agent, skipped). */
static char *
ds_run_failed(struct ds_fx *f)
{
    char path[256];

    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"a\": {\"act\": [{\"content\": \"docs\"},"
                         " {\"content\": \"ok\"}]}}}");
    weft_test_write_file(
        f->dir, "fails.json",
        "{\"name\": \"builds\", \"models\": {\"m\": {\"provider\": \"scripted\","
        " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
        "{\"id\": \"docs\", \"agent\": \"a\", \"task\": \"Write docs\"},"
        "{\"id\": \"build\", \"executor\": \"command\", \"task\": \"Build\","
        " \"depends_on\": [\"docs\"], \"argv\": [\"sh\", \"-c\", \"exit 2\"]},"
        "{\"id\": \"test\", \"agent\": \"a\", \"task\": \"Test\", \"depends_on\": [\"build\"]}]}");
    snprintf(path, sizeof(path), "%s/fails.json", f->dir);
    return ds_run(f, path, "build the thing", WEFT_RUN_FAILED);
}

static char *
ds_run_completed(struct ds_fx *f)
{
    char path[256];

    weft_test_write_file(f->dir, "ok_script.json",
                         "{\"responses\": {\"a\": {\"act\": [{\"content\": \"done\"}]}}}");
    weft_test_write_file(f->dir, "ok.json",
                         "{\"name\": \"fine\", \"models\": {\"m\": {\"provider\": \"scripted\","
                         " \"script\": \"ok_script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                         " \"plan\": [{\"id\": \"only\", \"agent\": \"a\", \"task\": \"Do\"}]}");
    snprintf(path, sizeof(path), "%s/ok.json", f->dir);
    return ds_run(f, path, "{\"ticket\": 7}", WEFT_RUN_COMPLETED);
}

static char *
ds_run_stuck(struct ds_fx *f)
{
    return ds_run(f, WEFT_SOURCE_DIR "/examples/stuck_loops/handoff.json", "fix the test",
                  WEFT_RUN_STUCK);
}

static void
ds_show(struct ds_fx *f,
        const char *name,
        uint64_t version,
        struct weft_dataset *ds,
        struct weft_dataset_item **items,
        size_t *n)
{
    assert_weft_ok(weft_dataset_show(f->state, name, version, ds, items, n));
}

/* Failed, stuck and completed runs: each filter takes the right runs, and every item from a run
 * has the run, its trace, its input and its failing step. */
static void
test_dataset_from_runs_failing_steps(void **state)
{
    struct ds_fx *f = *state;
    char *failed = ds_run_failed(f);
    char *stuck = ds_run_stuck(f);
    char *ok = ds_run_completed(f);
    struct weft_dataset_source src = {.from_runs = true, .status = "failed"};
    struct weft_dataset ds;
    struct weft_dataset_item *it = NULL;
    struct weft_run_details *d = NULL;
    size_t n = 0;
    size_t added = 0;
    char err[512] = "";

    assert_weft_ok(weft_dataset_create(f->state, "fails", "failed builds", NULL, &src, &added, err,
                                       sizeof(err)));
    assert_int_equal(added, 1);
    ds_show(f, "fails", 0, &ds, &it, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ds.version, 1);
    assert_string_equal(ds.description, "failed builds");
    assert_string_equal(it[0].run_id, failed);
    assert_string_equal(it[0].fail_step, "build"); /* docs completed first */
    assert_string_equal(it[0].input, "\"build the thing\"");
    assert_weft_ok(weft_run_load(f->state, failed, &d));
    assert_non_null(d->info.trace_id);
    assert_string_equal(it[0].trace_id, d->info.trace_id);
    weft_run_details_free(d);
    weft_dataset_items_free(it, n);
    weft_dataset_cleanup(&ds);

    /* The stuck run: its failing step is the step it was stuck in. */
    memset(&src, 0, sizeof(src));
    src.from_runs = true;
    src.stuck = true;
    assert_weft_ok(
        weft_dataset_create(f->state, "stuck", NULL, NULL, &src, &added, err, sizeof(err)));
    ds_show(f, "stuck", 0, &ds, &it, &n);
    assert_int_equal(n, 1);
    assert_string_equal(it[0].run_id, stuck);
    assert_string_equal(it[0].fail_step, "test");
    weft_dataset_items_free(it, n);
    weft_dataset_cleanup(&ds);

    /* Explicit runs, in the order named; a completed run has no failing step; its JSON input is
     * kept as JSON. Filters narrow named runs when from_runs is set. */
    {
        const char *ids[] = {ok, failed, stuck};
        struct weft_dataset_source named = {.run_ids = ids, .run_id_count = 3};
        struct weft_dataset_source narrowed = {
            .from_runs = true, .workflow = "fine", .run_ids = ids, .run_id_count = 3};

        assert_weft_ok(
            weft_dataset_create(f->state, "named", NULL, NULL, &named, &added, err, sizeof(err)));
        assert_int_equal(added, 3);
        ds_show(f, "named", 0, &ds, &it, &n);
        assert_string_equal(it[0].run_id, ok);
        assert_null(it[0].fail_step);
        assert_string_equal(it[0].input, "{\"ticket\": 7}");
        assert_string_equal(it[1].run_id, failed);
        assert_string_equal(it[2].run_id, stuck);
        weft_dataset_items_free(it, n);
        weft_dataset_cleanup(&ds);
        assert_weft_ok(weft_dataset_create(f->state, "narrowed", NULL, NULL, &narrowed, &added, err,
                                           sizeof(err)));
        assert_int_equal(added, 1);
    }
    /* A run id that names no run fails the whole call: the dataset is not created. */
    {
        const char *ids[] = {"00000000-dead"};
        struct weft_dataset_source bad = {.run_ids = ids, .run_id_count = 1};

        assert_int_equal(
            weft_dataset_create(f->state, "nope", NULL, NULL, &bad, &added, err, sizeof(err)),
            WEFT_EINVAL);
        assert_non_null(strstr(err, "00000000-dead"));
        assert_int_equal(weft_dataset_show(f->state, "nope", 0, NULL, &it, &n), WEFT_ENOTFOUND);
    }
    /* Reward below: the completed run's reward is 0 too, the filter is on the run row. */
    memset(&src, 0, sizeof(src));
    src.from_runs = true;
    src.workflow = "builds";
    src.has_reward_below = true;
    src.reward_below = 0.5;
    assert_weft_ok(
        weft_dataset_add(f->state, "fails", &src, &added, &ds.version, err, sizeof(err)));
    assert_int_equal(added, 1);
    assert_int_equal(ds.version, 2);
    free(failed);
    free(stuck);
    free(ok);
}

/* JSONL and CSV files, versions, show @version, rm, drop. */
static void
test_dataset_files_versions_rm(void **state)
{
    struct ds_fx *f = *state;
    struct weft_dataset_source src = {0};
    struct weft_dataset ds;
    struct weft_dataset_item *it = NULL;
    struct weft_dataset *all = NULL;
    size_t n = 0;
    size_t added = 0;
    size_t removed = 0;
    uint64_t version = 0;
    char path[256];
    char err[512] = "";

    weft_test_write_file(f->dir, "items.jsonl",
                         "{\"input\": \"hello\", \"expected\": \"HELLO\"}\n"
                         "\n"
                         "{\"input\": {\"q\": 1}, \"assertions\": [{\"contains\": \"x\"}],"
                         " \"metadata\": {\"k\": \"v\"}, \"source\": \"ticket\"}\n");
    weft_test_write_file(f->dir, "items.csv",
                         "input,expected,tag\r\n"
                         "hi,HI,a\r\n"
                         "\"{\"\"x\"\": 2}\",\"two\nlines, with a comma\",b\r\n");
    assert_weft_ok(weft_dataset_create(f->state, "files", NULL, "{\"exact\": {}}", NULL, &added,
                                       err, sizeof(err)));
    assert_int_equal(added, 0);
    snprintf(path, sizeof(path), "%s/items.jsonl", f->dir);
    src.file = path;
    assert_weft_ok(weft_dataset_add(f->state, "files", &src, &added, &version, err, sizeof(err)));
    assert_int_equal(added, 2);
    assert_int_equal(version, 1);
    snprintf(path, sizeof(path), "%s/items.csv", f->dir);
    assert_weft_ok(weft_dataset_add(f->state, "files", &src, &added, &version, err, sizeof(err)));
    assert_int_equal(added, 2);
    assert_int_equal(version, 2);
    ds_show(f, "files", 0, &ds, &it, &n);
    assert_int_equal(n, 4);
    assert_string_equal(ds.evaluators, "{\"exact\": {}}");
    assert_string_equal(it[0].input, "\"hello\"");
    assert_string_equal(it[0].expected, "\"HELLO\"");
    assert_string_equal(it[0].metadata, "{}");
    assert_string_equal(it[1].input, "{\"q\":1}");
    assert_null(it[1].expected);
    assert_string_equal(it[1].assertions, "[{\"contains\":\"x\"}]");
    assert_string_equal(it[1].metadata, "{\"k\":\"v\",\"source\":\"ticket\"}");
    assert_string_equal(it[2].input, "\"hi\"");
    assert_string_equal(it[2].metadata, "{\"tag\":\"a\"}");
    assert_string_equal(it[3].input, "{\"x\":2}");
    assert_string_equal(it[3].expected, "\"two\\nlines, with a comma\"");
    assert_int_equal(it[3].added_version, 2);
    {
        char id[9];
        const char *ids[] = {id, it[2].id};

        snprintf(id, sizeof(id), "%.8s", it[0].id); /* a prefix will do */
        assert_weft_ok(
            weft_dataset_rm(f->state, "files", ids, 2, &removed, &version, err, sizeof(err)));
        assert_int_equal(removed, 2);
        assert_int_equal(version, 3);
        /* Removed items are gone from the latest version: naming one again fails, and changes
         * nothing (the other id stays). */
        assert_int_equal(
            weft_dataset_rm(f->state, "files", ids + 1, 1, &removed, &version, err, sizeof(err)),
            WEFT_ENOTFOUND);
        assert_non_null(strstr(err, "no item"));
    }
    weft_dataset_items_free(it, n);
    weft_dataset_cleanup(&ds);
    ds_show(f, "files", 0, &ds, &it, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ds.version, 3);
    assert_int_equal(ds.items, 2);
    assert_string_equal(it[0].input, "{\"q\":1}");
    weft_dataset_items_free(it, n);
    weft_dataset_cleanup(&ds);
    /* Older versions read as they were. */
    ds_show(f, "files", 1, NULL, &it, &n);
    assert_int_equal(n, 2);
    assert_string_equal(it[0].input, "\"hello\"");
    weft_dataset_items_free(it, n);
    ds_show(f, "files", 2, NULL, &it, &n);
    assert_int_equal(n, 4);
    weft_dataset_items_free(it, n);
    assert_int_equal(weft_dataset_show(f->state, "files", 4, NULL, &it, &n), WEFT_EINVAL);
    assert_weft_ok(weft_datasets_list(f->state, &all, &n));
    assert_int_equal(n, 1);
    assert_string_equal(all[0].name, "files");
    weft_datasets_free(all, n);
    /* A second create of the name is refused; drop deletes it. */
    assert_int_equal(
        weft_dataset_create(f->state, "files", NULL, NULL, NULL, &added, err, sizeof(err)),
        WEFT_ESTATE);
    assert_weft_ok(weft_dataset_drop(f->state, "files"));
    assert_int_equal(weft_dataset_drop(f->state, "files"), WEFT_ENOTFOUND);
    assert_weft_ok(weft_datasets_list(f->state, &all, &n));
    assert_int_equal(n, 0);
}

/* A bad line anywhere adds nothing, and says FILE:LINE: field: expected ... */
static void
expect_bad(struct ds_fx *f, const char *name, const char *text, weft_err want, const char *msg)
{
    struct weft_dataset_source src = {0};
    struct weft_dataset_item *it = NULL;
    struct weft_dataset ds;
    size_t n = 0;
    size_t added = 99;
    uint64_t version = 99;
    char path[256];
    char err[512] = "";

    weft_test_write_file(f->dir, name, text);
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    src.file = path;
    assert_int_equal(weft_dataset_add(f->state, "bad", &src, &added, &version, err, sizeof(err)),
                     want);
    assert_int_equal(added, 0);
    if (strstr(err, msg) == NULL) {
        fail_msg("expected '%s' in '%s'", msg, err);
    }
    assert_non_null(strstr(err, name));
    ds_show(f, "bad", 0, &ds, &it, &n);
    assert_int_equal(ds.version, 1);
    assert_int_equal(n, 1);
    weft_dataset_items_free(it, n);
    weft_dataset_cleanup(&ds);
}

static void
test_dataset_bad_lines_add_nothing(void **state)
{
    struct ds_fx *f = *state;
    struct weft_dataset_source src = {0};
    char path[256];
    char err[512] = "";
    size_t added = 0;
    char *big = NULL;

    weft_test_write_file(f->dir, "one.jsonl", "{\"input\": 1}\n");
    snprintf(path, sizeof(path), "%s/one.jsonl", f->dir);
    src.file = path;
    assert_weft_ok(
        weft_dataset_create(f->state, "bad", NULL, NULL, &src, &added, err, sizeof(err)));
    expect_bad(f, "a.jsonl", "{\"input\": 1}\n{\"input\": 2}\n{\"expected\": 3}\n", WEFT_EPARSE,
               "a.jsonl:3: input: expected a value");
    expect_bad(f, "b.jsonl", "{\"input\": 1}\n[1, 2]\n", WEFT_EPARSE,
               "b.jsonl:2: expected a JSON object");
    expect_bad(f, "c.jsonl", "{\"input\": 1\n", WEFT_EPARSE, "c.jsonl:1: expected a JSON object");
    expect_bad(f, "d.jsonl", "{\"input\": 1, \"metadata\": [1]}\n", WEFT_EPARSE,
               "d.jsonl:1: metadata: expected an object");
    expect_bad(f, "e.jsonl", "{\"input\": 1, \"assertions\": \"x\"}\n", WEFT_EPARSE,
               "e.jsonl:1: assertions: expected an array");
    expect_bad(f, "f.csv", "input,expected\na,b\nc\n", WEFT_EPARSE,
               "f.csv:3: expected 2 cells as the header has, got 1");
    expect_bad(f, "g.csv", "question,answer\na,b\n", WEFT_EPARSE,
               "g.csv:1: header: expected a row of column names with \"input\"");
    expect_bad(f, "h.csv", "input\n\"open\n", WEFT_EPARSE, "h.csv:2: expected a closing quote");
    expect_bad(f, "i.csv", "input,expected\n,b\n", WEFT_EPARSE, "i.csv:2: input: expected a value");
    /* A field over its bound: 1 MiB of input. */
    big = malloc(WEFT_DATASET_INPUT_MAX + 64);
    assert_non_null(big);
    memcpy(big, "{\"input\": \"", 11);
    memset(big + 11, 'x', WEFT_DATASET_INPUT_MAX);
    memcpy(big + 11 + WEFT_DATASET_INPUT_MAX, "\"}\n", 4);
    expect_bad(f, "j.jsonl", big, WEFT_ELIMIT, "j.jsonl:1: input: expected at most 1048576 bytes");
    free(big);
    /* A missing file, and a bad name. */
    src.file = "/nonexistent/items.jsonl";
    assert_int_equal(weft_dataset_add(f->state, "bad", &src, &added, NULL, err, sizeof(err)),
                     WEFT_ENOTFOUND);
    assert_non_null(strstr(err, "/nonexistent/items.jsonl: cannot open"));
    assert_int_equal(
        weft_dataset_create(f->state, "a b", NULL, NULL, NULL, &added, err, sizeof(err)),
        WEFT_EINVAL);
    assert_int_equal(weft_dataset_add(f->state, "missing", &src, &added, NULL, err, sizeof(err)),
                     WEFT_ENOTFOUND);
    assert_int_equal(
        weft_dataset_create(f->state, "ev", NULL, "[1,", NULL, &added, err, sizeof(err)),
        WEFT_EPARSE);
    assert_non_null(strstr(err, "evaluators: expected a JSON object or array"));
}

/* An experiment over a dataset version: begin, items (replaced when put again), end; read back
 * by list and load. */
static void
test_experiment_round_trip(void **state)
{
    struct ds_fx *f = *state;
    struct weft_dataset_source src = {0};
    struct weft_dataset_item *it = NULL;
    struct weft_experiment e = {0};
    struct weft_experiment *list = NULL;
    struct weft_experiment_item *rows = NULL;
    struct weft_experiment_item r = {0};
    char path[256];
    char err[512] = "";
    char id[37];
    size_t n = 0;
    size_t count = 0;

    weft_test_write_file(f->dir, "x.jsonl", "{\"input\": \"a\"}\n{\"input\": \"b\"}\n");
    snprintf(path, sizeof(path), "%s/x.jsonl", f->dir);
    src.file = path;
    assert_weft_ok(weft_dataset_create(f->state, "exp", NULL, NULL, &src, NULL, err, sizeof(err)));
    ds_show(f, "exp", 0, NULL, &it, &n);
    e.name = "baseline";
    e.dataset = "exp";
    e.dataset_version = 1;
    e.workflow = "builds";
    e.workflow_hash = "abc123";
    e.from_failure = true;
    assert_weft_ok(weft_experiment_begin(f->state, &e, id, err, sizeof(err)));
    r.item_id = it[0].id;
    r.run_id = "run-1";
    r.status = "running";
    assert_weft_ok(weft_experiment_item_put(f->state, id, &r, err, sizeof(err)));
    r.status = "passed";
    r.scores = "[{\"evaluator\":\"exact\",\"value\":1,\"passed\":true,\"explanation\":\"ok\"}]";
    r.tokens = 120;
    r.cost_usd = 0.25;
    r.duration_ns = 5000;
    r.loops = 2;
    r.stuck_loops = 1;
    r.corrections = 3;
    r.llm_calls = 4;
    assert_weft_ok(weft_experiment_item_put(f->state, id, &r, err, sizeof(err)));
    memset(&r, 0, sizeof(r));
    r.item_id = it[1].id;
    r.status = "errored";
    r.error = "judge failed";
    assert_weft_ok(weft_experiment_item_put(f->state, id, &r, err, sizeof(err)));
    /* Bad items and ends are refused with a reason. */
    r.status = "great";
    assert_int_equal(weft_experiment_item_put(f->state, id, &r, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "status: expected passed"));
    r.status = "failed";
    r.scores = "{}";
    assert_int_equal(weft_experiment_item_put(f->state, id, &r, err, sizeof(err)), WEFT_EINVAL);
    assert_int_equal(weft_experiment_item_put(f->state, "6b1f0c4e-0000-4000-8000-000000000000", &r,
                                              err, sizeof(err)),
                     WEFT_EINVAL); /* scores checked first */
    r.scores = NULL;
    assert_int_equal(weft_experiment_item_put(f->state, "6b1f0c4e-0000-4000-8000-000000000000", &r,
                                              err, sizeof(err)),
                     WEFT_ENOTFOUND);
    assert_weft_ok(weft_experiment_end(f->state, id, "completed", "{\"pass_rate\":0.5,\"items\":2}",
                                       err, sizeof(err)));
    {
        char other[37];

        e.dataset_version = 7; /* no such version */
        assert_int_equal(weft_experiment_begin(f->state, &e, other, err, sizeof(err)),
                         WEFT_ENOTFOUND);
        assert_non_null(strstr(err, "dataset version"));
    }
    weft_dataset_items_free(it, n);

    assert_weft_ok(weft_experiments_list(f->state, "exp", &list, &count));
    assert_int_equal(count, 1);
    assert_string_equal(list[0].id, id);
    assert_string_equal(list[0].status, "completed");
    weft_experiments_free(list, count);
    assert_weft_ok(weft_experiments_list(f->state, "other", &list, &count));
    assert_int_equal(count, 0);
    {
        char found[37];
        char prefix[9];

        /* By name, by a prefix of its id; an unknown or too short reference is refused. */
        assert_weft_ok(weft_experiment_resolve(f->state, "baseline", found));
        assert_string_equal(found, id);
        snprintf(prefix, sizeof(prefix), "%.8s", id);
        assert_weft_ok(weft_experiment_resolve(f->state, prefix, found));
        assert_string_equal(found, id);
        assert_int_equal(weft_experiment_resolve(f->state, "nope", found), WEFT_ENOTFOUND);
        assert_int_equal(weft_experiment_resolve(f->state, "ab", found), WEFT_ENOTFOUND);
    }
    assert_weft_ok(weft_experiment_load(f->state, id, &e, &rows, &count));
    assert_string_equal(e.name, "baseline");
    assert_string_equal(e.workflow_hash, "abc123");
    assert_true(e.from_failure);
    assert_int_equal(e.dataset_version, 1);
    assert_true(e.ended_ns >= e.started_ns && e.started_ns > 0);
    assert_string_equal(e.summary, "{\"pass_rate\":0.5,\"items\":2}");
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].status, "passed");
    assert_string_equal(rows[0].run_id, "run-1");
    assert_non_null(strstr(rows[0].scores, "\"evaluator\":\"exact\""));
    assert_int_equal(rows[0].tokens, 120);
    assert_true(rows[0].cost_usd > 0.24 && rows[0].cost_usd < 0.26);
    assert_int_equal(rows[0].duration_ns, 5000);
    assert_int_equal(rows[0].loops, 2);
    assert_int_equal(rows[0].stuck_loops, 1);
    assert_int_equal(rows[0].corrections, 3);
    assert_int_equal(rows[0].llm_calls, 4);
    assert_string_equal(rows[1].status, "errored");
    assert_string_equal(rows[1].scores, "[]");
    assert_string_equal(rows[1].error, "judge failed");
    assert_null(rows[1].run_id);
    weft_experiment_items_free(rows, count);
    weft_experiment_cleanup(&e);
    assert_int_equal(
        weft_experiment_load(f->state, "6b1f0c4e-0000-4000-8000-000000000000", &e, &rows, &count),
        WEFT_ENOTFOUND);
}

/* A version read in pages is the version read whole: 40 items, 5 removed at version 2, 40 more
 * added at version 3; version 2 read 7 at a time gives the same 35 items in the same order,
 * max 0 gives only the count, a page past the end is empty. */
static void
test_dataset_items_in_pages(void **state)
{
    struct ds_fx *f = *state;
    struct weft_dataset_source src = {0};
    struct weft_dataset ds;
    struct weft_dataset_item *whole = NULL;
    struct weft_dataset_item *page = NULL;
    const char *gone[5];
    size_t n = 0;
    size_t got = 0;
    size_t total = 0;
    size_t seen = 0;
    size_t added = 0;
    uint64_t version = 0;
    char text[4096] = "";
    char path[256];
    char err[512] = "";

    for (int i = 0; i < 40; i++) {
        snprintf(text + strlen(text), sizeof(text) - strlen(text), "{\"input\": \"q%d\"}\n", i);
    }
    weft_test_write_file(f->dir, "forty.jsonl", text);
    snprintf(path, sizeof(path), "%s/forty.jsonl", f->dir);
    src.file = path;
    assert_weft_ok(
        weft_dataset_create(f->state, "paged", NULL, NULL, &src, &added, err, sizeof(err)));
    ds_show(f, "paged", 1, &ds, &whole, &n);
    assert_int_equal(n, 40);
    for (int i = 0; i < 5; i++) {
        gone[i] = whole[3 + 7 * i].id; /* spread over the pages */
    }
    assert_weft_ok(weft_dataset_rm(f->state, "paged", gone, 5, NULL, &version, err, sizeof(err)));
    assert_int_equal(version, 2);
    weft_dataset_items_free(whole, n);
    weft_dataset_cleanup(&ds);
    assert_weft_ok(weft_dataset_add(f->state, "paged", &src, &added, &version, err, sizeof(err)));
    assert_int_equal(version, 3);
    ds_show(f, "paged", 2, &ds, &whole, &n);
    assert_int_equal(n, 35);
    weft_dataset_cleanup(&ds);
    for (size_t offset = 0;; offset += got) {
        assert_weft_ok(
            weft_dataset_items_page(f->state, "paged", 2, offset, 7, NULL, &page, &got, &total));
        assert_int_equal(total, 35);
        for (size_t i = 0; i < got; i++) {
            assert_true(seen + i < n);
            assert_string_equal(page[i].id, whole[seen + i].id);
            assert_string_equal(page[i].input, whole[seen + i].input);
        }
        seen += got;
        weft_dataset_items_free(page, got);
        if (got < 7) {
            break;
        }
    }
    assert_int_equal(seen, 35);
    weft_dataset_items_free(whole, n);
    assert_weft_ok(weft_dataset_items_page(f->state, "paged", 0, 0, 0, &ds, &page, &got, &total));
    assert_int_equal(got, 0);
    assert_null(page);
    assert_int_equal(total, 75);
    assert_int_equal(ds.version, 3);
    weft_dataset_cleanup(&ds);
    assert_weft_ok(weft_dataset_items_page(f->state, "paged", 3, 500, 10, NULL, &page, &got, NULL));
    assert_int_equal(got, 0);
    assert_int_equal(
        weft_dataset_items_page(f->state, "paged", 4, 0, 10, NULL, &page, &got, &total),
        WEFT_EINVAL);
    assert_int_equal(weft_dataset_items_page(f->state, "nope", 0, 0, 10, NULL, &page, &got, &total),
                     WEFT_ENOTFOUND);
}

#define DATASET_CASES(setup, teardown)                                                        \
    cmocka_unit_test_setup_teardown(test_dataset_from_runs_failing_steps, setup, teardown),   \
        cmocka_unit_test_setup_teardown(test_dataset_files_versions_rm, setup, teardown),     \
        cmocka_unit_test_setup_teardown(test_dataset_bad_lines_add_nothing, setup, teardown), \
        cmocka_unit_test_setup_teardown(test_experiment_round_trip, setup, teardown),         \
        cmocka_unit_test_setup_teardown(test_dataset_items_in_pages, setup, teardown)

#endif /* WEFT_TESTS_DATASET_CASES_H */
