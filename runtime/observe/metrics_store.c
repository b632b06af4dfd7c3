/* runtime/observe/metrics_store.c - per-run metric snapshots in the state database (see
 * metrics_store.h), and `weft serve`'s fold of them across runs.
 *
 * Why a meter per run and not deltas of the caller's meter: a library caller may share one
 * meter between concurrent runs, so only a meter that sees one run's measurements can say
 * what that run did. Recording into two meters costs a second lock-free update per
 * measurement; the snapshot itself is throttled and off the span path.
 *
 * Why its own SQLite connection (and, for PostgreSQL, its own state handle): a checkpoint may
 * come from a fan-out worker or the flusher while the run's own handle is confined to another
 * thread. WAL mode (set by state.c) lets `weft serve` read while runs write; PostgreSQL's MVCC
 * does the same.
 *
 * Two backends, one shape: the snapshot is built series by series (write_series()) into rows
 * (struct weft__state_metric), which SQLite gets at once inside its transaction and PostgreSQL
 * gets after the collection, whole, through weft__state_metrics_save() (state_pg.c), so an
 * allocation failure there writes nothing. The fold reads the same five things from either
 * (run rows, legacy agent outcomes, sums and histograms, task workflows, folded gauges) and
 * hands each row to the same fold_* function.
 *
 * Rows: (run_id, attempt, name, labels) -> kind, unit, description, value (sums and gauges),
 * count, sum, min, max, bounds and buckets (JSON arrays, histograms), saved_ns. A snapshot
 * replaces the rows of its (run, attempt) in one transaction, so a reader sees a whole one.
 *
 * Folding (weft serve): sums and histograms add up across runs per (name, labels); span
 * counts (gauges of cumulative counts) add up too; queue gauges count only for runs still in
 * progress whose last snapshot is recent, since a dead run's last queue fill means nothing
 * (nor do its distributed tasks in flight).
 * Runs stored before snapshots existed (SQLite before the table, PostgreSQL before migration 2)
 * are folded from their run rows, as before.
 */
#include "runtime/observe/metrics_store.h"

#include "runtime/observe/metrics.h"
#include "runtime/state/state.h"

#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "runtime/observe/dist_telemetry.h"
#include "tracing/sdk.h"

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FOLD_MAX_RUNS   100000
#define QUEUE_FRESH_NS  (60ull * 1000000000ull)
#define SELF_NAME_MATCH "(name LIKE 'weft.spans.%' OR name LIKE 'weft.exporter.%')"

