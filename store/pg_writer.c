/* store/pg_writer.c - the span store's exporter over PostgreSQL (schema in pg_schema.c): writes
 * each batch of ended spans in one transaction and keeps each trace's summary row current,
 * incrementally; and weft__store_pg_add_interrupted_span(), the store's one other writer.
 *
 * A batch is staged with COPY ... FROM STDIN (text format) into a temporary table made once
 * per session (ON COMMIT DELETE ROWS), then one statement moves it: its INSERT ... ON CONFLICT
 * DO NOTHING RETURNING hands only the spans actually inserted to the summary upsert, so a span
 * stored twice (a retried batch, two `weft serve` instances ingesting the same export) is
 * stored and counted once, and a batch can always be sent again. COPY costs one round trip
 * and one parse for the whole batch where a prepared INSERT per span costs one each; a batch
 * is four round trips (BEGIN with the COPY's start, its data, the statement, COMMIT). Summary
 * rows are upserted in trace id order, so two writers lock them in the same order; a deadlock
 * or serialization failure anyway, or a lost connection (made again once), retries the batch
 * once.
 *
 * The summary follows SQLite's writer (sqlite_writer.c): start = least start, end = greatest
 * end, counts added; the trace is named by its root, the span without a parent, else one with
 * a remote parent, else (no root stored yet) the earliest span, ties by span id. The row keeps
 * that span's rank, start and id, so each batch compares its own best candidate with it.
 *
 * Text: PostgreSQL refuses invalid UTF-8 and NUL characters: text columns have invalid bytes
 * replaced by U+FFFD (json.c does the same for the JSON columns), and a \u0000 escape in a JSON
 * column, which jsonb refuses, becomes \ufffd.
 *
 * Invariants: the exporter is called by one thread at a time (export.h); shutdown only raises
 * an atomic flag and the connection is closed in destroy.
 */
#include "pg.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"
#include "tracing/exporter.h"
#include "tracing/ids.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <weft/store.h>

#define COPY_CHUNK      (1u << 20) /* bytes of COPY data sent at a time */
#define PARTS_KNOWN_MAX 1024       /* partition starts remembered as existing */
#define PARTS_AHEAD     2          /* partitions made ahead of the current one at open */

static const char stage_sql[] =
    "CREATE TEMP TABLE IF NOT EXISTS weft_span_stage ("
    " trace_id TEXT COLLATE \"C\", span_id TEXT COLLATE \"C\", parent_span_id TEXT COLLATE \"C\","
    " parent_is_remote BOOLEAN, trace_state TEXT, flags INT, name TEXT, kind SMALLINT,"
    " start_ns BIGINT, end_ns BIGINT, status_code SMALLINT, status_message TEXT,"
    " attributes JSONB, events JSONB, links JSONB, dropped_attributes_count BIGINT,"
    " dropped_events_count BIGINT, dropped_links_count BIGINT, service_name TEXT,"
    " scope_name TEXT, scope_version TEXT, run_id TEXT, resource TEXT, is_guarded BOOLEAN)"
    " ON COMMIT DELETE ROWS";

#define SPAN_COLUMNS                                                                       \
    "trace_id, span_id, parent_span_id, parent_is_remote, trace_state, flags, name, kind," \
    " start_ns, end_ns, status_code, status_message, attributes, events, links,"           \
    " dropped_attributes_count, dropped_events_count, dropped_links_count, service_name,"  \
    " scope_name, scope_version, run_id, resource"

/* BEGIN rides with the COPY: one round trip fewer a batch (PQexec returns at the COPY). */
static const char copy_sql[] =
    "BEGIN; COPY weft_span_stage (" SPAN_COLUMNS ", is_guarded) FROM STDIN";

/* A guarded row (an interrupted span) is written only when no span with its ids is stored,
 * whatever its start, and takes the trace's service. */
