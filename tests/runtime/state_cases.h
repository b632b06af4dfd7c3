/* tests/runtime/state_cases.h - the run state store's behaviour (runtime/state/state.h), written
 * once and run against both backends: tests/runtime/test_state.c includes it over SQLite files,
 * tests/runtime_pg/test_state_pg.c over a real PostgreSQL. Each case is one behaviour of the
 * interface: cached statements stay correct across many writes, scripted cursors are saved
 * one queue at a time, weft__state_begin()/weft__state_commit() group writes into one
 * transaction that a failed write rolls back whole; runs written and read back, steps (with
 * their task UUID, redeliveries and dispatched flag), messages, exchanges, corrections (DAG
 * surgery, also inside a caller's transaction), run ids resolved by prefix, the owner lease,
 * heartbeat and recovery of runs whose process died, and out of memory at every allocation.
 *
 * The cases look at the store through SQL on weft's SQLite names (tables runs and steps, their
 * columns): the PostgreSQL test creates views of those names over its workflows and tasks
 * tables, so one query checks both. The including file defines, before including this one:
 *
 *   struct fx { struct rt_state *st; char location[...]; ... };  the handle and its location
 *   static long long fx_count(struct fx *f, const char *sql);     first column of the first row
 *   static void fx_exec(struct fx *f, const char *sqlite_sql, const char *pg_sql);
 *
 * and lists STATE_CASES(setup, teardown) in its cmocka group. */
#ifndef WEFT_TESTS_STATE_CASES_H
#define WEFT_TESTS_STATE_CASES_H

#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/uuid.h"
#include "runtime/state/state.h"
#include "store/payload.h"
#include "support/failalloc.h"
#include "support/weft_test.h"
#include "tracing/redact.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void
test_state_cached_statements_write_every_row(void **state)
{
    struct fx *f = *state;
    struct plan_step step;

    memset(&step, 0, sizeof(step));
    assert_int_equal(weft__state_run_begin(f->st, "r1", "wf", NULL, "s1", "in", 1), WEFT_OK);
    /* The same cached INSERT 500 times, with different bindings each time. */
    for (int i = 0; i < 500; i++) {
        char id[16];
        char task[32];
        snprintf(id, sizeof(id), "s%d", i);
        snprintf(task, sizeof(task), "task %d", i);
        step.id = id;
        step.task = task;
        step.status = i % 2 == 0 ? STEP_COMPLETED : STEP_PENDING;
        assert_int_equal(weft__state_step_save(f->st, "r1", (size_t)i, &step, "worker"), WEFT_OK);
    }
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r1'"), 500);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE status = 'completed'"), 250);
    /* A binding never outlives its call: the last row has its own task, not a neighbour's. */
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE idx = 499 AND"
                                 " task = 'task 499' AND step_id = 's499'"),
                     1);
}

static void
test_state_cursors_are_saved_per_queue(void **state)
{
    struct fx *f = *state;
    json_t *first = json_pack("{s:i, s:i}", "coder/act", 2, "tester/act", 1);
    json_t *second = json_pack("{s:i}", "coder/act", 5);
    json_t *out = NULL;

    assert_int_equal(weft__state_cursors_save(f->st, "sess", "script.json", first), WEFT_OK);
    assert_int_equal(weft__state_cursors_save(f->st, "sess", "script.json", second), WEFT_OK);
    assert_int_equal(weft__state_cursors_load(f->st, "sess", "script.json", &out), WEFT_OK);
    assert_non_null(out);
    assert_int_equal(json_integer_value(json_object_get(out, "coder/act")), 5);
    assert_int_equal(json_integer_value(json_object_get(out, "tester/act")), 1);
    json_decref(out);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM script_cursor_keys"), 2);
    /* Another session or script sees nothing. */
    assert_int_equal(weft__state_cursors_load(f->st, "other", "script.json", &out), WEFT_OK);
    assert_null(out);
    assert_int_equal(weft__state_cursors_load(f->st, "sess", "other.json", &out), WEFT_OK);
    assert_null(out);
    json_decref(first);
    json_decref(second);
}

static void
test_state_transaction_groups_writes_and_rolls_back_on_failure(void **state)
{
    struct fx *f = *state;
    struct plan_step step;
    json_t *cursors = json_pack("{s:i}", "a/act", 1);

    memset(&step, 0, sizeof(step));
    step.id = "s0";
    step.task = "t";
    step.status = STEP_COMPLETED;
    assert_int_equal(weft__state_run_begin(f->st, "r2", "wf", NULL, "s2", NULL, 1), WEFT_OK);
    /* Nested pairs: nothing is visible to another connection before the outermost commit. */
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_step_save(f->st, "r2", 0, &step, "a"), WEFT_OK);
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_cursors_save(f->st, "s2", "x.json", cursors), WEFT_OK);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 0);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 1);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM script_cursor_keys"), 1);

    /* A write that fails inside (a trigger refuses it) rolls back the step saved before it. */
    fx_exec(f,
            "CREATE TRIGGER no_cursors BEFORE INSERT ON script_cursor_keys"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END",
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'refused'; END $$;"
            " CREATE TRIGGER no_cursors BEFORE INSERT ON script_cursor_keys"
            " FOR EACH ROW EXECUTE FUNCTION refuse()");
    weft_test_capture_logs();
    step.id = "s1";
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_step_save(f->st, "r2", 1, &step, "a"), WEFT_OK);
    json_object_set_new(cursors, "b/act", json_integer(4));
    assert_int_equal(weft__state_cursors_save(f->st, "s2", "y.json", cursors), WEFT_EIO);
    assert_int_equal(weft__state_commit(f->st), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "refused"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 1);
    /* The handle is usable afterwards. */
    step.id = "s2";
    assert_int_equal(weft__state_step_save(f->st, "r2", 2, &step, "a"), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 2);
    json_decref(cursors);
}

/* A lazy transaction (weft__state_begin_lazy) groups and commits like an ordinary one, alone
 * or nested in one, and the handle's later ordinary transactions work as before. */
static void
test_state_lazy_transaction_commits_like_an_ordinary_one(void **state)
{
    struct fx *f = *state;
    struct plan_step step;

    memset(&step, 0, sizeof(step));
    step.id = "s0";
    step.task = "t";
    step.status = STEP_IN_PROGRESS;
    step.is_dispatched = true;
    assert_int_equal(weft__state_run_begin(f->st, "rl", "wf", NULL, "sl", NULL, 1), WEFT_OK);
    assert_int_equal(weft__state_begin_lazy(f->st), WEFT_OK);
    assert_true(weft__state_in_transaction(f->st));
    assert_int_equal(weft__state_step_save(f->st, "rl", 0, &step, "a"), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'rl'"), 0);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_false(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'rl'"
                                 " AND status = 'in_progress'"),
                     1);
    /* Nested in an ordinary transaction: part of it, visible at the outer commit only. */
    step.id = "s1";
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_begin_lazy(f->st), WEFT_OK);
    assert_int_equal(weft__state_step_save(f->st, "rl", 1, &step, "a"), WEFT_OK);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'rl'"), 1);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'rl'"), 2);
    /* Then an ordinary transaction: the step ends. */
    step.status = STEP_COMPLETED;
    step.is_dispatched = false;
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_step_save(f->st, "rl", 1, &step, "a"), WEFT_OK);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'rl'"
                                 " AND status = 'completed'"),
                     1);
}

static void
test_state_run_begin_end_and_info_round_trip(void **state)
{
    struct fx *f = *state;
    struct weft_run_info info;
    struct weft__state_run_end end;

    assert_weft_ok(
        weft__state_run_begin(f->st, "run-a", "review", "wf/review.json", "sess-a", "hello", 1000));
    assert_weft_ok(weft__state_run_info(f->st, "run-a", &info));
    assert_string_equal(info.run_id, "run-a");
    assert_string_equal(info.workflow, "review");
    assert_string_equal(info.workflow_path, "wf/review.json");
    assert_string_equal(info.session_id, "sess-a");
    assert_string_equal(info.input, "hello");
    assert_string_equal(info.status, "running"); /* no owner recorded: cannot be called dead */
    assert_int_equal(info.started_ns, 1000);
    assert_int_equal(info.ended_ns, 0);
    assert_null(info.trace_id);
    weft__state_info_cleanup(&info);
    assert_null(info.run_id);

    assert_weft_ok(weft__state_run_trace(f->st, "run-a", "0af7651916cd43dd8448eb211c80319c",
                                         "b7ad6b7169203331"));
    memset(&end, 0, sizeof(end));
    end.status = "failed";
    end.reason = "budget";
    end.output = "partial";
    end.iterations = 3;
    end.input_tokens = 10;
    end.output_tokens = 20;
    end.cost_usd = 0.5;
    end.ended_ns = 5000;
    end.reward = -1.0;
    end.corrections = 1;
    end.loops = "{\"replan\":2}";
    assert_weft_ok(weft__state_run_end(f->st, "run-a", &end));
    /* Resumed: running again under a new trace; counters add up over both processes. */
    assert_weft_ok(
        weft__state_run_begin(f->st, "run-a", "review", NULL, "sess-a", "ignored", 9000));
    assert_weft_ok(weft__state_run_trace(f->st, "run-a", "11111111111111111111111111111111",
                                         "2222222222222222"));
    assert_weft_ok(weft__state_run_info(f->st, "run-a", &info));
    assert_string_equal(info.status, "running");
    assert_int_equal(info.ended_ns, 0);
    assert_int_equal(info.started_ns, 1000); /* the first start stays */
    assert_string_equal(info.input, "hello");
    assert_string_equal(info.resumed_from_trace, "0af7651916cd43dd8448eb211c80319c");
    assert_string_equal(info.trace_id, "11111111111111111111111111111111");
    weft__state_info_cleanup(&info);
    end.status = "completed";
    end.reason = NULL;
    end.ended_ns = 12000;
    assert_weft_ok(weft__state_run_end(f->st, "run-a", &end));
    assert_weft_ok(weft__state_run_info(f->st, "run-a", &info));
    assert_string_equal(info.status, "completed");
    assert_null(info.reason);
    assert_int_equal(info.iterations, 6);
    assert_int_equal(info.input_tokens, 20);
    assert_int_equal(info.output_tokens, 40);
    assert_true(info.cost_usd > 0.99 && info.cost_usd < 1.01);
    assert_int_equal(info.ended_ns, 12000);
    assert_int_equal(info.corrections, 1);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE output = 'partial'"), 1);
    assert_string_equal(info.loops, "{\"replan\":2}");
    weft__state_info_cleanup(&info);
    assert_int_equal(weft__state_run_info(f->st, "nope", &info), WEFT_ENOTFOUND);
    assert_null(info.run_id);
}

static void
test_state_inputs_are_redacted_on_disk(void **state)
{
    struct fx *f = *state;

    assert_weft_ok(weft__state_run_begin(f->st, "run-s", "wf", NULL, "s",
                                         "use sk-proj-"
                                         "abcdefghijklmnopqrstuvwxyz0123456789 please",
                                         1));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE input LIKE"
                                 " '%abcdefghijklmnopqrstuvwxyz0123456789%'"),
                     0);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE id = 'run-s'"), 1);
}

struct rows {
    size_t n;
    char ids[8][16];
    char status[8][16];
    unsigned attempts[8];
    bool has_reward[8];
    double reward[8];
    char spec[8][64];
    char error[8][64];
    size_t stop_after; /* return WEFT_ELIMIT after this many rows; 0: never */
};

static weft_err
collect_step(const struct state_step_row *row, void *user_data)
{
    struct rows *r = user_data;

    assert_true(r->n < 8);
    snprintf(r->ids[r->n], sizeof(r->ids[0]), "%s", row->id);
    snprintf(r->status[r->n], sizeof(r->status[0]), "%s", row->status);
    snprintf(r->spec[r->n], sizeof(r->spec[0]), "%s", row->spec != NULL ? row->spec : "-");
    snprintf(r->error[r->n], sizeof(r->error[0]), "%s", row->error != NULL ? row->error : "-");
    r->attempts[r->n] = row->attempts;
    r->has_reward[r->n] = row->has_reward;
    r->reward[r->n] = row->reward;
    r->n++;
    return r->stop_after != 0 && r->n == r->stop_after ? WEFT_ELIMIT : WEFT_OK;
}

