/* store/pg_read.c - the primitive reads of the span store over PostgreSQL (struct
 * weft__store_reader_ops, store.h), on which read.c builds the read API.
 *
 * Every read is one prepared statement (parameters as text) whose rows go to the callback
 * through a row accessor over the PGresult. A trace's spans are looked up by trace id and,
 * so that PostgreSQL visits only the partitions that can hold them, by the start range its
 * summary row records (weft_traces.start_ns .. last_start_ns); the writer updates that row in
 * the transaction that inserts the spans, so the bound never hides a committed span, and a
 * trace without a summary row (retention deleted it) is read without the bound. JSONB
 * columns are returned as text: the same JSON values as the writer's, but in jsonb's key
 * order (shorter keys first) and with numbers as jsonb writes them (fix_numbers() keeps large
 * doubles readable).
 *
 * begin/end wrap a page read in a REPEATABLE READ, READ ONLY transaction, so its reads see one
 * snapshot. A read outside one whose connection was lost makes it again once and runs again.
 */
#include "pg.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pg_reader {
    struct weft__store_pg pg;
    bool is_in_tx;
    int old; /* 1: the span schema predates the resource column (version 3 or less); else 0 */
    struct weft__buf fixed[3]; /* JSON columns of the current row, rewritten (fix_numbers) */
};

/* What a row accessor reads: the result, its reader, and whether the read's columns are span
 * columns (whose JSON columns may need fix_numbers). */
struct pg_cursor {
    PGresult *res;
    struct pg_reader *reader;
    bool is_span;
};

#define TRACE_BOUNDS                                                                          \
    " AND start_ns >= COALESCE((SELECT t.start_ns FROM weft_traces t WHERE t.trace_id = $1)," \
    " -9223372036854775808)"                                                                  \
    " AND start_ns <= COALESCE((SELECT t.last_start_ns FROM weft_traces t"                    \
    " WHERE t.trace_id = $1), 9223372036854775807)"

#define SPAN_SELECT                                                                          \
    "SELECT span_id, parent_span_id, parent_is_remote::int, trace_state, flags, name, kind," \
    " start_ns, end_ns, status_code, status_message,"

static const char list_sql[] =
    "SELECT trace_id, start_ns, end_ns, span_count, error_count, root_name, service_name,"
    " has_root::int FROM weft_traces ORDER BY start_ns DESC, trace_id LIMIT $1";
/* The run a trace belongs to: the run_id column (weft.run.id) of its root span, found by the
 * primary key the summary row records (trace id, root span id, root start). */
static const char find_sql[] =
    "SELECT t.trace_id, t.start_ns, t.end_ns, t.span_count, t.error_count, t.root_name,"
    " t.service_name, t.has_root::int, CASE WHEN t.has_root THEN (SELECT s.run_id FROM"
    " weft_spans s WHERE s.trace_id = t.trace_id AND s.span_id = t.root_span_id"
    " AND s.start_ns = t.root_start_ns LIMIT 1) END FROM weft_traces t"
    " WHERE ($1::text IS NULL OR t.service_name = $1::text)"
    " AND ($2::text IS NULL OR strpos(lower(coalesce(t.root_name, '')), lower($2::text)) > 0"
    " OR left(t.trace_id, length($2::text)) = lower($2::text))"
    " AND ($3::int = 0 OR ($3::int = 1 AND t.error_count > 0)"
    " OR ($3::int = 2 AND t.error_count = 0))"
    " AND t.start_ns >= $4::bigint AND t.start_ns < $5::bigint"
    " AND ($6::text IS NULL OR t.start_ns < $7::bigint"
    " OR (t.start_ns = $7::bigint AND t.trace_id > $6::text))"
    " ORDER BY t.start_ns DESC, t.trace_id LIMIT $8::bigint";
static const char newest_sql[] =
    "SELECT trace_id FROM weft_traces ORDER BY start_ns DESC, trace_id LIMIT $1";
/* With what weft_store_trace_stamp() reads (read.c, add_id() reads the id only). */
static const char ids_sql[] = "SELECT trace_id, span_count, error_count, start_ns, end_ns"
                              " FROM weft_traces WHERE trace_id >= $1"
                              " AND ($2::text IS NULL OR trace_id < $2) ORDER BY trace_id LIMIT $3";
/* The column order of enum weft__store_span_col: links comes before the dropped counts. The
 * resource column is read as NULL from a store of schema 3 no writer has migrated since
 * (readers never change a store): [0] reads it, [1] does not. */
#define SPAN_TAIL(resource)                                                               \
    " dropped_attributes_count, dropped_events_count, dropped_links_count, service_name," \
    " scope_name, scope_version, " resource " FROM weft_spans WHERE trace_id = $1"
