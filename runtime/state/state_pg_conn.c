/* runtime/state/state_pg_conn.c - the PostgreSQL backend's connection (state_pg.h): text
 * parameters, statements prepared once per session, the one wrapper around libpq's execution
 * that waits out an outage and sends the open transaction's journal again (state_pg.c's file
 * comment, "Connection loss"), the query helpers every other file of the backend uses, and
 * open, close and transactions. Split from state_pg.c along that seam: what is here knows
 * libpq and no table; the other files know tables and call only the helpers.
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

#define CONNECT_TIMEOUT       "10"       /* seconds; the URL's connect_timeout wins */
#define SQL_IN_LOG_BYTES      160        /* how much of a failed statement a log line quotes */
#define RECONNECT_DEFAULT_MS  60000u     /* the wait for the server (WEFT_STATE_RECONNECT_MS) */
#define RECONNECT_FIRST_MS    100u       /* the first pause between attempts, doubled each time */
#define RECONNECT_MAX_STEP_MS 5000u      /* the longest pause between attempts */
#define RECONNECT_CAP_MS      3600000u   /* WEFT_STATE_RECONNECT_MS is capped at one hour */
#define JOURNAL_MAX_BYTES     (8u << 20) /* parameter bytes kept per transaction for a replay */
#define JOURNAL_MAX_ENTRIES   4096u      /* statements kept per transaction (~2 MiB of entries) */

/* ------------------------------------------------------------------------------------------ */
/* Parameters: text values for PQexecParams, owning what they had to copy                      */

void
weft__pg_params_init(struct params *p)
{
    memset(p, 0, sizeof(*p));
}

void
weft__pg_params_cleanup(struct params *p)
{
    for (int i = 0; i < p->n; i++) {
        weft__free(p->owned[i]);
    }
    memset(p, 0, sizeof(*p));
}

/* The next slot, or -1 (and is_oom) past MAX_PARAMS, which would be a bug of this file. */
static int
slot(struct params *p)
{
    if (p->n == MAX_PARAMS) {
        p->is_oom = true;
        return -1;
    }
    p->v[p->n] = NULL;
    p->owned[p->n] = NULL;
    return p->n++;
}

/* @p s made valid UTF-8 (PostgreSQL refuses other text): @p s itself when it is, else a copy
 * with each invalid part replaced by U+FFFD, kept in slot @p i. */
static void
put_utf8(struct params *p, int i, const char *s, char *owned)
{
    struct weft__buf b;
    size_t len = strlen(s);

    if (weft__utf8_valid(s, len)) {
        p->v[i] = s;
        p->owned[i] = owned;
        return;
    }
    weft__buf_init(&b, 0);
    if (weft__utf8_sanitize(s, len, WEFT__UTF8_REPLACEMENT, &b) != WEFT_OK || b.data == NULL) {
        weft__buf_cleanup(&b);
        weft__free(owned);
        p->is_oom = true;
        return;
    }
    weft__free(owned);
    p->v[i] = b.data;
    p->owned[i] = b.data;
}

/* Free text: redacted (credentials never reach the database) and valid UTF-8. NULL is NULL. */
void
weft__pg_p_text(struct params *p, const char *s)
{
    int i = slot(p);
    char *clean = NULL;

    if (i < 0 || s == NULL) {
        return;
    }
    clean = weft__redact_text(s);
    if (clean == NULL) {
        p->is_oom = true;
        return;
    }
    put_utf8(p, i, clean, clean);
}

/* A key (run, session, step id, script path): generated or chosen by the user, never a secret,
 * and bound as it is so that reads and writes agree (valid UTF-8 aside). NULL is NULL. */
void
weft__pg_p_key(struct params *p, const char *s)
{
    int i = slot(p);

    if (i >= 0 && s != NULL) {
        put_utf8(p, i, s, NULL);
    }
}

/* A string this file built (JSON, UUIDs, status names): bound as it is. */
void
weft__pg_p_raw(struct params *p, const char *s)
{
    int i = slot(p);

    if (i >= 0) {
        p->v[i] = s;
    }
}

