/* store/sqlite_schema.c - what makes a SQLite file a weft span store: where it lives by
 * default, the schema, and the identity checks that the writer (store_writer.c) and the reader
 * (store_read.c) run before they touch it.
 *
 * Schema (version 4, kept in PRAGMA user_version; PRAGMA application_id is "weft", so a store
 * is never confused with, or written into, another program's database):
 * - spans: one row per span, PRIMARY KEY (trace_id, span_id), so a span exported twice is
 *   replaced rather than duplicated. Ids are lowercase hex; parent_span_id is NULL for a root.
 *   attributes, events and links are JSON (the encoding is in store_json.c), so
 *   json_extract(attributes, '$."gen_ai.usage.input_tokens"') works from plain SQL.
 * - traces: one summary row per trace (start, end, span and error counts, root name, service),
 *   kept up to date by the writer for every trace a batch touches. `weft trace list` reads only
 *   this table through its start_ns index, so listing stays fast however many spans are stored.
 * - resource (version 4): on the spans that start a trace's part (no parent, or a remote one),
 *   the resource's attributes, bounded and redacted (resource.c); NULL on other spans, which
 *   keep service_name only. A store of an earlier version gets the column (NULL everywhere)
 *   when a writer opens it; readers of a store no writer opened since read NULL.
 * - indexes: the primary key's alone, which also finds a trace's spans (the reader sorts them
 *   by time). Each index costs every span written a b-tree insert: spans_start (start_ns),
 *   which no query used, and spans_trace_start (trace_id, start_ns), whose order the reader
 *   now makes itself, were a third of the writer's time on ingest (bench/ingest_bench.c) and
 *   are dropped from stores that have them.
 */
#include "base/log.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

#define SCHEMA_VERSION      4
#define WEFT_APPLICATION_ID 0x77656674 /* "weft" in PRAGMA application_id */

/* ------------------------------------------------------------------------------------------ */
/* Schema                                                                                      */

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS spans ("
    " trace_id TEXT NOT NULL,"
    " span_id TEXT NOT NULL,"
    " parent_span_id TEXT,"
    " parent_is_remote INTEGER NOT NULL DEFAULT 0,"
    " trace_state TEXT,"
    " flags INTEGER NOT NULL DEFAULT 0,"
    " name TEXT NOT NULL,"
    " kind INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " status_code INTEGER NOT NULL,"
    " status_message TEXT,"
    " attributes TEXT NOT NULL DEFAULT '{}',"
    " events TEXT NOT NULL DEFAULT '[]',"
    " links TEXT NOT NULL DEFAULT '[]',"
    " dropped_attributes_count INTEGER NOT NULL DEFAULT 0,"
    " dropped_events_count INTEGER NOT NULL DEFAULT 0,"
    " dropped_links_count INTEGER NOT NULL DEFAULT 0,"
    " service_name TEXT,"
    " scope_name TEXT,"
    " scope_version TEXT,"
    " resource TEXT," /* version 4: resource.c */
    " PRIMARY KEY (trace_id, span_id));"
    "CREATE TABLE IF NOT EXISTS traces ("
    " trace_id TEXT PRIMARY KEY,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " span_count INTEGER NOT NULL,"
    " error_count INTEGER NOT NULL,"
    " root_name TEXT,"
    " service_name TEXT,"
    " has_root INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS traces_start ON traces (start_ns);"
    /* Version 2: tail sampling's decisions, shared by the weft
     * serve processes writing this store (docs/sampling.md). */
    "CREATE TABLE IF NOT EXISTS trace_decisions ("
    " trace_id TEXT PRIMARY KEY,"
    " keep INTEGER NOT NULL,"
    " rule TEXT NOT NULL,"
    " decided_ns INTEGER NOT NULL) WITHOUT ROWID;"
    /* Version 3: content-addressed payloads (store/payload.h,
     * docs/payloads.md): attribute values hold references into
     * this table; stored_ns is the last time a writer stored or
     * re-stored a record, what collection keys on. */
    "CREATE TABLE IF NOT EXISTS payloads ("
    " hash TEXT PRIMARY KEY,"
    " kind INTEGER NOT NULL,"
    " size INTEGER NOT NULL,"
    " data BLOB NOT NULL,"
    " stored_ns INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS payloads_stored ON payloads (stored_ns);";

/* Log a database failure with the path and SQLite's message. */
void
weft__store_log_db_error(weft_log_level level, const char *path, sqlite3 *db, const char *what)
{
    WEFT_LOG(level, "store %s: %s: %s", path, what,
             db != NULL ? sqlite3_errmsg(db) : "cannot allocate a connection");
}

static int
exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Read an integer: a PRAGMA's value or a one-row query's first column. */
static weft_err
query_int(sqlite3 *db, const char *sql, int *out)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);

    if (rc == SQLITE_OK) {
        rc = sqlite3_step(stmt);
    }
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(stmt);
        return WEFT_EIO;
    }
    *out = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return WEFT_OK;
}