#define WHOLE_SPANS(resource) \
    SPAN_SELECT " attributes::text, events::text, links::text," SPAN_TAIL(resource)
#define OUTLINE_SPANS(resource)                                                          \
    SPAN_SELECT " CASE WHEN attributes ? 'weft.decision.layer' THEN jsonb_build_object(" \
                "'weft.decision.layer', attributes -> 'weft.decision.layer')::text END," \
                " events::text, NULL::text," SPAN_TAIL(resource)
#define ONE_OR_ALL " AND ($2::text IS NULL OR span_id = $2)" TRACE_BOUNDS " LIMIT $3"
#define BY_ID      " AND span_id = ANY ($2::text[])" TRACE_BOUNDS
static const char *const spans_sql[2] = {WHOLE_SPANS("resource") ONE_OR_ALL,
                                         WHOLE_SPANS("NULL::text") ONE_OR_ALL};
static const char *const outline_sql[2] = {OUTLINE_SPANS("resource") ONE_OR_ALL,
                                           OUTLINE_SPANS("NULL::text") ONE_OR_ALL};
static const char *const by_id_sql[2] = {WHOLE_SPANS("resource") BY_ID,
                                         WHOLE_SPANS("NULL::text") BY_ID};
static const char nodes_sql[] =
    "SELECT span_id, parent_span_id, parent_is_remote::int, name, start_ns, end_ns, status_code"
    " FROM weft_spans WHERE trace_id = $1" TRACE_BOUNDS " LIMIT $2";
/* The same with the explorer's marker (store.h, NODE_MARK): JSONB containment is exact. */
static const char nodes_marks_sql[] =
    "SELECT span_id, parent_span_id, parent_is_remote::int, name, start_ns, end_ns, status_code,"
    " (events @> '[{\"name\": \"weft.stuck_loop\"}]'"
    " OR attributes @> '{\"weft.decision.layer\": \"circuit_breaker\"}')::int"
    " FROM weft_spans WHERE trace_id = $1" TRACE_BOUNDS " LIMIT $2";

/* ------------------------------------------------------------------------------------------ */
/* Rows                                                                                        */

/* Is the number token @p s[0 .. @p len) (no '.', no exponent) outside int64? */
static bool
is_beyond_int64(const char *s, size_t len)
{
    bool is_negative = len > 0 && s[0] == '-';
    const char *digits = is_negative ? s + 1 : s;
    size_t n = is_negative ? len - 1 : len;
    const char *max = is_negative ? "9223372036854775808" : "9223372036854775807";

    while (n > 1 && digits[0] == '0') {
        digits++;
        n--;
    }
    return n > 19 || (n == 19 && memcmp(digits, max, 19) > 0);
}

/* jsonb keeps numbers as numerics and writes them without an exponent, so a double the writer
 * wrote as 1.5e+20 comes back as 150000000000000000000, which jansson refuses as an integer
 * too big (the whole column would be unreadable). Such tokens are rewritten with ".0", which
 * reads back as the same double. @return the text to hand out: @p text itself when nothing
 * needed rewriting or memory ran out (then read as it is). */
static const char *
fix_numbers(struct weft__buf *out, const char *text, size_t len, size_t *out_len)
{
    bool is_in_string = false;
    size_t copied = 0;
    size_t i = 0;

    weft__buf_reset(out);
    while (i < len) {
        char c = text[i];
        size_t start = i;
        bool is_integral = true;

        if (is_in_string) {
            if (c == '\\') {
                i++;
            } else if (c == '"') {
                is_in_string = false;
            }
            i++;
            continue;
        }
        if (c == '"') {
            is_in_string = true;
            i++;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) {
            i++;
            continue;
        }
        i++;
        while (i < len && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.' || text[i] == 'e' ||
                           text[i] == 'E' || text[i] == '+' || text[i] == '-')) {
            is_integral = is_integral && text[i] >= '0' && text[i] <= '9';
            i++;
        }
        if (is_integral && is_beyond_int64(text + start, i - start)) {
            if (weft__buf_append(out, text + copied, i - copied) != WEFT_OK ||
                weft__buf_append(out, ".0", 2) != WEFT_OK) {
                return text;
            }
            copied = i;
        }
    }
    if (copied == 0) {
        return text;
    }
    if (weft__buf_append(out, text + copied, len - copied) != WEFT_OK) {
        return text;
    }
    *out_len = out->len; /* the buffer keeps a NUL after its data */
    return out->data;
}

