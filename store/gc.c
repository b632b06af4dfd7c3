/* store/gc.c - retention of the span store (weft_store_gc(), include/weft/store.h): whole
 * traces past an age, and for SQLite past a size cap, oldest first; the space given back.
 *
 * SQLite: traces are chosen from the summaries (their end for the age, their start for the
 * cap), their spans deleted by trace id through the primary key, in one IMMEDIATE transaction
 * per step so the exporter waits at most one step; then the freed pages go back to the file
 * system: PRAGMA incremental_vacuum on a store created with auto_vacuum=INCREMENTAL (every
 * store since this release), one whole VACUUM (which also switches it) on an older one; and
 * the WAL is truncated so the file size says what is kept. PostgreSQL: whole partitions are
 * dropped (weft__store_pg_drop_before()); its dry run counts the traces that would go.
 */
#include "pg.h"
#include "store.h"

#include "base/log.h"
#include "base/mem.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CAP_STEP 200 /* traces deleted per transaction while over the size cap */

int64_t
weft__store_file_bytes(const char *path)
{
    char wal[4200];
    struct stat st;
    int64_t total = -1;

    if (stat(path, &st) == 0) {
        total = (int64_t)st.st_size;
        snprintf(wal, sizeof(wal), "%s-wal", path);
        if (stat(wal, &st) == 0) {
            total += (int64_t)st.st_size;
        }
    }
    return total;
}

static weft_err
db_error(sqlite3 *db, const char *what, char *error, size_t error_len)
{
    snprintf(error, error_len, "%s: %s", what, sqlite3_errmsg(db));
    return WEFT_EIO;
}

/* One integer from @p sql with ?1 bound to @p arg. @return WEFT_OK or WEFT_EIO. */
static weft_err
query_i64(sqlite3 *db, const char *sql, int64_t arg, int64_t *out)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);

    if (rc == SQLITE_OK) {
        if (sqlite3_bind_parameter_count(stmt) > 0) {
            sqlite3_bind_int64(stmt, 1, arg);
        }
        rc = sqlite3_step(stmt);
    }
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? WEFT_OK : WEFT_EIO;
}

static weft_err
exec_i64(sqlite3 *db, const char *sql, int64_t arg)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);

    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(stmt, 1, arg);
        rc = sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    return rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* The traces that ended before @p cutoff, or (by_start) the @p cutoff oldest by start, go. */
static const char age_traces[] = "SELECT trace_id FROM traces WHERE end_ns < ?1";
static const char oldest_traces[] =
    "SELECT trace_id FROM traces ORDER BY start_ns, trace_id LIMIT ?1";

/* Count (dry run) or delete the traces @p select picks with @p arg, adding to @p out. */
static weft_err
drop_traces(
    sqlite3 *db, const char *select, int64_t arg, bool dry_run, struct weft_store_gc_report *out)
{
    char count_traces[256];
    char count_spans[320];
    char del_spans[320];
    char del_traces[320];
    int64_t traces = 0;
    int64_t spans = 0;
    weft_err err = WEFT_OK;

    snprintf(count_traces, sizeof(count_traces), "SELECT count(*) FROM (%s)", select);
    snprintf(count_spans, sizeof(count_spans), "SELECT count(*) FROM spans WHERE trace_id IN (%s)",
             select);
    snprintf(del_spans, sizeof(del_spans), "DELETE FROM spans WHERE trace_id IN (%s)", select);
    snprintf(del_traces, sizeof(del_traces), "DELETE FROM traces WHERE trace_id IN (%s)", select);
    err = query_i64(db, count_traces, arg, &traces);
    if (err == WEFT_OK) {
        err = query_i64(db, count_spans, arg, &spans);
    }
    /* A dry run deletes too, in the transaction its caller rolls back: so it can count the
     * payload records the deletion would free. */
    if (err == WEFT_OK && traces > 0) {
        /* spans first: the summaries say which traces go */
        err = exec_i64(db, del_spans, arg);
        if (err == WEFT_OK) {
            err = exec_i64(db, del_traces, arg);
        }
        if (err == WEFT_OK) {
            size_t payloads = 0;

            err = weft__store_sqlite_payload_sweep(db, dry_run, &payloads);
            out->payloads += payloads;
        }
    }
    if (err == WEFT_OK) {
        out->traces += (size_t)traces;
        out->spans += (size_t)spans;
    }
    return err;
}

