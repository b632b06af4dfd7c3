/* runtime/state/state_pg_gc.c - retention in PostgreSQL (state.h, docs/retention.md): pinning,
 * the scan of runs past a cutoff, and one transaction per deleted run (FOR UPDATE, every table
 * of the run, then the payload records only it held); through the backend's query helpers
 * (state_pg.h).
 */
#include "runtime/state/state_payloads.h"
#include "runtime/state/state_pg.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/uuid.h"
#include "tracing/ids.h"
#include "tracing/redact.h"

#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Retention (state.h, docs/retention.md)                                                      */

weft_err
weft__pg_run_pin(struct rt_state *base, const char *run_id, bool is_pinned)
{
    size_t n = 0;
    weft_err err = weft__pg_run(weft__pg(base), "run pin",
                                "UPDATE workflows SET pinned = $1 WHERE run_id = $2", NULL,
                                SQL_ARGS(SQL_BOOL(is_pinned), SQL_KEY(run_id)), NULL, NULL, &n);

    return err == WEFT_OK && n == 0 ? WEFT_ENOTFOUND : err;
}

weft_err
weft__pg_gc_scan(struct rt_state *base,
                 uint64_t cutoff_ns,
                 uint64_t after_ns,
                 const char *after_id,
                 size_t limit,
                 state_gc_fn fn,
                 void *user_data)
{
    struct weft__state_each c = {.gc_fn = fn, .user_data = user_data};

    return weft__pg_each(
        weft__pg(base), "gc scan",
        "SELECT run_id, ended_ns FROM workflows WHERE status <> 'running'"
        " AND ended_ns IS NOT NULL AND ended_ns < $1 AND NOT pinned AND ($3::text IS NULL"
        " OR (ended_ns, run_id) > ($2::bigint, $3::text)) ORDER BY ended_ns, run_id"
        " LIMIT $4",
        SQL_ARGS(SQL_U64(cutoff_ns), SQL_U64(after_ns), SQL_KEY(after_id), SQL_U64(limit)),
        weft__state_row_gc_each, &c);
}

weft_err
weft__pg_gc_kept(struct rt_state *base, uint64_t cutoff_ns, size_t *pinned, size_t *running)
{
    int64_t counts[2] = {0, 0};
    weft_err err = weft__pg_one(
        weft__pg(base), "gc count",
        "SELECT count(*) FILTER (WHERE pinned AND status <> 'running' AND ended_ns < $1),"
        " count(*) FILTER (WHERE status = 'running' AND started_ns < $1) FROM workflows",
        SQL_ARGS(SQL_U64(cutoff_ns)), weft__state_row_int_pair, counts);

    if (err != WEFT_OK) {
        return err;
    }
    *pinned = (size_t)counts[0];
    *running = (size_t)counts[1];
    return WEFT_OK;
}

/* A session's rows (messages, scripted cursors) go with its last run: later runs of the same
 * session read its conversation back ($1 the run, $2 its session). */
#define PG_SESSION_GONE                                                  \
    " AND NOT EXISTS (SELECT 1 FROM workflows r WHERE r.session_id = $2" \
    " AND r.run_id <> $1)"

/* Every table with rows of a run, the run's own row last: the same WHERE counted (dry run) or
 * deleted; each text a literal, as the prepared statement cache needs. Tasks are deleted
 * before their workflow (not left to ON DELETE CASCADE) so that they are counted. Skills
 * (lessons are skills) and teams keep their own retention and are not here. */
