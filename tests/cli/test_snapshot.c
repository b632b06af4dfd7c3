/* tests/cli/test_snapshot.c - a run keeps what replay, fork and resume need, and its state and
 * spans stay together (docs/replay.md "What a run keeps", docs/durability.md), end to end with
 * the built `weft` binary as child processes started in chosen directories, WEFT_HOME unset
 * (as a newcomer's shell has it), on real SQLite state and span databases:
 * - a run started from one directory with a relative workflow path is replayed, forked and
 *   resumed from another directory;
 * - after the workflow's directory is deleted, replay, fork and resume load the snapshot
 *   stored with the run and say so; a replay after the workflow was edited uses the snapshot
 *   (identical) while --workflow runs the edited file (diverged), and resume still refuses
 *   the edited file without --force;
 * - a workflow over the 4 MiB cap, or with a credential in it, keeps no snapshot and says so;
 * - a run with --state DIR/state.db from one directory keeps its spans in DIR/weft.db, so
 *   `weft serve --state DIR/state.db` started from another directory serves its trace.
 *
 * Waits poll the databases and the server's stderr with deadlines; the scripted model's delay
 * only keeps a run busy while the test kills it. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define MAX_OUTPUT (1u << 17)
#define STEPS      4
#define WAIT_MS    20000

struct fixture {
    char dir[64];      /* everything of the test */
    char src[128];     /* the workflow's directory: dir/src/flows */
    char wf_rel[64];   /* the workflow as `weft run` is given it, relative to dir/src */
    char start[128];   /* where `weft run` starts: dir/src */
    char other[128];   /* another directory: dir/other */
    char state[128];   /* dir/db/state.db */
    char span_db[128]; /* dir/db/weft.db */
    char out[MAX_OUTPUT];
    char err[MAX_OUTPUT];
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char path[192];

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-snap-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->start, sizeof(f->start), "%s/src", f->dir);
    snprintf(f->src, sizeof(f->src), "%s/src/flows", f->dir);
    snprintf(f->wf_rel, sizeof(f->wf_rel), "flows/wf.json");
    snprintf(f->other, sizeof(f->other), "%s/other", f->dir);
    snprintf(f->state, sizeof(f->state), "%s/db/state.db", f->dir);
    snprintf(f->span_db, sizeof(f->span_db), "%s/db/weft.db", f->dir);
    assert_int_equal(mkdir(f->start, 0700), 0);
    assert_int_equal(mkdir(f->src, 0700), 0);
    assert_int_equal(mkdir(f->other, 0700), 0);
    snprintf(path, sizeof(path), "%s/db", f->dir);
    assert_int_equal(mkdir(path, 0700), 0);
    /* A newcomer's shell: no WEFT_HOME (ctest sets one), no exporter but the store. */
    weft_test_setenv("WEFT_HOME", NULL);
    weft_test_setenv("WEFT_STATE_URL", NULL);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A chain s0 -> s1 -> ... of agent "a" steps; each answer takes @p delay_ms; the agent's
 * instructions are @p instructions. */
static void
write_workflow(struct fixture *f, int delay_ms, const char *instructions)
{
    char text[4096];
    size_t n = 0;

    n += (size_t)snprintf(text + n, sizeof(text) - n,
                          "{\"version\": 1, \"responses\": {\"a\": {\"act\": [");
    for (int i = 0; i < STEPS; i++) {
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%s{\"content\": \"done %d\", \"delay_ms\": %d}", i > 0 ? ", " : "",
                              i, delay_ms);
    }
    snprintf(text + n, sizeof(text) - n, "]}}}\n");
    weft_test_write_file(f->src, "script.json", text);
    n = (size_t)snprintf(text, sizeof(text),
                         "{\"name\": \"chain\", \"models\": {\"m\": {\"provider\": \"scripted\","
                         " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\","
                         " \"instructions\": \"%s\"}], \"plan\": [",
                         instructions);
    for (int i = 0; i < STEPS; i++) {
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%s{\"id\": \"s%d\", \"agent\": \"a\", \"task\": \"Step %d\"%s",
                              i > 0 ? ", " : "", i, i, i > 0 ? ", \"depends_on\": [\"s" : "}");
        if (i > 0) {
            n += (size_t)snprintf(text + n, sizeof(text) - n, "%d\"]}", i - 1);
        }
    }
    snprintf(text + n, sizeof(text) - n, "]}\n");
    weft_test_write_file(f->src, "wf.json", text);
}

