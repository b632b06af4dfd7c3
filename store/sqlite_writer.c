/* store/sqlite_writer.c - the span store's exporter: writes ended spans into the local
 * SQLite store (schema in sqlite_schema.c, JSON columns in json.c) and keeps each trace's
 * summary row current, incrementally, batch by batch; and the one other writer of the store,
 * weft_store_add_interrupted_span(), which closes the spans of a run whose process died.
 *
 * Writing: one IMMEDIATE transaction per batch with statements prepared once and reused; WAL
 * mode so that readers (weft trace, the web UI) never block the exporter and see each batch
 * whole or not at all; synchronous=NORMAL, which in WAL mode survives an application crash and
 * loses at most the last batches on power loss, an acceptable trade for a local trace store.
 * The database and its directory are created private (0600 and 0700): traces can carry
 * prompts and tool output.
 *
 * Invariants: the exporter is called by one thread at a time (export.h); shutdown may race
 * with an export that overran its deadline, so it only raises an atomic flag and the
 * connection is closed in destroy.
 */
#include "store.h"

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "tracing/exporter.h"
#include "tracing/ids.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/store.h>

#define INSERT_COLUMNS                                                                     \
    " INTO spans (trace_id, span_id, parent_span_id, parent_is_remote,"                    \
    " trace_state, flags, name, kind, start_ns, end_ns, status_code, status_message,"      \
    " attributes, events, links, dropped_attributes_count, dropped_events_count,"          \
    " dropped_links_count, service_name, scope_name, scope_version, resource)"             \
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17," \
    " ?18, ?19, ?20, ?21, ?22)"

/* A span is first inserted plainly: the primary key refuses it when it is already stored,
 * which tells the summary a span was replaced without a lookup per span; only then is it
 * written again with OR REPLACE. */
static const char insert_sql[] = "INSERT" INSERT_COLUMNS;
static const char replace_sql[] = "INSERT OR REPLACE" INSERT_COLUMNS;

/* The root is the span without a parent; failing that, one whose parent is remote (a local
 * root in a distributed trace); failing that (the root has not ended yet), the earliest. */
#define ROOT_ORDER \
    "ORDER BY (parent_span_id IS NULL) DESC, parent_is_remote DESC, start_ns, span_id"

static const char summary_sql[] =
    "INSERT OR REPLACE INTO traces (trace_id, start_ns, end_ns, span_count, error_count,"
    " root_name, service_name, has_root)"
    " SELECT ?1, MIN(start_ns), MAX(end_ns), COUNT(*), SUM(status_code = 2),"
    " (SELECT name FROM spans WHERE trace_id = ?1 " ROOT_ORDER " LIMIT 1),"
    " (SELECT service_name FROM spans WHERE trace_id = ?1 " ROOT_ORDER " LIMIT 1),"
    " EXISTS (SELECT 1 FROM spans WHERE trace_id = ?1"
    " AND (parent_span_id IS NULL OR parent_is_remote))"
    " FROM spans WHERE trace_id = ?1";

/* ------------------------------------------------------------------------------------------ */
/* The exporter                                                                                */

struct store_exporter {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *begin;
    sqlite3_stmt *commit;
    sqlite3_stmt *rollback;
    sqlite3_stmt *insert;
    sqlite3_stmt *replace;
    sqlite3_stmt *summary;
    /* The incremental summary (summary_add): prepared on first use. */
    sqlite3_stmt *summary_new;
    sqlite3_stmt *summary_get;
    sqlite3_stmt *summary_set;
    sqlite3_stmt *payload;                /* prepared on first use */
    struct weft__store_payloads payloads; /* the batch's, when its columns are built here */
    struct weft__buf attrs_text;
    struct weft__buf events_text;
    struct weft__buf links_text;
    /* The resource column (resource.c) of the batch's root candidates, kept for the next
     * span of the same resource in the batch (a batch's spans share a few resources). */
    struct weft__buf resource_text;
    const struct weft_resource *resource_of; /* what resource_text holds; NULL: nothing */
    bool has_resource_text;
    struct weft__store_checkpointer *checkpointer; /* NULL: SQLite checkpoints in COMMIT */
    atomic_bool is_shut_down;
    uint64_t failures; /* consecutive failed batches: only the first is logged at ERROR */
};

static int
exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Create the database file private before SQLite opens it: SQLite gives its -wal and -shm
 * files the database's permissions, so all three stay 0600. */
