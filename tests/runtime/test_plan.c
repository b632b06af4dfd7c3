/* tests/runtime/test_plan.c - the plan as a module: appends (generated ids, copies, limits,
 * out of memory), the router's queries (find, is_ready, next_ready, skip_blocked, truncate,
 * count_status) and the plan checks on invalid plans (duplicates, unknown and self
 * dependencies, cycles), including plans of PLAN_MAX_STEPS steps. */
#include "runtime/workflow/plan.h"
#include "support/failalloc.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE ((size_t)-1)

static void
add(struct plan *p, const char *id, size_t agent, const char *dep1, const char *dep2)
{
    const char *deps[2] = {dep1, dep2};
    size_t n = dep2 != NULL ? 2 : dep1 != NULL ? 1 : 0;

    assert_weft_ok(weft__plan_append(p, id, agent, "task", deps, n, NULL));
}

static void
test_plan_append_generates_ids_and_skips_taken_ones(void **state)
{
    struct plan p;
    size_t index = 99;

    (void)state;
    weft__plan_init(&p);
    assert_weft_ok(weft__plan_append(&p, NULL, 0, "first", NULL, 0, &index));
    assert_int_equal(index, 0);
    assert_string_equal(p.steps[0].id, "s1");
    /* A workflow's plan named a step "s3": the generator does not hand that id out again. */
    assert_weft_ok(weft__plan_append(&p, "s3", 0, "explicit", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&p, NULL, 0, "second", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&p, NULL, 0, "third", NULL, 0, &index));
    assert_string_equal(p.steps[2].id, "s2");
    assert_string_equal(p.steps[3].id, "s4");
    assert_int_equal(index, 3);
    assert_int_equal(p.count, 4);
    assert_int_equal(p.version, 4);
    /* Every new step starts pending, outside any flow, with no task given as "". */
    assert_weft_ok(weft__plan_append(&p, "x", 2, NULL, NULL, 0, NULL));
    assert_string_equal(p.steps[4].task, "");
    assert_int_equal(p.steps[4].agent, 2);
    assert_int_equal(p.steps[4].status, STEP_PENDING);
    assert_int_equal(p.steps[4].flow_node, -1);
    assert_int_equal(p.steps[4].item, -1);
    weft__plan_cleanup(&p);
    assert_int_equal(p.count, 0);
    assert_null(p.steps);
    weft__plan_cleanup(NULL); /* a no-op */
}

static void
test_plan_append_copies_every_string(void **state)
{
    struct plan p;
    char id[8] = "a";
    char task[16] = "write code";
    char dep[8] = "b";
    const char *deps[1] = {dep};

    (void)state;
    weft__plan_init(&p);
    assert_weft_ok(weft__plan_append(&p, "b", 0, "t", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&p, id, 1, task, deps, 1, NULL));
    strcpy(id, "zz");
    strcpy(task, "changed");
    strcpy(dep, "zz");
    assert_string_equal(p.steps[1].id, "a");
    assert_string_equal(p.steps[1].task, "write code");
    assert_int_equal(p.steps[1].depends_count, 1);
    assert_string_equal(p.steps[1].depends_on[0], "b");
    weft__plan_cleanup(&p);
}

static void
test_plan_append_out_of_memory_leaves_plan_unchanged(void **state)
{
    struct plan p;
    const char *deps[3] = {"s1", "s2", "s3"};
    bool is_done = false;

    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done; budget++) {
        weft_err err = WEFT_OK;
        weft__plan_init(&p);
        for (int i = 0; i < 8; i++) { /* fill to capacity: the next append must grow */
            assert_weft_ok(weft__plan_append(&p, NULL, 0, "t", NULL, 0, NULL));
        }
        failalloc_budget = budget;
        err = weft__plan_append(&p, NULL, 0, "task", deps, 3, NULL);
        failalloc_budget = -1;
        if (err == WEFT_OK) {
            assert_int_equal(p.count, 9);
            assert_string_equal(p.steps[8].id, "s9");
            assert_string_equal(p.steps[8].depends_on[2], "s3");
            is_done = true;
        } else {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_int_equal(p.count, 8);
            assert_int_equal(p.version, 8);
            /* The generated number was not consumed by the failed append. */
            assert_weft_ok(weft__plan_append(&p, NULL, 0, "t", NULL, 0, NULL));
            assert_string_equal(p.steps[8].id, "s9");
        }
        weft__plan_cleanup(&p);
        assert_true(budget < 100);
    }
    weft_set_allocator(NULL, NULL, NULL);
}