/* Workflows whose stuck-loop and breaker series show at 0 (weft__rt_metrics_zero_known). */
#define FOLD_ZERO_WORKFLOWS 100

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS run_metrics ("
    " run_id TEXT NOT NULL, attempt INTEGER NOT NULL, name TEXT NOT NULL, kind INTEGER NOT NULL,"
    " unit TEXT NOT NULL, description TEXT NOT NULL, labels TEXT NOT NULL,"
    " value REAL NOT NULL DEFAULT 0, count INTEGER NOT NULL DEFAULT 0,"
    " sum REAL NOT NULL DEFAULT 0, min REAL, max REAL, bounds TEXT, buckets TEXT,"
    " saved_ns BIGINT NOT NULL, PRIMARY KEY (run_id, attempt, name, labels));";

struct rt_mstore {
    sqlite3 *db; /* a SQLite state: its own connection and statements */
    sqlite3_stmt *del;
    sqlite3_stmt *ins;
    struct rt_state *pg; /* a PostgreSQL state: its own handle (and libpq connection) */
    char *run_id;
    int64_t attempt;
    struct weft_meter *meter;
    pthread_mutex_t lock;
    uint64_t interval_ns; /* WEFT_METRICS_SNAPSHOT_MS; 0: every checkpoint */
    uint64_t last_mono;   /* 0: no snapshot yet */
    uint64_t last_events; /* weft__rt_metrics_events() at the last snapshot */
    uint64_t events;      /* the latest weft__rt_metrics_events() a checkpoint was given */
    /* The flusher writes what a throttled checkpoint left behind, one interval later, so a
     * run blocked in a long step has its metrics stored before it is killed. */
    pthread_t flusher;
    pthread_cond_t wake;
    bool has_flusher;
    bool is_stopping;
    bool is_failing; /* an error was logged; do not repeat it */
    uint64_t saves;
    uint64_t save_ns;
};

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                     */

static void *flush_loop(void *arg);

static sqlite3 *
open_db(const char *path, int flags)
{
    sqlite3 *db = NULL;

    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "run metrics: state database %s: %s", path,
                 db != NULL ? sqlite3_errmsg(db) : "cannot open");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

struct rt_mstore *
weft__rt_mstore_open(const char *state_path)
{
    struct rt_mstore *ms = NULL;
    char *errmsg = NULL;

    if (state_path == NULL) {
        return NULL;
    }
    ms = weft__calloc(1, sizeof(*ms));
    if (ms == NULL) {
        return NULL;
    }
    pthread_mutex_init(&ms->lock, NULL);
    pthread_cond_init(&ms->wake, NULL);
    if (weft__state_is_url(state_path)) {
        /* A handle of its own: the run's is confined to the run's thread, and checkpoints come
         * from fan-out workers and the flusher (serialised by ms->lock). The sentence names
         * the URL without its password. */
        char why[512];
        if (weft__state_open(state_path, &ms->pg, why, sizeof(why)) != WEFT_OK) {
            WEFT_LOG(WEFT_LOG_ERROR, "run metrics: %s", why);
            goto fail;
        }
        return ms;
    }
    ms->db = open_db(state_path, SQLITE_OPEN_READWRITE);
    if (ms->db == NULL) {
        goto fail;
    }
    /* As state.c: WAL (the file's mode) with NORMAL sync, so a commit appends to the WAL
     * without an fsync; a power loss may lose the last snapshots, a crash of weft none. */
    if (sqlite3_exec(ms->db, "PRAGMA synchronous=NORMAL", NULL, NULL, &errmsg) != SQLITE_OK ||
        sqlite3_exec(ms->db, schema, NULL, NULL, &errmsg) != SQLITE_OK ||
        sqlite3_prepare_v2(ms->db, "DELETE FROM run_metrics WHERE run_id = ?1 AND attempt = ?2", -1,
                           &ms->del, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(
            ms->db,
            "INSERT INTO run_metrics (run_id, attempt, name, kind, unit, description,"
            " labels, value, count, sum, min, max, bounds, buckets, saved_ns)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
            " ?15)",
            -1, &ms->ins, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "run metrics: %s: %s", state_path,
                 errmsg != NULL ? errmsg : sqlite3_errmsg(ms->db));
        sqlite3_free(errmsg);
        goto fail;
    }
    return ms;
fail:
    weft__rt_mstore_free(ms);
    return NULL;
}

weft_err
weft__rt_mstore_start(struct rt_mstore *ms, const char *run_id, struct weft_provider *provider)
{
    sqlite3_stmt *stmt = NULL;
    weft_err err = WEFT_OK;

    if (ms == NULL || run_id == NULL) {
        return WEFT_EINVAL;
    }
    ms->run_id = weft__strdup(run_id);
    if (ms->run_id == NULL) {
        return WEFT_ENOMEM;
    }
    /* A resumed run continues the same run id: its attempts add up in the fold. */
    if (ms->pg != NULL) {
        err = weft__state_metrics_attempt(ms->pg, run_id, true, &ms->attempt);
    } else if (sqlite3_prepare_v2(ms->db,
                                  "SELECT COALESCE(MAX(attempt) + 1, 0) FROM run_metrics"
                                  " WHERE run_id = ?1",
                                  -1, &stmt, NULL) != SQLITE_OK) {
        err = WEFT_EIO;
    } else {
        sqlite3_bind_text(stmt, 1, run_id, -1, SQLITE_STATIC);
        if (sqlite3_step(stmt) == SQLITE_ROW) {
            ms->attempt = sqlite3_column_int64(stmt, 0);
        } else {
            err = WEFT_EIO;
        }
        sqlite3_finalize(stmt);
    }
    if (err == WEFT_OK) {
        err = weft_meter_new(NULL, &ms->meter);
    }
    if (err == WEFT_OK && provider != NULL) {
        err = weft_meter_observe_provider(ms->meter, provider);
    }
    ms->interval_ns =
        weft__env_u64("WEFT_METRICS_SNAPSHOT_MS", RT_MSTORE_INTERVAL_MS, 0, 3600000) * 1000000u;
    if (err == WEFT_OK && ms->interval_ns > 0) {
        ms->has_flusher = pthread_create(&ms->flusher, NULL, flush_loop, ms) == 0;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "run metrics: run %s will not persist its metrics: %s", run_id,
                 weft_strerror(err));
        weft_meter_free(ms->meter);
        ms->meter = NULL;
    }
    return err;
}

struct weft_meter *
weft__rt_mstore_meter(struct rt_mstore *ms)
{
    return ms != NULL ? ms->meter : NULL;
}

/* Labels as a JSON object in the series' (sorted) order: the fold's grouping key. */
static char *
labels_json(const struct weft_series_view *s)
{
    json_t *o = json_object();
    char *text = NULL;

    for (size_t i = 0; o != NULL && i < s->attr_count; i++) {
        const struct weft_value *v = &s->attrs[i].value;
        json_t *j = NULL;

        switch (v->type) {
        case WEFT_VALUE_STRING:
            j = json_stringn(v->u.str, v->len);
            break;
        case WEFT_VALUE_BOOL:
            j = json_boolean(v->u.b);
            break;
        case WEFT_VALUE_INT:
            j = json_integer((json_int_t)v->u.i);
            break;
        case WEFT_VALUE_DOUBLE:
            j = json_real(v->u.d);
            break;
        default:
            j = json_null(); /* metric labels are scalars */
            break;
        }
        json_object_set_new(o, s->attrs[i].key, j);
    }
    text = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return text;
}

static char *
doubles_json(const double *d, size_t n)
{
    json_t *a = json_array();
    char *text = NULL;

    for (size_t i = 0; a != NULL && i < n; i++) {
        json_array_append_new(a, json_real(d[i]));
    }
    text = a != NULL ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return text;
}

static char *
counts_json(const uint64_t *c, size_t n)
{
    json_t *a = json_array();
    char *text = NULL;

    for (size_t i = 0; a != NULL && i < n; i++) {
        json_array_append_new(a, json_integer((json_int_t)c[i]));
    }
    text = a != NULL ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return text;
}

/* A PostgreSQL snapshot's rows, gathered during the collection (whose views are borrowed for
 * one call) and written after it, in one transaction, by weft__state_metrics_save(). Each row
 * owns its six texts in owned[6 * i ...]. */
struct pg_rows {
    struct weft__state_metric *v;
    char **owned;
    size_t count;
    size_t cap;
};

static void
pg_rows_cleanup(struct pg_rows *r)
{
    for (size_t i = 0; i < 6 * r->count; i++) {
        weft__free(r->owned[i]);
    }
    weft__free(r->v);
    weft__free(r->owned);
    memset(r, 0, sizeof(*r));
}

/* Append a copy of @p m. @return WEFT_OK, WEFT_ENOMEM (nothing appended). */
static weft_err
pg_rows_add(struct pg_rows *r, const struct weft__state_metric *m)
{
    const char *texts[6] = {m->name, m->unit, m->description, m->labels, m->bounds, m->buckets};
    char *copies[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    struct weft__state_metric *row = NULL;

    if (r->count == r->cap) {
        size_t cap = r->cap > 0 ? 2 * r->cap : 64;
        struct weft__state_metric *v = weft__realloc(r->v, cap * sizeof(*v));
        char **owned = NULL;

        if (v == NULL) {
            return WEFT_ENOMEM;
        }
        r->v = v;
        owned = weft__realloc(r->owned, 6 * cap * sizeof(*owned));
        if (owned == NULL) {
            return WEFT_ENOMEM;
        }
        r->owned = owned;
        r->cap = cap;
    }
    for (size_t i = 0; i < 6; i++) {
        if (texts[i] != NULL) {
            copies[i] = weft__strdup(texts[i]);
            if (copies[i] == NULL) {
                for (size_t j = 0; j < i; j++) {
                    weft__free(copies[j]);
                }
                return WEFT_ENOMEM;
            }
        }
    }
    row = &r->v[r->count];
    *row = *m;
    row->name = copies[0];
    row->unit = copies[1];
    row->description = copies[2];
    row->labels = copies[3];
    row->bounds = copies[4];
    row->buckets = copies[5];
    memcpy(&r->owned[6 * r->count], copies, sizeof(copies));
    r->count++;
    return WEFT_OK;
}

struct writer {
    sqlite3_stmt *ins;    /* SQLite: each row goes straight in */
    struct pg_rows *rows; /* PostgreSQL: rows gathered for weft__state_metrics_save() */
    const char *run_id;
    int64_t attempt;
    uint64_t now_ns;
    bool is_self_only; /* only span counts and queues (after the provider's shutdown) */
    int rc;            /* first SQLite error */
    weft_err err;      /* first error */
};

/* Families `weft serve` computes from the run rows, not from snapshots. */
static bool
is_store_gauge(const char *name)
{
    return strcmp(name, "weft.runs.active") == 0 ||
           strcmp(name, "weft.runs.oldest_active_age") == 0;
}

static bool
is_self_metric(const char *name)
{
    return strncmp(name, "weft.spans.", 11) == 0 || strncmp(name, "weft.exporter.", 14) == 0;
}

/* Store @p m: bound and inserted (SQLite) or gathered (PostgreSQL). */
static void
put_row(struct writer *w, const struct weft__state_metric *m)
{
    sqlite3_stmt *st = w->ins;
    int rc = SQLITE_OK;

    if (w->rows != NULL) {
        w->err = pg_rows_add(w->rows, m);
        return;
    }
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, w->run_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, w->attempt);
    sqlite3_bind_text(st, 3, m->name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, m->kind);
    sqlite3_bind_text(st, 5, m->unit, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, m->description, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, m->labels, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 8, m->value);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)m->count);
    sqlite3_bind_double(st, 10, m->sum);
    if (m->has_range) {
        sqlite3_bind_double(st, 11, m->min);
        sqlite3_bind_double(st, 12, m->max);
    } else {
        sqlite3_bind_null(st, 11);
        sqlite3_bind_null(st, 12);
    }
    if (m->bounds != NULL && m->buckets != NULL) {
        sqlite3_bind_text(st, 13, m->bounds, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 14, m->buckets, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(st, 13);
        sqlite3_bind_null(st, 14);
    }
    sqlite3_bind_int64(st, 15, (sqlite3_int64)m->saved_ns);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        w->rc = rc;
        w->err = WEFT_EIO;
    }
}