/* @p len bytes, sent as they are (bytea without hex: half the bytes and no encoding). */
void
weft__pg_p_bytes(struct params *p, const unsigned char *bytes, size_t len)
{
    int i = len <= INT_MAX ? slot(p) : -1;

    if (i >= 0) {
        p->v[i] = (const char *)bytes;
        p->len[i] = (int)len;
        p->fmt[i] = 1;
        p->has_binary = true;
    } else {
        p->is_oom = true;
    }
}

void
weft__pg_p_i64(struct params *p, int64_t v)
{
    int i = slot(p);

    if (i >= 0) {
        snprintf(p->num[i], sizeof(p->num[i]), "%lld", (long long)v);
        p->v[i] = p->num[i];
    }
}

/* Nanosecond times and other counters stored as BIGINT. */
void
weft__pg_p_u64(struct params *p, uint64_t v)
{
    weft__pg_p_i64(p, v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

void
weft__pg_p_double(struct params *p, double v)
{
    int i = slot(p);

    if (i >= 0) {
        snprintf(p->num[i], sizeof(p->num[i]), "%.17g", v); /* round-trips exactly */
        p->v[i] = p->num[i];
    }
}

void
weft__pg_p_bool(struct params *p, bool v)
{
    weft__pg_p_raw(p, v ? "true" : "false");
}

/* ------------------------------------------------------------------------------------------ */
/* Running statements                                                                          */

static void
notice(void *arg, const char *message)
{
    (void)arg;
    /* CREATE ... IF NOT EXISTS and friends: the library never prints. */
    WEFT_LOG(WEFT_LOG_DEBUG, "state: postgresql: %s", message);
}

/* The server's one-line message of @p res (or the connection's), without its trailing
 * newline, into @p out. Only the primary message: DETAIL and CONTEXT may quote row values. */
void
weft__pg_error_text(const struct pg_state *st, const PGresult *res, char *out, size_t len)
{
    const char *primary = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *code = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    size_t n = 0;

    if (primary != NULL) {
        snprintf(out, len, "%s (SQLSTATE %s)", primary, code != NULL ? code : "?");
    } else {
        snprintf(out, len, "%s", PQerrorMessage(st->conn));
    }
    n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ')) {
        out[--n] = '\0';
    }
    for (char *c = out; *c != '\0'; c++) {
        if (*c == '\n') {
            *c = ' ';
        }
    }
}

/* The session's settings, after each connect. Prepared statements are there so that a save
 * is not planned again each time (planning the step upsert costs more than running it), but
 * PostgreSQL's default plan_cache_mode (auto) keeps planning a statement afresh while a plan
 * for its actual parameters looks cheaper than the generic one, which it does for the upsert
 * (its CASE branches fold away once the parameters are known): a quarter of the server's time
 * per save went to the planner. Every statement here is a keyed lookup or write whose generic
 * plan is the right one. Servers before 12 lack the setting: ignored. */
static void
session_setup(struct pg_state *st)
{
    PGresult *res = PQexec(st->conn, "SET plan_cache_mode = force_generic_plan");

    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        WEFT_LOG(WEFT_LOG_DEBUG, "state: %s: plan_cache_mode not set: %s", st->where,
                 PQerrorMessage(st->conn));
    }
    PQclear(res);
}

/* The wait for a lost connection: WEFT_STATE_RECONNECT_MS (milliseconds, at most
 * RECONNECT_CAP_MS; 0 makes the connection again once, without waiting), else
 * RECONNECT_DEFAULT_MS. */
static uint64_t
reconnect_budget_ms(void)
{
    const char *v = getenv("WEFT_STATE_RECONNECT_MS");
    char *end = NULL;
    unsigned long long ms = 0;

    if (v == NULL || v[0] == '\0') {
        return RECONNECT_DEFAULT_MS;
    }
    errno = 0;
    ms = strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
        WEFT_LOG(WEFT_LOG_WARN,
                 "state: WEFT_STATE_RECONNECT_MS=%.32s is not a number of milliseconds; using %u",
                 v, RECONNECT_DEFAULT_MS);
        return RECONNECT_DEFAULT_MS;
    }
    return ms > RECONNECT_CAP_MS ? RECONNECT_CAP_MS : (uint64_t)ms;
}

/* After the connection dropped: make it again, with a pause between attempts that starts at
 * RECONNECT_FIRST_MS and doubles up to RECONNECT_MAX_STEP_MS, until @p deadline
 * (weft__monotonic_ns() time; an attempt itself can take up to the connect timeout). @return
 * true when it is back; false marks the handle lost for good (is_lost). */