static const char write_sql[] =
    "WITH ins AS ("
    " INSERT INTO weft_spans (" SPAN_COLUMNS ")"
    " SELECT s.trace_id, s.span_id, s.parent_span_id, s.parent_is_remote, s.trace_state,"
    " s.flags, s.name, s.kind, s.start_ns, s.end_ns, s.status_code, s.status_message,"
    " s.attributes, s.events, s.links, s.dropped_attributes_count, s.dropped_events_count,"
    " s.dropped_links_count,"
    " COALESCE(s.service_name, CASE WHEN s.is_guarded THEN (SELECT x.service_name FROM"
    " weft_spans x WHERE x.trace_id = s.trace_id AND x.service_name IS NOT NULL LIMIT 1) END),"
    " s.scope_name, s.scope_version, s.run_id, s.resource"
    " FROM weft_span_stage s WHERE NOT s.is_guarded OR NOT EXISTS (SELECT 1 FROM weft_spans x"
    " WHERE x.trace_id = s.trace_id AND x.span_id = s.span_id)"
    " ON CONFLICT DO NOTHING"
    " RETURNING trace_id, span_id, parent_span_id, parent_is_remote, name, start_ns, end_ns,"
    " status_code, service_name),"
    " r AS (SELECT *, CASE WHEN parent_span_id IS NULL THEN 0 WHEN parent_is_remote THEN 1"
    " ELSE 2 END AS rank FROM ins),"
    " best AS (SELECT DISTINCT ON (trace_id) trace_id, rank, start_ns, span_id, name,"
    " service_name FROM r ORDER BY trace_id, rank, start_ns, span_id),"
    " agg AS (SELECT trace_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns,"
    " max(start_ns) AS last_start_ns, count(*) AS span_count,"
    " count(*) FILTER (WHERE status_code = 2) AS error_count, bool_or(rank < 2) AS has_root"
    " FROM r GROUP BY trace_id)"
    " INSERT INTO weft_traces AS t (trace_id, start_ns, end_ns, span_count, error_count,"
    " root_name, service_name, has_root, root_rank, root_start_ns, root_span_id,"
    " last_start_ns)"
    " SELECT a.trace_id, a.start_ns, a.end_ns, a.span_count, a.error_count, b.name,"
    " b.service_name, a.has_root, b.rank, b.start_ns, b.span_id, a.last_start_ns"
    " FROM agg a JOIN best b ON b.trace_id = a.trace_id ORDER BY a.trace_id"
    " ON CONFLICT (trace_id) DO UPDATE SET"
    " start_ns = LEAST(t.start_ns, EXCLUDED.start_ns),"
    " end_ns = GREATEST(t.end_ns, EXCLUDED.end_ns),"
    " last_start_ns = GREATEST(t.last_start_ns, EXCLUDED.last_start_ns),"
    " span_count = t.span_count + EXCLUDED.span_count,"
    " error_count = t.error_count + EXCLUDED.error_count,"
    " has_root = t.has_root OR EXCLUDED.has_root,"
    " root_name = CASE WHEN (EXCLUDED.root_rank, EXCLUDED.root_start_ns, EXCLUDED.root_span_id)"
    " < (t.root_rank, t.root_start_ns, t.root_span_id) THEN EXCLUDED.root_name"
    " ELSE t.root_name END,"
    " service_name = CASE WHEN (EXCLUDED.root_rank, EXCLUDED.root_start_ns,"
    " EXCLUDED.root_span_id) < (t.root_rank, t.root_start_ns, t.root_span_id)"
    " THEN EXCLUDED.service_name ELSE t.service_name END,"
    " root_rank = LEAST(t.root_rank, EXCLUDED.root_rank),"
    " root_start_ns = CASE WHEN (EXCLUDED.root_rank, EXCLUDED.root_start_ns,"
    " EXCLUDED.root_span_id) < (t.root_rank, t.root_start_ns, t.root_span_id)"
    " THEN EXCLUDED.root_start_ns ELSE t.root_start_ns END,"
    " root_span_id = CASE WHEN (EXCLUDED.root_rank, EXCLUDED.root_start_ns,"
    " EXCLUDED.root_span_id) < (t.root_rank, t.root_start_ns, t.root_span_id)"
    " THEN EXCLUDED.root_span_id ELSE t.root_span_id END";

/* ------------------------------------------------------------------------------------------ */
/* The exporter                                                                                */

struct pg_exporter {
    struct weft__store_pg pg;
    int64_t interval_ns;
    int64_t *parts; /* partition starts known to exist */
    size_t part_count;
    struct weft__buf copy;
    struct weft__buf attrs_text;
    struct weft__buf events_text;
    struct weft__buf links_text;
    /* The resource column (resource.c) of the batch's root candidates, kept for the next
     * span of the same resource in the batch. */
    struct weft__buf resource_text;
    const struct weft_resource *resource_of; /* what resource_text holds; NULL: nothing */
    bool has_resource_text;
    struct weft__store_payloads payloads; /* the batch's, when its columns are built here */
    atomic_bool is_shut_down;
    uint64_t failures; /* consecutive failed batches: only the first is logged at ERROR */
    char *url;         /* to connect when the database did not answer at start */
    bool is_ready;     /* connected once, schema made, partitions ahead made */
};

static int64_t
ns_column(uint64_t ns)
{
    return ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ns;
}

/* --- COPY text format ---------------------------------------------------------------------- */