/* Bytes of pages in use: what the file would hold with every free page given back. */
static weft_err
live_bytes(sqlite3 *db, int64_t *out)
{
    int64_t pages = 0;
    int64_t free_pages = 0;
    int64_t page_size = 0;
    weft_err err = query_i64(db, "PRAGMA page_count", 0, &pages);

    if (err == WEFT_OK) {
        err = query_i64(db, "PRAGMA freelist_count", 0, &free_pages);
    }
    if (err == WEFT_OK) {
        err = query_i64(db, "PRAGMA page_size", 0, &page_size);
    }
    *out = (pages - free_pages) * page_size;
    return err;
}

/* One step in its own IMMEDIATE transaction. */
static weft_err
in_txn(sqlite3 *db,
       const char *select,
       int64_t arg,
       bool dry_run,
       struct weft_store_gc_report *out,
       char *error,
       size_t error_len)
{
    weft_err err = WEFT_OK;

    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        return db_error(db, "cannot lock the store", error, error_len);
    }
    err = drop_traces(db, select, arg, dry_run, out);
    if (err == WEFT_OK && !dry_run && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK || dry_run) {
        if (err != WEFT_OK) {
            (void)db_error(db, "cannot delete traces", error, error_len);
        }
        (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    return err;
}

/* Give the freed pages back and truncate the WAL. */
static weft_err
reclaim(sqlite3 *db, char *error, size_t error_len)
{
    int64_t mode = 0;
    weft_err err = query_i64(db, "PRAGMA auto_vacuum", 0, &mode);

    if (err != WEFT_OK) {
        return db_error(db, "cannot read auto_vacuum", error, error_len);
    }
    if (mode == 2) { /* INCREMENTAL */
        err = sqlite3_exec(db, "PRAGMA incremental_vacuum", NULL, NULL, NULL) == SQLITE_OK
                  ? WEFT_OK
                  : db_error(db, "incremental vacuum failed", error, error_len);
    } else if (sqlite3_exec(db, "PRAGMA auto_vacuum = INCREMENTAL; VACUUM", NULL, NULL, NULL) !=
               SQLITE_OK) {
        err = db_error(db, "vacuum failed", error, error_len);
    }
    if (err == WEFT_OK &&
        sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) != SQLITE_OK) {
        err = db_error(db, "cannot truncate the WAL", error, error_len);
    }
    return err;
}

static weft_err
sqlite_gc(const char *path,
          uint64_t cutoff_ns,
          uint64_t max_bytes,
          bool dry_run,
          struct weft_store_gc_report *out,
          char *error,
          size_t error_len)
{
    sqlite3 *db = NULL;
    const char *why = NULL;
    int version = 0;
    int64_t live = 0;
    struct stat st;
    weft_err err = WEFT_OK;

    if (stat(path, &st) != 0) {
        snprintf(error, error_len, "no span store at %s", path);
        return WEFT_ENOTFOUND;
    }
    out->bytes_before = weft__store_file_bytes(path);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        err = db_error(db, "cannot open the store", error, error_len);
        sqlite3_close_v2(db);
        return err;
    }
    sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
    if (weft__store_check_identity(db, false, &version, &why) != WEFT_OK) {
        snprintf(error, error_len, "%s: %s", path, why);
        sqlite3_close_v2(db);
        return WEFT_EIO;
    }
    if (cutoff_ns > 0) {
        err = in_txn(db, age_traces, (int64_t)(cutoff_ns > INT64_MAX ? INT64_MAX : cutoff_ns),
                     dry_run, out, error, error_len);
    }
    /* Over the cap: the oldest traces go, a step at a time, until the live pages fit (a dry
     * run counts one step's worth: what the first step would delete). */
    while (err == WEFT_OK && max_bytes > 0 && (err = live_bytes(db, &live)) == WEFT_OK &&
           (uint64_t)live > max_bytes) {
        size_t before = out->traces;
        int64_t traces = 0;
        int64_t step = 0;
        err = query_i64(db, "SELECT count(*) FROM traces", 0, &traces);
        /* the share of traces the excess is, assuming traces of like size, at least one */
        step = traces * (live - (int64_t)max_bytes) / live + 1;
        step = step < CAP_STEP ? step : CAP_STEP;
        err =
            err == WEFT_OK ? in_txn(db, oldest_traces, step, dry_run, out, error, error_len) : err;
        if (dry_run || out->traces == before) {
            break; /* nothing left to delete, or a dry run */
        }
    }
    if (err == WEFT_OK && !dry_run && out->traces > 0) {
        err = reclaim(db, error, error_len);
    }
    sqlite3_close_v2(db);
    out->bytes_after = dry_run ? out->bytes_before : weft__store_file_bytes(path);
    return err;
}