static bool
write_series(const struct weft_instrument_view *in, const struct weft_series_view *s, void *ud)
{
    struct writer *w = ud;
    struct weft__state_metric m;
    char *labels = NULL;
    char *bounds = NULL;
    char *buckets = NULL;

    if (s == NULL || is_store_gauge(in->name) || (w->is_self_only && !is_self_metric(in->name))) {
        return true;
    }
    /* A sum that never moved says nothing a zero-registered family does not. */
    if ((in->kind == WEFT_INSTRUMENT_COUNTER || in->kind == WEFT_INSTRUMENT_UPDOWN_COUNTER) &&
        s->value == 0) {
        return true;
    }
    labels = labels_json(s);
    if (in->kind == WEFT_INSTRUMENT_HISTOGRAM) {
        bounds = doubles_json(in->bounds, in->bound_count);
        buckets = counts_json(s->bucket_counts, in->bound_count + 1);
    }
    if (labels == NULL ||
        (in->kind == WEFT_INSTRUMENT_HISTOGRAM && (bounds == NULL || buckets == NULL))) {
        w->rc = SQLITE_NOMEM;
        w->err = WEFT_ENOMEM;
        goto out;
    }
    memset(&m, 0, sizeof(m));
    m.name = in->name;
    m.kind = (int)in->kind;
    m.unit = in->unit;
    m.description = in->description;
    m.labels = labels;
    m.value = s->value;
    m.count = s->count;
    if (in->kind == WEFT_INSTRUMENT_HISTOGRAM) {
        m.sum = s->sum;
        m.has_range = s->count > 0;
        m.min = s->min;
        m.max = s->max;
        m.bounds = bounds;
        m.buckets = buckets;
    }
    m.saved_ns = w->now_ns;
    put_row(w, &m);
out:
    free(labels);
    free(bounds);
    free(buckets);
    return w->err == WEFT_OK;
}

/* Replace the rows of (run, attempt) by @p meter's series, in one SQLite transaction. @p del
 * deletes the rows to replace. @return an SQLite code. */
