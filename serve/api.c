/* serve/api.c - the explorer's JSON API (api.h, docs/explorer.md).
 *
 * Routes (GET):
 *   /api/v1/runs?limit=N&status=S&q=TEXT   weft.runs/v1, newest first, filtered
 *   /api/v1/runs/REF                       weft.run/v1 (REF: id, unique prefix or "last"),
 *                                          with flow_loops (the plan graph's flow loops)
 *   /api/v1/runs/REF/trace?offset&limit    weft.trace/v1 of the run's latest trace, paged
 *                                          (&view=waterfall: the rows only; view=rows:
 *                                          weft.rows/v1, the rows as columns, api_rows.c)
 *   /api/v1/runs/REF/why                   weft.why/v1: the path to the deepest error span
 *   /api/v1/traces?service&q&status&from&to&limit&cursor   every trace, paged (api_traces.c)
 *   /api/v1/traces/ID?offset&limit         weft.trace/v1 (view=waterfall: weft.waterfall/v1,
 *                                          view=rows: weft.rows/v1)
 *   /api/v1/traces/ID/spans/SPAN_ID        one span, whole
 *   /api/v1/compare?a=REF&b=REF            weft.compare/v1: two runs step by step
 *                                          (api_compare.c)
 *   /api/v1/metrics?limit=N                weft.collab/v1: hand-offs, agents, loops
 *   /api/v1/datasets..., /api/v1/experiments...   datasets and experiments (api_eval.c)
 */
#include "api_int.h"

#include "report/docs.h"
#include "report/why.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/store.h>
#include <weft/weft.h>

#define RUNS_DEFAULT  200
#define RUNS_MAX      10000
#define SPANS_DEFAULT 5000
#define SPANS_MAX     100000
/* The whole-span view (weft.trace/v1) is tens of times the waterfall's rows per span: a page of
 * it holds at most this many spans (a larger limit is cut to it; span_count and offset tell
 * the client where the next page starts), so one reader's document stays in the tens of MB. */
#define SPANS_FULL_MAX  10000
#define COLLAB_DEFAULT  200
#define FLOW_LOOP_SPANS 10000 /* loop spans read at most for a run's flow_loops */

static void
reply_doc(struct weft__api_reply *reply, unsigned status, json_t *doc)
{
    reply->status = doc != NULL ? status : 503;
    reply->body = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    reply->len = reply->body != NULL ? strlen(reply->body) : 0;
    if (reply->body == NULL) {
        reply->status = 503;
    }
    json_decref(doc);
}

static void
reply_error(struct weft__api_reply *reply, unsigned status, const char *message)
{
    reply_doc(reply, status,
              json_pack("{s:{s:i, s:s}}", "error", "status", (int)status, "message", message));
}

/* Query argument @p name as a count in [0, max]; @p def when absent; false when malformed. */
static bool
arg_size(const struct weft__api_request *req, const char *name, size_t def, size_t max, size_t *out)
{
    const char *v = req->arg(req->ctx, name);
    char *end = NULL;
    unsigned long long n = 0;

    *out = def;
    if (v == NULL || v[0] == '\0') {
        return true;
    }
    if (v[0] < '0' || v[0] > '9') {
        return false;
    }
    n = strtoull(v, &end, 10);
    if (*end != '\0' || n > max) {
        return false;
    }
    *out = (size_t)n;
    return true;
}

static void
reply_weft_error(struct weft__api_reply *reply, weft_err err, const char *what)
{
    char msg[300];

    snprintf(msg, sizeof(msg), "%s: %s", what, weft_strerror(err));
    reply_error(reply,
                err == WEFT_ENOTFOUND ? 404
                : err == WEFT_EINVAL  ? 400
                : err == WEFT_ENOMEM  ? 503
                                      : 500,
                msg);
}

/* Does run @p r pass the list's filters (status exact; q in its id, workflow, input or
 * reason, case-sensitive)? */
static bool
run_matches(const struct weft_run_info *r, const char *status, const char *q)
{
    if (status != NULL && status[0] != '\0' &&
        (r->status == NULL || strcmp(r->status, status) != 0)) {
        return false;
    }
    if (q == NULL || q[0] == '\0') {
        return true;
    }
    return (r->run_id != NULL && strstr(r->run_id, q) != NULL) ||
           (r->workflow != NULL && strstr(r->workflow, q) != NULL) ||
           (r->input != NULL && strstr(r->input, q) != NULL) ||
           (r->reason != NULL && strstr(r->reason, q) != NULL);
}

