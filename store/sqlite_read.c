/* store/sqlite_read.c - the SQLite backend's primitive reads (struct weft__store_reader_ops,
 * store.h), on which read.c builds the read API: a store opened read-only, statements
 * prepared once per handle.
 *
 * Readers never block the exporter: the database runs in WAL mode and is opened read-only,
 * and each batch is one transaction, so a reader sees it whole or not at all.
 */
#include "store.h"

#include "base/log.h"
#include "base/mem.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct sqlite_reader {
    sqlite3 *db;
    char *path;
    bool has_resource;     /* schema 4 or later: spans have the resource column */
    sqlite3_stmt *by_id;   /* spans_by_id's lookup, prepared once */
    sqlite3_stmt *payload; /* payloads' lookup, prepared on first use */
};

#define SPAN_COLUMNS                                                                       \
    "span_id, parent_span_id, parent_is_remote, trace_state, flags, name, kind, start_ns," \
    " end_ns, status_code, status_message, attributes, events, links,"                     \
    " dropped_attributes_count, dropped_events_count, dropped_links_count, service_name,"  \
    " scope_name, scope_version, "
/* The resource column, or NULL in a store of schema 3 or earlier no writer has opened since
 * (readers never change a store). [0]: the column is there; [1]: it is not. */
#define RESOURCE_OR_NULL(sql_head, sql_tail)                   \
    {                                                          \
        sql_head "resource" sql_tail, sql_head "NULL" sql_tail \
    }

static const char list_sql[] =
    "SELECT trace_id, start_ns, end_ns, span_count, error_count, root_name, service_name,"
    " has_root FROM traces ORDER BY start_ns DESC, trace_id LIMIT ?1";
/* The run a trace belongs to: weft.run.id of a root span (a weft run's root carries it). The
 * lookup walks the trace's spans by the primary key until a root, once per trace returned. */
static const char find_sql[] =
    "SELECT t.trace_id, t.start_ns, t.end_ns, t.span_count, t.error_count, t.root_name,"
    " t.service_name, t.has_root, (SELECT json_extract(s.attributes, '$.\"weft.run.id\"')"
    " FROM spans s WHERE s.trace_id = t.trace_id AND (s.parent_span_id IS NULL"
    " OR s.parent_is_remote) LIMIT 1) FROM traces t"
    " WHERE (?1 IS NULL OR t.service_name = ?1)"
    " AND (?2 IS NULL OR instr(lower(coalesce(t.root_name, '')), lower(?2)) > 0"
    " OR substr(t.trace_id, 1, length(?2)) = lower(?2))"
    " AND (?3 = 0 OR (?3 = 1 AND t.error_count > 0) OR (?3 = 2 AND t.error_count = 0))"
    " AND t.start_ns >= ?4 AND t.start_ns < ?5"
    " AND (?6 IS NULL OR t.start_ns < ?7 OR (t.start_ns = ?7 AND t.trace_id > ?6))"
    " ORDER BY t.start_ns DESC, t.trace_id LIMIT ?8";
static const char last_sql[] =
    "SELECT trace_id FROM traces ORDER BY start_ns DESC, trace_id LIMIT ?1";
/* With what weft_store_trace_stamp() reads (read.c, add_id() reads the id only). */
static const char ids_sql[] = "SELECT trace_id, span_count, error_count, start_ns, end_ns"
                              " FROM traces WHERE trace_id >= ?1 AND trace_id < ?2"
                              " ORDER BY trace_id LIMIT ?3";
/* In the primary key's order (span id): read.c orders them. */
static const char *const spans_sql[2] =
    RESOURCE_OR_NULL("SELECT " SPAN_COLUMNS, " FROM spans WHERE trace_id = ?1 LIMIT ?2");
static const char *const span_sql[2] = RESOURCE_OR_NULL(
    "SELECT " SPAN_COLUMNS, " FROM spans WHERE trace_id = ?1 AND span_id = ?2 LIMIT ?3");
/* The outline of a trace (NODE columns) is read in the table's order, rowid ascending, not in
 * the primary key's (trace_id, span_id): random span ids (as SDKs make them) made that a jump to
 * a random page of the table per span, and those jumps were 30 % of the explorer's cold
 * first part at 100,000 spans (docs/PERFORMANCE.md, "The explorer"). Spans are stored a batch
 * at a time, so a trace's rows mostly lie close together: when its rowids (from the index:
 * nodes_span_sql) span at most NODES_SPREAD times its rows, the table is scanned over that range
 * and other traces' rows are skipped (`+trace_id`: not through the index); otherwise a sorted
 * list of its rowids is looked up in order (`rowid IN (...)`, a temporary b-tree of them).
 * read.c orders the rows. */
#define NODES_SPREAD 4
#define NODE_COLUMNS \
    "SELECT span_id, parent_span_id, parent_is_remote, name, start_ns, end_ns, status_code"
