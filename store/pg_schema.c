/* store/pg_schema.c - what makes a PostgreSQL database a weft span store: the connection the
 * writer and the reader share (prepared statements, messages that never show a password), the
 * versioned schema, the time partitions of weft_spans, and retention (dropping old partitions).
 *
 * Schema (version 1, recorded in weft_span_schema; the state store's weft_schema_migrations may
 * share the database, so the names differ):
 * - weft_spans: the SQLite spans table's columns with PostgreSQL's types (attributes, events
 *   and links as JSONB, so `attributes @> '{"gen_ai.system": "openai"}'` works from SQL), plus
 *   run_id (the weft.run.id attribute) for finding a run's spans, and (version 4) resource:
 *   the resource's attributes on the spans that start a trace's part. PARTITION BY RANGE
 *   (start_ns), one partition per WEFT_TRACE_PARTITION_HOURS (default 24) aligned on the epoch
 *   (midnight UTC for days), named after its range start (weft_spans_p20261128, or
 *   weft_spans_p2026112806 for intervals that are not whole days), and a DEFAULT partition
 *   for times that get none (before 2000, more than a year ahead), so no timestamp fails an
 *   insert. Retention drops whole partitions, which costs no vacuum.
 *   PRIMARY KEY (trace_id, span_id, start_ns): the partition key must be in it; a span sent
 *   twice (a retried batch, two serve instances) is stored once (ON CONFLICT DO NOTHING).
 * - indexes, declared on the parent so every partition has them: the key (a trace's spans),
 *   (service_name, start_ns), (name, start_ns), errors (status_code = 2, partial), BRIN on
 *   start_ns (time ranges across partitions: tiny, as spans arrive roughly in time order),
 *   GIN jsonb_path_ops on attributes (attribute search by containment), run_id (partial).
 * - weft_traces: one summary row per trace (SQLite's traces columns) kept by the writer in the
 *   batch's transaction, plus what keeps it incremental: the rank, start and id of the span
 *   that names the trace (root_rank 0: no parent, 1: remote parent, 2: neither) and the last
 *   span start (the upper time bound that lets a trace read prune partitions).
 * Ids are lowercase hex text in the C collation, so they sort as bytes (as in SQLite) and a
 * prefix is a range of the primary key.
 */
#include "pg.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOCK_SPACE      2003134068 /* "weft": the first key of the advisory locks */
#define LOCK_MIGRATION  83         /* 'S': the span schema's migrations */
#define LOCK_PARTITIONS 80         /* 'P': partition creation and retention */
#define CONNECT_TIMEOUT "10"
#define HOUR_NS         3600000000000ll
#define YEAR_2000_NS    946684800000000000ll
#define AHEAD_MAX_NS    (366ll * 24 * HOUR_NS) /* partitions are made at most this far ahead */

/* ------------------------------------------------------------------------------------------ */
/* Schema                                                                                      */