/* A column's text, escaped as COPY's text format requires (backslash, tab, newline, carriage
 * return), with invalid UTF-8 replaced by U+FFFD. */
static void
put_text(struct weft__buf *b, const char *s, size_t len, weft_err *err)
{
    size_t i = 0;

    while (i < len && *err == WEFT_OK) {
        uint8_t c = (uint8_t)s[i];
        const char *esc = NULL;

        if (c < 0x80) {
            switch (c) {
            case '\\':
                esc = "\\\\";
                break;
            case '\t':
                esc = "\\t";
                break;
            case '\n':
                esc = "\\n";
                break;
            case '\r':
                esc = "\\r";
                break;
            case '\0':
                esc = "\xEF\xBF\xBD"; /* text cannot hold NUL */
                break;
            default:
                break;
            }
            *err = esc != NULL ? weft__buf_append_str(b, esc) : weft__buf_append_byte(b, c);
            i++;
        } else {
            bool is_valid = false;
            size_t n = weft__utf8_seq((const uint8_t *)s + i, len - i, &is_valid);

            if (n == 0) {
                n = 1;
            }
            *err =
                is_valid ? weft__buf_append(b, s + i, n) : weft__buf_append(b, "\xEF\xBF\xBD", 3);
            i += n;
        }
    }
}

static void
put_str(struct weft__buf *b, const char *s, weft_err *err)
{
    if (s == NULL) {
        if (*err == WEFT_OK) {
            *err = weft__buf_append(b, "\\N", 2);
        }
        return;
    }
    put_text(b, s, strlen(s), err);
}

/* A JSON column (json.c's valid UTF-8 JSON): COPY-escaped, with \u0000 made \ufffd. */
static void
put_json(struct weft__buf *b, const char *s, size_t len, weft_err *err)
{
    size_t i = 0;

    while (i < len && *err == WEFT_OK) {
        char c = s[i];

        if (c == '\\' && i + 1 < len) {
            /* An escape: its backslash doubled for COPY, its character kept. */
            if (len - i >= 6 && memcmp(s + i, "\\u0000", 6) == 0) {
                *err = weft__buf_append_str(b, "\\\\ufffd");
                i += 6;
            } else {
                *err = weft__buf_append(b, "\\\\", 2);
                i++;
                put_text(b, s + i, 1, err);
                i++;
            }
        } else {
            put_text(b, s + i, 1, err);
            i++;
        }
    }
}

static void
put_sep(struct weft__buf *b, char sep, weft_err *err)
{
    if (*err == WEFT_OK) {
        *err = weft__buf_append_byte(b, (uint8_t)sep);
    }
}

static void
put_i64(struct weft__buf *b, int64_t v, weft_err *err)
{
    if (*err == WEFT_OK) {
        *err = weft__buf_printf(b, "%" PRId64, v);
    }
}

/* The JSON columns of the @p i th span: from @p prebuilt, or written now into ex's buffers. */
static weft_err
span_texts(struct pg_exporter *ex,
           const struct weft_span_data *span,
           const struct weft__store_texts *prebuilt,
           size_t i,
           const char *text[3],
           size_t len[3])
{
    weft_err err = WEFT_OK;

    if (prebuilt != NULL) {
        for (size_t k = 0; k < 3; k++) {
            text[k] = weft__store_texts_column(prebuilt, 3 * i + k, &len[k]);
        }
        return WEFT_OK;
    }
    err = weft__store_attrs_text(span->attrs, span->attr_count, &ex->payloads, &ex->attrs_text);
    if (err == WEFT_OK) {
        err = weft__store_events_text(span, &ex->events_text);
    }
    if (err == WEFT_OK) {
        err = weft__store_links_text(span, &ex->links_text);
    }
    text[0] = ex->attrs_text.data;
    text[1] = ex->events_text.data;
    text[2] = ex->links_text.data;
    len[0] = ex->attrs_text.len;
    len[1] = ex->events_text.len;
    len[2] = ex->links_text.len;
    return err;
}

/* The resource column of @p span: a root candidate's (no parent, or a remote one), else NULL. */
static weft_err
resource_column(struct pg_exporter *ex, const struct weft_span_data *span, const char **out)
{
    weft_err err = WEFT_OK;

    *out = NULL;
    if ((weft__store_has_parent(span) && !span->parent_is_remote) || span->resource == NULL) {
        return WEFT_OK;
    }
    if (ex->resource_of != span->resource) {
        err = weft__store_resource_text(span->resource, &ex->resource_text);
        if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
            ex->resource_of = NULL;
            return err;
        }
        ex->resource_of = span->resource;
        ex->has_resource_text = err == WEFT_OK;
    }
    *out = ex->has_resource_text ? ex->resource_text.data : NULL;
    return WEFT_OK;
}