static const struct pg_gc_table {
    const char *name;
    bool is_session; /* takes the session as $2 */
    const char *count;
    const char *del;
} pg_gc_tables[] = {
    {"tasks", false,
     "SELECT count(*) FROM tasks WHERE workflow_id = (SELECT workflow_id FROM workflows"
     " WHERE run_id = $1)",
     "DELETE FROM tasks WHERE workflow_id = (SELECT workflow_id FROM workflows"
     " WHERE run_id = $1)"},
    {"llm_exchanges", false, "SELECT count(*) FROM llm_exchanges WHERE run_id = $1",
     "DELETE FROM llm_exchanges WHERE run_id = $1"},
    {"tool_results", false, "SELECT count(*) FROM tool_results WHERE run_id = $1",
     "DELETE FROM tool_results WHERE run_id = $1"},
    {"corrections", false, "SELECT count(*) FROM corrections WHERE run_id = $1",
     "DELETE FROM corrections WHERE run_id = $1"},
    {"run_metrics", false, "SELECT count(*) FROM run_metrics WHERE run_id = $1",
     "DELETE FROM run_metrics WHERE run_id = $1"},
    {"messages", true, "SELECT count(*) FROM messages WHERE session_id = $2" PG_SESSION_GONE,
     "DELETE FROM messages WHERE session_id = $2" PG_SESSION_GONE},
    {"script_cursor_keys", true,
     "SELECT count(*) FROM script_cursor_keys WHERE session_id = $2" PG_SESSION_GONE,
     "DELETE FROM script_cursor_keys WHERE session_id = $2" PG_SESSION_GONE},
    {"workflows", false, "SELECT count(*) FROM workflows WHERE run_id = $1",
     "DELETE FROM workflows WHERE run_id = $1"},
};

/* The run being deleted, for the payload collection's callbacks. */
struct pg_gc {
    struct pg_state *st;
    const char *run_id;
};

static weft_err
gc_is_referenced(void *user, const char *hash, bool *is_live)
{
    struct pg_gc *gc = user;
    weft_err err = WEFT_OK;

    *is_live = false;
    err = weft__pg_one(
        gc->st, "payload references",
        "SELECT EXISTS (SELECT 1 FROM llm_exchanges WHERE entry_ref = $1 AND run_id <> $2)"
        " OR EXISTS (SELECT 1 FROM tool_results WHERE request_ref = $1 AND run_id <> $2)"
        " OR EXISTS (SELECT 1 FROM tool_results WHERE outcome_ref = $1 AND run_id <> $2)"
        " OR EXISTS (SELECT 1 FROM workflows WHERE workflow_snapshot_ref = $1"
        " AND run_id <> $2)",
        SQL_ARGS(SQL_KEY(hash), SQL_KEY(gc->run_id)), weft__state_row_bool, is_live);
    return err == WEFT_ENOTFOUND ? WEFT_OK : err;
}

static weft_err
gc_lists_each(void *user, weft__payload_each_fn each, void *each_user)
{
    struct pg_gc *gc = user;
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    weft__pg_params_init(&p);
    p.is_binary_result = true;
    res = weft__pg_query(gc->st, "payload lists",
                         "SELECT hash, size::text, data FROM payloads WHERE kind = 1", &p);
    weft__pg_params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft__payload_record rec = {.kind = WEFT__PAYLOAD_CHUNKS};

        if (PQgetlength(res, i, 0) != WEFT__PAYLOAD_HEX_LEN) {
            continue;
        }
        memcpy(rec.hash, PQgetvalue(res, i, 0), sizeof(rec.hash));
        rec.raw_len = (size_t)strtoull(PQgetvalue(res, i, 1), NULL, 10);
        rec.data = (const unsigned char *)PQgetvalue(res, i, 2);
        rec.len = (size_t)PQgetlength(res, i, 2);
        err = each(&rec, each_user);
    }
    PQclear(res);
    return err;
}

static weft_err
gc_del(void *user, const char *hash)
{
    struct pg_gc *gc = user;

    return weft__pg_exec(gc->st, "payload delete", "DELETE FROM payloads WHERE hash = $1",
                         SQL_ARGS(SQL_KEY(hash)));
}

/* The payload references run @p run_id's rows hold, into @p refs. */
static weft_err
ref_row(const struct weft__state_row *row, void *ctx)
{
    return weft__hash_set_add(ctx, weft__row_str(row, 0));
}

static weft_err
gc_run_refs(struct pg_state *st, const char *run_id, struct weft__hash_set *refs)
{
    return weft__pg_each(
        st, "payload references of the run",
        "SELECT entry_ref FROM llm_exchanges WHERE run_id = $1 AND entry_ref IS NOT NULL"
        " UNION SELECT request_ref FROM tool_results WHERE run_id = $1"
        " AND request_ref IS NOT NULL"
        " UNION SELECT outcome_ref FROM tool_results WHERE run_id = $1"
        " AND outcome_ref IS NOT NULL"
        " UNION SELECT workflow_snapshot_ref FROM workflows WHERE run_id = $1"
        " AND workflow_snapshot_ref IS NOT NULL",
        SQL_ARGS(SQL_KEY(run_id)), ref_row, refs);
}