static const char *
row_text(const struct weft__store_row *row, int col, size_t *len)
{
    const struct pg_cursor *cur = row->cursor;
    const char *text = NULL;
    size_t n = 0;

    if (PQgetisnull(cur->res, row->index, col)) {
        if (len != NULL) {
            *len = 0;
        }
        return NULL;
    }
    text = PQgetvalue(cur->res, row->index, col);
    n = (size_t)PQgetlength(cur->res, row->index, col);
    if (cur->is_span && col >= WEFT__COL_ATTRS && col <= WEFT__COL_LINKS) {
        text = fix_numbers(&cur->reader->fixed[col - WEFT__COL_ATTRS], text, n, &n);
    }
    if (len != NULL) {
        *len = n;
    }
    return text;
}

static int64_t
row_integer(const struct weft__store_row *row, int col)
{
    const struct pg_cursor *cur = row->cursor;

    if (PQgetisnull(cur->res, row->index, col)) {
        return 0;
    }
    return (int64_t)strtoll(PQgetvalue(cur->res, row->index, col), NULL, 10);
}

/* Does @p sql read span columns (whose JSON columns may need fix_numbers)? */
static bool
is_span_sql(const char *sql)
{
    for (int v = 0; v < 2; v++) {
        if (sql == spans_sql[v] || sql == outline_sql[v] || sql == by_id_sql[v]) {
            return true;
        }
    }
    return false;
}

/* Run @p sql with @p n parameters and hand each row to @p fn. A lost connection outside a
 * read transaction is made again once and the read runs again. */
static weft_err
read_rows(struct pg_reader *r,
          const char *what,
          const char *sql,
          int n,
          const char *const *values,
          weft__store_row_fn fn,
          void *user)
{
    struct weft__store_row row = {row_text, row_integer, NULL, 0};
    struct pg_cursor cur = {NULL, r, is_span_sql(sql)};
    PGresult *res = weft__store_pg_run(&r->pg, sql, n, values, true);
    weft_err err = WEFT_OK;

    if (PQresultStatus(res) != PGRES_TUPLES_OK && !r->is_in_tx && weft__store_pg_is_lost(&r->pg) &&
        weft__store_pg_reset(&r->pg)) {
        PQclear(res);
        res = weft__store_pg_run(&r->pg, sql, n, values, true);
    }
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        err = weft__store_pg_fail(&r->pg, res, what);
        WEFT_LOG(WEFT_LOG_DEBUG, "%s", r->pg.errmsg);
        PQclear(res);
        return err;
    }
    cur.res = res;
    row.cursor = &cur;
    for (int i = 0; i < PQntuples(res) && err == WEFT_OK; i++) {
        row.index = i;
        err = fn(&row, user);
    }
    PQclear(res);
    return err;
}

static void
limit_text(size_t limit, char *out, size_t len)
{
    snprintf(out, len, "%" PRIu64,
             limit > (size_t)INT64_MAX ? (uint64_t)INT64_MAX : (uint64_t)limit);
}

/* ------------------------------------------------------------------------------------------ */
/* The primitive reads                                                                         */

static weft_err
pg_list(void *impl, size_t limit, weft__store_row_fn fn, void *user)
{
    char lim[24];
    const char *values[1] = {lim};

    limit_text(limit, lim, sizeof(lim));
    return read_rows(impl, "cannot list traces", list_sql, 1, values, fn, user);
}

static void
ns_text(uint64_t ns, char *out, size_t len)
{
    snprintf(out, len, "%" PRIu64, ns > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : ns);
}

static weft_err
pg_find(void *impl, const struct weft_trace_query *q, weft__store_row_fn fn, void *user)
{
    char status[4];
    char from[24];
    char to[24];
    char after[24];
    char lim[24];
    const char *values[8] = {q->service, q->text, status, from, to, q->after_id, after, lim};

    snprintf(status, sizeof(status), "%d", q->status);
    ns_text(q->from_ns, from, sizeof(from));
    ns_text(q->to_ns != 0 ? q->to_ns : UINT64_MAX, to, sizeof(to));
    ns_text(q->after_start_ns, after, sizeof(after));
    limit_text(q->limit, lim, sizeof(lim));
    return read_rows(impl, "cannot list traces", find_sql, 8, values, fn, user);
}

static weft_err
pg_ids(void *impl, const char *lo, const char *hi, size_t limit, weft__store_row_fn fn, void *user)
{
    char lim[24];
    const char *values[3] = {lo, hi, lim};

    if (lo == NULL) {
        limit_text(limit < 1 ? limit : 1, lim, sizeof(lim));
        values[0] = lim;
        return read_rows(impl, "cannot look the trace up", newest_sql, 1, values, fn, user);
    }
    limit_text(limit, lim, sizeof(lim));
    return read_rows(impl, "cannot look the trace up", ids_sql, 3, values, fn, user);
}

