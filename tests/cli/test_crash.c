/* tests/cli/test_crash.c - crashes lose nothing and say what happened (docs/durability.md), end
 * to end with the built `weft` binary as real child processes on real state and span databases
 * in a temporary WEFT_HOME:
 * - a `kill -9` of `weft run` at several points of a six-step scripted run: the spans of the
 *   steps completed before the kill are in weft.db, `weft runs` shows the run interrupted and
 *   closes its root span and the in-flight step's agent span as ERROR "interrupted", `weft resume`
 * completes it without running a completed step again (LLM exchanges and step end times counted in
 * state.db), and PRAGMA integrity_check is ok on both databases;
 * - one owner per run: a resume while the original process runs, and two resumes at once, are
 *   refused naming the owner (exit 1), and the steps run once; an owner on another host is
 *   taken over only once its heartbeat is stale;
 * - `weft resume` of a run whose workflow file changed refuses (exit 2) unless --force;
 * - a damaged state.db fails `weft run` loudly (exit 1, the file named);
 * - state.db files of schema versions 3 and 4 are migrated (per-queue cursors, owner columns,
 *   task columns) and keep their runs.
 *
 * The test waits on conditions in the databases (a step saved as in progress), never on
 * sleeps: the scripted model's delay only keeps the run busy while the test looks. */
#include "support/weft_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define MAX_OUTPUT (1u << 16)
#define STEPS      6
#define WAIT_MS    20000 /* bound on any wait for a condition */

struct fixture {
    char dir[64];
    char wf[128];
    char state_db[128];
    char span_db[128];
    char out[MAX_OUTPUT];
    char err[MAX_OUTPUT];
};

struct run {
    int status;
    const char *out;
    const char *err;
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-crash-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->wf, sizeof(f->wf), "%s/wf.json", f->dir);
    snprintf(f->state_db, sizeof(f->state_db), "%s/state.db", f->dir);
    snprintf(f->span_db, sizeof(f->span_db), "%s/weft.db", f->dir);
    weft_test_setenv("WEFT_HOME", f->dir);
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