static void
test_plan_append_stops_at_the_step_limit(void **state)
{
    struct plan p;
    char id[16];

    (void)state;
    weft__plan_init(&p);
    for (size_t i = 0; i < PLAN_MAX_STEPS; i++) {
        snprintf(id, sizeof(id), "x%zu", i);
        assert_weft_ok(weft__plan_append(&p, id, 0, NULL, NULL, 0, NULL));
    }
    assert_weft_err(weft__plan_append(&p, "one-more", 0, "t", NULL, 0, NULL), WEFT_ELIMIT);
    assert_int_equal(p.count, PLAN_MAX_STEPS);
    assert_int_equal(weft__plan_find(&p, "one-more"), NONE);
    weft__plan_cleanup(&p);
}

static void
test_plan_find_and_in_progress(void **state)
{
    struct plan p;

    (void)state;
    weft__plan_init(&p);
    assert_int_equal(weft__plan_find(&p, "a"), NONE);
    assert_int_equal(weft__plan_in_progress(&p), NONE);
    add(&p, "a", 0, NULL, NULL);
    add(&p, "b", 0, NULL, NULL);
    add(&p, "c", 0, NULL, NULL);
    assert_int_equal(weft__plan_find(&p, "c"), 2);
    assert_int_equal(weft__plan_find(&p, "C"), NONE);
    assert_int_equal(weft__plan_in_progress(&p), NONE);
    weft__plan_set_status(&p, 2, STEP_IN_PROGRESS);
    weft__plan_set_status(&p, 1, STEP_IN_PROGRESS);
    assert_int_equal(weft__plan_in_progress(&p), 1); /* the first in plan order */
    weft__plan_cleanup(&p);
}

static void
test_plan_is_ready_needs_every_dependency_completed(void **state)
{
    struct plan p;

    (void)state;
    weft__plan_init(&p);
    add(&p, "a", 0, NULL, NULL);
    add(&p, "b", 0, NULL, NULL);
    add(&p, "c", 0, "a", "b");
    add(&p, "d", 0, "gone", NULL);
    assert_true(weft__plan_is_ready(&p, 0)); /* no dependencies */
    assert_false(weft__plan_is_ready(&p, 2));
    weft__plan_set_status(&p, 0, STEP_COMPLETED);
    assert_false(weft__plan_is_ready(&p, 2));
    weft__plan_set_status(&p, 1, STEP_SKIPPED); /* skipped is not completed */
    assert_false(weft__plan_is_ready(&p, 2));
    weft__plan_set_status(&p, 1, STEP_COMPLETED);
    assert_true(weft__plan_is_ready(&p, 2));
    assert_false(weft__plan_is_ready(&p, 3)); /* an unknown dependency never completes */
    weft__plan_cleanup(&p);
}

static void
test_plan_next_ready_follows_order_status_and_agent(void **state)
{
    struct plan p;

    (void)state;
    weft__plan_init(&p);
    add(&p, "a", 0, NULL, NULL);
    add(&p, "b", 1, "a", NULL);
    add(&p, "c", 1, NULL, NULL);
    add(&p, "d", 2, NULL, NULL);
    assert_int_equal(weft__plan_next_ready(&p, NONE), 0);
    assert_int_equal(weft__plan_next_ready(&p, 1), 2); /* b waits for a */
    weft__plan_set_status(&p, 0, STEP_IN_PROGRESS);    /* in progress is not "ready" */
    assert_int_equal(weft__plan_next_ready(&p, NONE), 2);
    weft__plan_set_status(&p, 0, STEP_COMPLETED);
    assert_int_equal(weft__plan_next_ready(&p, 1), 1);
    /* A paused step (waiting for its corrections) is ready again once they are done. */
    weft__plan_set_status(&p, 1, STEP_PAUSED);
    assert_int_equal(weft__plan_next_ready(&p, 1), 1);
    weft__plan_set_status(&p, 1, STEP_FAILED);
    weft__plan_set_status(&p, 2, STEP_COMPLETED);
    assert_int_equal(weft__plan_next_ready(&p, 1), NONE);
    /* An executor step is never an agent's step, even with the same index. */
    p.steps[3].executor = EXEC_COMMAND;
    assert_int_equal(weft__plan_next_ready(&p, 2), NONE);
    assert_int_equal(weft__plan_next_ready(&p, NONE), 3);
    weft__plan_set_status(&p, 3, STEP_COMPLETED);
    assert_int_equal(weft__plan_next_ready(&p, NONE), NONE);
    weft__plan_cleanup(&p);
}