static const char migration_1[] =
    "CREATE TABLE weft_spans ("
    " trace_id TEXT COLLATE \"C\" NOT NULL,"
    " span_id TEXT COLLATE \"C\" NOT NULL,"
    " parent_span_id TEXT COLLATE \"C\","
    " parent_is_remote BOOLEAN NOT NULL DEFAULT false,"
    " trace_state TEXT,"
    " flags INT NOT NULL DEFAULT 0,"
    " name TEXT NOT NULL,"
    " kind SMALLINT NOT NULL,"
    " start_ns BIGINT NOT NULL,"
    " end_ns BIGINT NOT NULL,"
    " status_code SMALLINT NOT NULL,"
    " status_message TEXT,"
    " attributes JSONB NOT NULL DEFAULT '{}',"
    " events JSONB NOT NULL DEFAULT '[]',"
    " links JSONB NOT NULL DEFAULT '[]',"
    " dropped_attributes_count BIGINT NOT NULL DEFAULT 0,"
    " dropped_events_count BIGINT NOT NULL DEFAULT 0,"
    " dropped_links_count BIGINT NOT NULL DEFAULT 0,"
    " service_name TEXT,"
    " scope_name TEXT,"
    " scope_version TEXT,"
    " run_id TEXT,"
    " PRIMARY KEY (trace_id, span_id, start_ns)"
    ") PARTITION BY RANGE (start_ns);"
    "CREATE TABLE weft_spans_default PARTITION OF weft_spans DEFAULT;"
    "CREATE INDEX weft_spans_service_idx ON weft_spans (service_name, start_ns);"
    "CREATE INDEX weft_spans_name_idx ON weft_spans (name, start_ns);"
    "CREATE INDEX weft_spans_errors_idx ON weft_spans (start_ns) WHERE status_code = 2;"
    "CREATE INDEX weft_spans_start_brin ON weft_spans USING brin (start_ns);"
    "CREATE INDEX weft_spans_attrs_gin ON weft_spans USING gin (attributes jsonb_path_ops);"
    "CREATE INDEX weft_spans_run_idx ON weft_spans (run_id) WHERE run_id IS NOT NULL;"
    "CREATE TABLE weft_traces ("
    " trace_id TEXT COLLATE \"C\" PRIMARY KEY,"
    " start_ns BIGINT NOT NULL,"
    " end_ns BIGINT NOT NULL,"
    " span_count BIGINT NOT NULL,"
    " error_count BIGINT NOT NULL,"
    " root_name TEXT,"
    " service_name TEXT,"
    " has_root BOOLEAN NOT NULL,"
    " root_rank SMALLINT NOT NULL,"
    " root_start_ns BIGINT NOT NULL,"
    " root_span_id TEXT COLLATE \"C\" NOT NULL,"
    " last_start_ns BIGINT NOT NULL);"
    "CREATE INDEX weft_traces_start_idx ON weft_traces (start_ns DESC, trace_id);"
    "CREATE INDEX weft_traces_end_idx ON weft_traces (end_ns);";

/* Tail sampling's decisions, shared by every weft serve writing this store (docs/sampling.md,
 * "At ingest"): the first instance to decide a trace records it, the others follow. */
static const char migration_2[] =
    "CREATE TABLE weft_trace_decisions ("
    " trace_id TEXT COLLATE \"C\" PRIMARY KEY,"
    " keep BOOLEAN NOT NULL,"
    " rule TEXT NOT NULL,"
    " decided_ns BIGINT NOT NULL);"
    "CREATE INDEX weft_trace_decisions_decided_idx ON weft_trace_decisions (decided_ns);";

/* Version 3: content-addressed payloads (store/payload.h, docs/payloads.md): attribute values
 * of spans hold references into this table. stored_ns is the last time a writer stored or
 * re-stored the record; collection (weft__store_payloads_sweep) keys on it. */
static const char migration_3[] =
    "CREATE TABLE weft_payloads ("
    " hash TEXT COLLATE \"C\" PRIMARY KEY,"
    " kind SMALLINT NOT NULL,"
    " size BIGINT NOT NULL,"
    " data BYTEA NOT NULL,"
    " stored_ns BIGINT NOT NULL);"
    "CREATE INDEX weft_payloads_stored_idx ON weft_payloads (stored_ns);";

/* Version 4: the resource a trace's part arrived with, on the spans that start one (no parent,
 * or a remote one; NULL on the others), bounded and redacted (resource.c). Adding a column
 * without a default only changes the catalog: no partition is rewritten. */
static const char migration_4[] = "ALTER TABLE weft_spans ADD COLUMN resource TEXT;";

static const char *const migrations[] = {migration_1, migration_2, migration_3, migration_4};

/* ------------------------------------------------------------------------------------------ */
/* URLs                                                                                        */

static void
put(char *out, size_t out_len, size_t *at, const char *s, size_t len)
{
    size_t room = out_len - 1 - *at;

    if (len > room) {
        len = room;
    }
    memcpy(out + *at, s, len);
    *at += len;
}

