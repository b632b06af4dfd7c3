/* runtime/state/state_sqlite.c - the SQLite backend of the run state store (state.h): the embedded
 * default, one file ($WEFT_HOME/state.db unless told otherwise).
 *
 * WAL mode lets `weft` readers look at a database a run is writing. The statements a run
 * repeats (step, cursor, exchange and message writes) are prepared once per handle and kept
 * in a small cache keyed by their SQL text's address (every SQL text here is a string
 * literal): parsing them was 60 % of a scripted step's instructions (callgrind). SQLite
 * re-prepares a cached statement itself when the schema changes (sqlite3_prepare_v2). Reads
 * for `weft runs` are rare and keep per-call statements.
 *
 * The long texts of LLM exchanges and tool results are content-addressed payloads (schema 14,
 * state_payloads.h): records in the payloads table, written in the transaction of the row that
 * refers to them and collected with the last run that does.
 */
#include "runtime/state/state_sqlite.h"
#include "runtime/common/json_write.h"
#include "runtime/state/state_payloads.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "tracing/ids.h"
#include "tracing/redact.h"

#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct weft__state_ops lite_ops;

static void lite_close(struct rt_state *base);
static weft_err lite_begin(struct rt_state *base);
static weft_err lite_commit(struct rt_state *base);

/* A run's latest sign of life apart from its heartbeat, which is written at most once a second:
 * the last start or end of a step and the last LLM exchange it stored. Without the starts and
 * exchanges, a run killed 600 ms into its first step read as having lasted a few microseconds. */
#define STATE_LAST_LIFE                                                              \
    " MAX(COALESCE((SELECT MAX(MAX(COALESCE(ended_ns, 0), COALESCE(started_ns, 0)))" \
    " FROM steps WHERE steps.run_id = runs.id), 0),"                                 \
    " COALESCE((SELECT MAX(e.created_ns) FROM llm_exchanges e WHERE e.run_id = runs.id), 0))"

/* The owner columns read with every run (read_info): a run whose owner is gone reads as
 * interrupted before anything marks it so. */
#define STATE_OWNER_COLUMNS "owner_pid, owner_host, heartbeat_ns," STATE_LAST_LIFE

/* Durability helpers, defined at the end of the file. */
static void state_note_error(struct lite_state *st, int rc);

/* The state holds prompts, answers and tool outputs: create the file 0600 before SQLite opens
 * it (SQLite gives its -wal and -shm files the database's mode), and take group and other
 * access away from a file an older weft created 0644. Failures are left to sqlite3_open_v2,
 * which reports them. */
static void
make_private(const char *path)
{
    struct stat sb;
    int fd = -1;

    if (strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
        return;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return;
    }
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0 &&
        sb.st_uid == geteuid()) {
        (void)fchmod(fd, sb.st_mode & 0700);
    }
    close(fd);
}

weft_err
weft__state_sqlite_open(const char *path, struct rt_state **out, char *err, size_t err_len)
{
    struct lite_state *st = NULL;
    char *errmsg = NULL;
    sqlite3_stmt *stmt = NULL;
    int version = 0;

    *out = NULL;
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    st->base.ops = &lite_ops;
    make_private(path);
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        snprintf(err, err_len, "state database %s: %s", path,
                 st->db != NULL ? sqlite3_errmsg(st->db) : "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if (!weft__lite_register_rank(st->db)) {
        snprintf(err, err_len, "state database %s: this SQLite lacks FTS5 (skill memory needs it)",
                 path);
        goto fail;
    }
    /* The version is read inside the write transaction, so two processes opening a new file
     * at once migrate it once; a crash leaves the previous version whole. */
    if (weft__lite_open_settings(st->db, &errmsg) != SQLITE_OK) {
        goto sql_fail;
    }
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
        version = sqlite3_column_int(stmt, 0);
    }
    sqlite3_finalize(stmt);
    if (version > WEFT__LITE_SCHEMA_VERSION) {
        snprintf(err, err_len, "state database %s has schema %d; this weft knows %d", path, version,
                 WEFT__LITE_SCHEMA_VERSION);
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    if (weft__lite_schema_migrate(st->db, version, &errmsg) != SQLITE_OK ||
        sqlite3_exec(st->db, "PRAGMA user_version = " WEFT__LITE_SCHEMA_VERSION_TEXT "; COMMIT",
                     NULL, NULL, &errmsg) != SQLITE_OK) {
        goto sql_fail;
    }
    *out = &st->base;
    return WEFT_OK;
sql_fail:
    snprintf(err, err_len, "state database %s: %s", path,
             errmsg != NULL ? errmsg : "schema setup failed");
    sqlite3_free(errmsg);
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
fail:
    lite_close(&st->base);
    return WEFT_EIO;
}

static void
lite_close(struct rt_state *base)
{
    struct lite_state *st = lite(base);

    if (st == NULL) {
        return;
    }
    for (size_t i = 0; i < STMT_CACHE; i++) {
        sqlite3_finalize(st->cache[i].stmt);
    }
    sqlite3_close(st->db);
    weft__free(st->rows_run);
    weft__free(st->rows_deps);
    weft__free(st);
}

/* Bind a NUL-terminated string or NULL. */
static void
bind_text(sqlite3_stmt *stmt, int i, const char *s)
{
    char *clean = NULL;

    if (s == NULL) {
        sqlite3_bind_null(stmt, i);
        return;
    }
    /* Inputs, tasks, results and exchanges are kept on disk: credentials in them are not. */
    clean = weft__redact_text(s);
    sqlite3_bind_text(stmt, i, clean != NULL ? clean : "", -1, SQLITE_TRANSIENT);
    weft__free(clean);
}

/* A lookup key (a run id or id prefix) is bound as is: ids are generated, never secrets, and a
 * redaction that ran out of memory must not turn the lookup into one of "" (no run, no steps,
 * silently). */
static void
bind_key(sqlite3_stmt *stmt, int i, const char *key)
{
    sqlite3_bind_text(stmt, i, key, -1, SQLITE_TRANSIENT);
}

/* Give back a statement from prepare() or cached(): a cached one
 * is reset for its next use (its bindings cleared, so no text outlives the call), any other is
 * finalized. */
static void
release(struct lite_state *st, sqlite3_stmt *stmt)
{
    for (size_t i = 0; stmt != NULL && i < STMT_CACHE; i++) {
        if (st->cache[i].stmt == stmt) {
            sqlite3_reset(stmt);
            sqlite3_clear_bindings(stmt);
            st->cache[i].is_busy = false;
            return;
        }
    }
    sqlite3_finalize(stmt);
}

static weft_err
finish(struct lite_state *st, sqlite3_stmt *stmt, const char *what)
{
    int rc = sqlite3_step(stmt);

    release(st, stmt);
    if (rc != SQLITE_DONE) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: %s failed: %s", what, sqlite3_errmsg(st->db));
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static sqlite3_stmt *
prepare(struct lite_state *st, const char *sql)
{
    sqlite3_stmt *stmt = NULL;

    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        state_note_error(st, sqlite3_errcode(st->db));
        WEFT_LOG(WEFT_LOG_ERROR, "state: prepare failed: %s", sqlite3_errmsg(st->db));
        sqlite3_finalize(stmt);
        return NULL;
    }
    return stmt;
}

/* The statement for @p sql (a string literal), prepared on first use and then reused. Give it
 * back with finish() or release(). NULL on failure (logged). */
static sqlite3_stmt *
cached(struct lite_state *st, const char *sql)
{
    struct cached_stmt *free_slot = NULL;

    for (size_t i = 0; i < STMT_CACHE; i++) {
        struct cached_stmt *c = &st->cache[i];
        if (c->sql == sql) {
            if (c->is_busy) {
                return prepare(st, sql); /* nested use of the same statement */
            }
            c->is_busy = true;
            return c->stmt;
        }
        if (c->sql == NULL && free_slot == NULL) {
            free_slot = c;
        }
    }
    if (free_slot == NULL) {
        return prepare(st, sql);
    }
    free_slot->stmt = prepare(st, sql);
    if (free_slot->stmt == NULL) {
        return NULL;
    }
    free_slot->sql = sql;
    free_slot->is_busy = true;
    return free_slot->stmt;
}

