/* tests/runtime/test_runs.c - stored runs read back (weft_run_load): a real run into a real
 * SQLite state database whose command step fails, then its failure text, timing and the steps
 * its failure kept from running, as the public API returns them; and an out-of-memory loop over
 * the loader. */
#include "support/failalloc.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

struct fx {
    char dir[64];
    char state[128];
    char *run_id;
};

/* Plan: build (command, fails with stderr) -> test (agent) -> ship (agent); docs (agent) is
 * independent and completes. */
static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char path[256];
    char error[256] = "";

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-runs-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"a\": {\"act\": [{\"content\": \"docs\"}]}}}");
    weft_test_write_file(
        f->dir, "wf.json",
        "{\"name\": \"w\", \"models\": {\"m\": {\"provider\": \"scripted\","
        " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
        "{\"id\": \"docs\", \"agent\": \"a\", \"task\": \"Write docs\"},"
        "{\"id\": \"build\", \"executor\": \"command\", \"task\": \"Build\","
        " \"depends_on\": [\"docs\"],"
        " \"argv\": [\"sh\", \"-c\", \"echo 'no compiler' >&2; exit 2\"]},"
        "{\"id\": \"test\", \"agent\": \"a\", \"task\": \"Test\", \"depends_on\": [\"build\"]},"
        "{\"id\": \"ship\", \"agent\": \"a\", \"task\": \"Ship\","
        " \"depends_on\": [\"docs\", \"test\"]}]}");
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    assert_weft_ok(weft_workflow_load(path, &wf, &d));
    weft_diags_cleanup(&d);
    memset(&ro, 0, sizeof(ro));
    ro.state_path = f->state;
    ro.workspace = f->dir;
    assert_weft_ok(weft_run(wf, &ro, &r, error, sizeof(error)));
    assert_int_equal(r->status, WEFT_RUN_FAILED);
    f->run_id = strdup(r->run_id);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_test_rmtree(f->dir);
    free(f->run_id);
    free(f);
    return 0;
}

static size_t
index_of(const struct weft_run_details *d, const char *id)
{
    for (size_t i = 0; i < d->step_count; i++) {
        if (strcmp(d->steps[i].id, id) == 0) {
            return i;
        }
    }
    fail_msg("no step %s", id);
    return 0;
}

static void
check_details(const struct weft_run_details *d)
{
    const struct weft_run_step_extra *build = &d->step_extras[index_of(d, "build")];
    const struct weft_run_step_extra *test = &d->step_extras[index_of(d, "test")];
    const struct weft_run_step_extra *ship = &d->step_extras[index_of(d, "ship")];
    const struct weft_run_step_extra *docs = &d->step_extras[index_of(d, "docs")];

    assert_int_equal(d->step_count, 4);
    assert_non_null(d->step_extras);
    /* The failure as stored: type, sentence and the command's stderr tail. */
    assert_string_equal(build->error_type, "exit_status");
    assert_non_null(build->feedback);
    assert_non_null(strstr(build->error, "\"stderr_tail\":\"no compiler\\n\""));
    assert_non_null(strstr(build->error, "\"exit_code\":2"));
    assert_true(build->started_ns > 0 && build->ended_ns >= build->started_ns);
    assert_null(build->skipped_dependency);
    /* test waits on the failed build; ship on the skipped test (its other dependency, docs,
     * completed). */
    assert_string_equal(test->skipped_dependency, "build");
    assert_string_equal(test->skipped_dependency_status, "failed");
    assert_int_equal(test->started_ns, 0);
    assert_string_equal(ship->skipped_dependency, "test");
    assert_string_equal(ship->skipped_dependency_status, "skipped");
    assert_null(docs->skipped_dependency);
    assert_null(docs->error_type);
    assert_string_equal(d->steps[index_of(d, "docs")].result, "docs");
}

static void
test_runs_load_returns_failure_text_and_skipped_dependencies(void **state)
{
    struct fx *f = *state;
    struct weft_run_details *d = NULL;

    assert_weft_ok(weft_run_load(f->state, "last", &d));
    assert_string_equal(d->info.run_id, f->run_id);
    assert_string_equal(d->info.status, "failed");
    check_details(d);
    weft_run_details_free(d);
}

static void
test_runs_load_fails_cleanly_out_of_memory(void **state)
{
    struct fx *f = *state;
    bool is_done = false;

    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 100000 && !is_done; budget++) {
        struct weft_run_details *d = NULL;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft_run_load(f->state, f->run_id, &d);
        failalloc_budget = -1;
        if (err == WEFT_OK) {
            check_details(d);
            is_done = true;
        } else {
            /* Nothing is returned and nothing leaks; never "no such run" for want of memory. */
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(d);
        }
        weft_run_details_free(d);
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_runs_load_returns_failure_text_and_skipped_dependencies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runs_load_fails_cleanly_out_of_memory, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