static void
test_plan_skip_blocked_skips_the_whole_chain(void **state)
{
    struct plan p;

    (void)state;
    weft__plan_init(&p);
    /* d -> c -> b -> a, listed backwards so that one pass is not enough. */
    add(&p, "d", 0, "c", NULL);
    add(&p, "c", 0, "b", NULL);
    add(&p, "b", 0, "a", NULL);
    add(&p, "a", 0, NULL, NULL);
    add(&p, "e", 0, NULL, NULL);
    add(&p, "f", 0, "e", "b");
    assert_int_equal(weft__plan_skip_blocked(&p), 0); /* nothing failed */
    assert_int_equal(weft__plan_count_status(&p, STEP_PENDING), 6);
    weft__plan_set_status(&p, 3, STEP_FAILED);
    weft__plan_set_status(&p, 4, STEP_COMPLETED);
    assert_int_equal(weft__plan_skip_blocked(&p), 4);
    assert_int_equal(p.steps[0].status, STEP_SKIPPED);
    assert_int_equal(p.steps[1].status, STEP_SKIPPED);
    assert_int_equal(p.steps[2].status, STEP_SKIPPED);
    assert_int_equal(p.steps[5].status, STEP_SKIPPED);
    assert_int_equal(p.steps[4].status, STEP_COMPLETED);
    assert_int_equal(weft__plan_count_status(&p, STEP_SKIPPED), 4);
    assert_int_equal(weft__plan_count_status(&p, STEP_FAILED), 1);
    assert_int_equal(weft__plan_skip_blocked(&p), 0); /* idempotent */
    assert_int_equal(weft__plan_next_ready(&p, NONE), NONE);
    weft__plan_cleanup(&p);
}

static void
test_plan_skip_blocked_leaves_started_and_paused_steps(void **state)
{
    struct plan p;

    (void)state;
    weft__plan_init(&p);
    add(&p, "a", 0, NULL, NULL);
    add(&p, "b", 0, "a", NULL);
    add(&p, "c", 0, "a", NULL);
    weft__plan_set_status(&p, 0, STEP_FAILED);
    weft__plan_set_status(&p, 1, STEP_IN_PROGRESS);
    weft__plan_set_status(&p, 2, STEP_PAUSED);
    assert_int_equal(weft__plan_skip_blocked(&p), 0);
    assert_int_equal(p.steps[1].status, STEP_IN_PROGRESS);
    assert_int_equal(p.steps[2].status, STEP_PAUSED);
    weft__plan_cleanup(&p);
}

static void
test_plan_truncate_drops_the_tail(void **state)
{
    struct plan p;
    unsigned version = 0;

    (void)state;
    weft__plan_init(&p);
    add(&p, NULL, 0, NULL, NULL);
    add(&p, NULL, 0, "s1", NULL);
    add(&p, NULL, 0, "s1", "s2");
    version = p.version;
    weft__plan_truncate(&p, 1);
    assert_int_equal(p.count, 1);
    assert_true(p.version > version);
    assert_int_equal(weft__plan_find(&p, "s2"), NONE);
    weft__plan_truncate(&p, 5); /* beyond the end: nothing to drop */
    assert_int_equal(p.count, 1);
    /* The slots are reusable: the next generated id continues after the dropped ones. */
    add(&p, NULL, 0, NULL, NULL);
    assert_int_equal(p.count, 2);
    assert_string_equal(p.steps[1].id, "s4");
    assert_int_equal(weft__plan_find(&p, "s1"), 0);
    weft__plan_truncate(&p, 0);
    assert_int_equal(p.count, 0);
    weft__plan_cleanup(&p);
}

/* Thousands of steps: every id is found through the index as it grows (and the first of a
 * duplicated id wins, as a scan in plan order would pick it). */
