/* tests/runtime/test_executor.c - the executor interface (runtime/engine/executor.h) proven with an
 * executor of the test's own: it records every task it is handed (as plain data, the way a
 * remote executor would serialise it) and answers asynchronously from poll(), and its answers
 * drive the run: step results, dependencies' context, failures, the run's output and status.
 * Also: an executor that refuses a task or never answers fails the step, not the process, and
 * a result for a task nobody waits for is ignored. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "runtime/engine/executor.h"

#include "support/weft_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TASKS 8

struct recorded {
    uint64_t task_id;
    unsigned attempt;
    char step_id[32];
    char kind[16];
    char agent[16];
    char task[64];
    char context[256];
};

/* submit and poll may be called from several threads at once (a parallel batch): one lock. */
struct test_executor {
    struct weft__executor base;
    pthread_mutex_t lock;
    size_t hold_until;      /* poll delivers nothing until this many tasks were submitted */
    bool is_delivering_all; /* one poll delivers every pending result (other threads' too) */
    struct recorded tasks[MAX_TASKS];
    size_t task_count;
    /* Results waiting for poll(). */
    weft__step_done_fn done[MAX_TASKS];
    void *user_data[MAX_TASKS];
    size_t pending_first;
    size_t pending_count;
    unsigned polls;
    const char *fail_step;   /* this step's result is a failure */
    bool is_refusing;        /* submit says no */
    bool is_silent;          /* poll never delivers */
    bool is_answering_twice; /* every result is delivered again (redelivery) */
    int *abort_flag;         /* set from a silent poll */
};

static weft_err
test_submit(struct weft__executor *base,
            const struct weft__step_task *task,
            weft__step_done_fn done,
            void *user_data)
{
    struct test_executor *ex = (struct test_executor *)base;
    struct recorded *r = NULL;

    pthread_mutex_lock(&ex->lock);
    if (ex->is_refusing || ex->task_count == MAX_TASKS) {
        pthread_mutex_unlock(&ex->lock);
        return WEFT_EIO;
    }
    r = &ex->tasks[ex->task_count];
    r->task_id = task->task_id;
    r->attempt = task->attempt;
    snprintf(r->step_id, sizeof(r->step_id), "%s", task->step_id);
    snprintf(r->kind, sizeof(r->kind), "%s", task->kind);
    snprintf(r->agent, sizeof(r->agent), "%s", task->agent);
    snprintf(r->task, sizeof(r->task), "%s", task->task);
    snprintf(r->context, sizeof(r->context), "%s", task->context);
    ex->done[ex->task_count] = done;
    ex->user_data[ex->task_count] = user_data;
    ex->task_count++;
    ex->pending_count++;
    pthread_mutex_unlock(&ex->lock);
    return WEFT_OK; /* the answer comes from poll(), later */
}

static weft_err
test_poll(struct weft__executor *base, uint32_t timeout_ms)
{
    struct test_executor *ex = (struct test_executor *)base;
    struct weft__step_result res;
    const struct recorded *r = NULL;
    char output[128];

    (void)timeout_ms;
    pthread_mutex_lock(&ex->lock);
    ex->polls++;
    if (ex->is_silent && ex->abort_flag != NULL) {
        *ex->abort_flag = 1;
    }
    if (ex->hold_until > 0 && ex->task_count < ex->hold_until && ex->polls > 5000 &&
        ex->abort_flag != NULL) {
        *ex->abort_flag = 1; /* the tasks never came together: end the run */
    }
    if (ex->is_silent || ex->pending_count == 0 || ex->task_count < ex->hold_until) {
        pthread_mutex_unlock(&ex->lock);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        return WEFT_ETIMEDOUT;
    }
    r = &ex->tasks[ex->pending_first];
    memset(&res, 0, sizeof(res));
    res.task_id = r->task_id;
    if (ex->fail_step != NULL && strcmp(r->step_id, ex->fail_step) == 0) {
        res.status = STEP_FAILED;
        res.error = "worker crashed";
    } else {
        snprintf(output, sizeof(output), "done: %s (attempt %u)", r->step_id, r->attempt);
        res.status = STEP_COMPLETED;
        res.output = output;
    }
    ex->done[ex->pending_first](ex->user_data[ex->pending_first], &res);
    if (ex->is_answering_twice) {
        res.output = "a second answer";
        ex->done[ex->pending_first](ex->user_data[ex->pending_first], &res);
    }
    ex->pending_first++;
    ex->pending_count--;
    if (ex->is_delivering_all && ex->pending_count > 0) {
        pthread_mutex_unlock(&ex->lock);
        return test_poll(base, timeout_ms);
    }
    pthread_mutex_unlock(&ex->lock);
    return WEFT_OK;
}