static void
runs_list(const struct weft__api_config *cfg,
          const struct weft__api_request *req,
          struct weft__api_reply *reply)
{
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    size_t limit = 0;
    const char *status = req->arg(req->ctx, "status");
    const char *q = req->arg(req->ctx, "q");
    json_t *arr = NULL;
    weft_err err = WEFT_OK;

    if (!arg_size(req, "limit", RUNS_DEFAULT, RUNS_MAX, &limit) || limit == 0) {
        reply_error(reply, 400, "limit: expected a number from 1 to 10000");
        return;
    }
    err = weft_runs_list(cfg->state_path, (status != NULL || q != NULL) ? RUNS_MAX : limit, &runs,
                         &count);
    if (err == WEFT_ENOTFOUND) { /* no state database yet: no runs */
        err = WEFT_OK;
    }
    if (err != WEFT_OK) {
        reply_weft_error(reply, err, "state store");
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < count && json_array_size(arr) < limit; i++) {
        if (run_matches(&runs[i], status, q)) {
            json_array_append_new(arr, weft__doc_run_info(&runs[i]));
        }
    }
    weft_run_infos_free(runs, count);
    reply_doc(reply, 200,
              arr != NULL ? json_pack("{s:s, s:o}", "schema", WEFT_DOC_SCHEMA_RUNS, "runs", arr)
                          : NULL);
}

/* Run @p ref loaded, or NULL with the reply set. */
static struct weft_run_details *
load_run(const struct weft__api_config *cfg, const char *ref, struct weft__api_reply *reply)
{
    struct weft_run_details *run = NULL;
    weft_err err = weft_run_load(cfg->state_path, ref, &run);

    if (err != WEFT_OK) {
        char what[160];
        snprintf(what, sizeof(what), "run %.64s", ref);
        reply_weft_error(reply, err, what);
        return NULL;
    }
    return run;
}

/* What of a trace to load: all of it, its outline (the waterfall's), one span, or one page of
 * whole spans (with is_page; the counts and id come back in the page_ fields). */
struct trace_want {
    bool is_outline;
    bool is_rows;                 /* the rows (out: view) and the root span, whole */
    struct weft__rows_view *view; /* out, with is_rows: the caller releases it */
    const char *span_id;          /* one span; NULL: the trace */
    bool is_page;
    size_t offset;
    size_t limit;
    size_t page_span_count; /* out: the whole trace's span and error counts */
    size_t page_error_count;
    char page_trace_id[WEFT_TRACE_ID_HEX_LEN + 1]; /* out: the resolved id */
};

weft_err
weft__api_store_get(const struct weft__api_config *cfg, struct weft_store **store)
{
    *store = NULL;
    return cfg->store_pool != NULL ? weft_store_pool_acquire(cfg->store_pool, store)
                                   : weft_store_open(cfg->store_path, store);
}

void
weft__api_store_put(const struct weft__api_config *cfg, struct weft_store *store)
{
    if (cfg->store_pool != NULL) {
        weft_store_pool_release(cfg->store_pool, store); /* kept unless its connection broke */
    } else {
        weft_store_close(store);
    }
}

/* The rows of trace @p id as view=rows writes them (*out, release it): the cache's view when
 * it was read at the trace's stamp, else read now (and kept). The stamp is read before the
 * rows: spans stored in between make the next stamp differ, so the view is read again. */
static weft_err
load_rows_view(const struct weft__api_config *cfg,
               struct weft_store *store,
               const char *id,
               struct weft__rows_view **out)
{
    struct weft_trace_stamp stamp;
    struct weft_trace_rows *rows = NULL;
    bool is_kept = cfg->rows_cache != NULL;
    weft_err err = WEFT_OK;

    *out = NULL;
    if (is_kept) {
        err = weft_store_trace_stamp(store, id, &stamp);
        is_kept = err == WEFT_OK; /* a trace with no summary is read, not kept */
        if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
            return err;
        }
        *out = is_kept ? weft__rows_cache_get(cfg->rows_cache, id, &stamp) : NULL;
        if (*out != NULL) {
            return WEFT_OK;
        }
    }
    err = weft_store_load_rows(store, id, &rows);
    if (err == WEFT_OK) {
        *out = weft__api_rows_view(rows);
        err = *out == NULL ? WEFT_ENOMEM : WEFT_OK;
    }
    if (err == WEFT_OK && is_kept) {
        memcpy((*out)->trace_id, id, sizeof((*out)->trace_id));
        (*out)->stamp = stamp;
        weft__rows_cache_put(cfg->rows_cache, *out);
    }
    return err;
}