static void
test_plan_find_uses_the_index_as_the_plan_grows(void **state)
{
    struct plan p;
    char id[32];

    (void)state;
    weft__plan_init(&p);
    for (size_t i = 0; i < 3000; i++) {
        add(&p, NULL, 0, NULL, NULL);
    }
    assert_true(p.ids_cap > 2 * p.count);
    for (size_t i = 0; i < 3000; i += 7) {
        snprintf(id, sizeof(id), "s%zu", i + 1);
        assert_int_equal(weft__plan_find(&p, id), i);
    }
    assert_int_equal(weft__plan_find(&p, "s3001"), NONE);
    add(&p, "s5", 0, NULL, NULL); /* a second "s5": find keeps naming the first */
    assert_int_equal(weft__plan_find(&p, "s5"), 4);
    weft__plan_truncate(&p, 10);
    assert_int_equal(weft__plan_find(&p, "s10"), 9);
    assert_int_equal(weft__plan_find(&p, "s11"), NONE);
    weft__plan_cleanup(&p);
}

/* The counts and the first open step follow every status change, reopened steps included: a
 * completed step set back to pending (a flow's loop, a correction's undo) is found again. */
static void
test_plan_counts_and_first_open_step_follow_status_changes(void **state)
{
    struct plan p;

    (void)state;
    weft__plan_init(&p);
    add(&p, "a", 0, NULL, NULL);
    add(&p, "b", 0, "a", NULL);
    add(&p, "c", 0, "b", NULL);
    assert_int_equal(weft__plan_count_status(&p, STEP_PENDING), 3);
    assert_int_equal(p.open_from, 0);
    weft__plan_set_status(&p, 0, STEP_IN_PROGRESS);
    assert_int_equal(weft__plan_in_progress(&p), 0);
    weft__plan_set_status(&p, 0, STEP_COMPLETED);
    weft__plan_set_status(&p, 1, STEP_COMPLETED);
    assert_int_equal(p.open_from, 2);
    assert_int_equal(weft__plan_count_status(&p, STEP_COMPLETED), 2);
    assert_int_equal(weft__plan_count_status(&p, STEP_PENDING), 1);
    assert_int_equal(weft__plan_next_ready(&p, NONE), 2);
    weft__plan_set_status(&p, 0, STEP_PENDING); /* reopened */
    assert_int_equal(p.open_from, 0);
    assert_int_equal(weft__plan_next_ready(&p, NONE), 0);
    assert_int_equal(weft__plan_count_status(&p, STEP_COMPLETED), 1);
    weft__plan_set_status(&p, 0, STEP_COMPLETED);
    weft__plan_set_status(&p, 2, STEP_COMPLETED);
    assert_int_equal(p.open_from, 3);
    assert_int_equal(weft__plan_next_ready(&p, NONE), NONE);
    assert_int_equal(weft__plan_in_progress(&p), NONE);
    add(&p, "d", 0, "c", NULL); /* a step added after every other ended */
    assert_int_equal(weft__plan_next_ready(&p, NONE), 3);
    assert_int_equal(weft__plan_count_status(&p, STEP_PENDING), 1);
    weft__plan_truncate(&p, 3);
    assert_int_equal(weft__plan_count_status(&p, STEP_PENDING), 0);
    assert_int_equal(weft__plan_count_status(&p, STEP_COMPLETED), 3);
    assert_int_equal(weft__plan_count_status(&p, (step_status)42), 0);
    weft__plan_cleanup(&p);
}

static void
test_plan_status_and_executor_names_round_trip(void **state)
{
    step_status st = STEP_PENDING;
    step_executor ex = EXEC_AGENT;

    (void)state;
    for (int i = STEP_PENDING; i <= STEP_SKIPPED; i++) {
        assert_true(weft__step_status_parse(weft__step_status_name((step_status)i), &st));
        assert_int_equal(st, i);
    }
    for (int i = EXEC_AGENT; i <= EXEC_HTTP_CALL; i++) {
        assert_true(weft__step_executor_parse(weft__step_executor_name((step_executor)i), &ex));
        assert_int_equal(ex, i);
    }
    assert_string_equal(weft__step_status_name((step_status)42), "unknown");
    assert_string_equal(weft__step_executor_name((step_executor)42), "unknown");
    st = STEP_FAILED;
    assert_false(weft__step_status_parse("PENDING", &st));
    assert_false(weft__step_status_parse("", &st));
    assert_int_equal(st, STEP_FAILED);
    assert_false(weft__step_executor_parse("shell", &ex));
}