static weft_err
pg_spans(void *impl,
         const char *trace_hex,
         const char *span_hex,
         size_t limit,
         bool is_outline,
         weft__store_row_fn fn,
         void *user)
{
    struct pg_reader *r = impl;
    char lim[24];
    const char *values[3] = {trace_hex, span_hex, lim};

    limit_text(limit, lim, sizeof(lim));
    return read_rows(r, "cannot read the trace",
                     is_outline ? outline_sql[r->old] : spans_sql[r->old], 3, values, fn, user);
}

static bool
is_hex(const char *s)
{
    if (s == NULL || s[0] == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* A text[] literal of those of @p items that @p is_ok accepts (hex: no quoting needed) into
 * @p arr, NUL-terminated; a rejected one is left out (it matches nothing). @return WEFT_OK, or
 * WEFT_ENOMEM with the reader's message set and @p arr cleaned up. */
static weft_err
array_literal(struct pg_reader *r,
              const char *const *items,
              size_t count,
              bool (*is_ok)(const char *s),
              struct weft__buf *arr)
{
    bool is_first = true;
    weft_err err = WEFT_OK;

    weft__buf_init(arr, 0);
    err = weft__buf_append_byte(arr, '{');
    for (size_t i = 0; i < count && err == WEFT_OK; i++) {
        if (!is_ok(items[i])) {
            continue;
        }
        if (!is_first) {
            err = weft__buf_append_byte(arr, ',');
        }
        if (err == WEFT_OK) {
            err = weft__buf_append_str(arr, items[i]);
        }
        is_first = false;
    }
    if (err == WEFT_OK) {
        err = weft__buf_append(arr, "}", 2); /* with its NUL */
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(arr);
        snprintf(r->pg.errmsg, sizeof(r->pg.errmsg), "store %s: out of memory", r->pg.where);
    }
    return err;
}

static weft_err
pg_spans_by_id(void *impl,
               const char *trace_hex,
               const char *const *span_hex,
               size_t count,
               weft__store_row_fn fn,
               void *user)
{
    struct pg_reader *r = impl;
    struct weft__buf arr;
    const char *values[2] = {trace_hex, NULL};
    weft_err err = WEFT_OK;

    if (count == 0) {
        return WEFT_OK;
    }
    /* An array literal of the ids: hex needs no quoting; anything else matches no span. */
    err = array_literal(r, span_hex, count, is_hex, &arr);
    if (err != WEFT_OK) {
        return err;
    }
    values[1] = arr.data;
    err = read_rows(r, "cannot read the page's spans", by_id_sql[r->old], 2, values, fn, user);
    weft__buf_cleanup(&arr);
    return err;
}

/* A payload record from a row of payloads_sql, to the caller's callback. */
struct payload_rows {
    weft__payload_each_fn each;
    void *each_user;
};

static weft_err
payload_row(const struct weft__store_row *row, void *user)
{
    struct payload_rows *pr = user;
    const char *hash = row->text(row, 0, NULL);
    const char *hex = row->text(row, 3, NULL);
    struct weft__payload_record rec = {
        .kind = (weft__payload_kind)row->integer(row, 1),
        .raw_len = (size_t)row->integer(row, 2),
    };
    unsigned char *data = NULL;
    weft_err err = WEFT_OK;

    if (hash == NULL || hex == NULL || strlen(hash) != WEFT__PAYLOAD_HEX_LEN) {
        return WEFT_OK; /* not a record this reader wrote: as if missing */
    }
    data = PQunescapeBytea((const unsigned char *)hex, &rec.len);
    if (data == NULL) {
        return WEFT_ENOMEM;
    }
    memcpy(rec.hash, hash, sizeof(rec.hash));
    rec.data = data;
    err = pr->each(&rec, pr->each_user);
    PQfreemem(data);
    return err;
}

/* One query for all of @p hashes: a text's chunks in one round trip. */
static weft_err
pg_payloads(void *impl,
            const char *const *hashes,
            size_t count,
            weft__payload_each_fn each,
            void *each_user)
{
    static const char payloads_sql[] =
        "SELECT hash, kind, size, data FROM weft_payloads WHERE hash = ANY($1::text[])";
    struct pg_reader *r = impl;
    struct payload_rows pr = {each, each_user};
    struct weft__buf arr;
    const char *values[1] = {NULL};
    weft_err err = WEFT_OK;

    if (count == 0) {
        return WEFT_OK;
    }
    /* An array literal of the hashes: payload.c asks only for well-formed ones (hex). */
    err = array_literal(r, hashes, count, weft__payload_is_ref, &arr);
    if (err != WEFT_OK) {
        return err;
    }
    values[0] = arr.data;
    err = read_rows(r, "cannot read payloads", payloads_sql, 1, values, payload_row, &pr);
    weft__buf_cleanup(&arr);
    return err;
}

static weft_err
pg_nodes(void *impl,
         const char *trace_hex,
         size_t limit,
         bool with_marks,
         weft__store_row_fn fn,
         void *user)
{
    char lim[24];
    const char *values[2] = {trace_hex, lim};

    limit_text(limit, lim, sizeof(lim));
    return read_rows(impl, "cannot read the trace's outline",
                     with_marks ? nodes_marks_sql : nodes_sql, 2, values, fn, user);
}

static weft_err
pg_begin(void *impl)
{
    struct pg_reader *r = impl;
    static const char begin_sql[] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    weft_err err = weft__store_pg_exec(&r->pg, "cannot begin a read", begin_sql);

    if (err != WEFT_OK && weft__store_pg_is_lost(&r->pg) && weft__store_pg_reset(&r->pg)) {
        err = weft__store_pg_exec(&r->pg, "cannot begin a read", begin_sql);
    }
    r->is_in_tx = err == WEFT_OK;
    return err;
}

static void
pg_end(void *impl)
{
    struct pg_reader *r = impl;

    if (r->is_in_tx && !weft__store_pg_is_lost(&r->pg)) {
        /* A read-only transaction: ending it either way changes nothing. */
        PQclear(PQexec(r->pg.conn, "ROLLBACK"));
    }
    r->is_in_tx = false;
}

static const char *
pg_errmsg(void *impl)
{
    struct pg_reader *r = impl;

    return r != NULL ? r->pg.errmsg : "no store";
}

/* A connection the server ended is not reused: the next caller would pay the failed read
 * before the reconnect, and a server that is still down would fail it again. */
static bool
pg_is_reusable(void *impl)
{
    struct pg_reader *r = impl;

    return !r->is_in_tx && !weft__store_pg_is_lost(&r->pg) &&
           PQtransactionStatus(r->pg.conn) == PQTRANS_IDLE;
}

static void
pg_close(void *impl)
{
    struct pg_reader *r = impl;

    if (r == NULL) {
        return;
    }
    weft__store_pg_close(&r->pg);
    for (size_t k = 0; k < 3; k++) {
        weft__buf_cleanup(&r->fixed[k]);
    }
    weft__free(r);
}

static const struct weft__store_reader_ops pg_reader_ops = {
    .name = "postgresql",
    .list = pg_list,
    .find = pg_find,
    .ids = pg_ids,
    .spans = pg_spans,
    .spans_by_id = pg_spans_by_id,
    .nodes = pg_nodes,
    .payloads = pg_payloads,
    .begin = pg_begin,
    .end = pg_end,
    .errmsg = pg_errmsg,
    .is_reusable = pg_is_reusable,
    .close = pg_close,
};

weft_err
weft__store_pg_reader_open(const char *url, const struct weft__store_reader_ops **ops, void **impl)
{
    struct pg_reader *r = NULL;
    int version = 0;
    weft_err err = WEFT_OK;

    if (ops != NULL) {
        *ops = NULL;
    }
    if (impl != NULL) {
        *impl = NULL;
    }
    if (url == NULL || ops == NULL || impl == NULL) {
        return WEFT_EINVAL;
    }
    r = weft__calloc(1, sizeof(*r));
    if (r == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t k = 0; k < 3; k++) {
        weft__buf_init(&r->fixed[k], STORE_JSON_COLUMN_MAX);
    }
    err = weft__store_pg_connect(&r->pg, url);
    if (err == WEFT_OK) {
        err = weft__store_pg_version(&r->pg, &version);
    }
    if (err == WEFT_OK && version > WEFT__PG_SCHEMA_VERSION) {
        snprintf(r->pg.errmsg, sizeof(r->pg.errmsg),
                 "store %s: written by a newer weft (span schema %d; this weft knows %d)",
                 r->pg.where, version, WEFT__PG_SCHEMA_VERSION);
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(err == WEFT_ENOTFOUND ? WEFT_LOG_DEBUG : WEFT_LOG_ERROR, "%s", r->pg.errmsg);
        pg_close(r);
        return err;
    }
    r->old = version < 4 ? 1 : 0; /* migration_4 added the resource column */
    *ops = &pg_reader_ops;
    *impl = r;
    return WEFT_OK;
}