/* Run @p sql (a string literal returning no rows: BEGIN, COMMIT) through the statement cache:
 * a step's two or three commits no longer parse their BEGIN and COMMIT each time.
 * @return true when it ran; else sqlite3_errcode()/sqlite3_errmsg() say why. */
static bool
exec_cached(struct lite_state *st, const char *sql)
{
    sqlite3_stmt *stmt = cached(st, sql);
    int rc = SQLITE_ERROR;

    if (stmt == NULL) {
        return false;
    }
    rc = sqlite3_step(stmt);
    release(st, stmt);
    return rc == SQLITE_DONE;
}

/* A hash of the step's dependencies (never 0): what decides whether a save must write them. */
static uint64_t
deps_hash(const struct plan_step *step)
{
    uint64_t h = 14695981039346656037ull ^ (uint64_t)step->depends_count;

    for (size_t d = 0; d < step->depends_count; d++) {
        for (const unsigned char *p = (const unsigned char *)step->depends_on[d]; *p != '\0'; p++) {
            h = (h ^ *p) * 1099511628211ull;
        }
        h = (h ^ 0xffu) * 1099511628211ull; /* between ids: ["ab"] is not ["a", "b"] */
    }
    return h != 0 ? h : 1;
}

/* Is the row of step @p index of @p run_id stored with dependencies hashed @p deps? */
static bool
rows_is_known(const struct lite_state *st, const char *run_id, size_t index, uint64_t deps)
{
    return st->rows_run != NULL && index < st->rows_cap && st->rows_deps[index] == deps &&
           strcmp(st->rows_run, run_id) == 0;
}

/* Remember that the row of step @p index of @p run_id is stored with dependencies @p deps.
 * Out of memory it remembers nothing: the next save is a whole upsert, as before. */
static void
rows_note(struct lite_state *st, const char *run_id, size_t index, uint64_t deps)
{
    if (st->rows_run == NULL || strcmp(st->rows_run, run_id) != 0) {
        char *copy = weft__strdup(run_id);
        if (copy == NULL) {
            return;
        }
        weft__free(st->rows_run);
        st->rows_run = copy;
        weft__lite_rows_forget(st);
    }
    if (index >= st->rows_cap) {
        size_t cap = st->rows_cap == 0 ? 64 : st->rows_cap;
        uint64_t *grown = NULL;
        while (cap <= index) {
            cap *= 2;
        }
        grown = weft__realloc(st->rows_deps, cap * sizeof(*grown));
        if (grown == NULL) {
            return;
        }
        memset(grown + st->rows_cap, 0, (cap - st->rows_cap) * sizeof(*grown));
        st->rows_deps = grown;
        st->rows_cap = cap;
    }
    st->rows_deps[index] = deps;
}

/* ------------------------------------------------------------------------------------------ */
/* The query helpers: a statement from prepare() or cached(), its values, its
 * rows             */

/* Column accessors over the row a stepped statement stands on (state_rows.h). */
static sqlite3_stmt *
row_stmt(const struct weft__state_row *row)
{
    return (sqlite3_stmt *)row->handle; /* sqlite3_column_*() take it non-const */
}

static const char *
row_text(const struct weft__state_row *row, int col)
{
    return (const char *)sqlite3_column_text(row_stmt(row), col);
}

static int64_t
row_i64(const struct weft__state_row *row, int col)
{
    return sqlite3_column_int64(row_stmt(row), col);
}

static double
row_f64(const struct weft__state_row *row, int col)
{
    return sqlite3_column_double(row_stmt(row), col);
}

static bool
row_flag(const struct weft__state_row *row, int col)
{
    return sqlite3_column_int64(row_stmt(row), col) != 0;
}

static bool
row_is_null(const struct weft__state_row *row, int col)
{
    return sqlite3_column_type(row_stmt(row), col) == SQLITE_NULL;
}

static const struct weft__state_row_ops lite_row_ops = {
    .text = row_text, .i64 = row_i64, .f64 = row_f64, .flag = row_flag, .is_null = row_is_null};

/* Bind the @p n values @p args to parameters 1..n of @p stmt. */
static void
bind_args(sqlite3_stmt *stmt, const struct weft__state_arg *args, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int i = (int)k + 1;

        switch (args[k].kind) {
        case WEFT__ARG_KEY:
            bind_key(stmt, i, args[k].s);
            break;
        case WEFT__ARG_TEXT:
            bind_text(stmt, i, args[k].s);
            break;
        case WEFT__ARG_RAW:
            sqlite3_bind_text(stmt, i, args[k].s, -1, SQLITE_TRANSIENT);
            break;
        case WEFT__ARG_I64:
        case WEFT__ARG_BOOL:
            sqlite3_bind_int64(stmt, i, (sqlite3_int64)args[k].i);
            break;
        case WEFT__ARG_F64:
            sqlite3_bind_double(stmt, i, args[k].d);
            break;
        }
    }
}

/* The query helper: @p stmt (from prepare() or cached(); NULL when that
 * failed, logged there) bound to @p args and stepped to its end, each row handed to @p fn (NULL:
 * rows not read) until it returns other than WEFT_OK; the statement is released. @return WEFT_OK,
 * WEFT_EIO, or what @p fn returned. */
static weft_err
lite_each(struct lite_state *st,
          sqlite3_stmt *stmt,
          const struct weft__state_arg *args,
          size_t n,
          state_row_fn fn,
          void *ctx)
{
    bool done = false;
    const struct weft__state_row row = {.ops = &lite_row_ops, .handle = stmt, .is_enough = &done};
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        st->last_rc = sqlite3_errcode(st->db);
        return WEFT_EIO;
    }
    bind_args(stmt, args, n);
    while (err == WEFT_OK && !done && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        err = fn != NULL ? fn(&row, ctx) : WEFT_OK;
    }
    if (err == WEFT_OK && !done && rc != SQLITE_DONE) {
        state_note_error(st, rc);
        st->last_rc = rc;
        err = WEFT_EIO;
    }
    release(st, stmt);
    return err;
}

/* The first row of a query to @p fn, as lite_each(). @return WEFT_OK, WEFT_ENOTFOUND (no
 * row), WEFT_EIO, or what @p fn returned. */
static weft_err
lite_one(struct lite_state *st,
         sqlite3_stmt *stmt,
         const struct weft__state_arg *args,
         size_t n,
         state_row_fn fn,
         void *ctx)
{
    struct weft__state_first one = {.fn = fn, .ctx = ctx};
    weft_err err = lite_each(st, stmt, args, n, weft__state_row_first, &one);

    return err == WEFT_OK && !one.has_row ? WEFT_ENOTFOUND : err;
}

/* A write: @p stmt bound to @p args and run by finish() (@p what names it in the log; a
 * failure marks the open transaction to roll back). @return WEFT_OK, WEFT_EIO. */
static weft_err
lite_exec(struct lite_state *st,
          const char *what,
          sqlite3_stmt *stmt,
          const struct weft__state_arg *args,
          size_t n)
{
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_args(stmt, args, n);
    return finish(st, stmt, what);
}

/* As lite_exec(), *changes (not NULL) set to the rows the write touched. */
static weft_err
lite_exec_count(struct lite_state *st,
                const char *what,
                sqlite3_stmt *stmt,
                const struct weft__state_arg *args,
                size_t n,
                size_t *changes)
{
    weft_err err = lite_exec(st, what, stmt, args, n);

    *changes = err == WEFT_OK ? (size_t)sqlite3_changes(st->db) : 0;
    return err;
}