/* Is the open database a weft store this build can read? Stores carry weft's
 * application_id (see sqlite.org/fileformat.html), so another program's database is told
 * apart from an old or empty one. @p why receives the reason when not. */
weft_err
weft__store_check_identity(sqlite3 *db, bool is_fresh_ok, int *version, const char **why)
{
    int app_id = 0;
    int tables = 0;

    *why = NULL;
    if (query_int(db, "PRAGMA user_version", version) != WEFT_OK ||
        query_int(db, "PRAGMA application_id", &app_id) != WEFT_OK ||
        query_int(db, "SELECT count(*) FROM sqlite_master", &tables) != WEFT_OK) {
        *why = "not a readable SQLite database";
        return WEFT_EIO;
    }
    if (app_id != WEFT_APPLICATION_ID && (app_id != 0 || tables > 0 || !is_fresh_ok)) {
        *why = "not a weft span store (another application's database?)";
        return WEFT_EIO;
    }
    if (*version > SCHEMA_VERSION) {
        *why = "written by a newer weft (unknown schema version)";
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* Create the schema on first use, inside one IMMEDIATE transaction so that two processes
 * opening a fresh store at once cannot both create it. */
weft_err
weft__store_migrate(sqlite3 *db, const char *path)
{
    const char *why = NULL;
    int version = 0;

    /* Before the first table: a new store gives deleted pages back to the file system on
     * `weft gc` (PRAGMA incremental_vacuum); on an existing one this only takes effect with
     * the VACUUM gc runs once (store/gc.c). */
    (void)exec(db, "PRAGMA auto_vacuum = INCREMENTAL");
    if (exec(db, "BEGIN IMMEDIATE") != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, path, db, "cannot lock the database");
        return WEFT_EIO;
    }
    if (weft__store_check_identity(db, true, &version, &why) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: %s", path, why);
        goto fail;
    }
    if (version < SCHEMA_VERSION) {
        char sql[96];

        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; PRAGMA application_id = %d",
                 SCHEMA_VERSION, WEFT_APPLICATION_ID);
        if (exec(db, schema_sql) != SQLITE_OK ||
            (version > 0 && version < 4 &&
             exec(db, "ALTER TABLE spans ADD COLUMN resource TEXT") != SQLITE_OK) ||
            exec(db, sql) != SQLITE_OK) {
            weft__store_log_db_error(WEFT_LOG_ERROR, path, db, "cannot create the schema");
            goto fail;
        }
    }
    if (exec(db, "DROP INDEX IF EXISTS spans_start; DROP INDEX IF EXISTS spans_trace_start") !=
        SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, path, db, "cannot drop the old indexes");
        goto fail;
    }
    if (exec(db, "COMMIT") != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, path, db, "cannot commit the schema");
        goto fail;
    }
    return WEFT_OK;
fail:
    exec(db, "ROLLBACK");
    return WEFT_EIO;
}
