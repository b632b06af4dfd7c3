/* tests/runtime/test_fork.c - `weft fork RUN --from STEP` on the examples' own runs
 * (docs/replay.md, "What a fork keeps and what it re-runs").
 *
 * Each example with a scripted model is run once into a real SQLite state, then forked from
 * each of its steps in turn, with the same workflow and script. A fork re-runs the step and
 * what follows it from the plan as it stood when that step started, with the scripts where the
 * original's were then, so every fork ends as the original did, its plan never grows beyond the
 * original's (steps a replan or a correction added after that step are not carried over and then
 * added again) nor loses any, and a fork from the first step reproduces the original's steps
 * and statuses reusing none.
 * Before this, the code-review run forked from its first review kept s4-s9 and added them again
 * live (s10...) until the fixer's script ran dry. */
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

struct fx {
    char dir[64];
    char state[128];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-fork-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* One run of @p wf (a fork when @p fork is set), in its own workspace under the fixture. */
static struct weft_run_result *
run_as(const struct fx *f,
       const struct weft_workflow *wf,
       const char *input,
       const char *fork,
       const char *from,
       const char *replay)
{
    static unsigned n;
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char workspace[160];
    char error[512] = "";
    weft_err err = WEFT_OK;

    memset(&ro, 0, sizeof(ro));
    snprintf(workspace, sizeof(workspace), "%s/ws%u", f->dir, n++);
    ro.state_path = f->state;
    ro.workspace = workspace;
    ro.input = input;
    ro.fork_run_id = fork;
    ro.fork_from_step = from;
    ro.replay_run_id = replay;
    err = weft_run(wf, &ro, &r, error, sizeof(error));
    if (err != WEFT_OK) {
        fail_msg("run (fork of %s from %s): %s: %s", fork != NULL ? fork : "-",
                 from != NULL ? from : "-", weft_strerror(err), error);
    }
    return r;
}

static struct weft_run_result *
run(const struct fx *f,
    const struct weft_workflow *wf,
    const char *input,
    const char *fork,
    const char *from)
{
    return run_as(f, wf, input, fork, from, NULL);
}

/* A replay of fork @p fk (of @p orig from @p from) is the same fork answered from the fork's
 * own calls (as `weft replay` runs it): identical, every call of the fork answered. */
static void
replay_fork(const struct fx *f,
            const struct weft_workflow *wf,
            const char *input,
            const struct weft_run_result *orig,
            const char *from,
            const struct weft_run_result *fk,
            const char *rel)
{
    struct weft_run_result *rp = run_as(f, wf, input, orig->run_id, from, fk->run_id);
    const struct weft_replay_report *rr = rp->replay;

    assert_non_null(rr);
    if (!rr->is_identical || rr->llm_calls != rr->llm_expected ||
        rr->tool_calls != rr->tool_expected || rp->status != fk->status ||
        rp->reused_steps != fk->reused_steps) {
        fail_msg("%s forked from %s, replayed: identical %d (%s at %s: %s), %zu of %zu LLM "
                 "and %zu of %zu tool calls, status %d (the fork's %d), %zu reused (the fork %zu)",
                 rel, from, (int)rr->is_identical, rr->what != NULL ? rr->what : "-",
                 rr->span != NULL ? rr->span : "-", rr->got != NULL ? rr->got : "-", rr->llm_calls,
                 rr->llm_expected, rr->tool_calls, rr->tool_expected, (int)rp->status,
                 (int)fk->status, rp->reused_steps, fk->reused_steps);
    }
    assert_string_equal(rr->original_run_id, fk->run_id);
    weft_run_result_free(rp);
}

static const char *
step_status(const struct weft_run_result *r, const char *id)
{
    for (size_t i = 0; i < r->step_count; i++) {
        if (strcmp(r->steps[i].id, id) == 0) {
            return r->steps[i].status;
        }
    }
    return NULL;
}

static size_t
count_requested(const struct weft_run_result *r)
{
    size_t n = 0;

    for (size_t i = 0; i < r->step_count; i++) {
        n += r->steps[i].requested_by != NULL || r->steps[i].parent != NULL ? 1 : 0;
    }
    return n;
}

/* Run workflow file @p path and fork it from each of its steps. @p min_added: how
 * many steps the original's replans and corrections must have added (so the example still
 * exercises what this test is about). */
static void
fork_file_each_step(
    const struct fx *f, const char *path, const char *input, size_t min_added, bool is_flow)
{
    const char *rel = path;
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    struct weft_run_result *orig = NULL;

    if (weft_workflow_load(path, &wf, &d) != WEFT_OK) {
        fail_msg("%s does not load", path);
    }
    weft_diags_cleanup(&d);
    orig = run(f, wf, input, NULL, NULL);
    assert_true(orig->step_count > 0);
    if (count_requested(orig) < min_added) {
        fail_msg("%s: %zu steps added by replans or corrections, expected at least %zu", rel,
                 count_requested(orig), min_added);
    }
    for (size_t s = 0; s < orig->step_count; s++) {
        const char *from = orig->steps[s].id;
        struct weft_run_result *fk = run(f, wf, input, orig->run_id, from);

        if (fk->status != orig->status) {
            fail_msg("%s forked from %s: status %d (%s), the original's %d", rel, from,
                     (int)fk->status, fk->reason != NULL ? fk->reason : "", (int)orig->status);
        }
        /* Its scripts answer as they did then, so it makes the original's decisions again: no
         * step more, none fewer (a plan that grew, or lost the steps the forked one needed, or
         * a reused fan-out whose items it did not list). */
        if (fk->step_count != orig->step_count) {
            fail_msg("%s forked from %s: %zu steps (last %s), the original had %zu", rel, from,
                     fk->step_count, fk->steps[fk->step_count - 1].id, orig->step_count);
        }
        if (fk->reused_steps >= orig->step_count) {
            fail_msg("%s forked from %s: all %zu steps reused, the forked one too", rel, from,
                     orig->step_count);
        }
        /* Each step the fork has, the original had, and it ended the same way. */
        for (size_t i = 0; i < fk->step_count; i++) {
            const char *was = step_status(orig, fk->steps[i].id);
            if (was == NULL || strcmp(was, fk->steps[i].status) != 0) {
                fail_msg("%s forked from %s: step %s %s, in the original %s", rel, from,
                         fk->steps[i].id, fk->steps[i].status, was != NULL ? was : "absent");
            }
        }
        replay_fork(f, wf, input, orig, from, fk, rel);
        if (s == 0) { /* from the first step: the original's run again, corrections and all */
            assert_int_equal(fk->step_count, orig->step_count);
            assert_int_equal(fk->reused_steps, 0);
            assert_int_equal(fk->corrections, orig->corrections);
            for (size_t k = 0; k < WEFT_LOOP_KIND_COUNT; k++) {
                assert_int_equal(fk->loops[k], orig->loops[k]);
            }
            for (size_t i = 0; i < fk->step_count; i++) {
                assert_string_equal(fk->steps[i].id, orig->steps[i].id);
                assert_int_equal(fk->steps[i].attempts, orig->steps[i].attempts);
            }
        }
        if (s > 0 && !is_flow) {
            /* A fork of this fork from the original's last step answers as the original did
             * there: the scripts' positions come through both (the fork stored only the calls
             * it made itself). */
            const char *last = orig->steps[orig->step_count - 1].id;
            struct weft_run_result *again = run(f, wf, input, fk->run_id, last);
            if (again->status != orig->status || again->step_count != orig->step_count) {
                fail_msg("%s forked from %s, then from %s: status %d, %zu steps; the original "
                         "%d, %zu",
                         rel, from, last, (int)again->status, again->step_count, (int)orig->status,
                         orig->step_count);
            }
            weft_run_result_free(again);
        }
        weft_run_result_free(fk);
    }
    weft_run_result_free(orig);
    weft_workflow_free(wf);
}

/* Example @p rel (under examples/), forked from each of its steps. */
static void
fork_each_step(
    const struct fx *f, const char *rel, const char *input, size_t min_added, bool is_flow)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/examples/%s", WEFT_SOURCE_DIR, rel);
    fork_file_each_step(f, path, input, min_added, is_flow);
}