static bool
reconnect(struct pg_state *st, const char *what, uint64_t deadline)
{
    uint64_t started = weft__monotonic_ns();
    unsigned pause = RECONNECT_FIRST_MS;
    unsigned attempts = 0;

    for (;;) {
        uint64_t now = 0;
        uint64_t left_ms = 0;

        PQreset(st->conn);
        attempts++;
        if (PQstatus(st->conn) == CONNECTION_OK) {
            break;
        }
        now = weft__monotonic_ns();
        if (now >= deadline) {
            WEFT_LOG(WEFT_LOG_ERROR,
                     "state: the connection to %s was lost during %s and could not be made "
                     "again in %llu ms (%u attempts); writes from now on may be missing",
                     st->where, what, (unsigned long long)((now - started) / 1000000u), attempts);
            st->is_lost = true;
            return false;
        }
        if (attempts == 1) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "state: the connection to %s was lost during %s; waiting up to %llu ms for "
                     "the server",
                     st->where, what, (unsigned long long)((deadline - now) / 1000000u));
        }
        left_ms = (deadline - now + 999999u) / 1000000u;
        weft__sleep_ms(left_ms < pause ? (unsigned)left_ms : pause);
        pause = pause * 2 > RECONNECT_MAX_STEP_MS ? RECONNECT_MAX_STEP_MS : pause * 2;
    }
    for (size_t i = 0; i < PREPARED_MAX; i++) {
        st->prepared[i].is_ready = false; /* prepared statements live in a session */
    }
    session_setup(st);
    st->reconnects++;
    WEFT_LOG(WEFT_LOG_WARN,
             "state: the connection to %s was lost during %s; reconnected after %llu ms", st->where,
             what, (unsigned long long)((weft__monotonic_ns() - started) / 1000000u));
    return true;
}

/* The prepared statement of @p sql (a string literal, known by its address), or NULL when the
 * cache is full: that statement then runs unprepared. */
static struct prepared *
prepared_of(struct pg_state *st, const char *sql)
{
    for (size_t i = 0; i < PREPARED_MAX; i++) {
        struct prepared *ps = &st->prepared[i];
        if (ps->sql == sql) {
            return ps;
        }
        if (ps->sql == NULL) {
            ps->sql = sql;
            snprintf(ps->name, sizeof(ps->name), "weft_%zu", i);
            ps->is_ready = false;
            return ps;
        }
    }
    return NULL;
}

/* Send @p sql once: statements with parameters are prepared on their first use in a session
 * and executed by name afterwards (parsing and planning a step's upsert cost ten times its
 * execution); others go as they are. The result is the server's answer, whatever it is. */
static PGresult *
send_sql(struct pg_state *st, const char *sql, const struct params *p)
{
    struct prepared *ps = p != NULL ? prepared_of(st, sql) : NULL;
    PGresult *res = NULL;

    const int *lens = p != NULL && p->has_binary ? p->len : NULL;
    const int *fmts = p != NULL && p->has_binary ? p->fmt : NULL;
    int result_format = p != NULL && p->is_binary_result ? 1 : 0;

    if (ps == NULL) {
        return PQexecParams(st->conn, sql, p != NULL ? p->n : 0, NULL, p != NULL ? p->v : NULL,
                            lens, fmts, result_format);
    }
    if (!ps->is_ready) {
        res = PQprepare(st->conn, ps->name, sql, p->n, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            return res;
        }
        PQclear(res);
        ps->is_ready = true;
    }
    return PQexecPrepared(st->conn, ps->name, p->n, p->v, lens, fmts, result_format);
}

/* ------------------------------------------------------------------------------------------ */
/* The journal of the open transaction (see the file comment)                                  */

void
weft__pg_journal_clear(struct pg_state *st)
{
    for (size_t i = 0; i < st->journal_count; i++) {
        for (int k = 0; k < st->journal[i].n; k++) {
            weft__free(st->journal[i].v[k]);
        }
    }
    st->journal_count = 0;
    st->journal_bytes = 0;
    st->is_replayable = true;
}

