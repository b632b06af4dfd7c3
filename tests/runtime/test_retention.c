/* tests/runtime/test_retention.c - retention through the public API (runtime/state/retention.c,
 * include/weft/runtime.h) over a SQLite state in a temporary WEFT_HOME: weft_runs_gc() deletes
 * the runs that ended before the cutoff and their workspace folders under
 * $WEFT_HOME/workspaces, keeps running and pinned runs, reports the same numbers in a dry run
 * that changes nothing, and never follows a symbolic link out of the workspaces root;
 * weft_run_pin() resolves ids as weft_run_load() does. The per-table deletion itself is
 * state_cases.h's (both backends). */
#include "runtime/state/state.h"
#include "support/weft_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CUTOFF 500000000000ull /* runs seeded to end before it are old */

struct fx {
    char dir[64];
    char state[128];
    char outside[128]; /* a directory outside the workspaces root */
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char path[192];

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-retention-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    weft_test_setenv("WEFT_HOME", f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    snprintf(path, sizeof(path), "%s/workspaces", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
    assert_int_equal(mkdir(f->outside, 0755), 0);
    weft_test_write_file(f->outside, "keep.txt", "precious");
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

/* Seed run @p id (a run, a step, a message: 3 rows) ended at @p ended_ns (0: running). */
static void
seed(struct fx *f, const char *id, uint64_t ended_ns)
{
    struct rt_state *st = NULL;
    struct plan_step step;
    struct weft__state_run_end end;
    char err[256];
    char session[64];

    snprintf(session, sizeof(session), "sess-%s", id);
    assert_weft_ok(weft__state_open(f->state, &st, err, sizeof(err)));
    memset(&step, 0, sizeof(step));
    step.id = "s1";
    step.task = "do it";
    step.status = STEP_COMPLETED;
    assert_weft_ok(weft__state_run_begin(st, id, "wf", NULL, session, "in", 1000));
    assert_weft_ok(weft__state_step_save(st, id, 0, &step, "a"));
    assert_weft_ok(weft__state_message_add(st, session, id, "user", "hello", NULL));
    if (ended_ns != 0) {
        memset(&end, 0, sizeof(end));
        end.status = "completed";
        end.ended_ns = ended_ns;
        end.loops = "{}";
        assert_weft_ok(weft__state_run_end(st, id, &end));
    }
    weft__state_close(st);
}

/* A workspace folder for run @p id: a.txt (10 bytes) and sub/b.txt (20 bytes). */
static void
make_workspace(struct fx *f, const char *id)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/workspaces/%s", f->dir, id);
    assert_int_equal(mkdir(path, 0755), 0);
    weft_test_write_file(path, "a.txt", "0123456789");
    snprintf(path, sizeof(path), "%s/workspaces/%s/sub", f->dir, id);
    assert_int_equal(mkdir(path, 0755), 0);
    weft_test_write_file(path, "b.txt", "01234567890123456789");
}

static bool
exists(const char *dir, const char *name)
{
    char path[256];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lstat(path, &sb) == 0;
}

static bool
has_workspace(struct fx *f, const char *id)
{
    char root[192];

    snprintf(root, sizeof(root), "%s/workspaces", f->dir);
    return exists(root, id);
}

static bool
has_run(struct fx *f, const char *id)
{
    struct weft_run_details *d = NULL;
    weft_err err = weft_run_load(f->state, id, &d);

    weft_run_details_free(d);
    assert_true(err == WEFT_OK || err == WEFT_ENOTFOUND);
    return err == WEFT_OK;
}

static void
test_retention_gc_deletes_old_runs_and_their_workspaces(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report r;

    seed(f, "a0000000000a", 2000);
    seed(f, "b0000000000b", CUTOFF + 1);
    make_workspace(f, "a0000000000a");
    make_workspace(f, "b0000000000b");
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 1);
    assert_int_equal(r.rows_deleted, 3);
    assert_int_equal(r.workspaces_removed, 1);
    assert_int_equal(r.workspace_bytes, 30);
    assert_int_equal(r.workspace_errors, 0);
    assert_int_equal(r.runs_kept_pinned, 0);
    assert_int_equal(r.runs_kept_running, 0);
    assert_false(has_run(f, "a0000000000a"));
    assert_false(has_workspace(f, "a0000000000a"));
    assert_true(has_run(f, "b0000000000b"));
    assert_true(has_workspace(f, "b0000000000b"));
    /* Nothing left to do: a second pass reports zeros. */
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 0);
    assert_int_equal(r.rows_deleted, 0);
}

static void
test_retention_gc_dry_run_reports_the_same_and_changes_nothing(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report dry;
    struct weft_runs_gc_report real;

    seed(f, "a0000000000a", 2000);
    seed(f, "c0000000000c", 3000);
    seed(f, "d0000000000d", 0);
    make_workspace(f, "a0000000000a");
    assert_weft_ok(weft_run_pin(f->state, "c0", true, NULL, 0));
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, true, &dry));
    assert_int_equal(dry.runs_deleted, 1);
    assert_int_equal(dry.rows_deleted, 3);
    assert_int_equal(dry.workspaces_removed, 1);
    assert_int_equal(dry.workspace_bytes, 30);
    assert_int_equal(dry.runs_kept_pinned, 1);
    assert_int_equal(dry.runs_kept_running, 1);
    assert_true(has_run(f, "a0000000000a"));
    assert_true(has_workspace(f, "a0000000000a"));
    assert_true(exists(f->dir, "workspaces/a0000000000a/sub/b.txt"));
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &real));
    assert_int_equal(real.runs_deleted, dry.runs_deleted);
    assert_int_equal(real.rows_deleted, dry.rows_deleted);
    assert_int_equal(real.workspaces_removed, dry.workspaces_removed);
    assert_int_equal(real.workspace_bytes, dry.workspace_bytes);
    assert_int_equal(real.runs_kept_pinned, dry.runs_kept_pinned);
    assert_int_equal(real.runs_kept_running, dry.runs_kept_running);
    assert_false(has_run(f, "a0000000000a"));
    assert_false(has_workspace(f, "a0000000000a"));
}