/* Loop-back replans: the reviewer asks the fixer, the fixer asks the reviewer again. */
static void
test_fork_code_review_from_each_step(void **state)
{
    fork_each_step(*state, "code_review/workflow.json", "Add a login endpoint to the user service",
                   2, false);
}

/* Correction surgery: a failed step repaired by inserted corrective steps. */
static void
test_fork_correction_from_each_step(void **state)
{
    fork_each_step(*state, "correction/workflow.json", NULL, 1, false);
}

/* Correction surgery in an LLM-made plan: the builder's first answer fails, the corrector
 * inserts a step and retries it. A fork from before the failure must fail it again and be
 * corrected again (a fork that kept the corrective step and the rewiring ran the builder after
 * it, failed anew, and was corrected a second time: a plan of four steps). */
static void
test_fork_corrected_llm_plan_from_each_step(void **state)
{
    const struct fx *f = *state;
    char wf[256];

    snprintf(wf, sizeof(wf), "%s/corrected.json", f->dir);
    weft_test_write_file(
        f->dir, "corrected.json",
        "{\"name\": \"corrected\", \"models\": {\"m\": {\"provider\": \"scripted\","
        " \"script\": \"corrected_script.json\"}},"
        " \"supervisor\": {\"correction\": {\"enabled\": true, \"max_corrections\": 2}},"
        " \"agents\": [{\"name\": \"writer\"}, {\"name\": \"builder\"}]}");
    weft_test_write_file(
        f->dir, "corrected_script.json",
        "{\"responses\": {"
        "\"supervisor\": {\"plan\": [{\"content\": {\"plan\": ["
        "{\"agent\": \"writer\", \"task\": \"Write it.\", \"depends_on\": []},"
        "{\"agent\": \"builder\", \"task\": \"Build it.\", \"depends_on\": [\"s1\"]}]}}],"
        " \"correct\": [{\"content\": {\"steps\": [{\"description\": \"Write the config\","
        " \"executor\": \"file_writer\", \"path\": \"build.cfg\", \"content\": \"x\","
        " \"rationale\": \"missing\"}, {\"executor\": \"retry\", \"step\": \"s2\"}]}}]},"
        "\"writer\": {\"act\": [{\"content\": \"written\"}]},"
        "\"builder\": {\"act\": [{\"error\": {\"type\": \"invalid_request\","
        " \"message\": \"no build.cfg\"}}, {\"content\": \"built\"}]}}}");
    fork_file_each_step(f, wf, NULL, 1, false);
}