static void
test_state_steps_save_update_and_read_in_plan_order(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    struct rows rows;
    const char *deps[1] = {"a"};

    memset(&rows, 0, sizeof(rows));
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "first", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "b", 0, "second", deps, 1, NULL));
    plan.steps[1].executor = EXEC_COMMAND;
    plan.steps[1].spec = json_pack("{s:[s,s]}", "argv", "make", "test");
    plan.steps[1].error = json_pack("{s:i}", "exit_code", 2);
    plan.steps[1].error_type = weft__strdup("exit_status");
    plan.steps[1].has_reward = true;
    plan.steps[1].reward = -1.1;
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    /* Saved out of order: read back by index. */
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "command"));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    plan.steps[0].status = STEP_COMPLETED;
    plan.steps[0].attempts = 2;
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_steps_each(f->st, "r", collect_step, &rows));
    assert_int_equal(rows.n, 2);
    assert_string_equal(rows.ids[0], "a");
    assert_string_equal(rows.status[0], "completed");
    assert_int_equal(rows.attempts[0], 2);
    assert_false(rows.has_reward[0]);
    assert_string_equal(rows.spec[0], "-");
    assert_string_equal(rows.ids[1], "b");
    assert_true(rows.has_reward[1]);
    assert_true(rows.reward[1] < -1.0);
    assert_string_equal(rows.spec[1], "{\"argv\":[\"make\",\"test\"]}");
    assert_string_equal(rows.error[1], "{\"exit_code\":2}");
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE idx = 1 AND"
                                 " executor = 'command' AND depends_on = '[\"a\"]'"
                                 " AND error_type = 'exit_status'"),
                     1);
    /* The callback's error stops the walk and is returned. */
    memset(&rows, 0, sizeof(rows));
    rows.stop_after = 1;
    assert_int_equal(weft__state_steps_each(f->st, "r", collect_step, &rows), WEFT_ELIMIT);
    assert_int_equal(rows.n, 1);
    /* Another run has no steps. */
    memset(&rows, 0, sizeof(rows));
    assert_weft_ok(weft__state_steps_each(f->st, "other", collect_step, &rows));
    assert_int_equal(rows.n, 0);
    weft__plan_cleanup(&plan);
}

struct run_ids {
    size_t n;
    char ids[8][16];
};

static weft_err
collect_id(struct weft_run_info *info, void *user_data)
{
    struct run_ids *r = user_data;

    snprintf(r->ids[r->n++], sizeof(r->ids[0]), "%s", info->run_id);
    return r->n == 2 ? WEFT_ELIMIT : WEFT_OK;
}

static void
test_state_runs_list_newest_first_with_limit(void **state)
{
    struct fx *f = *state;
    struct weft_run_info *infos = NULL;
    struct run_ids ids;
    size_t count = 99;

    assert_weft_ok(weft__state_runs_list(f->st, 10, &infos, &count));
    assert_int_equal(count, 0);
    weft__free(infos);
    assert_weft_ok(weft__state_run_begin(f->st, "old", "wf", NULL, "s", NULL, 100));
    assert_weft_ok(weft__state_run_begin(f->st, "new", "wf", NULL, "s", NULL, 300));
    assert_weft_ok(weft__state_run_begin(f->st, "mid", "wf", NULL, "s", NULL, 200));
    assert_weft_ok(weft__state_runs_list(f->st, 2, &infos, &count));
    assert_int_equal(count, 2);
    assert_string_equal(infos[0].run_id, "new");
    assert_string_equal(infos[1].run_id, "mid");
    for (size_t i = 0; i < count; i++) {
        weft__state_info_cleanup(&infos[i]);
    }
    weft__free(infos);
    assert_weft_ok(weft__state_runs_list(f->st, 0, &infos, &count));
    assert_int_equal(count, 0);
    weft__free(infos);
    /* The iterator stops at the callback's first error and returns it. */
    memset(&ids, 0, sizeof(ids));
    assert_int_equal(weft__state_runs_each(f->st, 10, collect_id, &ids), WEFT_ELIMIT);
    assert_int_equal(ids.n, 2);
    assert_string_equal(ids.ids[1], "mid");
}

static void
test_state_run_resolve_by_prefix(void **state)
{
    struct fx *f = *state;
    char id[64];
    char err[128];

    assert_int_equal(weft__state_run_resolve(f->st, "last", id, sizeof(id), err, sizeof(err)),
                     WEFT_ENOTFOUND);
    assert_non_null(strstr(err, "no run 'last'"));
    assert_weft_ok(weft__state_run_begin(f->st, "abc", "wf", NULL, "s", NULL, 1));
    for (int i = 0; i < 6; i++) {
        char run[16];
        snprintf(run, sizeof(run), "abc%d", i);
        assert_weft_ok(weft__state_run_begin(f->st, run, "wf", NULL, "s", NULL, 10 + (uint64_t)i));
    }
    assert_weft_ok(weft__state_run_begin(f->st, "xyz9", "wf", NULL, "s", NULL, 5));
    assert_weft_ok(weft__state_run_resolve(f->st, "last", id, sizeof(id), err, sizeof(err)));
    assert_string_equal(id, "abc5");
    assert_weft_ok(weft__state_run_resolve(f->st, "xy", id, sizeof(id), err, sizeof(err)));
    assert_string_equal(id, "xyz9");
    assert_weft_ok(weft__state_run_resolve(f->st, "abc3", id, sizeof(id), err, sizeof(err)));
    assert_string_equal(id, "abc3");
    /* An exact id wins even when six newer runs start with it (it used to look ambiguous
     * once more than four did). */
    assert_weft_ok(weft__state_run_resolve(f->st, "abc", id, sizeof(id), err, sizeof(err)));
    assert_string_equal(id, "abc");
    assert_int_equal(weft__state_run_resolve(f->st, "ab", id, sizeof(id), err, sizeof(err)),
                     WEFT_EINVAL);
    assert_non_null(strstr(err, "matches several runs"));
    assert_int_equal(weft__state_run_resolve(f->st, "q", id, sizeof(id), err, sizeof(err)),
                     WEFT_ENOTFOUND);
    assert_non_null(strstr(err, "no run 'q'"));
    /* LIKE wildcards and empty or overlong references are not run ids. */
    assert_int_equal(weft__state_run_resolve(f->st, "a%", id, sizeof(id), err, sizeof(err)),
                     WEFT_EINVAL);
    assert_non_null(strstr(err, "is not a run id"));
    assert_int_equal(weft__state_run_resolve(f->st, "a_c", id, sizeof(id), err, sizeof(err)),
                     WEFT_EINVAL);
    assert_int_equal(weft__state_run_resolve(f->st, "", id, sizeof(id), err, sizeof(err)),
                     WEFT_EINVAL);
    assert_int_equal(
        weft__state_run_resolve(f->st,
                                "0123456789012345678901234567890123456789012345678901234"
                                "5678901234",
                                id, sizeof(id), err, sizeof(err)),
        WEFT_EINVAL);
}

static void
test_state_messages_keep_the_last_ones_oldest_first(void **state)
{
    struct fx *f = *state;
    json_t *msgs = NULL;

    for (int i = 0; i < 5; i++) {
        char text[16];
        snprintf(text, sizeof(text), "m%d", i);
        assert_weft_ok(weft__state_message_add(f->st, "chat", "r",
                                               i % 2 == 0 ? "user" : "assistant", text,
                                               i == 3 ? "research" : NULL));
    }
    assert_weft_ok(weft__state_message_add(f->st, "other", "r", "user", NULL, NULL));
    assert_weft_ok(weft__state_messages_load(f->st, "chat", 3, &msgs));
    assert_int_equal(json_array_size(msgs), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                        "m2");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 1), "route")),
                        "research");
    assert_true(json_is_null(json_object_get(json_array_get(msgs, 2), "route")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 2), "role")),
                        "user");
    json_decref(msgs);
    assert_weft_ok(weft__state_messages_load(f->st, "other", 10, &msgs));
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                        ""); /* NULL content is kept as "" */
    json_decref(msgs);
    assert_weft_ok(weft__state_messages_load(f->st, "nobody", 10, &msgs));
    assert_int_equal(json_array_size(msgs), 0);
    json_decref(msgs);
}

static void
test_state_exchanges_make_a_replayable_script(void **state)
{
    struct fx *f = *state;
    json_t *e1 = json_pack("{s:s}", "content", "one");
    json_t *e2 = json_pack("{s:s}", "content", "two");
    json_t *e3 = json_pack("{s:s}", "content", "plan");
    json_t *script = NULL;
    json_t *list = NULL;
    json_t *counts = NULL;
    uint64_t mid = 0;

    assert_int_equal(weft__state_exchanges_script(f->st, "r", &script), WEFT_ENOTFOUND);
    assert_null(script);
    assert_weft_ok(weft__state_exchange_add(f->st, "r", "coder", "act", e1));
    assert_weft_ok(weft__state_exchange_add(f->st, "r", "planner", "plan", e3));
    mid = weft__now_ns();
    while (weft__now_ns() == mid) {
        /* the next exchange is stored strictly after mid */
    }
    assert_weft_ok(weft__state_exchange_add(f->st, "r", "coder", "act", e2));
    assert_weft_ok(weft__state_exchange_add(f->st, "other", "coder", "act", e3));
    /* A fork positions its scripts at the calls made before the forked step (fork.c). */
    assert_weft_ok(weft__state_exchange_counts(f->st, "r", mid + 1, &counts));
    assert_int_equal(json_object_size(counts), 2);
    assert_int_equal(json_integer_value(json_object_get(counts, "coder/act")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "planner/plan")), 1);
    json_decref(counts);
    assert_weft_ok(weft__state_exchange_counts(f->st, "r", UINT64_MAX, &counts));
    assert_int_equal(json_integer_value(json_object_get(counts, "coder/act")), 2);
    json_decref(counts);
    assert_weft_ok(weft__state_exchange_counts(f->st, "nobody", UINT64_MAX, &counts));
    assert_int_equal(json_object_size(counts), 0);
    json_decref(counts);
    assert_weft_ok(weft__state_exchanges_script(f->st, "r", &script));
    assert_int_equal(json_integer_value(json_object_get(script, "version")), 1);
    list = json_object_get(json_object_get(json_object_get(script, "responses"), "coder"), "act");
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "content")),
                        "one");
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "content")),
                        "two");
    list =
        json_object_get(json_object_get(json_object_get(script, "responses"), "planner"), "plan");
    assert_int_equal(json_array_size(list), 1);
    json_decref(script);
    json_decref(e1);
    json_decref(e2);
    json_decref(e3);
}

struct corrections {
    size_t n;
    unsigned seq[4];
    char failed[4][16];
    char inserted[4][64];
    char after[4][64];
};

static weft_err
collect_correction(const struct weft_run_correction *c, void *user_data)
{
    struct corrections *r = user_data;

    r->seq[r->n] = c->seq;
    snprintf(r->failed[r->n], sizeof(r->failed[0]), "%s", c->failed_step);
    snprintf(r->inserted[r->n], sizeof(r->inserted[0]), "%s", c->inserted);
    snprintf(r->after[r->n], sizeof(r->after[0]), "%s", c->depends_after);
    r->n++;
    return WEFT_OK;
}

/* A plan a, b (failed) and corrective steps c1, c2 appended; b rewired onto c2. */
static void
surgery_plan(struct plan *plan)
{
    const char *deps_b[1] = {"a"};
    const char *deps_c2[1] = {"c1"};

    weft__plan_init(plan);
    assert_weft_ok(weft__plan_append(plan, "a", 0, "t", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(plan, "b", 0, "t", deps_b, 1, NULL));
    assert_weft_ok(weft__plan_append(plan, "c1", 0, "fix", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(plan, "c2", 0, "fix more", deps_c2, 1, NULL));
    plan->steps[2].parent = weft__strdup("b");
    plan->steps[3].parent = weft__strdup("b");
    plan->steps[1].status = STEP_PAUSED;
}

static void
test_state_surgery_records_steps_and_correction(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    struct corrections cs;
    json_t *before = json_pack("[s]", "a");
    json_t *after = json_pack("[s,s]", "a", "c2");
    const char *actors[4] = {"coder", "coder", "fixer", "fixer"};

    memset(&cs, 0, sizeof(cs));
    surgery_plan(&plan);
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    assert_weft_ok(
        weft__state_surgery(f->st, "r", &plan, 1, 2, 1, "exit_status", before, after, actors));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r'"), 4);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE step_id = 'b' AND"
                                 " status = 'paused'"),
                     1);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE parent = 'b' AND"
                                 " agent = 'fixer'"),
                     2);
    assert_weft_ok(weft__state_corrections_each(f->st, "r", collect_correction, &cs));
    assert_int_equal(cs.n, 1);
    assert_int_equal(cs.seq[0], 1);
    assert_string_equal(cs.failed[0], "b");
    assert_string_equal(cs.inserted[0], "[\"c1\",\"c2\"]");
    assert_string_equal(cs.after[0], "[\"a\",\"c2\"]");
    weft__plan_cleanup(&plan);
    json_decref(before);
    json_decref(after);
}

/* Surgery joins a transaction its caller opened (it used to fail there with a nested BEGIN),
 * and a failed surgery rolls back all of it. */
