/* runtime/state.c - the SQLite run state store (see state.h).
 *
 * WAL mode lets `weft` readers look at a database a run is writing. Statements are prepared
 * per call: the store is written a few times per decision, far from any hot path, and
 * per-call statements keep the handle free of cached state to invalidate on schema changes.
 */
#include "state.h"

#include "../tracing/util.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SCHEMA_VERSION 1

struct rt_state {
    sqlite3 *db;
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS runs ("
    " id TEXT PRIMARY KEY, workflow TEXT NOT NULL, session_id TEXT NOT NULL, input TEXT,"
    " status TEXT NOT NULL, reason TEXT, trace_id TEXT, output TEXT,"
    " iterations INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,"
    " output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,"
    " started_ns BIGINT NOT NULL, ended_ns BIGINT);"
    "CREATE INDEX IF NOT EXISTS runs_session ON runs(session_id);"
    "CREATE TABLE IF NOT EXISTS steps ("
    " run_id TEXT NOT NULL, idx INTEGER NOT NULL, step_id TEXT NOT NULL, agent TEXT NOT NULL,"
    " task TEXT NOT NULL, depends_on TEXT NOT NULL, status TEXT NOT NULL,"
    " attempts INTEGER NOT NULL, result TEXT, feedback TEXT, requested_by TEXT,"
    " PRIMARY KEY (run_id, idx));"
    "CREATE TABLE IF NOT EXISTS messages ("
    " session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,"
    " content TEXT NOT NULL, route TEXT, created_ns BIGINT NOT NULL,"
    " PRIMARY KEY (session_id, seq));"
    "CREATE TABLE IF NOT EXISTS script_cursors ("
    " session_id TEXT NOT NULL, script TEXT NOT NULL, cursors TEXT NOT NULL,"
    " PRIMARY KEY (session_id, script));";

char *
state_default_path(void)
{
    const char *home = weft__env("WEFT_HOME");
    struct weft__buf b;

    if (home == NULL) {
        home = ".weft";
    }
    (void)mkdir(home, 0700);
    weft__buf_init(&b, 0);
    if (weft__buf_printf(&b, "%s/state.db", home) != WEFT_OK) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data;
}

weft_err
state_open(const char *path, struct rt_state **out, char *err, size_t err_len)
{
    struct rt_state *st = NULL;
    char *errmsg = NULL;
    sqlite3_stmt *stmt = NULL;
    int version = 0;

    *out = NULL;
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        snprintf(err, err_len, "state database %s: %s", path,
                 st->db != NULL ? sqlite3_errmsg(st->db) : "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
        version = sqlite3_column_int(stmt, 0);
    }
    sqlite3_finalize(stmt);
    if (version > SCHEMA_VERSION) {
        snprintf(err, err_len, "state database %s has schema %d; this weft knows %d", path, version,
                 SCHEMA_VERSION);
        goto fail;
    }
    if (sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", NULL, NULL,
                     &errmsg) != SQLITE_OK ||
        sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, &errmsg) != SQLITE_OK ||
        sqlite3_exec(st->db, schema, NULL, NULL, &errmsg) != SQLITE_OK ||
        sqlite3_exec(st->db, "PRAGMA user_version = 1; COMMIT", NULL, NULL, &errmsg) != SQLITE_OK) {
        snprintf(err, err_len, "state database %s: %s", path,
                 errmsg != NULL ? errmsg : "schema setup failed");
        sqlite3_free(errmsg);
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    *out = st;
    return WEFT_OK;
fail:
    state_close(st);
    return WEFT_EIO;
}

void
state_close(struct rt_state *st)
{
    if (st == NULL) {
        return;
    }
    sqlite3_close(st->db);
    weft__free(st);
}

/* Bind a NUL-terminated string or NULL. */
static void
bind_text(sqlite3_stmt *stmt, int i, const char *s)
{
    if (s == NULL) {
        sqlite3_bind_null(stmt, i);
    } else {
        sqlite3_bind_text(stmt, i, s, -1, SQLITE_TRANSIENT);
    }
}

static weft_err
finish(struct rt_state *st, sqlite3_stmt *stmt, const char *what)
{
    int rc = sqlite3_step(stmt);

    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: %s failed: %s", what, sqlite3_errmsg(st->db));
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static sqlite3_stmt *
prepare(struct rt_state *st, const char *sql)
{
    sqlite3_stmt *stmt = NULL;

    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: prepare failed: %s", sqlite3_errmsg(st->db));
        sqlite3_finalize(stmt);
        return NULL;
    }
    return stmt;
}

weft_err
state_run_begin(struct rt_state *st,
                const char *run_id,
                const char *workflow,
                const char *session_id,
                const char *input,
                uint64_t started_ns)
{
    sqlite3_stmt *stmt = prepare(st, "INSERT INTO runs (id, workflow, session_id, input, status,"
                                     " started_ns) VALUES (?, ?, ?, ?, 'running', ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, run_id);
    bind_text(stmt, 2, workflow);
    bind_text(stmt, 3, session_id);
    bind_text(stmt, 4, input);
    sqlite3_bind_int64(stmt, 5, (sqlite3_int64)started_ns);
    return finish(st, stmt, "run insert");
}

weft_err
state_run_end(struct rt_state *st, const char *run_id, const struct state_run_end *end)
{
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET status = ?, reason = ?, trace_id = ?,"
                                     " output = ?, iterations = ?, input_tokens = ?,"
                                     " output_tokens = ?, cost_usd = ?, ended_ns = ?"
                                     " WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, end->status);
    bind_text(stmt, 2, end->reason);
    bind_text(stmt, 3, end->trace_id);
    bind_text(stmt, 4, end->output);
    sqlite3_bind_int64(stmt, 5, (sqlite3_int64)end->iterations);
    sqlite3_bind_int64(stmt, 6, end->input_tokens);
    sqlite3_bind_int64(stmt, 7, end->output_tokens);
    sqlite3_bind_double(stmt, 8, end->cost_usd);
    sqlite3_bind_int64(stmt, 9, (sqlite3_int64)end->ended_ns);
    bind_text(stmt, 10, run_id);
    return finish(st, stmt, "run update");
}

weft_err
state_step_save(struct rt_state *st,
                const char *run_id,
                size_t index,
                const struct plan_step *step,
                const char *agent_name)
{
    sqlite3_stmt *stmt = NULL;
    json_t *deps = json_array();
    char *deps_text = NULL;
    weft_err err = WEFT_OK;

    for (size_t i = 0; deps != NULL && i < step->depends_count; i++) {
        json_array_append_new(deps, json_string(step->depends_on[i]));
    }
    deps_text = deps != NULL ? json_dumps(deps, JSON_COMPACT) : NULL;
    json_decref(deps);
    if (deps_text == NULL) {
        return WEFT_ENOMEM;
    }
    stmt = prepare(st, "INSERT INTO steps (run_id, idx, step_id, agent, task, depends_on, status,"
                       " attempts, result, feedback, requested_by)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                       " ON CONFLICT (run_id, idx) DO UPDATE SET status = excluded.status,"
                       " attempts = excluded.attempts, result = excluded.result,"
                       " feedback = excluded.feedback, depends_on = excluded.depends_on");
    if (stmt == NULL) {
        free(deps_text);
        return WEFT_EIO;
    }
    bind_text(stmt, 1, run_id);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)index);
    bind_text(stmt, 3, step->id);
    bind_text(stmt, 4, agent_name);
    bind_text(stmt, 5, step->task);
    bind_text(stmt, 6, deps_text);
    bind_text(stmt, 7, step_status_name(step->status));
    sqlite3_bind_int64(stmt, 8, step->attempts);
    bind_text(stmt, 9, step->result);
    bind_text(stmt, 10, step->feedback);
    bind_text(stmt, 11, step->requested_by);
    err = finish(st, stmt, "step upsert");
    free(deps_text);
    return err;
}

