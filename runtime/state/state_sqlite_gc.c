/* runtime/state/state_sqlite_gc.c - retention in SQLite (state.h, docs/retention.md):
 * pinning, the scan of runs past a cutoff, and one transaction per deleted run (BEGIN
 * IMMEDIATE, every table of the run, then the payload records only it held); through the
 * backend's query helpers (state_sqlite.h).
 */
#include "runtime/state/state_payloads.h"
#include "runtime/state/state_sqlite.h"

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

/* ------------------------------------------------------------------------------------------ */
/* Retention (state.h, docs/retention.md)                                                      */

weft_err
weft__lite_run_pin(struct rt_state *base, const char *run_id, bool is_pinned)
{
    struct lite_state *st = lite(base);
    size_t n = 0;
    weft_err err = weft__lite_exec_count(
        st, "run pin", weft__lite_prepare(st, "UPDATE runs SET pinned = ? WHERE id = ?"),
        SQL_ARGS(SQL_BOOL(is_pinned), SQL_KEY(run_id)), &n);

    return err == WEFT_OK && n == 0 ? WEFT_ENOTFOUND : err;
}

weft_err
weft__lite_gc_scan(struct rt_state *base,
                   uint64_t cutoff_ns,
                   uint64_t after_ns,
                   const char *after_id,
                   size_t limit,
                   state_gc_fn fn,
                   void *user_data)
{
    struct lite_state *st = lite(base);
    struct weft__state_each c = {.gc_fn = fn, .user_data = user_data};
    weft_err err = weft__lite_each(
        st,
        weft__lite_prepare(st, "SELECT id, ended_ns FROM runs WHERE status <> 'running'"
                               " AND ended_ns IS NOT NULL AND ended_ns < ?1"
                               " AND pinned = 0 AND (?3 IS NULL OR ended_ns > ?2"
                               " OR (ended_ns = ?2 AND id > ?3))"
                               " ORDER BY ended_ns, id LIMIT ?4"),
        SQL_ARGS(SQL_U64(cutoff_ns), SQL_U64(after_ns), SQL_KEY(after_id), SQL_U64(limit)),
        weft__state_row_gc_each, &c);

    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc scan failed: %s", sqlite3_errstr(st->last_rc));
    }
    return err;
}

weft_err
weft__lite_gc_kept(struct rt_state *base, uint64_t cutoff_ns, size_t *pinned, size_t *running)
{
    struct lite_state *st = lite(base);
    int64_t counts[2] = {0, 0};
    weft_err err = weft__lite_one(
        st,
        weft__lite_prepare(
            st, "SELECT COALESCE(SUM(pinned <> 0 AND status <> 'running' AND ended_ns IS NOT"
                " NULL AND ended_ns < ?1), 0), COALESCE(SUM(status = 'running' AND"
                " started_ns < ?1), 0) FROM runs"),
        SQL_ARGS(SQL_U64(cutoff_ns)), weft__state_row_int_pair, counts);

    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc count failed: %s", sqlite3_errstr(st->last_rc));
        return WEFT_EIO;
    }
    *pinned = (size_t)counts[0];
    *running = (size_t)counts[1];
    return WEFT_OK;
}

/* A session's rows (messages, scripted cursors) go with its last run: later runs of the same
 * session read its conversation back (?1 the run, ?2 its session). */
#define LITE_SESSION_GONE \
    " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = ?2 AND r.id <> ?1)"

/* Every table with rows of a run, the run's own row last: the same WHERE counted (dry run) or
 * deleted. run_metrics is created by metrics_store.c on the first snapshot, so it may be
 * missing. Skills (lessons are skills) and teams keep their own retention and are not here. */
static const struct lite_gc_table {
    const char *name;
    const char *count;
    const char *del;
} lite_gc_tables[] = {
    {"steps", "SELECT count(*) FROM steps WHERE run_id = ?1",
     "DELETE FROM steps WHERE run_id = ?1"},
    {"llm_exchanges", "SELECT count(*) FROM llm_exchanges WHERE run_id = ?1",
     "DELETE FROM llm_exchanges WHERE run_id = ?1"},
    {"tool_results", "SELECT count(*) FROM tool_results WHERE run_id = ?1",
     "DELETE FROM tool_results WHERE run_id = ?1"},
    {"corrections", "SELECT count(*) FROM corrections WHERE run_id = ?1",
     "DELETE FROM corrections WHERE run_id = ?1"},
    {"run_metrics", "SELECT count(*) FROM run_metrics WHERE run_id = ?1",
     "DELETE FROM run_metrics WHERE run_id = ?1"},
    {"messages", "SELECT count(*) FROM messages WHERE session_id = ?2" LITE_SESSION_GONE,
     "DELETE FROM messages WHERE session_id = ?2" LITE_SESSION_GONE},
    {"script_cursors",
     "SELECT count(*) FROM script_cursors WHERE session_id = ?2" LITE_SESSION_GONE,
     "DELETE FROM script_cursors WHERE session_id = ?2" LITE_SESSION_GONE},
    {"script_cursor_keys",
     "SELECT count(*) FROM script_cursor_keys WHERE session_id = ?2" LITE_SESSION_GONE,
     "DELETE FROM script_cursor_keys WHERE session_id = ?2" LITE_SESSION_GONE},
    {"runs", "SELECT count(*) FROM runs WHERE id = ?1", "DELETE FROM runs WHERE id = ?1"},
};