/* The open transaction can no longer be sent again: its journal goes (memory back at once). */
void
weft__pg_journal_drop(struct pg_state *st)
{
    weft__pg_journal_clear(st);
    st->is_replayable = false;
}

/* Keep @p sql and copies of @p p (NULL: none) as the next statement of the open transaction. */
static void
journal_add(struct pg_state *st, const char *sql, const struct params *p)
{
    struct journal_entry *e = NULL;
    size_t bytes = 0;

    if (!st->is_replayable) {
        return;
    }
    for (int i = 0; p != NULL && i < p->n; i++) {
        bytes += p->v[i] == NULL ? 0 : p->fmt[i] == 1 ? (size_t)p->len[i] : strlen(p->v[i]) + 1;
    }
    if (st->journal_count == JOURNAL_MAX_ENTRIES || bytes > JOURNAL_MAX_BYTES - st->journal_bytes) {
        WEFT_LOG(WEFT_LOG_DEBUG, "state: a transaction on %s outgrew its journal: not replayable",
                 st->where);
        weft__pg_journal_drop(st);
        return;
    }
    if (st->journal_count == st->journal_cap) {
        size_t cap = st->journal_cap > 0 ? st->journal_cap * 2 : 16;
        struct journal_entry *grown = weft__realloc(st->journal, cap * sizeof(*grown));
        if (grown == NULL) {
            weft__pg_journal_drop(st);
            return;
        }
        st->journal = grown;
        st->journal_cap = cap;
    }
    e = &st->journal[st->journal_count];
    memset(e, 0, sizeof(*e));
    e->sql = sql;
    e->n = p != NULL ? p->n : -1; /* -1: sent without parameters (not prepared) */
    for (int i = 0; p != NULL && i < p->n; i++) {
        size_t len = 0;

        e->fmt[i] = p->fmt[i];
        e->len[i] = p->len[i];
        if (p->v[i] == NULL) {
            continue;
        }
        len = p->fmt[i] == 1 ? (size_t)p->len[i] : strlen(p->v[i]) + 1;
        e->v[i] = weft__malloc(len > 0 ? len : 1);
        if (e->v[i] == NULL) {
            for (int k = 0; k < i; k++) {
                weft__free(e->v[k]);
            }
            weft__pg_journal_drop(st);
            return;
        }
        memcpy(e->v[i], p->v[i], len);
    }
    if (p != NULL) {
        e->has_binary = p->has_binary;
        e->is_binary_result = p->is_binary_result;
    }
    st->journal_count++;
    st->journal_bytes += bytes;
}

/* After a reconnect inside a transaction: begin it again and send its journal, so that the
 * server holds what it held before the loss. @return true then; false when something failed
 * (the connection again: PQstatus tells). */
static bool
journal_replay(struct pg_state *st)
{
    PGresult *res = PQexec(st->conn, st->begin_sql != NULL ? st->begin_sql : "BEGIN");
    bool is_ok = PQresultStatus(res) == PGRES_COMMAND_OK;

    PQclear(res);
    for (size_t i = 0; is_ok && i < st->journal_count; i++) {
        const struct journal_entry *e = &st->journal[i];
        struct params q;
        ExecStatusType status = PGRES_FATAL_ERROR;

        weft__pg_params_init(&q);
        for (int k = 0; k < e->n; k++) {
            q.v[k] = e->v[k];
            q.len[k] = e->len[k];
            q.fmt[k] = e->fmt[k];
        }
        q.n = e->n > 0 ? e->n : 0;
        q.has_binary = e->has_binary;
        q.is_binary_result = e->is_binary_result;
        res = send_sql(st, e->sql, e->n >= 0 ? &q : NULL);
        status = PQresultStatus(res);
        is_ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
        PQclear(res);
    }
    if (is_ok) {
        WEFT_LOG(WEFT_LOG_INFO, "state: the open transaction on %s was sent again (%zu statements)",
                 st->where, st->journal_count);
    }
    return is_ok;
}

/* The connection is gone during @p what: make it again before @p deadline and, @p is_in_tx,
 * give the server the open transaction back. @return true when the statement can be sent
 * again. */