/* One COPY row for @p span. */
static weft_err
put_span(struct pg_exporter *ex,
         const struct weft_span_data *span,
         const struct weft__store_texts *prebuilt,
         size_t i,
         bool is_guarded)
{
    struct weft__buf *b = &ex->copy;
    bool has_parent = weft__store_has_parent(span);
    const struct weft_value *run_id = weft_span_data_attr(span, "weft.run.id");
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    char parent_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    const char *text[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    const char *resource = NULL;
    weft_err err = span_texts(ex, span, prebuilt, i, text, len);

    if (err == WEFT_OK) {
        err = resource_column(ex, span, &resource);
    }
    if (err != WEFT_OK) {
        return err;
    }
    weft_hex_encode(span->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    weft_hex_encode(span->span_id, WEFT_SPAN_ID_SIZE, span_hex);
    weft_hex_encode(span->parent_span_id, WEFT_SPAN_ID_SIZE, parent_hex);
    put_str(b, trace_hex, &err);
    put_sep(b, '\t', &err);
    put_str(b, span_hex, &err);
    put_sep(b, '\t', &err);
    put_str(b, has_parent ? parent_hex : NULL, &err);
    put_sep(b, '\t', &err);
    put_str(b, has_parent && span->parent_is_remote ? "t" : "f", &err);
    put_sep(b, '\t', &err);
    put_str(b, span->trace_state, &err);
    put_sep(b, '\t', &err);
    put_i64(b, span->trace_flags, &err);
    put_sep(b, '\t', &err);
    put_str(b, span->name != NULL ? span->name : "", &err);
    put_sep(b, '\t', &err);
    put_i64(b, (int64_t)span->kind, &err);
    put_sep(b, '\t', &err);
    put_i64(b, ns_column(span->start_time_ns), &err);
    put_sep(b, '\t', &err);
    put_i64(b, ns_column(span->end_time_ns), &err);
    put_sep(b, '\t', &err);
    put_i64(b, (int64_t)span->status_code, &err);
    put_sep(b, '\t', &err);
    put_str(b, span->status_code == WEFT_STATUS_ERROR ? span->status_message : NULL, &err);
    for (int k = 0; k < 3; k++) {
        put_sep(b, '\t', &err);
        put_json(b, text[k], len[k], &err);
    }
    put_sep(b, '\t', &err);
    put_i64(b, span->dropped_attrs, &err);
    put_sep(b, '\t', &err);
    put_i64(b, span->dropped_events, &err);
    put_sep(b, '\t', &err);
    put_i64(b, span->dropped_links, &err);
    put_sep(b, '\t', &err);
    put_str(b, weft__store_service_name(span), &err);
    put_sep(b, '\t', &err);
    put_str(b, span->scope != NULL ? span->scope->name : NULL, &err);
    put_sep(b, '\t', &err);
    put_str(b, span->scope != NULL ? span->scope->version : NULL, &err);
    put_sep(b, '\t', &err);
    if (run_id != NULL && run_id->type == WEFT_VALUE_STRING && run_id->u.str != NULL) {
        put_text(b, run_id->u.str, run_id->len, &err);
    } else {
        put_str(b, NULL, &err);
    }
    put_sep(b, '\t', &err);
    if (resource != NULL) {
        put_json(b, resource, strlen(resource), &err);
    } else {
        put_str(b, NULL, &err);
    }
    put_sep(b, '\t', &err);
    put_str(b, is_guarded ? "t" : "f", &err);
    put_sep(b, '\n', &err);
    return err;
}

/* --- partitions ---------------------------------------------------------------------------- */

static bool
is_known_part(const struct pg_exporter *ex, int64_t bucket)
{
    for (size_t i = 0; i < ex->part_count; i++) {
        if (ex->parts[i] == bucket) {
            return true;
        }
    }
    return false;
}

/* The partition of @p bucket, made when this connection has not seen it yet. */
static weft_err
ensure_part(struct pg_exporter *ex, int64_t bucket)
{
    weft_err err = WEFT_OK;

    if (bucket == INT64_MIN || is_known_part(ex, bucket)) {
        return WEFT_OK;
    }
    err = weft__store_pg_ensure_partition(&ex->pg, bucket, ex->interval_ns);
    if (err != WEFT_OK) {
        return err;
    }
    if (ex->part_count == PARTS_KNOWN_MAX) {
        ex->part_count = 0; /* forget them all: they are looked up again, cheaply */
    }
    if (ex->parts == NULL) {
        ex->parts = weft__calloc(PARTS_KNOWN_MAX, sizeof(*ex->parts));
        if (ex->parts == NULL) {
            return WEFT_OK; /* nothing remembered: the next batch looks it up again */
        }
    }
    ex->parts[ex->part_count++] = bucket;
    return WEFT_OK;
}

static weft_err
ensure_batch_parts(struct pg_exporter *ex, const struct weft_span_data *const *spans, size_t count)
{
    int64_t now = ns_column(weft__now_ns());
    int64_t last = INT64_MIN;
    weft_err err = WEFT_OK;

    for (size_t i = 0; i < count && err == WEFT_OK; i++) {
        int64_t bucket =
            weft__store_pg_bucket(ns_column(spans[i]->start_time_ns), ex->interval_ns, now);

        if (bucket != last) {
            err = ensure_part(ex, bucket);
            last = bucket;
        }
    }
    return err;
}

/* --- one batch ----------------------------------------------------------------------------- */

static bool
send_copy(struct pg_exporter *ex)
{
    bool is_ok =
        ex->copy.len == 0 || PQputCopyData(ex->pg.conn, ex->copy.data, (int)ex->copy.len) == 1;

    weft__buf_reset(&ex->copy);
    return is_ok;
}

/* Write the payload records the batch's spans refer to (store.h), in hash order, in one
 * statement: arrays of hashes, kinds, sizes and hex data unnested. A record stored already
 * only has its stored_ns brought forward, at most once per WEFT__PAYLOAD_TOUCH_NS. */
static weft_err
write_payloads(struct pg_exporter *ex, const struct weft__store_payloads *pl)
{
    static const char payload_sql[] =
        "INSERT INTO weft_payloads (hash, kind, size, data, stored_ns)"
        " SELECT h, k, s, decode(d, 'hex'), $5::bigint"
        " FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::text[]) AS u (h, k, s, d)"
        " ORDER BY h"
        " ON CONFLICT (hash) DO UPDATE SET stored_ns = EXCLUDED.stored_ns"
        " WHERE weft_payloads.stored_ns < EXCLUDED.stored_ns - 1800000000000";
    static const char digits[] = "0123456789abcdef";
    struct weft__buf arr[4];
    const char *values[5];
    char now[24];
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    if (pl->count == 0) {
        return WEFT_OK;
    }
    for (int k = 0; k < 4; k++) {
        weft__buf_init(&arr[k], 0);
        err = err == WEFT_OK ? weft__buf_append_byte(&arr[k], '{') : err;
    }
    for (size_t i = 0; i < pl->count && err == WEFT_OK; i++) {
        const struct weft__store_payload_rec *r = &pl->recs[i];
        const unsigned char *data = weft__store_payloads_data(pl, i);
        const char *sep = i > 0 ? "," : "";

        err = weft__buf_printf(&arr[0], "%s%s", sep, r->hash);
        err = err == WEFT_OK ? weft__buf_printf(&arr[1], "%s%d", sep, (int)r->kind) : err;
        err = err == WEFT_OK ? weft__buf_printf(&arr[2], "%s%zu", sep, r->raw_len) : err;
        err = err == WEFT_OK ? weft__buf_append_str(&arr[3], sep) : err;
        err = err == WEFT_OK ? weft__buf_reserve(&arr[3], 2 * r->len + 2) : err;
        for (size_t b = 0; b < r->len && err == WEFT_OK; b++) {
            arr[3].data[arr[3].len++] = digits[data[b] >> 4];
            arr[3].data[arr[3].len++] = digits[data[b] & 15];
        }
    }
    for (int k = 0; k < 4 && err == WEFT_OK; k++) {
        err = weft__buf_append_byte(&arr[k], '}');
        values[k] = arr[k].data;
    }
    if (err == WEFT_OK) {
        snprintf(now, sizeof(now), "%" PRIu64, weft__now_ns());
        values[4] = now;
        res = weft__store_pg_run(&ex->pg, payload_sql, 5, values, true);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            err = weft__store_pg_fail(&ex->pg, res, "cannot write payloads");
        }
        PQclear(res);
    }
    for (int k = 0; k < 4; k++) {
        weft__buf_cleanup(&arr[k]);
    }
    return err;
}

/* Open the batch's transaction and stage the batch with COPY. */
static weft_err
copy_batch(struct pg_exporter *ex,
           const struct weft_span_data *const *spans,
           size_t count,
           const struct weft__store_texts *prebuilt,
           bool is_guarded)
{
    PGresult *res = PQexec(ex->pg.conn, copy_sql);
    weft_err err = WEFT_OK;
    bool is_sent = true;

    if (PQresultStatus(res) != PGRES_COPY_IN) {
        err = weft__store_pg_fail(&ex->pg, res, "cannot stage a batch");
        PQclear(res);
        return err;
    }
    PQclear(res);
    weft__buf_reset(&ex->copy);
    ex->resource_of = NULL; /* a resource's address may be another's in the next batch */
    for (size_t i = 0; i < count && err == WEFT_OK && is_sent; i++) {
        err = put_span(ex, spans[i], prebuilt, i, is_guarded);
        if (err == WEFT_OK && ex->copy.len >= COPY_CHUNK) {
            is_sent = send_copy(ex);
        }
    }
    if (err == WEFT_OK && is_sent) {
        is_sent = send_copy(ex);
    }
    weft__buf_reset(&ex->copy);
    /* A failed encoding ends the COPY with an error, which aborts the transaction. */
    if (PQputCopyEnd(ex->pg.conn, err == WEFT_OK ? NULL : "weft: cannot encode the batch") != 1) {
        is_sent = false;
    }
    while ((res = PQgetResult(ex->pg.conn)) != NULL) {
        ExecStatusType status = PQresultStatus(res);

        if (status != PGRES_COMMAND_OK && err == WEFT_OK) {
            err = weft__store_pg_fail(&ex->pg, res, "cannot stage a batch");
        }
        PQclear(res);
        if (status == PGRES_COPY_IN) {
            /* The end of the COPY did not get through: the session is unusable. */
            PQreset(ex->pg.conn);
            ex->pg.has_stage = false;
            for (size_t k = 0; k < WEFT__PG_PREPARED_MAX; k++) {
                ex->pg.prepared[k].is_ready = false;
            }
            err = WEFT_EIO;
            break;
        }
    }
    if (err == WEFT_OK && !is_sent) {
        err = weft__store_pg_fail(&ex->pg, NULL, "cannot send a batch");
    }
    return err;
}

static weft_err
write_once(struct pg_exporter *ex,
           const struct weft_span_data *const *spans,
           size_t count,
           const struct weft__store_texts *prebuilt,
           bool is_guarded)
{
    struct weft__store_pg *pg = &ex->pg;
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    pg->sqlstate[0] = '\0';
    weft__store_payloads_reset(&ex->payloads);
    err = ensure_batch_parts(ex, spans, count);
    if (err == WEFT_OK && !pg->has_stage) {
        err = weft__store_pg_exec(pg, "cannot create the staging table", stage_sql);
        pg->has_stage = err == WEFT_OK;
    }
    if (err == WEFT_OK) {
        err = copy_batch(ex, spans, count, prebuilt, is_guarded);
    }
    if (err == WEFT_OK) {
        res = weft__store_pg_run(pg, write_sql, 0, NULL, true);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            err = weft__store_pg_fail(pg, res, "cannot write a batch");
        }
        PQclear(res);
    }
    if (err == WEFT_OK && prebuilt == NULL) {
        weft__store_payloads_sort(&ex->payloads); /* texts_build sorted prebuilt's */
    }
    if (err == WEFT_OK) {
        err = write_payloads(ex, prebuilt != NULL ? &prebuilt->payloads : &ex->payloads);
    }
    if (err == WEFT_OK) {
        res = PQexec(pg->conn, "COMMIT");
        if (PQresultStatus(res) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(res), "COMMIT") != 0) {
            err = weft__store_pg_fail(pg, res, "cannot commit a batch");
        }
        PQclear(res);
    }
    if (err != WEFT_OK && !weft__store_pg_is_lost(pg) &&
        PQtransactionStatus(pg->conn) != PQTRANS_IDLE) {
        PQclear(PQexec(pg->conn, "ROLLBACK"));
    }
    return err;
}

