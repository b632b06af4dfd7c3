/* store/payload_gc.c - collection of the span store's payload records (payload.h) that no
 * stored span refers to any more: run by retention (gc.c) after it deleted traces.
 *
 * Mark and sweep, in the transaction that deleted the traces: the references of every span
 * left (only spans whose attributes hold one are parsed) and the chunks their CHUNKS records
 * list are marked in a temporary table, and every other record is deleted. The writer puts a
 * batch's records in the batch's transaction, so a record is either referred to by a
 * committed span when the marks are taken or is put again by the writer that needs it: in
 * SQLite the two transactions exclude each other; in PostgreSQL the sweep first takes a
 * SHARE ROW EXCLUSIVE lock on the table, which waits for writers in flight and holds new ones
 * until it commits. The price is a scan of the spans that hold references, once per
 * retention pass that deleted something.
 */
#include "pg.h"
#include "store.h"

#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- SQLite ------------------------------------------------------------------------------- */

static const char sq_mark_refs[] =
    "INSERT OR IGNORE INTO temp.weft_live_payloads (hash)"
    " SELECT json_extract(j.value, '$.value') FROM spans, json_each(spans.attributes) AS j"
    " WHERE instr(spans.attributes, '{\"type\":\"payload\"') > 0 AND j.type = 'object'"
    " AND json_extract(j.value, '$.type') = 'payload'";

struct sq_mark {
    sqlite3_stmt *insert;
    bool is_failed;
};

static bool
sq_mark_chunk(const char *hash, void *user)
{
    struct sq_mark *m = user;

    sqlite3_reset(m->insert);
    sqlite3_bind_text(m->insert, 1, hash, -1, SQLITE_TRANSIENT);
    m->is_failed = sqlite3_step(m->insert) != SQLITE_DONE;
    return !m->is_failed;
}

weft_err
weft__store_sqlite_payload_sweep(sqlite3 *db, bool dry_run, size_t *deleted)
{
    struct sq_mark m = {NULL, false};
    sqlite3_stmt *lists = NULL;
    sqlite3_stmt *count = NULL;
    int rc = SQLITE_OK;
    weft_err err = WEFT_EIO;

    *deleted = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE name = 'payloads'", -1, &count,
                           NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    rc = sqlite3_step(count);
    sqlite3_finalize(count);
    count = NULL;
    if (rc != SQLITE_ROW) {
        return rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO; /* a store from before payloads */
    }
    if (sqlite3_exec(db,
                     "CREATE TEMP TABLE IF NOT EXISTS weft_live_payloads (hash TEXT PRIMARY KEY)"
                     " WITHOUT ROWID; DELETE FROM temp.weft_live_payloads",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(db, sq_mark_refs, NULL, NULL, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    /* The chunks of the live lists. */
    if (sqlite3_prepare_v2(db,
                           "SELECT data FROM payloads WHERE kind = 1"
                           " AND hash IN (SELECT hash FROM temp.weft_live_payloads)",
                           -1, &lists, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO temp.weft_live_payloads (hash) VALUES (?1)",
                           -1, &m.insert, NULL) != SQLITE_OK) {
        goto out;
    }
    /* Marks are inserted while the lists are read: a chunk is a TEXT record, never a list,
     * so what is added never changes what the query reads. */
    while (!m.is_failed && (rc = sqlite3_step(lists)) == SQLITE_ROW) {
        struct weft__payload_record rec = {
            .kind = WEFT__PAYLOAD_CHUNKS,
            .data = sqlite3_column_blob(lists, 0),
            .len = (size_t)sqlite3_column_bytes(lists, 0),
        };

        weft__payload_chunks_each(&rec, sq_mark_chunk, &m);
    }
    if (m.is_failed || rc != SQLITE_DONE) {
        goto out;
    }
    if (sqlite3_prepare_v2(db,
                           dry_run ? "SELECT count(*) FROM payloads WHERE hash NOT IN"
                                     " (SELECT hash FROM temp.weft_live_payloads)"
                                   : "DELETE FROM payloads WHERE hash NOT IN"
                                     " (SELECT hash FROM temp.weft_live_payloads)",
                           -1, &count, NULL) != SQLITE_OK) {
        goto out;
    }
    rc = sqlite3_step(count);
    if (dry_run ? rc == SQLITE_ROW : rc == SQLITE_DONE) {
        *deleted = dry_run ? (size_t)sqlite3_column_int64(count, 0) : (size_t)sqlite3_changes(db);
        err = WEFT_OK;
    }
out:
    sqlite3_finalize(lists);
    sqlite3_finalize(m.insert);
    sqlite3_finalize(count);
    (void)sqlite3_exec(db, "DELETE FROM temp.weft_live_payloads", NULL, NULL, NULL);
    return err;
}

/* --- PostgreSQL --------------------------------------------------------------------------- */

static const char pg_sweep_sql[] =
    "LOCK TABLE weft_payloads IN SHARE ROW EXCLUSIVE MODE;"
    "CREATE TEMP TABLE IF NOT EXISTS weft_live_payloads (hash TEXT COLLATE \"C\" PRIMARY KEY)"
    " ON COMMIT DELETE ROWS;"
    "INSERT INTO weft_live_payloads (hash)"
    " SELECT DISTINCT v ->> 'value' FROM weft_spans, jsonb_each(attributes) AS e (k, v)"
    " WHERE jsonb_typeof(v) = 'object' AND v ->> 'type' = 'payload'"
    " ON CONFLICT DO NOTHING;"
    /* The chunks of the live lists: 32-byte hashes back to back, cut apart in SQL. */
    "INSERT INTO weft_live_payloads (hash)"
    " SELECT DISTINCT encode(substring(p.data FROM g * 32 + 1 FOR 32), 'hex')"
    " FROM weft_payloads p JOIN weft_live_payloads l ON l.hash = p.hash,"
    " generate_series(0, length(p.data) / 32 - 1) AS g"
    " WHERE p.kind = 1 ON CONFLICT DO NOTHING;";

weft_err
weft__store_pg_payload_sweep(struct weft__store_pg *pg, bool dry_run, size_t *deleted)
{
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    *deleted = 0;
    res = PQexec(pg->conn, "SELECT to_regclass('weft_payloads') IS NOT NULL");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        err = weft__store_pg_fail(pg, res, "cannot look for the payloads table");
        PQclear(res);
        return err;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        PQclear(res);
        return WEFT_OK; /* a store from before payloads */
    }
    PQclear(res);
    err = weft__store_pg_exec(pg, "cannot mark live payloads", pg_sweep_sql);
    if (err != WEFT_OK) {
        return err;
    }
    res = PQexec(pg->conn, dry_run ? "SELECT count(*) FROM weft_payloads WHERE hash NOT IN"
                                     " (SELECT hash FROM weft_live_payloads)"
                                   : "WITH gone AS (DELETE FROM weft_payloads WHERE hash NOT IN"
                                     " (SELECT hash FROM weft_live_payloads) RETURNING 1)"
                                     " SELECT count(*) FROM gone");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        err = weft__store_pg_fail(pg, res, "cannot collect payloads");
    } else {
        *deleted = (size_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    }
    PQclear(res);
    return err;
}