/* postgresql://user:PASSWORD@host/db?password=PASSWORD&... with each PASSWORD replaced. */
void
weft__store_redact_url(const char *location, char *out, size_t out_len)
{
    const char *authority = NULL;
    const char *end = NULL;
    const char *at = NULL;
    const char *colon = NULL;
    const char *p = NULL;
    size_t n = 0;

    if (out == NULL || out_len == 0) {
        return;
    }
    out[0] = '\0';
    if (location == NULL) {
        return;
    }
    authority = strstr(location, "://");
    if (authority == NULL) {
        snprintf(out, out_len, "%s", location);
        return;
    }
    authority += 3;
    end = authority + strcspn(authority, "/?#");
    /* The user information ends at the authority's last '@' (a password's own '@' should be
     * percent-encoded, but a stray one must not leak the rest of it). */
    for (p = authority; p < end; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    colon = at != NULL ? memchr(authority, ':', (size_t)(at - authority)) : NULL;
    if (colon != NULL) {
        put(out, out_len, &n, location, (size_t)(colon + 1 - location));
        put(out, out_len, &n, "***", 3);
        put(out, out_len, &n, at, (size_t)(end - at));
    } else {
        put(out, out_len, &n, location, (size_t)(end - location));
    }
    /* The path, then the query, where a password may come as password=... up to '&' or '#'. */
    p = end;
    while (*p != '\0') {
        size_t len = 0;

        if (*p == '#') {
            len = strlen(p);
        } else if (*p == '?' || *p == '&') {
            len = 1 + strcspn(p + 1, "&#");
        } else {
            len = strcspn(p, "?&#");
        }
        if ((*p == '?' || *p == '&') && strncmp(p + 1, "password=", 9) == 0) {
            put(out, out_len, &n, p, 10);
            put(out, out_len, &n, "***", 3);
        } else {
            put(out, out_len, &n, p, len > 0 ? len : 1);
        }
        p += len > 0 ? len : 1;
    }
    out[n] = '\0';
}

/* ------------------------------------------------------------------------------------------ */
/* The connection                                                                              */

static void
notice(void *arg, const char *message)
{
    (void)arg;
    /* CREATE ... IF NOT EXISTS and friends: the library never prints. */
    WEFT_LOG(WEFT_LOG_DEBUG, "store: postgresql: %s", message);
}

/* Planning the batch statement costs more than running it for small batches; every statement
 * here is a keyed lookup or a write whose generic plan is the right one (and run-time pruning
 * still picks the partitions). Servers before 12 lack the setting: ignored. */
static void
session_setup(struct weft__store_pg *pg)
{
    PGresult *res = PQexec(pg->conn, "SET plan_cache_mode = force_generic_plan");

    PQclear(res);
}

weft_err
weft__store_pg_connect(struct weft__store_pg *pg, const char *url)
{
    /* Defaults first: the URL's own settings, processed after them, win. */
    static const char *const keys[] = {"connect_timeout", "fallback_application_name",
                                       "client_encoding", "dbname", NULL};
    const char *values[] = {CONNECT_TIMEOUT, "weft", "UTF8", url, NULL};

    memset(pg, 0, sizeof(*pg));
    weft__store_redact_url(url, pg->where, sizeof(pg->where));
    pg->conn = PQconnectdbParams(keys, values, 1);
    if (pg->conn == NULL) {
        snprintf(pg->errmsg, sizeof(pg->errmsg), "store %s: cannot connect: out of memory",
                 pg->where);
        return WEFT_ENOMEM;
    }
    PQsetNoticeProcessor(pg->conn, notice, NULL);
    if (PQstatus(pg->conn) != CONNECTION_OK) {
        return weft__store_pg_fail(pg, NULL, "cannot connect");
    }
    session_setup(pg);
    return WEFT_OK;
}

void
weft__store_pg_close(struct weft__store_pg *pg)
{
    if (pg == NULL) {
        return;
    }
    PQfinish(pg->conn); /* an open transaction ends with the session: rolled back */
    pg->conn = NULL;
}

bool
weft__store_pg_is_lost(const struct weft__store_pg *pg)
{
    return pg->conn == NULL || PQstatus(pg->conn) == CONNECTION_BAD;
}

bool
weft__store_pg_reset(struct weft__store_pg *pg)
{
    if (pg->conn == NULL) {
        return false;
    }
    PQreset(pg->conn);
    for (size_t i = 0; i < WEFT__PG_PREPARED_MAX; i++) {
        pg->prepared[i].is_ready = false; /* prepared statements live in a session */
    }
    pg->has_stage = false;
    if (PQstatus(pg->conn) != CONNECTION_OK) {
        weft__store_pg_fail(pg, NULL, "cannot connect again");
        return false;
    }
    session_setup(pg);
    WEFT_LOG(WEFT_LOG_WARN, "store %s: the connection was lost; made again", pg->where);
    return true;
}

/* The server's one-line message: the primary one only, as DETAIL and CONTEXT may quote row
 * values (prompts). The connection's own messages name hosts and ports, never a password. */
weft_err
weft__store_pg_fail(struct weft__store_pg *pg, const PGresult *res, const char *what)
{
    const char *primary = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *code = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    size_t n = 0;

    snprintf(pg->sqlstate, sizeof(pg->sqlstate), "%s", code != NULL ? code : "");
    if (primary != NULL) {
        snprintf(pg->errmsg, sizeof(pg->errmsg), "store %s: %s: %s (SQLSTATE %s)", pg->where, what,
                 primary, code != NULL ? code : "?");
    } else {
        snprintf(pg->errmsg, sizeof(pg->errmsg), "store %s: %s: %s", pg->where, what,
                 pg->conn != NULL ? PQerrorMessage(pg->conn) : "no connection");
    }
    n = strlen(pg->errmsg);
    while (n > 0 && (pg->errmsg[n - 1] == '\n' || pg->errmsg[n - 1] == ' ')) {
        pg->errmsg[--n] = '\0';
    }
    for (char *c = pg->errmsg; *c != '\0'; c++) {
        if (*c == '\n' || *c == '\t') {
            *c = ' ';
        }
    }
    return WEFT_EIO;
}

static struct weft__pg_prepared *
prepared_of(struct weft__store_pg *pg, const char *sql)
{
    for (size_t i = 0; i < WEFT__PG_PREPARED_MAX; i++) {
        struct weft__pg_prepared *ps = &pg->prepared[i];

        if (ps->sql == sql) {
            return ps;
        }
        if (ps->sql == NULL) {
            ps->sql = sql;
            snprintf(ps->name, sizeof(ps->name), "weft_store_%zu", i);
            ps->is_ready = false;
            return ps;
        }
    }
    return NULL; /* the cache is full: the statement runs unprepared */
}

PGresult *
weft__store_pg_run(
    struct weft__store_pg *pg, const char *sql, int n, const char *const *values, bool is_prepared)
{
    struct weft__pg_prepared *ps = n > 0 || is_prepared ? prepared_of(pg, sql) : NULL;
    PGresult *res = NULL;

    if (ps == NULL) {
        if (n == 0) {
            return PQexec(pg->conn, sql);
        }
        return PQexecParams(pg->conn, sql, n, NULL, values, NULL, NULL, 0);
    }
    if (!ps->is_ready) {
        res = PQprepare(pg->conn, ps->name, sql, n, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            return res;
        }
        PQclear(res);
        ps->is_ready = true;
    }
    return PQexecPrepared(pg->conn, ps->name, n, values, NULL, NULL, 0);
}

weft_err
weft__store_pg_exec(struct weft__store_pg *pg, const char *what, const char *sql)
{
    PGresult *res = PQexec(pg->conn, sql);
    weft_err err = WEFT_OK;

    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        err = weft__store_pg_fail(pg, res, what);
    }
    PQclear(res);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Versions and migrations                                                                     */

weft_err
weft__store_pg_version(struct weft__store_pg *pg, int *version)
{
    PGresult *res = PQexec(pg->conn, "SELECT to_regclass('weft_span_schema') IS NOT NULL"
                                     " AND to_regclass('weft_spans') IS NOT NULL");
    bool has_schema = false;

    *version = 0;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        weft_err err = weft__store_pg_fail(pg, res, "cannot read the schema");
        PQclear(res);
        return err;
    }
    has_schema = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!has_schema) {
        snprintf(pg->errmsg, sizeof(pg->errmsg), "store %s: no weft span store there yet",
                 pg->where);
        return WEFT_ENOTFOUND;
    }
    res = PQexec(pg->conn, "SELECT COALESCE(MAX(version), 0) FROM weft_span_schema");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        weft_err err = weft__store_pg_fail(pg, res, "cannot read the schema version");
        PQclear(res);
        return err;
    }
    *version = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return WEFT_OK;
}