/* The explorer's marker (store.h, NODE_MARK). A text search first (contains(), below): most
 * spans have no such text, and only those that do are parsed, so the mark costs a scan of two
 * columns. */
#define NODE_MARK_COLUMN                                                                        \
    ", (weft_contains(events, 'weft.stuck_loop') AND EXISTS (SELECT 1 FROM json_each(events) e" \
    " WHERE json_extract(e.value, '$.name') = 'weft.stuck_loop'))"                              \
    " OR (weft_contains(attributes, 'circuit_breaker')"                                         \
    " AND json_extract(attributes, '$.\"weft.decision.layer\"') = 'circuit_breaker')"
#define NODES_IN    " FROM spans WHERE rowid IN (SELECT rowid FROM spans WHERE trace_id = ?1) LIMIT ?2"
#define NODES_RANGE " FROM spans WHERE rowid BETWEEN ?3 AND ?4 AND +trace_id = ?1 LIMIT ?2"
static const char nodes_span_sql[] =
    "SELECT min(rowid), max(rowid), count(*) FROM spans WHERE trace_id = ?1";
static const char *const nodes_sql[2][2] = {
    {NODE_COLUMNS NODES_IN, NODE_COLUMNS NODE_MARK_COLUMN NODES_IN},
    {NODE_COLUMNS NODES_RANGE, NODE_COLUMNS NODE_MARK_COLUMN NODES_RANGE}};

/* SQL weft_contains(HAYSTACK, NEEDLE): 1 when the text holds the needle. SQLite's instr()
 * compares at every byte; libc's strstr() is several times faster over the attributes of
 * 100,000 spans (45 ms against about 10 on this repository's explorer bench). The columns are
 * JSON text, which holds no NUL byte (it is escaped). */
static void
contains(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const char *hay = (const char *)sqlite3_value_text(argv[0]);
    const char *needle = argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL;

    sqlite3_result_int(ctx, hay != NULL && needle != NULL && strstr(hay, needle) != NULL);
}

static const char *
row_text(const struct weft__store_row *row, int col, size_t *len)
{
    sqlite3_stmt *stmt = row->cursor;
    const char *text = (const char *)sqlite3_column_text(stmt, col);

    if (len != NULL) {
        *len = text != NULL ? (size_t)sqlite3_column_bytes(stmt, col) : 0;
    }
    return text;
}

static int64_t
row_integer(const struct weft__store_row *row, int col)
{
    return (int64_t)sqlite3_column_int64(row->cursor, col);
}

/* Step @p stmt to its end, handing each row to @p fn; the statement is reset (not finalized)
 * afterwards. @return WEFT_OK, WEFT_EIO or what @p fn returned. */
static weft_err
each_row(sqlite3_stmt *stmt, weft__store_row_fn fn, void *user)
{
    struct weft__store_row row = {row_text, row_integer, stmt, 0};
    weft_err err = WEFT_OK;
    int rc = 0;

    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        err = fn(&row, user);
        row.index++;
    }
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    return err;
}

/* Prepare @p sql, bind @p texts to ?1.. and @p limit to ?@p limit_at, hand each row to
 * @p fn, and finalize it. */
static weft_err
run(struct sqlite_reader *r,
    const char *sql,
    const char *const *texts,
    int text_count,
    int limit_at,
    size_t limit,
    weft__store_row_fn fn,
    void *user)
{
    sqlite3_stmt *stmt = NULL;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(r->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    for (int i = 0; i < text_count; i++) {
        sqlite3_bind_text(stmt, i + 1, texts[i], -1, SQLITE_STATIC);
    }
    sqlite3_bind_int64(stmt, limit_at, (sqlite3_int64)limit);
    err = each_row(stmt, fn, user);
    sqlite3_finalize(stmt);
    return err;
}

static weft_err
sq_list(void *impl, size_t limit, weft__store_row_fn fn, void *user)
{
    return run(impl, list_sql, NULL, 0, 1, limit, fn, user);
}

static sqlite3_int64
ns_param(uint64_t ns)
{
    return ns > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)ns;
}

static weft_err
sq_find(void *impl, const struct weft_trace_query *q, weft__store_row_fn fn, void *user)
{
    struct sqlite_reader *r = impl;
    sqlite3_stmt *stmt = NULL;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(r->db, find_sql, -1, &stmt, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    sqlite3_bind_text(stmt, 1, q->service, -1, SQLITE_STATIC); /* NULL binds NULL */
    sqlite3_bind_text(stmt, 2, q->text, -1, SQLITE_STATIC);
    sqlite3_bind_int(stmt, 3, q->status);
    sqlite3_bind_int64(stmt, 4, ns_param(q->from_ns));
    sqlite3_bind_int64(stmt, 5, q->to_ns != 0 ? ns_param(q->to_ns) : INT64_MAX);
    sqlite3_bind_text(stmt, 6, q->after_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 7, ns_param(q->after_start_ns));
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)q->limit);
    err = each_row(stmt, fn, user);
    sqlite3_finalize(stmt);
    return err;
}