static const struct weft__executor_ops test_ops = {test_submit, test_poll, NULL, NULL};

struct fx {
    char dir[256];
    char state[300];
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    struct test_executor ex;
};

#define WORKFLOW                                                                               \
    "{\"name\": \"remote\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "     \
    "\"script.json\"}}, \"agents\": [{\"name\": \"researcher\"}, {\"name\": \"writer\"}],"     \
    " \"plan\": [{\"id\": \"research\", \"agent\": \"researcher\", \"task\": \"find facts\"}," \
    " {\"id\": \"write\", \"agent\": \"writer\", \"task\": \"write it up\","                   \
    " \"depends_on\": [\"research\"]}]}"

static void
write_file(const char *dir, const char *name, const char *text)
{
    char path[400];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct weft_diags d = {0};
    char path[400];

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-executor-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    write_file(f->dir, "script.json", "{\"responses\": {}}");
    write_file(f->dir, "wf.json", WORKFLOW);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    assert_weft_ok(weft_workflow_load(path, &f->wf, &d));
    weft_diags_cleanup(&d);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
    f->ro.input = "a report";
    f->ex.base.ops = &test_ops;
    f->ex.base.name = "test";
    f->ex.base.max_in_flight = 4;
    f->ex.base.writes_plan = false;
    pthread_mutex_init(&f->ex.lock, NULL);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    weft_test_rmtree(f->dir);
    pthread_mutex_destroy(&f->ex.lock);
    free(f);
    return 0;
}

static weft_err
run(struct fx *f, char *error, size_t error_len)
{
    return weft__run_with_executor(f->wf, &f->ro, &f->ex.base, &f->r, error, error_len);
}

static const struct weft_run_step *
step(const struct weft_run_result *r, const char *id)
{
    for (size_t i = 0; i < r->step_count; i++) {
        if (strcmp(r->steps[i].id, id) == 0) {
            return &r->steps[i];
        }
    }
    fail_msg("no step %s", id);
    return NULL;
}

static void
test_executor_receives_each_step_as_a_task(void **state)
{
    struct fx *f = *state;
    char error[256] = "";

    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->ex.task_count, 2);
    assert_int_equal(f->ex.tasks[0].task_id, 1);
    assert_int_equal(f->ex.tasks[0].attempt, 1);
    assert_string_equal(f->ex.tasks[0].step_id, "research");
    assert_string_equal(f->ex.tasks[0].kind, "agent");
    assert_string_equal(f->ex.tasks[0].agent, "researcher");
    assert_string_equal(f->ex.tasks[0].task, "find facts");
    assert_string_equal(f->ex.tasks[0].context, "{}");
    assert_int_equal(f->ex.tasks[1].task_id, 2);
    assert_string_equal(f->ex.tasks[1].step_id, "write");
    assert_string_equal(f->ex.tasks[1].agent, "writer");
    /* The dependency's result, as the executor answered it, is the next task's context. */
    assert_string_equal(f->ex.tasks[1].context, "{\"research\":\"done: research (attempt 1)\"}");
    assert_true(f->ex.polls >= 2); /* the results came asynchronously, through poll() */
}

static void
test_executor_results_drive_the_run(void **state)
{
    struct fx *f = *state;
    char error[256] = "";

    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->output, "done: write (attempt 1)");
    assert_string_equal(step(f->r, "research")->status, "completed");
    assert_string_equal(step(f->r, "research")->result, "done: research (attempt 1)");
    assert_int_equal(step(f->r, "research")->attempts, 1);
    assert_true(step(f->r, "write")->has_reward);
    assert_true(step(f->r, "write")->reward == 1.0);
    assert_true(f->r->reward == 2.0);
    assert_int_equal(f->r->llm_calls, 0); /* nothing ran in process */
}

static void
test_executor_failure_fails_the_step_and_the_run(void **state)
{
    struct fx *f = *state;
    char error[256] = "";

    f->ex.fail_step = "research";
    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(step(f->r, "research")->status, "failed");
    assert_null(step(f->r, "research")->result);
    assert_int_equal(f->ex.task_count, 1); /* the dependent step never became ready */
    assert_true(step(f->r, "research")->reward < -0.99);
}

static void
test_executor_refusing_a_task_fails_the_step(void **state)
{
    struct fx *f = *state;
    char error[256] = "";

    f->ex.is_refusing = true;
    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(step(f->r, "research")->status, "failed");
}