static void
test_state_surgery_nests_in_a_transaction_and_rolls_back_whole(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    json_t *deps = json_pack("[s]", "a");
    const char *actors[4] = {"coder", "coder", "fixer", "fixer"};

    surgery_plan(&plan);
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_surgery(f->st, "r", &plan, 1, 2, 1, NULL, deps, deps, actors));
    assert_true(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM corrections"), 0);
    assert_weft_ok(weft__state_commit(f->st));
    assert_false(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM corrections"), 1);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps"), 4);

    /* The same correction number again: its insert fails, and none of the steps stay. */
    weft_test_capture_logs();
    assert_weft_ok(weft__plan_append(&plan, "c3", 0, "again", NULL, 0, NULL));
    assert_int_equal(weft__state_surgery(f->st, "r", &plan, 1, 4, 1, NULL, deps, deps,
                                         (const char *[]){"c", "c", "f", "f", "f"}),
                     WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "rolled back"));
    assert_false(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps"), 4);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM corrections"), 1);
    /* The handle still writes. */
    assert_weft_ok(weft__state_step_save(f->st, "r", 4, &plan.steps[4], "f"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps"), 5);
    weft__plan_cleanup(&plan);
    json_decref(deps);
}

struct recovered {
    size_t n;
    char run[16];
    char reason[256];
    size_t open_steps;
    char open_name[64];
    char open_span[32];
    uint64_t ended_ns;
};

static void
on_recovered(const struct weft_interrupted_run *run, void *user_data)
{
    struct recovered *r = user_data;

    r->n++;
    snprintf(r->run, sizeof(r->run), "%s", run->run_id);
    snprintf(r->reason, sizeof(r->reason), "%s", run->reason);
    r->open_steps = run->open_step_count;
    r->ended_ns = run->ended_ns;
    if (run->open_step_count > 0) {
        snprintf(r->open_name, sizeof(r->open_name), "%s", run->open_steps[0].name);
        snprintf(r->open_span, sizeof(r->open_span), "%s", run->open_steps[0].span_id);
    }
}

static void
test_state_lease_is_exclusive_and_recover_marks_dead_owners(void **state)
{
    struct fx *f = *state;
    struct rt_state *other = NULL;
    struct state_owner holder;
    struct weft_run_info info;
    struct recovered rec;
    struct plan plan;
    char err[256] = "";
    char sql[256];
    size_t count = 99;
    pid_t child = fork();
    int status = 0;

    assert_true(child >= 0);
    if (child == 0) {
        _exit(0);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    memset(&rec, 0, sizeof(rec));
    assert_weft_ok(weft__state_open(f->location, &other, err, sizeof(err)));
    assert_weft_ok(weft__state_run_begin(f->st, "r1", "wf", NULL, "s", NULL, 100));
    assert_int_equal(weft__state_lease_acquire(f->st, "missing", &holder), WEFT_ENOTFOUND);
    assert_weft_ok(weft__state_lease_acquire(f->st, "r1", &holder));
    assert_weft_ok(weft__state_lease_acquire(f->st, "r1", &holder)); /* again: already ours */
    /* A second handle (another process, as far as the store knows) is refused. */
    assert_int_equal(weft__state_lease_acquire(other, "r1", &holder), WEFT_ESTATE);
    assert_int_equal(holder.pid, getpid());
    assert_true(holder.host[0] != '\0');
    assert_true(holder.since_ns > 0);
    /* The heartbeat is throttled: right after the lease it writes nothing. */
    assert_weft_ok(weft__state_heartbeat(f->st, "r1"));
    assert_weft_ok(weft__state_heartbeat(other, "r1")); /* not the owner: a no-op */
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE heartbeat_ns ="
                                 " owner_since_ns"),
                     1);
    assert_weft_ok(weft__state_lease_release(other, "r1")); /* owns nothing: a no-op */
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE owner_token IS NULL"), 0);
    assert_weft_ok(weft__state_lease_release(f->st, "r1"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE owner_token IS NULL"), 1);
    assert_weft_ok(weft__state_lease_acquire(other, "r1", &holder));

    /* The owner dies with a step in progress: the run reads as interrupted at once ... */
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "t", NULL, 0, NULL));
    plan.steps[0].status = STEP_IN_PROGRESS;
    plan.steps[0].ended_ns = 0;
    memset(plan.steps[0].span.trace_id, 0xab, sizeof(plan.steps[0].span.trace_id));
    memset(plan.steps[0].span.span_id, 0xcd, sizeof(plan.steps[0].span.span_id));
    assert_weft_ok(weft__state_step_save(other, "r1", 0, &plan.steps[0], "coder"));
    snprintf(sql, sizeof(sql), "UPDATE runs SET owner_pid = %d, heartbeat_ns = 777 WHERE id = 'r1'",
             (int)child);
    fx_exec(f, sql, sql);
    assert_weft_ok(weft__state_run_info(f->st, "r1", &info));
    assert_string_equal(info.status, "interrupted");
    assert_int_equal(info.ended_ns, 777);
    weft__state_info_cleanup(&info);
    /* ... and recovery marks it so, once, with the spans the kill left open. */
    assert_weft_ok(weft__state_recover(f->st, on_recovered, &rec, &count));
    assert_int_equal(count, 1);
    assert_int_equal(rec.n, 1);
    assert_string_equal(rec.run, "r1");
    assert_non_null(strstr(rec.reason, "weft resume r1"));
    assert_int_equal(rec.open_steps, 1);
    assert_string_equal(rec.open_name, "invoke_agent coder");
    assert_string_equal(rec.open_span, "cdcdcdcdcdcdcdcd");
    assert_int_equal(rec.ended_ns, 777);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE status = 'interrupted'"
                                 " AND owner_token IS NULL"),
                     1);
    assert_weft_ok(weft__state_recover(f->st, NULL, NULL, &count));
    assert_int_equal(count, 0);
    /* A run owned by a live process is left alone. */
    assert_weft_ok(weft__state_run_begin(f->st, "r2", "wf", NULL, "s", NULL, 100));
    assert_weft_ok(weft__state_lease_acquire(f->st, "r2", &holder));
    assert_weft_ok(weft__state_recover(other, NULL, NULL, &count));
    assert_int_equal(count, 0);
    weft__plan_cleanup(&plan);
    weft__state_close(other);
}

static void
test_state_run_hash_and_root(void **state)
{
    struct fx *f = *state;
    char hash[80];

    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_int_equal(weft__state_run_hash_get(f->st, "r", hash, sizeof(hash)), WEFT_ENOTFOUND);
    assert_string_equal(hash, "");
    assert_int_equal(weft__state_run_hash_get(f->st, "missing", hash, sizeof(hash)),
                     WEFT_ENOTFOUND);
    assert_weft_ok(weft__state_run_hash_set(f->st, "r", "sha256:abcd"));
    assert_weft_ok(weft__state_run_hash_get(f->st, "r", hash, sizeof(hash)));
    assert_string_equal(hash, "sha256:abcd");
    assert_weft_ok(weft__state_run_root(f->st, "r", "invoke_workflow wf", NULL, 42));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM runs WHERE root_started_ns = 42"
                                 " AND root_span_name = 'invoke_workflow wf'"
                                 " AND root_parent_span_id IS NULL"),
                     1);
}

/* The workflow snapshot (SQLite schema 11, PostgreSQL migration 7) is stored as given, byte
 * for byte (no redaction rewrites a file the run loaded), and reads NOTFOUND before. */
static void
test_state_run_snapshot_round_trip(void **state)
{
    struct fx *f = *state;
    const char *text =
        "{\"hash\": \"fnv1a64:0123456789abcdef\", \"files\": [{\"path\": "
        "\"/w/wf.json\", \"text\": \"{\\n  \\\"name\\\": \\\"\u00e9t\u00e9\\\"}\"}]}";
    char *got = NULL;

    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", "/w/wf.json", "s", NULL, 1));
    assert_int_equal(weft__state_run_snapshot_get(f->st, "r", &got), WEFT_ENOTFOUND);
    assert_null(got);
    assert_int_equal(weft__state_run_snapshot_get(f->st, "missing", &got), WEFT_ENOTFOUND);
    assert_weft_ok(weft__state_run_snapshot_set(f->st, "r", text));
    assert_weft_ok(weft__state_run_snapshot_get(f->st, "r", &got));
    assert_non_null(got);
    assert_string_equal(got, text);
    weft__free(got);
}

/* The distributed-run fields of a step (its task UUID, redeliveries, dispatched flag) are
 * stored and read back; the first task id stored stays the step's. */
struct task_fields {
    char uuid[2][40];
    unsigned retries[2];
    bool is_dispatched[2];
    size_t n;
};

static weft_err
collect_task_fields(const struct state_step_row *row, void *user_data)
{
    struct task_fields *t = user_data;

    assert_true(t->n < 2);
    snprintf(t->uuid[t->n], sizeof(t->uuid[0]), "%s",
             row->task_uuid != NULL ? row->task_uuid : "-");
    t->retries[t->n] = row->retries;
    t->is_dispatched[t->n] = row->is_dispatched;
    t->n++;
    return WEFT_OK;
}

static void
test_state_steps_keep_task_uuid_retries_and_dispatch(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    struct task_fields t;
    char first[WEFT_UUID_LEN + 1];

    memset(&t, 0, sizeof(t));
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "first", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "b", 0, "second", NULL, 0, NULL));
    assert_true(weft__uuid_is_valid(plan.steps[0].task_uuid));
    memcpy(first, plan.steps[0].task_uuid, sizeof(first));
    plan.steps[0].status = STEP_IN_PROGRESS;
    plan.steps[0].is_dispatched = true;
    plan.steps[0].retries = 3;
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    /* A plan rebuilt with new ids (a resume) saves the same index: the stored id stays. */
    weft__uuid_v4(plan.steps[0].task_uuid);
    plan.steps[0].retries = 4;
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_steps_each(f->st, "r", collect_task_fields, &t));
    assert_int_equal(t.n, 2);
    assert_string_equal(t.uuid[0], first);
    assert_int_equal(t.retries[0], 4);
    assert_true(t.is_dispatched[0]);
    assert_string_equal(t.uuid[1], plan.steps[1].task_uuid);
    assert_int_equal(t.retries[1], 0);
    assert_false(t.is_dispatched[1]);
    weft__plan_cleanup(&plan);
}

/* Run every kind of call once, counting the ones that succeeded; @p seen collects the rows read
 * back. */
static size_t
every_call(struct fx *f, struct plan *plan, struct rows *seen)
{
    struct rt_state *other = NULL;
    struct weft_run_info info;
    struct weft_run_info *infos = NULL;
    json_t *entry = json_pack("{s:s}", "content", "answer");
    json_t *out = NULL;
    char err[512];
    char id[64];
    size_t count = 0;
    size_t ok = 0;

    ok += weft__state_open(f->location, &other, err, sizeof(err)) == WEFT_OK;
    weft__state_close(other);
    ok += weft__state_run_begin(f->st, "oom", "wf", "wf.json", "s", "the input", 1) == WEFT_OK;
    ok += weft__state_step_save(f->st, "oom", 0, &plan->steps[0], "coder") == WEFT_OK;
    ok += weft__state_step_save(f->st, "oom", 1, &plan->steps[1], "cmd") == WEFT_OK;
    memset(seen, 0, sizeof(*seen));
    ok += weft__state_steps_each(f->st, "oom", collect_step, seen) == WEFT_OK;
    if (weft__state_run_info(f->st, "oom", &info) == WEFT_OK) {
        ok++;
        weft__state_info_cleanup(&info);
    }
    if (weft__state_runs_list(f->st, 5, &infos, &count) == WEFT_OK) {
        ok++;
        for (size_t i = 0; i < count; i++) {
            weft__state_info_cleanup(&infos[i]);
        }
        weft__free(infos);
    }
    ok += weft__state_run_resolve(f->st, "oo", id, sizeof(id), err, sizeof(err)) == WEFT_OK;
    ok += weft__state_message_add(f->st, "s", "oom", "user", "hello", NULL) == WEFT_OK;
    if (weft__state_messages_load(f->st, "s", 10, &out) == WEFT_OK) {
        ok++;
        json_decref(out);
    }
    ok += weft__state_exchange_add(f->st, "oom", "coder", "act", entry) == WEFT_OK;
    if (weft__state_exchanges_script(f->st, "oom", &out) == WEFT_OK) {
        ok++;
        json_decref(out);
    }
    ok += weft__state_recover(f->st, NULL, NULL, &count) == WEFT_OK;
    json_decref(entry);
    return ok;
}

/* Out of memory at every allocation in turn: each call fails cleanly (no crash, no leak, no
 * transaction left open), and the handle works afterwards. */
static void
test_state_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    struct rows seen;
    const char *deps[1] = {"a"};
    bool is_done = false;

    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "write it", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "b", 0, "make", deps, 1, NULL));
    plan.steps[0].status = STEP_COMPLETED;
    plan.steps[0].result = weft__strdup("done");
    plan.steps[1].executor = EXEC_COMMAND;
    plan.steps[1].status = STEP_FAILED;
    plan.steps[1].feedback = weft__strdup("command failed: exit_status");
    plan.steps[1].error_type = weft__strdup("exit_status");
    plan.steps[1].error = json_pack("{s:i}", "exit_code", 2);
    print_message("plain: %zu\n", every_call(f, &plan, &seen));
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    failalloc_budget = -1;
    print_message("failalloc -1: %zu\n", every_call(f, &plan, &seen));
    for (long budget = 0; !is_done && budget < 5000; budget++) {
        failalloc_budget = budget;
        is_done = every_call(f, &plan, &seen) == 13;
        failalloc_budget = -1;
        assert_false(weft__state_in_transaction(f->st));
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.status[1], "failed");
    assert_int_equal(every_call(f, &plan, &seen), 13);
    weft__plan_cleanup(&plan);
}