static bool
recover(struct pg_state *st, const char *what, bool is_in_tx, uint64_t deadline)
{
    for (;;) {
        if (!reconnect(st, what, deadline)) {
            return false;
        }
        if (!is_in_tx || journal_replay(st)) {
            return true;
        }
        if (PQstatus(st->conn) != CONNECTION_BAD) {
            WEFT_LOG(WEFT_LOG_ERROR,
                     "state: the open transaction on %s could not be sent again: %s", st->where,
                     PQerrorMessage(st->conn));
            return false;
        }
    }
}

/* Run @p sql with the parameters @p p (NULL: none): the one wrapper around libpq's execution.
 * @p may_retry: the statement may be sent again after a reconnect (not ROLLBACK). @p resend
 * (NULL: @p sql) is what is sent again, and journaled inside a transaction: a variant that
 * changes nothing when the first one was applied before its answer was lost. @return the
 * result (PQclear it), or NULL on failure: logged with the statement and the database, and an
 * open transaction is marked to roll back. */
static PGresult *
run_sql_as(struct pg_state *st,
           const char *what,
           const char *sql,
           const char *resend,
           const struct params *p,
           bool may_retry)
{
    PGresult *res = NULL;
    const char *again = resend != NULL ? resend : sql;
    uint64_t deadline = 0;
    char why[512];

    if (p != NULL && p->is_oom) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: %s on %s: out of memory", what, st->where);
        st->is_tx_failed = st->tx_depth > 0;
        return NULL;
    }
    res = send_sql(st, sql, p);
    for (;;) {
        ExecStatusType status = PQresultStatus(res);
        bool is_in_tx = st->tx_depth > 0 || st->is_committing;

        if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
            if (st->tx_depth > 0 && status == PGRES_TUPLES_OK) {
                weft__pg_journal_drop(st); /* what was read decided what follows */
            } else if (st->tx_depth > 0) {
                journal_add(st, again, p);
            }
            return res;
        }
        if (!may_retry || PQstatus(st->conn) != CONNECTION_BAD ||
            (is_in_tx && !st->is_replayable)) {
            break;
        }
        PQclear(res);
        res = NULL;
        if (deadline == 0) {
            /* A handle already lost tries once: a dead database does not cost every statement
             * the whole wait. */
            deadline = weft__monotonic_ns() + (st->is_lost ? 0 : st->reconnect_ms * 1000000u);
        }
        if (!recover(st, what, is_in_tx, deadline)) {
            break;
        }
        res = send_sql(st, again, p);
    }
    weft__pg_error_text(st, res, why, sizeof(why));
    WEFT_LOG(WEFT_LOG_ERROR, "state: %s failed on %s: %s (statement: %.*s%s)", what, st->where, why,
             SQL_IN_LOG_BYTES, sql, strlen(sql) > SQL_IN_LOG_BYTES ? "..." : "");
    PQclear(res);
    st->is_tx_failed = st->tx_depth > 0;
    return NULL;
}

PGresult *
weft__pg_run_sql(
    struct pg_state *st, const char *what, const char *sql, const struct params *p, bool may_retry)
{
    return run_sql_as(st, what, sql, NULL, p, may_retry);
}

PGresult *
weft__pg_query(struct pg_state *st, const char *what, const char *sql, const struct params *p)
{
    return weft__pg_run_sql(st, what, sql, p, true);
}

/* A statement whose result is not needed. @return WEFT_OK, WEFT_EIO (logged). */
weft_err
weft__pg_exec_sql(struct pg_state *st, const char *what, const char *sql, const struct params *p)
{
    PGresult *res = weft__pg_query(st, what, sql, p);

    PQclear(res);
    return res != NULL ? WEFT_OK : WEFT_EIO;
}

/* An append (a row with no key of its own): @p resend, sent again after a lost answer, adds
 * the row only when the first send did not. @return WEFT_OK, WEFT_EIO (logged). */
weft_err
weft__pg_exec_append(struct pg_state *st,
                     const char *what,
                     const char *sql,
                     const char *resend,
                     const struct params *p)
{
    PGresult *res = run_sql_as(st, what, sql, resend, p, true);

    PQclear(res);
    return res != NULL ? WEFT_OK : WEFT_EIO;
}