static void
test_executor_silent_until_abort_fails_the_step(void **state)
{
    struct fx *f = *state;
    char error[256] = "";
    int abort_flag = 0;

    /* The executor never answers and aborts the run from its first poll: the engine stops
     * waiting, fails the step and the run ends as aborted. */
    f->ex.is_silent = true;
    f->ex.abort_flag = &abort_flag;
    f->ro.abort_flag = &abort_flag;
    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->r->status, WEFT_RUN_ABORTED);
    assert_int_equal(f->ex.task_count, 1);
    assert_int_equal(f->ex.polls, 1);
    assert_string_equal(step(f->r, "research")->status, "failed");
    assert_string_equal(step(f->r, "write")->status, "pending");
}

static void
test_executor_redelivered_result_is_ignored(void **state)
{
    struct fx *f = *state;
    char error[256] = "";

    f->ex.is_answering_twice = true;
    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(step(f->r, "research")->result, "done: research (attempt 1)");
    assert_string_equal(f->r->output, "done: write (attempt 1)");
}

/* Three independent steps and one that joins them: a remote executor gets the three at once
 * (its max_in_flight is the default width) and answers none until all three are in flight;
 * then one poll brings all three results, and the thread that polled applies them all (one
 * commit) while the other two find theirs done. */
static void
test_executor_ready_steps_are_dispatched_together(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    char error[256] = "";
    char path[400];
    int abort_flag = 0;
    bool seen[3] = {false, false, false};

    write_file(f->dir, "wide.json",
               "{\"name\": \"wide\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"script.json\"}}, \"agents\": [{\"name\": \"researcher\"}, {\"name\": "
               "\"writer\"}], \"plan\": [{\"id\": \"a\", \"agent\": \"researcher\", \"task\": "
               "\"t\"}, {\"id\": \"b\", \"agent\": \"researcher\", \"task\": \"t\"}, {\"id\": "
               "\"c\", \"agent\": \"researcher\", \"task\": \"t\"}, {\"id\": \"join\", \"agent\": "
               "\"writer\", \"task\": \"t\", \"depends_on\": [\"a\", \"b\", \"c\"]}]}");
    snprintf(path, sizeof(path), "%s/wide.json", f->dir);
    weft_workflow_free(f->wf);
    assert_weft_ok(weft_workflow_load(path, &f->wf, &d));
    weft_diags_cleanup(&d);
    f->ex.hold_until = 3;
    f->ex.is_delivering_all = true; /* one thread's poll brings all three results */
    f->ex.abort_flag = &abort_flag;
    f->ro.abort_flag = &abort_flag;
    assert_weft_ok(run(f, error, sizeof(error)));
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->ex.task_count, 4);
    for (size_t i = 0; i < 3; i++) {
        assert_true(f->ex.tasks[i].step_id[0] >= 'a' && f->ex.tasks[i].step_id[0] <= 'c');
        seen[f->ex.tasks[i].step_id[0] - 'a'] = true;
    }
    assert_true(seen[0] && seen[1] && seen[2]);
    assert_string_equal(f->ex.tasks[3].step_id, "join");
    assert_non_null(strstr(f->ex.tasks[3].context, "\"a\":\"done: a (attempt 1)\""));
    assert_non_null(strstr(f->ex.tasks[3].context, "\"c\":\"done: c (attempt 1)\""));
    assert_non_null(strstr(f->r->decisions[0].reason, "3 ready steps at once"));
    assert_string_equal(f->r->output, "done: join (attempt 1)");
    assert_true(f->r->reward == 4.0);
}

/* A no-op task runs nothing: no workflow needed, success with an empty output. */
static void
test_execute_task_noop_succeeds_without_workflow(void **state)
{
    struct weft__step_task task;
    struct weft__task_run tr;
    struct weft__task_outcome out;
    char err[256] = "";

    (void)state;
    memset(&task, 0, sizeof(task));
    task.attempt = 1;
    task.step_id = "s1";
    task.kind = "noop";
    task.agent = "noop";
    task.task = "";
    memset(&tr, 0, sizeof(tr));
    tr.run_id = "r1";
    tr.task = &task;
    assert_weft_ok(weft__execute_task(&tr, &out, err, sizeof(err)));
    assert_true(out.is_success);
    assert_string_equal(out.output, "");
    assert_null(out.error);
    assert_int_equal(out.llm_calls, 0);
    weft__task_outcome_cleanup(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_executor_receives_each_step_as_a_task),
        T(test_executor_results_drive_the_run),
        T(test_executor_failure_fails_the_step_and_the_run),
        T(test_executor_refusing_a_task_fails_the_step),
        T(test_executor_silent_until_abort_fails_the_step),
        T(test_executor_redelivered_result_is_ignored),
        T(test_executor_ready_steps_are_dispatched_together),
#undef T
        cmocka_unit_test(test_execute_task_noop_succeeds_without_workflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