/* ------------------------------------------------------------------------------------------ */
/* Skill memory                                                                                */

/* A skill of @p agent for @p task; the strings are borrowed (never cleaned up). */
static struct weft__skill
skill_of(const char *agent, const char *task, const char *solution, double reward)
{
    struct weft__skill s;

    memset(&s, 0, sizeof(s));
    s.agent = (char *)agent;
    s.task = (char *)task;
    s.solution = (char *)solution;
    s.reward = reward;
    return s;
}

static void
save_skill(struct fx *f, const char *agent, const char *task, double reward, bool want_new)
{
    struct weft__skill s = skill_of(agent, task, "the solution", reward);
    bool is_new = !want_new;

    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_int_equal(is_new, want_new);
}

/* The id of the newest skill (of @p agent, NULL: any) into @p id. */
static void
newest_skill_id(struct fx *f, const char *agent, char id[WEFT_UUID_LEN + 1])
{
    struct weft__skill *list = NULL;
    size_t n = 0;

    assert_weft_ok(weft__state_skills_list(f->st, agent, 1, &list, &n));
    assert_int_equal(n, 1);
    memcpy(id, list[0].id, WEFT_UUID_LEN + 1);
    weft__skills_free(list, n);
}

static void
test_state_skill_save_dedups_by_normalised_task_per_agent(void **state)
{
    struct fx *f = *state;
    struct weft__skill s = skill_of("coder", "Write a Fibonacci function in C", "int fib", 1.0);
    struct weft__skill *list = NULL;
    size_t n = 0;
    bool is_new = false;

    memcpy(s.trace_id, "0123456789abcdef0123456789abcdef", 33);
    memcpy(s.span_id, "0123456789abcdef", 17);
    s.workflow = "wf";
    s.run_id = "run-1";
    s.created_ns = weft__now_ns() - 1000; /* retention drops skills older than 180 days */
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_true(is_new);
    /* Case, punctuation and spacing make no other task; digits do; another agent's skill is
     * its own. */
    save_skill(f, "coder", "  write a fibonacci-function, in c!! ", 0.5, false);
    save_skill(f, "coder", "Write a Fibonacci function in C99", 1.0, true);
    save_skill(f, "tester", "Write a Fibonacci function in C", 1.0, true);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills"), 3);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE agent = 'coder'"), 2);
    /* Everything round-trips; a list is newest first. */
    assert_weft_ok(weft__state_skills_list(f->st, "coder", 10, &list, &n));
    assert_int_equal(n, 2);
    assert_string_equal(list[1].task, "Write a Fibonacci function in C");
    assert_string_equal(list[1].solution, "int fib");
    assert_string_equal(list[1].agent, "coder");
    assert_string_equal(list[1].workflow, "wf");
    assert_string_equal(list[1].run_id, "run-1");
    assert_string_equal(list[1].trace_id, "0123456789abcdef0123456789abcdef");
    assert_string_equal(list[1].span_id, "0123456789abcdef");
    assert_true(list[1].reward == 1.0);
    assert_int_equal(list[1].created_ns, s.created_ns);
    assert_int_equal(list[1].uses, 0);
    assert_true(weft__uuid_is_valid(list[1].id));
    assert_null(list[0].workflow);
    assert_string_equal(list[0].trace_id, "");
    assert_true(list[0].created_ns > s.created_ns); /* 0 on save: now */
    weft__skills_free(list, n);
    /* Bad arguments store nothing. */
    s.agent = "";
    assert_int_equal(weft__state_skill_save(f->st, &s, &is_new), WEFT_EINVAL);
    s = skill_of("coder", "", "x", 1.0);
    assert_int_equal(weft__state_skill_save(f->st, &s, &is_new), WEFT_EINVAL);
    s = skill_of("coder", "t", NULL, 1.0);
    assert_int_equal(weft__state_skill_save(f->st, &s, &is_new), WEFT_EINVAL);
    s = skill_of("coder", "t", "x", 1.0);
    memcpy(s.trace_id, "not hex", 8);
    assert_int_equal(weft__state_skill_save(f->st, &s, &is_new), WEFT_EINVAL);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills"), 3);
}

static void
test_state_skill_is_replaced_by_an_equal_or_better_reward(void **state)
{
    struct fx *f = *state;
    struct weft__skill s = skill_of("coder", "sort the list", "v1", 1.0);
    struct weft__skill got;
    char id[WEFT_UUID_LEN + 1];
    bool is_new = false;

    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    newest_skill_id(f, NULL, id);
    assert_weft_ok(weft__state_skill_used(f->st, id, 77));
    /* A lower reward keeps the stored solution. */
    s = skill_of("coder", "Sort the list.", "v2", 0.5);
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_false(is_new);
    assert_weft_ok(weft__state_skill_get(f->st, id, &got));
    assert_string_equal(got.solution, "v1");
    weft__skill_cleanup(&got);
    /* An equal one replaces it (the newer solution wins), a higher one too; id and uses stay. */
    s = skill_of("coder", "sort THE list", "v3", 1.0);
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_false(is_new);
    assert_weft_ok(weft__state_skill_get(f->st, id, &got));
    assert_string_equal(got.solution, "v3");
    assert_string_equal(got.task, "sort THE list");
    assert_int_equal(got.uses, 1);
    assert_int_equal(got.last_used_ns, 77);
    weft__skill_cleanup(&got);
    s = skill_of("coder", "sort the list", "v4", 1.5);
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_false(is_new);
    assert_weft_ok(weft__state_skill_get(f->st, id, &got));
    assert_string_equal(got.solution, "v4");
    assert_true(got.reward == 1.5);
    weft__skill_cleanup(&got);
    /* A new solution is the saving run's; the same solution at the same reward (a run that was
     * shown the skill) keeps the run that made it and when (issue 26). */
    s = skill_of("coder", "sort the list", "v5", 1.5);
    s.run_id = "run-maker";
    s.created_ns = 1000;
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    s.run_id = "run-user";
    s.created_ns = 2000;
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_false(is_new);
    assert_weft_ok(weft__state_skill_get(f->st, id, &got));
    assert_string_equal(got.solution, "v5");
    assert_string_equal(got.run_id, "run-maker");
    assert_int_equal(got.created_ns, 1000);
    assert_int_equal(got.uses, 1);
    weft__skill_cleanup(&got);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills"), 1);
    /* The replaced task is what the full-text index finds. */
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE solution = 'v5'"), 1);
}

static void
test_state_skill_task_and_solution_are_capped_on_utf8_boundaries(void **state)
{
    struct fx *f = *state;
    size_t big = 3 * WEFT_SKILL_SOLUTION_MAX + 1;
    char *solution = malloc(big + 1);
    char *task = malloc(big + 1);
    struct weft__skill s;
    struct weft__skill got;
    char id[WEFT_UUID_LEN + 1];

    /* "é" is two bytes and "€" three: an odd cap falls inside a character. */
    for (size_t i = 0; i + 3 <= big; i += 3) {
        memcpy(solution + i, "\xe2\x82\xac", 3);
    }
    solution[big - big % 3] = '\0';
    for (size_t i = 0; i + 2 <= big; i += 2) {
        memcpy(task + i, "\xc3\xa9", 2);
    }
    task[big - big % 2] = '\0';
    s = skill_of("coder", task, solution, 1.0);
    assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    newest_skill_id(f, "coder", id);
    assert_weft_ok(weft__state_skill_get(f->st, id, &got));
    assert_true(strlen(got.solution) <= WEFT_SKILL_SOLUTION_MAX);
    assert_true(strlen(got.solution) > WEFT_SKILL_SOLUTION_MAX - 64);
    assert_true(weft__utf8_valid(got.solution, strlen(got.solution)));
    assert_non_null(strstr(got.solution, "[weft: cut to 8192 of"));
    assert_true(strlen(got.task) <= WEFT_SKILL_TASK_MAX);
    assert_true(weft__utf8_valid(got.task, strlen(got.task)));
    assert_non_null(strstr(got.task, "[weft: cut to 2048 of"));
    weft__skill_cleanup(&got);
    /* Short texts are kept whole. */
    s = skill_of("coder", "short", "tiny", 1.0);
    assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE solution = 'tiny'"), 1);
    free(solution);
    free(task);
}

static void
fill_search_store(struct fx *f)
{
    save_skill(f, "coder", "Fix the JSON parser bug with nested arrays", 1.0, true);
    save_skill(f, "coder", "Write unit tests for the JSON parser", 1.0, true);
    save_skill(f, "coder", "Add a retry loop to the HTTP client", 1.0, true);
    save_skill(f, "coder", "Render the dashboard chart in SVG", 1.0, true);
    save_skill(f, "reviewer", "Review the JSON parser bug fix with nested arrays", 1.0, true);
}

static void
test_state_skills_search_ranks_one_agent_above_a_threshold(void **state)
{
    struct fx *f = *state;
    struct weft__skill *hits = NULL;
    size_t n = 0;

    fill_search_store(f);
    assert_weft_ok(weft__state_skills_search(f->st, "coder", "parser bug: nested arrays crash", 3,
                                             0.0, &hits, &n));
    assert_int_equal(n, 2);
    assert_string_equal(hits[0].task, "Fix the JSON parser bug with nested arrays");
    assert_string_equal(hits[1].task, "Write unit tests for the JSON parser");
    assert_true(hits[0].score > hits[1].score);
    assert_true(hits[1].score > 0.0 && hits[0].score < 1.0);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(hits[i].agent, "coder");
        assert_non_null(hits[i].solution);
    }
    weft__skills_free(hits, n);
    /* k caps the hits; a threshold between the two scores keeps the better one only. */
    assert_weft_ok(
        weft__state_skills_search(f->st, "coder", "parser bug nested arrays", 1, 0.0, &hits, &n));
    assert_int_equal(n, 1);
    {
        double best = hits[0].score;
        struct weft__skill *all = NULL;
        size_t m = 0;

        weft__skills_free(hits, n);
        assert_weft_ok(weft__state_skills_search(f->st, "coder", "parser bug nested arrays", 3, 0.0,
                                                 &all, &m));
        assert_int_equal(m, 2);
        assert_weft_ok(weft__state_skills_search(f->st, "coder", "parser bug nested arrays", 3,
                                                 (best + all[1].score) / 2, &hits, &n));
        assert_int_equal(n, 1);
        assert_true(hits[0].score >= (best + all[1].score) / 2);
        weft__skills_free(all, m);
        weft__skills_free(hits, n);
    }
    assert_weft_ok(
        weft__state_skills_search(f->st, "coder", "parser bug nested arrays", 3, 0.999, &hits, &n));
    assert_int_equal(n, 0);
    assert_null(hits);
    /* Nothing in common, another agent, no agent's skills: no hits. */
    assert_weft_ok(weft__state_skills_search(f->st, "coder", "kubernetes", 3, 0.0, &hits, &n));
    assert_int_equal(n, 0);
    assert_weft_ok(
        weft__state_skills_search(f->st, "reviewer", "dashboard chart", 3, 0.0, &hits, &n));
    assert_int_equal(n, 0);
    assert_weft_ok(weft__state_skills_search(f->st, "nobody", "JSON parser", 3, 0.0, &hits, &n));
    assert_int_equal(n, 0);
    /* PostgreSQL stems ("retrying" finds "retry"); SQLite does not, and "http" finds it. */
    assert_weft_ok(weft__state_skills_search(f->st, "coder", "retrying http", 3, 0.0, &hits, &n));
    assert_int_equal(n, 1);
    assert_string_equal(hits[0].task, "Add a retry loop to the HTTP client");
    weft__skills_free(hits, n);
    assert_int_equal(weft__state_skills_search(f->st, NULL, "x", 3, 0.0, &hits, &n), WEFT_EINVAL);
}

static void
test_state_skills_search_treats_query_syntax_as_words(void **state)
{
    struct fx *f = *state;
    static const char *const queries[] = {
        "\"JSON",
        "parser\"\"",
        "pars*",
        "NEAR(json parser)",
        "-json",
        "json -parser",
        "(json",
        "json)",
        "json AND",
        "OR parser",
        "NOT",
        "agent: json",
        "task : x",
        "^json",
        "{task}: js",
        "json + parser",
        "'json'",
        "",
        "!!!",
        "\\",
        "json\"; DROP TABLE skills; --",
        "ünïcode parser",
    };
    struct weft__skill *hits = NULL;
    size_t n = 0;

    fill_search_store(f);
    save_skill(f, "odd \"agent\" (x)", "JSON parser", 1.0, true);
    save_skill(f, "---", "JSON parser", 1.0, true);
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        assert_weft_ok(weft__state_skills_search(f->st, "coder", queries[i], 3, 0.0, &hits, &n));
        weft__skills_free(hits, n);
        assert_weft_ok(
            weft__state_skills_search(f->st, "odd \"agent\" (x)", queries[i], 3, 0.0, &hits, &n));
        weft__skills_free(hits, n);
    }
    /* The words in them still count: a quoted, starred, NEAR-ed query finds the parser. */
    assert_weft_ok(weft__state_skills_search(f->st, "coder", "NEAR(\"json\" pars*) -nested", 3, 0.0,
                                             &hits, &n));
    assert_true(n >= 1);
    weft__skills_free(hits, n);
    /* Odd agent names are filtered exactly. */
    assert_weft_ok(
        weft__state_skills_search(f->st, "odd \"agent\" (x)", "json parser", 3, 0.0, &hits, &n));
    assert_int_equal(n, 1);
    assert_string_equal(hits[0].agent, "odd \"agent\" (x)");
    weft__skills_free(hits, n);
    assert_weft_ok(weft__state_skills_search(f->st, "---", "json parser", 3, 0.0, &hits, &n));
    assert_int_equal(n, 1);
    assert_string_equal(hits[0].agent, "---");
    weft__skills_free(hits, n);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills"), 7);
}

