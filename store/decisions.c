/* store/decisions.c - tail sampling's decisions kept in the span store, so that several
 * `weft serve` processes writing one store decide each trace once (docs/sampling.md, "At
 * ingest"): the first to decide a trace records it (INSERT ... ON CONFLICT DO NOTHING), every
 * other one reads the decision that stands and follows it, also for spans of the trace it holds
 * without having seen the root.
 *
 * Its own connection (a SQLite handle or a libpq one), used by one thread at a time (the
 * ingest's store lock). Decisions older than a day are deleted now and then: by then no late
 * span of the trace is waited for.
 */
#include "store/decisions.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "store/pg.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

#define KEEP_NS        (24ull * 3600 * 1000000000ull)
#define PRUNE_EVERY    1000 /* claims between two deletions of old decisions */
#define LOOKUP_MAX_IDS 512

struct weft__store_decisions {
    bool is_pg;
    sqlite3 *db;
    struct weft__store_pg pg;
    char where[512];
    unsigned claims;
};

weft_err
weft__store_decisions_open(const char *location, struct weft__store_decisions **out)
{
    struct weft__store_decisions *d = NULL;
    weft_err err = WEFT_OK;

    *out = NULL;
    d = weft__calloc(1, sizeof(*d));
    if (d == NULL) {
        return WEFT_ENOMEM;
    }
    snprintf(d->where, sizeof(d->where), "%s", location);
    d->is_pg = weft__store_is_pg_url(location);
    if (d->is_pg) {
        err = weft__store_pg_connect(&d->pg, location);
        if (err == WEFT_OK) {
            err = weft__store_pg_migrate(&d->pg);
        }
        if (err != WEFT_OK) {
            WEFT_LOG(WEFT_LOG_ERROR, "sampling decisions: %s", d->pg.errmsg);
        }
    } else if (sqlite3_open_v2(location, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                               NULL) != SQLITE_OK ||
               sqlite3_busy_timeout(d->db, STORE_BUSY_TIMEOUT_MS) != SQLITE_OK ||
               weft__store_migrate(d->db, location) != WEFT_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, location, d->db, "sampling decisions");
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        weft__store_decisions_close(d);
        return err;
    }
    *out = d;
    return WEFT_OK;
}

void
weft__store_decisions_close(struct weft__store_decisions *d)
{
    if (d == NULL) {
        return;
    }
    if (d->is_pg) {
        weft__store_pg_close(&d->pg);
    }
    sqlite3_close(d->db);
    weft__free(d);
}

/* ------------------------------------------------------------------------------------------ */
/* SQLite                                                                                      */