/* Trace @p ref loaded from the span store as @p want says, or NULL with the reply set. */
static struct weft_trace *
load_trace_as(const struct weft__api_config *cfg,
              const char *ref,
              struct trace_want *want,
              struct weft__api_reply *reply)
{
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    weft_err err = weft__api_store_get(cfg, &store);

    if (err == WEFT_OK) {
        err = weft_store_resolve(store, ref, id);
    }
    if (err == WEFT_OK && want->is_page) {
        /* Only the page is read whole: loading the whole trace to cut a page from it took
         * hundreds of MB per request on large traces, whatever the page's size. */
        memcpy(want->page_trace_id, id, sizeof(id));
        err = weft_store_load_page(store, id, want->offset, want->limit, &trace,
                                   &want->page_span_count, &want->page_error_count);
    } else if (err == WEFT_OK && want->is_rows) {
        /* The rows, and the root span whole: where the trace came from (add_origin()). */
        char root[WEFT_SPAN_ID_SIZE * 2 + 1];
        err = load_rows_view(cfg, store, id, &want->view);
        if (err == WEFT_OK) {
            weft_hex_encode(want->view->r[0].span_id, WEFT_SPAN_ID_SIZE, root);
            err = weft_store_load_span(store, id, root, &trace);
        }
    } else if (err == WEFT_OK) {
        err = want->span_id != NULL ? weft_store_load_span(store, id, want->span_id, &trace)
              : want->is_outline    ? weft_store_load_outline(store, id, &trace)
                                    : weft_store_load_trace(store, id, &trace);
    }
    weft__api_store_put(cfg, store);
    if (err != WEFT_OK) {
        char what[160];
        snprintf(what, sizeof(what), "trace %.64s", ref);
        reply_weft_error(reply, err, what);
    }
    return trace;
}

static struct weft_trace *
load_trace(const struct weft__api_config *cfg, const char *ref, struct weft__api_reply *reply)
{
    struct trace_want all = {.is_outline = false};

    return load_trace_as(cfg, ref, &all, reply);
}

/* The trace's root as far as @p trace holds it: its first span at depth 0, else its first
 * span (a page past the root, a trace whose root was not stored); NULL when empty. */
static const struct weft_span_data *
root_of(const struct weft_trace *trace)
{
    for (size_t i = 0; i < weft_trace_span_count(trace); i++) {
        if (weft_trace_span_depth(trace, i) == 0) {
            return weft_trace_span(trace, i);
        }
    }
    return weft_trace_span_count(trace) > 0 ? weft_trace_span(trace, 0) : NULL;
}

/* What a trace document says of where the trace came from, on @p doc: "service" (service.name
 * of the root's resource), "resource" (the attributes of the resource the root's part of the
 * trace arrived with, as the store keeps them: bounded and redacted, store/resource.c) and
 * "resource_dropped" (how many of its attributes the sender or the store left out),
 * and "run_id" (@p run_id, else weft.run.id of the root: a trace opened by its id still names
 * its run). A trace of no weft run has no "run_id" at all, and one without a service no
 * "service": absent, never null. */
static json_t *
add_origin(json_t *doc, const struct weft_trace *trace, const char *run_id)
{
    const struct weft_span_data *root = root_of(trace);
    const struct weft_value *rid = root != NULL ? weft_span_data_attr(root, "weft.run.id") : NULL;
    json_t *resource = json_object();
    const char *service = NULL;

    if (doc == NULL || resource == NULL) {
        json_decref(resource);
        json_decref(doc);
        return NULL;
    }
    for (size_t i = 0; root != NULL && root->resource != NULL && i < root->resource->attr_count;
         i++) {
        const struct weft_attr *a = &root->resource->attrs[i];
        json_t *v = a->key != NULL ? weft__doc_value(&a->value) : NULL;
        if (v != NULL) {
            json_object_set_new(resource, a->key, v);
        }
        if (v != NULL && strcmp(a->key, "service.name") == 0 && json_is_string(v)) {
            service = json_string_value(v);
        }
    }
    if (run_id == NULL && rid != NULL && rid->type == WEFT_VALUE_STRING && rid->u.str != NULL &&
        rid->u.str[0] != '\0') {
        run_id = rid->u.str;
    }
    if (run_id != NULL) {
        json_object_set_new(doc, "run_id", json_string(run_id));
    } else {
        json_object_del(doc, "run_id");
    }
    if (service != NULL) {
        json_object_set_new(doc, "service", json_string(service));
    }
    json_object_set_new(doc, "resource", resource);
    json_object_set_new(
        doc, "resource_dropped",
        json_integer(root != NULL && root->resource != NULL ? root->resource->dropped_attrs : 0));
    return doc;
}