static void
test_state_skill_used_counts_injections(void **state)
{
    struct fx *f = *state;
    struct weft__skill got;
    char id[WEFT_UUID_LEN + 1];

    save_skill(f, "coder", "deploy the service", 1.0, true);
    newest_skill_id(f, "coder", id);
    assert_weft_ok(weft__state_skill_used(f->st, id, 100));
    assert_weft_ok(weft__state_skill_used(f->st, id, 200));
    assert_weft_ok(weft__state_skill_get(f->st, id, &got));
    assert_int_equal(got.uses, 2);
    assert_int_equal(got.last_used_ns, 200);
    weft__skill_cleanup(&got);
    assert_int_equal(weft__state_skill_used(f->st, "00000000-0000-4000-8000-000000000000", 1),
                     WEFT_ENOTFOUND);
    assert_int_equal(weft__state_skill_used(f->st, "nope", 1), WEFT_EINVAL);
}

static void
test_state_skills_list_get_by_prefix_and_forget(void **state)
{
    struct fx *f = *state;
    struct weft__skill s = skill_of("coder", "first task", "a", 1.0);
    struct weft__skill got;
    struct weft__skill *list = NULL;
    struct weft__skill *hits = NULL;
    size_t n = 0;
    size_t removed = 99;

    memcpy(s.id, "aaaa0000-0000-4000-8000-000000000001", WEFT_UUID_LEN + 1);
    s.created_ns = weft__now_ns() - 30;
    assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    s = skill_of("coder", "second task", "b", 1.0);
    memcpy(s.id, "AAAA1111-0000-4000-8000-000000000002", WEFT_UUID_LEN + 1); /* stored lowercase */
    s.created_ns = weft__now_ns() - 20;
    assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    s = skill_of("reviewer", "third task", "c", 1.0);
    s.created_ns = weft__now_ns() - 10;
    assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    /* Lists: all, one agent's, a limit; newest first. */
    assert_weft_ok(weft__state_skills_list(f->st, NULL, 0, &list, &n));
    assert_int_equal(n, 3);
    assert_string_equal(list[0].task, "third task");
    assert_string_equal(list[2].task, "first task");
    weft__skills_free(list, n);
    assert_weft_ok(weft__state_skills_list(f->st, "coder", 1, &list, &n));
    assert_int_equal(n, 1);
    assert_string_equal(list[0].task, "second task");
    weft__skills_free(list, n);
    assert_weft_ok(weft__state_skills_list(f->st, "nobody", 5, &list, &n));
    assert_int_equal(n, 0);
    assert_null(list);
    /* Get: exact, unique prefix (either case), ambiguous, unknown, malformed. */
    assert_weft_ok(weft__state_skill_get(f->st, "aaaa0000-0000-4000-8000-000000000001", &got));
    assert_string_equal(got.task, "first task");
    weft__skill_cleanup(&got);
    assert_weft_ok(weft__state_skill_get(f->st, "AAAA1", &got));
    assert_string_equal(got.id, "aaaa1111-0000-4000-8000-000000000002");
    weft__skill_cleanup(&got);
    assert_int_equal(weft__state_skill_get(f->st, "aaaa", &got), WEFT_EINVAL);
    assert_int_equal(weft__state_skill_get(f->st, "bbbb", &got), WEFT_ENOTFOUND);
    assert_int_equal(weft__state_skill_get(f->st, "aa", &got), WEFT_EINVAL);
    assert_int_equal(weft__state_skill_get(f->st, "aaaa%", &got), WEFT_EINVAL);
    assert_int_equal(weft__state_skill_get(f->st, "aaa_", &got), WEFT_EINVAL);
    /* Forget: by prefix, an ambiguous prefix refused, unknown is 0, by agent, both. */
    assert_int_equal(weft__state_skills_forget(f->st, "aaaa", NULL, &removed), WEFT_EINVAL);
    assert_weft_ok(weft__state_skills_forget(f->st, "aaaa0", "reviewer", &removed));
    assert_int_equal(removed, 0); /* not the reviewer's */
    assert_weft_ok(weft__state_skills_forget(f->st, "aaaa0", NULL, &removed));
    assert_int_equal(removed, 1);
    assert_weft_ok(weft__state_skills_forget(f->st, "cccc", NULL, &removed));
    assert_int_equal(removed, 0);
    assert_weft_ok(weft__state_skills_forget(f->st, NULL, "coder", &removed));
    assert_int_equal(removed, 1);
    assert_int_equal(weft__state_skills_forget(f->st, NULL, NULL, &removed), WEFT_EINVAL);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills"), 1);
    /* A forgotten skill is gone from the full-text index too. */
    assert_weft_ok(
        weft__state_skills_search(f->st, "coder", "first second task", 3, 0.0, &hits, &n));
    assert_int_equal(n, 0);
}

static void
test_state_skills_prune_by_count_and_age(void **state)
{
    struct fx *f = *state;
    struct weft__skill *list = NULL;
    uint64_t now = 1000ull * 1000000000ull;
    size_t n = 0;
    size_t removed = 0;
    char task[32];

    weft__state_skills_retention(f->st, 0, 0);
    for (int i = 1; i <= 5; i++) {
        struct weft__skill s = skill_of("a", task, "x", (double)i);
        snprintf(task, sizeof(task), "task a%d", i);
        s.created_ns = now - (uint64_t)i;
        assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    }
    for (int i = 1; i <= 3; i++) {
        struct weft__skill s = skill_of("b", task, "x", 1.0);
        snprintf(task, sizeof(task), "task b%d", i);
        s.created_ns = now - 100 * (uint64_t)i; /* b3 is the oldest */
        assert_weft_ok(weft__state_skill_save(f->st, &s, NULL));
    }
    /* Count: the best rewards stay, then the newest. */
    assert_weft_ok(weft__state_skills_prune(f->st, 2, 0, now, &removed));
    assert_int_equal(removed, 4);
    assert_weft_ok(weft__state_skills_list(f->st, "a", 10, &list, &n));
    assert_int_equal(n, 2);
    assert_true(list[0].reward == 4.0 || list[0].reward == 5.0);
    assert_true(list[1].reward == 4.0 || list[1].reward == 5.0);
    weft__skills_free(list, n);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE agent = 'b' AND"
                                 " task IN ('task b1', 'task b2')"),
                     2);
    /* Age: older than now - 150 goes (b2 at now - 200). */
    assert_weft_ok(weft__state_skills_prune(f->st, 0, 150, now, &removed));
    assert_int_equal(removed, 1);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills"), 3);
    /* Retention on save: at most 2 per agent, the lowest reward goes first. */
    weft__state_skills_retention(f->st, 2, 0);
    save_skill(f, "c", "c one", 3.0, true);
    save_skill(f, "c", "c two", 1.0, true);
    save_skill(f, "c", "c three", 2.0, true);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE agent = 'c'"), 2);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE task = 'c two'"), 0);
    /* ... and none older than the maximum age. */
    weft__state_skills_retention(f->st, 0, 1000000000ull);
    save_skill(f, "d", "d new", 1.0, true);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE agent IN ('a', 'b')"), 0);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills WHERE agent IN ('c', 'd')"), 3);
}

/* Past a few hundred skills the store keeps its common words' document counts (skills_terms,
 * rebuilt as it grows), which a search uses to pick the rarest words; a word in every task still
 * finds nothing better than the rare word does. */
static void
test_state_skills_search_keeps_common_word_counts(void **state)
{
    struct fx *f = *state;
    struct weft__skill *hits = NULL;
    size_t n = 0;
    char task[64];

    weft__state_skills_retention(f->st, 0, 0);
    assert_weft_ok(weft__state_begin(f->st));
    for (int i = 0; i < 300; i++) {
        snprintf(task, sizeof(task), "common chore number %d", i);
        save_skill(f, "coder", task, 1.0, true);
    }
    save_skill(f, "coder", "common chore with a zeppelin", 1.0, true);
    assert_weft_ok(weft__state_commit(f->st));
    /* Rebuilt at the 257th skill (the first time the store has moved by 256). */
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skills_terms WHERE docs >= 256 AND"
                                 " term IN ('common', 'chore')"),
                     2);
    assert_weft_ok(weft__state_skills_search(f->st, "coder", "Common chore: zeppelin repair", 3,
                                             0.0, &hits, &n));
    assert_true(n >= 1);
    assert_string_equal(hits[0].task, "common chore with a zeppelin");
    weft__skills_free(hits, n);
}

/* Skill vectors (memory.embeddings): saved with the skill, exact floats back, only those of
 * the asked model and length; replaced with an equal or better reward, kept with a lower one;
 * deleted with their skill; malformed vectors refused. */
struct vec_seen {
    size_t n;
    char id[WEFT_UUID_LEN + 1];
    float first;
};

static bool
vec_seen_row(const char *id, const float *values, void *user_data)
{
    struct vec_seen *seen = user_data;

    seen->n++;
    memcpy(seen->id, id, WEFT_UUID_LEN + 1);
    seen->first = values[0];
    return true;
}

static struct vec_seen
vectors_of(struct fx *f, const char *agent, const char *model, size_t dims)
{
    struct vec_seen seen;

    memset(&seen, 0, sizeof(seen));
    assert_weft_ok(weft__state_skill_vectors_each(f->st, agent, model, dims, vec_seen_row, &seen));
    return seen;
}

static void
test_state_skill_vectors_follow_their_skill(void **state)
{
    struct fx *f = *state;
    const float v1[3] = {0.25f, -1.5f, 3.0e-7f};
    const float v2[3] = {0.75f, 0.0f, 1.0f};
    const float bad[3] = {1.0f, NAN, 0.0f};
    struct weft__skill_vector vec = {"emb-1", v1, 3};
    struct weft__skill s = skill_of("coder", "sum the numbers", "sum()", 1.0);
    struct vec_seen seen;
    char id[WEFT_UUID_LEN + 1];
    size_t removed = 0;
    bool is_new = false;

    assert_weft_ok(weft__state_skill_save_vec(f->st, &s, &vec, &is_new));
    assert_true(is_new);
    newest_skill_id(f, "coder", id);
    seen = vectors_of(f, "coder", "emb-1", 3);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.id, id);
    assert_true(seen.first == 0.25f);
    /* Another model, another length or another agent: never seen. */
    assert_int_equal(vectors_of(f, "coder", "emb-2", 3).n, 0);
    assert_int_equal(vectors_of(f, "coder", "emb-1", 4).n, 0);
    assert_int_equal(vectors_of(f, "tester", "emb-1", 3).n, 0);
    /* A lower reward keeps the stored skill and its vector; an equal one replaces both, and
     * the skill keeps its id. */
    vec.values = v2;
    s.reward = 0.5;
    assert_weft_ok(weft__state_skill_save_vec(f->st, &s, &vec, &is_new));
    assert_true(vectors_of(f, "coder", "emb-1", 3).first == 0.25f);
    s.reward = 1.0;
    assert_weft_ok(weft__state_skill_save_vec(f->st, &s, &vec, &is_new));
    assert_false(is_new);
    seen = vectors_of(f, "coder", "emb-1", 3);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.id, id);
    assert_true(seen.first == 0.75f);
    /* A save without a vector keeps the one it has. */
    assert_weft_ok(weft__state_skill_save(f->st, &s, &is_new));
    assert_int_equal(vectors_of(f, "coder", "emb-1", 3).n, 1);
    /* Malformed vectors store nothing. */
    vec.values = bad;
    assert_int_equal(weft__state_skill_save_vec(f->st, &s, &vec, &is_new), WEFT_EINVAL);
    vec.values = v1;
    vec.dims = 0;
    assert_int_equal(weft__state_skill_save_vec(f->st, &s, &vec, &is_new), WEFT_EINVAL);
    vec.dims = 3;
    vec.model = "";
    assert_int_equal(weft__state_skill_save_vec(f->st, &s, &vec, &is_new), WEFT_EINVAL);
    assert_true(vectors_of(f, "coder", "emb-1", 3).first == 0.75f);
    /* Forgetting the skill deletes its vector. */
    assert_weft_ok(weft__state_skills_forget(f->st, id, NULL, &removed));
    assert_int_equal(removed, 1);
    assert_int_equal(vectors_of(f, "coder", "emb-1", 3).n, 0);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM skill_vectors"), 0);
}