static void
write_text(const char *path, const char *text, const char *mode)
{
    FILE *fp = fopen(path, mode);

    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A chain of STEPS agent steps s0 -> s1 -> ...; every answer takes @p delay_ms. */
static void
write_workflow(struct fixture *f, int delay_ms)
{
    char path[160];
    char text[4096];
    size_t n = 0;

    n += (size_t)snprintf(text + n, sizeof(text) - n,
                          "{\"version\": 1, \"responses\": {\"a\": "
                          "{\"act\": [");
    for (int i = 0; i < STEPS; i++) {
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%s{\"content\": \"done %d\", \"delay_ms\": %d}", i > 0 ? ", " : "",
                              i, delay_ms);
    }
    snprintf(text + n, sizeof(text) - n, "]}}}");
    snprintf(path, sizeof(path), "%s/script.json", f->dir);
    write_text(path, text, "w");
    n = (size_t)snprintf(text, sizeof(text),
                         "{\"name\": \"chain\", \"models\": {\"m\": {\"provider\": \"scripted\","
                         " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                         " \"plan\": [");
    for (int i = 0; i < STEPS; i++) {
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%s{\"id\": \"s%d\", \"agent\": \"a\", \"task\": \"Step %d\"",
                              i > 0 ? ", " : "", i, i);
        if (i > 0) {
            n += (size_t)snprintf(text + n, sizeof(text) - n, ", \"depends_on\": [\"s%d\"]", i - 1);
        }
        n += (size_t)snprintf(text + n, sizeof(text) - n, "}");
    }
    snprintf(text + n, sizeof(text) - n, "]}\n");
    write_text(f->wf, text, "w");
}

static void
read_file(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    assert_non_null(fp);
    n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

/* Start the weft binary with @p args (NULL-terminated); its output goes to files named by
 * @p tag in the fixture's directory. */
static pid_t
spawn_weft(struct fixture *f, const char *tag, const char *const *args)
{
    char out_path[160];
    char err_path[160];
    char *argv[24];
    size_t argc = 0;
    posix_spawn_file_actions_t actions;
    pid_t pid = 0;

    snprintf(out_path, sizeof(out_path), "%s/%s.out", f->dir, tag);
    snprintf(err_path, sizeof(err_path), "%s/%s.err", f->dir, tag);
    argv[argc++] = (char *)WEFT_BIN;
    for (; args[argc - 1] != NULL; argc++) {
        assert_true(argc < 23);
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &actions, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    return pid;
}

static struct run
wait_weft(struct fixture *f, const char *tag, pid_t pid)
{
    char path[160];
    int status = 0;
    struct run r = {0};

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    snprintf(path, sizeof(path), "%s/%s.out", f->dir, tag);
    read_file(path, f->out, sizeof(f->out));
    snprintf(path, sizeof(path), "%s/%s.err", f->dir, tag);
    read_file(path, f->err, sizeof(f->err));
    r.status = WEXITSTATUS(status);
    r.out = f->out;
    r.err = f->err;
    return r;
}

#define RUN(f, ...) \
    wait_weft((f), "cmd", spawn_weft((f), "cmd", (const char *const[]){__VA_ARGS__, NULL}))

static void
kill_hard(pid_t pid)
{
    int status = 0;

    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static sqlite3 *
open_db(const char *path)
{
    sqlite3 *db = NULL;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    return db;
}

/* The first column of the first row of @p sql with "?" bound to @p arg (may be NULL), as
 * an integer; -1 when there is no row or the database cannot be read yet. */
static long long
query_int(const char *path, const char *sql, const char *arg)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    long long v = -1;

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK) {
        if (arg != NULL) {
            sqlite3_bind_text(stmt, 1, arg, -1, SQLITE_TRANSIENT);
        }
        if (sqlite3_step(stmt) == SQLITE_ROW) {
            v = sqlite3_column_int64(stmt, 0);
        }
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return v;
}

/* Same for a text column; "" when none. */
static void
query_text(const char *path, const char *sql, const char *arg, char *out, size_t len)
{
    sqlite3 *db = open_db(path);
    sqlite3_stmt *stmt = NULL;

    out[0] = '\0';
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    if (arg != NULL) {
        sqlite3_bind_text(stmt, 1, arg, -1, SQLITE_TRANSIENT);
    }
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL) {
        snprintf(out, len, "%s", (const char *)sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

static void
exec_sql(const char *path, const char *sql)
{
    sqlite3 *db = open_db(path);
    char *msg = NULL;

    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail_msg("%s: %s", sql, msg);
    }
    sqlite3_close(db);
}

static void
pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Poll state.db until @p sql (an integer query) reaches at least @p want. */
static void
wait_for(struct fixture *f, const char *sql, const char *arg, long long want)
{
    for (int waited = 0; query_int(f->state_db, sql, arg) < want; waited += 10) {
        if (waited > WAIT_MS) {
            fail_msg("timed out waiting for %s >= %lld", sql, want);
        }
        pause_ms(10);
    }
}

static void
assert_integrity(const char *path)
{
    char result[64];

    query_text(path, "PRAGMA integrity_check", NULL, result, sizeof(result));
    assert_string_equal(result, "ok");
}

/* Step s<k> of the (only) run is saved as in progress: every step before it completed and
 * its checkpoint (the span store flush) returned, since steps of a chain run one by one. */
static void
wait_step_started(struct fixture *f, int k)
{
    char id[16];

    snprintf(id, sizeof(id), "s%d", k);
    wait_for(f, "SELECT count(*) FROM steps WHERE step_id = ? AND status = 'in_progress'", id, 1);
}

static void
run_id_of(struct fixture *f, char *id, size_t len)
{
    query_text(f->state_db, "SELECT id FROM runs ORDER BY started_ns DESC LIMIT 1", NULL, id, len);
    assert_int_equal(strlen(id), 12);
}

/* Kill `weft run` once @p completed steps are done, then check what survived and resume. */
static void
crash_at(struct fixture *f, int completed)
{
    char id[32];
    char trace[64];
    char root[32];
    char old_root[32];
    long long ended[STEPS];
    long long last_sign = 0;
    pid_t pid = 0;
    struct run r;

    write_workflow(f, 150);
    pid = spawn_weft(f, "run", (const char *const[]){"run", f->wf, "-q", "--no-trace", NULL});
    wait_step_started(f, completed);
    kill_hard(pid);
    run_id_of(f, id, sizeof(id));
    query_text(f->state_db, "SELECT trace_id FROM runs WHERE id = ?", id, trace, sizeof(trace));
    query_text(f->state_db, "SELECT root_span_id FROM runs WHERE id = ?", id, root, sizeof(root));
    assert_int_equal(strlen(trace), 32);
    assert_int_equal(strlen(root), 16);
    snprintf(old_root, sizeof(old_root), "%s", root);
    /* The run's last sign of life (docs/durability.md): its last heartbeat, the start or end of
     * its last step, or its last LLM exchange, whichever is later (never before its root span
     * started); the spans left open end there, not at the recovery. */
    last_sign = query_int(f->state_db,
                          "SELECT max(coalesce(heartbeat_ns, 0), coalesce((SELECT MAX(max("
                          "coalesce(ended_ns, 0), coalesce(started_ns, 0))) FROM steps"
                          " WHERE steps.run_id = runs.id), 0), coalesce((SELECT MAX(created_ns)"
                          " FROM llm_exchanges e WHERE e.run_id = runs.id), 0), started_ns,"
                          " coalesce(root_started_ns, 0)) FROM runs WHERE id = ?",
                          id);
    /* At least the start of the step the kill cut short: a run killed in a step reads as
     * having run until then, not until its last heartbeat (issue 26). */
    {
        char cut[16];

        snprintf(cut, sizeof(cut), "s%d", completed);
        assert_true(last_sign >=
                    query_int(f->state_db, "SELECT started_ns FROM steps WHERE step_id = ?", cut));
    }
    assert_true(last_sign > 0);

    /* Every step completed before the kill has its agent span in the span store. */
    for (int k = 0; k < STEPS; k++) {
        char step[16];
        char sql[256];

        snprintf(step, sizeof(step), "s%d", k);
        ended[k] = query_int(
            f->state_db, "SELECT ended_ns FROM steps WHERE status = 'completed' AND step_id = ?",
            step);
        assert_true((ended[k] > 0) == (k < completed));
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM spans WHERE trace_id = '%s' AND name = 'invoke_agent a'"
                 " AND json_extract(attributes, '$.\"weft.step.id\"') = ?",
                 trace);
        assert_int_equal(query_int(f->span_db, sql, step), k < completed ? 1 : 0);
    }

    /* The run reads as interrupted, and `weft runs` marks it so and closes its root span. */
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "interrupted"));
    assert_non_null(strstr(r.out, " >")); /* its duration is a lower bound, and says so */
    assert_non_null(strstr(r.err, "was interrupted"));
    assert_int_equal(query_int(f->state_db,
                               "SELECT count(*) FROM runs WHERE status = 'interrupted'"
                               " AND owner_token IS NULL AND ended_ns >= started_ns AND id = ?",
                               id),
                     1);
    assert_int_equal(query_int(f->span_db,
                               "SELECT count(*) FROM spans WHERE status_code = 2"
                               " AND status_message = 'interrupted' AND parent_span_id IS NULL"
                               " AND name = 'invoke_workflow chain' AND span_id = ?",
                               root),
                     1);
    /* The root ends at the run's last sign of life, as the stored run does. */
    assert_int_equal(query_int(f->span_db, "SELECT end_ns FROM spans WHERE span_id = ?", root),
                     last_sign);
    assert_int_equal(query_int(f->state_db, "SELECT ended_ns FROM runs WHERE id = ?", id),
                     last_sign);
    /* So is the agent span of the step the kill cut short, under the root. */
    {
        char step[16];
        snprintf(step, sizeof(step), "s%d", completed);
        query_text(f->state_db, "SELECT span_id FROM steps WHERE step_id = ?", step, root,
                   sizeof(root));
        assert_int_equal(strlen(root), 16);
        assert_int_equal(query_int(f->span_db,
                                   "SELECT count(*) FROM spans WHERE status_code = 2"
                                   " AND status_message = 'interrupted'"
                                   " AND name = 'invoke_agent a' AND span_id = ?",
                                   root),
                         1);
        /* With its original parent (the root) and start, marked weft.interrupted, and ended
         * at the run's last sign of life, as the root is (or at its start, when it started
         * after that sign: a span never ends before it starts). */
        {
            char sql[512];
            long long step_start = 0;
            snprintf(step, sizeof(step), "s%d", completed);
            step_start =
                query_int(f->state_db, "SELECT started_ns FROM steps WHERE step_id = ?", step);
            assert_true(step_start > 0);
            if (step_start > last_sign) {
                last_sign = step_start;
            }
            snprintf(sql, sizeof(sql),
                     "SELECT count(*) FROM spans WHERE span_id = ? AND parent_span_id = '%s'"
                     " AND json_extract(attributes, '$.\"weft.interrupted\"') = 1"
                     " AND end_ns = %lld AND start_ns <= end_ns",
                     old_root, last_sign);
            if (query_int(f->span_db, sql, root) != 1) {
                char got[256];
                query_text(f->span_db,
                           "SELECT coalesce(parent_span_id, '-') || ' ' || end_ns || ' ' ||"
                           " attributes FROM spans WHERE span_id = ?",
                           root, got, sizeof(got));
                fail_msg("killed step's span: want parent %s, end %lld, weft.interrupted;"
                         " got %s",
                         old_root, last_sign, got);
            }
            assert_int_equal(
                query_int(f->span_db, "SELECT start_ns FROM spans WHERE span_id = ?", root),
                step_start);
        }
    }
    r = RUN(f, "trace", "show", trace);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "ERROR: interrupted"));
    assert_integrity(f->state_db);
    assert_integrity(f->span_db);

    /* Resume completes it; no completed step ran again. */
    r = RUN(f, "resume", id, "-q", "--no-trace");
    assert_int_equal(r.status, 0);
    assert_int_equal(query_int(f->state_db,
                               "SELECT count(*) FROM runs WHERE status = 'completed'"
                               " AND owner_token IS NULL AND id = ?",
                               id),
                     1);
    /* In a new trace whose root links to the old root as resumed_from. */
    {
        char new_trace[64];
        char sql[640];

        query_text(f->state_db, "SELECT trace_id FROM runs WHERE id = ?", id, new_trace,
                   sizeof(new_trace));
        assert_int_equal(strlen(new_trace), 32);
        assert_string_not_equal(new_trace, trace);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM spans, json_each(spans.links) AS l WHERE"
                 " spans.trace_id = ? AND spans.parent_span_id IS NULL"
                 " AND spans.name = 'invoke_workflow chain'"
                 " AND json_extract(l.value, '$.trace_id') = '%s'"
                 " AND json_extract(l.value, '$.span_id') = '%s'"
                 " AND json_extract(l.value, '$.attributes.\"weft.link.reason\"') ="
                 " 'resumed_from'",
                 trace, old_root);
        if (query_int(f->span_db, sql, new_trace) != 1) {
            char got[512];
            query_text(f->span_db,
                       "SELECT links FROM spans WHERE trace_id = ? AND parent_span_id IS NULL",
                       new_trace, got, sizeof(got));
            fail_msg("resumed root does not link to %s/%s: %s", trace, old_root, got);
        }
    }
    /* The step the kill cut short ran again: its second attempt. */
    {
        char step[16];

        snprintf(step, sizeof(step), "s%d", completed);
        assert_int_equal(query_int(f->state_db,
                                   "SELECT attempts FROM steps WHERE status = 'completed'"
                                   " AND step_id = ?",
                                   step),
                         2);
    }
    assert_int_equal(
        query_int(f->state_db, "SELECT count(*) FROM steps WHERE status = 'completed'", NULL),
        STEPS);
    assert_int_equal(
        query_int(f->state_db, "SELECT count(*) FROM llm_exchanges WHERE run_id = ?", id), STEPS);
    for (int k = 0; k < completed; k++) {
        char step[16];

        snprintf(step, sizeof(step), "s%d", k);
        assert_int_equal(query_int(f->state_db,
                                   "SELECT ended_ns FROM steps WHERE attempts = 1 AND step_id = ?",
                                   step),
                         ended[k]);
    }
    assert_integrity(f->state_db);
    assert_integrity(f->span_db);
}