static int
write_sqlite(sqlite3 *db,
             sqlite3_stmt *del,
             sqlite3_stmt *ins,
             const char *run_id,
             int64_t attempt,
             struct weft_meter *meter,
             bool is_self_only)
{
    struct writer w;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

    if (rc != SQLITE_OK) {
        return rc;
    }
    sqlite3_bind_text(del, 1, run_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(del, 2, attempt);
    rc = sqlite3_step(del);
    sqlite3_reset(del);
    sqlite3_clear_bindings(del);
    if (rc == SQLITE_DONE) {
        memset(&w, 0, sizeof(w));
        w.ins = ins;
        w.run_id = run_id;
        w.attempt = attempt;
        w.now_ns = weft__now_ns();
        w.is_self_only = is_self_only;
        (void)weft_meter_collect(meter, write_series, &w);
        rc = w.rc;
    }
    if (rc == SQLITE_OK || rc == SQLITE_DONE) {
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }
    if (rc != SQLITE_OK) {
        (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    return rc;
}

/* The same into a PostgreSQL state: the rows are gathered first, so a failure to build one
 * (out of memory) writes nothing, then weft__state_metrics_save() replaces the (run, attempt)
 * rows in one transaction. @return WEFT_OK, WEFT_EIO (logged by the state), WEFT_ENOMEM. */
static weft_err
write_pg(struct rt_state *st,
         const char *run_id,
         int64_t attempt,
         struct weft_meter *meter,
         bool is_self_only)
{
    struct pg_rows rows;
    struct writer w;
    weft_err err = WEFT_OK;

    memset(&rows, 0, sizeof(rows));
    memset(&w, 0, sizeof(w));
    w.rows = &rows;
    w.run_id = run_id;
    w.attempt = attempt;
    w.now_ns = weft__now_ns();
    w.is_self_only = is_self_only;
    (void)weft_meter_collect(meter, write_series, &w);
    err = w.err;
    if (err == WEFT_OK) {
        err = weft__state_metrics_save(st, run_id, attempt, is_self_only, rows.v, rows.count);
    }
    pg_rows_cleanup(&rows);
    return err;
}

/* Write the snapshot now. Called with the lock held. */
static void
save_locked(struct rt_mstore *ms, uint64_t events)
{
    uint64_t start = weft__monotonic_ns();
    int rc = SQLITE_OK;
    weft_err err = WEFT_OK;

    if (ms->pg != NULL) {
        err = write_pg(ms->pg, ms->run_id, ms->attempt, ms->meter, false);
    } else {
        rc = write_sqlite(ms->db, ms->del, ms->ins, ms->run_id, ms->attempt, ms->meter, false);
    }
    ms->last_mono = weft__monotonic_ns();
    ms->last_events = events;
    ms->saves++;
    ms->save_ns += ms->last_mono - start;
    if ((rc != SQLITE_OK || err != WEFT_OK) && !ms->is_failing) {
        ms->is_failing = true;
        WEFT_LOG(WEFT_LOG_ERROR, "run metrics: run %s: cannot save its metrics: %s", ms->run_id,
                 rc != SQLITE_OK ? sqlite3_errstr(rc) : weft_strerror(err));
    }
}

static void *
flush_loop(void *arg)
{
    struct rt_mstore *ms = arg;

    pthread_mutex_lock(&ms->lock);
    while (!ms->is_stopping) {
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(ms->interval_ns / 1000000000u);
        until.tv_nsec += (long)(ms->interval_ns % 1000000000u);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&ms->wake, &ms->lock, &until);
        if (!ms->is_stopping && ms->events != ms->last_events &&
            weft__monotonic_ns() - ms->last_mono >= ms->interval_ns) {
            save_locked(ms, ms->events);
        }
    }
    pthread_mutex_unlock(&ms->lock);
    return NULL;
}

static void
stop_flusher(struct rt_mstore *ms)
{
    if (!ms->has_flusher) {
        return;
    }
    pthread_mutex_lock(&ms->lock);
    ms->is_stopping = true;
    pthread_cond_signal(&ms->wake);
    pthread_mutex_unlock(&ms->lock);
    pthread_join(ms->flusher, NULL);
    ms->has_flusher = false;
}

void
weft__rt_mstore_note(struct rt_mstore *ms, uint64_t events)
{
    if (ms == NULL || ms->meter == NULL) {
        return;
    }
    pthread_mutex_lock(&ms->lock);
    ms->events = events;
    pthread_mutex_unlock(&ms->lock);
}

/* Something was measured since the last snapshot and it is older than the interval. */
static bool
is_due_locked(const struct rt_mstore *ms, uint64_t events)
{
    return events != ms->last_events &&
           (ms->last_mono == 0 || weft__monotonic_ns() - ms->last_mono >= ms->interval_ns);
}

void
weft__rt_mstore_checkpoint(struct rt_mstore *ms, uint64_t events, bool is_final)
{
    if (ms == NULL || ms->meter == NULL) {
        return;
    }
    if (is_final) {
        stop_flusher(ms);
    }
    pthread_mutex_lock(&ms->lock);
    ms->events = events;
    if (is_final || is_due_locked(ms, events)) {
        save_locked(ms, events);
    }
    pthread_mutex_unlock(&ms->lock);
    if (is_final) {
        WEFT_LOG(WEFT_LOG_DEBUG, "run metrics: run %s: %llu snapshots, %.1f us each", ms->run_id,
                 (unsigned long long)ms->saves,
                 ms->saves > 0 ? (double)ms->save_ns / 1e3 / (double)ms->saves : 0.0);
    }
}

bool
weft__rt_mstore_is_due(struct rt_mstore *ms, uint64_t events)
{
    bool is_due = false;

    if (ms == NULL || ms->meter == NULL) {
        return false;
    }
    pthread_mutex_lock(&ms->lock);
    is_due = is_due_locked(ms, events);
    pthread_mutex_unlock(&ms->lock);
    return is_due;
}

void
weft__rt_mstore_free(struct rt_mstore *ms)
{
    if (ms == NULL) {
        return;
    }
    stop_flusher(ms);
    sqlite3_finalize(ms->del);
    sqlite3_finalize(ms->ins);
    sqlite3_close(ms->db);
    weft__state_close(ms->pg);
    weft_meter_free(ms->meter);
    weft__free(ms->run_id);
    pthread_cond_destroy(&ms->wake);
    pthread_mutex_destroy(&ms->lock);
    weft__free(ms);
}

/* The attempt @p run_id's last run wrote (its latest), or 0 for a run that wrote none, on a
 * SQLite state; @p del gets the statement that deletes its span pipeline rows. */
static weft_err
sqlite_latest(struct rt_mstore *ms, const char *run_id, int64_t *attempt, sqlite3_stmt **del)
{
    sqlite3_stmt *stmt = NULL;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(ms->db,
                           "SELECT COALESCE(MAX(attempt), 0) FROM run_metrics WHERE run_id = ?1",
                           -1, &stmt, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(ms->db,
                           "DELETE FROM run_metrics WHERE run_id = ?1 AND attempt = ?2"
                           " AND " SELF_NAME_MATCH,
                           -1, del, NULL) != SQLITE_OK) {
        err = WEFT_EIO;
        goto out;
    }
    sqlite3_bind_text(stmt, 1, run_id, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        *attempt = sqlite3_column_int64(stmt, 0);
    }
out:
    sqlite3_finalize(stmt);
    return err;
}

weft_err
weft_run_metrics_save_provider(const char *state_path,
                               const char *run_id,
                               struct weft_provider *provider)
{
    char *path = NULL;
    struct rt_mstore *ms = NULL;
    struct weft_meter *meter = NULL;
    sqlite3_stmt *del = NULL;
    int64_t attempt = 0;
    weft_err err = WEFT_OK;
    int rc = SQLITE_OK;

    if (run_id == NULL || provider == NULL) {
        return WEFT_EINVAL;
    }
    path = state_path != NULL ? weft__strdup(state_path) : weft__state_default_path();
    if (path == NULL) {
        return WEFT_ENOMEM;
    }
    ms = weft__rt_mstore_open(path);
    weft__free(path);
    if (ms == NULL) {
        return WEFT_EIO;
    }
    if (ms->pg != NULL) {
        err = weft__state_metrics_attempt(ms->pg, run_id, false, &attempt);
    } else {
        err = sqlite_latest(ms, run_id, &attempt, &del);
    }
    if (err == WEFT_OK) {
        err = weft_meter_new(NULL, &meter);
    }
    if (err == WEFT_OK) {
        err = weft_meter_observe_provider(meter, provider);
    }
    if (err == WEFT_OK && ms->pg != NULL) {
        err = write_pg(ms->pg, run_id, attempt, meter, true);
        if (err != WEFT_OK) {
            WEFT_LOG(WEFT_LOG_ERROR, "run metrics: run %s: cannot save its span counts: %s", run_id,
                     weft_strerror(err));
        }
    } else if (err == WEFT_OK) {
        rc = write_sqlite(ms->db, del, ms->ins, run_id, attempt, meter, true);
        if (rc != SQLITE_OK) {
            WEFT_LOG(WEFT_LOG_ERROR, "run metrics: run %s: cannot save its span counts: %s", run_id,
                     sqlite3_errstr(rc));
            err = WEFT_EIO;
        }
    }
    sqlite3_finalize(del);
    weft_meter_free(meter);
    weft__rt_mstore_free(ms);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Folding (weft serve)                                                                        */

struct fold {
    struct weft_meter *meter;
    struct rt_metrics **by_workflow; /* one per distinct workflow name, in first-seen order */
    size_t count;
    uint64_t oldest_start_ns;     /* 0 when no run is in progress */
    uint64_t skipped;             /* rows that did not fit their instrument */
    struct weft__dist_metrics dm; /* the task families, zeroed per workflow (see fold_task) */
    bool has_dm;
    double *bounds;    /* 256 histogram bounds */
    uint64_t *buckets; /* 257 histogram buckets */
};

static struct rt_metrics *
fold_metrics(struct fold *f, const char *workflow)
{
    struct rt_metrics **grown = NULL;
    struct rt_metrics *m = NULL;

    for (size_t i = 0; i < f->count; i++) {
        if (strcmp(weft__rt_metrics_workflow(f->by_workflow[i]), workflow) == 0) {
            return f->by_workflow[i];
        }
    }
    grown = weft__realloc(f->by_workflow, (f->count + 1) * sizeof(*grown));
    if (grown == NULL) {
        return NULL;
    }
    f->by_workflow = grown;
    m = weft__rt_metrics_new(f->meter, workflow);
    if (m != NULL) {
        f->by_workflow[f->count++] = m;
        /* Runs come newest first: the workflows run most recently show their stuck-loop and
         * breaker series at 0 (their first event is then an increase). Only so many: the
         * zeros take at most 900 of the 2,000 series the stuck-loop instrument keeps, and
         * real detections keep the rest; the alert rules count a new series anyway. */
        if (f->count <= FOLD_ZERO_WORKFLOWS) {
            weft__rt_metrics_zero_known(m);
        }
    }
    return m;
}

/* ---- What each stored row adds; both backends' readers call these ---- */

/* A run row: runs in progress and the oldest one's age always; for a run without snapshots
 * (stored before they existed) everything the row says; for a run whose snapshots lack its end
 * (killed, then marked by another process) the end-of-run families from the row. */
static weft_err
fold_run(const struct weft_run_info *info, bool has_snapshot, bool has_end, void *user_data)
{
    struct fold *f = user_data;
    struct rt_metrics *m = fold_metrics(f, info->workflow != NULL ? info->workflow : "");

    if (m == NULL) {
        return WEFT_ENOMEM;
    }
    if (!has_snapshot) {
        weft__rt_metrics_stored_run(m, info);
    } else {
        weft__rt_metrics_stored_end(m, info, !has_end);
    }
    if (info->ended_ns == 0 && (f->oldest_start_ns == 0 || info->started_ns < f->oldest_start_ns)) {
        f->oldest_start_ns = info->started_ns;
    }
    return WEFT_OK;
}

/* Agent outcomes of runs without snapshots, from their steps (as before snapshots). */
static weft_err
fold_agents(
    const char *workflow, const char *agent, bool is_success, uint64_t count, void *user_data)
{
    struct fold *f = user_data;
    struct rt_metrics *m = fold_metrics(f, workflow);

    if (m == NULL) {
        return WEFT_ENOMEM;
    }
    weft__rt_metrics_stored_agents(m, agent, is_success, count);
    return WEFT_OK;
}

/* Sums and histograms: every run's series adds into its (name, labels) series. A row that does
 * not fit is counted and skipped. */
static weft_err
fold_sum(const struct weft__state_metric *row, void *user_data)
{
    struct fold *f = user_data;
    json_t *labels = json_loads(row->labels != NULL ? row->labels : "", 0, NULL);
    struct weft_attr attrs[WEFT__MSTORE_MAX_LABELS];
    size_t n = weft__mstore_labels(labels, attrs);
    struct weft_instrument *in = NULL;
    bool is_histogram = row->kind == WEFT_INSTRUMENT_HISTOGRAM;
    long nb = 0;
    long nc = 0;
    weft_err e = WEFT_OK;

    if (is_histogram) {
        nb = weft__mstore_numbers(row->bounds != NULL ? row->bounds : "", f->bounds, NULL, 256);
        nc = weft__mstore_numbers(row->buckets != NULL ? row->buckets : "", NULL, f->buckets, 257);
    }
    if (!json_is_object(labels) || nb < 0 || nc < 0 ||
        (is_histogram && (nb == 0 || nc != nb + 1))) {
        e = WEFT_EPARSE;
    }
    if (e == WEFT_OK) {
        e = weft_meter_instrument(f->meter, (weft_instrument_kind)row->kind, row->name, row->unit,
                                  row->description, f->bounds, (size_t)nb, &in);
    }
    if (e == WEFT_OK && is_histogram) {
        e = weft__histogram_merge(in, attrs, n, f->buckets, (size_t)nc, row->sum,
                                  row->has_range ? row->min : 0, row->has_range ? row->max : 0);
    } else if (e == WEFT_OK) {
        e = weft_counter_add(in, row->value, attrs, n);
    }
    if (e != WEFT_OK && e != WEFT_ELIMIT) {
        f->skipped++;
    }
    json_decref(labels);
    return WEFT_OK;
}

/* Every workflow that dispatched tasks to a broker has each task counter at least at 0
 * (snapshots leave counters that never moved out), as a live orchestrator's would: rates and
 * ratios over them read 0 rather than nothing. */
static weft_err
fold_task(const char *labels_text, void *user_data)
{
    struct fold *f = user_data;
    json_t *labels = json_loads(labels_text, 0, NULL);
    const char *workflow = json_string_value(json_object_get(labels, "workflow"));

    if (workflow != NULL) {
        if (!f->has_dm) {
            weft__dist_metrics_init(&f->dm, f->meter, WEFT__DIST_TASKS);
            f->has_dm = true;
        }
        weft__dist_metrics_zero(&f->dm, workflow);
    }
    json_decref(labels);
    return WEFT_OK;
}

/* Gauges: span counts add up across runs; queue fill, "failing" and distributed tasks in
 * flight count only for runs in progress that saved recently (utilisation: the fullest one;
 * failing: 1 when any such run's exporter is failing); other runs count as empty and healthy,
 * so every exporter that ever ran has its series (a run killed with tasks in flight does not
 * keep them in flight forever). The readers fold the values; this sets them. */
static weft_err
fold_gauge(const struct weft__state_metric *row, void *user_data)
{
    struct fold *f = user_data;
    json_t *labels = json_loads(row->labels != NULL ? row->labels : "", 0, NULL);
    struct weft_attr attrs[WEFT__MSTORE_MAX_LABELS];
    size_t n = weft__mstore_labels(labels, attrs);
    struct weft_instrument *in = NULL;
    weft_err e = weft_meter_instrument(f->meter, WEFT_INSTRUMENT_GAUGE, row->name, row->unit,
                                       row->description, NULL, 0, &in);

    if (e == WEFT_OK && json_is_object(labels)) {
        e = weft_gauge_set(in, row->value, attrs, n);
    }
    if (e != WEFT_OK || !json_is_object(labels)) {
        f->skipped++;
    }
    json_decref(labels);
    return WEFT_OK;
}

static const struct weft__state_metrics_fold fold_cb = {
    .run = fold_run,
    .agents = fold_agents,
    .sum = fold_sum,
    .task_labels = fold_task,
    .gauge = fold_gauge,
};

/* ---- Reading a SQLite state (PostgreSQL: weft__state_metrics_fold()) ---- */

static const char *
col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t != NULL ? (const char *)t : "";
}

static const char *
col_text_or_null(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NULL : col_text(st, i);
}

static bool
has_table(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    bool is_there = false;

    if (sqlite3_prepare_v2(
            db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_metrics'", -1,
            &st, NULL) == SQLITE_OK) {
        is_there = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return is_there;
}

static weft_err
sqlite_runs(struct fold *f, sqlite3 *db, bool has_snapshots)
{
    char sql[1024];
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_OK;
    weft_err err = WEFT_OK;

    snprintf(sql, sizeof(sql),
             "SELECT workflow, status, started_ns, ended_ns, reward, cost_usd, loops, %s, %s"
             " FROM runs ORDER BY started_ns DESC LIMIT %d",
             has_snapshots ? "EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = runs.id)" : "0",
             has_snapshots ? "EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = runs.id"
                             " AND m.name = 'weft.runs')"
                           : "0",
             FOLD_MAX_RUNS);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "weft serve: reading runs: %s", sqlite3_errmsg(db));
        return WEFT_EIO;
    }
    while (err == WEFT_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct weft_run_info info;

        memset(&info, 0, sizeof(info));
        info.workflow = (char *)col_text(st, 0);
        info.status = (char *)col_text(st, 1);
        info.started_ns = (uint64_t)sqlite3_column_int64(st, 2);
        info.ended_ns = (uint64_t)sqlite3_column_int64(st, 3);
        info.reward = sqlite3_column_double(st, 4);
        info.cost_usd = sqlite3_column_double(st, 5);
        info.loops = (char *)col_text_or_null(st, 6);
        err = fold_run(&info, sqlite3_column_int(st, 7) != 0, sqlite3_column_int(st, 8) != 0, f);
    }
    sqlite3_finalize(st);
    return err != WEFT_OK ? err : rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

static weft_err
sqlite_agents(struct fold *f, sqlite3 *db, bool has_snapshots)
{
    char sql[600];
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_OK;
    weft_err err = WEFT_OK;

    snprintf(sql, sizeof(sql),
             "SELECT r.workflow, s.agent, s.status, COUNT(*) FROM steps s"
             " JOIN runs r ON r.id = s.run_id"
             " WHERE s.executor = 'agent' AND s.status IN ('completed', 'failed')%s"
             " GROUP BY r.workflow, s.agent, s.status",
             has_snapshots ? " AND NOT EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = r.id)"
                           : "");
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "weft serve: reading steps: %s", sqlite3_errmsg(db));
        return WEFT_EIO;
    }
    while (err == WEFT_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        err =
            fold_agents(col_text(st, 0), col_text(st, 1), strcmp(col_text(st, 2), "completed") == 0,
                        (uint64_t)sqlite3_column_int64(st, 3), f);
    }
    sqlite3_finalize(st);
    return err != WEFT_OK ? err : rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* Run @p sql (columns: name, kind, unit, description, labels, value, sum, min, max, bounds,
 * buckets; @p since bound to ?1 when the statement has it) and hand each row to @p fn. */
static weft_err
sqlite_metrics(struct fold *f,
               sqlite3 *db,
               const char *sql,
               uint64_t since,
               weft_err (*fn)(const struct weft__state_metric *row, void *user_data))
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_OK;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "weft serve: reading run metrics: %s", sqlite3_errmsg(db));
        return WEFT_EIO;
    }
    if (sqlite3_bind_parameter_count(st) > 0) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)since);
    }
    while (err == WEFT_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct weft__state_metric row;

        memset(&row, 0, sizeof(row));
        row.name = col_text(st, 0);
        row.kind = sqlite3_column_int(st, 1);
        row.unit = col_text(st, 2);
        row.description = col_text(st, 3);
        row.labels = col_text(st, 4);
        row.value = sqlite3_column_double(st, 5);
        row.sum = sqlite3_column_double(st, 6);
        row.has_range =
            sqlite3_column_type(st, 7) != SQLITE_NULL && sqlite3_column_type(st, 8) != SQLITE_NULL;
        row.min = sqlite3_column_double(st, 7);
        row.max = sqlite3_column_double(st, 8);
        row.bounds = col_text_or_null(st, 9);
        row.buckets = col_text_or_null(st, 10);
        err = fn(&row, f);
    }
    sqlite3_finalize(st);
    return err != WEFT_OK ? err : rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