static weft_err
migrate_one(struct weft__store_pg *pg, int version)
{
    char sql[160];
    PGresult *res = NULL;
    int applied = 0;
    weft_err err = WEFT_EIO;

    if (weft__store_pg_exec(pg, "cannot begin a migration", "BEGIN") != WEFT_OK) {
        return WEFT_EIO;
    }
    /* The lock is the transaction's: the version table is created under it too, so the first
     * two processes on an empty database do not both create the schema. */
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%d, %d)", LOCK_SPACE, LOCK_MIGRATION);
    if (weft__store_pg_exec(pg, "cannot lock the schema", sql) != WEFT_OK ||
        weft__store_pg_exec(pg, "cannot create weft_span_schema",
                            "CREATE TABLE IF NOT EXISTS weft_span_schema (version INT PRIMARY KEY,"
                            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())") != WEFT_OK) {
        goto out;
    }
    res = PQexec(pg->conn, "SELECT COALESCE(MAX(version), 0) FROM weft_span_schema");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        weft__store_pg_fail(pg, res, "cannot read weft_span_schema");
        goto out;
    }
    applied = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    res = NULL;
    if (applied > WEFT__PG_SCHEMA_VERSION) {
        snprintf(pg->errmsg, sizeof(pg->errmsg),
                 "store %s: written by a newer weft (span schema %d; this weft knows %d)",
                 pg->where, applied, WEFT__PG_SCHEMA_VERSION);
        goto out;
    }
    if (applied >= version) {
        err = WEFT_OK; /* another process applied it while this one waited for the lock */
        goto out;
    }
    /* Several statements without values: the simple query protocol runs them in the open
     * transaction. */
    snprintf(sql, sizeof(sql), "migration %d failed", version);
    if (weft__store_pg_exec(pg, sql, migrations[version - 1]) != WEFT_OK) {
        goto out;
    }
    snprintf(sql, sizeof(sql), "INSERT INTO weft_span_schema (version) VALUES (%d)", version);
    if (weft__store_pg_exec(pg, "cannot record a migration", sql) != WEFT_OK) {
        goto out;
    }
    err = WEFT_OK;