/* A dry run on PostgreSQL: the traces that ended before @p cutoff_ns. */
static weft_err
pg_count(const char *url,
         uint64_t cutoff_ns,
         struct weft_store_gc_report *out,
         char *error,
         size_t error_len)
{
    static const char sql[] = "SELECT count(*) FROM weft_traces WHERE end_ns < $1::bigint";
    struct weft__store_pg pg;
    char cutoff[24];
    const char *params[1] = {cutoff};
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    memset(&pg, 0, sizeof(pg));
    snprintf(cutoff, sizeof(cutoff), "%llu",
             (unsigned long long)(cutoff_ns > INT64_MAX ? INT64_MAX : cutoff_ns));
    err = weft__store_pg_connect(&pg, url);
    if (err == WEFT_OK) {
        res = weft__store_pg_run(&pg, sql, 1, params, true);
        if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK) {
            err = weft__store_pg_fail(&pg, res, "cannot count old traces");
        } else {
            out->traces = (size_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        }
        PQclear(res);
    }
    if (err != WEFT_OK) {
        snprintf(error, error_len, "%s", pg.errmsg);
    }
    weft__store_pg_close(&pg);
    return err;
}

weft_err
weft__store_pg_gc(const char *url,
                  uint64_t cutoff_ns,
                  bool dry_run,
                  struct weft_store_gc_report *out,
                  char *error,
                  size_t error_len)
{
    char where[512];
    weft_err err = WEFT_OK;

    if (cutoff_ns == 0) {
        return WEFT_OK; /* no size cap on PostgreSQL: nothing to do without an age */
    }
    if (dry_run) {
        return pg_count(url, cutoff_ns, out, error, error_len);
    }
    err =
        weft__store_pg_drop_before(url, cutoff_ns, &out->partitions, &out->traces, &out->payloads);
    if (err != WEFT_OK) {
        weft__store_redact_url(url, where, sizeof(where));
        snprintf(error, error_len, "store %s: retention failed (%s; the log says more)", where,
                 weft_strerror(err));
    }
    return err;
}

weft_err
weft_store_gc(const char *location,
              uint64_t cutoff_ns,
              uint64_t max_bytes,
              bool dry_run,
              struct weft_store_gc_report *out,
              char *error,
              size_t error_len)
{
    char path[4096];
    char scratch[8];
    weft_err err = WEFT_OK;

    if (error == NULL || error_len == 0) {
        error = scratch;
        error_len = sizeof(scratch);
    }
    error[0] = '\0';
    if (out == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    out->bytes_before = -1;
    out->bytes_after = -1;
    if (location == NULL) {
        err = weft_store_default_path(path, sizeof(path));
        if (err != WEFT_OK) {
            return err;
        }
        location = path;
    }
    if (weft__store_is_pg_url(location)) {
        return weft__store_pg_gc(location, cutoff_ns, dry_run, out, error, error_len);
    }
    return sqlite_gc(location, cutoff_ns, max_bytes, dry_run, out, error, error_len);
}

weft_err
weft__store_shape(const char *location, int64_t *partitions, int64_t *oldest_start_ns)
{
    sqlite3 *db = NULL;
    weft_err err = WEFT_OK;

    *partitions = -1;
    *oldest_start_ns = 0;
    if (weft__store_is_pg_url(location)) {
        return weft__store_pg_shape(location, partitions, oldest_start_ns);
    }
    if (sqlite3_open_v2(location, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return WEFT_EIO;
    }
    sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
    /* traces_start answers it from one end of the index */
    err = query_i64(db, "SELECT COALESCE(min(start_ns), 0) FROM traces", 0, oldest_start_ns);
    sqlite3_close(db);
    return err;
}