static void
test_crash_kill_before_the_first_step_ends(void **state)
{
    crash_at(*state, 0);
}

static void
test_crash_kill_in_the_middle(void **state)
{
    crash_at(*state, 2);
}

static void
test_crash_kill_during_the_last_step(void **state)
{
    crash_at(*state, STEPS - 1);
}

/* One owner per run: refused while the original process runs, and between two resumes. */
static void
test_crash_one_owner_per_run(void **state)
{
    struct fixture *f = *state;
    char id[32];
    char owner[64];
    pid_t first = 0;
    pid_t resumer = 0;
    struct run r;

    write_workflow(f, 300);
    first = spawn_weft(f, "run", (const char *const[]){"run", f->wf, "-q", "--no-trace", NULL});
    wait_step_started(f, 1);
    run_id_of(f, id, sizeof(id));

    /* The original process still runs it. */
    r = RUN(f, "resume", id, "-q", "--no-trace");
    assert_int_equal(r.status, 1);
    snprintf(owner, sizeof(owner), "is owned by pid %d on host", (int)first);
    assert_non_null(strstr(r.err, owner));
    kill_hard(first);

    /* Two resumes at once: the one that holds the lease runs, the other is refused. */
    resumer =
        spawn_weft(f, "resume1", (const char *const[]){"resume", id, "-q", "--no-trace", NULL});
    {
        char sql[128];

        snprintf(sql, sizeof(sql), "SELECT count(*) FROM runs WHERE owner_pid = %d", (int)resumer);
        wait_for(f, sql, NULL, 1);
    }
    r = RUN(f, "resume", id, "-q", "--no-trace");
    assert_int_equal(r.status, 1);
    snprintf(owner, sizeof(owner), "is owned by pid %d on host", (int)resumer);
    assert_non_null(strstr(r.err, owner));
    r = wait_weft(f, "resume1", resumer);
    assert_int_equal(r.status, 0);

    /* Every step ran once: one LLM exchange each (the step killed in flight never answered). */
    assert_int_equal(
        query_int(f->state_db, "SELECT count(*) FROM llm_exchanges WHERE run_id = ?", id), STEPS);
    assert_int_equal(
        query_int(f->state_db, "SELECT status = 'completed' FROM runs WHERE id = ?", id), 1);
}