/* Stuck loops and circuit-breaker decisions: the waterfall's markers. */
static bool
is_marker(const struct weft_span_data *s)
{
    const struct weft_value *layer = weft_span_data_attr(s, "weft.decision.layer");

    for (size_t i = 0; i < s->event_count; i++) {
        if (s->events[i].name != NULL && strcmp(s->events[i].name, "weft.stuck_loop") == 0) {
            return true;
        }
    }
    return layer != NULL && layer->type == WEFT_VALUE_STRING &&
           strcmp(layer->u.str, "circuit_breaker") == 0;
}

/* The waterfall's view of a trace (weft.waterfall/v1): per span only what a row draws, as an
 * array [span_id, depth, name, start (ns after the trace's first span), duration (ns), status
 * ("error", "ok", "unset"), marker (1: stuck loop or breaker)], so 100,000 spans are a few MB;
 * a span's detail is one more request (/api/v1/traces/ID/spans/SPAN_ID). */
static json_t *
waterfall_doc(const struct weft_trace *trace, const char *run_id, size_t offset, size_t limit)
{
    size_t total = weft_trace_span_count(trace);
    uint64_t t0 = UINT64_MAX;
    size_t errors = 0;
    json_t *rows = json_array();
    char hex[WEFT_TRACE_ID_HEX_LEN + 1];

    for (size_t i = 0; i < total; i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);
        t0 = s->start_time_ns < t0 ? s->start_time_ns : t0;
        errors += s->status_code == WEFT_STATUS_ERROR;
    }
    for (size_t i = offset; rows != NULL && i < total && i - offset < limit; i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);
        char id[WEFT_SPAN_ID_SIZE * 2 + 1];
        weft_hex_encode(s->span_id, WEFT_SPAN_ID_SIZE, id);
        json_array_append_new(rows, json_pack("[s, I, s, I, I, s, i]", id,
                                              (json_int_t)weft_trace_span_depth(trace, i),
                                              s->name != NULL ? s->name : "",
                                              (json_int_t)(s->start_time_ns - t0),
                                              (json_int_t)(s->end_time_ns > s->start_time_ns
                                                               ? s->end_time_ns - s->start_time_ns
                                                               : 0),
                                              s->status_code == WEFT_STATUS_ERROR ? "error"
                                              : s->status_code == WEFT_STATUS_OK  ? "ok"
                                                                                  : "unset",
                                              is_marker(s) ? 1 : 0));
    }
    weft_hex_encode(weft_trace_span(trace, 0)->trace_id, WEFT_TRACE_ID_SIZE, hex);
    return rows == NULL
               ? NULL
               : json_pack("{s:s, s:s, s:s?, s:I, s:I, s:I, s:o}", "schema", "weft.waterfall/v1",
                           "trace_id", hex, "run_id", run_id, "span_count", (json_int_t)total,
                           "error_count", (json_int_t)errors, "offset", (json_int_t)offset, "spans",
                           rows);
}

/* One span of a trace, whole (weft.trace/v1's span object). */
static void
span_show(const struct weft__api_config *cfg,
          const char *trace_ref,
          const char *span_id,
          struct weft__api_reply *reply)
{
    struct trace_want one = {.span_id = span_id};
    struct weft_trace *trace = load_trace_as(cfg, trace_ref, &one, reply);

    if (trace != NULL) {
        reply_doc(reply, 200, weft__doc_span(weft_trace_span(trace, 0), 0));
    }
    weft_trace_free(trace);
}

/* weft.trace/v1 of one page read by weft_store_load_page(): what weft__doc_trace() gives for
 * the whole trace with @p offset and @p limit (the counts are the whole trace's), built from
 * the page alone; an offset past the end gives no spans. */