out:
    PQclear(res);
    if (err == WEFT_OK) {
        err = weft__store_pg_exec(pg, "cannot commit a migration", "COMMIT");
    }
    if (err != WEFT_OK && !weft__store_pg_is_lost(pg)) {
        PQclear(PQexec(pg->conn, "ROLLBACK"));
    }
    return err;
}

weft_err
weft__store_pg_migrate(struct weft__store_pg *pg)
{
    int version = 0;
    weft_err err = weft__store_pg_version(pg, &version);

    /* The common case, an up-to-date store, costs two queries and takes no lock. */
    if (err == WEFT_EIO) {
        return err;
    }
    if (version > WEFT__PG_SCHEMA_VERSION) {
        snprintf(pg->errmsg, sizeof(pg->errmsg),
                 "store %s: written by a newer weft (span schema %d; this weft knows %d)",
                 pg->where, version, WEFT__PG_SCHEMA_VERSION);
        return WEFT_EIO;
    }
    for (int v = version + 1; v <= WEFT__PG_SCHEMA_VERSION; v++) {
        err = migrate_one(pg, v);
        if (err != WEFT_OK) {
            return err;
        }
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Partitions                                                                                  */

int64_t
weft__store_pg_interval_ns(void)
{
    const char *v = getenv("WEFT_TRACE_PARTITION_HOURS");
    char *end = NULL;
    long hours = 0;

    if (v == NULL || v[0] == '\0') {
        return 24 * HOUR_NS;
    }
    errno = 0;
    hours = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || hours < 1 || hours > 24L * 366) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "store: WEFT_TRACE_PARTITION_HOURS=%.32s is not a number of hours in"
                 " 1..8784; using 24",
                 v);
        return 24 * HOUR_NS;
    }
    return (int64_t)hours * HOUR_NS;
}

int64_t
weft__store_pg_bucket(int64_t start_ns, int64_t interval_ns, int64_t now_ns)
{
    int64_t bucket = 0;

    if (start_ns < YEAR_2000_NS || start_ns > now_ns + AHEAD_MAX_NS || interval_ns <= 0) {
        return INT64_MIN;
    }
    bucket = start_ns - start_ns % interval_ns; /* start_ns > 0 here */
    return bucket;
}