/* Worth one more try: a lost connection made again (the batch may have been committed before
 * its answer was lost: sending it again changes nothing), a deadlock, a serialization
 * failure. */
static bool
may_retry(struct pg_exporter *ex)
{
    if (weft__store_pg_is_lost(&ex->pg)) {
        return weft__store_pg_reset(&ex->pg);
    }
    return strcmp(ex->pg.sqlstate, "40P01") == 0 || strcmp(ex->pg.sqlstate, "40001") == 0;
}

static weft_err get_ready(struct pg_exporter *ex);

static weft_err
write_texts(struct pg_exporter *ex,
            const struct weft_span_data *const *spans,
            size_t count,
            const struct weft__store_texts *prebuilt,
            bool is_guarded)
{
    weft_err err = WEFT_OK;

    if (atomic_load(&ex->is_shut_down)) {
        return WEFT_ESTATE;
    }
    if (count == 0) {
        return WEFT_OK;
    }
    if (spans == NULL) {
        return WEFT_EINVAL;
    }
    err = ex->is_ready ? WEFT_OK : get_ready(ex);
    err = err == WEFT_OK ? write_once(ex, spans, count, prebuilt, is_guarded) : err;
    if (err == WEFT_EIO && may_retry(ex)) {
        WEFT_LOG(WEFT_LOG_DEBUG, "%s; sending the batch again", ex->pg.errmsg);
        err = write_once(ex, spans, count, prebuilt, is_guarded);
    }
    if (err != WEFT_OK) {
        if (err != WEFT_EIO) {
            err = WEFT_ENOMEM; /* encoding: out of memory, or past a column's cap */
            snprintf(ex->pg.errmsg, sizeof(ex->pg.errmsg),
                     "store %s: out of memory encoding a batch", ex->pg.where);
        }
        WEFT_LOG(ex->failures == 0 ? WEFT_LOG_ERROR : WEFT_LOG_DEBUG, "%s", ex->pg.errmsg);
        ex->failures++;
        return err;
    }
    if (ex->failures > 0) {
        WEFT_LOG(WEFT_LOG_INFO, "store %s: writing again after %" PRIu64 " failed batches",
                 ex->pg.where, ex->failures);
        ex->failures = 0;
    }
    return WEFT_OK;
}