/* An owner on another host holds the run while its heartbeat is fresh; a stale one is gone. */
static void
test_crash_owner_on_another_host_needs_a_stale_heartbeat(void **state)
{
    struct fixture *f = *state;
    char id[32];
    char sql[256];
    pid_t pid = 0;
    struct run r;

    write_workflow(f, 100);
    pid = spawn_weft(f, "run", (const char *const[]){"run", f->wf, "-q", "--no-trace", NULL});
    wait_step_started(f, 1);
    kill_hard(pid);
    run_id_of(f, id, sizeof(id));
    /* Pretend the owner is alive on another host: fresh heartbeat. */
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET owner_host = 'elsewhere.example', owner_pid = 1,"
             " heartbeat_ns = CAST(strftime('%%s', 'now') AS INTEGER) * 1000000000"
             " WHERE id = '%s'",
             id);
    exec_sql(f->state_db, sql);
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "running"));
    r = RUN(f, "resume", id, "-q", "--no-trace");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "is owned by pid 1 on host elsewhere.example"));
    /* Its heartbeat is an hour old: gone. */
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET heartbeat_ns = (CAST(strftime('%%s', 'now') AS INTEGER) - 3600)"
             " * 1000000000 WHERE id = '%s'",
             id);
    exec_sql(f->state_db, sql);
    r = RUN(f, "runs");
    assert_non_null(strstr(r.out, "interrupted"));
    r = RUN(f, "resume", id, "-q", "--no-trace");
    assert_int_equal(r.status, 0);
}