static weft_err
sqlite_tasks(struct fold *f, sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_OK;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(db,
                           "SELECT DISTINCT labels FROM run_metrics"
                           " WHERE name = 'weft.tasks.dispatched'",
                           -1, &st, NULL) != SQLITE_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "weft serve: reading run metrics: %s", sqlite3_errmsg(db));
        return WEFT_EIO;
    }
    while (err == WEFT_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        err = fold_task(col_text(st, 0), f);
    }
    sqlite3_finalize(st);
    return err != WEFT_OK ? err : rc == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* The same reads as weft__state_metrics_fold() (state_pg.c), in one read transaction. */
static weft_err
fold_sqlite(struct fold *f, const char *path, uint64_t fresh_ns)
{
    sqlite3 *db = NULL;
    bool has_snapshots = false;
    weft_err err = WEFT_OK;

    if (access(path, F_OK) != 0) {
        return WEFT_OK; /* no database yet: no runs, every family at zero */
    }
    db = open_db(path, SQLITE_OPEN_READONLY);
    if (db == NULL) {
        return WEFT_EIO;
    }
    /* One read transaction: every run and its snapshot as of one moment. */
    (void)sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    has_snapshots = has_table(db);
    err = sqlite_runs(f, db, has_snapshots);
    if (err == WEFT_OK) {
        err = sqlite_agents(f, db, has_snapshots);
    }
    if (err == WEFT_OK && has_snapshots) {
        /* Sums add up in SQL; histograms row by row (buckets are JSON). */
        err = sqlite_metrics(f, db,
                             "SELECT name, kind, unit, description, labels, SUM(value), 0, NULL,"
                             " NULL, NULL, NULL FROM run_metrics WHERE kind IN (0, 1)"
                             " GROUP BY name, labels"
                             " UNION ALL SELECT name, kind, unit, description, labels, value, sum,"
                             " min, max, bounds, buckets FROM run_metrics WHERE kind = 3",
                             0, fold_sum);
    }
    if (err == WEFT_OK && has_snapshots) {
        err = sqlite_tasks(f, db);
    }
    if (err == WEFT_OK && has_snapshots) {
        err = sqlite_metrics(
            f, db,
            "SELECT m.name, 2, m.unit, m.description, m.labels,"
            " CASE WHEN m.name IN ('weft.exporter.queue.utilization', 'weft.exporter.failing')"
            " THEN MAX(v) ELSE SUM(v) END, 0, NULL, NULL, NULL, NULL"
            " FROM (SELECT m.*, CASE WHEN m.name NOT LIKE 'weft.exporter.queue.%'"
            " AND m.name <> 'weft.exporter.failing' AND m.name <> 'weft.tasks.in_flight'"
            " AND m.name NOT IN ('weft.exporter.spool.size', 'weft.exporter.spool.bytes')"
            " OR ((r.ended_ns IS NULL OR r.ended_ns = 0) AND m.saved_ns >= ?1)"
            " THEN m.value ELSE 0 END AS v"
            " FROM run_metrics m JOIN runs r ON r.id = m.run_id WHERE m.kind = 2) m"
            " GROUP BY m.name, m.labels",
            fresh_ns, fold_gauge);
    }
    (void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    return err;
}

/* A PostgreSQL state: the same rows through the state's own reader. */
static weft_err
fold_postgresql(struct fold *f, const char *url, uint64_t fresh_ns)
{
    struct rt_state *st = NULL;
    char why[512];
    weft_err err = weft__state_open(url, &st, why, sizeof(why));

    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "weft serve: %s", why);
        return err;
    }
    err = weft__state_metrics_fold(st, FOLD_MAX_RUNS, fresh_ns, &fold_cb, f);
    weft__state_close(st);
    return err;
}