/* ------------------------------------------------------------------------------------------ */
/* Checks                                                                                      */

struct spec {
    const char *id;
    const char *deps[3];
};

static weft_err
check(const struct spec *specs, size_t n, struct plan_check *c)
{
    weft__plan_check_init(c);
    for (size_t i = 0; i < n; i++) {
        size_t nd = 0;
        while (nd < 3 && specs[i].deps[nd] != NULL) {
            nd++;
        }
        weft__plan_check_add(c, specs[i].id, specs[i].deps, nd);
    }
    return weft__plan_check_run(c);
}

static void
test_plan_check_accepts_a_dag(void **state)
{
    const struct spec specs[] = {{"fetch", {NULL}},
                                 {"parse", {"fetch", NULL}},
                                 {"lint", {"fetch", NULL}},
                                 {"report", {"parse", "lint", "fetch"}}};
    struct plan_check c;

    (void)state;
    assert_weft_ok(check(specs, 4, &c));
    weft__plan_check_cleanup(&c);
    /* An empty plan is valid too. */
    assert_weft_ok(check(specs, 0, &c));
    weft__plan_check_cleanup(&c);
}

static void
test_plan_check_reports_the_first_duplicate(void **state)
{
    const struct spec specs[] = {
        {"a", {NULL}}, {"b", {NULL}}, {"c", {NULL}}, {"b", {NULL}}, {"a", {NULL}}};
    struct plan_check c;

    (void)state;
    assert_int_equal(check(specs, 5, &c), WEFT_EPARSE);
    assert_int_equal(c.bad_index, 3);
    assert_string_equal(c.message, "duplicate step id 'b'");
    weft__plan_check_cleanup(&c);
}

static void
test_plan_check_reports_unknown_and_self_dependencies(void **state)
{
    const struct spec unknown[] = {{"a", {NULL}}, {"b", {"a", "nope", NULL}}};
    const struct spec self[] = {{"a", {NULL}}, {"b", {"a", "b", NULL}}};
    const struct spec earlier[] = {{"a", {"x", NULL}}, {"a", {NULL}}};
    struct plan_check c;

    (void)state;
    assert_int_equal(check(unknown, 2, &c), WEFT_EPARSE);
    assert_int_equal(c.bad_index, 1);
    assert_string_equal(c.message, "depends_on: unknown step 'nope'");
    weft__plan_check_cleanup(&c);
    assert_int_equal(check(self, 2, &c), WEFT_EPARSE);
    assert_int_equal(c.bad_index, 1);
    assert_string_equal(c.message, "step 'b' depends on itself");
    weft__plan_check_cleanup(&c);
    /* Faults are reported in plan order: step 0's unknown dependency before step 1's id. */
    assert_int_equal(check(earlier, 2, &c), WEFT_EPARSE);
    assert_int_equal(c.bad_index, 0);
    assert_string_equal(c.message, "depends_on: unknown step 'x'");
    weft__plan_check_cleanup(&c);
}

static void
test_plan_check_names_the_cycle(void **state)
{
    const struct spec specs[] = {
        {"start", {NULL}}, {"a", {"b", NULL}}, {"b", {"c", NULL}}, {"c", {"a", "start", NULL}}};
    struct plan_check c;

    (void)state;
    assert_int_equal(check(specs, 4, &c), WEFT_EPARSE);
    assert_string_equal(c.message, "dependency cycle: a -> b -> c -> a");
    assert_int_equal(c.bad_index, 1);
    weft__plan_check_cleanup(&c);
}

static void
test_plan_check_skips_steps_without_id(void **state)
{
    const struct spec specs[] = {{NULL, {"ghost", NULL}}, {"a", {NULL}}, {NULL, {NULL}}};
    struct plan_check c;

    (void)state;
    /* Missing ids are the caller's diagnostic; they are neither duplicates nor targets. */
    assert_weft_ok(check(specs, 3, &c));
    weft__plan_check_cleanup(&c);
}