/* A link where the workspace should be is removed as a link; a link inside a workspace too;
 * neither target is entered, counted or touched. */
static void
test_retention_gc_does_not_follow_symlinks(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report r;
    char link[256];

    seed(f, "a0000000000a", 2000);
    seed(f, "e0000000000e", 2000);
    snprintf(link, sizeof(link), "%s/workspaces/a0000000000a", f->dir);
    assert_int_equal(symlink(f->outside, link), 0);
    make_workspace(f, "e0000000000e");
    snprintf(link, sizeof(link), "%s/workspaces/e0000000000e/sub/out", f->dir);
    assert_int_equal(symlink(f->outside, link), 0);
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 2);
    assert_int_equal(r.workspaces_removed, 2);
    assert_int_equal(r.workspace_bytes, 30); /* e's files only, not keep.txt (8 bytes) */
    assert_false(has_workspace(f, "a0000000000a"));
    assert_false(has_workspace(f, "e0000000000e"));
    assert_true(exists(f->outside, "keep.txt"));
    assert_true(exists(f->dir, "outside"));
}

static void
test_retention_gc_keeps_pinned_runs_until_unpinned(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report r;
    struct weft_run_details *d = NULL;
    char id[96];

    seed(f, "a0000000000a", 2000);
    make_workspace(f, "a0000000000a");
    assert_weft_ok(weft_run_pin(f->state, "a000", true, id, sizeof(id)));
    assert_string_equal(id, "a0000000000a");
    assert_weft_ok(weft_run_load(f->state, "a0000000000a", &d));
    assert_true(d->info.is_pinned);
    weft_run_details_free(d);
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 0);
    assert_int_equal(r.runs_kept_pinned, 1);
    assert_true(has_run(f, "a0000000000a"));
    assert_true(has_workspace(f, "a0000000000a"));
    assert_weft_ok(weft_run_pin(f->state, "last", false, id, sizeof(id)));
    assert_string_equal(id, "a0000000000a");
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 1);
    assert_int_equal(r.runs_kept_pinned, 0);
    assert_false(has_run(f, "a0000000000a"));
    assert_false(has_workspace(f, "a0000000000a"));
}

static void
test_retention_gc_keeps_a_running_run(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report r;

    seed(f, "d0000000000d", 0); /* started at 1000 ns, never ended */
    make_workspace(f, "d0000000000d");
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 0);
    assert_int_equal(r.runs_kept_running, 1);
    assert_true(has_run(f, "d0000000000d"));
    assert_true(has_workspace(f, "d0000000000d"));
}

static void
test_retention_pin_resolves_ids_like_run_load(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report r;
    char id[96] = "x";
    char missing[192];

    assert_int_equal(weft_run_pin(f->state, "a0", true, id, sizeof(id)), WEFT_ENOTFOUND);
    assert_string_equal(id, ""); /* cleared on failure */
    seed(f, "a0000000000a", 2000);
    seed(f, "a1111111111a", 3000);
    assert_int_equal(weft_run_pin(f->state, "zz", true, id, sizeof(id)), WEFT_ENOTFOUND);
    assert_int_equal(weft_run_pin(f->state, "a", true, id, sizeof(id)), WEFT_EINVAL);
    assert_int_equal(weft_run_pin(f->state, NULL, true, id, sizeof(id)), WEFT_EINVAL);
    assert_weft_ok(weft_run_pin(f->state, "a1", true, id, sizeof(id)));
    assert_string_equal(id, "a1111111111a");
    /* The ambiguous prefix pinned nothing. */
    assert_weft_ok(weft_runs_gc(f->state, CUTOFF, true, &r));
    assert_int_equal(r.runs_kept_pinned, 1);
    assert_int_equal(r.runs_deleted, 1);
    /* No database: nothing to pin or collect, and none is created. */
    snprintf(missing, sizeof(missing), "%s/none.db", f->dir);
    assert_int_equal(weft_run_pin(missing, "a0", true, NULL, 0), WEFT_ENOTFOUND);
    assert_int_equal(weft_runs_gc(missing, CUTOFF, false, &r), WEFT_ENOTFOUND);
    assert_false(exists(f->dir, "none.db"));
    assert_int_equal(weft_runs_gc(f->state, CUTOFF, false, NULL), WEFT_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_retention_gc_deletes_old_runs_and_their_workspaces,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_retention_gc_dry_run_reports_the_same_and_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_gc_does_not_follow_symlinks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retention_gc_keeps_pinned_runs_until_unpinned, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retention_gc_keeps_a_running_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_pin_resolves_ids_like_run_load, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