weft_err
state_messages_load(struct rt_state *st, const char *session_id, size_t limit, json_t **out)
{
    sqlite3_stmt *stmt = prepare(st, "SELECT role, content, route FROM (SELECT seq, role, content,"
                                     " route FROM messages WHERE session_id = ?"
                                     " ORDER BY seq DESC LIMIT ?) ORDER BY seq");
    json_t *arr = json_array();
    int rc = 0;

    *out = NULL;
    if (stmt == NULL || arr == NULL) {
        sqlite3_finalize(stmt);
        json_decref(arr);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    bind_text(stmt, 1, session_id);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)limit);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *route = (const char *)sqlite3_column_text(stmt, 2);
        json_t *m = json_pack("{s:s, s:s, s:o}", "role", sqlite3_column_text(stmt, 0), "content",
                              sqlite3_column_text(stmt, 1), "route",
                              route != NULL ? json_string(route) : json_null());
        if (m == NULL || json_array_append_new(arr, m) != 0) {
            sqlite3_finalize(stmt);
            json_decref(arr);
            return WEFT_ENOMEM;
        }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return WEFT_EIO;
    }
    *out = arr;
    return WEFT_OK;
}

weft_err
state_message_add(struct rt_state *st,
                  const char *session_id,
                  const char *run_id,
                  const char *role,
                  const char *content,
                  const char *route)
{
    sqlite3_stmt *stmt = prepare(st, "INSERT INTO messages (session_id, seq, run_id, role,"
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

weft_err
state_cursors_load(struct rt_state *st, const char *session_id, const char *script, json_t **out)
{
    sqlite3_stmt *stmt =
        prepare(st, "SELECT cursors FROM script_cursors WHERE session_id = ? AND script = ?");
    int rc = 0;

    *out = NULL;
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, session_id);
    bind_text(stmt, 2, script);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        *out = json_loads((const char *)sqlite3_column_text(stmt, 0), 0, NULL);
    }
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

weft_err
state_cursors_save(struct rt_state *st,
                   const char *session_id,
                   const char *script,
                   const json_t *cursors)
{
    sqlite3_stmt *stmt = NULL;
    char *text = json_dumps(cursors, JSON_COMPACT | JSON_SORT_KEYS);
    weft_err err = WEFT_OK;

    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    stmt =
        prepare(st, "INSERT INTO script_cursors (session_id, script, cursors) VALUES (?, ?, ?)"
                    " ON CONFLICT (session_id, script) DO UPDATE SET cursors = excluded.cursors");
    if (stmt == NULL) {
        free(text);
        return WEFT_EIO;
    }
    bind_text(stmt, 1, session_id);
    bind_text(stmt, 2, script);
    bind_text(stmt, 3, text);
    err = finish(st, stmt, "cursor upsert");
    free(text);
    return err;
}