static weft_err
pg_export(void *self,
          const struct weft_span_data *const *spans,
          size_t count,
          uint64_t deadline_ns,
          struct weft_export_result *result)
{
    (void)deadline_ns; /* bounded by the connect timeout and one retry */
    (void)result;
    return write_texts(self, spans, count, NULL, false);
}

static weft_err
pg_force_flush(void *self, uint64_t deadline_ns)
{
    (void)self;
    (void)deadline_ns;
    return WEFT_OK; /* every batch is committed before export returns */
}

static weft_err
pg_shutdown(void *self, uint64_t deadline_ns)
{
    struct pg_exporter *ex = self;

    (void)deadline_ns;
    atomic_store(&ex->is_shut_down, true);
    return WEFT_OK;
}

static void
pg_destroy(void *self)
{
    struct pg_exporter *ex = self;

    if (ex == NULL) {
        return;
    }
    weft__store_pg_close(&ex->pg);
    weft__buf_cleanup(&ex->copy);
    weft__buf_cleanup(&ex->attrs_text);
    weft__store_payloads_cleanup(&ex->payloads);
    weft__buf_cleanup(&ex->events_text);
    weft__buf_cleanup(&ex->links_text);
    weft__buf_cleanup(&ex->resource_text);
    weft__free(ex->parts);
    weft__free(ex->url);
    weft__free(ex);
}