/* Composed teams: saved with a generated id, listed per run oldest first (the order a resume
 * registers them in) or across runs newest first, the design kept as JSON. */
static void
test_state_teams_round_trip(void **state)
{
    struct fx *f = *state;
    struct weft__state_team a;
    struct weft__state_team b;
    struct weft__state_team c;
    struct weft__state_team *list = NULL;
    size_t n = 0;
    json_t *doc = NULL;

    memset(&a, 0, sizeof(a));
    a.name = "first_team";
    a.path = "/teams/first_team.json";
    a.goal = "Build the first team";
    a.document = "{\"name\": \"first_team\", \"agents\": [{\"name\": \"x\"}]}";
    a.run_id = "run-1";
    a.created_ns = 1000;
    b = a;
    b.name = "second_team";
    b.created_ns = 2000;
    c = a;
    c.name = "other_run_team";
    c.run_id = NULL;
    c.created_ns = 3000;
    assert_weft_ok(weft__state_team_save(f->st, &b));
    assert_weft_ok(weft__state_team_save(f->st, &a));
    assert_weft_ok(weft__state_team_save(f->st, &c));
    assert_true(weft__uuid_is_valid(a.id));
    assert_weft_err(weft__state_team_save(f->st, NULL), WEFT_EINVAL);
    assert_weft_ok(weft__state_teams_list(f->st, "run-1", 10, &list, &n));
    assert_int_equal(n, 2);
    assert_string_equal(list[0].name, "first_team");
    assert_string_equal(list[1].name, "second_team");
    assert_string_equal(list[0].path, "/teams/first_team.json");
    assert_string_equal(list[0].goal, "Build the first team");
    assert_string_equal(list[0].run_id, "run-1");
    assert_string_equal(list[0].id, a.id);
    assert_int_equal(list[0].created_ns, 1000);
    doc = json_loads(list[0].document, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "name")), "first_team");
    json_decref(doc);
    weft__state_teams_free(list, n);
    assert_weft_ok(weft__state_teams_list(f->st, NULL, 2, &list, &n));
    assert_int_equal(n, 2);
    assert_string_equal(list[0].name, "other_run_team");
    assert_null(list[0].run_id);
    weft__state_teams_free(list, n);
    assert_weft_ok(weft__state_teams_list(f->st, "no-such-run", 10, &list, &n));
    assert_int_equal(n, 0);
    assert_null(list);
}

struct tool_rows {
    int count;
    char seen[8][64];
};

static weft_err
collect_tool_row(const struct weft__state_tool_result *r, void *user_data)
{
    struct tool_rows *rows = user_data;

    if (rows->count < 8) {
        snprintf(rows->seen[rows->count], sizeof(rows->seen[0]), "%s/%u/%u %s %s", r->step_id,
                 r->attempt, r->seq, r->tool, r->kind);
    }
    rows->count++;
    assert_non_null(r->request);
    assert_non_null(r->outcome);
    /* Credentials never reach the store, in tool results as elsewhere. */
    assert_null(strstr(r->outcome, "sk-proj-abcdefghijklmnopqrstuv"));
    return WEFT_OK;
}

/* Tool results (replay.h) are kept per (run, step, attempt, seq), in the order they were made,
 * redacted; a second save of the same key replaces the first (a resumed attempt). A run's origin
 * (replay or fork) reads back with the run. */
static void
test_state_tool_results_and_origin_round_trip(void **state)
{
    struct fx *f = *state;
    struct weft__state_tool_result r;
    struct tool_rows rows;
    struct weft_run_info info;

    memset(&rows, 0, sizeof(rows));
    memset(&r, 0, sizeof(r));
    assert_weft_ok(weft__state_run_begin(f->st, "t1", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_run_begin(f->st, "t2", "wf", NULL, "s", NULL, 2));
    r.step_id = "research";
    r.attempt = 1;
    r.seq = 1;
    r.tool = "lookup";
    r.kind = "native";
    r.request = "{\"q\":\"x\"}";
    r.outcome = "{\"rc\":0,\"output\":\"old\"}";
    assert_weft_ok(weft__state_tool_result_add(f->st, "t1", &r));
    r.outcome = "{\"rc\":0,\"output\":\"key sk-proj-abcdefghijklmnopqrstuv\"}";
    assert_weft_ok(weft__state_tool_result_add(f->st, "t1", &r)); /* replaces */
    r.step_id = "build";
    r.seq = 1;
    r.tool = "command";
    r.kind = "step";
    assert_weft_ok(weft__state_tool_result_add(f->st, "t1", &r));
    r.tool = "other";
    assert_weft_ok(weft__state_tool_result_add(f->st, "t2", &r));
    assert_int_equal(weft__state_tool_result_add(f->st, "t1", NULL), WEFT_EINVAL);
    assert_weft_ok(weft__state_tool_results_each(f->st, "t1", collect_tool_row, &rows));
    assert_int_equal(rows.count, 2);
    assert_string_equal(rows.seen[0], "research/1/1 lookup native");
    assert_string_equal(rows.seen[1], "build/1/1 command step");
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM tool_results WHERE run_id = 't1' AND"
                                 " outcome LIKE '%old%'"),
                     0);
    assert_weft_ok(weft__state_run_origin(f->st, "t2", "fork", "t1", "build"));
    assert_weft_ok(weft__state_run_info(f->st, "t2", &info));
    assert_string_equal(info.origin_kind, "fork");
    assert_string_equal(info.origin_run_id, "t1");
    assert_string_equal(info.origin_step, "build");
    weft__state_info_cleanup(&info);
    assert_weft_ok(weft__state_run_info(f->st, "t1", &info));
    assert_null(info.origin_kind);
    assert_null(info.origin_step);
    weft__state_info_cleanup(&info);
}

/* ------------------------------------------------------------------------------------------ */
/* Retention: pinning and deleting old runs (retention.c)                                      */

#define GC_CUTOFF 500000000000ull /* runs seeded to end before it are old */

/* Seed run @p id of @p session with one row in every run-keyed table; @p ended_ns 0 leaves it
 * running. */
static void
gc_seed(struct fx *f, const char *id, const char *session, uint64_t ended_ns)
{
    struct plan_step step;
    struct weft__state_tool_result r;
    struct weft__state_run_end end;
    json_t *cursors = json_pack("{s:i}", "a/act", 1);
    json_t *entry = json_pack("{s:s}", "content", "answer");
    char sql[512];

    memset(&step, 0, sizeof(step));
    step.id = "s1";
    step.task = "do it";
    step.status = STEP_COMPLETED;
    assert_weft_ok(weft__state_run_begin(f->st, id, "wf", NULL, session, "in", 1000));
    assert_weft_ok(weft__state_step_save(f->st, id, 0, &step, "a"));
    assert_weft_ok(weft__state_message_add(f->st, session, id, "user", "hello", NULL));
    assert_weft_ok(weft__state_cursors_save(f->st, session, "script.json", cursors));
    assert_weft_ok(weft__state_exchange_add(f->st, id, "a", "act", entry));
    memset(&r, 0, sizeof(r));
    r.step_id = "s1";
    r.attempt = 1;
    r.seq = 1;
    r.tool = "lookup";
    r.kind = "native";
    r.request = "{}";
    r.outcome = "{\"rc\":0}";
    assert_weft_ok(weft__state_tool_result_add(f->st, id, &r));
    snprintf(sql, sizeof(sql),
             "INSERT INTO corrections (run_id, seq, failed_step, error_type, inserted,"
             " depends_before, depends_after, created_ns) VALUES ('%s', 1, 's1', NULL, '[]',"
             " '[]', '[]', 5)",
             id);
    fx_exec(f, sql, sql);
    fx_exec(f,
            "CREATE TABLE IF NOT EXISTS run_metrics (run_id TEXT NOT NULL, attempt INTEGER NOT"
            " NULL, name TEXT NOT NULL, kind INTEGER NOT NULL, unit TEXT NOT NULL, description"
            " TEXT NOT NULL, labels TEXT NOT NULL, value REAL NOT NULL DEFAULT 0, count INTEGER"
            " NOT NULL DEFAULT 0, sum REAL NOT NULL DEFAULT 0, min REAL, max REAL, bounds TEXT,"
            " buckets TEXT, saved_ns BIGINT NOT NULL, PRIMARY KEY (run_id, attempt, name,"
            " labels))",
            "SELECT 1");
    snprintf(sql, sizeof(sql),
             "INSERT INTO run_metrics (run_id, attempt, name, kind, unit, description, labels,"
             " saved_ns) VALUES ('%s', 0, 'weft.runs', 0, '1', 'runs', '{}', 5)",
             id);
    fx_exec(f, sql, sql);
    if (ended_ns != 0) {
        memset(&end, 0, sizeof(end));
        end.status = "completed";
        end.ended_ns = ended_ns;
        end.loops = "{}";
        assert_weft_ok(weft__state_run_end(f->st, id, &end));
    }
    json_decref(cursors);
    json_decref(entry);
}

/* Rows of run @p id (and its session @p session) in table @p table. */
static long long
gc_rows(struct fx *f, const char *table, const char *id, const char *session)
{
    char sql[256];
    bool is_session = strcmp(table, "messages") == 0 || strcmp(table, "script_cursor_keys") == 0;

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE %s = '%s'", table,
             strcmp(table, "runs") == 0 ? "id"
             : is_session               ? "session_id"
                                        : "run_id",
             is_session ? session : id);
    return fx_count(f, sql);
}

static const char *const gc_tables[] = {
    "runs",          "steps",        "messages",    "script_cursor_keys",
    "llm_exchanges", "tool_results", "corrections", "run_metrics"};
#define GC_TABLES (sizeof(gc_tables) / sizeof(gc_tables[0]))

static weft_err
gc_collect(const char *run_id, uint64_t ended_ns, void *user_data)
{
    char *seen = user_data;

    (void)ended_ns;
    strcat(seen, run_id);
    strcat(seen, " ");
    return WEFT_OK;
}