static void
test_fork_swarm_reflection_from_each_step(void **state)
{
    fork_each_step(*state, "swarm_reflection/workflow.json", NULL, 0, false);
}

static void
test_fork_translation_from_each_step(void **state)
{
    fork_each_step(*state, "translation/workflow.json", NULL, 0, true);
}

/* Flows with loops, hand-offs, reflection, routing and tools (the stuck-loop examples). */
static void
test_fork_stuck_loops_from_each_step(void **state)
{
    fork_each_step(*state, "stuck_loops/flow.json", NULL, 0, true);
    fork_each_step(*state, "stuck_loops/handoff.json", NULL, 0, false);
    fork_each_step(*state, "stuck_loops/reflection.json", NULL, 0, false);
    fork_each_step(*state, "stuck_loops/tool.json", NULL, 0, false);
    fork_each_step(*state, "stuck_loops/route.json", NULL, 0, false);
}

/* Team agents (sub-workflows). */
/* A hand-off loop the watchdog warned about before the forked step was the original's to
 * report: the fork remembers it (it is not found again on its next repetition) but does not
 * count, log or page it a second time. The fork from the loop's own third hand-off, and the
 * steps after it, find nothing new either. */
static void
test_fork_does_not_report_the_originals_loop_again(void **state)
{
    const struct fx *f = *state;
    char path[512];
    char *text = NULL;
    char *at = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    struct weft_run_result *orig = NULL;
    char needle[96];

    snprintf(path, sizeof(path), "%s/examples/stuck_loops/handoff_script.json", WEFT_SOURCE_DIR);
    text = weft_test_read_file(path);
    assert_non_null(text);
    weft_test_write_file(f->dir, "handoff_script.json", text);
    free(text);
    snprintf(path, sizeof(path), "%s/examples/stuck_loops/handoff.json", WEFT_SOURCE_DIR);
    text = weft_test_read_file(path);
    assert_non_null(text);
    at = strstr(text, "\"policy\": \"break\"");
    assert_non_null(at);
    memcpy(at, "\"policy\":  \"warn\"", strlen("\"policy\": \"break\""));
    weft_test_write_file(f->dir, "handoff.json", text);
    free(text);
    snprintf(path, sizeof(path), "%s/handoff.json", f->dir);
    if (weft_workflow_load(path, &wf, &d) != WEFT_OK) {
        fail_msg("%s does not load", path);
    }
    weft_diags_cleanup(&d);
    weft_test_capture_logs();
    orig = run(f, wf, NULL, NULL, NULL);
    snprintf(needle, sizeof(needle), "run %s: stuck loop (handoff)", orig->run_id);
    assert_non_null(strstr(weft_test_logs(), needle)); /* the original found it, once */
    if (strstr(strstr(weft_test_logs(), needle) + strlen(needle), "stuck loop") != NULL) {
        fail_msg("the original reported more than one loop:\n%s", weft_test_logs());
    }
    for (size_t s = 1; s < orig->step_count; s++) {
        struct weft_run_result *fk = run(f, wf, NULL, orig->run_id, orig->steps[s].id);
        snprintf(needle, sizeof(needle), "run %s: stuck loop", fk->run_id);
        /* from s1-s5 the fork re-runs the repetitions and finds the loop itself */
        if (s >= 6 && strstr(weft_test_logs(), needle) != NULL) {
            fail_msg("fork from %s reported the original's loop again", orig->steps[s].id);
        }
        if (s < 5 && strstr(weft_test_logs(), needle) == NULL) {
            fail_msg("fork from %s re-ran the loop and did not find it", orig->steps[s].id);
        }
        weft_run_result_free(fk);
    }
    weft_run_result_free(orig);
    weft_workflow_free(wf);
}