static size_t
pg_last_error(void *self, char *buf, size_t len)
{
    struct pg_exporter *ex = self;
    int n = 0;

    if (len == 0 || ex->pg.errmsg[0] == '\0') {
        return 0;
    }
    n = snprintf(buf, len, "%s", ex->pg.errmsg);
    return n < 0 ? 0 : ((size_t)n < len ? (size_t)n : len - 1);
}

static const struct weft_exporter_ops pg_ops = {
    .name = "store",
    .export_batch = pg_export,
    .force_flush = pg_force_flush,
    .shutdown = pg_shutdown,
    .destroy = pg_destroy,
    .last_error = pg_last_error,
};

/* Connect, create or upgrade the schema and make the partitions of now and the next
 * PARTS_AHEAD intervals. */
static weft_err
get_ready(struct pg_exporter *ex)
{
    int64_t now = ns_column(weft__now_ns());
    weft_err err = WEFT_OK;

    weft__store_pg_close(&ex->pg);
    err = weft__store_pg_connect(&ex->pg, ex->url);
    if (err == WEFT_OK) {
        err = weft__store_pg_migrate(&ex->pg);
    }
    for (int k = 0; k <= PARTS_AHEAD && err == WEFT_OK; k++) {
        err =
            ensure_part(ex, weft__store_pg_bucket(now + k * ex->interval_ns, ex->interval_ns, now));
    }
    ex->is_ready = err == WEFT_OK;
    return err;
}

/* The exporter, ready when the database answers. One that does not answer at start (down,
 * restarting, not reachable yet) is no configuration error: like an OTLP exporter whose
 * collector is away, the exporter is made and its batches fail, counted, until it answers,
 * so a run or a worker starts whatever the span store's state. Anything else (a newer schema,
 * a refused login, a failed migration) fails here. */