static void
test_crash_resume_refuses_a_changed_workflow_file(void **state)
{
    struct fixture *f = *state;
    char id[32];
    pid_t pid = 0;
    struct run r;

    write_workflow(f, 100);
    pid = spawn_weft(f, "run", (const char *const[]){"run", f->wf, "-q", "--no-trace", NULL});
    wait_step_started(f, 1);
    kill_hard(pid);
    run_id_of(f, id, sizeof(id));
    write_text(f->wf, "\n", "a"); /* same workflow, other bytes */
    r = RUN(f, "resume", id, "-q", "--no-trace");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "changed since run"));
    assert_non_null(strstr(r.err, "--force"));
    assert_int_equal(
        query_int(f->state_db, "SELECT count(*) FROM steps WHERE status = 'completed'", NULL), 1);
    /* The refused resume left no owner behind. */
    assert_int_equal(
        query_int(f->state_db, "SELECT owner_token IS NULL FROM runs WHERE id = ?", id), 1);
    r = RUN(f, "resume", id, "-q", "--no-trace", "--force");
    assert_int_equal(r.status, 0);
    assert_int_equal(
        query_int(f->state_db, "SELECT status = 'completed' FROM runs WHERE id = ?", id), 1);
}

/* Overwrite every page but the first (the schema) and the last with garbage. */
static void
damage(const char *path)
{
    FILE *fp = fopen(path, "r+b");
    long size = 0;
    char page[4096];

    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    size = ftell(fp);
    assert_true(size >= 4 * 4096);
    for (size_t i = 0; i < sizeof(page); i++) {
        page[i] = (char)(0xa5 ^ (i * 131));
    }
    for (long off = 4096; off + 4096 < size; off += 4096) {
        assert_int_equal(fseek(fp, off, SEEK_SET), 0);
        assert_int_equal(fwrite(page, 1, sizeof(page), fp), sizeof(page));
    }
    fclose(fp);
}