static weft_err
lite_read(struct weft__store_decisions *d,
          const char *trace_hex,
          bool *found,
          bool *keep,
          char *rule,
          size_t rule_len)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(d->db, "SELECT keep, rule FROM trace_decisions WHERE trace_id = ?",
                                -1, &stmt, NULL);

    *found = false;
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(stmt, 1, trace_hex, -1, SQLITE_STATIC);
        rc = sqlite3_step(stmt);
    }
    if (rc == SQLITE_ROW) {
        *found = true;
        *keep = sqlite3_column_int(stmt, 0) != 0;
        snprintf(rule, rule_len, "%s", (const char *)sqlite3_column_text(stmt, 1));
        rc = SQLITE_DONE;
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        weft__store_log_db_error(WEFT_LOG_WARN, d->where, d->db, "cannot read a decision");
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static weft_err
lite_claim(struct weft__store_decisions *d, const char *trace_hex, bool keep, const char *rule)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(d->db,
                                "INSERT INTO trace_decisions (trace_id, keep, rule, decided_ns)"
                                " VALUES (?, ?, ?, ?) ON CONFLICT (trace_id) DO NOTHING",
                                -1, &stmt, NULL);

    if (rc == SQLITE_OK) {
        sqlite3_bind_text(stmt, 1, trace_hex, -1, SQLITE_STATIC);
        sqlite3_bind_int(stmt, 2, keep ? 1 : 0);
        sqlite3_bind_text(stmt, 3, rule, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 4, (sqlite3_int64)weft__now_ns());
        rc = sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        weft__store_log_db_error(WEFT_LOG_WARN, d->where, d->db, "cannot record a decision");
        return WEFT_EIO;
    }
    if (++d->claims % PRUNE_EVERY == 0) {
        char sql[128];

        snprintf(sql, sizeof(sql), "DELETE FROM trace_decisions WHERE decided_ns < %lld",
                 (long long)(weft__now_ns() - KEEP_NS));
        (void)sqlite3_exec(d->db, sql, NULL, NULL, NULL);
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* PostgreSQL                                                                                  */

static weft_err
pg_claim(struct weft__store_decisions *d,
         const char *trace_hex,
         bool keep,
         const char *rule,
         bool *out_keep,
         char *out_rule,
         size_t rule_len)
{
    char now[24];
    const char *values[4] = {trace_hex, keep ? "t" : "f", rule, now};
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    snprintf(now, sizeof(now), "%lld", (long long)weft__now_ns());
    /* One statement: the row that stands, whether this insert made it or another did. */
    res = weft__store_pg_run(&d->pg,
                             "WITH ins AS (INSERT INTO weft_trace_decisions"
                             " (trace_id, keep, rule, decided_ns) VALUES ($1, $2, $3, $4)"
                             " ON CONFLICT (trace_id) DO NOTHING RETURNING keep, rule)"
                             " SELECT keep, rule FROM ins UNION ALL"
                             " SELECT keep, rule FROM weft_trace_decisions WHERE trace_id = $1"
                             " AND NOT EXISTS (SELECT 1 FROM ins)",
                             4, values, true);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        err = weft__store_pg_fail(&d->pg, res, "cannot record a decision");
        WEFT_LOG(WEFT_LOG_WARN, "sampling decisions: %s", d->pg.errmsg);
        if (weft__store_pg_is_lost(&d->pg)) {
            (void)weft__store_pg_reset(&d->pg);
        }
    } else {
        *out_keep = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        snprintf(out_rule, rule_len, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    if (err == WEFT_OK && ++d->claims % PRUNE_EVERY == 0) {
        char sql[128];

        snprintf(sql, sizeof(sql), "DELETE FROM weft_trace_decisions WHERE decided_ns < %lld",
                 (long long)(weft__now_ns() - KEEP_NS));
        (void)weft__store_pg_exec(&d->pg, "cannot prune decisions", sql);
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* The interface                                                                               */

weft_err
weft__store_decisions_claim(struct weft__store_decisions *d,
                            const char *trace_hex,
                            bool keep,
                            const char *rule,
                            bool *out_keep,
                            char *out_rule,
                            size_t rule_len)
{
    bool found = false;
    weft_err err = WEFT_OK;

    *out_keep = keep;
    snprintf(out_rule, rule_len, "%s", rule);
    if (d->is_pg) {
        return pg_claim(d, trace_hex, keep, rule, out_keep, out_rule, rule_len);
    }
    /* SQLite: the insert and the read in one write transaction. */
    if (sqlite3_exec(d->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_WARN, d->where, d->db, "cannot lock for a decision");
        return WEFT_EIO;
    }
    err = lite_claim(d, trace_hex, keep, rule);
    if (err == WEFT_OK) {
        err = lite_read(d, trace_hex, &found, out_keep, out_rule, rule_len);
    }
    (void)sqlite3_exec(d->db, err == WEFT_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return err;
}

weft_err
weft__store_decisions_lookup(struct weft__store_decisions *d,
                             const char *const *trace_hex,
                             size_t count,
                             weft__store_decision_fn fn,
                             void *user)
{
    weft_err err = WEFT_OK;

    count = count < LOOKUP_MAX_IDS ? count : LOOKUP_MAX_IDS;
    if (!d->is_pg) {
        for (size_t i = 0; i < count && err == WEFT_OK; i++) {
            bool found = false;
            bool keep = false;
            char rule[64];

            err = lite_read(d, trace_hex[i], &found, &keep, rule, sizeof(rule));
            if (err == WEFT_OK && found) {
                fn(user, i, keep, rule);
            }
        }
        return err;
    }
    {
        struct weft__buf arr;
        PGresult *res = NULL;
        const char *values[1];

        weft__buf_init(&arr, 0);
        err = weft__buf_append_str(&arr, "{");
        for (size_t i = 0; i < count && err == WEFT_OK; i++) {
            err = weft__buf_printf(&arr, "%s%s", i > 0 ? "," : "", trace_hex[i]);
        }
        if (err == WEFT_OK) {
            err = weft__buf_append_str(&arr, "}");
        }
        if (err != WEFT_OK) {
            weft__buf_cleanup(&arr);
            return err;
        }
        values[0] = arr.data;
        res = weft__store_pg_run(&d->pg,
                                 "SELECT trace_id, keep, rule FROM weft_trace_decisions"
                                 " WHERE trace_id = ANY($1::text[])",
                                 1, values, true);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
            err = weft__store_pg_fail(&d->pg, res, "cannot read decisions");
            WEFT_LOG(WEFT_LOG_WARN, "sampling decisions: %s", d->pg.errmsg);
            if (weft__store_pg_is_lost(&d->pg)) {
                (void)weft__store_pg_reset(&d->pg);
            }
        } else {
            for (int r = 0; r < PQntuples(res); r++) {
                for (size_t i = 0; i < count; i++) {
                    if (strcmp(trace_hex[i], PQgetvalue(res, r, 0)) == 0) {
                        fn(user, i, strcmp(PQgetvalue(res, r, 1), "t") == 0, PQgetvalue(res, r, 2));
                        break;
                    }
                }
            }
        }
        PQclear(res);
        weft__buf_cleanup(&arr);
    }
    return err;
}