static weft_err
exporter_open(const char *url, struct pg_exporter **out)
{
    struct pg_exporter *ex = weft__calloc(1, sizeof(*ex));
    weft_err err = WEFT_OK;

    *out = NULL;
    if (ex == NULL) {
        return WEFT_ENOMEM;
    }
    atomic_init(&ex->is_shut_down, false);
    weft__buf_init(&ex->copy, 0);
    weft__buf_init(&ex->attrs_text, STORE_JSON_COLUMN_MAX);
    weft__store_payloads_init(&ex->payloads);
    weft__buf_init(&ex->events_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&ex->links_text, STORE_JSON_COLUMN_MAX);
    weft__buf_init(&ex->resource_text, STORE_JSON_COLUMN_MAX);
    ex->interval_ns = weft__store_pg_interval_ns();
    ex->url = weft__strdup(url);
    err = ex->url != NULL ? get_ready(ex) : WEFT_ENOMEM;
    if (err == WEFT_EIO && weft__store_pg_is_lost(&ex->pg)) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "%s; its spans are written once it answers (each batch tries again)",
                 ex->pg.errmsg);
        err = WEFT_OK;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "%s", ex->pg.errmsg);
        pg_destroy(ex);
        return err;
    }
    *out = ex;
    return WEFT_OK;
}

weft_err
weft__store_pg_exporter_new(const char *url, struct weft_exporter **out)
{
    struct pg_exporter *ex = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (url == NULL || url[0] == '\0') {
        return WEFT_EINVAL;
    }
    err = exporter_open(url, &ex);
    if (err != WEFT_OK) {
        return err;
    }
    return weft_exporter_new(&pg_ops, ex, out);
}

weft_err
weft__store_pg_export_texts(struct weft_exporter *ex,
                            const struct weft_span_data *const *spans,
                            size_t count,
                            const struct weft__store_texts *texts)
{
    struct pg_exporter *pe = weft__exporter_self(ex, &pg_ops);

    if (pe == NULL || (texts != NULL && texts->count != count)) {
        return WEFT_EINVAL;
    }
    return write_texts(pe, spans, count, texts, false);
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

weft_err
weft__store_pg_add_interrupted_span(const char *url, const struct weft_interrupted_span *span)
{
    static const struct weft_scope scope = {"weft.runtime", NULL, NULL, NULL, 0};
    struct weft_span_data data;
    const struct weft_span_data *batch[1] = {&data};
    struct weft_attr attrs[2];
    struct pg_exporter *ex = NULL;
    weft_err err = WEFT_OK;

    if (url == NULL || span == NULL || !is_hex_id(span->trace_id, 2 * WEFT_TRACE_ID_SIZE) ||
        !is_hex_id(span->span_id, 2 * WEFT_SPAN_ID_SIZE) ||
        (span->parent_span_id != NULL && !is_hex_id(span->parent_span_id, 2 * WEFT_SPAN_ID_SIZE))) {
        return WEFT_EINVAL;
    }
    memset(&data, 0, sizeof(data));
    if (weft__hex_decode_id(span->trace_id, 2 * WEFT_TRACE_ID_SIZE, data.trace_id,
                            WEFT_TRACE_ID_SIZE) != WEFT_OK ||
        weft__hex_decode_id(span->span_id, 2 * WEFT_SPAN_ID_SIZE, data.span_id,
                            WEFT_SPAN_ID_SIZE) != WEFT_OK ||
        (span->parent_span_id != NULL &&
         weft__hex_decode_id(span->parent_span_id, 2 * WEFT_SPAN_ID_SIZE, data.parent_span_id,
                             WEFT_SPAN_ID_SIZE) != WEFT_OK)) {
        return WEFT_EINVAL;
    }
    data.has_parent = span->parent_span_id != NULL;
    data.name = span->name != NULL ? span->name : "interrupted";
    data.kind = WEFT_SPAN_KIND_INTERNAL;
    data.start_time_ns = span->start_ns;
    data.end_time_ns = span->end_ns > span->start_ns ? span->end_ns : span->start_ns;
    data.status_code = WEFT_STATUS_ERROR;
    data.status_message = "interrupted";
    data.scope = &scope;
    /* The SQLite writer's attributes, in its (sorted) order. */
    attrs[0] = weft_attr_bool("weft.interrupted", true);
    data.attrs = attrs;
    data.attr_count = 1;
    if (span->run_id != NULL) {
        attrs[1] = weft_attr_str("weft.run.id", span->run_id);
        data.attr_count = 2;
    }
    err = exporter_open(url, &ex);
    if (err != WEFT_OK) {
        return err;
    }
    err = write_texts(ex, batch, 1, NULL, true);
    pg_destroy(ex);
    return err;
}
