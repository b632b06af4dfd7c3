/* runtime/state/state_pg_metrics.c - per-run metric snapshots in PostgreSQL (the run_metrics
 * table, migration 2): written and folded for metrics_store.c by the weft__state_metrics_*
 * functions (state.h), through the backend's query helpers (state_pg.h).
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
/* Run metric snapshots (metrics_store.c)                                                      */

weft_err
weft__state_metrics_attempt(struct rt_state *base, const char *run_id, bool is_next, int64_t *out)
{
    static const char next_sql[] =
        "SELECT COALESCE(MAX(attempt) + 1, 0) FROM run_metrics WHERE run_id = $1";
    static const char latest_sql[] =
        "SELECT COALESCE(MAX(attempt), 0) FROM run_metrics WHERE run_id = $1";

    if (base == NULL || base->ops != &weft__pg_ops || run_id == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = 0;
    return weft__pg_one(weft__pg(base), "run metrics attempt", is_next ? next_sql : latest_sql,
                        SQL_ARGS(SQL_KEY(run_id)), weft__state_row_int, out);
}

static const char metric_insert_sql[] =
    "INSERT INTO run_metrics (run_id, attempt, name, kind, unit, description, labels, value,"
    " count, sum, min, max, bounds, buckets, saved_ns)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

static weft_err
metric_insert(struct pg_state *st,
              const char *run_id,
              int64_t attempt,
              const struct weft__state_metric *m)
{
    struct weft__state_arg args[] = {
        SQL_KEY(run_id),    SQL_I64(attempt),        SQL_KEY(m->name),    SQL_I64(m->kind),
        SQL_KEY(m->unit),   SQL_KEY(m->description), SQL_KEY(m->labels),  SQL_F64(m->value),
        SQL_U64(m->count),  SQL_F64(m->sum),         SQL_F64(m->min),     SQL_F64(m->max),
        SQL_RAW(m->bounds), SQL_RAW(m->buckets),     SQL_U64(m->saved_ns)};

    if (!m->has_range) {
        args[10] = (struct weft__state_arg)SQL_NULL;
        args[11] = (struct weft__state_arg)SQL_NULL;
    }
    return weft__pg_exec(st, "run metrics insert", metric_insert_sql, args, 15);
}

weft_err
weft__state_metrics_save(struct rt_state *base,
                         const char *run_id,
                         int64_t attempt,
                         bool is_self_only,
                         const struct weft__state_metric *rows,
                         size_t count)
{
    static const char del_sql[] = "DELETE FROM run_metrics WHERE run_id = $1 AND attempt = $2";
    static const char del_self_sql[] =
        "DELETE FROM run_metrics WHERE run_id = $1 AND attempt = $2"
        " AND (name LIKE 'weft.spans.%' OR name LIKE 'weft.exporter.%')";
    struct pg_state *st = NULL;
    weft_err err = WEFT_OK;

    if (base == NULL || base->ops != &weft__pg_ops || run_id == NULL ||
        (rows == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    st = weft__pg(base);
    err = weft__pg_begin(base);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__pg_exec(st, "run metrics delete", is_self_only ? del_self_sql : del_sql,
                        SQL_ARGS(SQL_KEY(run_id), SQL_I64(attempt)));
    for (size_t i = 0; err == WEFT_OK && i < count; i++) {
        err = metric_insert(st, run_id, attempt, &rows[i]);
    }
    return weft__pg_tx_end(st, err);
}

/* A snapshot row of the fold's sums or gauges: columns name, kind, unit, description, labels,
 * value, sum, min, max, bounds, buckets. */
static void
read_metric(const struct weft__state_row *row, struct weft__state_metric *m)
{
    memset(m, 0, sizeof(*m));
    m->name = weft__row_str(row, 0);
    m->kind = (int)weft__row_i64(row, 1);
    m->unit = weft__row_str(row, 2);
    m->description = weft__row_str(row, 3);
    m->labels = weft__row_str(row, 4);
    m->value = weft__row_f64(row, 5);
    m->sum = weft__row_f64(row, 6);
    m->has_range = weft__row_text(row, 7) != NULL && weft__row_text(row, 8) != NULL;
    m->min = weft__row_f64(row, 7);
    m->max = weft__row_f64(row, 8);
    m->bounds = weft__row_text(row, 9);
    m->buckets = weft__row_text(row, 10);
}

/* The fold's callbacks, for the row functions of each query. */
struct fold_call {
    const struct weft__state_metrics_fold *cb;
    void *user_data;
};

static weft_err
fold_run_row(const struct weft__state_row *row, void *ctx)
{
    const struct fold_call *f = ctx;
    struct weft_run_info info;

    memset(&info, 0, sizeof(info));
    info.workflow = (char *)weft__row_str(row, 0);
    info.status = (char *)weft__row_str(row, 1);
    info.started_ns = (uint64_t)weft__row_i64(row, 2);
    info.ended_ns = (uint64_t)weft__row_i64(row, 3);
    info.reward = weft__row_f64(row, 4);
    info.cost_usd = weft__row_f64(row, 5);
    info.loops = (char *)weft__row_text(row, 6);
    return f->cb->run(&info, weft__row_flag(row, 7), weft__row_flag(row, 8), f->user_data);
}

static weft_err
fold_agent_row(const struct weft__state_row *row, void *ctx)
{
    const struct fold_call *f = ctx;
    return f->cb->agents(weft__row_str(row, 0), weft__row_str(row, 1),
                         strcmp(weft__row_str(row, 2), "completed") == 0,
                         (uint64_t)weft__row_i64(row, 3), f->user_data);
}

static weft_err
fold_sum_row(const struct weft__state_row *row, void *ctx)
{
    const struct fold_call *f = ctx;
    struct weft__state_metric m;

    read_metric(row, &m);
    return f->cb->sum(&m, f->user_data);
}

static weft_err
fold_labels_row(const struct weft__state_row *row, void *ctx)
{
    const struct fold_call *f = ctx;

    return f->cb->task_labels(weft__row_str(row, 0), f->user_data);
}

static weft_err
fold_gauge_row(const struct weft__state_row *row, void *ctx)
{
    const struct fold_call *f = ctx;
    struct weft__state_metric m;

    read_metric(row, &m);
    return f->cb->gauge(&m, f->user_data);
}

static weft_err
fold_run_rows(struct pg_state *st,
              size_t limit,
              const struct weft__state_metrics_fold *cb,
              void *user_data)
{
    struct fold_call f = {.cb = cb, .user_data = user_data};

    return weft__pg_each(st, "run metrics runs",
                         "SELECT w.workflow, w.status, w.started_ns, w.ended_ns, w.total_reward,"
                         " w.cost_usd, w.loops,"
                         " EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = w.run_id),"
                         " EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = w.run_id"
                         " AND m.name = 'weft.runs')"
                         " FROM workflows w ORDER BY w.started_ns DESC, w.run_id DESC LIMIT $1",
                         SQL_ARGS(SQL_U64(limit)), fold_run_row, &f);
}

static weft_err
fold_agent_rows(struct pg_state *st, const struct weft__state_metrics_fold *cb, void *user_data)
{
    struct fold_call f = {.cb = cb, .user_data = user_data};

    return weft__pg_each(st, "run metrics agents",
                         "SELECT w.workflow, t.agent, t.step_status, count(*) FROM tasks t"
                         " JOIN workflows w ON w.workflow_id = t.workflow_id"
                         " WHERE t.executor_type = 'agent'"
                         " AND t.step_status IN ('completed', 'failed')"
                         " AND NOT EXISTS (SELECT 1 FROM run_metrics m"
                         " WHERE m.run_id = w.run_id)"
                         " GROUP BY w.workflow, t.agent, t.step_status",
                         NULL, 0, fold_agent_row, &f);
}

static weft_err
fold_metric_rows(struct pg_state *st,
                 uint64_t fresh_ns,
                 const struct weft__state_metrics_fold *cb,
                 void *user_data)
{
    struct fold_call f = {.cb = cb, .user_data = user_data};
    weft_err err = WEFT_OK;

    /* Sums add up in SQL; histograms row by row (their buckets are JSON). A family's kind,
     * unit and description are the same in every row a weft writes; MIN() picks one should
     * two versions disagree, as SQLite's bare columns do. */
    err = weft__pg_each(
        st, "run metrics sums",
        "SELECT name, MIN(kind), MIN(unit), MIN(description), labels, SUM(value), 0,"
        " NULL, NULL, NULL, NULL FROM run_metrics WHERE kind IN (0, 1)"
        " GROUP BY name, labels"
        " UNION ALL SELECT name, kind, unit, description, labels, value, sum, min, max,"
        " bounds, buckets FROM run_metrics WHERE kind = 3",
        NULL, 0, fold_sum_row, &f);
    if (err == WEFT_OK) {
        err = weft__pg_each(
            st, "run metrics tasks",
            "SELECT DISTINCT labels FROM run_metrics WHERE name = 'weft.tasks.dispatched'", NULL, 0,
            fold_labels_row, &f);
    }
    if (err != WEFT_OK) {
        return err;
    }
    return weft__pg_each(
        st, "run metrics gauges",
        "SELECT m.name, 2, MIN(m.unit), MIN(m.description), m.labels,"
        " CASE WHEN m.name IN ('weft.exporter.queue.utilization', 'weft.exporter.failing')"
        " THEN MAX(v) ELSE SUM(v) END, 0, NULL, NULL, NULL, NULL"
        " FROM (SELECT m.*, CASE WHEN m.name NOT LIKE 'weft.exporter.queue.%'"
        " AND m.name <> 'weft.exporter.failing' AND m.name <> 'weft.tasks.in_flight'"
        " AND m.name NOT IN ('weft.exporter.spool.size', 'weft.exporter.spool.bytes')"
        " OR ((w.ended_ns IS NULL OR w.ended_ns = 0) AND m.saved_ns >= $1)"
        " THEN m.value ELSE 0 END AS v"
        " FROM run_metrics m JOIN workflows w ON w.run_id = m.run_id WHERE m.kind = 2) m"
        " GROUP BY m.name, m.labels",
        SQL_ARGS(SQL_U64(fresh_ns)), fold_gauge_row, &f);
}

weft_err
weft__state_metrics_fold(struct rt_state *base,
                         size_t limit,
                         uint64_t fresh_ns,
                         const struct weft__state_metrics_fold *cb,
                         void *user_data)
{
    struct pg_state *st = NULL;
    weft_err err = WEFT_OK;

    if (base == NULL || base->ops != &weft__pg_ops || cb == NULL) {
        return WEFT_EINVAL;
    }
    st = weft__pg(base);
    err = weft__pg_begin(base);
    if (err != WEFT_OK) {
        return err;
    }
    /* Every run and its snapshots as of one moment, as SQLite's read transaction gives. */
    err = weft__pg_exec_sql(st, "run metrics snapshot",
                            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", NULL);
    if (err == WEFT_OK) {
        err = fold_run_rows(st, limit, cb, user_data);
    }
    if (err == WEFT_OK) {
        err = fold_agent_rows(st, cb, user_data);
    }
    if (err == WEFT_OK) {
        err = fold_metric_rows(st, fresh_ns, cb, user_data);
    }
    return weft__pg_tx_end(st, err);
}