/* After the run's rows (or, dry, instead of deleting them): the payload records only they
 * held, counted into *rows like any table's rows. The payload lock, taken exclusively, waits
 * for the writers' transactions that may be taking up a record (payload_begin) and holds new
 * ones off until this one commits. */
static weft_err
gc_payloads(struct pg_state *st,
            const char *run_id,
            struct weft__hash_set *refs,
            bool is_dry_run,
            uint64_t *rows)
{
    struct pg_gc gc = {.st = st, .run_id = run_id};
    const struct weft__state_payload_gc ops = {
        .source = {.get = weft__pg_payload_get, .user = st},
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
    if (!is_dry_run) {
        err = weft__pg_exec(st, "payload lock", "SELECT pg_advisory_xact_lock(" PAYLOAD_LOCK ")",
                            NULL, 0);
    }
    if (err == WEFT_OK) {
        err = weft__state_payloads_collect(&ops, refs, is_dry_run, &n);
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s on %s: payloads: %s", run_id, st->where,
                 weft_strerror(err));
        return err;
    }
    *rows += n;
    return WEFT_OK;
}

weft_err
weft__pg_gc_run(struct rt_state *base,
                const char *run_id,
                uint64_t cutoff_ns,
                bool is_dry_run,
                uint64_t *rows,
                bool *is_deleted)
{
    struct pg_state *st = weft__pg(base);
    struct weft__hash_set refs;
    char *session_id = NULL;
    uint64_t n = 0;
    weft_err err = WEFT_OK;

    if (!is_dry_run && weft__pg_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    weft__hash_set_init(&refs);
    /* FOR UPDATE: a process resuming or pinning the run meanwhile waits, or has committed and
     * is seen here (the run is then kept). A dry run only reads. */
    err = weft__pg_one(st, "gc check",
                       is_dry_run ? "SELECT session_id FROM workflows WHERE run_id = $1"
                                    " AND status <> 'running' AND ended_ns IS NOT NULL"
                                    " AND ended_ns < $2 AND NOT pinned"
                                  : "SELECT session_id FROM workflows WHERE run_id = $1"
                                    " AND status <> 'running' AND ended_ns IS NOT NULL"
                                    " AND ended_ns < $2 AND NOT pinned FOR UPDATE",
                       SQL_ARGS(SQL_KEY(run_id), SQL_U64(cutoff_ns)), weft__state_row_strdup,
                       &session_id);
    err = err == WEFT_ENOTFOUND ? WEFT_OK : err;
    /* Its references are read before its rows go; what they alone held goes after them. */
    if (err == WEFT_OK && session_id != NULL) {
        err = gc_run_refs(st, run_id, &refs);
    }
    for (size_t i = 0;
         err == WEFT_OK && session_id != NULL && i < sizeof(pg_gc_tables) / sizeof(pg_gc_tables[0]);
         i++) {
        const struct pg_gc_table *t = &pg_gc_tables[i];
        const struct weft__state_arg args[] = {SQL_KEY(run_id), SQL_KEY(session_id)};
        int64_t counted = 0;
        size_t deleted = 0;

        err = weft__pg_run(st, t->name, is_dry_run ? t->count : t->del, NULL, args,
                           t->is_session ? 2 : 1, is_dry_run ? weft__state_row_int : NULL, &counted,
                           &deleted);
        n += is_dry_run ? (uint64_t)counted : (uint64_t)deleted;
    }
    if (err == WEFT_OK && session_id != NULL) {
        err = gc_payloads(st, run_id, &refs, is_dry_run, &n);
    }
    if (!is_dry_run) {
        err = weft__pg_tx_end(st, err);
    }
    if (err == WEFT_OK && session_id != NULL) {
        *rows = n;
        *is_deleted = true;
    }
    weft__hash_set_cleanup(&refs);
    weft__free(session_id);
    return err;
}