static void
read_all(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    buf[0] = '\0';
    if (fp == NULL) {
        return;
    }
    n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

/* Start the weft binary in directory @p cwd with @p args (NULL-terminated); stdout and stderr
 * to dir/TAG.out and dir/TAG.err. */
static pid_t
spawn_in(struct fixture *f, const char *cwd, const char *tag, const char *const *args)
{
    char out_path[192];
    char err_path[192];
    char *argv[24];
    size_t argc = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid = 0;

    snprintf(out_path, sizeof(out_path), "%s/%s.out", f->dir, tag);
    snprintf(err_path, sizeof(err_path), "%s/%s.err", f->dir, tag);
    argv[argc++] = (char *)WEFT_BIN;
    for (; args[argc - 1] != NULL; argc++) {
        assert_true(argc < 23);
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    assert_int_equal(posix_spawn_file_actions_addchdir_np(&fa, cwd), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

static int
wait_in(struct fixture *f, const char *tag, pid_t pid)
{
    char path[192];
    int status = 0;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    snprintf(path, sizeof(path), "%s/%s.out", f->dir, tag);
    read_all(path, f->out, sizeof(f->out));
    snprintf(path, sizeof(path), "%s/%s.err", f->dir, tag);
    read_all(path, f->err, sizeof(f->err));
    return WEXITSTATUS(status);
}

/* Run weft in @p cwd and wait; f->out and f->err hold what it printed. @return exit status. */
#define WEFT_IN(f, cwd, ...) \
    wait_in((f), "cmd", spawn_in((f), (cwd), "cmd", (const char *const[]){__VA_ARGS__, NULL}))

static void
expect(struct fixture *f, int status, int want, const char *what)
{
    if (status != want) {
        print_error("%s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s\n", what, status, want,
                    f->out, f->err);
    }
    assert_int_equal(status, want);
}

/* The first column of the first row of @p sql ("?" bound to @p arg when not NULL) as text
 * into @p buf; "" when there is none. */
static void
query_text(const char *db_path, const char *sql, const char *arg, char *buf, size_t len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;

    buf[0] = '\0';
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK) {
            if (arg != NULL) {
                sqlite3_bind_text(stmt, 1, arg, -1, SQLITE_TRANSIENT);
            }
            if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL) {
                snprintf(buf, len, "%s", (const char *)sqlite3_column_text(stmt, 0));
            }
        }
        sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
}

/* Run the chain from f->start with the relative path; @return the run id into @p id. */
static void
first_run(struct fixture *f, char *id, size_t len)
{
    expect(f, WEFT_IN(f, f->start, "run", f->wf_rel, "--state", f->state, "-q", "--no-trace"), 0,
           "weft run");
    query_text(f->state, "SELECT id FROM runs ORDER BY started_ns LIMIT 1", NULL, id, len);
    assert_true(id[0] != '\0');
}

#define SNAPSHOT_LINE "the workflow moved or changed: using the snapshot stored with the run (hash "

/* From another directory: replay is identical and fork completes, both from the run's file
 * (nothing moved: no snapshot line). The old code stored "flows/wf.json" and answered
 * "cannot open" (exit 2). */
static void
test_replay_and_fork_from_another_directory(void **state)
{
    struct fixture *f = *state;
    char id[64];

    write_workflow(f, 0, "Do the step.");
    first_run(f, id, sizeof(id));
    expect(f, WEFT_IN(f, f->other, "replay", id, "--state", f->state, "-q", "--no-trace"), 0,
           "weft replay from another directory");
    assert_non_null(strstr(f->out, "identical"));
    assert_null(strstr(f->err, SNAPSHOT_LINE));
    expect(
        f,
        WEFT_IN(f, f->other, "fork", id, "--from", "s2", "--state", f->state, "-q", "--no-trace"),
        0, "weft fork from another directory");
    assert_non_null(strstr(f->out, "completed"));
}

/* The workflow's directory deleted: replay and fork load the stored snapshot and say so. */
static void
test_replay_and_fork_after_the_workflow_was_deleted(void **state)
{
    struct fixture *f = *state;
    char id[64];

    write_workflow(f, 0, "Do the step.");
    first_run(f, id, sizeof(id));
    weft_test_rmtree(f->src);
    expect(f, WEFT_IN(f, f->other, "replay", id, "--state", f->state, "-q", "--no-trace"), 0,
           "weft replay of a deleted workflow");
    assert_non_null(strstr(f->out, "identical"));
    assert_non_null(strstr(f->err, SNAPSHOT_LINE "fnv1a64:"));
    expect(
        f,
        WEFT_IN(f, f->other, "fork", id, "--from", "s1", "--state", f->state, "-q", "--no-trace"),
        0, "weft fork of a deleted workflow");
    assert_non_null(strstr(f->err, SNAPSHOT_LINE));
    assert_non_null(strstr(f->out, "completed"));
    /* The snapshot's directory is gone once the command is done. */
    assert_null(strstr(f->err, "cannot"));
}

/* An edited workflow: replay reproduces the run from the snapshot (identical, said on stderr);
 * --workflow runs the edited file, whose changed instructions diverge (exit 5). */
static void
test_replay_after_an_edit_uses_the_snapshot(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char hash[64];

    write_workflow(f, 0, "Do the step.");
    first_run(f, id, sizeof(id));
    write_workflow(f, 0, "Do the step differently now.");
    expect(f, WEFT_IN(f, f->other, "replay", id, "--state", f->state, "-q", "--no-trace"), 0,
           "weft replay of an edited workflow");
    assert_non_null(strstr(f->out, "identical"));
    assert_non_null(strstr(f->err, SNAPSHOT_LINE));
    /* The snapshot is kept as a payload (docs/payloads.md) and was read back whole. */
    query_text(f->state,
               "SELECT count(*) FROM runs r JOIN payloads p ON p.hash = r.workflow_snapshot_ref"
               " WHERE r.workflow_snapshot IS NULL AND r.id = ?",
               id, hash, sizeof(hash));
    assert_string_equal(hash, "1");
    /* The hash named is the one stored with the run (inline, to read it with SQL). */
    weft_test_setenv("WEFT_PAYLOADS", "off");
    write_workflow(f, 0, "Do the step.");
    expect(f, WEFT_IN(f, f->start, "run", f->wf_rel, "--state", f->state, "-q", "--no-trace"), 0,
           "weft run, snapshot inline");
    query_text(f->state, "SELECT id FROM runs ORDER BY started_ns DESC LIMIT 1", NULL, id,
               sizeof(id));
    write_workflow(f, 0, "Do the step differently now.");
    expect(f, WEFT_IN(f, f->other, "replay", id, "--state", f->state, "-q", "--no-trace"), 0,
           "weft replay of an edited workflow, snapshot inline");
    query_text(f->state, "SELECT json_extract(workflow_snapshot, '$.hash') FROM runs WHERE id = ?",
               id, hash, sizeof(hash));
    unsetenv("WEFT_PAYLOADS");
    assert_true(strncmp(hash, "fnv1a64:", 8) == 0);
    assert_non_null(strstr(f->err, hash));
    expect(f,
           WEFT_IN(f, f->start, "replay", id, "--workflow", f->wf_rel, "--state", f->state, "-q",
                   "--no-trace"),
           5, "weft replay --workflow of the edited file");
    assert_non_null(strstr(f->out, "DIVERGED"));
    assert_null(strstr(f->err, SNAPSHOT_LINE));
}

/* No snapshot and no file (a run from before snapshots): the error names --workflow. */
static void
test_replay_without_file_or_snapshot_names_workflow_option(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char sql[256];
    sqlite3 *db = NULL;

    write_workflow(f, 0, "Do the step.");
    first_run(f, id, sizeof(id));
    weft_test_rmtree(f->src);
    /* As a run from before snapshots (a weft without them has no such column to clear). */
    assert_int_equal(sqlite3_open(f->state, &db), SQLITE_OK);
    snprintf(
        sql, sizeof(sql),
        "UPDATE runs SET workflow_snapshot = NULL, workflow_snapshot_ref = NULL WHERE id = '%s'",
        id);
    (void)sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    expect(f, WEFT_IN(f, f->other, "replay", id, "--state", f->state, "-q"), 2,
           "weft replay without file or snapshot");
    assert_non_null(strstr(f->err, "--workflow FILE"));
}

/* A workflow with a credential in it keeps no snapshot (the state must not become a second
 * copy of the key), and the run says so; it still runs. */
static void
test_a_credential_in_the_workflow_keeps_no_snapshot(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char n[16];

    write_workflow(f, 0, "Call the API with sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD.");
    first_run(f, id, sizeof(id));
    assert_non_null(strstr(f->err, "keeps no snapshot of its workflow"));
    assert_non_null(strstr(f->err, "looks like a credential"));
    query_text(f->state,
               "SELECT count(*) FROM runs WHERE workflow_snapshot IS NULL"
               " AND workflow_snapshot_ref IS NULL AND id = ?",
               id, n, sizeof(n));
    assert_string_equal(n, "1");
}

/* A workflow over the snapshot's 4 MiB keeps none, and the run says so; it still runs. */
static void
test_a_workflow_over_the_cap_keeps_no_snapshot(void **state)
{
    struct fixture *f = *state;
    const size_t pad = 4u * 1024u * 1024u + 100u;
    char path[192];
    char id[64];
    char n[16];
    char *text = malloc(pad + 8192);
    const char *rest = NULL;
    size_t len = 0;

    assert_non_null(text);
    write_workflow(f, 0, "Do the step.");
    snprintf(path, sizeof(path), "%s/wf.json", f->src);
    read_all(path, f->out, sizeof(f->out));
    rest = strstr(f->out, "\"models\"");
    assert_non_null(rest);
    len = (size_t)snprintf(text, 64, "{\"name\": \"chain\", \"description\": \"");
    memset(text + len, 'x', pad);
    snprintf(text + len + pad, 8192, "\", %s", rest);
    weft_test_write_file(f->src, "wf.json", text);
    free(text);
    first_run(f, id, sizeof(id));
    assert_non_null(strstr(f->err, "keeps no snapshot of its workflow"));
    assert_non_null(strstr(f->err, "exceed the snapshot's 4 MiB"));
    query_text(f->state,
               "SELECT count(*) FROM runs WHERE workflow_snapshot IS NULL"
               " AND workflow_snapshot_ref IS NULL AND id = ?",
               id, n, sizeof(n));
    assert_string_equal(n, "1");
}

/* Start the slow chain from f->start and kill it hard once s1 is in progress (s0 completed).
 * @return the run id into @p id. */
static void
killed_run(struct fixture *f, char *id, size_t len)
{
    pid_t pid = 0;
    int status = 0;
    char st[32] = "";
    struct timespec ts = {0, 20000000};

    write_workflow(f, 300, "Do the step.");
    pid = spawn_in(
        f, f->start, "killed",
        (const char *const[]){"run", f->wf_rel, "--state", f->state, "-q", "--no-trace", NULL});
    for (int i = 0; i < WAIT_MS / 20 && strcmp(st, "in_progress") != 0; i++) {
        query_text(f->state, "SELECT status FROM steps WHERE step_id = 's1'", NULL, st, sizeof(st));
        if (strcmp(st, "in_progress") != 0) {
            nanosleep(&ts, NULL);
        }
    }
    assert_string_equal(st, "in_progress");
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    query_text(f->state, "SELECT id FROM runs ORDER BY started_ns LIMIT 1", NULL, id, len);
    assert_true(id[0] != '\0');
}

/* Resume from another directory, after the workflow was deleted: the snapshot, said so; the
 * run completes with the answers of the steps that were left (the script's cursors). */
static void
test_resume_after_the_workflow_was_deleted(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char result[64];

    killed_run(f, id, sizeof(id));
    weft_test_rmtree(f->src);
    expect(f, WEFT_IN(f, f->other, "resume", id, "--state", f->state, "-q", "--no-trace"), 0,
           "weft resume of a deleted workflow");
    assert_non_null(strstr(f->err, SNAPSHOT_LINE));
    query_text(f->state,
               "SELECT group_concat(status) FROM (SELECT status FROM steps WHERE run_id = ?"
               " ORDER BY idx)",
               id, result, sizeof(result));
    assert_string_equal(result, "completed,completed,completed,completed");
    query_text(f->state, "SELECT result FROM steps WHERE run_id = ? AND step_id = 's3'", id, result,
               sizeof(result));
    assert_string_equal(result, "done 3");
}

/* Resume of an edited workflow from another directory: refused without --force (exit 2,
 * naming the file by its absolute path), then continued with --force. */
static void
test_resume_of_an_edited_workflow_still_needs_force(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char abs[192];

    killed_run(f, id, sizeof(id));
    write_workflow(f, 0, "Do the step differently now.");
    expect(f, WEFT_IN(f, f->other, "resume", id, "--state", f->state, "-q", "--no-trace"), 2,
           "weft resume of an edited workflow");
    snprintf(abs, sizeof(abs), "%s/wf.json changed since run", f->src);
    assert_non_null(strstr(f->err, abs));
    assert_null(strstr(f->err, SNAPSHOT_LINE));
    expect(f,
           WEFT_IN(f, f->other, "resume", id, "--force", "--state", f->state, "-q", "--no-trace"),
           0, "weft resume --force of an edited workflow");
}

/* --state DIR/state.db from one directory: the spans go to DIR/weft.db (not ./.weft/weft.db
 * of the directory the run started in), and `weft serve --state DIR/state.db` started from
 * another directory serves the run's trace. */
static void
test_state_elsewhere_keeps_its_spans_beside_it(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char path[256];
    char text[1024] = "";
    char *body = NULL;
    unsigned port = 0;
    long status = 0;
    pid_t pid = 0;
    struct stat sb;
    struct timespec ts = {0, 10000000};

    write_workflow(f, 0, "Do the step.");
    first_run(f, id, sizeof(id));
    assert_int_equal(stat(f->span_db, &sb), 0);
    snprintf(path, sizeof(path), "%s/.weft/weft.db", f->start);
    assert_int_not_equal(stat(path, &sb), 0);
    pid = spawn_in(
        f, f->other, "serve",
        (const char *const[]){"serve", "--addr", "127.0.0.1:0", "--state", f->state, NULL});
    snprintf(path, sizeof(path), "%s/serve.err", f->dir);
    for (int i = 0; i < 1000 && port == 0; i++) {
        const char *p = NULL;
        read_all(path, text, sizeof(text));
        p = strstr(text, "listening on port ");
        if (p != NULL) {
            port = (unsigned)strtoul(p + 18, NULL, 10);
        } else {
            nanosleep(&ts, NULL);
        }
    }
    if (port == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("weft serve did not listen: %s", text);
    }
    snprintf(path, sizeof(path), "/api/v1/runs/%s/trace", id);
    body = serve_proc_get(port, path, 10000, &status);
    serve_proc_stop(pid);
    assert_non_null(body);
    if (status != 200) {
        print_error("GET %s: %ld %s\n", path, status, body);
    }
    assert_int_equal(status, 200);
    assert_non_null(strstr(body, "invoke_workflow chain"));
    free(body);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replay_and_fork_from_another_directory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replay_and_fork_after_the_workflow_was_deleted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replay_after_an_edit_uses_the_snapshot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replay_without_file_or_snapshot_names_workflow_option,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_credential_in_the_workflow_keeps_no_snapshot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_workflow_over_the_cap_keeps_no_snapshot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resume_after_the_workflow_was_deleted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resume_of_an_edited_workflow_still_needs_force, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_elsewhere_keeps_its_spans_beside_it, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