static json_t *
page_doc(const struct weft_trace *page, const struct trace_want *want, const char *run_id)
{
    json_t *spans = json_array();
    json_t *doc = NULL;

    for (size_t i = 0; spans != NULL && i < weft_trace_span_count(page); i++) {
        json_t *span = weft__doc_span(weft_trace_span(page, i), weft_trace_span_depth(page, i));

        if (span == NULL || json_array_append_new(spans, span) != 0) {
            json_decref(spans);
            return NULL;
        }
    }
    doc = spans != NULL
              ? json_pack("{s:s, s:s, s:s?, s:[], s:I, s:I}", "schema", WEFT_DOC_SCHEMA_TRACE,
                          "trace_id", want->page_trace_id, "run_id", run_id, "other_traces",
                          "span_count", (json_int_t)want->page_span_count, "error_count",
                          (json_int_t)want->page_error_count)
              : NULL;
    if (doc == NULL) {
        json_decref(spans);
        return NULL;
    }
    if (want->offset > 0 || want->limit < want->page_span_count) {
        json_object_set_new(doc, "offset", json_integer((json_int_t)want->offset));
    }
    json_object_set_new(doc, "spans", spans);
    return doc;
}

static void
trace_page(const struct weft__api_config *cfg,
           const struct weft__api_request *req,
           const char *trace_ref,
           const char *run_id,
           struct weft__api_reply *reply)
{
    struct weft_trace *trace = NULL;
    const char *view = req->arg(req->ctx, "view");
    size_t offset = 0;
    size_t limit = 0;

    if (!arg_size(req, "offset", 0, SIZE_MAX / 2, &offset) ||
        !arg_size(req, "limit", SPANS_DEFAULT, SPANS_MAX, &limit)) {
        reply_error(reply, 400, "offset, limit: expected numbers (limit at most 100000)");
        return;
    }
    bool is_waterfall = view != NULL && strcmp(view, "waterfall") == 0;
    bool is_rows = view != NULL && strcmp(view, "rows") == 0;
    struct trace_want want = {.is_outline = is_waterfall,
                              .is_rows = is_rows,
                              .is_page = !is_waterfall && !is_rows,
                              .offset = offset,
                              .limit = limit < SPANS_FULL_MAX ? limit : SPANS_FULL_MAX};

    if (view != NULL && !is_waterfall && !is_rows) {
        reply_error(reply, 400, "view: expected waterfall or rows");
        return;
    }
    trace = load_trace_as(cfg, trace_ref, &want, reply);
    if (trace != NULL && is_rows) {
        char hex[WEFT_TRACE_ID_HEX_LEN + 1];
        weft_hex_encode(weft_trace_span(trace, 0)->trace_id, WEFT_TRACE_ID_SIZE, hex);
        weft__api_rows_reply(
            reply,
            add_origin(json_pack("{s:s, s:s, s:s?, s:I}", "schema", "weft.rows/v1", "trace_id", hex,
                                 "run_id", run_id, "span_count", (json_int_t)want.view->n),
                       trace, run_id),
            want.view, offset, limit);
    } else if (trace != NULL && is_waterfall) {
        reply_doc(reply, 200,
                  add_origin(waterfall_doc(trace, run_id, offset, limit), trace, run_id));
    } else if (trace != NULL) {
        reply_doc(reply, 200, add_origin(page_doc(trace, &want, run_id), trace, run_id));
    }
    weft_trace_free(trace);
    weft__rows_view_release(cfg->rows_cache, want.view);
}

/* weft.why/v1 of @p run; its stored LLM exchanges are read for the last model answer (a run
 * whose spans kept no content), and a state store that cannot give them only leaves that out. */
static void
run_why(const struct weft__api_config *cfg,
        const struct weft_run_details *run,
        struct weft__api_reply *reply)
{
    struct weft_trace *trace =
        run->info.trace_id != NULL ? load_trace(cfg, run->info.trace_id, reply) : NULL;
    struct weft_run_exchange *ex = NULL;
    size_t ex_count = 0;

    if (trace == NULL && run->info.trace_id != NULL && reply->status != 404) {
        return; /* answered: the span store failed */
    }
    if (trace == NULL && run->info.trace_id != NULL) {
        /* Its trace is not stored (tail sampling dropped it, no store exporter): the steps'
         * stored errors and the budget still say why. */
        free(reply->body);
        reply->body = NULL;
        reply->len = 0;
    }
    if (trace != NULL) {
        (void)weft_run_exchanges_load(cfg->state_path, run->info.run_id, &ex, &ex_count);
    }
    reply_doc(reply, 200, weft__doc_why(run, trace, ex, ex_count));
    weft_run_exchanges_free(ex, ex_count);
    weft_trace_free(trace);
}