static bool
lite_has_table(struct lite_state *st, const char *name)
{
    sqlite3_stmt *stmt =
        weft__lite_prepare(st, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    bool has = false;

    if (stmt != NULL) {
        weft__lite_bind_key(stmt, 1, name);
        has = sqlite3_step(stmt) == SQLITE_ROW;
    }
    sqlite3_finalize(stmt);
    return has;
}

/* Count or delete one table's rows of the run. */
static weft_err
lite_gc_table(struct lite_state *st,
              const struct lite_gc_table *t,
              const char *run_id,
              const char *session_id,
              bool is_dry_run,
              uint64_t *rows)
{
    sqlite3_stmt *stmt = NULL;
    int rc = SQLITE_DONE;

    if (strcmp(t->name, "run_metrics") == 0 && !lite_has_table(st, t->name)) {
        return WEFT_OK;
    }
    stmt = weft__lite_prepare(st, is_dry_run ? t->count : t->del);
    if (stmt == NULL) {
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    weft__lite_bind_key(stmt, 1, run_id);
    if (sqlite3_bind_parameter_count(stmt) >= 2) {
        weft__lite_bind_key(stmt, 2, session_id);
    }
    rc = sqlite3_step(stmt);
    if (is_dry_run && rc == SQLITE_ROW) {
        *rows += (uint64_t)sqlite3_column_int64(stmt, 0);
        rc = SQLITE_DONE;
    } else if (rc == SQLITE_DONE) {
        *rows += (uint64_t)sqlite3_changes(st->db);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        weft__lite_state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s: %s failed: %s", run_id, t->name,
                 sqlite3_errstr(rc));
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* The run being deleted, for the payload collection's callbacks. */
struct lite_gc {
    struct lite_state *st;
    const char *run_id;
};

static weft_err
gc_is_referenced(void *user, const char *hash, bool *is_live)
{
    struct lite_gc *gc = user;
    weft_err err = WEFT_OK;

    *is_live = false;
    err = weft__lite_one(
        gc->st,
        weft__lite_prepare(
            gc->st,
            "SELECT EXISTS (SELECT 1 FROM llm_exchanges WHERE entry_ref = ?1 AND run_id <> ?2)"
            " OR EXISTS (SELECT 1 FROM tool_results WHERE request_ref = ?1 AND run_id <> ?2)"
            " OR EXISTS (SELECT 1 FROM tool_results WHERE outcome_ref = ?1 AND run_id <> ?2)"
            " OR EXISTS (SELECT 1 FROM runs WHERE workflow_snapshot_ref = ?1 AND id <> ?2)"),
        SQL_ARGS(SQL_KEY(hash), SQL_KEY(gc->run_id)), weft__state_row_bool, is_live);
    return err == WEFT_OK ? WEFT_OK : WEFT_EIO;
}

static weft_err
gc_lists_each(void *user, weft__payload_each_fn each, void *each_user)
{
    struct lite_gc *gc = user;
    sqlite3_stmt *stmt =
        weft__lite_prepare(gc->st, "SELECT hash, size, data FROM payloads WHERE kind = 1");
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft__payload_record rec = {.kind = WEFT__PAYLOAD_CHUNKS};
        const char *hash = (const char *)sqlite3_column_text(stmt, 0);

        if (!weft__payload_is_ref(hash)) {
            continue;
        }
        memcpy(rec.hash, hash, sizeof(rec.hash));
        rec.raw_len = (size_t)sqlite3_column_int64(stmt, 1);
        rec.data = sqlite3_column_blob(stmt, 2);
        rec.len = (size_t)sqlite3_column_bytes(stmt, 2);
        err = each(&rec, each_user);
    }
    sqlite3_finalize(stmt);
    return err == WEFT_OK && rc != SQLITE_DONE ? WEFT_EIO : err;
}

static weft_err
gc_del(void *user, const char *hash)
{
    struct lite_gc *gc = user;

    return weft__lite_exec(gc->st, "payload delete",
                           weft__lite_prepare(gc->st, "DELETE FROM payloads WHERE hash = ?"),
                           SQL_ARGS(SQL_KEY(hash)));
}

/* The payload references run @p run_id's rows hold, into @p refs. */
static weft_err
ref_row(const struct weft__state_row *row, void *ctx)
{
    return weft__hash_set_add(ctx, weft__row_text(row, 0));
}

static weft_err
gc_run_refs(struct lite_state *st, const char *run_id, struct weft__hash_set *refs)
{
    return weft__lite_each(
        st,
        weft__lite_prepare(
            st, "SELECT entry_ref FROM llm_exchanges WHERE run_id = ?1 AND entry_ref IS NOT NULL"
                " UNION SELECT request_ref FROM tool_results WHERE run_id = ?1"
                " AND request_ref IS NOT NULL"
                " UNION SELECT outcome_ref FROM tool_results WHERE run_id = ?1"
                " AND outcome_ref IS NOT NULL"
                " UNION SELECT workflow_snapshot_ref FROM runs WHERE id = ?1"
                " AND workflow_snapshot_ref IS NOT NULL"),
        SQL_ARGS(SQL_KEY(run_id)), ref_row, refs);
}

/* After the run's rows (or, dry, instead of deleting them): the payload records only they
 * held, counted into *rows like any table's rows. */
static weft_err
gc_payloads(struct lite_state *st,
            const char *run_id,
            struct weft__hash_set *refs,
            bool is_dry_run,
            uint64_t *rows)
{
    struct lite_gc gc = {.st = st, .run_id = run_id};
    const struct weft__state_payload_gc ops = {
        .source = {.get = weft__lite_payload_get, .user = st},
        .is_referenced = gc_is_referenced,
        .lists_each = gc_lists_each,
        .del = gc_del,
        .user = &gc,
    };
    uint64_t n = 0;
    weft_err err = WEFT_OK;

    if (refs->count == 0) {
        return WEFT_OK;
    }
    err = weft__state_payloads_collect(&ops, refs, is_dry_run, &n);
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s: payloads: %s", run_id, weft_strerror(err));
        st->is_tx_failed = st->tx_depth > 0;
        return err;
    }
    *rows += n;
    return WEFT_OK;
}

weft_err
weft__lite_gc_run(struct rt_state *base,
                  const char *run_id,
                  uint64_t cutoff_ns,
                  bool is_dry_run,
                  uint64_t *rows,
                  bool *is_deleted)
{
    struct lite_state *st = lite(base);
    struct weft__hash_set refs;
    char *session_id = NULL;
    uint64_t n = 0;
    weft_err err = WEFT_OK;

    weft__lite_rows_forget(st); /* its step rows may go */
    weft__hash_set_init(&refs);
    /* The write lock first (BEGIN IMMEDIATE), then the check: a run resumed or pinned by
     * another process after the scan is seen here and kept. A dry run reads without it. */
    if (!is_dry_run && weft__lite_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    err = weft__lite_one(
        st,
        weft__lite_prepare(st, "SELECT session_id FROM runs WHERE id = ?1 AND status <> 'running'"
                               " AND ended_ns IS NOT NULL AND ended_ns < ?2 AND pinned = 0"),
        SQL_ARGS(SQL_KEY(run_id), SQL_U64(cutoff_ns)), weft__state_row_strdup, &session_id);
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s: %s", run_id, sqlite3_errstr(st->last_rc));
    }
    if (err != WEFT_OK) {
        err = err == WEFT_ENOTFOUND ? WEFT_OK : err;
        goto out; /* an error, or the run may no longer go: nothing written */
    }
    /* Its references are read before its rows go; what they alone held goes after them, in
     * the same transaction (the write lock keeps any writer from taking a record up meanwhile). */
    err = gc_run_refs(st, run_id, &refs);
    for (size_t i = 0; err == WEFT_OK && i < sizeof(lite_gc_tables) / sizeof(lite_gc_tables[0]);
         i++) {
        err = lite_gc_table(st, &lite_gc_tables[i], run_id, session_id, is_dry_run, &n);
    }
    if (err == WEFT_OK) {
        err = gc_payloads(st, run_id, &refs, is_dry_run, &n);
    }
out:
    if (!is_dry_run) {
        err = weft__lite_tx_end(st, err);
    }
    if (err == WEFT_OK && session_id != NULL) {
        *rows = n;
        *is_deleted = true;
    }
    weft__hash_set_cleanup(&refs);
    weft__free(session_id);
    return err;
}