static weft_err
lite_begin(struct rt_state *base)
{
    struct lite_state *st = lite(base);

    if (st->tx_depth++ > 0) {
        return WEFT_OK;
    }
    st->is_tx_failed = st->is_tx_refused = false;
    if (!exec_cached(st, "BEGIN IMMEDIATE")) {
        state_note_error(st, sqlite3_errcode(st->db));
        WEFT_LOG(WEFT_LOG_ERROR, "state: begin failed: %s", sqlite3_errmsg(st->db));
        st->tx_depth = 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static bool
lite_in_transaction(const struct rt_state *base)
{
    const struct lite_state *st = (const struct lite_state *)base;

    return st != NULL && st->tx_depth > 0;
}

static weft_err
lite_commit(struct rt_state *base)
{
    struct lite_state *st = lite(base);

    if (st->tx_depth == 0 || --st->tx_depth > 0) {
        return WEFT_OK;
    }
    if (!st->is_tx_failed && exec_cached(st, "COMMIT")) {
        return WEFT_OK;
    }
    if (!st->is_tx_failed) {
        state_note_error(st, sqlite3_errcode(st->db));
    }
    WEFT_LOG(st->is_tx_refused ? WEFT_LOG_DEBUG : WEFT_LOG_ERROR, "state: commit failed: %s",
             st->is_tx_failed ? "a write in it failed" : sqlite3_errmsg(st->db)); /* tx_end() */
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    weft__lite_rows_forget(st); /* what the rolled back upserts wrote is gone */
    return WEFT_EIO;
}

static weft_err
lite_run_begin(struct rt_state *base,
               const char *run_id,
               const char *workflow,
               const char *workflow_path,
               const char *session_id,
               const char *input,
               uint64_t started_ns)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "INSERT INTO runs (id, workflow, workflow_path, session_id,"
                                     " input, status, started_ns)"
                                     " VALUES (?, ?, ?, ?, ?, 'running', ?)"
                                     " ON CONFLICT (id) DO UPDATE SET status = 'running',"
                                     " ended_ns = NULL");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, run_id);
    bind_text(stmt, 2, workflow);
    bind_text(stmt, 3, workflow_path);
    bind_text(stmt, 4, session_id);
    bind_text(stmt, 5, input);
    sqlite3_bind_int64(stmt, 6, (sqlite3_int64)started_ns);
    return finish(st, stmt, "run insert");
}

static weft_err
lite_run_trace(struct rt_state *base,
               const char *run_id,
               const char *trace_id,
               const char *root_span_id)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET resumed_from_trace = CASE WHEN trace_id IS"
                                     " NOT NULL AND trace_id != ? THEN trace_id ELSE"
                                     " resumed_from_trace END, trace_id = ?, root_span_id = ?"
                                     " WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, trace_id);
    bind_text(stmt, 2, trace_id);
    bind_text(stmt, 3, root_span_id);
    bind_text(stmt, 4, run_id);
    return finish(st, stmt, "run trace");
}

static weft_err
lite_run_end(struct rt_state *base, const char *run_id, const struct weft__state_run_end *end)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt =
        prepare(st, "UPDATE runs SET status = ?, reason = ?, output = ?,"
                    " iterations = iterations + ?, input_tokens = input_tokens + ?,"
                    " output_tokens = output_tokens + ?, cost_usd = cost_usd + ?,"
                    " ended_ns = ?, reward = ?, corrections = ?, loops = ?,"
                    " trace_sampling = ? WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, end->status);
    bind_text(stmt, 2, end->reason);
    bind_text(stmt, 3, end->output);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)end->iterations);
    sqlite3_bind_int64(stmt, 5, end->input_tokens);
    sqlite3_bind_int64(stmt, 6, end->output_tokens);
    sqlite3_bind_double(stmt, 7, end->cost_usd);
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)end->ended_ns);
    sqlite3_bind_double(stmt, 9, end->reward);
    sqlite3_bind_int64(stmt, 10, (sqlite3_int64)end->corrections);
    bind_text(stmt, 11, end->loops);
    bind_text(stmt, 12, end->trace_sampling);
    bind_text(stmt, 13, run_id);
    return finish(st, stmt, "run update");
}

static char *
dump_or_null(const json_t *v)
{
    return v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* Upsert one step row; part of the caller's transaction when there is one. */
/* Bind the span id of @p ctx as 16 hex digits, or NULL when it is not valid. */
static void
bind_span_id(sqlite3_stmt *stmt, int i, const struct weft_span_context *ctx)
{
    char hex[2 * WEFT_SPAN_ID_SIZE + 1];

    if (!weft_span_context_is_valid(ctx)) {
        sqlite3_bind_null(stmt, i);
        return;
    }
    weft_hex_encode(ctx->span_id, WEFT_SPAN_ID_SIZE, hex);
    sqlite3_bind_text(stmt, i, hex, -1, SQLITE_TRANSIENT);
}

static weft_err
step_upsert(struct lite_state *st,
            const char *run_id,
            size_t index,
            const struct plan_step *step,
            const char *actor)
{
    sqlite3_stmt *stmt = NULL;
    char *deps_text = weft__state_deps_json(step);
    char *spec_text = dump_or_null(step->spec);
    char *error_text = dump_or_null(step->error);
    weft_err err = WEFT_OK;

    if (deps_text == NULL) {
        free(spec_text);
        free(error_text);
        return WEFT_ENOMEM;
    }
    stmt = cached(st, "INSERT INTO steps (run_id, idx, step_id, agent, task, depends_on, status,"
                      " attempts, result, feedback, requested_by, executor, spec, parent, reward,"
                      " error_type, error, started_ns, ended_ns, span_id, span_parent_id,"
                      " task_uuid, retries, is_dispatched)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                      " ?, ?)"
                      " ON CONFLICT (run_id, idx) DO UPDATE SET status = excluded.status,"
                      " attempts = excluded.attempts, result = excluded.result,"
                      " feedback = excluded.feedback, depends_on = excluded.depends_on,"
                      " reward = excluded.reward, error_type = excluded.error_type,"
                      " error = excluded.error, started_ns = excluded.started_ns,"
                      " ended_ns = excluded.ended_ns, span_id = excluded.span_id,"
                      " span_parent_id = excluded.span_parent_id,"
                      " task_uuid = COALESCE(steps.task_uuid, excluded.task_uuid),"
                      " retries = excluded.retries, is_dispatched = excluded.is_dispatched");
    if (stmt != NULL) {
        bind_text(stmt, 1, run_id);
        sqlite3_bind_int64(stmt, 2, (sqlite3_int64)index);
        bind_text(stmt, 3, step->id);
        bind_text(stmt, 4, actor);
        bind_text(stmt, 5, step->task);
        bind_text(stmt, 6, deps_text);
        bind_text(stmt, 7, weft__step_status_name(step->status));
        sqlite3_bind_int64(stmt, 8, step->attempts);
        bind_text(stmt, 9, step->result);
        bind_text(stmt, 10, step->feedback);
        bind_text(stmt, 11, step->requested_by);
        bind_text(stmt, 12, weft__step_executor_name(step->executor));
        bind_text(stmt, 13, spec_text);
        bind_text(stmt, 14, step->parent);
        if (step->has_reward) {
            sqlite3_bind_double(stmt, 15, step->reward);
        } else {
            sqlite3_bind_null(stmt, 15);
        }
        bind_text(stmt, 16, step->error_type);
        bind_text(stmt, 17, error_text);
        sqlite3_bind_int64(stmt, 18, (sqlite3_int64)step->started_ns);
        sqlite3_bind_int64(stmt, 19, (sqlite3_int64)step->ended_ns);
        /* The step's agent span and its parent: recovery closes a span a kill left open. */
        bind_span_id(stmt, 20, &step->span);
        bind_span_id(stmt, 21, &step->parent_ctx);
        /* The task id stays the one first stored (as PostgreSQL's tasks.task_id does): a resumed
         * plan that made new ids keeps naming the same task. */
        bind_key(stmt, 22, step->task_uuid[0] != '\0' ? step->task_uuid : NULL);
        sqlite3_bind_int64(stmt, 23, step->retries);
        sqlite3_bind_int(stmt, 24, step->is_dispatched ? 1 : 0);
        err = finish(st, stmt, "step upsert");
    } else {
        err = WEFT_EIO;
    }
    free(deps_text);
    free(spec_text);
    free(error_text);
    return err;
}

/* Update the columns of a stored step row that change as the step runs: what the upsert's DO
 * UPDATE writes, but its dependencies (unchanged: rows_is_known()). Part of the caller's
 * transaction when there is one. *is_updated is false when the row is not there (deleted
 * behind the handle's back): the caller upserts it whole. */