static const char *
str_attr(const struct weft_span_data *s, const char *key)
{
    const struct weft_value *v = weft_span_data_attr(s, key);

    return v != NULL && v->type == WEFT_VALUE_STRING ? v->u.str : NULL;
}

/* Count loop span @p s (`loop STEP`, flow.c) into @p out, flow_loops()'s array. */
static void
flow_loop_add(json_t *out, const struct weft_span_data *s)
{
    const char *to = str_attr(s, "weft.loop.loop_back_to");
    const char *outcome = str_attr(s, "weft.loop.outcome");
    const char *step = s->name != NULL && strncmp(s->name, "loop ", 5) == 0 ? s->name + 5 : NULL;
    const char *item = NULL;
    char back[512];
    json_t *row = NULL;
    size_t k = 0;
    json_t *each = NULL;

    if (step == NULL || to == NULL || outcome == NULL) {
        return;
    }
    /* A fan-out item's step (per_chunk[1].audit) returns to a node of the same item. */
    for (const char *p = strstr(step, "]."); p != NULL; p = strstr(p + 1, "].")) {
        item = p + 2;
    }
    snprintf(back, sizeof(back), "%.*s%s", item != NULL ? (int)(item - step) : 0, step, to);
    json_array_foreach(out, k, each)
    {
        if (strcmp(json_string_value(json_object_get(each, "step")), step) == 0 &&
            strcmp(json_string_value(json_object_get(each, "back_to")), back) == 0) {
            row = each;
            break;
        }
    }
    if (row == NULL) {
        row = json_pack("{s:s, s:s, s:i, s:s}", "step", step, "back_to", back, "taken", 0,
                        "outcome", outcome);
        if (json_array_append_new(out, row) != 0) {
            return;
        }
    }
    json_object_set_new(row, "outcome", json_string(outcome));
    if (strcmp(outcome, "loop_back") == 0) {
        json_object_set_new(row, "taken",
                            json_integer(json_integer_value(json_object_get(row, "taken")) + 1));
    }
}

/* A flow run's loops as they ran, for the plan graph: one {"step", "back_to", "taken",
 * "outcome"} per looping step, from its trace's `loop STEP` spans (flow.c): "back_to" is the step
 * it returns to (its loop_back_to node in the step's own fan-out item), "taken" how many times it
 * looped back, "outcome" the last loop span's (loop_back, break, max_iterations, stuck). Only
 * runs that counted a flow loop or a stuck loop read their trace, and then its outline (no
 * attributes) and the loop spans alone (at most FLOW_LOOP_SPANS); an empty array otherwise, and
 * when the trace is not in the span store. New reference. */
static json_t *
flow_loops(const struct weft__api_config *cfg,
           const struct weft_run_details *run,
           char *error,
           size_t error_len)
{
    json_t *out = json_array();
    json_t *loops = run->info.loops != NULL ? json_loads(run->info.loops, 0, NULL) : NULL;
    bool has_loops = json_integer_value(json_object_get(loops, "flow")) > 0 ||
                     json_integer_value(json_object_get(loops, "stuck")) > 0;
    struct weft_store *store = NULL;
    struct weft_trace *outline = NULL;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    weft_err err = WEFT_ENOTFOUND;

    json_decref(loops);
    if (out == NULL || !has_loops || run->info.trace_id == NULL) {
        return out;
    }
    err = weft__api_store_get(cfg, &store);
    if (err == WEFT_OK) {
        err = weft_store_resolve(store, run->info.trace_id, id);
    }
    if (err == WEFT_OK) {
        err = weft_store_load_outline(store, id, &outline);
    }
    for (size_t i = 0, n = 0;
         err == WEFT_OK && i < weft_trace_span_count(outline) && n < FLOW_LOOP_SPANS; i++) {
        const struct weft_span_data *s = weft_trace_span(outline, i);
        struct weft_trace *one = NULL;
        char span[WEFT_SPAN_ID_SIZE * 2 + 1];
        if (s->name == NULL || strncmp(s->name, "loop ", 5) != 0) {
            continue;
        }
        n++;
        weft_hex_encode(s->span_id, WEFT_SPAN_ID_SIZE, span);
        if (weft_store_load_span(store, id, span, &one) == WEFT_OK &&
            weft_trace_span_count(one) == 1) {
            flow_loop_add(out, weft_trace_span(one, 0));
        }
        weft_trace_free(one);
    }
    weft_trace_free(outline);
    weft__api_store_put(cfg, store);
    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        /* The store failed: not "no loops". The page says the back-edges could not be read. */
        snprintf(error, error_len, "span store: %s", weft_strerror(err));
    }
    return out;
}