static void
test_crash_damaged_state_db_fails_loudly(void **state)
{
    struct fixture *f = *state;
    struct run r;

    write_workflow(f, 0);
    for (int i = 0; i < 3; i++) {
        r = RUN(f, "run", f->wf, "-q", "--no-trace");
        assert_int_equal(r.status, 0);
        write_workflow(f, 0); /* the script's cursors are per session: each run is fresh */
    }
    exec_sql(f->state_db, "PRAGMA wal_checkpoint(TRUNCATE)");
    damage(f->state_db);
    r = RUN(f, "run", f->wf, "-q", "--no-trace");
    assert_int_not_equal(r.status, 0);
    assert_non_null(strstr(r.err, f->state_db));
    assert_non_null(strstr(r.err, "malformed"));
}

/* Take the state database back to schema @p version: without the task columns (6) and the
 * owner columns (5), and for 3 without the per-queue cursor table (4) as well. */
static void
downgrade(const char *path, int version)
{
    char sql[128];

    exec_sql(path, "ALTER TABLE steps DROP COLUMN task_uuid;"
                   "ALTER TABLE steps DROP COLUMN retries;"
                   "ALTER TABLE steps DROP COLUMN is_dispatched;"
                   "ALTER TABLE runs DROP COLUMN owner_pid;"
                   "ALTER TABLE runs DROP COLUMN owner_host;"
                   "ALTER TABLE runs DROP COLUMN owner_token;"
                   "ALTER TABLE runs DROP COLUMN owner_since_ns;"
                   "ALTER TABLE runs DROP COLUMN heartbeat_ns;"
                   "ALTER TABLE runs DROP COLUMN workflow_hash;"
                   "ALTER TABLE runs DROP COLUMN root_span_name;"
                   "ALTER TABLE runs DROP COLUMN root_parent_span_id;"
                   "ALTER TABLE runs DROP COLUMN root_started_ns;"
                   "ALTER TABLE steps DROP COLUMN span_id;"
                   "ALTER TABLE steps DROP COLUMN span_parent_id;"
                   "ALTER TABLE runs DROP COLUMN origin_kind;"
                   "ALTER TABLE runs DROP COLUMN origin_run_id;"
                   "ALTER TABLE runs DROP COLUMN origin_step;"
                   "DROP INDEX runs_workflow_snapshot_ref;"
                   "ALTER TABLE runs DROP COLUMN workflow_snapshot_ref;"
                   "ALTER TABLE runs DROP COLUMN workflow_snapshot;"
                   "DROP INDEX runs_ended;"
                   "ALTER TABLE runs DROP COLUMN pinned;"
                   "ALTER TABLE runs DROP COLUMN trace_sampling;"
                   "DROP TABLE tool_results;"
                   "DROP TABLE payloads;"
                   "DROP INDEX llm_exchanges_entry_ref;"
                   "ALTER TABLE llm_exchanges DROP COLUMN entry_ref;");
    if (version < 4) {
        exec_sql(path, "DROP TABLE script_cursor_keys;");
    }
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d;", version);
    exec_sql(path, sql);
}