static weft_err
step_update(struct lite_state *st,
            const char *run_id,
            size_t index,
            const struct plan_step *step,
            bool *is_updated)
{
    sqlite3_stmt *stmt = NULL;
    char *error_text = dump_or_null(step->error);
    weft_err err = WEFT_OK;

    *is_updated = false;
    if (step->error != NULL && error_text == NULL) {
        return WEFT_ENOMEM;
    }
    stmt = cached(st, "UPDATE steps SET status = ?, attempts = ?, result = ?, feedback = ?,"
                      " reward = ?, error_type = ?, error = ?, started_ns = ?, ended_ns = ?,"
                      " span_id = ?, span_parent_id = ?, task_uuid = COALESCE(task_uuid, ?),"
                      " retries = ?, is_dispatched = ? WHERE run_id = ? AND idx = ?");
    if (stmt == NULL) {
        free(error_text);
        return WEFT_EIO;
    }
    bind_text(stmt, 1, weft__step_status_name(step->status));
    sqlite3_bind_int64(stmt, 2, step->attempts);
    bind_text(stmt, 3, step->result);
    bind_text(stmt, 4, step->feedback);
    if (step->has_reward) {
        sqlite3_bind_double(stmt, 5, step->reward);
    } else {
        sqlite3_bind_null(stmt, 5);
    }
    bind_text(stmt, 6, step->error_type);
    bind_text(stmt, 7, error_text);
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)step->started_ns);
    sqlite3_bind_int64(stmt, 9, (sqlite3_int64)step->ended_ns);
    bind_span_id(stmt, 10, &step->span);
    bind_span_id(stmt, 11, &step->parent_ctx);
    bind_key(stmt, 12, step->task_uuid[0] != '\0' ? step->task_uuid : NULL);
    sqlite3_bind_int64(stmt, 13, step->retries);
    sqlite3_bind_int(stmt, 14, step->is_dispatched ? 1 : 0);
    bind_key(stmt, 15, run_id);
    sqlite3_bind_int64(stmt, 16, (sqlite3_int64)index);
    err = finish(st, stmt, "step update");
    *is_updated = err == WEFT_OK && sqlite3_changes(st->db) > 0;
    free(error_text);
    return err;
}

static weft_err
lite_step_save(struct rt_state *base,
               const char *run_id,
               size_t index,
               const struct plan_step *step,
               const char *actor)
{
    struct lite_state *st = lite(base);
    uint64_t deps = deps_hash(step);
    weft_err err = WEFT_OK;

    if (rows_is_known(st, run_id, index, deps)) {
        bool is_updated = false;
        err = step_update(st, run_id, index, step, &is_updated);
        if (err != WEFT_OK || is_updated) {
            return err;
        }
    }
    err = step_upsert(st, run_id, index, step, actor);
    if (err == WEFT_OK) {
        rows_note(st, run_id, index, deps);
    }
    return err;
}

static weft_err
lite_surgery(struct rt_state *base,
             const char *run_id,
             const struct plan *plan,
             size_t failed,
             size_t first_new,
             unsigned seq,
             const char *error_type,
             const json_t *depends_before,
             const json_t *depends_after,
             const char *const *actors)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    json_t *inserted = json_array();
    char *inserted_text = NULL;
    char *before_text = dump_or_null(depends_before);
    char *after_text = dump_or_null(depends_after);
    weft_err err = WEFT_OK;

    for (size_t i = first_new; inserted != NULL && i < plan->count; i++) {
        json_array_append_new(inserted, json_string(plan->steps[i].id));
    }
    inserted_text = inserted != NULL ? json_dumps(inserted, JSON_COMPACT) : NULL;
    json_decref(inserted);
    if (inserted_text == NULL || before_text == NULL || after_text == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    weft__lite_rows_forget(st); /* the surgery rewrites dependencies and adds rows */
    /* One transaction: the store holds the plan before the surgery or after it, never a mix.
     * weft__state_begin() nests, so a surgery inside the caller's transaction joins it (a plain
     * BEGIN there failed, and its ROLLBACK undid the caller's writes behind its back). */
    if (lite_begin(&st->base) != WEFT_OK) {
        err = WEFT_EIO;
        goto out;
    }
    for (size_t i = first_new; err == WEFT_OK && i < plan->count; i++) {
        err = step_upsert(st, run_id, i, &plan->steps[i], actors[i]);
    }
    if (err == WEFT_OK) {
        err = step_upsert(st, run_id, failed, &plan->steps[failed], actors[failed]);
    }
    if (err == WEFT_OK) {
        stmt = prepare(st, "INSERT INTO corrections (run_id, seq, failed_step, error_type,"
                           " inserted, depends_before, depends_after, created_ns)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
        if (stmt == NULL) {
            err = WEFT_EIO;
        } else {
            bind_text(stmt, 1, run_id);
            sqlite3_bind_int64(stmt, 2, seq);
            bind_text(stmt, 3, plan->steps[failed].id);
            bind_text(stmt, 4, error_type);
            bind_text(stmt, 5, inserted_text);
            bind_text(stmt, 6, before_text);
            bind_text(stmt, 7, after_text);
            sqlite3_bind_int64(stmt, 8, (sqlite3_int64)weft__now_ns());
            err = finish(st, stmt, "correction insert");
        }
    }
    if (err != WEFT_OK) {
        st->is_tx_failed = true; /* the outermost commit rolls back */
    }
    if (lite_commit(&st->base) != WEFT_OK && err == WEFT_OK) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: DAG surgery of run %s rolled back", run_id);
    }
out:
    free(inserted_text);
    free(before_text);
    free(after_text);
    return err;
}