static void
run_show(const struct weft__api_config *cfg,
         const char *ref,
         const char *rest,
         const struct weft__api_request *req,
         struct weft__api_reply *reply)
{
    struct weft_run_details *run = load_run(cfg, ref, reply);

    if (run == NULL) {
        return;
    }
    if (rest[0] == '\0') {
        json_t *doc = weft__doc_run_details(run);
        char error[160] = "";
        if (doc != NULL) {
            json_object_set_new(doc, "flow_loops", flow_loops(cfg, run, error, sizeof(error)));
        }
        if (doc != NULL && error[0] != '\0') {
            json_object_set_new(doc, "flow_loops_error", json_string(error));
        }
        reply_doc(reply, 200, doc);
    } else if (strcmp(rest, "trace") == 0 && run->info.trace_id == NULL) {
        reply_error(reply, 404, "the run was not traced");
    } else if (strcmp(rest, "trace") == 0) {
        trace_page(cfg, req, run->info.trace_id, run->info.run_id, reply);
    } else if (strcmp(rest, "why") == 0) {
        run_why(cfg, run, reply);
    } else {
        reply_error(reply, 404, "no such route: try /api/v1/runs/REF, .../trace or .../why");
    }
    weft_run_details_free(run);
}

struct weft_trace *
weft__api_load_trace(const struct weft__api_config *cfg,
                     const char *ref,
                     struct weft__api_reply *reply)
{
    return load_trace(cfg, ref, reply);
}

size_t
weft__api_step_index(const struct weft_run_details *run, const char *id)
{
    for (size_t i = 0; i < run->step_count; i++) {
        if (run->steps[i].id != NULL && strcmp(run->steps[i].id, id) == 0) {
            return i;
        }
    }
    return SIZE_MAX;
}

/* ---------------------------------------------------------------------------------------- */
/* Collaboration                                                                             */

static void
count_pair(json_t *matrix, const char *from, const char *to)
{
    json_t *row = json_object_get(matrix, from);

    if (row == NULL) {
        row = json_object();
        json_object_set_new(matrix, from, row);
    }
    json_object_set_new(row, to, json_integer(json_integer_value(json_object_get(row, to)) + 1));
}

/* One run into the totals: a hand-off is a step whose work another agent's step fed (its
 * dependency, or the step that requested it); agent outcomes by final step status. */
static void
collab_add(const struct weft_run_details *run, json_t *matrix, json_t *agents, json_t *loops)
{
    json_t *run_loops = run->info.loops != NULL ? json_loads(run->info.loops, 0, NULL) : NULL;
    const char *kind = NULL;
    json_t *n = NULL;

    for (size_t i = 0; i < run->step_count; i++) {
        const struct weft_run_step *s = &run->steps[i];
        const char *status = weft__doc_step_status(run, i);
        json_t *a = json_object_get(agents, s->agent != NULL ? s->agent : "?");
        const char *p = s->depends_on != NULL ? s->depends_on : "";
        if (a == NULL) {
            a = json_pack("{s:i, s:i, s:i}", "steps", 0, "completed", 0, "failed", 0);
            json_object_set_new(agents, s->agent != NULL ? s->agent : "?", a);
        }
        json_object_set_new(a, "steps",
                            json_integer(json_integer_value(json_object_get(a, "steps")) + 1));
        if (status != NULL && (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0)) {
            json_object_set_new(a, status,
                                json_integer(json_integer_value(json_object_get(a, status)) + 1));
        }
        while (*p != '\0') {
            size_t len = strcspn(p, ",");
            char id[128];
            size_t j = SIZE_MAX;
            snprintf(id, sizeof(id), "%.*s", (int)(len < 127 ? len : 127), p);
            j = weft__api_step_index(run, id);
            if (j != SIZE_MAX && run->steps[j].agent != NULL && s->agent != NULL) {
                count_pair(matrix, run->steps[j].agent, s->agent);
            }
            p += len;
            p += *p == ',';
        }
        if (s->requested_by != NULL) {
            size_t j = weft__api_step_index(run, s->requested_by);
            if (j != SIZE_MAX && run->steps[j].agent != NULL && s->agent != NULL) {
                count_pair(matrix, run->steps[j].agent, s->agent);
            }
        }
    }
    json_object_foreach(run_loops, kind, n)
    {
        json_object_set_new(
            loops, kind,
            json_integer(json_integer_value(json_object_get(loops, kind)) + json_integer_value(n)));
    }
    json_decref(run_loops);
}