static weft_err
create_private(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    struct stat sb;

    if (fd < 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: cannot create the database: %s", path, strerror(errno));
        return WEFT_EIO;
    }
    /* A database an older weft created 0644 loses group and other access too. */
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0 &&
        sb.st_uid == geteuid()) {
        (void)fchmod(fd, sb.st_mode & 0700);
    }
    close(fd);
    return WEFT_OK;
}

/* PRAGMA journal_mode = WAL, its row in *stmt. Turning a new file to WAL takes an exclusive
 * lock for which SQLite does not call the busy handler, so two processes opening the same new
 * store at once (a run and a worker on one WEFT_HOME) would see SQLITE_BUSY: retried here for
 * as long as the busy timeout. @return true with the row ready. */
static bool
journal_wal(sqlite3 *db, sqlite3_stmt **stmt)
{
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)STORE_BUSY_TIMEOUT_MS * 1000000u;

    for (;;) {
        int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, stmt, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(*stmt);
        }
        if (rc == SQLITE_ROW) {
            return true;
        }
        sqlite3_finalize(*stmt);
        *stmt = NULL;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) {
            return false;
        }
        if (weft__monotonic_ns() >= deadline) {
            return false;
        }
        weft__sleep_ms(10);
    }
}

static weft_err
store_open_write(struct store_exporter *st)
{
    sqlite3_stmt *stmt = NULL;
    const char *mode = NULL;
    bool is_file = strcmp(st->path, ":memory:") != 0;
    weft_err err = WEFT_OK;

    if (is_file) {
        err = weft__mkdir_parents(st->path, 0700);
        if (err == WEFT_EIO) {
            WEFT_LOG(WEFT_LOG_ERROR, "store %s: cannot create its directory: %s", st->path,
                     strerror(errno));
        }
        if (err == WEFT_OK) {
            err = create_private(st->path);
        }
        if (err != WEFT_OK) {
            return err;
        }
    }
    /* NOMUTEX: one thread at a time uses the exporter (export.h) and so the connection, and
     * SQLite's per-call mutex was a measurable share of binding a span's 21 columns. */
    if (sqlite3_open_v2(st->path, &st->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot open");
        return WEFT_EIO;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    /* journal_mode answers with the mode in force; a file system without shared memory
     * (some network mounts) keeps the rollback journal, which still works, only slower. */
    if (!journal_wal(st->db, &stmt)) {
        weft__store_log_db_error(WEFT_LOG_ERROR, st->path, st->db, "not a usable SQLite database");
        return WEFT_EIO;
    }
    mode = (const char *)sqlite3_column_text(stmt, 0);
    if (is_file && (mode == NULL || strcmp(mode, "wal") != 0)) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: WAL mode unavailable (journal mode %s)", st->path,
                 mode != NULL ? mode : "unknown");
    }
    sqlite3_finalize(stmt);
    if (exec(st->db, "PRAGMA synchronous = NORMAL") != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot configure");
        return WEFT_EIO;
    }
    err = weft__store_migrate(st->db, st->path);
    if (err != WEFT_OK) {
        return err;
    }
    if (sqlite3_prepare_v3(st->db, "BEGIN IMMEDIATE", -1, SQLITE_PREPARE_PERSISTENT, &st->begin,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(st->db, "COMMIT", -1, SQLITE_PREPARE_PERSISTENT, &st->commit, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v3(st->db, "ROLLBACK", -1, SQLITE_PREPARE_PERSISTENT, &st->rollback,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(st->db, insert_sql, -1, SQLITE_PREPARE_PERSISTENT, &st->insert, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v3(st->db, replace_sql, -1, SQLITE_PREPARE_PERSISTENT, &st->replace,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(st->db, summary_sql, -1, SQLITE_PREPARE_PERSISTENT, &st->summary,
                           NULL) != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot prepare statements");
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static int
step_once(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);

    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return rc;
}

static sqlite3_int64
ns_column(uint64_t ns)
{
    return ns > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)ns;
}

/* A span's three JSON columns, in st's buffers or in a batch's prebuilt texts, and its ids in
 * hex: all bound SQLITE_STATIC (a copy per bind was a measurable share of a span's write), so
 * they live until the statement is reset. */
struct span_texts {
    const char *text[3];
    size_t len[3];
    const char *resource; /* the resource column; NULL but on a root candidate */
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    char parent_hex[2 * WEFT_SPAN_ID_SIZE + 1];
};

/* Bind @p text, or NULL when it is NULL. */
static void
bind_text_or_null(sqlite3_stmt *s, int column, const char *text)
{
    if (text != NULL) {
        sqlite3_bind_text(s, column, text, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(s, column);
    }
}

/* Bind every column of @p span to @p s, an insert_sql or replace_sql statement, with its JSON
 * columns and ids in @p t (see struct span_texts). */
static void
bind_span(sqlite3_stmt *s, const struct weft_span_data *span, struct span_texts *t)
{
    bool has_parent = weft__store_has_parent(span);

    weft_hex_encode(span->trace_id, WEFT_TRACE_ID_SIZE, t->trace_hex);
    weft_hex_encode(span->span_id, WEFT_SPAN_ID_SIZE, t->span_hex);
    weft_hex_encode(span->parent_span_id, WEFT_SPAN_ID_SIZE, t->parent_hex);
    sqlite3_bind_text(s, 1, t->trace_hex, 2 * WEFT_TRACE_ID_SIZE, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, t->span_hex, 2 * WEFT_SPAN_ID_SIZE, SQLITE_STATIC);
    bind_text_or_null(s, 3, has_parent ? t->parent_hex : NULL);
    sqlite3_bind_int(s, 4, has_parent && span->parent_is_remote);
    bind_text_or_null(s, 5, span->trace_state);
    sqlite3_bind_int(s, 6, span->trace_flags);
    sqlite3_bind_text(s, 7, span->name != NULL ? span->name : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 8, (int)span->kind);
    sqlite3_bind_int64(s, 9, ns_column(span->start_time_ns));
    sqlite3_bind_int64(s, 10, ns_column(span->end_time_ns));
    sqlite3_bind_int(s, 11, (int)span->status_code);
    bind_text_or_null(s, 12, span->status_code == WEFT_STATUS_ERROR ? span->status_message : NULL);
    for (int k = 0; k < 3; k++) {
        sqlite3_bind_text(s, 13 + k, t->text[k], (int)t->len[k], SQLITE_STATIC);
    }
    sqlite3_bind_int64(s, 16, span->dropped_attrs);
    sqlite3_bind_int64(s, 17, span->dropped_events);
    sqlite3_bind_int64(s, 18, span->dropped_links);
    bind_text_or_null(s, 19, weft__store_service_name(span));
    bind_text_or_null(s, 20, span->scope != NULL ? span->scope->name : NULL);
    bind_text_or_null(s, 21, span->scope != NULL ? span->scope->version : NULL);
    bind_text_or_null(s, 22, t->resource);
}

/* Step a statement whose every parameter the next use binds again: reset without clearing
 * the bindings. */
static int
step_rebound(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);

    sqlite3_reset(stmt);
    return rc;
}

/* The JSON columns of the @p i th span of a batch: from @p prebuilt, or written now into
 * st's buffers. */
static weft_err
span_texts(struct store_exporter *st,
           const struct weft_span_data *span,
           const struct weft__store_texts *prebuilt,
           size_t i,
           struct span_texts *t)
{
    weft_err err = WEFT_OK;

    t->resource = NULL;
    if (prebuilt != NULL) {
        for (size_t k = 0; k < 3; k++) {
            t->text[k] = weft__store_texts_column(prebuilt, 3 * i + k, &t->len[k]);
        }
        return WEFT_OK;
    }
    err = weft__store_attrs_text(span->attrs, span->attr_count, &st->payloads, &st->attrs_text);
    if (err == WEFT_OK) {
        err = weft__store_events_text(span, &st->events_text);
    }
    if (err == WEFT_OK) {
        err = weft__store_links_text(span, &st->links_text);
    }
    t->text[0] = st->attrs_text.data;
    t->text[1] = st->events_text.data;
    t->text[2] = st->links_text.data;
    t->len[0] = st->attrs_text.len;
    t->len[1] = st->events_text.len;
    t->len[2] = st->links_text.len;
    return err;
}

/* Write @p span with its columns @p t; *is_replaced says whether it replaced a stored span. */
static weft_err
insert_span(struct store_exporter *st,
            const struct weft_span_data *span,
            struct span_texts *t,
            bool *is_replaced)
{
    int rc = SQLITE_OK;

    *is_replaced = false;
    bind_span(st->insert, span, t);
    rc = step_rebound(st->insert);
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        *is_replaced = true;
        bind_span(st->replace, span, t);
        rc = step_rebound(st->replace);
    }
    return rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

static weft_err
update_summary(struct store_exporter *st, const uint8_t *trace_id)
{
    char hex[2 * WEFT_TRACE_ID_SIZE + 1];

    weft_hex_encode(trace_id, WEFT_TRACE_ID_SIZE, hex);
    sqlite3_bind_text(st->summary, 1, hex, -1, SQLITE_TRANSIENT);
    return step_once(st->summary) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* What one batch adds to one trace's summary. A run's spans reach the store in many small
 * batches (a flush at each checkpoint, docs/durability.md), so recomputing the summary from
 * every span of the trace each time would make a step's cost grow with the trace; and an
 * ingested trace usually arrives whole or with its root last, where the batch alone says what
 * the summary becomes. */
struct trace_delta {
    const uint8_t *trace_id;
    const struct weft_span_data *earliest; /* by (start, span id) */
    const struct weft_span_data *root;     /* the first root candidate in ROOT_ORDER, or NULL */
    uint64_t max_end;
    int64_t count;
    int64_t errors;
    bool is_replaced; /* a span replaced a stored one: recompute from the spans */
};

static bool
is_root_candidate(const struct weft_span_data *span)
{
    return !weft__store_has_parent(span) || span->parent_is_remote;
}

/* The resource column of @p span into @p t: only a root candidate's (resource.c). */
static weft_err
resource_column(struct store_exporter *st, const struct weft_span_data *span, struct span_texts *t)
{
    weft_err err = WEFT_OK;

    if (!is_root_candidate(span) || span->resource == NULL) {
        return WEFT_OK;
    }
    if (st->resource_of != span->resource) {
        err = weft__store_resource_text(span->resource, &st->resource_text);
        if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
            st->resource_of = NULL;
            return err;
        }
        st->resource_of = span->resource;
        st->has_resource_text = err == WEFT_OK;
    }
    t->resource = st->has_resource_text ? st->resource_text.data : NULL;
    return WEFT_OK;
}

/* (start, span id) as the store orders them: times as stored (clamped), ids as their hex. */
static bool
is_earlier(const struct weft_span_data *a, const struct weft_span_data *b)
{
    sqlite3_int64 as = ns_column(a->start_time_ns);
    sqlite3_int64 bs = ns_column(b->start_time_ns);

    return as < bs || (as == bs && memcmp(a->span_id, b->span_id, WEFT_SPAN_ID_SIZE) < 0);
}

/* ROOT_ORDER between two root candidates: no parent first, then a remote parent, then
 * (start, span id). */
static bool
is_better_root(const struct weft_span_data *a, const struct weft_span_data *b)
{
    bool a_has = weft__store_has_parent(a);
    bool b_has = weft__store_has_parent(b);

    if (a_has != b_has) {
        return !a_has;
    }
    return is_earlier(a, b);
}

static int
prepare_once(struct store_exporter *st, sqlite3_stmt **stmt, const char *sql)
{
    if (*stmt != NULL) {
        return SQLITE_OK;
    }
    return sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, NULL);
}

/* The summary of a trace with no summary row yet: its spans are the batch's (every writer
 * keeps the row in the same transaction as the spans), so the row is the batch's delta, with
 * the same root as summary_sql picks. */
static weft_err
summary_insert(struct store_exporter *st, const struct trace_delta *d, const char *hex)
{
    const struct weft_span_data *root = d->root != NULL ? d->root : d->earliest;
    sqlite3_stmt *s = NULL;

    if (prepare_once(
            st, &st->summary_new,
            "INSERT INTO traces (trace_id, start_ns, end_ns, span_count, error_count,"
            " root_name, service_name, has_root) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)") !=
        SQLITE_OK) {
        return WEFT_EIO;
    }
    s = st->summary_new;
    sqlite3_bind_text(s, 1, hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, ns_column(d->earliest->start_time_ns));
    sqlite3_bind_int64(s, 3, ns_column(d->max_end));
    sqlite3_bind_int64(s, 4, d->count);
    sqlite3_bind_int64(s, 5, d->errors);
    sqlite3_bind_text(s, 6, root->name != NULL ? root->name : "", -1, SQLITE_STATIC);
    if (weft__store_service_name(root) != NULL) {
        sqlite3_bind_text(s, 7, weft__store_service_name(root), -1, SQLITE_STATIC);
    }
    sqlite3_bind_int(s, 8, d->root != NULL);
    return step_once(s) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* Add @p d to its trace's summary row, with the same result as summary_sql: the root is the
 * parentless span, else one with a remote parent, else the earliest span. A trace without a
 * row gets the batch's (summary_insert). Falls back to summary_sql when the batch replaced a
 * span, holds a root candidate while one is stored (whose order is not kept), or ties with
 * the stored earliest span while there is no root. */
static weft_err
summary_add(struct store_exporter *st, const struct trace_delta *d)
{
    char hex[2 * WEFT_TRACE_ID_SIZE + 1];
    const struct weft_span_data *named = NULL;
    sqlite3_stmt *get = NULL;
    sqlite3_stmt *set = NULL;
    sqlite3_int64 start = 0;
    bool has_root = false;
    int rc = 0;

    if (d->is_replaced) {
        return update_summary(st, d->trace_id);
    }
    if (prepare_once(st, &st->summary_get,
                     "SELECT start_ns, has_root FROM traces WHERE trace_id = ?1") != SQLITE_OK ||
        prepare_once(st, &st->summary_set,
                     "UPDATE traces SET start_ns = MIN(start_ns, ?2), end_ns = MAX(end_ns, ?3),"
                     " span_count = span_count + ?4, error_count = error_count + ?5,"
                     " root_name = CASE WHEN ?6 THEN ?7 ELSE root_name END,"
                     " service_name = CASE WHEN ?6 THEN ?8 ELSE service_name END,"
                     " has_root = has_root OR ?9"
                     " WHERE trace_id = ?1") != SQLITE_OK) {
        return WEFT_EIO;
    }
    get = st->summary_get;
    set = st->summary_set;
    weft_hex_encode(d->trace_id, WEFT_TRACE_ID_SIZE, hex);
    sqlite3_bind_text(get, 1, hex, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(get);
    if (rc == SQLITE_ROW) {
        start = sqlite3_column_int64(get, 0);
        has_root = sqlite3_column_int(get, 1) != 0;
    }
    sqlite3_reset(get);
    sqlite3_clear_bindings(get);
    if (rc == SQLITE_DONE) {
        return summary_insert(st, d, hex);
    }
    if (rc != SQLITE_ROW) {
        return WEFT_EIO;
    }
    if ((has_root && d->root != NULL) ||
        (!has_root && d->root == NULL && ns_column(d->earliest->start_time_ns) == start)) {
        return update_summary(st, d->trace_id);
    }
    /* Any root candidate beats every stored span when none of those is one; without a root,
     * the earliest span names the trace. */
    if (d->root != NULL) {
        named = d->root;
    } else if (!has_root && ns_column(d->earliest->start_time_ns) < start) {
        named = d->earliest;
    }
    sqlite3_bind_text(set, 1, hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(set, 2, ns_column(d->earliest->start_time_ns));
    sqlite3_bind_int64(set, 3, ns_column(d->max_end));
    sqlite3_bind_int64(set, 4, d->count);
    sqlite3_bind_int64(set, 5, d->errors);
    sqlite3_bind_int(set, 6, named != NULL);
    sqlite3_bind_int(set, 9, d->root != NULL);
    if (named != NULL) {
        sqlite3_bind_text(set, 7, named->name != NULL ? named->name : "", -1, SQLITE_STATIC);
        if (weft__store_service_name(named) != NULL) {
            sqlite3_bind_text(set, 8, weft__store_service_name(named), -1, SQLITE_STATIC);
        }
    }
    return step_once(set) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* The delta of @p span's trace among the first @p traces of @p deltas, added when new. */
static struct trace_delta *
delta_of(struct trace_delta *deltas, size_t *traces, const struct weft_span_data *span)
{
    struct trace_delta *d = NULL;

    for (size_t t = *traces; t > 0 && d == NULL; t--) {
        if (memcmp(deltas[t - 1].trace_id, span->trace_id, WEFT_TRACE_ID_SIZE) == 0) {
            d = &deltas[t - 1];
        }
    }
    if (d == NULL) {
        d = &deltas[(*traces)++];
        d->trace_id = span->trace_id;
        d->earliest = span;
    }
    return d;
}

/* Write the payload records the batch's spans refer to (store.h), in hash order. A record
 * stored already only has its stored_ns brought forward, at most once per
 * WEFT__PAYLOAD_TOUCH_NS: collection keeps what was stored or referred to lately. */
static weft_err
write_payloads(struct store_exporter *st, const struct weft__store_payloads *pl)
{
    sqlite3_int64 now = (sqlite3_int64)weft__now_ns();

    if (pl->count == 0) {
        return WEFT_OK;
    }
    if (prepare_once(st, &st->payload, WEFT__STORE_PAYLOAD_UPSERT_SQLITE) != SQLITE_OK) {
        return WEFT_EIO;
    }
    for (size_t i = 0; i < pl->count; i++) {
        const struct weft__store_payload_rec *r = &pl->recs[i];

        sqlite3_bind_text(st->payload, 1, r->hash, WEFT__PAYLOAD_HEX_LEN, SQLITE_STATIC);
        sqlite3_bind_int(st->payload, 2, (int)r->kind);
        sqlite3_bind_int64(st->payload, 3, (sqlite3_int64)r->raw_len);
        sqlite3_bind_blob(st->payload, 4, weft__store_payloads_data(pl, i), (int)r->len,
                          SQLITE_STATIC);
        sqlite3_bind_int64(st->payload, 5, now);
        if (step_rebound(st->payload) != SQLITE_DONE) {
            return WEFT_EIO;
        }
    }
    return WEFT_OK;
}

static weft_err
write_batch(struct store_exporter *st,
            const struct weft_span_data *const *spans,
            size_t count,
            const struct weft__store_texts *prebuilt)
{
    struct trace_delta *deltas = weft__calloc(count, sizeof(*deltas));
    size_t traces = 0;
    weft_err err = WEFT_OK;

    if (deltas == NULL) {
        return WEFT_ENOMEM;
    }
    weft__store_payloads_reset(&st->payloads);
    st->resource_of = NULL; /* a resource's address may be another's in the next batch */
    for (size_t i = 0; i < count && err == WEFT_OK; i++) {
        const struct weft_span_data *span = spans[i];
        struct trace_delta *d = delta_of(deltas, &traces, span);
        struct span_texts t;
        bool is_replaced = false;

        err = span_texts(st, span, prebuilt, i, &t);
        if (err == WEFT_OK) {
            err = resource_column(st, span, &t);
        }
        if (err == WEFT_OK) {
            err = insert_span(st, span, &t, &is_replaced);
        }
        d->is_replaced = d->is_replaced || is_replaced;
        if (is_earlier(span, d->earliest)) {
            d->earliest = span;
        }
        if (is_root_candidate(span) && (d->root == NULL || is_better_root(span, d->root))) {
            d->root = span;
        }
        if (span->end_time_ns > d->max_end) {
            d->max_end = span->end_time_ns;
        }
        d->count++;
        d->errors += span->status_code == WEFT_STATUS_ERROR;
    }
    /* Refresh the summary of every trace the batch touched, once each. */
    for (size_t t = 0; t < traces && err == WEFT_OK; t++) {
        err = summary_add(st, &deltas[t]);
    }
    if (err == WEFT_OK && prebuilt == NULL) {
        weft__store_payloads_sort(&st->payloads); /* texts_build sorted prebuilt's */
    }
    if (err == WEFT_OK) {
        err = write_payloads(st, prebuilt != NULL ? &prebuilt->payloads : &st->payloads);
    }
    weft__free(deltas);
    return err;
}

static weft_err
write_texts(struct store_exporter *st,
            const struct weft_span_data *const *spans,
            size_t count,
            const struct weft__store_texts *prebuilt)
{
    weft_err err = WEFT_OK;

    if (atomic_load(&st->is_shut_down)) {
        return WEFT_ESTATE;
    }
    if (count == 0) {
        return WEFT_OK;
    }
    if (spans == NULL) {
        return WEFT_EINVAL;
    }
    weft__store_checkpointer_enter(st->checkpointer);
    if (step_once(st->begin) != SQLITE_DONE) {
        err = WEFT_EIO;
    } else {
        err = write_batch(st, spans, count, prebuilt);
        if (err == WEFT_OK && step_once(st->commit) != SQLITE_DONE) {
            err = WEFT_EIO;
        }
    }
    if (err != WEFT_OK) {
        /* Log before ROLLBACK replaces SQLite's message. */
        if (err == WEFT_ENOMEM) {
            WEFT_LOG(st->failures == 0 ? WEFT_LOG_ERROR : WEFT_LOG_DEBUG,
                     "store %s: out of memory encoding a batch", st->path);
        } else {
            weft__store_log_db_error(st->failures == 0 ? WEFT_LOG_ERROR : WEFT_LOG_DEBUG, st->path,
                                     st->db, "cannot write a batch");
        }
        st->failures++;
        if (!sqlite3_get_autocommit(st->db)) {
            step_once(st->rollback);
        }
    }
    weft__store_checkpointer_leave(st->checkpointer);
    if (err == WEFT_OK && st->failures > 0) {
        WEFT_LOG(WEFT_LOG_INFO, "store %s: writing again after %" PRIu64 " failed batches",
                 st->path, st->failures);
        st->failures = 0;
    }
    return err == WEFT_OK || err == WEFT_ENOMEM ? err : WEFT_EIO;
}

static weft_err
store_export(void *self,
             const struct weft_span_data *const *spans,
             size_t count,
             uint64_t deadline_ns,
             struct weft_export_result *result)
{
    (void)deadline_ns; /* bounded by the busy timeout, well inside any export deadline */
    (void)result;
    return write_texts(self, spans, count, NULL);
}

static weft_err
store_force_flush(void *self, uint64_t deadline_ns)
{
    (void)self;
    (void)deadline_ns;
    return WEFT_OK; /* every batch is committed before export returns */
}

static weft_err
store_shutdown(void *self, uint64_t deadline_ns)
{
    struct store_exporter *st = self;

    (void)deadline_ns;
    atomic_store(&st->is_shut_down, true);
    return WEFT_OK;
}

static void
store_destroy(void *self)
{
    struct store_exporter *st = self;

    if (st == NULL) {
        return;
    }
    weft__store_checkpointer_stop(st->checkpointer);
    sqlite3_finalize(st->begin);
    sqlite3_finalize(st->commit);
    sqlite3_finalize(st->rollback);
    sqlite3_finalize(st->insert);
    sqlite3_finalize(st->replace);
    sqlite3_finalize(st->summary);
    sqlite3_finalize(st->summary_new);
    sqlite3_finalize(st->summary_get);
    sqlite3_finalize(st->summary_set);
    sqlite3_finalize(st->payload);
    /* sqlite3_close_v2 checkpoints the WAL when this is the last connection. */
    sqlite3_close_v2(st->db);
    weft__buf_cleanup(&st->attrs_text);
    weft__buf_cleanup(&st->events_text);
    weft__buf_cleanup(&st->links_text);
    weft__buf_cleanup(&st->resource_text);
    weft__store_payloads_cleanup(&st->payloads);
    weft__free(st->path);
    weft__free(st);
}

static const struct weft_exporter_ops store_ops = {
    .name = "store",
    .export_batch = store_export,
    .force_flush = store_force_flush,
    .shutdown = store_shutdown,
    .destroy = store_destroy,
};

weft_err
weft__store_sqlite_exporter_new(const char *db_path, struct weft_exporter **out)
{
    struct store_exporter *st = NULL;
    weft_err err = WEFT_OK;

    /* store/writer.c resolves a NULL location to the default before it calls this */
    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (db_path == NULL || db_path[0] == '\0') {
        return WEFT_EINVAL;
    }
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    atomic_init(&st->is_shut_down, false);
    weft__buf_init(&st->attrs_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&st->events_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&st->links_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&st->resource_text, STORE_JSON_COLUMN_MAX);
    weft__store_payloads_init(&st->payloads);
    st->path = weft__strdup(db_path);
    if (st->path == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    err = store_open_write(st);
    if (err != WEFT_OK) {
        goto fail;
    }
    return weft_exporter_new(&store_ops, st, out);
fail:
    store_destroy(st);
    return err;
}

weft_err
weft__store_sqlite_export_texts(struct weft_exporter *ex,
                                const struct weft_span_data *const *spans,
                                size_t count,
                                const struct weft__store_texts *texts)
{
    struct store_exporter *st = weft__exporter_self(ex, &store_ops);

    if (st == NULL || (texts != NULL && texts->count != count)) {
        return WEFT_EINVAL;
    }
    return write_texts(st, spans, count, texts);
}

weft_err
weft__store_checkpoint_in_background(struct weft_exporter *ex, int pages, int backstop)
{
    struct store_exporter *st = weft__exporter_self(ex, &store_ops);

    if (st == NULL || st->checkpointer != NULL) {
        return WEFT_EINVAL;
    }
    return weft__store_checkpointer_start(st->db, st->path, pages, backstop, &st->checkpointer);
}

const struct weft__store_checkpointer *
weft__store_checkpointer(struct weft_exporter *ex)
{
    struct store_exporter *st = weft__exporter_self(ex, &store_ops);

    return st != NULL ? st->checkpointer : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Closing spans of interrupted runs (docs/durability.md)                                      */

static bool
is_hex_id(const char *s, size_t len)
{
    if (s == NULL || strlen(s) != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

static const char interrupted_sql[] =
    "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns,"
    " status_code, status_message, attributes, service_name, scope_name)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'interrupted', ?9,"
    " (SELECT service_name FROM spans WHERE trace_id = ?1 AND service_name IS NOT NULL LIMIT 1),"
    " 'weft.runtime'"
    " WHERE NOT EXISTS (SELECT 1 FROM spans WHERE trace_id = ?1 AND span_id = ?2)";

/* Bind @p span to interrupted_sql and run it once. */
static weft_err
insert_interrupted(sqlite3_stmt *stmt,
                   const struct weft_interrupted_span *span,
                   const char *attrs_text)
{
    sqlite3_bind_text(stmt, 1, span->trace_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, span->span_id, -1, SQLITE_STATIC);
    if (span->parent_span_id != NULL) {
        sqlite3_bind_text(stmt, 3, span->parent_span_id, -1, SQLITE_STATIC);
    }
    sqlite3_bind_text(stmt, 4, span->name != NULL ? span->name : "interrupted", -1, SQLITE_STATIC);
    sqlite3_bind_int(stmt, 5, (int)WEFT_SPAN_KIND_INTERNAL);
    sqlite3_bind_int64(stmt, 6, ns_column(span->start_ns));
    sqlite3_bind_int64(stmt, 7,
                       ns_column(span->end_ns > span->start_ns ? span->end_ns : span->start_ns));
    sqlite3_bind_int(stmt, 8, (int)WEFT_STATUS_ERROR);
    sqlite3_bind_text(stmt, 9, attrs_text, -1, SQLITE_STATIC);
    return sqlite3_step(stmt) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

weft_err
weft__store_sqlite_add_interrupted_span(const char *db_path,
                                        const struct weft_interrupted_span *span)
{
    struct store_exporter *st = NULL;
    sqlite3_stmt *stmt = NULL;
    json_t *attrs = NULL;
    char *attrs_text = NULL;
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    weft_err err = WEFT_OK;

    if (span == NULL || !is_hex_id(span->trace_id, 2 * WEFT_TRACE_ID_SIZE) ||
        !is_hex_id(span->span_id, 2 * WEFT_SPAN_ID_SIZE) ||
        (span->parent_span_id != NULL && !is_hex_id(span->parent_span_id, 2 * WEFT_SPAN_ID_SIZE))) {
        return WEFT_EINVAL;
    }
    attrs = json_pack("{s:b}", "weft.interrupted", 1);
    if (attrs != NULL && span->run_id != NULL) {
        json_object_set_new(attrs, "weft.run.id", json_string(span->run_id));
    }
    attrs_text = attrs != NULL ? json_dumps(attrs, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(attrs);
    if (attrs_text == NULL) {
        return WEFT_ENOMEM;
    }
    st = db_path != NULL ? weft__calloc(1, sizeof(*st)) : NULL; /* writer.c resolved it */
    if (st == NULL || (st->path = weft__strdup(db_path)) == NULL) {
        store_destroy(st);
        free(attrs_text);
        return db_path == NULL ? WEFT_EINVAL : WEFT_ENOMEM;
    }
    weft__buf_init(&st->attrs_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&st->events_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&st->links_text, STORE_JSON_COLUMN_MAX);
    err = store_open_write(st);
    if (err != WEFT_OK) {
        store_destroy(st);
        free(attrs_text);
        return err;
    }
    if (sqlite3_prepare_v2(st->db, interrupted_sql, -1, &stmt, NULL) != SQLITE_OK ||
        step_once(st->begin) != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        err = insert_interrupted(stmt, span, attrs_text);
    }
    if (err == WEFT_OK) {
        err = weft__hex_decode_id(span->trace_id, 2 * WEFT_TRACE_ID_SIZE, trace_id,
                                  sizeof(trace_id)) == WEFT_OK
                  ? update_summary(st, trace_id)
                  : WEFT_EINVAL;
    }
    if (err == WEFT_OK && step_once(st->commit) != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, st->path, st->db,
                                 "cannot close an interrupted span");
        if (!sqlite3_get_autocommit(st->db)) {
            step_once(st->rollback);
        }
    }
    sqlite3_finalize(stmt);
    free(attrs_text);
    store_destroy(st);
    return err;
}