static weft_err
lite_messages_load(struct rt_state *base, const char *session_id, size_t limit, json_t **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT role, content, route FROM (SELECT seq, role, content,"
                                     " route FROM messages WHERE session_id = ?"
                                     " ORDER BY seq DESC LIMIT ?) ORDER BY seq");
    json_t *arr = json_array();
    weft_err err = WEFT_OK;

    *out = NULL;
    if (stmt == NULL || arr == NULL) {
        release(st, stmt);
        json_decref(arr);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    err = lite_each(st, stmt, SQL_ARGS(SQL_TEXT(session_id), SQL_I64(limit)),
                    weft__state_row_message, arr);
    if (err != WEFT_OK) {
        json_decref(arr);
        return err;
    }
    *out = arr;
    return WEFT_OK;
}

static weft_err
lite_message_add(struct rt_state *base,
                 const char *session_id,
                 const char *run_id,
                 const char *role,
                 const char *content,
                 const char *route)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = cached(st, "INSERT INTO messages (session_id, seq, run_id, role,"
                                    " content, route, created_ns) VALUES (?, (SELECT"
                                    " COALESCE(MAX(seq), 0) + 1 FROM messages WHERE"
                                    " session_id = ?), ?, ?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, session_id);
    bind_text(stmt, 2, session_id);
    bind_text(stmt, 3, run_id);
    bind_text(stmt, 4, role);
    bind_text(stmt, 5, content != NULL ? content : "");
    bind_text(stmt, 6, route);
    sqlite3_bind_int64(stmt, 7, (sqlite3_int64)weft__now_ns());
    return finish(st, stmt, "message insert");
}

/* The cursors a database before version 4 kept as one JSON object per script. */
static weft_err
legacy_cursors_row(const struct weft__state_row *row, void *ctx)
{
    *(json_t **)ctx = json_loads(weft__row_str(row, 0), 0, NULL);
    return WEFT_OK;
}

static weft_err
lite_cursors_load(struct rt_state *base, const char *session_id, const char *script, json_t **out)
{
    struct lite_state *st = lite(base);
    json_t *cursors = NULL;
    weft_err err = WEFT_OK;

    *out = NULL;
    /* Databases before version 4 kept one JSON object per script; its queues are the base
     * that the per-queue rows override. */
    err = lite_one(
        st, prepare(st, "SELECT cursors FROM script_cursors WHERE session_id = ? AND script = ?"),
        SQL_ARGS(SQL_KEY(session_id), SQL_KEY(script)), legacy_cursors_row, &cursors);
    if (err == WEFT_OK || err == WEFT_ENOTFOUND) {
        err = lite_each(
            st,
            prepare(st, "SELECT queue, used FROM script_cursor_keys WHERE session_id = ?"
                        " AND script = ?"),
            SQL_ARGS(SQL_KEY(session_id), SQL_KEY(script)), weft__state_row_cursor, &cursors);
    }
    if (err != WEFT_OK) {
        json_decref(cursors);
        return err;
    }
    *out = cursors;
    return WEFT_OK;
}

static weft_err
lite_cursors_save(struct rt_state *base,
                  const char *session_id,
                  const char *script,
                  const json_t *cursors)
{
    struct lite_state *st = lite(base);
    const char *key = NULL;
    json_t *v = NULL;
    bool is_multi = json_object_size(cursors) > 1;
    weft_err err = WEFT_OK;

    /* Several queues at once (parallel flow steps) land in one transaction. */
    if (is_multi && lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    json_object_foreach((json_t *)cursors, key, v)
    {
        sqlite3_stmt *stmt = cached(st, "INSERT INTO script_cursor_keys (session_id, script,"
                                        " queue, used) VALUES (?, ?, ?, ?) ON CONFLICT"
                                        " (session_id, script, queue) DO UPDATE SET"
                                        " used = excluded.used");
        if (stmt == NULL) {
            err = WEFT_EIO;
            break;
        }
        bind_key(stmt, 1, session_id);
        bind_key(stmt, 2, script);
        bind_key(stmt, 3, key);
        sqlite3_bind_int64(stmt, 4, (sqlite3_int64)json_integer_value(v));
        err = finish(st, stmt, "cursor upsert");
        if (err != WEFT_OK) {
            break;
        }
    }
    if (is_multi && lite_commit(&st->base) != WEFT_OK) {
        err = WEFT_EIO;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading runs back                                                                           */

#define RUN_COLUMNS                                                                           \
    "id, workflow, workflow_path, session_id, input, status, reason, trace_id, root_span_id," \
    " resumed_from_trace, loops, started_ns, ended_ns, iterations, corrections, reward,"      \
    " input_tokens, output_tokens, cost_usd,"                                                 \
    " (SELECT count(*) FROM steps WHERE steps.run_id = runs.id), " STATE_OWNER_COLUMNS        \
    ", origin_kind, origin_run_id, origin_step, pinned, trace_sampling"

/* The caller's function of runs_each(), given each run read. */
struct runs_call {
    state_run_fn fn;
    void *user_data;
};

static weft_err
run_row(const struct weft__state_row *row, void *ctx)
{
    const struct runs_call *c = ctx;
    struct weft_run_info info;
    bool is_oom = false;
    weft_err err = WEFT_OK;

    memset(&info, 0, sizeof(info));
    weft__state_row_info(row, &info, &is_oom);
    err = is_oom ? WEFT_ENOMEM : c->fn(&info, c->user_data);
    weft__state_info_cleanup(&info);
    return err;
}

static weft_err
lite_runs_each(struct rt_state *base, size_t limit, state_run_fn fn, void *user_data)
{
    struct lite_state *st = lite(base);
    struct runs_call c = {.fn = fn, .user_data = user_data};

    return lite_each(
        st, prepare(st, "SELECT " RUN_COLUMNS " FROM runs ORDER BY started_ns DESC LIMIT ?"),
        SQL_ARGS(SQL_U64(limit)), run_row, &c);
}

static weft_err
lite_run_resolve(
    struct rt_state *base, const char *ref, char *out, size_t out_len, char *err, size_t err_len)
{
    struct lite_state *st = lite(base);
    struct weft__state_resolve r = {.ref = ref, .out = out, .out_len = out_len};
    char pattern[96];
    weft_err result = WEFT_OK;

    if (strcmp(ref, "last") == 0) {
        result = lite_each(st, prepare(st, "SELECT id FROM runs ORDER BY started_ns DESC LIMIT 1"),
                           NULL, 0, weft__state_row_resolve, &r);
    } else if (!weft__state_ref_is_valid(ref, err, err_len)) {
        return WEFT_EINVAL;
    } else {
        snprintf(pattern, sizeof(pattern), "%s%%", ref);
        /* An exact id comes first, however many newer runs it is a prefix of. */
        result = lite_each(st,
                           prepare(st, "SELECT id FROM runs WHERE id LIKE ?"
                                       " ORDER BY id = ? DESC, started_ns DESC LIMIT 2"),
                           SQL_ARGS(SQL_KEY(pattern), SQL_KEY(ref)), weft__state_row_resolve, &r);
    }
    if (result != WEFT_OK) {
        /* A damaged or locked database is an error, not "no such run". */
        snprintf(err, err_len, "state database: %s", sqlite3_errstr(st->last_rc));
        out[0] = '\0';
        return WEFT_EIO;
    }
    return weft__state_resolve_end(&r, err, err_len);
}

static weft_err
lite_run_info(struct rt_state *base, const char *run_id, struct weft_run_info *info)
{
    struct lite_state *st = lite(base);
    struct weft__state_info_read r = {.info = info};
    weft_err err = WEFT_OK;

    memset(info, 0, sizeof(*info));
    err = lite_each(st, prepare(st, "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?"),
                    SQL_ARGS(SQL_KEY(run_id)), weft__state_row_info_first, &r);
    if (r.is_oom) {
        weft__state_info_cleanup(info);
        return WEFT_ENOMEM;
    }
    if (err != WEFT_OK) {
        return err;
    }
    return r.has_row ? WEFT_OK : WEFT_ENOTFOUND;
}

static weft_err
lite_steps_each(struct rt_state *base, const char *run_id, state_step_fn fn, void *user_data)
{
    struct lite_state *st = lite(base);
    struct weft__state_each c = {.step_fn = fn, .user_data = user_data};

    return lite_each(st,
                     prepare(st, "SELECT step_id, agent, task, depends_on, status, attempts,"
                                 " result, feedback, requested_by, executor, spec, parent,"
                                 " reward, error_type, error, started_ns, ended_ns, task_uuid,"
                                 " retries, is_dispatched FROM steps"
                                 " WHERE run_id = ?"
                                 " ORDER BY idx"),
                     SQL_ARGS(SQL_KEY(run_id)), weft__state_row_step_each, &c);
}

static weft_err
lite_corrections_each(struct rt_state *base,
                      const char *run_id,
                      state_correction_fn fn,
                      void *user_data)
{
    struct lite_state *st = lite(base);
    struct weft__state_each c = {.correction_fn = fn, .user_data = user_data};

    return lite_each(st,
                     prepare(st, "SELECT seq, failed_step, error_type, inserted,"
                                 " depends_before, depends_after, created_ns FROM corrections"
                                 " WHERE run_id = ? ORDER BY seq"),
                     SQL_ARGS(SQL_KEY(run_id)), weft__state_row_correction_each, &c);
}

/* ------------------------------------------------------------------------------------------ */
/* Payloads (state_payloads.h): long replay texts stored once per content hash                 */

static weft_err tx_end(struct lite_state *st, weft_err err);

static bool
payload_has(void *user, const char *hash)
{
    struct lite_state *st = user;
    sqlite3_stmt *stmt = cached(st, "SELECT 1 FROM payloads WHERE hash = ?");
    bool has = false;

    if (stmt == NULL) {
        return false; /* put() then says what is wrong */
    }
    bind_key(stmt, 1, hash);
    has = sqlite3_step(stmt) == SQLITE_ROW;
    release(st, stmt);
    return has;
}

static weft_err
payload_put(void *user, const struct weft__payload_record *rec)
{
    struct lite_state *st = user;
    sqlite3_stmt *stmt = cached(st, "INSERT OR IGNORE INTO payloads (hash, kind, size, data)"
                                    " VALUES (?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, rec->hash);
    sqlite3_bind_int(stmt, 2, (int)rec->kind);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)rec->raw_len);
    sqlite3_bind_blob64(stmt, 4, rec->data, rec->len, SQLITE_STATIC);
    return finish(st, stmt, "payload insert");
}

/* One statement per hash: SQLite has no round trips to save, and the primary key finds each. */
static weft_err
payload_get(void *user,
            const char *const *hashes,
            size_t count,
            weft__payload_each_fn each,
            void *each_user)
{
    struct lite_state *st = user;
    sqlite3_stmt *stmt = cached(st, "SELECT kind, size, data FROM payloads WHERE hash = ?");
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    for (size_t i = 0; err == WEFT_OK && i < count; i++) {
        struct weft__payload_record rec;
        int rc = SQLITE_DONE;

        if (strlen(hashes[i]) != WEFT__PAYLOAD_HEX_LEN) {
            continue;
        }
        sqlite3_reset(stmt);
        bind_key(stmt, 1, hashes[i]);
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            memcpy(rec.hash, hashes[i], sizeof(rec.hash));
            rec.kind = (weft__payload_kind)sqlite3_column_int(stmt, 0);
            rec.raw_len = (size_t)sqlite3_column_int64(stmt, 1);
            rec.data = sqlite3_column_blob(stmt, 2);
            rec.len = (size_t)sqlite3_column_bytes(stmt, 2);
            err = each(&rec, each_user);
        } else if (rc != SQLITE_DONE) {
            state_note_error(st, rc);
            WEFT_LOG(WEFT_LOG_ERROR, "state: payload read failed: %s", sqlite3_errstr(rc));
            err = WEFT_EIO;
        }
    }
    release(st, stmt);
    return err;
}

static const struct weft__payload_sink *
payload_sink(struct lite_state *st, struct weft__payload_sink *sink)
{
    sink->has = payload_has;
    sink->put = payload_put;
    sink->user = st;
    return sink;
}

static weft_err
lite_exchange_add(struct rt_state *base,
                  const char *run_id,
                  const char *who,
                  const char *purpose,
                  const json_t *entry)
{
    struct lite_state *st = lite(base);
    char *raw = weft__json_compact(entry); /* json_dumps()'s text, at a fraction of its cost */
    char *text = raw != NULL ? weft__redact_text(raw) : NULL;
    struct weft__payload_sink sink;
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    sqlite3_stmt *stmt = NULL;
    bool is_ref = false;
    bool is_tx = false;
    weft_err err = WEFT_OK;

    weft__free(raw);
    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    /* Secrets are redacted before the text is hashed: the reference stands for what is
     * stored. The records and the row commit together. */
    is_tx = strlen(text) >= WEFT__PAYLOAD_MIN && weft__payload_enabled();
    if (is_tx && lite_begin(base) != WEFT_OK) {
        weft__free(text);
        return WEFT_EIO;
    }
    if (is_tx) {
        err = weft__state_payload_put(text, payload_sink(st, &sink), ref, &is_ref);
    }
    stmt = err == WEFT_OK ? cached(st, "INSERT INTO llm_exchanges (run_id, seq, who, purpose,"
                                       " entry, created_ns, entry_ref) VALUES (?, (SELECT"
                                       " COALESCE(MAX(seq), 0) + 1 FROM llm_exchanges"
                                       " WHERE run_id = ?), ?, ?, ?, ?, ?)")
                          : NULL;
    if (err == WEFT_OK && stmt == NULL) {
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        bind_key(stmt, 1, run_id); /* a key: bind_text() would store "" when out of memory */
        bind_key(stmt, 2, run_id);
        bind_text(stmt, 3, who);
        bind_text(stmt, 4, purpose);
        bind_text(stmt, 5, is_ref ? "" : text);
        sqlite3_bind_int64(stmt, 6, (sqlite3_int64)weft__now_ns());
        if (is_ref) {
            bind_key(stmt, 7, ref);
        }
        err = finish(st, stmt, "exchange insert");
    }
    if (is_tx) {
        err = tx_end(st, err);
    }
    weft__free(text);
    return err;
}

static weft_err
lite_exchanges_script(struct rt_state *base, const char *run_id, json_t **out)
{
    struct lite_state *st = lite(base);
    const struct weft__payload_source src = {.get = payload_get, .user = st};
    sqlite3_stmt *stmt = prepare(st, "SELECT who, purpose, entry, entry_ref FROM llm_exchanges"
                                     " WHERE run_id = ? ORDER BY seq");
    struct weft__state_payload_read r;
    weft_err err = WEFT_OK;

    *out = NULL;
    weft__state_payload_read_init(&r, &src, NULL);
    r.responses = json_object();
    if (stmt == NULL || r.responses == NULL) {
        release(st, stmt);
        json_decref(r.responses);
        weft__state_payload_read_cleanup(&r);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    err = lite_each(st, stmt, SQL_ARGS(SQL_TEXT(run_id)), weft__state_row_script, &r);
    weft__state_payload_read_cleanup(&r);
    if (err != WEFT_OK || r.n == 0) {
        json_decref(r.responses);
        return err != WEFT_OK ? err : WEFT_ENOTFOUND;
    }
    *out = json_pack("{s:i, s:o}", "version", 1, "responses", r.responses);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
lite_exchange_counts(struct rt_state *base, const char *run_id, uint64_t before_ns, json_t **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT who, purpose, COUNT(*) FROM llm_exchanges"
                                     " WHERE run_id = ? AND created_ns < ? GROUP BY who, purpose");
    json_t *counts = json_object();
    weft_err err = WEFT_OK;

    *out = NULL;
    if (stmt == NULL || counts == NULL) {
        release(st, stmt);
        json_decref(counts);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    err = lite_each(st, stmt, SQL_ARGS(SQL_TEXT(run_id), SQL_U64(before_ns)),
                    weft__state_row_exchange_count, counts);
    if (err != WEFT_OK) {
        json_decref(counts);
        return err;
    }
    *out = counts;
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tool results and run origins (docs/replay.md)                                               */

static weft_err
lite_tool_result_add(struct rt_state *base,
                     const char *run_id,
                     const struct weft__state_tool_result *r)
{
    struct lite_state *st = lite(base);
    struct weft__payload_sink sink;
    char *request = r->request != NULL ? weft__redact_text(r->request) : NULL;
    char *outcome = r->outcome != NULL ? weft__redact_text(r->outcome) : NULL;
    char request_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    char outcome_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    sqlite3_stmt *stmt = NULL;
    bool has_request_ref = false;
    bool has_outcome_ref = false;
    bool is_tx = false;
    weft_err err = WEFT_OK;

    if ((r->request != NULL && request == NULL) || (r->outcome != NULL && outcome == NULL)) {
        err = WEFT_ENOMEM;
        goto out;
    }
    /* Redacted first, then hashed; records and row in one transaction (lite_exchange_add). */
    is_tx = weft__payload_enabled() && ((request != NULL && strlen(request) >= WEFT__PAYLOAD_MIN) ||
                                        (outcome != NULL && strlen(outcome) >= WEFT__PAYLOAD_MIN));
    if (is_tx && lite_begin(base) != WEFT_OK) {
        is_tx = false;
        err = WEFT_EIO;
        goto out;
    }
    if (is_tx) {
        err = weft__state_payload_put(request, payload_sink(st, &sink), request_ref,
                                      &has_request_ref);
    }
    if (is_tx && err == WEFT_OK) {
        err = weft__state_payload_put(outcome, &sink, outcome_ref, &has_outcome_ref);
    }
    stmt = err == WEFT_OK ? cached(st, "INSERT OR REPLACE INTO tool_results (run_id, step_id,"
                                       " attempt, seq, tool, kind, request, outcome, created_ns,"
                                       " request_ref, outcome_ref)"
                                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                          : NULL;
    if (err == WEFT_OK && stmt == NULL) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        goto out;
    }
    bind_key(stmt, 1, run_id);
    bind_key(stmt, 2, r->step_id);
    sqlite3_bind_int64(stmt, 3, r->attempt);
    sqlite3_bind_int64(stmt, 4, r->seq);
    bind_key(stmt, 5, r->tool);
    bind_key(stmt, 6, r->kind);
    bind_key(stmt, 7, has_request_ref ? "" : request); /* redacted above */
    bind_key(stmt, 8, has_outcome_ref ? "" : outcome);
    sqlite3_bind_int64(stmt, 9, (sqlite3_int64)weft__now_ns());
    if (has_request_ref) {
        bind_key(stmt, 10, request_ref);
    }
    if (has_outcome_ref) {
        bind_key(stmt, 11, outcome_ref);
    }
    err = finish(st, stmt, "tool result insert");
out:
    if (is_tx) {
        err = tx_end(st, err);
    }
    weft__free(request);
    weft__free(outcome);
    return err;
}

static weft_err
lite_tool_results_each(struct rt_state *base,
                       const char *run_id,
                       state_tool_result_fn fn,
                       void *user_data)
{
    struct lite_state *st = lite(base);
    const struct weft__payload_source src = {.get = payload_get, .user = st};
    struct weft__state_payload_read r;
    weft_err err = WEFT_OK;

    weft__state_payload_read_init(&r, &src, NULL);
    r.tool_fn = fn;
    r.user_data = user_data;
    err = lite_each(st,
                    prepare(st, "SELECT step_id, attempt, seq, tool, kind, request, outcome,"
                                " request_ref, outcome_ref FROM tool_results WHERE run_id = ?"
                                " ORDER BY created_ns, rowid"),
                    SQL_ARGS(SQL_KEY(run_id)), weft__state_row_tool_result, &r);
    weft__state_payload_read_cleanup(&r);
    return err;
}

static weft_err
lite_run_origin(struct rt_state *base,
                const char *run_id,
                const char *kind,
                const char *origin_run_id,
                const char *origin_step)
{
    struct lite_state *st = lite(base);

    return lite_exec(
        st, "run origin update",
        prepare(st, "UPDATE runs SET origin_kind = ?, origin_run_id = ?,"
                    " origin_step = ? WHERE id = ?"),
        SQL_ARGS(SQL_KEY(kind), SQL_KEY(origin_run_id), SQL_KEY(origin_step), SQL_KEY(run_id)));
}

/* ------------------------------------------------------------------------------------------ */
/* Durability: damage, one owner per run, heartbeats, interrupted runs (docs/durability.md)    */

static void
state_note_error(struct lite_state *st, int rc)
{
    if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) {
        st->is_damaged = true;
    }
}

static weft_err
lite_check(struct rt_state *base, char *err, size_t err_len)
{
    struct lite_state *st = lite(base);
    const char *path = NULL;

    if (!st->is_damaged) {
        return WEFT_OK;
    }
    path = sqlite3_db_filename(st->db, "main");
    snprintf(err, err_len,
             "state database %s is damaged (database disk image is malformed): the run's "
             "state cannot be saved; move the file away or restore it from a backup",
             path != NULL && path[0] != '\0' ? path : "(in memory)");
    return WEFT_EIO;
}

static char *
state_col_text(sqlite3_stmt *stmt, int i)
{
    return (char *)sqlite3_column_text(stmt, i);
}

/* End a transaction of weft__state_begin(): committed when @p err is WEFT_OK or a refusal that
 * wrote nothing (WEFT_ESTATE, WEFT_ENOTFOUND), else rolled back. @return @p err, or the
 * commit's failure. */
static weft_err
tx_end(struct lite_state *st, weft_err err)
{
    weft_err commit_err = WEFT_OK;

    if (err != WEFT_OK && err != WEFT_ESTATE && err != WEFT_ENOTFOUND) {
        st->is_tx_failed = st->is_tx_refused = true; /* the caller says why: no error line */
    }
    commit_err = lite_commit(&st->base);
    return err != WEFT_OK ? err : commit_err;
}

static weft_err
lite_lease_acquire(struct rt_state *base, const char *run_id, struct state_owner *holder)
{
    struct lite_state *st = lite(base);
    char host[256];
    char token[33];
    uint64_t now = weft__now_ns();
    struct weft__state_lease_read lease = {
        .own_token = st->owner_token, .now = now, .holder = holder};
    weft_err err = WEFT_OK;

    memset(holder, 0, sizeof(*holder));
    weft__state_hostname(host, sizeof(host));
    /* IMMEDIATE (weft__state_begin): two processes cannot both read "no owner" and both take the
     * run. */
    if (lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    err = lite_one(st,
                   prepare(st, "SELECT owner_pid, owner_host, owner_token, owner_since_ns,"
                               " heartbeat_ns FROM runs WHERE id = ?"),
                   SQL_ARGS(SQL_KEY(run_id)), weft__state_row_lease, &lease);
    if (err != WEFT_OK) {
        return tx_end(st, err);
    }
    weft__state_new_token(token);
    err = tx_end(st, lite_exec(st, "lease",
                               prepare(st, "UPDATE runs SET owner_pid = ?, owner_host = ?,"
                                           " owner_token = ?, owner_since_ns = ?,"
                                           " heartbeat_ns = ? WHERE id = ?"),
                               SQL_ARGS(SQL_I64(getpid()), SQL_KEY(host), SQL_KEY(token),
                                        SQL_I64(now), SQL_I64(now), SQL_KEY(run_id))));
    if (err != WEFT_OK) {
        return err;
    }
    memcpy(st->owner_token, token, sizeof(st->owner_token));
    st->last_heartbeat_mono = weft__monotonic_ns();
    return WEFT_OK;
}

static weft_err
lite_lease_release(struct rt_state *base, const char *run_id)
{
    struct lite_state *st = lite(base);
    weft_err err = WEFT_OK;

    if (st->owner_token[0] == '\0') {
        return WEFT_OK;
    }
    err = lite_exec(st, "lease release",
                    prepare(st, "UPDATE runs SET owner_pid = NULL, owner_host = NULL,"
                                " owner_token = NULL, owner_since_ns = NULL, heartbeat_ns = ?"
                                " WHERE id = ? AND owner_token = ?"),
                    SQL_ARGS(SQL_I64(weft__now_ns()), SQL_KEY(run_id), SQL_KEY(st->owner_token)));
    st->owner_token[0] = '\0';
    return err;
}

static weft_err
lite_heartbeat(struct rt_state *base, const char *run_id)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    uint64_t mono = weft__monotonic_ns();

    if (st->owner_token[0] == '\0' ||
        mono - st->last_heartbeat_mono < STATE_HEARTBEAT_MIN_INTERVAL_NS) {
        return WEFT_OK;
    }
    st->last_heartbeat_mono = mono;
    /* At each checkpoint (throttled): a cached statement, as for the step it follows. */
    stmt = cached(st, "UPDATE runs SET heartbeat_ns = ? WHERE id = ? AND owner_token = ?");
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)weft__now_ns());
    bind_key(stmt, 2, run_id);
    bind_key(stmt, 3, st->owner_token);
    return finish(st, stmt, "heartbeat");
}

static weft_err
lite_run_root(struct rt_state *base,
              const char *run_id,
              const char *name,
              const char *parent_span_id,
              uint64_t started_ns)
{
    struct lite_state *st = lite(base);

    return lite_exec(
        st, "run root",
        prepare(st, "UPDATE runs SET root_span_name = ?, root_parent_span_id = ?,"
                    " root_started_ns = ? WHERE id = ?"),
        SQL_ARGS(SQL_TEXT(name), SQL_KEY(parent_span_id), SQL_I64(started_ns), SQL_KEY(run_id)));
}

static weft_err
lite_run_hash_set(struct rt_state *base, const char *run_id, const char *hash)
{
    struct lite_state *st = lite(base);

    return lite_exec(st, "workflow hash",
                     prepare(st, "UPDATE runs SET workflow_hash = ? WHERE id = ?"),
                     SQL_ARGS(SQL_KEY(hash), SQL_KEY(run_id)));
}

static weft_err
lite_run_hash_get(struct rt_state *base, const char *run_id, char *out, size_t out_len)
{
    struct lite_state *st = lite(base);
    struct weft__state_text_out t = {.out = out, .len = out_len};
    weft_err err = WEFT_OK;

    out[0] = '\0';
    err = lite_one(st, prepare(st, "SELECT workflow_hash FROM runs WHERE id = ?"),
                   SQL_ARGS(SQL_KEY(run_id)), weft__state_row_text_into, &t);
    return err == WEFT_OK && t.is_null ? WEFT_ENOTFOUND : err;
}

static weft_err
lite_run_snapshot_set(struct rt_state *base, const char *run_id, const char *snapshot)
{
    struct lite_state *st = lite(base);
    struct weft__payload_sink sink;
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    sqlite3_stmt *stmt = NULL;
    bool is_ref = false;
    bool is_tx = strlen(snapshot) >= WEFT__PAYLOAD_MIN && weft__payload_enabled();
    weft_err err = WEFT_OK;

    /* A long snapshot is a payload: the records and the row commit together. */
    if (is_tx && lite_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    if (is_tx) {
        err = weft__state_payload_put(snapshot, payload_sink(st, &sink), ref, &is_ref);
    }
    stmt = err == WEFT_OK ? prepare(st, "UPDATE runs SET workflow_snapshot = ?,"
                                        " workflow_snapshot_ref = ? WHERE id = ?")
                          : NULL;
    if (err == WEFT_OK && stmt == NULL) {
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        /* Bound as is: the files' bytes are the point (bind_text would rewrite them). */
        if (!is_ref) {
            sqlite3_bind_text(stmt, 1, snapshot, -1, SQLITE_TRANSIENT);
        }
        if (is_ref) {
            bind_key(stmt, 2, ref);
        }
        bind_key(stmt, 3, run_id);
        err = finish(st, stmt, "workflow snapshot");
    }
    if (is_tx) {
        err = tx_end(st, err);
    }
    return err;
}

static weft_err
lite_run_snapshot_get(struct rt_state *base, const char *run_id, char **out)
{
    struct lite_state *st = lite(base);
    const struct weft__payload_source src = {.get = payload_get, .user = st};
    struct weft__state_payload_read r;
    weft_err err = WEFT_OK;

    weft__state_payload_read_init(&r, &src, NULL);
    r.out = out;
    err = lite_one(st,
                   prepare(st, "SELECT workflow_snapshot, workflow_snapshot_ref FROM runs"
                               " WHERE id = ?"),
                   SQL_ARGS(SQL_KEY(run_id)), weft__state_row_snapshot, &r);
    weft__state_payload_read_cleanup(&r);
    return err == WEFT_OK || err == WEFT_ENOTFOUND ? r.err : err;
}

/* The steps of @p d's run that were in progress, with the spans the kill left open. */
static weft_err
open_steps(struct lite_state *st, struct weft__state_dead *d)
{
    return lite_each(st,
                     prepare(st, "SELECT span_id, span_parent_id, agent, started_ns FROM steps"
                                 " WHERE run_id = ? AND status = 'in_progress'"
                                 " AND span_id IS NOT NULL ORDER BY idx"),
                     SQL_ARGS(SQL_KEY(d->text[0])), weft__state_row_open_step, d);
}

/* The running runs whose owner is gone at @p now, appended to *dead (grown as needed, *n
 * entries, owned by the caller even on error, free with weft__state_dead_free()). */
static weft_err
lite_dead_collect(struct rt_state *base, uint64_t now, struct weft__state_dead **dead, size_t *n)
{
    struct lite_state *st = lite(base);
    struct weft__state_dead_scan scan = {.now = now, .dead = dead, .n = n};

    return lite_each(st,
                     prepare(st, "SELECT id, workflow, owner_host, trace_id, root_span_id,"
                                 " root_parent_span_id, root_span_name, owner_pid, heartbeat_ns,"
                                 " root_started_ns, started_ns," STATE_LAST_LIFE
                                 " FROM runs WHERE status = 'running' AND owner_token IS NOT NULL"),
                     NULL, 0, weft__state_row_dead, &scan);
}

/* Mark @p d's run interrupted (the reason names its process and `weft resume`, kept in
 * d->text[7]) and read the steps it left in progress into @p d. */
static weft_err
lite_dead_mark(struct rt_state *base, struct weft__state_dead *d)
{
    struct lite_state *st = lite(base);
    weft_err err = weft__state_dead_reason(d);

    if (err != WEFT_OK) {
        return err;
    }
    err = lite_exec(st, "mark interrupted",
                    prepare(st, "UPDATE runs SET status = 'interrupted', reason = ?, ended_ns = ?,"
                                " owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
                                " owner_since_ns = NULL WHERE id = ? AND status = 'running'"),
                    SQL_ARGS(SQL_TEXT(d->text[7]), SQL_I64(d->ended_ns), SQL_KEY(d->text[0])));
    if (err == WEFT_OK) {
        err = open_steps(st, d);
    }
    return err;
}

static weft_err
lite_end(struct rt_state *base, weft_err err)
{
    return tx_end(lite(base), err);
}

static const struct weft__state_ops lite_ops = {
    .name = "sqlite",
    .close = lite_close,
    .begin = lite_begin,
    .begin_lazy = lite_begin, /* synchronous=NORMAL: no commit waits for the disk */
    .commit = lite_commit,
    .in_transaction = lite_in_transaction,
    .run_begin = lite_run_begin,
    .run_trace = lite_run_trace,
    .run_end = lite_run_end,
    .step_save = lite_step_save,
    .surgery = lite_surgery,
    .messages_load = lite_messages_load,
    .message_add = lite_message_add,
    .cursors_load = lite_cursors_load,
    .cursors_save = lite_cursors_save,
    .runs_each = lite_runs_each,
    .run_resolve = lite_run_resolve,
    .run_info = lite_run_info,
    .steps_each = lite_steps_each,
    .corrections_each = lite_corrections_each,
    .exchange_add = lite_exchange_add,
    .exchanges_script = lite_exchanges_script,
    .exchange_counts = lite_exchange_counts,
    .tool_result_add = lite_tool_result_add,
    .tool_results_each = lite_tool_results_each,
    .run_origin = lite_run_origin,
    .check = lite_check,
    .lease_acquire = lite_lease_acquire,
    .lease_release = lite_lease_release,
    .heartbeat = lite_heartbeat,
    .run_root = lite_run_root,
    .run_hash_set = lite_run_hash_set,
    .run_hash_get = lite_run_hash_get,
    .run_snapshot_set = lite_run_snapshot_set,
    .run_snapshot_get = lite_run_snapshot_get,
    .end = lite_end,
    .dead_collect = lite_dead_collect,
    .dead_mark = lite_dead_mark,
    .skill_save = weft__lite_skill_save,
    .skill_vectors = weft__lite_skill_vectors,
    .skills_search = weft__lite_skills_search,
    .skill_used = weft__lite_skill_used,
    .skills_list = weft__lite_skills_list,
    .team_save = weft__lite_team_save,
    .teams_list = weft__lite_teams_list,
    .skill_get = weft__lite_skill_get,
    .skills_forget = weft__lite_skills_forget,
    .skills_prune = weft__lite_skills_prune,
    .run_pin = weft__lite_run_pin,
    .gc_scan = weft__lite_gc_scan,
    .gc_kept = weft__lite_gc_kept,
    .gc_run = weft__lite_gc_run,
    .ds_run = weft__lite_ds_run,
};

/* ------------------------------------------------------------------------------------------ */
/* The helpers the backend's other files use (state_sqlite.h), under their cross-file names. */

void
weft__lite_bind_key(sqlite3_stmt *stmt, int i, const char *key)
{
    bind_key(stmt, i, key);
}

sqlite3_stmt *
weft__lite_cached(struct lite_state *st, const char *sql)
{
    return cached(st, sql);
}

weft_err
weft__lite_finish(struct lite_state *st, sqlite3_stmt *stmt, const char *what)
{
    return finish(st, stmt, what);
}

weft_err
weft__lite_begin(struct rt_state *base)
{
    return lite_begin(base);
}

weft_err
weft__lite_each(struct lite_state *st,
                sqlite3_stmt *stmt,
                const struct weft__state_arg *args,
                size_t n,
                state_row_fn fn,
                void *ctx)
{
    return lite_each(st, stmt, args, n, fn, ctx);
}

weft_err
weft__lite_exec(struct lite_state *st,
                const char *what,
                sqlite3_stmt *stmt,
                const struct weft__state_arg *args,
                size_t n)
{
    return lite_exec(st, what, stmt, args, n);
}

weft_err
weft__lite_exec_count(struct lite_state *st,
                      const char *what,
                      sqlite3_stmt *stmt,
                      const struct weft__state_arg *args,
                      size_t n,
                      size_t *changes)
{
    return lite_exec_count(st, what, stmt, args, n, changes);
}

weft_err
weft__lite_one(struct lite_state *st,
               sqlite3_stmt *stmt,
               const struct weft__state_arg *args,
               size_t n,
               state_row_fn fn,
               void *ctx)
{
    return lite_one(st, stmt, args, n, fn, ctx);
}

weft_err
weft__lite_payload_get(void *user,
                       const char *const *hashes,
                       size_t count,
                       weft__payload_each_fn each,
                       void *each_user)
{
    return payload_get(user, hashes, count, each, each_user);
}

sqlite3_stmt *
weft__lite_prepare(struct lite_state *st, const char *sql)
{
    return prepare(st, sql);
}

void
weft__lite_release(struct lite_state *st, sqlite3_stmt *stmt)
{
    release(st, stmt);
}

char *
weft__lite_state_col_text(sqlite3_stmt *stmt, int i)
{
    return state_col_text(stmt, i);
}

void
weft__lite_state_note_error(struct lite_state *st, int rc)
{
    state_note_error(st, rc);
}

weft_err
weft__lite_tx_end(struct lite_state *st, weft_err err)
{
    return tx_end(st, err);
}