/* NULL for SQL NULL, else the text value (valid until PQclear). */
static const char *
val(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

int64_t
weft__pg_col_i64(const PGresult *res, int row, int col)
{
    const char *v = val(res, row, col);

    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

static double
col_double(const PGresult *res, int row, int col)
{
    const char *v = val(res, row, col);

    return v != NULL ? strtod(v, NULL) : 0.0;
}

/* ------------------------------------------------------------------------------------------ */
/* The weft__pg_query helpers: every statement below runs through these, and they through
 * run_sql_as()  */

/* Column accessors over one row of a PGresult (state_rows.h). */
static const char *
row_text(const struct weft__state_row *row, int col)
{
    return val(row->handle, row->index, col);
}

static int64_t
row_i64(const struct weft__state_row *row, int col)
{
    return weft__pg_col_i64(row->handle, row->index, col);
}

static double
row_f64(const struct weft__state_row *row, int col)
{
    return col_double(row->handle, row->index, col);
}

static bool
row_flag(const struct weft__state_row *row, int col)
{
    const char *v = val(row->handle, row->index, col);

    return v != NULL && strcmp(v, "t") == 0;
}

static bool
row_is_null(const struct weft__state_row *row, int col)
{
    return PQgetisnull(row->handle, row->index, col) != 0;
}

static const struct weft__state_row_ops pg_row_ops = {
    .text = row_text, .i64 = row_i64, .f64 = row_f64, .flag = row_flag, .is_null = row_is_null};

/* @p n values of @p args as text parameters of @p p. */
static void
params_bind(struct params *p, const struct weft__state_arg *args, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (args[i].kind) {
        case WEFT__ARG_KEY:
            weft__pg_p_key(p, args[i].s);
            break;
        case WEFT__ARG_TEXT:
            weft__pg_p_text(p, args[i].s);
            break;
        case WEFT__ARG_RAW:
            weft__pg_p_raw(p, args[i].s);
            break;
        case WEFT__ARG_I64:
            weft__pg_p_i64(p, args[i].i);
            break;
        case WEFT__ARG_F64:
            weft__pg_p_double(p, args[i].d);
            break;
        case WEFT__ARG_BOOL:
            weft__pg_p_bool(p, args[i].i != 0);
            break;
        }
    }
}

/* The one weft__pg_query helper: @p sql with the @p n values @p args (none: NULL and 0, and the
 * statement is sent unprepared), through run_sql_as() (@p resend as there), each row of its result
 * handed to @p fn (NULL: rows not read) until it returns other than WEFT_OK. *count (NULL: not
 * wanted) is the rows returned, or touched by a write. @return WEFT_OK, WEFT_EIO (logged), or what
 * @p fn returned. */
weft_err
weft__pg_run(struct pg_state *st,
             const char *what,
             const char *sql,
             const char *resend,
             const struct weft__state_arg *args,
             size_t n,
             state_row_fn fn,
             void *ctx,
             size_t *count)
{
    bool is_enough = false;
    struct weft__state_row row = {.ops = &pg_row_ops, .is_enough = &is_enough};
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    weft__pg_params_init(&p);
    params_bind(&p, args, n);
    res = run_sql_as(st, what, sql, resend, args != NULL ? &p : NULL, true);
    weft__pg_params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    row.handle = res;
    for (int i = 0; fn != NULL && err == WEFT_OK && !is_enough && i < PQntuples(res); i++) {
        row.index = i;
        err = fn(&row, ctx);
    }
    if (count != NULL) {
        *count = PQresultStatus(res) == PGRES_TUPLES_OK
                     ? (size_t)PQntuples(res)
                     : (size_t)strtoull(PQcmdTuples(res), NULL, 10);
    }
    PQclear(res);
    return err;
}

/* A statement whose rows are not read. @return WEFT_OK, WEFT_EIO (logged). */
weft_err
weft__pg_exec(struct pg_state *st,
              const char *what,
              const char *sql,
              const struct weft__state_arg *args,
              size_t n)
{
    return weft__pg_run(st, what, sql, NULL, args, n, NULL, NULL, NULL);
}

/* An append (a row with no key of its own): @p resend, sent again after a lost answer, adds
 * the row only when the first send did not. @return WEFT_OK, WEFT_EIO (logged). */
weft_err
weft__pg_append(struct pg_state *st,
                const char *what,
                const char *sql,
                const char *resend,
                const struct weft__state_arg *args,
                size_t n)
{
    return weft__pg_run(st, what, sql, resend, args, n, NULL, NULL, NULL);
}

/* Each row of a weft__pg_query to @p fn. @return WEFT_OK, WEFT_EIO (logged), or what @p fn
 * returned. */
weft_err
weft__pg_each(struct pg_state *st,
              const char *what,
              const char *sql,
              const struct weft__state_arg *args,
              size_t n,
              state_row_fn fn,
              void *ctx)
{
    return weft__pg_run(st, what, sql, NULL, args, n, fn, ctx, NULL);
}

/* The first row of a weft__pg_query to @p fn. @return WEFT_OK, WEFT_ENOTFOUND (no row), WEFT_EIO
 * (logged), or what @p fn returned. */
weft_err
weft__pg_one(struct pg_state *st,
             const char *what,
             const char *sql,
             const struct weft__state_arg *args,
             size_t n,
             state_row_fn fn,
             void *ctx)
{
    struct weft__state_first one = {.fn = fn, .ctx = ctx};
    weft_err err = weft__pg_run(st, what, sql, NULL, args, n, weft__state_row_first, &one, NULL);

    return err == WEFT_OK && !one.has_row ? WEFT_ENOTFOUND : err;
}

weft_err
weft__state_pg_open(
    const char *url, bool is_waiting, struct rt_state **out, char *err, size_t err_len)
{
    /* Defaults first: the URL's own settings, processed after them, win. */
    static const char *const keys[] = {"connect_timeout", "fallback_application_name",
                                       "client_encoding", "dbname", NULL};
    const char *values[] = {CONNECT_TIMEOUT, "weft", "UTF8", url, NULL};
    struct pg_state *st = NULL;
    weft_err rc = WEFT_OK;

    *out = NULL;
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    st->base.ops = &weft__pg_ops;
    st->reconnect_ms = reconnect_budget_ms();
    st->is_replayable = true;
    st->where = weft__state_location_redacted(url);
    if (st->where == NULL) {
        weft__free(st);
        return WEFT_ENOMEM;
    }
    st->conn = PQconnectdbParams(keys, values, 1);
    if (st->conn == NULL) {
        weft__pg_close(&st->base);
        return WEFT_ENOMEM;
    }
    PQsetNoticeProcessor(st->conn, notice, NULL);
    /* A worker's task waits for a server that is away, as a lost connection does; a command
     * (`weft run`, `weft runs`) fails at once: nothing has run yet, and a wrong URL should not
     * cost a minute. */
    if (PQstatus(st->conn) != CONNECTION_OK && is_waiting &&
        reconnect(st, "open", weft__monotonic_ns() + st->reconnect_ms * 1000000u)) {
        st->reconnects = 0;
    }
    if (PQstatus(st->conn) != CONNECTION_OK) {
        char why[512];
        weft__pg_error_text(st, NULL, why, sizeof(why));
        snprintf(err, err_len, "state database %s: cannot connect: %s", st->where, why);
        weft__pg_close(&st->base);
        return WEFT_EIO;
    }
    session_setup(st);
    rc = weft__pg_migrate(st, err, err_len);
    if (rc != WEFT_OK) {
        weft__pg_close(&st->base);
        return rc;
    }
    *out = &st->base;
    return WEFT_OK;
}

void
weft__pg_close(struct rt_state *base)
{
    struct pg_state *st = weft__pg(base);

    if (st == NULL) {
        return;
    }
    PQfinish(st->conn); /* an open transaction ends with the session: rolled back */
    weft__pg_journal_clear(st);
    weft__free(st->journal);
    weft__free(st->where);
    weft__free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* Transactions                                                                                */

weft_err
weft__pg_begin(struct rt_state *base)
{
    struct pg_state *st = weft__pg(base);

    if (st->tx_depth > 0) {
        st->tx_depth++;
        return WEFT_OK;
    }
    /* Not inside a transaction yet: a dropped connection is made again and BEGIN retried. */
    if (weft__pg_exec_sql(st, "begin", "BEGIN", NULL) != WEFT_OK) {
        return WEFT_EIO;
    }
    st->tx_depth = 1;
    st->is_tx_failed = false;
    st->is_tx_refused = false;
    st->begin_sql = "BEGIN";
    weft__pg_journal_clear(st);
    return WEFT_OK;
}

/* A transaction whose COMMIT returns once the WAL record is written, before it is flushed
 * (SET LOCAL: this transaction only). The WAL writer flushes it within a few hundred
 * milliseconds, and any later synchronous commit flushes it first. BEGIN and SET travel as one
 * simple weft__pg_query (one round trip). Should that fail, the transaction is an ordinary one:
 * slower, never less durable. */
static const char lazy_begin_sql[] = "BEGIN; SET LOCAL synchronous_commit TO OFF";

weft_err
weft__pg_begin_lazy(struct rt_state *base)
{
    struct pg_state *st = weft__pg(base);
    PGresult *res = NULL;
    bool is_ok = false;

    if (st->tx_depth > 0) {
        st->tx_depth++;
        return WEFT_OK;
    }
    res = PQexec(st->conn, lazy_begin_sql);
    is_ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (is_ok) {
        st->tx_depth = 1;
        st->is_tx_failed = false;
        st->is_tx_refused = false;
        st->begin_sql = lazy_begin_sql; /* a replay begins it the same way */
        weft__pg_journal_clear(st);
        return WEFT_OK;
    }
    if (PQstatus(st->conn) == CONNECTION_OK && PQtransactionStatus(st->conn) != PQTRANS_IDLE) {
        PQclear(PQexec(st->conn, "ROLLBACK"));
    }
    return weft__pg_begin(base); /* reconnects and logs as an ordinary BEGIN does */
}

bool
weft__pg_in_transaction(const struct rt_state *base)
{
    return ((const struct pg_state *)base)->tx_depth > 0;
}

weft_err
weft__pg_commit(struct rt_state *base)
{
    struct pg_state *st = weft__pg(base);
    PGresult *res = NULL;
    bool is_committed = false;

    if (st->tx_depth == 0 || --st->tx_depth > 0) {
        return WEFT_OK;
    }
    if (!st->is_tx_failed) {
        /* A COMMIT whose answer was lost may or may not have committed: weft__pg_run_sql() replays
         * the journal (idempotent statements) and commits again, so either way the
         * transaction is there once. A transaction that is not replayable fails as before. */
        st->is_committing = true;
        res = weft__pg_run_sql(st, "commit", "COMMIT", NULL, true);
        st->is_committing = false;
        /* The server answers COMMIT of a failed transaction with "ROLLBACK". */
        is_committed = res != NULL && strcmp(PQcmdStatus(res), "COMMIT") == 0;
        PQclear(res);
        if (is_committed) {
            weft__pg_journal_clear(st);
            return WEFT_OK;
        }
    }
    /* A rollback its caller asked for (weft__pg_tx_end() with an error) is the caller's to
     * report; a failed statement was logged where it failed. */
    WEFT_LOG(st->is_tx_refused ? WEFT_LOG_DEBUG : WEFT_LOG_ERROR, "state: commit on %s failed: %s",
             st->where,
             st->is_tx_refused  ? "rolled back as its caller asked"
             : st->is_tx_failed ? "a statement in the transaction failed; rolled back"
                                : "the transaction was rolled back");
    st->is_tx_failed = false;
    st->is_tx_refused = false;
    weft__pg_journal_clear(st);
    /* With the connection gone the transaction went with it; the next statement makes the
     * connection again (weft__pg_run_sql). */
    if (PQstatus(st->conn) != CONNECTION_BAD) {
        PQclear(weft__pg_run_sql(st, "rollback", "ROLLBACK", NULL, false));
    }
    return WEFT_EIO;
}

/* End a transaction of weft__pg_begin(): committed when @p err is WEFT_OK or a refusal that wrote
 * nothing (WEFT_ESTATE, WEFT_ENOTFOUND), else rolled back. @return @p err, or the commit's
 * failure. */
weft_err
weft__pg_tx_end(struct pg_state *st, weft_err err)
{
    weft_err commit_err = WEFT_OK;

    if (err != WEFT_OK && err != WEFT_ESTATE && err != WEFT_ENOTFOUND) {
        st->is_tx_failed = true;
        st->is_tx_refused = true;
    }
    commit_err = weft__pg_commit(&st->base);
    return err != WEFT_OK ? err : commit_err;
}