/* A fork with the forked step's task and first answer set (`weft fork --set step.s2.task=...
 * --set step.s2.answer=...`): the step runs with the new task and ends with the given answer
 * (its first call asked no model), the run goes on from there, and a replay of the fork is
 * identical (the answer was stored as the fork's exchange). */
static void
test_fork_with_task_and_answer(void **state)
{
    const struct fx *f = *state;
    char path[512];
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    struct weft_run_result *orig = NULL;
    struct weft_run_result *fk = NULL;
    struct weft_run_result *rp = NULL;
    struct weft_run_options ro;
    char error[512] = "";
    const char *answer = "EDITED: login.py now hashes with bcrypt.";

    snprintf(path, sizeof(path), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    assert_int_equal(weft_workflow_load(path, &wf, &d), WEFT_OK);
    weft_diags_cleanup(&d);
    orig = run(f, wf, NULL, NULL, NULL);
    memset(&ro, 0, sizeof(ro));
    ro.state_path = f->state;
    ro.workspace = f->dir;
    ro.fork_run_id = orig->run_id;
    ro.fork_from_step = "s2";
    ro.fork_task = "Implement the login endpoint in login.py, with bcrypt.";
    ro.fork_answer = answer;
    if (weft_run(wf, &ro, &fk, error, sizeof(error)) != WEFT_OK) {
        fail_msg("fork with a task and an answer: %s", error);
    }
    assert_string_equal(fk->steps[1].id, "s2");
    assert_string_equal(fk->steps[1].status, "completed");
    assert_string_equal(fk->steps[1].task, ro.fork_task);
    assert_string_equal(fk->steps[1].result, answer);
    assert_int_equal(fk->reused_steps, 1);
    assert_true(fk->step_count >= 3); /* the review after it ran live */
    /* Replayed, the fork's stored exchanges answer it: the given answer among them. */
    ro.replay_run_id = fk->run_id;
    if (weft_run(wf, &ro, &rp, error, sizeof(error)) != WEFT_OK) {
        fail_msg("replay of the fork: %s", error);
    }
    assert_non_null(rp->replay);
    assert_true(rp->replay->is_identical);
    assert_int_equal(rp->replay->llm_calls, rp->replay->llm_expected);
    assert_string_equal(rp->steps[1].result, answer);
    weft_run_result_free(rp);
    rp = NULL;
    ro.replay_run_id = NULL;
    /* Refused before the run starts: an unknown step (the run's steps named), a task or answer
     * without a fork. */
    ro.fork_from_step = "s99";
    ro.fork_answer = answer;
    assert_int_equal(weft_run(wf, &ro, &rp, error, sizeof(error)), WEFT_EINVAL);
    assert_null(rp);
    assert_non_null(strstr(error, "no step 's99' (its steps: s1, s2, s3"));
    ro.fork_run_id = NULL;
    ro.fork_from_step = NULL;
    assert_int_equal(weft_run(wf, &ro, &rp, error, sizeof(error)), WEFT_EINVAL);
    assert_null(rp);
    assert_non_null(strstr(error, "only for a fork"));
    weft_run_result_free(fk);
    weft_run_result_free(orig);
    weft_workflow_free(wf);
}

static void
test_fork_architect_team_from_each_step(void **state)
{
    fork_each_step(*state, "architect/live.json", NULL, 0, false);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fork_code_review_from_each_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_correction_from_each_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_corrected_llm_plan_from_each_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fork_swarm_reflection_from_each_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_translation_from_each_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_stuck_loops_from_each_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_architect_team_from_each_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_with_task_and_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_does_not_report_the_originals_loop_again, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