static void
collab(const struct weft__api_config *cfg,
       const struct weft__api_request *req,
       struct weft__api_reply *reply)
{
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    size_t limit = 0;
    size_t read = 0;
    json_t *matrix = json_object();
    json_t *agents = json_object();
    json_t *loops = json_object();
    weft_err err = WEFT_OK;

    if (!arg_size(req, "limit", COLLAB_DEFAULT, RUNS_MAX, &limit) || limit == 0) {
        reply_error(reply, 400, "limit: expected a number from 1 to 10000");
    } else if ((err = weft_runs_list(cfg->state_path, limit, &runs, &count)) != WEFT_OK &&
               err != WEFT_ENOTFOUND) {
        reply_weft_error(reply, err, "state store");
    } else {
        for (size_t i = 0; i < count; i++) {
            struct weft_run_details *run = NULL;
            if (weft_run_load(cfg->state_path, runs[i].run_id, &run) == WEFT_OK) {
                collab_add(run, matrix, agents, loops);
                read++;
            }
            weft_run_details_free(run);
        }
        reply_doc(reply, 200,
                  json_pack("{s:s, s:I, s:O, s:O, s:O}", "schema", "weft.collab/v1", "runs",
                            (json_int_t)read, "handoffs", matrix, "agents", agents, "loops",
                            loops));
    }
    weft_run_infos_free(runs, count);
    json_decref(matrix);
    json_decref(agents);
    json_decref(loops);
}

/* ---------------------------------------------------------------------------------------- */

void
weft__api_get(const struct weft__api_config *cfg,
              const struct weft__api_request *req,
              struct weft__api_reply *reply)
{
    const char *p = req->path + strlen("/api/v1/");
    char ref[128];
    size_t len = 0;

    memset(reply, 0, sizeof(*reply));
    if (strncmp(req->path, "/api/v1/", 8) != 0) {
        reply_error(reply, 404, "no such route");
    } else if (strcmp(p, "runs") == 0) {
        runs_list(cfg, req, reply);
    } else if (strcmp(p, "traces") == 0) {
        weft__api_traces_list(cfg, req, reply);
    } else if (strcmp(p, "compare") == 0) {
        weft__api_compare(cfg, req, reply);
    } else if (strcmp(p, "metrics") == 0) {
        collab(cfg, req, reply);
    } else if (weft__api_eval_get(cfg, req, p, reply)) {
        return;
    } else if (strncmp(p, "runs/", 5) == 0 || strncmp(p, "traces/", 7) == 0) {
        bool is_run = p[0] == 'r';
        p += is_run ? 5 : 7;
        len = strcspn(p, "/");
        if (len == 0 || len >= sizeof(ref)) {
            reply_error(reply, 400, "expected a run or trace reference");
            return;
        }
        snprintf(ref, sizeof(ref), "%.*s", (int)len, p);
        p += len;
        if (is_run) {
            run_show(cfg, ref, p[0] == '/' ? p + 1 : p, req, reply);
        } else if (strncmp(p, "/spans/", 7) == 0 && p[7] != '\0' && strchr(p + 7, '/') == NULL) {
            span_show(cfg, ref, p + 7, reply);
        } else if (p[0] != '\0') {
            reply_error(reply, 404, "no such route: try /api/v1/traces/ID[/spans/SPAN_ID]");
        } else {
            trace_page(cfg, req, ref, NULL, reply);
        }
    } else {
        reply_error(reply, 404,
                    "no such route: try /api/v1/runs, /api/v1/runs/REF, /api/v1/traces, "
                    "/api/v1/traces/ID, /api/v1/events, /api/v1/compare, /api/v1/metrics, "
                    "/api/v1/datasets or /api/v1/experiments");
    }
}

/* For the route files of their own (api_int.h). */
void
weft__api_reply_json(struct weft__api_reply *reply, unsigned status, json_t *doc)
{
    reply_doc(reply, status, doc);
}

void
weft__api_reply_error(struct weft__api_reply *reply, unsigned status, const char *message)
{
    reply_error(reply, status, message);
}

void
weft__api_reply_weft_error(struct weft__api_reply *reply, weft_err err, const char *what)
{
    reply_weft_error(reply, err, what);
}

bool
weft__api_arg_size(
    const struct weft__api_request *req, const char *name, size_t def, size_t max, size_t *out)
{
    return arg_size(req, name, def, max, out);
}