/* weft_spans_pYYYYMMDD for whole days, weft_spans_pYYYYMMDDHH otherwise. */
static void
partition_name(int64_t bucket, int64_t interval_ns, char *out, size_t len)
{
    time_t secs = (time_t)(bucket / 1000000000ll);
    struct tm tm;

    gmtime_r(&secs, &tm);
    if (interval_ns % (24 * HOUR_NS) == 0) {
        snprintf(out, len, "weft_spans_p%04d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday);
    } else {
        snprintf(out, len, "weft_spans_p%04d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour);
    }
}

/* Is this failure another creator's doing (the partition, or one overlapping it, exists)?
 * 42P07 duplicate table, 23505 a catalog row made at once, 42P17 overlapping bounds (a
 * partition made with another interval), 23514 rows for this range in the default partition
 * (they stay there; new rows go there too), 55P03 the lock timeout (the same). */
static bool
is_benign_create_failure(const char *state)
{
    return strcmp(state, "42P07") == 0 || strcmp(state, "23505") == 0 ||
           strcmp(state, "42P17") == 0 || strcmp(state, "23514") == 0 ||
           strcmp(state, "55P03") == 0;
}

weft_err
weft__store_pg_ensure_partition(struct weft__store_pg *pg, int64_t bucket, int64_t interval_ns)
{
    char name[48];
    char sql[320];
    const char *param[1];
    PGresult *res = NULL;
    bool exists = false;
    weft_err err = WEFT_OK;

    if (bucket == INT64_MIN) {
        return WEFT_OK;
    }
    partition_name(bucket, interval_ns, name, sizeof(name));
    param[0] = name;
    res = weft__store_pg_run(pg, "SELECT to_regclass($1) IS NOT NULL", 1, param, true);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        err = weft__store_pg_fail(pg, res, "cannot look a partition up");
        PQclear(res);
        return err;
    }
    exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (exists) {
        return WEFT_OK;
    }
    /* Its own transaction, before the batch's: creating a partition locks the parent table
     * and scans the default partition, which must not be held for a whole batch. */
    if (weft__store_pg_exec(pg, "cannot begin a partition", "BEGIN") != WEFT_OK) {
        return WEFT_EIO;
    }
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%d, %d)", LOCK_SPACE, LOCK_PARTITIONS);
    err = weft__store_pg_exec(pg, "cannot lock the partitions", sql);
    /* A long read transaction holds the parent table: rather than stall the exporter behind
     * it, the batch goes to the default partition. */
    if (err == WEFT_OK) {
        err = weft__store_pg_exec(pg, "cannot set a lock timeout", "SET LOCAL lock_timeout = '5s'");
    }
    if (err == WEFT_OK) {
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS %s PARTITION OF weft_spans"
                 " FOR VALUES FROM (%" PRId64 ") TO (%" PRId64 ")",
                 name, bucket, bucket > INT64_MAX - interval_ns ? INT64_MAX : bucket + interval_ns);
        err = weft__store_pg_exec(pg, "cannot create a partition", sql);
    }
    if (err == WEFT_OK) {
        err = weft__store_pg_exec(pg, "cannot commit a partition", "COMMIT");
    }
    if (err != WEFT_OK) {
        if (!weft__store_pg_is_lost(pg)) {
            PQclear(PQexec(pg->conn, "ROLLBACK"));
        }
        if (is_benign_create_failure(pg->sqlstate)) {
            WEFT_LOG(WEFT_LOG_DEBUG, "%s: left to the default or existing partition", pg->errmsg);
            err = WEFT_OK;
        }
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Retention                                                                                   */

/* The upper bound of a partition's "FOR VALUES FROM ('lo') TO ('hi')", false for DEFAULT or
 * what is not a range of integers. */
static bool
partition_upper(const char *bound, int64_t *hi)
{
    const char *to = strstr(bound, " TO (");
    char *end = NULL;
    long long v = 0;

    if (to == NULL) {
        return false;
    }
    to += 5;
    if (*to == '\'') {
        to++;
    }
    errno = 0;
    v = strtoll(to, &end, 10);
    if (errno != 0 || end == to) {
        return false;
    }
    *hi = (int64_t)v;
    return true;
}

static const char partitions_sql[] =
    "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
    " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'weft_spans'::regclass"
    " ORDER BY c.relname";

/* The traces ended before the cutoff, and their spans in partitions that stay. */
static const char retention_sql[] =
    "WITH gone AS (DELETE FROM weft_traces WHERE end_ns < $1 RETURNING trace_id),"
    " spans AS (DELETE FROM weft_spans s USING gone WHERE s.trace_id = gone.trace_id"
    " AND s.start_ns < $1 RETURNING 1)"
    " SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM spans)";

/* The summaries of the traces that straddled the cutoff: a trace that ended after it but
 * started before $1 (the end of the last partition dropped) may have lost spans with the
 * partitions, so its row is computed again from the spans left, as the writer would compute it
 * from scratch (pg_writer.c: start, end, counts, the span that names the trace), and deleted
 * when none is left. Only the rows that started before $1 are touched (weft_traces_start_idx),
 * and their spans are looked up by trace id (the primary key of every partition). The DROP
 * TABLEs before it, in the same transaction, hold weft_spans exclusively until the commit: no
 * writer adds a span to these traces between the count and the update. */
static const char recount_sql[] =
    "WITH stale AS (SELECT trace_id FROM weft_traces WHERE start_ns < $1),"
    " r AS (SELECT trace_id, span_id, name, start_ns, end_ns, status_code, service_name,"
    " CASE WHEN parent_span_id IS NULL THEN 0 WHEN parent_is_remote THEN 1 ELSE 2 END AS rank"
    " FROM weft_spans WHERE trace_id = ANY (ARRAY(SELECT trace_id FROM stale))),"
    " best AS (SELECT DISTINCT ON (trace_id) trace_id, rank, start_ns, span_id, name,"
    " service_name FROM r ORDER BY trace_id, rank, start_ns, span_id),"
    " agg AS (SELECT trace_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns,"
    " max(start_ns) AS last_start_ns, count(*) AS span_count,"
    " count(*) FILTER (WHERE status_code = 2) AS error_count, bool_or(rank < 2) AS has_root"
    " FROM r GROUP BY trace_id),"
    " fixed AS (UPDATE weft_traces t SET start_ns = a.start_ns, end_ns = a.end_ns,"
    " last_start_ns = a.last_start_ns, span_count = a.span_count, error_count = a.error_count,"
    " has_root = a.has_root, root_name = b.name, service_name = b.service_name,"
    " root_rank = b.rank, root_start_ns = b.start_ns, root_span_id = b.span_id"
    " FROM agg a JOIN best b ON b.trace_id = a.trace_id WHERE t.trace_id = a.trace_id"
    " AND (t.start_ns, t.end_ns, t.last_start_ns, t.span_count, t.error_count, t.has_root,"
    " t.root_span_id) IS DISTINCT FROM (a.start_ns, a.end_ns, a.last_start_ns, a.span_count,"
    " a.error_count, a.has_root, b.span_id) RETURNING 1),"
    " emptied AS (DELETE FROM weft_traces t USING stale s WHERE t.trace_id = s.trace_id"
    " AND NOT EXISTS (SELECT 1 FROM agg a WHERE a.trace_id = s.trace_id) RETURNING 1)"
    " SELECT (SELECT count(*) FROM fixed), (SELECT count(*) FROM emptied)";

/* recount_sql for the traces that started before @p hi; the rows it deleted are added to
 * *traces_deleted (may be NULL). @return WEFT_OK or WEFT_EIO (recorded in pg->errmsg). */
static weft_err
recount(struct weft__store_pg *pg, int64_t hi, size_t *traces_deleted)
{
    char bound[24];
    const char *param[1] = {bound};
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    snprintf(bound, sizeof(bound), "%" PRId64, hi);
    res = PQexecParams(pg->conn, recount_sql, 1, NULL, param, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        err = weft__store_pg_fail(pg, res, "cannot recount the traces that straddle the cutoff");
    } else {
        size_t emptied = (size_t)strtoull(PQgetvalue(res, 0, 1), NULL, 10);
        WEFT_LOG(WEFT_LOG_DEBUG, "store %s: retention: %s summaries recounted, %zu emptied",
                 pg->where, PQgetvalue(res, 0, 0), emptied);
        if (traces_deleted != NULL) {
            *traces_deleted += emptied;
        }
    }
    PQclear(res);
    return err;
}

weft_err
weft__store_pg_drop_before(const char *url,
                           uint64_t cutoff_ns,
                           size_t *partitions_dropped,
                           size_t *traces_deleted,
                           size_t *payloads_deleted)
{
    struct weft__store_pg pg;
    PGresult *parts = NULL;
    PGresult *res = NULL;
    char sql[160];
    char cutoff[24];
    const char *param[1];
    int64_t cutoff_i = cutoff_ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)cutoff_ns;
    size_t dropped = 0;
    int64_t dropped_hi = INT64_MIN; /* the end of the last partition dropped */
    int version = 0;
    weft_err err = WEFT_OK;

    if (partitions_dropped != NULL) {
        *partitions_dropped = 0;
    }
    if (traces_deleted != NULL) {
        *traces_deleted = 0;
    }
    if (payloads_deleted != NULL) {
        *payloads_deleted = 0;
    }
    if (url == NULL) {
        return WEFT_EINVAL;
    }
    err = weft__store_pg_connect(&pg, url);
    if (err == WEFT_OK) {
        err = weft__store_pg_version(&pg, &version);
    }
    if (err != WEFT_OK) {
        goto out;
    }
    err = weft__store_pg_exec(&pg, "cannot begin retention", "BEGIN");
    if (err != WEFT_OK) {
        goto out;
    }
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%d, %d)", LOCK_SPACE, LOCK_PARTITIONS);
    err = weft__store_pg_exec(&pg, "cannot lock the partitions", sql);
    if (err == WEFT_OK) {
        parts = PQexec(pg.conn, partitions_sql);
        if (PQresultStatus(parts) != PGRES_TUPLES_OK) {
            err = weft__store_pg_fail(&pg, parts, "cannot list the partitions");
        }
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(parts); i++) {
        const char *name = PQgetvalue(parts, i, 0);
        int64_t hi = 0;
        char *quoted = NULL;

        if (!partition_upper(PQgetvalue(parts, i, 1), &hi) || hi > cutoff_i) {
            continue;
        }
        quoted = PQescapeIdentifier(pg.conn, name, strlen(name));
        if (quoted == NULL) {
            err = WEFT_ENOMEM;
            break;
        }
        snprintf(sql, sizeof(sql), "DROP TABLE %s", quoted);
        PQfreemem(quoted);
        err = weft__store_pg_exec(&pg, "cannot drop a partition", sql);
        dropped += err == WEFT_OK;
        dropped_hi = err == WEFT_OK && hi > dropped_hi ? hi : dropped_hi;
    }
    if (err == WEFT_OK) {
        snprintf(cutoff, sizeof(cutoff), "%" PRId64, cutoff_i);
        param[0] = cutoff;
        res = PQexecParams(pg.conn, retention_sql, 1, NULL, param, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            err = weft__store_pg_fail(&pg, res, "cannot delete old traces");
        } else if (traces_deleted != NULL) {
            *traces_deleted = (size_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        }
    }
    if (err == WEFT_OK && dropped > 0) {
        err = recount(&pg, dropped_hi, traces_deleted);
    }
    if (err == WEFT_OK && (dropped > 0 || (traces_deleted != NULL && *traces_deleted > 0))) {
        size_t swept = 0;

        err = weft__store_pg_payload_sweep(&pg, false, &swept);
        if (payloads_deleted != NULL) {
            *payloads_deleted = swept;
        }
    }
    if (err == WEFT_OK) {
        err = weft__store_pg_exec(&pg, "cannot commit retention", "COMMIT");
    }
    if (err == WEFT_OK && partitions_dropped != NULL) {
        *partitions_dropped = dropped;
    }
    if (err != WEFT_OK && traces_deleted != NULL) {
        *traces_deleted = 0;
    }
out:
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "%s", pg.errmsg);
    }
    PQclear(parts);
    PQclear(res);
    weft__store_pg_close(&pg);
    return err;
}

weft_err
weft__store_pg_shape(const char *url, int64_t *partitions, int64_t *oldest_start_ns)
{
    struct weft__store_pg pg;
    PGresult *res = NULL;
    int version = 0;
    weft_err err = weft__store_pg_connect(&pg, url);

    *partitions = 0;
    *oldest_start_ns = 0;
    if (err == WEFT_OK) {
        err = weft__store_pg_version(&pg, &version);
    }
    if (err == WEFT_OK) {
        /* Both answered from catalogs and an index (weft_traces_start_idx): cheap whatever the
         * store's size. */
        res = PQexec(pg.conn, "SELECT (SELECT count(*) FROM pg_inherits"
                              " WHERE inhparent = 'weft_spans'::regclass),"
                              " (SELECT COALESCE(min(start_ns), 0) FROM weft_traces)");
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            err = weft__store_pg_fail(&pg, res, "cannot count the partitions");
        } else {
            *partitions = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
            *oldest_start_ns = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        }
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_DEBUG, "%s", pg.errmsg);
    }
    PQclear(res);
    weft__store_pg_close(&pg);
    return err;
}