static weft_err
sq_ids(void *impl, const char *lo, const char *hi, size_t limit, weft__store_row_fn fn, void *user)
{
    const char *range[2] = {lo, hi};

    return lo == NULL ? run(impl, last_sql, NULL, 0, 1, limit, fn, user)
                      : run(impl, ids_sql, range, 2, 3, limit, fn, user);
}

static weft_err
sq_spans(void *impl,
         const char *trace_hex,
         const char *span_hex,
         size_t limit,
         bool is_outline,
         weft__store_row_fn fn,
         void *user)
{
    struct sqlite_reader *r = impl;
    const char *keys[2] = {trace_hex, span_hex};
    int v = r->has_resource ? 0 : 1;

    (void)is_outline; /* read.c filters the attributes; reading the column costs little here */
    return span_hex != NULL ? run(impl, span_sql[v], keys, 2, 3, limit, fn, user)
                            : run(impl, spans_sql[v], keys, 1, 2, limit, fn, user);
}

/* One prepared lookup by primary key per span. Measured on a 200,000-span trace, a page of
 * 10,000 took about as long as a page of none: ordering the outline is the read's cost, so
 * batched IN lists (SQL built at run time) would gain little. */
static weft_err
sq_spans_by_id(void *impl,
               const char *trace_hex,
               const char *const *span_hex,
               size_t count,
               weft__store_row_fn fn,
               void *user)
{
    struct sqlite_reader *r = impl;
    weft_err err = WEFT_OK;

    if (r->by_id == NULL && sqlite3_prepare_v2(r->db, span_sql[r->has_resource ? 0 : 1], -1,
                                               &r->by_id, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    for (size_t k = 0; err == WEFT_OK && k < count; k++) {
        sqlite3_reset(r->by_id);
        sqlite3_bind_text(r->by_id, 1, trace_hex, -1, SQLITE_STATIC);
        sqlite3_bind_text(r->by_id, 2, span_hex[k], -1, SQLITE_STATIC);
        sqlite3_bind_int64(r->by_id, 3, 1);
        err = each_row(r->by_id, fn, user);
    }
    sqlite3_reset(r->by_id);
    sqlite3_clear_bindings(r->by_id);
    return err;
}

/* The trace's rowids: *lo, *hi and how many (nodes_span_sql). */
static weft_err
nodes_span(struct sqlite_reader *r, const char *trace_hex, int64_t *lo, int64_t *hi, int64_t *n)
{
    sqlite3_stmt *stmt = NULL;
    int rc = 0;

    *lo = *hi = *n = 0;
    if (sqlite3_prepare_v2(r->db, nodes_span_sql, -1, &stmt, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    sqlite3_bind_text(stmt, 1, trace_hex, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        *lo = sqlite3_column_int64(stmt, 0);
        *hi = sqlite3_column_int64(stmt, 1);
        *n = sqlite3_column_int64(stmt, 2);
    }
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? WEFT_OK : WEFT_EIO;
}

static weft_err
sq_nodes(void *impl,
         const char *trace_hex,
         size_t limit,
         bool with_marks,
         weft__store_row_fn fn,
         void *user)
{
    struct sqlite_reader *r = impl;
    sqlite3_stmt *stmt = NULL;
    bool is_own_txn = sqlite3_get_autocommit(r->db) != 0;
    int64_t lo = 0;
    int64_t hi = 0;
    int64_t n = 0;
    bool is_range = false;
    weft_err err = WEFT_OK;

    /* One snapshot for both statements, unless the caller holds one (a page read). */
    if (is_own_txn && sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    err = nodes_span(r, trace_hex, &lo, &hi, &n);
    is_range = err == WEFT_OK && n > 0 && (hi - lo) / NODES_SPREAD < n;
    if (err == WEFT_OK && n > 0 &&
        sqlite3_prepare_v2(r->db, nodes_sql[is_range][with_marks], -1, &stmt, NULL) != SQLITE_OK) {
        err = WEFT_EIO;
    }
    if (stmt != NULL) {
        sqlite3_bind_text(stmt, 1, trace_hex, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 2, (sqlite3_int64)limit);
        if (is_range) {
            sqlite3_bind_int64(stmt, 3, lo);
            sqlite3_bind_int64(stmt, 4, hi);
        }
        err = each_row(stmt, fn, user);
        sqlite3_finalize(stmt);
    }
    if (is_own_txn) {
        (void)sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL); /* a read: nothing to lose */
    }
    return err;
}

/* One prepared lookup by primary key per record: a text's chunks are a few dozen, and each
 * lookup is a b-tree descent in a page the last one probably read. */
static weft_err
sq_payloads(void *impl,
            const char *const *hashes,
            size_t count,
            weft__payload_each_fn each,
            void *each_user)
{
    struct sqlite_reader *r = impl;
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (r->payload == NULL &&
        sqlite3_prepare_v2(r->db, "SELECT kind, size, data FROM payloads WHERE hash = ?1", -1,
                           &r->payload, NULL) != SQLITE_OK) {
        return WEFT_EIO;
    }
    for (size_t k = 0; err == WEFT_OK && k < count; k++) {
        sqlite3_reset(r->payload);
        sqlite3_bind_text(r->payload, 1, hashes[k], -1, SQLITE_STATIC);
        rc = sqlite3_step(r->payload);
        if (rc == SQLITE_ROW) {
            struct weft__payload_record rec = {
                .kind = (weft__payload_kind)sqlite3_column_int(r->payload, 0),
                .raw_len = (size_t)sqlite3_column_int64(r->payload, 1),
                .data = sqlite3_column_blob(r->payload, 2),
                .len = (size_t)sqlite3_column_bytes(r->payload, 2),
            };

            snprintf(rec.hash, sizeof(rec.hash), "%s", hashes[k]);
            err = each(&rec, each_user);
        } else if (rc != SQLITE_DONE) {
            err = WEFT_EIO;
        }
    }
    sqlite3_reset(r->payload);
    sqlite3_clear_bindings(r->payload);
    return err;
}

static weft_err
sq_begin(void *impl)
{
    struct sqlite_reader *r = impl;

    return sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? WEFT_OK : WEFT_EIO;
}

static void
sq_end(void *impl)
{
    struct sqlite_reader *r = impl;

    /* Ends a read transaction; it wrote nothing, so this cannot lose data. */
    (void)sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
}

static const char *
sq_errmsg(void *impl)
{
    struct sqlite_reader *r = impl;

    return sqlite3_errmsg(r->db);
}

/* Outside a transaction the handle holds no snapshot: its next read sees every commit. */
static bool
sq_is_reusable(void *impl)
{
    struct sqlite_reader *r = impl;

    return sqlite3_get_autocommit(r->db) != 0;
}

static void
sq_close(void *impl)
{
    struct sqlite_reader *r = impl;

    if (r == NULL) {
        return;
    }
    sqlite3_finalize(r->by_id);
    sqlite3_finalize(r->payload);
    sqlite3_close_v2(r->db);
    weft__free(r->path);
    weft__free(r);
}

static const struct weft__store_reader_ops sqlite_ops = {
    .name = "sqlite",
    .list = sq_list,
    .find = sq_find,
    .ids = sq_ids,
    .spans = sq_spans,
    .spans_by_id = sq_spans_by_id,
    .nodes = sq_nodes,
    .payloads = sq_payloads,
    .begin = sq_begin,
    .end = sq_end,
    .errmsg = sq_errmsg,
    .is_reusable = sq_is_reusable,
    .close = sq_close,
};

weft_err
weft__store_sqlite_reader_open(const char *path,
                               const struct weft__store_reader_ops **ops,
                               void **impl)
{
    struct sqlite_reader *r = NULL;
    struct stat st;
    const char *why = NULL;
    int version = 0;

    if (stat(path, &st) != 0) {
        return errno == ENOENT || errno == ENOTDIR ? WEFT_ENOTFOUND : WEFT_EIO;
    }
    r = weft__calloc(1, sizeof(*r));
    if (r == NULL || (r->path = weft__strdup(path)) == NULL) {
        weft__free(r);
        return WEFT_ENOMEM;
    }
    /* NOMUTEX: a handle is confined to one thread at a time (include/weft/store.h), so
     * SQLite's per-connection mutex, taken by every sqlite3_column_*() call, guards nothing;
     * locking and unlocking it was 6 % of the explorer's cold read of a 100,000-span trace. */
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, path, r->db, "cannot open");
        sq_close(r);
        return WEFT_EIO;
    }
    sqlite3_extended_result_codes(r->db, 1);
    sqlite3_busy_timeout(r->db, STORE_BUSY_TIMEOUT_MS);
    (void)sqlite3_exec(r->db, "PRAGMA mmap_size = 1073741824", NULL, NULL, NULL);
    if (sqlite3_create_function(r->db, "weft_contains", 2,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                contains, NULL, NULL) != SQLITE_OK) {
        sq_close(r);
        return WEFT_ENOMEM; /* registering a function allocates, nothing else fails */
    }
    if (weft__store_check_identity(r->db, false, &version, &why) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: %s", path, why);
        sq_close(r);
        return WEFT_EIO;
    }
    r->has_resource = version >= 4;
    *ops = &sqlite_ops;
    *impl = r;
    return WEFT_OK;
}
