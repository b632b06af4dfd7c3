/* serve/api_traces.c - GET /api/v1/traces: every trace in the span store, weft runs and what
 * any OpenTelemetry SDK sent to the OTLP ingest alike, newest first, filtered and paged
 * (docs/serve.md, "Traces").
 *
 * The list reads the store's trace summaries (weft_store_find_traces(): one row per trace,
 * kept by the writer as spans arrive), never the spans, so a page costs its own size whatever
 * the store holds. Paging is by keyset, not offset: the cursor names the last trace of the
 * page (its start and id) and the next page starts after it, so traces that arrive while a
 * client pages do not shift the pages it has not read yet, and a deep page costs what the
 * first one does. One more row than the page is read to know whether there is a next one.
 */
#include "api_int.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/store.h>
#include <weft/weft.h>

#define TRACES_DEFAULT 50
#define TRACES_MAX     500
#define QUERY_TEXT_MAX 256 /* bytes of q and service */

/* Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil; timegm()
 * is not POSIX and mktime() would apply the local time zone). */
static int64_t
days_from_civil(int64_t year, int month, int day)
{
    int64_t era = 0;
    int64_t yoe = 0;
    int64_t doy = 0;

    year -= month <= 2 ? 1 : 0;
    era = (year >= 0 ? year : year - 399) / 400;
    yoe = year - era * 400;
    doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* Digits @p s[0 .. @p n) as a number into *out; false when one is not a digit. */
static bool
digits(const char *s, size_t n, int64_t *out)
{
    int64_t v = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* RFC 3339 ("2026-11-28T16:40:13Z", "...13.250+01:00"; 't', 'z' and ' ' as the separator are
 * accepted too) as ns since the Unix epoch. */
static bool
parse_rfc3339(const char *s, uint64_t *out)
{
    int64_t y = 0;
    int64_t mo = 0;
    int64_t d = 0;
    int64_t h = 0;
    int64_t mi = 0;
    int64_t sec = 0;
    int64_t frac = 0;
    int64_t offset = 0;
    int64_t oh = 0;
    int64_t om = 0;
    int64_t total = 0;
    size_t i = 19;

    if (strlen(s) < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
        s[7] != '-' || !digits(s + 8, 2, &d) || strchr("Tt ", s[10]) == NULL ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' ||
        !digits(s + 17, 2, &sec) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 60) {
        return false;
    }
    if (s[i] == '.') {
        int64_t scale = 100000000;
        for (i++; s[i] >= '0' && s[i] <= '9'; i++) {
            frac += (s[i] - '0') * scale;
            scale /= 10;
        }
    }
    if ((s[i] == 'Z' || s[i] == 'z') && s[i + 1] == '\0') {
        offset = 0;
    } else if ((s[i] == '+' || s[i] == '-') && strlen(s + i) == 6 && s[i + 3] == ':' &&
               digits(s + i + 1, 2, &oh) && digits(s + i + 4, 2, &om) && oh < 24 && om < 60) {
        offset = (oh * 60 + om) * 60 * (s[i] == '+' ? 1 : -1);
    } else {
        return false;
    }
    total = days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60 + sec - offset;
    if (total < 0) {
        return false;
    }
    *out = (uint64_t)total * 1000000000u + (uint64_t)frac;
    return true;
}

/* Query argument @p name as an instant: unix ms in digits, or RFC 3339. 0 when absent. */
static bool
arg_time(const struct weft__api_request *req, const char *name, uint64_t *out)
{
    const char *v = req->arg(req->ctx, name);
    int64_t ms = 0;

    *out = 0;
    if (v == NULL || v[0] == '\0') {
        return true;
    }
    if (strlen(v) <= 15 && digits(v, strlen(v), &ms)) {
        *out = (uint64_t)ms * 1000000u;
        return true;
    }
    return parse_rfc3339(v, out);
}

/* The cursor "START-TRACEID" (ns, 32 lowercase hex) into @p q, kept in @p id. */
static bool
parse_cursor(const char *v, struct weft_trace_query *q, char id[WEFT_TRACE_ID_HEX_LEN + 1])
{
    const char *dash = strchr(v, '-');
    int64_t start = 0;
    size_t n = dash != NULL ? (size_t)(dash - v) : 0;

    if (dash == NULL || n == 0 || n > 19 || !digits(v, n, &start) ||
        strlen(dash + 1) != WEFT_TRACE_ID_HEX_LEN ||
        strspn(dash + 1, "0123456789abcdef") != WEFT_TRACE_ID_HEX_LEN) {
        return false;
    }
    memcpy(id, dash + 1, WEFT_TRACE_ID_HEX_LEN + 1);
    q->after_start_ns = (uint64_t)start;
    q->after_id = id;
    return true;
}

/* The query the request's arguments say, or false with the 400 set. */
static bool
parse_query(const struct weft__api_request *req,
            struct weft_trace_query *q,
            char id[WEFT_TRACE_ID_HEX_LEN + 1],
            struct weft__api_reply *reply)
{
    const char *status = req->arg(req->ctx, "status");
    const char *cursor = req->arg(req->ctx, "cursor");
    size_t limit = 0;

    memset(q, 0, sizeof(*q));
    q->service = req->arg(req->ctx, "service");
    q->text = req->arg(req->ctx, "q");
    q->service = q->service != NULL && q->service[0] != '\0' ? q->service : NULL;
    q->text = q->text != NULL && q->text[0] != '\0' ? q->text : NULL;
    if (!weft__api_arg_size(req, "limit", TRACES_DEFAULT, TRACES_MAX, &limit) || limit == 0) {
        weft__api_reply_error(reply, 400, "limit: expected a number from 1 to 500");
    } else if ((q->service != NULL && strlen(q->service) > QUERY_TEXT_MAX) ||
               (q->text != NULL && strlen(q->text) > QUERY_TEXT_MAX)) {
        weft__api_reply_error(reply, 400, "service, q: expected at most 256 bytes");
    } else if (status != NULL && status[0] != '\0' && strcmp(status, "error") != 0 &&
               strcmp(status, "ok") != 0) {
        weft__api_reply_error(reply, 400, "status: expected error or ok");
    } else if (!arg_time(req, "from", &q->from_ns)) {
        weft__api_reply_error(reply, 400,
                              "from: expected unix milliseconds or an RFC 3339 time "
                              "(2026-01-31T09:00:00Z)");
    } else if (!arg_time(req, "to", &q->to_ns)) {
        weft__api_reply_error(reply, 400,
                              "to: expected unix milliseconds or an RFC 3339 time "
                              "(2026-01-31T09:00:00Z)");
    } else if (cursor != NULL && cursor[0] != '\0' && !parse_cursor(cursor, q, id)) {
        weft__api_reply_error(reply, 400, "cursor: expected the \"next\" of a previous answer");
    } else {
        q->status = status == NULL || status[0] == '\0' ? 0 : status[0] == 'e' ? 1 : 2;
        q->limit = limit + 1; /* one more: is there a next page? */
        return true;
    }
    return false;
}

static json_t *
str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static json_t *
item(const struct weft_trace_summary *s)
{
    return json_pack("{s:s, s:o, s:s, s:b, s:I, s:I, s:I, s:I, s:o}", "trace_id", s->trace_id,
                     "service", str_or_null(s->service_name), "root_name", s->root_name, "has_root",
                     s->has_root, "start_ns", (json_int_t)s->start_ns, "duration_ns",
                     (json_int_t)(s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0),
                     "span_count", (json_int_t)s->span_count, "error_count",
                     (json_int_t)s->error_count, "run_id", str_or_null(s->run_id));
}

void
weft__api_traces_list(const struct weft__api_config *cfg,
                      const struct weft__api_request *req,
                      struct weft__api_reply *reply)
{
    struct weft_trace_query q;
    char after[WEFT_TRACE_ID_HEX_LEN + 1];
    struct weft_store *store = NULL;
    struct weft_trace_summary *list = NULL;
    size_t count = 0;
    json_t *arr = NULL;
    json_t *next = NULL;
    weft_err err = WEFT_OK;

    if (!parse_query(req, &q, after, reply)) {
        return;
    }
    err = weft__api_store_get(cfg, &store);
    if (err == WEFT_OK) {
        err = weft_store_find_traces(store, &q, &list, &count);
    }
    weft__api_store_put(cfg, store);
    if (err == WEFT_ENOTFOUND) { /* no span store yet: no traces */
        err = WEFT_OK;
    }
    if (err != WEFT_OK) {
        weft__api_reply_weft_error(reply, err, "span store");
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < count && i + 1 < q.limit; i++) {
        json_array_append_new(arr, item(&list[i]));
    }
    if (arr != NULL && count == q.limit) {
        char cursor[64];
        const struct weft_trace_summary *last = &list[count - 2];
        snprintf(cursor, sizeof(cursor), "%llu-%s", (unsigned long long)last->start_ns,
                 last->trace_id);
        next = json_string(cursor);
    }
    weft_trace_summaries_free(list, count);
    weft__api_reply_json(reply, 200,
                         arr != NULL ? json_pack("{s:o, s:o}", "traces", arr, "next",
                                                 next != NULL ? next : json_null())
                                     : NULL);
}