/* Labels JSON back into attributes borrowed from @p o (valid while @p o lives). */
size_t
weft__mstore_labels(json_t *o, struct weft_attr *attrs)
{
    const char *key = NULL;
    json_t *v = NULL;
    size_t n = 0;

    json_object_foreach(o, key, v)
    {
        if (n == WEFT__MSTORE_MAX_LABELS) {
            break;
        }
        if (json_is_string(v)) {
            attrs[n++] = weft_attr_str(key, json_string_value(v));
        } else if (json_is_boolean(v)) {
            attrs[n++] = weft_attr_bool(key, json_is_true(v));
        } else if (json_is_integer(v)) {
            attrs[n++] = weft_attr_int(key, (int64_t)json_integer_value(v));
        } else if (json_is_real(v)) {
            attrs[n++] = weft_attr_double(key, json_real_value(v));
        }
    }
    return n;
}

/* Parse a JSON array of numbers into @p out (at most @p cap). @return the count, or -1. */
long
weft__mstore_numbers(const char *text, double *d, uint64_t *u, size_t cap)
{
    json_t *a = json_loads(text, 0, NULL);
    size_t n = json_array_size(a);
    long out = (long)n;

    if (!json_is_array(a) || n > cap) {
        json_decref(a);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) {
            out = -1;
            break;
        }
        if (d != NULL) {
            d[i] = json_number_value(v);
        } else {
            u[i] = json_is_integer(v) && json_integer_value(v) >= 0
                       ? (uint64_t)json_integer_value(v)
                       : 0;
        }
    }
    json_decref(a);
    return out;
}

