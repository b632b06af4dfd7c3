/* store/read.c - the read API of include/weft/store.h behind `weft trace`, `weft run show`,
 * `weft serve` and `weft mcp serve`, for every backend: open a store (a SQLite file or a
 * PostgreSQL URL: store.h), list traces from the summaries, resolve a trace reference, and load
 * one trace's spans in tree order (tree.c, which the renderer in report/ also uses for spans
 * that did not come from a store), or one page of them: a page read orders the trace from
 * compact outline nodes and reads only the page's rows whole, so `weft serve`'s paged trace view
 * costs memory for the page, not for the trace; or the rows a waterfall draws, from the same
 * nodes (weft_store_load_rows()).
 *
 * The backends answer a few primitive reads (struct weft__store_reader_ops) row by row; this
 * file turns rows into spans, so both backends give the same traces. A corrupt JSON column is
 * logged and read as empty rather than failing the whole trace.
 */
#include "store.h"

#include "base/log.h"
#include "base/mem.h"
#include "tracing/ids.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <weft/store.h>

#define MAX_LOADED_SPANS (1u << 20) /* a loaded trace never holds more spans than this */

/* ------------------------------------------------------------------------------------------ */
/* Read API                                                                                    */

struct weft_store {
    const struct weft__store_reader_ops *ops;
    void *impl;
    char *path;      /* as given; a URL's password is never printed from it (see label) */
    char label[512]; /* the location for messages: a URL with its password replaced */
    char errmsg[512];
};

struct weft_trace {
    struct weft__arena arena;
    struct weft_span_data **spans; /* tree order */
    size_t *depth;
    size_t count;
};