/* A chain as long as the largest plan: checked without recursing once per step (the check
 * used to overflow the stack there) and without a scan per dependency. */
static void
test_plan_check_handles_the_longest_plans(void **state)
{
    size_t n = PLAN_MAX_STEPS;
    char(*ids)[16] = calloc(n, sizeof(*ids));
    const char **deps = calloc(n, sizeof(*deps));
    struct plan_check c;

    (void)state;
    assert_non_null(ids);
    assert_non_null(deps);
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "s%zu", i);
    }
    /* s0 <- s1 <- ... <- s(n-1), added newest first so the search walks the whole chain. */
    weft__plan_check_init(&c);
    for (size_t i = n; i-- > 0;) {
        deps[i] = i > 0 ? ids[i - 1] : NULL;
        weft__plan_check_add(&c, ids[i], &deps[i], i > 0 ? 1 : 0);
    }
    assert_weft_ok(weft__plan_check_run(&c));
    weft__plan_check_cleanup(&c);
    /* Close the chain: s0 depends on the last step. */
    deps[0] = ids[n - 1];
    weft__plan_check_init(&c);
    for (size_t i = n; i-- > 0;) {
        weft__plan_check_add(&c, ids[i], &deps[i], 1);
    }
    assert_int_equal(weft__plan_check_run(&c), WEFT_EPARSE);
    assert_non_null(strstr(c.message, "dependency cycle: "));
    assert_true(strlen(c.message) < sizeof(c.message));
    weft__plan_check_cleanup(&c);
    free(deps);
    free(ids);
}

static void
test_plan_check_out_of_memory_is_reported(void **state)
{
    const char *deps[1] = {"a"};
    bool is_done = false;

    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done; budget++) {
        struct plan_check c;
        weft_err err = WEFT_OK;
        failalloc_budget = budget;
        weft__plan_check_init(&c);
        weft__plan_check_add(&c, "a", NULL, 0);
        for (int i = 0; i < 20; i++) {
            /* Borrowed until cleanup: string literals outlive it. */
            weft__plan_check_add(&c, i == 0 ? "b0" : i == 1 ? "b1" : "bx", deps, 1);
        }
        err = weft__plan_check_run(&c);
        failalloc_budget = -1;
        if (err == WEFT_ENOMEM) {
            weft__plan_check_cleanup(&c);
            continue;
        }
        /* With enough memory the check runs and finds the duplicate "bx". */
        assert_int_equal(err, WEFT_EPARSE);
        assert_string_equal(c.message, "duplicate step id 'bx'");
        weft__plan_check_cleanup(&c);
        is_done = true;
        assert_true(budget < 100);
    }
    weft_set_allocator(NULL, NULL, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_append_generates_ids_and_skips_taken_ones),
        cmocka_unit_test(test_plan_append_copies_every_string),
        cmocka_unit_test(test_plan_append_out_of_memory_leaves_plan_unchanged),
        cmocka_unit_test(test_plan_append_stops_at_the_step_limit),
        cmocka_unit_test(test_plan_find_and_in_progress),
        cmocka_unit_test(test_plan_is_ready_needs_every_dependency_completed),
        cmocka_unit_test(test_plan_next_ready_follows_order_status_and_agent),
        cmocka_unit_test(test_plan_skip_blocked_skips_the_whole_chain),
        cmocka_unit_test(test_plan_skip_blocked_leaves_started_and_paused_steps),
        cmocka_unit_test(test_plan_truncate_drops_the_tail),
        cmocka_unit_test(test_plan_find_uses_the_index_as_the_plan_grows),
        cmocka_unit_test(test_plan_counts_and_first_open_step_follow_status_changes),
        cmocka_unit_test(test_plan_status_and_executor_names_round_trip),
        cmocka_unit_test(test_plan_check_accepts_a_dag),
        cmocka_unit_test(test_plan_check_reports_the_first_duplicate),
        cmocka_unit_test(test_plan_check_reports_unknown_and_self_dependencies),
        cmocka_unit_test(test_plan_check_names_the_cycle),
        cmocka_unit_test(test_plan_check_skips_steps_without_id),
        cmocka_unit_test(test_plan_check_handles_the_longest_plans),
        cmocka_unit_test(test_plan_check_out_of_memory_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