/* Databases written before owners existed (schema 4) and before per-queue cursors (schema 3)
 * are migrated to the current schema (16) and keep their runs; a new run works on them. */
static void
test_crash_older_schemas_are_migrated(void **state)
{
    struct fixture *f = *state;
    struct run r;

    for (int version = 3; version <= 4; version++) {
        write_workflow(f, 0);
        r = RUN(f, "run", f->wf, "-q", "--no-trace");
        assert_int_equal(r.status, 0);
        downgrade(f->state_db, version);
        r = RUN(f, "runs");
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "completed"));
        assert_int_equal(query_int(f->state_db, "PRAGMA user_version", NULL), 16);
        assert_true(query_int(f->state_db,
                              "SELECT count(*) FROM runs WHERE owner_token IS NULL"
                              " AND heartbeat_ns IS NULL",
                              NULL) >= 1);
        assert_int_equal(query_int(f->state_db,
                                   "SELECT count(*) FROM sqlite_master WHERE name ="
                                   " 'script_cursor_keys'",
                                   NULL),
                         1);
        write_workflow(f, 0);
        r = RUN(f, "run", f->wf, "-q", "--no-trace");
        assert_int_equal(r.status, 0);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_crash_kill_before_the_first_step_ends, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_crash_kill_in_the_middle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_kill_during_the_last_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_one_owner_per_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_owner_on_another_host_needs_a_stale_heartbeat,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_resume_refuses_a_changed_workflow_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_crash_damaged_state_db_fails_loudly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_older_schemas_are_migrated, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