static void set_errmsg(struct weft_store *store, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_errmsg(struct weft_store *store, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(store->errmsg, sizeof(store->errmsg), fmt, ap);
    va_end(ap);
}

static weft_err
db_failure(struct weft_store *store, const char *what)
{
    set_errmsg(store, "%s: %s", what, store->ops->errmsg(store->impl));
    WEFT_LOG(WEFT_LOG_DEBUG, "store %s: %s", store->label, store->errmsg);
    return WEFT_EIO;
}

/* Called with a backend's failure or a callback's verdict: a database failure gets the
 * backend's message. */
static weft_err
read_failed(struct weft_store *store, weft_err err, const char *what)
{
    return err == WEFT_EIO && store->errmsg[0] == '\0' ? db_failure(store, what) : err;
}

/* Row accessors shortened. */
static const char *
col_text(const struct weft__store_row *row, int col, size_t *len)
{
    return row->text(row, col, len);
}

static int64_t
col_int(const struct weft__store_row *row, int col)
{
    return row->integer(row, col);
}

weft_err
weft_store_open(const char *db_path, struct weft_store **out)
{
    struct weft_store *store = NULL;
    char default_path[4096];
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (db_path == NULL) {
        err = weft_store_default_path(default_path, sizeof(default_path));
        if (err != WEFT_OK) {
            return err;
        }
        db_path = default_path;
    }
    store = weft__calloc(1, sizeof(*store));
    if (store == NULL) {
        return WEFT_ENOMEM;
    }
    store->path = weft__strdup(db_path);
    if (store->path == NULL) {
        weft__free(store);
        return WEFT_ENOMEM;
    }
    weft__store_redact_url(db_path, store->label, sizeof(store->label));
    err = weft__store_is_pg_url(db_path)
              ? weft__store_pg_reader_open(db_path, &store->ops, &store->impl)
              : weft__store_sqlite_reader_open(db_path, &store->ops, &store->impl);
    if (err != WEFT_OK) {
        weft__free(store->path);
        weft__free(store);
        return err;
    }
    *out = store;
    return WEFT_OK;
}

void
weft_store_close(struct weft_store *store)
{
    if (store == NULL) {
        return;
    }
    if (store->ops != NULL) {
        store->ops->close(store->impl);
    }
    weft__free(store->path);
    weft__free(store);
}

bool
weft__store_is_reusable(struct weft_store *store)
{
    if (store == NULL || store->ops == NULL || !store->ops->is_reusable(store->impl)) {
        return false;
    }
    store->errmsg[0] = '\0';
    return true;
}

const char *
weft_store_path(const struct weft_store *store)
{
    return store != NULL ? store->label : "";
}

const char *
weft_store_errmsg(const struct weft_store *store)
{
    return store != NULL ? store->errmsg : "no store";
}

static char *
column_strdup(const struct weft__store_row *row, int col)
{
    size_t len = 0;
    const char *text = col_text(row, col, &len);

    return text != NULL ? weft__strndup(text, len) : NULL;
}

static uint64_t
column_ns(const struct weft__store_row *row, int col)
{
    int64_t v = col_int(row, col);

    return v < 0 ? 0 : (uint64_t)v;
}

/* One trace summary row (LIST columns) into @p sum. @return WEFT_OK or WEFT_ENOMEM (what was
 * copied stays in @p sum, for weft_trace_summaries_free()). */
static weft_err
row_to_summary(const struct weft__store_row *row, struct weft_trace_summary *sum)
{
    const char *id = col_text(row, WEFT__LIST_TRACE_ID, NULL);
    int64_t spans = col_int(row, WEFT__LIST_SPANS);
    int64_t errors = col_int(row, WEFT__LIST_ERRORS);

    memset(sum, 0, sizeof(*sum));
    snprintf(sum->trace_id, sizeof(sum->trace_id), "%s", id != NULL ? id : "");
    sum->start_ns = column_ns(row, WEFT__LIST_START);
    sum->end_ns = column_ns(row, WEFT__LIST_END);
    sum->span_count = spans < 0 ? 0 : (size_t)spans;
    sum->error_count = errors < 0 ? 0 : (size_t)errors;
    sum->has_root = col_int(row, WEFT__LIST_HAS_ROOT) != 0;
    sum->root_name = col_text(row, WEFT__LIST_ROOT_NAME, NULL) != NULL
                         ? column_strdup(row, WEFT__LIST_ROOT_NAME)
                         : weft__strdup("");
    if (col_text(row, WEFT__LIST_SERVICE, NULL) != NULL) {
        sum->service_name = column_strdup(row, WEFT__LIST_SERVICE);
        if (sum->service_name == NULL) {
            return WEFT_ENOMEM;
        }
    }
    return sum->root_name == NULL ? WEFT_ENOMEM : WEFT_OK;
}

struct summaries {
    struct weft_trace_summary *list;
    size_t n;
    size_t cap;
    bool has_run_id; /* find()'s rows: the RUN_ID column too */
};

static weft_err
add_summary(const struct weft__store_row *row, void *user)
{
    struct summaries *acc = user;

    if (acc->n == acc->cap) {
        size_t new_cap = acc->cap == 0 ? 32 : acc->cap * 2;
        struct weft_trace_summary *grown = weft__realloc(acc->list, new_cap * sizeof(*grown));

        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        acc->list = grown;
        acc->cap = new_cap;
    }
    /* counted first: a failed row's strings are freed with the list */
    struct weft_trace_summary *sum = &acc->list[acc->n++];
    weft_err err = row_to_summary(row, sum);
    if (err == WEFT_OK && acc->has_run_id && col_text(row, WEFT__LIST_RUN_ID, NULL) != NULL) {
        sum->run_id = column_strdup(row, WEFT__LIST_RUN_ID);
        err = sum->run_id == NULL ? WEFT_ENOMEM : WEFT_OK;
    }
    return err;
}

weft_err
weft_store_list_traces(struct weft_store *store,
                       size_t limit,
                       struct weft_trace_summary **out,
                       size_t *count)
{
    struct summaries acc = {NULL, 0, 0, false};
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (store == NULL || out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (limit == 0) {
        limit = 20;
    }
    if (limit > 100000) {
        limit = 100000;
    }
    err = store->ops->list(store->impl, limit, add_summary, &acc);
    if (err != WEFT_OK) {
        weft_trace_summaries_free(acc.list, acc.n);
        return read_failed(store, err, "cannot list traces");
    }
    if (acc.n == 0) {
        weft__free(acc.list);
        acc.list = NULL;
    }
    *out = acc.list;
    *count = acc.n;
    return WEFT_OK;
}

weft_err
weft_store_find_traces(struct weft_store *store,
                       const struct weft_trace_query *query,
                       struct weft_trace_summary **out,
                       size_t *count)
{
    struct summaries acc = {NULL, 0, 0, true};
    struct weft_trace_query q = {.limit = 50};
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (query != NULL) {
        q = *query;
    }
    if (store == NULL || out == NULL || count == NULL || q.status < 0 || q.status > 2) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    q.limit = q.limit == 0 ? 50 : q.limit > 10000 ? 10000 : q.limit;
    /* Keyset paging compares (start, id) with the row's; an empty id would compare as the
     * lowest, so it means no cursor, as NULL does. */
    if (q.after_id != NULL && q.after_id[0] == '\0') {
        q.after_id = NULL;
    }
    err = store->ops->find(store->impl, &q, add_summary, &acc);
    if (err != WEFT_OK) {
        weft_trace_summaries_free(acc.list, acc.n);
        return read_failed(store, err, "cannot list traces");
    }
    if (acc.n == 0) {
        weft__free(acc.list);
        acc.list = NULL;
    }
    *out = acc.list;
    *count = acc.n;
    return WEFT_OK;
}

void
weft_trace_summaries_free(struct weft_trace_summary *summaries, size_t count)
{
    if (summaries == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        weft__free((char *)(uintptr_t)summaries[i].root_name);
        weft__free((char *)(uintptr_t)summaries[i].service_name);
        weft__free((char *)(uintptr_t)summaries[i].run_id);
    }
    weft__free(summaries);
}

/* Lowercase @p ref into @p out if it is 1..32 hex characters. */
static bool
normalise_hex(const char *ref, char out[WEFT_TRACE_ID_HEX_LEN + 1])
{
    size_t len = strlen(ref);

    if (len == 0 || len > WEFT_TRACE_ID_HEX_LEN) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = ref[i];

        if (c >= 'A' && c <= 'F') {
            c = (char)(c - 'A' + 'a');
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
        out[i] = c;
    }
    out[len] = '\0';
    return true;
}

struct found_ids {
    char id[3][WEFT_TRACE_ID_HEX_LEN + 1];
    size_t n;
};

static weft_err
add_id(const struct weft__store_row *row, void *user)
{
    struct found_ids *f = user;
    const char *id = col_text(row, 0, NULL);

    if (f->n < 3) {
        snprintf(f->id[f->n++], sizeof(f->id[0]), "%s", id != NULL ? id : "");
    }
    return WEFT_OK;
}

weft_err
weft_store_resolve(struct weft_store *store, const char *ref, char out[WEFT_TRACE_ID_HEX_LEN + 1])
{
    char prefix[WEFT_TRACE_ID_HEX_LEN + 1];
    char upper[WEFT_TRACE_ID_HEX_LEN + 2];
    struct found_ids found;
    bool is_last = false;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        out[0] = '\0';
    }
    if (store == NULL || ref == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    found.n = 0;
    is_last = strcmp(ref, "last") == 0;
    if (!is_last && !normalise_hex(ref, prefix)) {
        set_errmsg(store, "'%.64s' is not a trace id: expected 'last' or up to 32 hex digits", ref);
        return WEFT_EINVAL;
    }
    /* Every id that starts with the prefix sorts in [prefix, prefix + "g"): the next character
     * of such an id is a hex digit, and all of them sort below 'g'. This keeps the lookup on
     * the summaries' primary key. */
    snprintf(upper, sizeof(upper), "%sg", is_last ? "" : prefix);
    err = store->ops->ids(store->impl, is_last ? NULL : prefix, upper, is_last ? 1 : 3, add_id,
                          &found);
    if (err != WEFT_OK) {
        return read_failed(store, err, "cannot look the trace up");
    }
    if (found.n == 0) {
        if (is_last) {
            set_errmsg(store, "the store has no traces yet");
        } else {
            set_errmsg(store, "no trace matches '%s'", prefix);
        }
        return WEFT_ENOTFOUND;
    }
    if (found.n > 1) {
        set_errmsg(store, "'%s' is ambiguous: it matches %s, %s%s; give more digits", prefix,
                   found.id[0], found.id[1], found.n > 2 ? " and more" : "");
        return WEFT_EINVAL;
    }
    memcpy(out, found.id[0], sizeof(found.id[0]));
    return WEFT_OK;
}

size_t
weft_trace_span_count(const struct weft_trace *trace)
{
    return trace != NULL ? trace->count : 0;
}

const struct weft_span_data *
weft_trace_span(const struct weft_trace *trace, size_t index)
{
    return trace != NULL && index < trace->count ? trace->spans[index] : NULL;
}

size_t
weft_trace_span_depth(const struct weft_trace *trace, size_t index)
{
    return trace != NULL && index < trace->count ? trace->depth[index] : 0;
}

const struct weft_span_data *const *
weft__trace_spans(const struct weft_trace *trace)
{
    return trace != NULL ? (const struct weft_span_data *const *)trace->spans : NULL;
}

void
weft_trace_free(struct weft_trace *trace)
{
    if (trace == NULL) {
        return;
    }
    weft__arena_cleanup(&trace->arena);
    weft__free(trace);
}

/* What a load reads: a whole trace, its outline (weft_store_load_outline()), or one span. */
struct load_req {
    bool is_outline;
    const char *span_hex; /* one span; NULL: every span */
};

/* The outline keeps this attribute: the explorer marks circuit-breaker decisions with it. */
#define OUTLINE_ATTR "weft.decision.layer"

static const char *
arena_column(struct weft__arena *arena, const struct weft__store_row *row, int col, bool *is_oom)
{
    size_t len = 0;
    const char *text = col_text(row, col, &len);
    char *copy = NULL;

    if (text == NULL) {
        return NULL;
    }
    copy = weft__arena_strndup(arena, text, len);
    if (copy == NULL) {
        *is_oom = true;
    }
    return copy;
}

/* Parse a JSON column; a corrupt column is logged and read as empty rather than failing the
 * whole trace: a damaged attribute blob should not hide the span tree. */
static json_t *
json_column(struct weft_store *store, const struct weft__store_row *row, int col, const char *what)
{
    size_t len = 0;
    const char *text = col_text(row, col, &len);
    json_error_t error;
    json_t *j = NULL;

    if (text == NULL) {
        return NULL;
    }
    j = json_loadb(text, len, JSON_ALLOW_NUL, &error);
    if (j == NULL) {
        const char *id = col_text(row, WEFT__COL_SPAN_ID, NULL);
        WEFT_LOG(WEFT_LOG_WARN, "store %s: span %s: unreadable %s column: %s", store->label,
                 id != NULL ? id : "?", what, error.text);
    }
    return j;
}

/* Only OUTLINE_ATTR of an attributes column, parsed only when its text names it (most spans'
 * do not: their attributes are never parsed). */
static json_t *
outline_attrs(struct weft_store *store, const struct weft__store_row *row)
{
    const char *text = col_text(row, WEFT__COL_ATTRS, NULL);
    json_t *all = NULL;
    json_t *kept = NULL;
    json_t *v = NULL;

    if (text == NULL || strstr(text, "\"" OUTLINE_ATTR "\"") == NULL) {
        return NULL;
    }
    all = json_column(store, row, WEFT__COL_ATTRS, "attributes");
    v = json_object_get(all, OUTLINE_ATTR);
    kept = v != NULL ? json_pack("{s:O}", OUTLINE_ATTR, v) : NULL;
    json_decref(all);
    return kept;
}

/* The backend's payload lookup as a payload source (store/payload.h), remembering whether
 * the database failed (the read then fails) rather than a record being missing. */
struct payload_reader {
    struct weft_store *store;
    bool is_db_failed;
};

static weft_err
payload_get(void *user,
            const char *const *hashes,
            size_t count,
            weft__payload_each_fn each,
            void *each_user)
{
    struct payload_reader *pr = user;
    weft_err err = pr->store->ops->payloads(pr->store->impl, hashes, count, each, each_user);

    pr->is_db_failed = pr->is_db_failed || err == WEFT_EIO;
    return err;
}

/* Replace the payload references of @p attrs by their texts (payload_batch.c). */
static weft_err
resolve_payloads(struct weft_store *store, json_t *attrs)
{
    struct payload_reader pr = {store, false};
    struct weft__payload_source src = {payload_get, &pr};
    weft_err err = WEFT_OK;

    if (attrs == NULL) {
        return WEFT_OK;
    }
    err = weft__store_resolve_payloads(attrs, &src, &pr.is_db_failed, store->label);
    return err == WEFT_EIO ? db_failure(store, "cannot read a payload") : err;
}

/* The attributes, events and links columns of the row into @p span (the outline: events, and
 * of the attributes OUTLINE_ATTR only). */
static weft_err
read_json_columns(struct weft_store *store,
                  struct weft__arena *arena,
                  const struct weft__store_row *row,
                  bool is_outline,
                  struct weft_span_data *span)
{
    json_t *attrs = is_outline ? outline_attrs(store, row)
                               : json_column(store, row, WEFT__COL_ATTRS, "attributes");
    json_t *events = json_column(store, row, WEFT__COL_EVENTS, "events");
    json_t *links = is_outline ? NULL : json_column(store, row, WEFT__COL_LINKS, "links");
    weft_err err = resolve_payloads(store, attrs);

    if (err == WEFT_OK) {
        err = weft__store_read_attrs(arena, attrs, &span->attrs, &span->attr_count,
                                     &span->dropped_attrs);
    }
    if (err == WEFT_OK) {
        err = weft__store_read_events(arena, events, span);
    }
    if (err == WEFT_OK) {
        err = weft__store_read_links(arena, links, span);
    }
    json_decref(attrs);
    json_decref(events);
    json_decref(links);
    return err;
}

/* The resource a stored span reads with: the resource column of a span that starts a trace's
 * part (resource.c), else service.name alone, when stored. */
static weft_err
row_resource(struct weft__arena *arena,
             const struct weft__store_row *row,
             struct weft_resource *resource)
{
    bool is_oom = false;
    size_t len = 0;
    const char *text = col_text(row, WEFT__COL_RESOURCE, &len);
    const char *service = NULL;
    struct weft_attr *attr = NULL;
    weft_err err = text != NULL ? weft__store_read_resource(arena, text, len, resource) : WEFT_EIO;

    if (err != WEFT_EIO) {
        return err; /* read whole, or out of memory; a damaged column reads as service.name */
    }
    service = arena_column(arena, row, WEFT__COL_SERVICE, &is_oom);
    if (service == NULL) {
        return is_oom ? WEFT_ENOMEM : WEFT_OK;
    }
    attr = weft__arena_alloc(arena, sizeof(*attr));
    if (attr == NULL) {
        return WEFT_ENOMEM;
    }
    attr->key = "service.name";
    attr->value.type = WEFT_VALUE_STRING;
    attr->value.u.str = service;
    attr->value.len = strlen(service);
    resource->attrs = attr;
    resource->attr_count = 1;
    return WEFT_OK;
}

/* One span row into @p arena; *out NULL (and WEFT_OK) for a row with a malformed span id,
 * which is skipped. */
static weft_err
row_to_span(struct weft_store *store,
            struct weft__arena *arena,
            const struct weft__store_row *row,
            const uint8_t *trace_id,
            bool is_outline,
            struct weft_span_data **out)
{
    struct weft_span_data *span = weft__arena_alloc(arena, sizeof(*span));
    struct weft_resource *resource = weft__arena_alloc(arena, sizeof(*resource));
    struct weft_scope *scope = weft__arena_alloc(arena, sizeof(*scope));
    size_t span_len = 0;
    size_t parent_len = 0;
    const char *span_hex = col_text(row, WEFT__COL_SPAN_ID, &span_len);
    const char *parent_hex = col_text(row, WEFT__COL_PARENT, &parent_len);
    bool is_oom = false;
    weft_err err = WEFT_OK;

    *out = NULL;
    if (span == NULL || resource == NULL || scope == NULL) {
        return WEFT_ENOMEM;
    }
    if (span_hex == NULL ||
        weft__hex_decode_id(span_hex, span_len, span->span_id, WEFT_SPAN_ID_SIZE) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: skipping a span with a malformed id", store->label);
        return WEFT_OK;
    }
    memcpy(span->trace_id, trace_id, WEFT_TRACE_ID_SIZE);
    if (parent_hex != NULL && weft__hex_decode_id(parent_hex, parent_len, span->parent_span_id,
                                                  WEFT_SPAN_ID_SIZE) == WEFT_OK) {
        span->has_parent = true;
        span->parent_is_remote = col_int(row, WEFT__COL_PARENT_REMOTE) != 0;
    }
    span->trace_flags = (uint8_t)col_int(row, WEFT__COL_FLAGS);
    span->trace_state = arena_column(arena, row, WEFT__COL_TRACE_STATE, &is_oom);
    span->name = arena_column(arena, row, WEFT__COL_NAME, &is_oom);
    if (span->name == NULL && !is_oom) {
        span->name = "";
    }
    span->kind = (weft_span_kind)col_int(row, WEFT__COL_KIND);
    span->start_time_ns = column_ns(row, WEFT__COL_START);
    span->end_time_ns = column_ns(row, WEFT__COL_END);
    span->status_code = (weft_status_code)col_int(row, WEFT__COL_STATUS);
    span->status_message = arena_column(arena, row, WEFT__COL_STATUS_MESSAGE, &is_oom);
    span->dropped_attrs = (uint32_t)col_int(row, WEFT__COL_DROPPED_ATTRS);
    span->dropped_events = (uint32_t)col_int(row, WEFT__COL_DROPPED_EVENTS);
    span->dropped_links = (uint32_t)col_int(row, WEFT__COL_DROPPED_LINKS);
    scope->name = arena_column(arena, row, WEFT__COL_SCOPE_NAME, &is_oom);
    scope->version = arena_column(arena, row, WEFT__COL_SCOPE_VERSION, &is_oom);
    if (scope->name == NULL && !is_oom) {
        scope->name = "";
    }
    span->scope = scope;
    span->resource = resource;
    if (is_oom || row_resource(arena, row, resource) != WEFT_OK) {
        return WEFT_ENOMEM;
    }
    err = read_json_columns(store, arena, row, is_outline, span);
    if (err == WEFT_OK) {
        *out = span;
    }
    return err;
}

/* Loaded spans by (start, span id). */
static int
by_start(const void *a, const void *b)
{
    const struct weft_span_data *x = *(const struct weft_span_data *const *)a;
    const struct weft_span_data *y = *(const struct weft_span_data *const *)b;

    if (x->start_time_ns != y->start_time_ns) {
        return x->start_time_ns < y->start_time_ns ? -1 : 1;
    }
    return memcmp(x->span_id, y->span_id, WEFT_SPAN_ID_SIZE);
}

/* What read_spans() collects, row by row. */
struct span_rows {
    struct weft_store *store;
    struct weft_trace *trace;
    const uint8_t *id;
    bool is_outline;
    struct weft_span_data **rows;
    size_t count;
    size_t cap;
};

static weft_err
add_span_row(const struct weft__store_row *row, void *user)
{
    struct span_rows *acc = user;
    struct weft_span_data *span = NULL;
    weft_err err = WEFT_OK;

    if (acc->count == acc->cap) {
        size_t new_cap = acc->cap == 0 ? 64 : acc->cap * 2;
        struct weft_span_data **grown = weft__realloc(acc->rows, new_cap * sizeof(*grown));

        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        acc->rows = grown;
        acc->cap = new_cap;
    }
    err = row_to_span(acc->store, &acc->trace->arena, row, acc->id, acc->is_outline, &span);
    if (err == WEFT_OK && span != NULL) {
        acc->rows[acc->count++] = span;
    }
    return err;
}

/* Read the stored spans of trace @p hex (@p id in bytes) into @p trace's arena, by (start,
 * span id); *rows receives a new array of *count pointers into it (the caller frees it). The
 * backends keep no index in time order (each index costs every span written an insert): the
 * order is made here, and a trace past the cap loads the spans the backend found first. */
static weft_err
read_spans(struct weft_store *store,
           struct weft_trace *trace,
           const char *hex,
           const uint8_t *id,
           const struct load_req *req,
           struct weft_span_data ***rows,
           size_t *count)
{
    struct span_rows acc = {store, trace, id, req->is_outline, NULL, 0, 0};
    weft_err err = store->ops->spans(store->impl, hex, req->span_hex, MAX_LOADED_SPANS,
                                     req->is_outline, add_span_row, &acc);

    *rows = acc.rows;
    *count = acc.count;
    if (err != WEFT_OK) {
        return read_failed(store, err, "cannot load the trace");
    }
    if (*count > 1) {
        qsort(*rows, *count, sizeof(**rows), by_start);
    }
    return WEFT_OK;
}

/* Put the @p n spans of @p rows into @p trace in tree order. */
static weft_err
arrange(struct weft_trace *trace, struct weft_span_data **rows, size_t n)
{
    size_t *order = weft__malloc(n * sizeof(*order));
    weft_err err = WEFT_OK;

    trace->spans = weft__arena_alloc(&trace->arena, n * sizeof(*trace->spans));
    trace->depth = weft__arena_alloc(&trace->arena, n * sizeof(*trace->depth));
    if (trace->spans == NULL || trace->depth == NULL || order == NULL) {
        weft__free(order);
        return WEFT_ENOMEM;
    }
    err =
        weft__trace_tree((const struct weft_span_data *const *)rows, n, order, trace->depth, NULL);
    if (err == WEFT_OK) {
        for (size_t i = 0; i < n; i++) {
            trace->spans[i] = rows[order[i]];
        }
        trace->count = n;
    }
    weft__free(order);
    return err;
}

/* A full trace id into lowercase @p hex and @p id; false (with the errmsg set) if malformed. */
static bool
parse_trace_id(struct weft_store *store,
               const char *trace_id,
               char hex[WEFT_TRACE_ID_HEX_LEN + 1],
               uint8_t id[WEFT_TRACE_ID_SIZE])
{
    if (strlen(trace_id) != WEFT_TRACE_ID_HEX_LEN || !normalise_hex(trace_id, hex) ||
        weft__hex_decode_id(hex, WEFT_TRACE_ID_HEX_LEN, id, WEFT_TRACE_ID_SIZE) != WEFT_OK) {
        set_errmsg(store, "'%.64s' is not a 32-digit hex trace id", trace_id);
        return false;
    }
    return true;
}

static weft_err
load(struct weft_store *store,
     const char *trace_id,
     const struct load_req *req,
     struct weft_trace **out)
{
    struct weft_trace *trace = NULL;
    struct weft_span_data **rows = NULL;
    char hex[WEFT_TRACE_ID_HEX_LEN + 1];
    uint8_t id[WEFT_TRACE_ID_SIZE];
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (store == NULL || trace_id == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (!parse_trace_id(store, trace_id, hex, id)) {
        return WEFT_EINVAL;
    }
    trace = weft__calloc(1, sizeof(*trace));
    if (trace == NULL) {
        return WEFT_ENOMEM;
    }
    weft__arena_init(&trace->arena);
    err = read_spans(store, trace, hex, id, req, &rows, &n);
    if (err == WEFT_OK && n == 0) {
        set_errmsg(store,
                   req->span_hex != NULL ? "no span %s stored in trace %s"
                                         : "no spans stored for trace %s%s",
                   req->span_hex != NULL ? req->span_hex : hex, req->span_hex != NULL ? hex : "");
        err = WEFT_ENOTFOUND;
    }
    if (err == WEFT_OK) {
        err = arrange(trace, rows, n);
    }
    weft__free(rows);
    if (err != WEFT_OK) {
        weft_trace_free(trace);
        return err;
    }
    *out = trace;
    return WEFT_OK;
}

weft_err
weft_store_load_trace(struct weft_store *store, const char *trace_id, struct weft_trace **out)
{
    struct load_req req = {false, NULL};

    return load(store, trace_id, &req, out);
}

weft_err
weft_store_load_outline(struct weft_store *store, const char *trace_id, struct weft_trace **out)
{
    struct load_req req = {true, NULL};

    return load(store, trace_id, &req, out);
}

weft_err
weft_store_load_span(struct weft_store *store,
                     const char *trace_id,
                     const char *span_id,
                     struct weft_trace **out)
{
    char hex[2 * WEFT_SPAN_ID_SIZE + 1];
    uint8_t id[WEFT_SPAN_ID_SIZE];
    struct load_req req = {false, hex};

    if (out != NULL) {
        *out = NULL;
    }
    if (span_id == NULL || strlen(span_id) != 2 * WEFT_SPAN_ID_SIZE ||
        weft__hex_decode_id(span_id, 2 * WEFT_SPAN_ID_SIZE, id, sizeof(id)) != WEFT_OK) {
        if (store != NULL) {
            set_errmsg(store, "'%.64s' is not a 16-digit hex span id",
                       span_id != NULL ? span_id : "");
        }
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < sizeof(hex) - 1; i++) {
        hex[i] = (char)tolower((unsigned char)span_id[i]);
    }
    hex[sizeof(hex) - 1] = '\0';
    return load(store, trace_id, &req, out);
}

/* ------------------------------------------------------------------------------------------ */
/* Page read                                                                                   */

/* Of two nodes that start together, the lower span id first (weft__store_sort()'s tie, @p ctx
 * the nodes): read_spans()'s order, so that tree order breaks ties alike. */
static int
node_tie_by_id(const void *ctx, size_t a, size_t b)
{
    const struct weft__store_node *nodes = ctx;

    return memcmp(nodes[a].id, nodes[b].id, WEFT_SPAN_ID_SIZE);
}

/* @p n nodes by (start, span id), into a new array that replaces *nodes. */
static weft_err
sort_nodes(struct weft__store_node **nodes, size_t n)
{
    uint64_t *key = weft__malloc(n * sizeof(*key));
    size_t *order = weft__malloc(n * sizeof(*order));
    struct weft__store_node *sorted = weft__malloc(n * sizeof(*sorted));
    weft_err err = key != NULL && order != NULL && sorted != NULL ? WEFT_OK : WEFT_ENOMEM;

    for (size_t i = 0; err == WEFT_OK && i < n; i++) {
        key[i] = (*nodes)[i].start;
    }
    if (err == WEFT_OK) {
        err = weft__store_sort(key, n, node_tie_by_id, *nodes, order);
    }
    if (err == WEFT_OK) {
        for (size_t i = 0; i < n; i++) {
            sorted[i] = (*nodes)[order[i]];
        }
        weft__free(*nodes);
        *nodes = sorted;
        sorted = NULL;
    }
    weft__free(key);
    weft__free(order);
    weft__free(sorted);
    return err;
}

/* What read_nodes() collects, row by row. */
struct node_rows {
    struct weft__arena *names;
    bool with_marks;
    struct weft__store_node *nodes;
    size_t count;
    size_t cap;
};

/* One node row into the next node, its name into the names arena. A malformed span id is
 * skipped, as row_to_span() skips it. */
static weft_err
add_node_row(const struct weft__store_row *row, void *user)
{
    struct node_rows *acc = user;
    struct weft__store_node *node = NULL;
    size_t span_len = 0;
    size_t parent_len = 0;
    size_t name_len = 0;
    const char *span_hex = col_text(row, WEFT__NODE_SPAN_ID, &span_len);
    const char *parent_hex = col_text(row, WEFT__NODE_PARENT, &parent_len);
    const char *name = col_text(row, WEFT__NODE_NAME, &name_len);

    if (acc->count == acc->cap) {
        size_t new_cap = acc->cap == 0 ? 256 : acc->cap * 2;
        struct weft__store_node *grown = weft__realloc(acc->nodes, new_cap * sizeof(*grown));

        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        acc->nodes = grown;
        acc->cap = new_cap;
    }
    node = &acc->nodes[acc->count];
    memset(node, 0, sizeof(*node));
    if (span_hex == NULL ||
        weft__hex_decode_id(span_hex, span_len, node->id, WEFT_SPAN_ID_SIZE) != WEFT_OK) {
        return WEFT_OK;
    }
    if (parent_hex != NULL &&
        weft__hex_decode_id(parent_hex, parent_len, node->parent, WEFT_SPAN_ID_SIZE) == WEFT_OK) {
        node->has_parent = true;
        node->is_parent_remote = col_int(row, WEFT__NODE_PARENT_REMOTE) != 0;
    }
    node->name = "";
    if (name != NULL) {
        node->name = weft__arena_strndup(acc->names, name, name_len);
        if (node->name == NULL) {
            return WEFT_ENOMEM;
        }
    }
    node->start = column_ns(row, WEFT__NODE_START);
    node->end = column_ns(row, WEFT__NODE_END);
    node->is_error = col_int(row, WEFT__NODE_STATUS) == WEFT_STATUS_ERROR;
    node->is_ok = col_int(row, WEFT__NODE_STATUS) == WEFT_STATUS_OK;
    node->is_marker = acc->with_marks && col_int(row, WEFT__NODE_MARK) != 0;
    acc->count++;
    return WEFT_OK;
}

/* Every span of trace @p hex as page nodes in read_spans()'s order; *nodes is a new array of
 * *count (the caller frees it), names in @p names; @p with_marks: with their markers. */
static weft_err
read_nodes(struct weft_store *store,
           const char *hex,
           bool with_marks,
           struct weft__arena *names,
           struct weft__store_node **nodes,
           size_t *count)
{
    struct node_rows acc = {names, with_marks, NULL, 0, 0};
    weft_err err =
        store->ops->nodes(store->impl, hex, MAX_LOADED_SPANS, with_marks, add_node_row, &acc);

    *nodes = acc.nodes;
    *count = acc.count;
    if (err != WEFT_OK) {
        return read_failed(store, err, "cannot load the trace");
    }
    return *count > 1 ? sort_nodes(nodes, *count) : WEFT_OK;
}

/* A page's span ids, sorted, with their places on the page: rows come back in any order. */
struct page_slot {
    uint8_t id[WEFT_SPAN_ID_SIZE];
    size_t place;
};

static int
slot_by_id(const void *a, const void *b)
{
    return memcmp(((const struct page_slot *)a)->id, ((const struct page_slot *)b)->id,
                  WEFT_SPAN_ID_SIZE);
}

struct page_rows {
    struct weft_store *store;
    struct weft_trace *trace;
    const uint8_t *id;
    const struct page_slot *slots; /* by id */
    size_t m;
    size_t filled;
};

static weft_err
add_page_row(const struct weft__store_row *row, void *user)
{
    struct page_rows *acc = user;
    struct weft_span_data *span = NULL;
    const struct page_slot *slot = NULL;
    weft_err err = row_to_span(acc->store, &acc->trace->arena, row, acc->id, false, &span);

    if (err != WEFT_OK || span == NULL) {
        return err;
    }
    slot = bsearch(span->span_id, acc->slots, acc->m, sizeof(*acc->slots), slot_by_id);
    if (slot != NULL && acc->trace->spans[slot->place] == NULL) {
        acc->trace->spans[slot->place] = span;
        acc->filled++;
    }
    return WEFT_OK;
}

/* Read the @p m spans @p slots (sorted by id) whole into @p trace, each at its place. */
static weft_err
read_page_rows(struct weft_store *store,
               struct weft_trace *trace,
               const char *hex,
               const uint8_t *id,
               const struct page_slot *slots,
               size_t m)
{
    struct page_rows acc = {store, trace, id, slots, m, 0};
    char(*ids)[2 * WEFT_SPAN_ID_SIZE + 1] = m > 0 ? weft__malloc(m * sizeof(*ids)) : NULL;
    const char **refs = m > 0 ? weft__malloc(m * sizeof(*refs)) : NULL;
    weft_err err = WEFT_OK;

    if (m == 0) {
        return WEFT_OK;
    }
    if (ids == NULL || refs == NULL) {
        weft__free(ids);
        weft__free(refs);
        return WEFT_ENOMEM;
    }
    for (size_t k = 0; k < m; k++) {
        weft_hex_encode(slots[k].id, WEFT_SPAN_ID_SIZE, ids[k]);
        refs[k] = ids[k];
    }
    err = store->ops->spans_by_id(store->impl, hex, refs, m, add_page_row, &acc);
    weft__free(ids);
    weft__free(refs);
    if (err != WEFT_OK) {
        return read_failed(store, err, "cannot load the trace");
    }
    if (acc.filled != m) {
        /* The outline was read in this snapshot: a missing row is a database fault. */
        set_errmsg(store, "%zu span(s) of the page vanished while read", m - acc.filled);
        return WEFT_EIO;
    }
    trace->count = m;
    return WEFT_OK;
}

weft_err
weft_store_load_page(struct weft_store *store,
                     const char *trace_id,
                     size_t offset,
                     size_t limit,
                     struct weft_trace **out,
                     size_t *span_count,
                     size_t *error_count)
{
    struct weft__arena names;
    struct weft_trace *trace = NULL;
    struct weft__store_node *nodes = NULL;
    struct page_slot *slots = NULL;
    size_t *order = NULL;
    size_t *depth = NULL;
    char hex[WEFT_TRACE_ID_HEX_LEN + 1];
    uint8_t id[WEFT_TRACE_ID_SIZE];
    size_t n = 0;
    size_t m = 0;
    size_t errors = 0;
    bool is_in_txn = false;
    weft_err err = WEFT_OK;

    weft__arena_init(&names);
    if (out != NULL) {
        *out = NULL;
    }
    if (span_count != NULL) {
        *span_count = 0;
    }
    if (error_count != NULL) {
        *error_count = 0;
    }
    if (store == NULL || trace_id == NULL || out == NULL || span_count == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (!parse_trace_id(store, trace_id, hex, id)) {
        return WEFT_EINVAL;
    }
    /* The outline and the page's rows are read in one snapshot, so the page is cut from the
     * same spans that were ordered, whatever the writers commit meanwhile. */
    err = store->ops->begin(store->impl);
    if (err != WEFT_OK) {
        return read_failed(store, err, "cannot load the trace");
    }
    is_in_txn = true;
    err = read_nodes(store, hex, false, &names, &nodes, &n);
    if (err == WEFT_OK && n == 0) {
        set_errmsg(store, "no spans stored for trace %s", hex);
        err = WEFT_ENOTFOUND;
    }
    if (err != WEFT_OK) {
        goto out;
    }
    order = weft__malloc(n * sizeof(*order));
    depth = weft__malloc(n * sizeof(*depth));
    if (order == NULL || depth == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    err = weft__store_node_tree(nodes, n, order, depth);
    if (err != WEFT_OK) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        errors += nodes[i].is_error;
    }
    m = offset < n ? n - offset : 0;
    m = m < limit ? m : limit;
    trace = weft__calloc(1, sizeof(*trace));
    if (trace == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    weft__arena_init(&trace->arena);
    if (m > 0) {
        slots = weft__malloc(m * sizeof(*slots));
        trace->spans = weft__arena_alloc(&trace->arena, m * sizeof(*trace->spans));
        trace->depth = weft__arena_alloc(&trace->arena, m * sizeof(*trace->depth));
        if (slots == NULL || trace->spans == NULL || trace->depth == NULL) {
            err = WEFT_ENOMEM;
            goto out;
        }
        for (size_t k = 0; k < m; k++) {
            memcpy(slots[k].id, nodes[order[offset + k]].id, WEFT_SPAN_ID_SIZE);
            slots[k].place = k;
            trace->spans[k] = NULL;
            trace->depth[k] = depth[offset + k];
        }
        qsort(slots, m, sizeof(*slots), slot_by_id);
    }
    /* The outline has done its work: give it back before the page's rows are parsed, so the
     * peak is the larger of the two rather than their sum. */
    weft__free(nodes);
    nodes = NULL;
    weft__free(order);
    order = NULL;
    weft__free(depth);
    depth = NULL;
    weft__arena_cleanup(&names);
    err = read_page_rows(store, trace, hex, id, slots, m);
out:
    if (is_in_txn) {
        store->ops->end(store->impl); /* a read snapshot: ending it cannot lose data */
    }
    weft__free(slots);
    weft__free(nodes);
    weft__free(order);
    weft__free(depth);
    weft__arena_cleanup(&names);
    if (err != WEFT_OK) {
        weft_trace_free(trace);
        return err;
    }
    *out = trace;
    *span_count = n;
    if (error_count != NULL) {
        *error_count = errors;
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Rows                                                                                        */

struct weft_trace_rows {
    struct weft__arena names; /* the rows' names */
    struct weft_trace_row *rows;
    size_t count;
};

/* @p n nodes into @p rows in tree order, each with its parent's row (the last row seen one
 * level up: tree order is depth-first, so that is the parent). */
static weft_err
order_rows(struct weft_trace_rows *rows, const struct weft__store_node *nodes, size_t n)
{
    size_t *order = weft__malloc(n * sizeof(*order));
    size_t *depth = weft__malloc(n * sizeof(*depth));
    size_t *last_at = weft__malloc(n * sizeof(*last_at)); /* the latest row at each depth */
    weft_err err = WEFT_OK;

    rows->rows = weft__malloc(n * sizeof(*rows->rows));
    if (order == NULL || depth == NULL || last_at == NULL || rows->rows == NULL) {
        err = WEFT_ENOMEM;
    }
    if (err == WEFT_OK) {
        err = weft__store_node_tree(nodes, n, order, depth);
    }
    for (size_t i = 0; err == WEFT_OK && i < n; i++) {
        const struct weft__store_node *node = &nodes[order[i]];
        struct weft_trace_row *row = &rows->rows[i];

        memcpy(row->span_id, node->id, WEFT_SPAN_ID_SIZE);
        row->name = node->name;
        row->start_time_ns = node->start;
        row->end_time_ns = node->end;
        row->depth = depth[i];
        row->parent = depth[i] > 0 ? last_at[depth[i] - 1] : SIZE_MAX;
        last_at[depth[i]] = i;
        row->status_code = node->is_error ? WEFT_STATUS_ERROR
                           : node->is_ok  ? WEFT_STATUS_OK
                                          : WEFT_STATUS_UNSET;
        row->is_marker = node->is_marker;
    }
    rows->count = err == WEFT_OK ? n : 0;
    weft__free(order);
    weft__free(depth);
    weft__free(last_at);
    return err;
}

weft_err
weft_store_load_rows(struct weft_store *store, const char *trace_id, struct weft_trace_rows **out)
{
    struct weft_trace_rows *rows = NULL;
    struct weft__store_node *nodes = NULL;
    char hex[WEFT_TRACE_ID_HEX_LEN + 1];
    uint8_t id[WEFT_TRACE_ID_SIZE];
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (store == NULL || trace_id == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (!parse_trace_id(store, trace_id, hex, id)) {
        return WEFT_EINVAL;
    }
    rows = weft__calloc(1, sizeof(*rows));
    if (rows == NULL) {
        return WEFT_ENOMEM;
    }
    weft__arena_init(&rows->names);
    err = read_nodes(store, hex, true, &rows->names, &nodes, &n);
    if (err == WEFT_OK && n == 0) {
        set_errmsg(store, "no spans stored for trace %s", hex);
        err = WEFT_ENOTFOUND;
    }
    if (err == WEFT_OK) {
        err = order_rows(rows, nodes, n);
    }
    weft__free(nodes);
    if (err != WEFT_OK) {
        weft_trace_rows_free(rows);
        return err;
    }
    *out = rows;
    return WEFT_OK;
}

size_t
weft_trace_rows_count(const struct weft_trace_rows *rows)
{
    return rows != NULL ? rows->count : 0;
}

const struct weft_trace_row *
weft_trace_rows_get(const struct weft_trace_rows *rows)
{
    return rows != NULL && rows->count > 0 ? rows->rows : NULL;
}

void
weft_trace_rows_free(struct weft_trace_rows *rows)
{
    if (rows == NULL) {
        return;
    }
    weft__arena_cleanup(&rows->names);
    weft__free(rows->rows);
    weft__free(rows);
}

/* ------------------------------------------------------------------------------------------ */
/* Stamps                                                                                      */

static weft_err
read_stamp(const struct weft__store_row *row, void *user)
{
    struct weft_trace_stamp *st = user;

    st->span_count = (size_t)col_int(row, 1);
    st->error_count = (size_t)col_int(row, 2);
    st->start_ns = (uint64_t)col_int(row, 3);
    st->end_ns = (uint64_t)col_int(row, 4);
    st->is_found = true;
    return WEFT_OK;
}

weft_err
weft_store_trace_stamp(struct weft_store *store, const char *trace_id, struct weft_trace_stamp *out)
{
    char hex[WEFT_TRACE_ID_HEX_LEN + 1];
    char upper[WEFT_TRACE_ID_HEX_LEN + 2];
    uint8_t id[WEFT_TRACE_ID_SIZE];
    weft_err err = WEFT_OK;

    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (store == NULL || trace_id == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (!parse_trace_id(store, trace_id, hex, id)) {
        return WEFT_EINVAL;
    }
    /* [id, id + "0"): the id alone, on the summaries' primary key. */
    snprintf(upper, sizeof(upper), "%s0", hex);
    err = store->ops->ids(store->impl, hex, upper, 1, read_stamp, out);
    if (err != WEFT_OK) {
        return read_failed(store, err, "cannot look the trace up");
    }
    if (!out->is_found) {
        set_errmsg(store, "no trace %s", hex);
        return WEFT_ENOTFOUND;
    }
    return WEFT_OK;
}