static void
test_state_gc_deletes_an_old_run_with_every_row(void **state)
{
    struct fx *f = *state;
    char seen[256] = "";
    uint64_t rows = 0;
    bool is_deleted = false;

    gc_seed(f, "old1", "s-old", 2000);
    gc_seed(f, "new1", "s-new", GC_CUTOFF + 1);
    assert_weft_ok(weft__state_gc_scan(f->st, GC_CUTOFF, 0, NULL, 10, gc_collect, seen));
    assert_string_equal(seen, "old1 ");
    assert_weft_ok(weft__state_gc_run(f->st, "old1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(rows, GC_TABLES); /* one row in each table */
    for (size_t i = 0; i < GC_TABLES; i++) {
        if (gc_rows(f, gc_tables[i], "old1", "s-old") != 0 ||
            gc_rows(f, gc_tables[i], "new1", "s-new") != 1) {
            fail_msg("table %s: old1 has %lld rows, new1 %lld", gc_tables[i],
                     gc_rows(f, gc_tables[i], "old1", "s-old"),
                     gc_rows(f, gc_tables[i], "new1", "s-new"));
        }
    }
    /* Gone: a second pass finds nothing and deletes nothing. */
    seen[0] = '\0';
    assert_weft_ok(weft__state_gc_scan(f->st, GC_CUTOFF, 0, NULL, 10, gc_collect, seen));
    assert_string_equal(seen, "");
    assert_weft_ok(weft__state_gc_run(f->st, "old1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_false(is_deleted);
    assert_int_equal(rows, 0);
    /* The newer run is deleted by a later cutoff. */
    assert_weft_ok(weft__state_gc_run(f->st, "new1", GC_CUTOFF + 2, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM runs"), 0);
}

static void
test_state_gc_keeps_running_and_pinned_runs(void **state)
{
    struct fx *f = *state;
    struct weft_run_info info;
    char seen[256] = "";
    uint64_t rows = 0;
    size_t pinned = 0;
    size_t running = 0;
    bool is_deleted = false;

    gc_seed(f, "live", "s1", 0);
    gc_seed(f, "pin1", "s2", 2000);
    assert_weft_ok(weft__state_run_pin(f->st, "pin1", true));
    assert_int_equal(weft__state_run_pin(f->st, "nope", true), WEFT_ENOTFOUND);
    assert_weft_ok(weft__state_run_info(f->st, "pin1", &info));
    assert_true(info.is_pinned);
    weft__state_info_cleanup(&info);
    assert_weft_ok(weft__state_gc_kept(f->st, GC_CUTOFF, &pinned, &running));
    assert_int_equal(pinned, 1);
    assert_int_equal(running, 1);
    assert_weft_ok(weft__state_gc_scan(f->st, GC_CUTOFF, 0, NULL, 10, gc_collect, seen));
    assert_string_equal(seen, "");
    /* Asked directly, the backend checks again and keeps both. */
    assert_weft_ok(weft__state_gc_run(f->st, "pin1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_false(is_deleted);
    assert_weft_ok(weft__state_gc_run(f->st, "live", GC_CUTOFF, false, &rows, &is_deleted));
    assert_false(is_deleted);
    assert_int_equal(rows, 0);
    for (size_t i = 0; i < GC_TABLES; i++) {
        assert_int_equal(gc_rows(f, gc_tables[i], "pin1", "s2"), 1);
        assert_int_equal(gc_rows(f, gc_tables[i], "live", "s1"), 1);
    }
    /* Unpinned, it goes. */
    assert_weft_ok(weft__state_run_pin(f->st, "pin1", false));
    assert_weft_ok(weft__state_run_info(f->st, "pin1", &info));
    assert_false(info.is_pinned);
    weft__state_info_cleanup(&info);
    assert_weft_ok(weft__state_gc_scan(f->st, GC_CUTOFF, 0, NULL, 10, gc_collect, seen));
    assert_string_equal(seen, "pin1 ");
    assert_weft_ok(weft__state_gc_run(f->st, "pin1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(rows, GC_TABLES);
    assert_int_equal(gc_rows(f, "runs", "pin1", "s2"), 0);
    assert_int_equal(gc_rows(f, "runs", "live", "s1"), 1);
}

static void
test_state_gc_dry_run_counts_and_deletes_nothing(void **state)
{
    struct fx *f = *state;
    uint64_t dry_rows = 0;
    uint64_t rows = 0;
    bool is_deleted = false;

    gc_seed(f, "old1", "s1", 2000);
    assert_weft_ok(weft__state_gc_run(f->st, "old1", GC_CUTOFF, true, &dry_rows, &is_deleted));
    assert_true(is_deleted); /* would be */
    assert_int_equal(dry_rows, GC_TABLES);
    for (size_t i = 0; i < GC_TABLES; i++) {
        assert_int_equal(gc_rows(f, gc_tables[i], "old1", "s1"), 1);
    }
    assert_weft_ok(weft__state_gc_run(f->st, "old1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(rows, dry_rows);
}

/* A session's messages and cursors stay while another run of the session remains: its later
 * runs read the conversation back. */
static void
test_state_gc_session_rows_go_with_its_last_run(void **state)
{
    struct fx *f = *state;
    uint64_t rows = 0;
    bool is_deleted = false;

    gc_seed(f, "a1", "shared", 2000);
    gc_seed(f, "a2", "shared", 3000);
    assert_int_equal(gc_rows(f, "messages", NULL, "shared"), 2);
    assert_weft_ok(weft__state_gc_run(f->st, "a1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(rows, GC_TABLES - 2); /* not the session's two tables */
    assert_int_equal(gc_rows(f, "messages", NULL, "shared"), 2);
    assert_int_equal(gc_rows(f, "script_cursor_keys", NULL, "shared"), 1);
    assert_weft_ok(weft__state_gc_run(f->st, "a2", GC_CUTOFF, false, &rows, &is_deleted));
    assert_int_equal(rows, GC_TABLES + 1); /* both messages */
    assert_int_equal(gc_rows(f, "messages", NULL, "shared"), 0);
    assert_int_equal(gc_rows(f, "script_cursor_keys", NULL, "shared"), 0);
}

/* The scan pages by (end, id): a dry run, which deletes nothing, still moves on. */
static void
test_state_gc_scan_pages_by_end_and_id(void **state)
{
    struct fx *f = *state;
    char seen[256] = "";

    gc_seed(f, "c", "s1", 3000);
    gc_seed(f, "b", "s2", 2000);
    gc_seed(f, "a", "s3", 3000);
    assert_weft_ok(weft__state_gc_scan(f->st, GC_CUTOFF, 0, NULL, 2, gc_collect, seen));
    assert_string_equal(seen, "b a ");
    seen[0] = '\0';
    assert_weft_ok(weft__state_gc_scan(f->st, GC_CUTOFF, 3000, "a", 2, gc_collect, seen));
    assert_string_equal(seen, "c ");
    seen[0] = '\0';
    assert_weft_ok(weft__state_gc_scan(f->st, 2500, 0, NULL, 10, gc_collect, seen));
    assert_string_equal(seen, "b ");
    assert_int_equal(weft__state_gc_scan(f->st, GC_CUTOFF, 0, NULL, 0, gc_collect, seen),
                     WEFT_EINVAL);
}

/* ------------------------------------------------------------------------------------------ */
/* Content-addressed payloads (state_payloads.h, docs/replay.md)                               */

/* @p len bytes of words from @p seed: varied enough to be cut into several chunks. Free it. */
static char *
payload_text(unsigned seed, size_t len)
{
    char *s = malloc(len + 1);
    uint32_t x = seed * 2654435761u + 1;

    assert_non_null(s);
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        s[i] = i % 7 == 6 ? ' ' : (char)('a' + (x >> 16) % 26);
    }
    s[len] = '\0';
    return s;
}

/* The reference the backends give @p text: the hash of it redacted. */
static void
payload_ref_of(const char *text, char ref[WEFT__PAYLOAD_HEX_LEN + 1])
{
    char *clean = weft__redact_text(text);

    assert_non_null(clean);
    weft__payload_hash(clean, strlen(clean), ref);
    weft__free(clean);
}

/* The content of run @p run_id's first coder/act exchange, copied (free it); NULL if none. */
static char *
payload_exchange_content(struct fx *f, const char *run_id)
{
    json_t *script = NULL;
    json_t *list = NULL;
    char *content = NULL;

    if (weft__state_exchanges_script(f->st, run_id, &script) != WEFT_OK) {
        return NULL;
    }
    list = json_object_get(json_object_get(json_object_get(script, "responses"), "coder"), "act");
    if (json_string_value(json_object_get(json_array_get(list, 0), "content")) != NULL) {
        content = strdup(json_string_value(json_object_get(json_array_get(list, 0), "content")));
    }
    json_decref(script);
    return content;
}

struct payload_tool_row {
    int count;
    char *request;
    char *outcome;
};

static weft_err
collect_payload_tool(const struct weft__state_tool_result *r, void *user_data)
{
    struct payload_tool_row *row = user_data;

    if (row->count++ == 0) {
        row->request = strdup(r->request);
        row->outcome = strdup(r->outcome);
    }
    return WEFT_OK;
}

/* Run @p id with one exchange whose content is @p content and one tool call with @p request
 * and @p outcome; ended at @p ended_ns (0: left running). */
static void
payload_run(struct fx *f,
            const char *id,
            const char *content,
            const char *request,
            const char *outcome,
            uint64_t ended_ns)
{
    struct weft__state_tool_result r;
    struct weft__state_run_end end;
    json_t *entry = json_pack("{s:s}", "content", content);

    assert_weft_ok(weft__state_run_begin(f->st, id, "wf", NULL, id, NULL, 1000));
    assert_weft_ok(weft__state_exchange_add(f->st, id, "coder", "act", entry));
    memset(&r, 0, sizeof(r));
    r.step_id = "s1";
    r.attempt = 1;
    r.seq = 1;
    r.tool = "lookup";
    r.kind = "native";
    r.request = request;
    r.outcome = outcome;
    assert_weft_ok(weft__state_tool_result_add(f->st, id, &r));
    if (ended_ns != 0) {
        memset(&end, 0, sizeof(end));
        end.status = "completed";
        end.ended_ns = ended_ns;
        end.loops = "{}";
        assert_weft_ok(weft__state_run_end(f->st, id, &end));
    }
    json_decref(entry);
}

/* Check that run @p id reads back @p content, @p request and @p outcome exactly. */
static void
payload_read_back(
    struct fx *f, const char *id, const char *content, const char *request, const char *outcome)
{
    struct payload_tool_row row;
    char *got = payload_exchange_content(f, id);

    assert_non_null(got);
    assert_string_equal(got, content);
    free(got);
    memset(&row, 0, sizeof(row));
    assert_weft_ok(weft__state_tool_results_each(f->st, id, collect_payload_tool, &row));
    assert_int_equal(row.count, 1);
    assert_string_equal(row.request, request);
    assert_string_equal(row.outcome, outcome);
    free(row.request);
    free(row.outcome);
}

/* A long exchange and a long tool call are kept as references (the text columns empty, the
 * records in payloads) and read back byte for byte; short texts stay inline. */
static void
test_state_payloads_store_long_texts_as_references(void **state)
{
    struct fx *f = *state;
    char *content = payload_text(1, 3000);
    char *request = payload_text(2, 2000);
    char *outcome = payload_text(3, 5000);
    json_t *entry = json_pack("{s:s}", "content", content);
    char *entry_text = json_dumps(entry, JSON_COMPACT);
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];
    char sql[256];

    payload_run(f, "p1", content, request, outcome, 0);
    payload_ref_of(entry_text, ref);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM llm_exchanges WHERE run_id = 'p1' AND entry = ''"
             " AND entry_ref = '%s'",
             ref);
    assert_int_equal(fx_count(f, sql), 1);
    payload_ref_of(request, ref);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM tool_results WHERE run_id = 'p1' AND request = ''"
             " AND outcome = '' AND request_ref = '%s' AND outcome_ref IS NOT NULL",
             ref);
    assert_int_equal(fx_count(f, sql), 1);
    /* Several chunks each: more records than the three texts. */
    assert_true(fx_count(f, "SELECT count(*) FROM payloads") > 3);
    assert_true(fx_count(f, "SELECT count(*) FROM payloads WHERE kind = 1") >= 1);
    payload_read_back(f, "p1", content, request, outcome);
    /* Short texts stay in their columns. */
    payload_run(f, "p2", "short", "{}", "{\"rc\":0}", 0);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM llm_exchanges WHERE run_id = 'p2' AND"
                                 " entry_ref IS NULL AND entry <> ''"),
                     1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM tool_results WHERE run_id = 'p2' AND"
                                 " request_ref IS NULL AND outcome_ref IS NULL"),
                     1);
    payload_read_back(f, "p2", "short", "{}", "{\"rc\":0}");
    free(entry_text);
    json_decref(entry);
    free(content);
    free(request);
    free(outcome);
}

/* Two runs with the same long texts share their records; deleting one keeps them readable for
 * the other, and deleting both leaves no record. A dry run counts and keeps them. */
static void
test_state_payloads_are_shared_and_collected_with_their_last_run(void **state)
{
    struct fx *f = *state;
    char *content = payload_text(4, 4000);
    char *request = payload_text(5, 1500);
    char *outcome = payload_text(6, 3000);
    long long records = 0;
    uint64_t rows = 0;
    uint64_t dry_rows = 0;
    bool is_deleted = false;

    payload_run(f, "a1", content, request, outcome, 2000);
    records = fx_count(f, "SELECT count(*) FROM payloads");
    assert_true(records > 3);
    payload_run(f, "a2", content, request, outcome, 3000);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), records);
    /* While another run holds them, a run's records are not its own to collect. */
    assert_weft_ok(weft__state_gc_run(f->st, "a1", GC_CUTOFF, true, &dry_rows, &is_deleted));
    assert_true(is_deleted);
    assert_weft_ok(weft__state_gc_run(f->st, "a1", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(rows, dry_rows);
    assert_int_equal(rows, 3); /* the run, its exchange and its tool call */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), records);
    payload_read_back(f, "a2", content, request, outcome);
    /* The last holder's dry run counts the records with its rows and deletes nothing. */
    assert_weft_ok(weft__state_gc_run(f->st, "a2", GC_CUTOFF, true, &dry_rows, &is_deleted));
    assert_int_equal(dry_rows, 3 + (uint64_t)records);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), records);
    payload_read_back(f, "a2", content, request, outcome);
    assert_weft_ok(weft__state_gc_run(f->st, "a2", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(rows, dry_rows);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), 0);
    free(content);
    free(request);
    free(outcome);
}

/* Is there a payload record of @p len bytes of @p text? */
static bool
payload_has_record(struct fx *f, const char *text, size_t len)
{
    char hash[WEFT__PAYLOAD_HEX_LEN + 1];
    char sql[160];

    weft__payload_hash(text, len, hash);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM payloads WHERE hash = '%s'", hash);
    return fx_count(f, sql) == 1;
}

/* A one-chunk text of one run that is also a chunk of another run's longer text is one record:
 * it stays while either holds it, whichever goes first. */
static void
test_state_payloads_keep_a_chunk_another_text_lists(void **state)
{
    struct fx *f = *state;
    char *whole = payload_text(7, 6000);
    char *chunk = NULL;
    long long records = 0;
    uint64_t rows = 0;
    bool is_deleted = false;

    payload_run(f, "long", "x", whole, "{}", 2000);
    records = fx_count(f, "SELECT count(*) FROM payloads");
    /* Find the chunks' ends by their records, up to one long enough to be a text of its own. */
    for (size_t at = 0, len = 1; chunk == NULL && at + len <= 6000; len++) {
        if (payload_has_record(f, whole + at, len)) {
            if (len >= WEFT__PAYLOAD_MIN) {
                chunk = strndup(whole + at, len);
            }
            at += len;
            len = 0;
        }
    }
    assert_non_null(chunk);
    payload_run(f, "part", "x", chunk, "{}", 2000);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), records); /* shared */
    assert_weft_ok(weft__state_gc_run(f->st, "part", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), records);
    payload_read_back(f, "long", "x", whole, "{}");
    /* The other way round: the list goes, the chunk a row still holds stays. */
    payload_run(f, "part2", "x", chunk, "{}", 2000);
    assert_weft_ok(weft__state_gc_run(f->st, "long", GC_CUTOFF, false, &rows, &is_deleted));
    assert_true(is_deleted);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), 1);
    payload_read_back(f, "part2", "x", chunk, "{}");
    assert_weft_ok(weft__state_gc_run(f->st, "part2", GC_CUTOFF, false, &rows, &is_deleted));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), 0);
    free(chunk);
    free(whole);
}