/* The self-metric families, listed (without series) before any run stored them. */
static void
register_self_families(struct weft_meter *meter)
{
    static const char *const spans[] = {"weft.spans.ended",         "weft.spans.exported",
                                        "weft.spans.dropped",       "weft.spans.failed",
                                        "weft.exporter.queue.size", "weft.exporter.queue.capacity"};
    struct weft_instrument *in = NULL;

    for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
        (void)weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, spans[i], "{span}",
                                    "Span pipeline counts (per exporter) summed over stored runs",
                                    NULL, 0, &in);
    }
    (void)weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.exports", "{export}",
                                "Export calls (per exporter) summed over stored runs", NULL, 0,
                                &in);
    (void)weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.export.failures",
                                "{export}", "Failed export calls (per exporter) summed over runs",
                                NULL, 0, &in);
    (void)weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.export.time", "s",
                                "Time in export calls (per exporter) summed over stored runs", NULL,
                                0, &in);
    (void)weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.queue.utilization",
                                "1", "Fill of an exporter's queue (0 empty, 1 full: spans drop)",
                                NULL, 0, &in);
    (void)weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.failing", "",
                                "1 while an exporter of a run in progress is failing", NULL, 0,
                                &in);
}

weft_err
weft__rt_mstore_fold(struct weft_meter *meter, const char *state_path)
{
    struct fold f;
    struct rt_metrics *all = NULL;
    char *path = NULL;
    uint64_t now_ns = weft__now_ns();
    uint64_t fresh_ns = now_ns > QUEUE_FRESH_NS ? now_ns - QUEUE_FRESH_NS : 0;
    weft_err err = WEFT_OK;

    if (meter == NULL) {
        return WEFT_EINVAL;
    }
    memset(&f, 0, sizeof(f));
    f.meter = meter;
    err = weft_runtime_metrics_register(meter);
    if (err != WEFT_OK) {
        return err;
    }
    register_self_families(meter);
    all = weft__rt_metrics_new(meter, "");
    path = state_path != NULL ? weft__strdup(state_path) : weft__state_default_path();
    f.bounds = weft__malloc(256 * sizeof(double));
    f.buckets = weft__malloc(257 * sizeof(uint64_t));
    if (all == NULL || path == NULL || f.bounds == NULL || f.buckets == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    if (weft__state_is_url(path)) {
        err = fold_postgresql(&f, path, fresh_ns);
    } else {
        err = fold_sqlite(&f, path, fresh_ns);
    }
    if (f.skipped > 0) {
        WEFT_LOG(WEFT_LOG_WARN, "weft serve: %llu stored metric rows did not fit and were skipped",
                 (unsigned long long)f.skipped);
    }
out:
    /* The oldest run in progress, across workflows (an unlabelled gauge, as when live). */
    weft__rt_metrics_stored_oldest(all, f.oldest_start_ns != 0 && now_ns > f.oldest_start_ns
                                            ? (double)(now_ns - f.oldest_start_ns) / 1e9
                                            : 0.0);
    if (f.has_dm) {
        weft__dist_metrics_cleanup(&f.dm);
    }
    weft__free(path);
    weft__free(f.bounds);
    weft__free(f.buckets);
    for (size_t i = 0; i < f.count; i++) {
        weft__rt_metrics_free(f.by_workflow[i]);
    }
    weft__free(f.by_workflow);
    weft__rt_metrics_free(all);
    return err;
}