/* WEFT_PAYLOADS=off writes inline text, as before payloads existed, and reads it back. */
static void
test_state_payloads_off_writes_inline(void **state)
{
    struct fx *f = *state;
    char *content = payload_text(8, 3000);
    char *request = payload_text(9, 2000);
    char *outcome = payload_text(10, 2000);

    setenv("WEFT_PAYLOADS", "off", 1);
    payload_run(f, "off1", content, request, outcome, 0);
    unsetenv("WEFT_PAYLOADS");
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), 0);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM llm_exchanges WHERE run_id = 'off1' AND"
                                 " entry_ref IS NULL AND entry <> ''"),
                     1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM tool_results WHERE run_id = 'off1' AND"
                                 " request_ref IS NULL AND outcome_ref IS NULL AND request <> ''"),
                     1);
    payload_read_back(f, "off1", content, request, outcome);
    free(content);
    free(request);
    free(outcome);
}

/* A credential in a long request is redacted before the text is hashed: what reads back is
 * redacted, and the reference is the hash of the redacted text. */
static void
test_state_payloads_redact_before_hashing(void **state)
{
    struct fx *f = *state;
    char *words = payload_text(11, 1500);
    char request[2048];
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];
    char raw_ref[WEFT__PAYLOAD_HEX_LEN + 1];
    char sql[256];
    struct payload_tool_row row;

    snprintf(request, sizeof(request), "{\"q\":\"%.700s key sk-proj-abcdefghijklmnopqrstuv %s\"}",
             words, words + 700);
    payload_run(f, "sec", "hello", request, "{\"rc\":0}", 0);
    payload_ref_of(request, ref);
    weft__payload_hash(request, strlen(request), raw_ref);
    assert_string_not_equal(ref, raw_ref);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM tool_results WHERE request_ref = '%s'", ref);
    assert_int_equal(fx_count(f, sql), 1);
    memset(&row, 0, sizeof(row));
    assert_weft_ok(weft__state_tool_results_each(f->st, "sec", collect_payload_tool, &row));
    assert_int_equal(row.count, 1);
    assert_null(strstr(row.request, "sk-proj-abcdefghijklmnopqrstuv"));
    assert_non_null(strstr(row.request, words + 700)); /* the rest is untouched */
    weft__payload_hash(row.request, strlen(row.request), raw_ref);
    assert_string_equal(raw_ref, ref);
    free(row.request);
    free(row.outcome);
    free(words);
}

/* Rows written before payloads (no reference, however long) read as they did. */
static void
test_state_payloads_old_rows_without_ref_still_read(void **state)
{
    struct fx *f = *state;
    char *content = payload_text(12, 1000);
    char *request = payload_text(13, 1000);
    char sql[3072];

    assert_weft_ok(weft__state_run_begin(f->st, "old", "wf", NULL, "old", NULL, 1000));
    snprintf(sql, sizeof(sql),
             "INSERT INTO llm_exchanges (run_id, seq, who, purpose, entry, created_ns)"
             " VALUES ('old', 1, 'coder', 'act', '{\"content\":\"%s\"}', 5)",
             content);
    fx_exec(f, sql, strstr(sql, "seq, ") == NULL ? sql : "SELECT 1");
    snprintf(sql, sizeof(sql),
             "INSERT INTO llm_exchanges (run_id, who, purpose, entry, created_ns)"
             " VALUES ('old', 'coder', 'act', '{\"content\":\"%s\"}', 5)",
             content);
    fx_exec(f, "SELECT 1", sql);
    snprintf(sql, sizeof(sql),
             "INSERT INTO tool_results (run_id, step_id, attempt, seq, tool, kind, request,"
             " outcome, created_ns) VALUES ('old', 's1', 1, 1, 'lookup', 'native', '%s',"
             " '{\"rc\":0}', 5)",
             request);
    fx_exec(f, sql, sql);
    payload_read_back(f, "old", content, request, "{\"rc\":0}");
    free(content);
    free(request);
}

/* Out of memory at every allocation of a payload write, read and collection: each call fails
 * whole (no transaction left open, a failed collection rolled back) or works. */
static void
test_state_payloads_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    char *content = payload_text(14, 3000);
    char *request = payload_text(15, 2000);
    json_t *entry = json_pack("{s:s}", "content", content);
    struct weft__state_tool_result r;
    struct payload_tool_row row;
    long long records = 0;
    uint64_t rows = 0;
    bool is_deleted = false;
    bool is_done = false;

    memset(&r, 0, sizeof(r));
    r.step_id = "s1";
    r.attempt = 1;
    r.seq = 1;
    r.tool = "lookup";
    r.kind = "native";
    r.request = request;
    r.outcome = "{}";
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done && budget < 20000; budget++) {
        json_t *script = NULL;
        char id[32];
        weft_err err = WEFT_OK;

        /* A run per round, so that each round reads back only its own rows. */
        snprintf(id, sizeof(id), "oom%ld", budget);
        assert_weft_ok(weft__state_run_begin(f->st, id, "wf", NULL, "oom", NULL, 1000));
        failalloc_budget = budget;
        err = weft__state_exchange_add(f->st, id, "coder", "act", entry);
        if (err == WEFT_OK) {
            err = weft__state_tool_result_add(f->st, id, &r);
        }
        if (err == WEFT_OK) {
            err = weft__state_exchanges_script(f->st, id, &script);
            json_decref(script);
        }
        memset(&row, 0, sizeof(row));
        if (err == WEFT_OK) {
            err = weft__state_tool_results_each(f->st, id, collect_payload_tool, &row);
        }
        failalloc_budget = -1;
        free(row.request);
        free(row.outcome);
        is_done = err == WEFT_OK;
        assert_false(weft__state_in_transaction(f->st));
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    /* Collection: a failure rolls the run's deletion back whole. */
    payload_run(f, "g1", content, request, "{}", 2000);
    records = fx_count(f, "SELECT count(*) FROM payloads");
    fx_exec(f, "DELETE FROM llm_exchanges WHERE run_id LIKE 'oom%'",
            "DELETE FROM llm_exchanges WHERE run_id LIKE 'oom%'");
    fx_exec(f, "DELETE FROM tool_results WHERE run_id LIKE 'oom%'",
            "DELETE FROM tool_results WHERE run_id LIKE 'oom%'");
    is_done = false;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done && budget < 20000; budget++) {
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__state_gc_run(f->st, "g1", GC_CUTOFF, false, &rows, &is_deleted);
        failalloc_budget = -1;
        is_done = err == WEFT_OK && is_deleted;
        assert_false(weft__state_in_transaction(f->st));
        if (!is_done) {
            assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), records);
            assert_int_equal(fx_count(f, "SELECT count(*) FROM runs WHERE id = 'g1'"), 1);
        }
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM payloads"), 0);
    json_decref(entry);
    free(content);
    free(request);
}

/* weft__state_commit_held(): the outermost pair's transaction stays open (another connection
 * sees none of it), writes outside any pair join it, and it is committed by
 * weft__state_flush(), by the next begin/commit pair (which adopts it) or by closing the
 * handle; nested in a pair it is an ordinary commit. */
static void
test_state_held_commit_waits_for_a_flush_a_pair_or_close(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    char err[256] = "";

    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "first", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "b", 0, "second", NULL, 0, NULL));
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_flush(f->st)); /* nothing held: nothing to do */
    assert_false(weft__state_in_transaction(f->st));
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_commit_held(f->st));
    assert_true(weft__state_in_transaction(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r'"), 0);
    assert_weft_ok(weft__state_flush(f->st));
    assert_false(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r'"), 2);

    /* Held, then adopted by the next pair, with a held commit nested inside it. */
    weft__plan_set_status(&plan, 0, STEP_COMPLETED);
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_commit_held(f->st));
    assert_weft_ok(weft__state_begin(f->st));
    weft__plan_set_status(&plan, 1, STEP_IN_PROGRESS);
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    assert_weft_ok(weft__state_commit_held(f->st));
    assert_true(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE status = 'completed'"), 0);
    assert_weft_ok(weft__state_commit(f->st));
    assert_false(weft__state_in_transaction(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE status = 'completed'"), 1);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE status = 'in_progress'"), 1);

    /* Held when the handle closes: committed, not rolled back. */
    weft__plan_set_status(&plan, 1, STEP_COMPLETED);
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    assert_weft_ok(weft__state_commit_held(f->st));
    weft__state_close(f->st);
    f->st = NULL;
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE status = 'completed'"), 2);
    assert_weft_ok(weft__state_open(f->location, &f->st, err, sizeof(err)));
    weft__plan_cleanup(&plan);
}

#define STATE_CASES(setup, teardown)                                                               \
    cmocka_unit_test_setup_teardown(test_state_cached_statements_write_every_row, setup,           \
                                    teardown),                                                     \
        cmocka_unit_test_setup_teardown(test_state_held_commit_waits_for_a_flush_a_pair_or_close,  \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_gc_deletes_an_old_run_with_every_row, setup,    \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_gc_keeps_running_and_pinned_runs, setup,        \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_gc_dry_run_counts_and_deletes_nothing, setup,   \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_gc_session_rows_go_with_its_last_run, setup,    \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_gc_scan_pages_by_end_and_id, setup, teardown),  \
        cmocka_unit_test_setup_teardown(test_state_cursors_are_saved_per_queue, setup, teardown),  \
        cmocka_unit_test_setup_teardown(                                                           \
            test_state_transaction_groups_writes_and_rolls_back_on_failure, setup, teardown),      \
        cmocka_unit_test_setup_teardown(test_state_lazy_transaction_commits_like_an_ordinary_one,  \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_run_begin_end_and_info_round_trip, setup,       \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_inputs_are_redacted_on_disk, setup, teardown),  \
        cmocka_unit_test_setup_teardown(test_state_steps_save_update_and_read_in_plan_order,       \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_steps_keep_task_uuid_retries_and_dispatch,      \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_runs_list_newest_first_with_limit, setup,       \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_run_resolve_by_prefix, setup, teardown),        \
        cmocka_unit_test_setup_teardown(test_state_messages_keep_the_last_ones_oldest_first,       \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_exchanges_make_a_replayable_script, setup,      \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_surgery_records_steps_and_correction, setup,    \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(                                                           \
            test_state_surgery_nests_in_a_transaction_and_rolls_back_whole, setup, teardown),      \
        cmocka_unit_test_setup_teardown(                                                           \
            test_state_lease_is_exclusive_and_recover_marks_dead_owners, setup, teardown),         \
        cmocka_unit_test_setup_teardown(test_state_run_hash_and_root, setup, teardown),            \
        cmocka_unit_test_setup_teardown(test_state_run_snapshot_round_trip, setup, teardown),      \
        cmocka_unit_test_setup_teardown(test_state_out_of_memory_fails_cleanly, setup, teardown),  \
        cmocka_unit_test_setup_teardown(test_state_skill_save_dedups_by_normalised_task_per_agent, \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_skill_is_replaced_by_an_equal_or_better_reward, \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(                                                           \
            test_state_skill_task_and_solution_are_capped_on_utf8_boundaries, setup, teardown),    \
        cmocka_unit_test_setup_teardown(                                                           \
            test_state_skills_search_ranks_one_agent_above_a_threshold, setup, teardown),          \
        cmocka_unit_test_setup_teardown(test_state_skills_search_treats_query_syntax_as_words,     \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_skill_used_counts_injections, setup, teardown), \
        cmocka_unit_test_setup_teardown(test_state_skills_list_get_by_prefix_and_forget, setup,    \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_skills_prune_by_count_and_age, setup,           \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_skills_search_keeps_common_word_counts, setup,  \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_skill_vectors_follow_their_skill, setup,        \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_teams_round_trip, setup, teardown),             \
        cmocka_unit_test_setup_teardown(test_state_tool_results_and_origin_round_trip, setup,      \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_payloads_store_long_texts_as_references, setup, \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(                                                           \
            test_state_payloads_are_shared_and_collected_with_their_last_run, setup, teardown),    \
        cmocka_unit_test_setup_teardown(test_state_payloads_keep_a_chunk_another_text_lists,       \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_payloads_off_writes_inline, setup, teardown),   \
        cmocka_unit_test_setup_teardown(test_state_payloads_redact_before_hashing, setup,          \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_state_payloads_old_rows_without_ref_still_read,       \
                                        setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(test_state_payloads_out_of_memory_fails_cleanly, setup,    \
                                        teardown)

#endif /* WEFT_TESTS_STATE_CASES_H */
