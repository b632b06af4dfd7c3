/* exporters/store_read.c - the read API of include/weft/store.h behind `weft trace`, `weft run
 * show` and `weft serve`: open a store read-only, list traces from the summary table, resolve
 * a trace reference, and load one trace's spans in tree order (weft__trace_tree, which the
 * renderer in report/ also uses for spans that did not come from a store), or one page of them:
 * a page read orders the trace from compact outline nodes and reads only the page's rows whole,
 * so `weft serve`'s paged trace view costs memory for the page, not for the trace.
 *
 * Readers never block the exporter: the database runs in WAL mode and is opened read-only,
 * and each batch is one transaction, so a reader sees it whole or not at all. A corrupt JSON
 * column is logged and read as empty rather than failing the whole trace.
 */
#include "store.h"

#include "base/log.h"
#include "base/mem.h"
#include "tracing/ids.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <weft/store.h>

#define MAX_LOADED_SPANS (1u << 20) /* a loaded trace never holds more spans than this */

/* ------------------------------------------------------------------------------------------ */
/* Read API                                                                                    */

struct weft_store {
    sqlite3 *db;
    char *path;
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
    set_errmsg(store, "%s: %s", what, sqlite3_errmsg(store->db));
    WEFT_LOG(WEFT_LOG_DEBUG, "store %s: %s", store->path, store->errmsg);
    return WEFT_EIO;
}

weft_err
weft_store_open(const char *db_path, struct weft_store **out)
{
    struct weft_store *store = NULL;
    char default_path[4096];
    struct stat st;
    const char *why = NULL;
    int version = 0;
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
    if (stat(db_path, &st) != 0) {
        return errno == ENOENT || errno == ENOTDIR ? WEFT_ENOTFOUND : WEFT_EIO;
    }
    store = weft__calloc(1, sizeof(*store));
    if (store == NULL) {
        return WEFT_ENOMEM;
    }
    store->path = weft__strdup(db_path);
    if (store->path == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    if (sqlite3_open_v2(db_path, &store->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, db_path, store->db, "cannot open");
        err = WEFT_EIO;
        goto fail;
    }
    sqlite3_extended_result_codes(store->db, 1);
    sqlite3_busy_timeout(store->db, STORE_BUSY_TIMEOUT_MS);
    if (weft__store_check_identity(store->db, false, &version, &why) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: %s", db_path, why);
        err = WEFT_EIO;
        goto fail;
    }
    *out = store;
    return WEFT_OK;
fail:
    weft_store_close(store);
    return err;
}

void
weft_store_close(struct weft_store *store)
{
    if (store == NULL) {
        return;
    }
    sqlite3_close_v2(store->db);
    weft__free(store->path);
    weft__free(store);
}

const char *
weft_store_path(const struct weft_store *store)
{
    return store != NULL ? store->path : "";
}

const char *
weft_store_errmsg(const struct weft_store *store)
{
    return store != NULL ? store->errmsg : "no store";
}

static char *
column_strdup(sqlite3_stmt *stmt, int col)
{
    const unsigned char *text = sqlite3_column_text(stmt, col);

    return text != NULL ? weft__strndup((const char *)text, (size_t)sqlite3_column_bytes(stmt, col))
                        : NULL;
}

static uint64_t
column_ns(sqlite3_stmt *stmt, int col)
{
    sqlite3_int64 v = sqlite3_column_int64(stmt, col);

    return v < 0 ? 0 : (uint64_t)v;
}

static const char list_sql[] =
    "SELECT trace_id, start_ns, end_ns, span_count, error_count, root_name, service_name,"
    " has_root FROM traces ORDER BY start_ns DESC, trace_id LIMIT ?1";

/* One row of the traces table (list_sql's columns) into @p sum. @return WEFT_OK or
 * WEFT_ENOMEM (what was copied stays in @p sum, for weft_trace_summaries_free()). */
static weft_err
row_to_summary(sqlite3_stmt *stmt, struct weft_trace_summary *sum)
{
    const unsigned char *id = sqlite3_column_text(stmt, 0);
    sqlite3_int64 spans = sqlite3_column_int64(stmt, 3);
    sqlite3_int64 errors = sqlite3_column_int64(stmt, 4);

    memset(sum, 0, sizeof(*sum));
    snprintf(sum->trace_id, sizeof(sum->trace_id), "%s", id != NULL ? (const char *)id : "");
    sum->start_ns = column_ns(stmt, 1);
    sum->end_ns = column_ns(stmt, 2);
    sum->span_count = spans < 0 ? 0 : (size_t)spans;
    sum->error_count = errors < 0 ? 0 : (size_t)errors;
    sum->has_root = sqlite3_column_int(stmt, 7) != 0;
    sum->root_name =
        sqlite3_column_type(stmt, 5) != SQLITE_NULL ? column_strdup(stmt, 5) : weft__strdup("");
    if (sqlite3_column_type(stmt, 6) != SQLITE_NULL) {
        sum->service_name = column_strdup(stmt, 6);
        if (sum->service_name == NULL) {
            return WEFT_ENOMEM;
        }
    }
    return sum->root_name == NULL ? WEFT_ENOMEM : WEFT_OK;
}

weft_err
weft_store_list_traces(struct weft_store *store,
                       size_t limit,
                       struct weft_trace_summary **out,
                       size_t *count)
{
    sqlite3_stmt *stmt = NULL;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;
    size_t cap = 0;
    int rc = 0;
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
    if (sqlite3_prepare_v2(store->db, list_sql, -1, &stmt, NULL) != SQLITE_OK) {
        return db_failure(store, "cannot list traces");
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)limit);
    for (;;) {
        struct weft_trace_summary *sum = NULL;

        rc = sqlite3_step(stmt);
        if (rc != SQLITE_ROW) {
            break;
        }
        if (n == cap) {
            size_t new_cap = cap == 0 ? 32 : cap * 2;
            struct weft_trace_summary *grown = weft__realloc(list, new_cap * sizeof(*grown));

            if (grown == NULL) {
                err = WEFT_ENOMEM;
                goto fail;
            }
            list = grown;
            cap = new_cap;
        }
        sum = &list[n++]; /* counted first: a failed row's strings are freed with the list */
        err = row_to_summary(stmt, sum);
        if (err != WEFT_OK) {
            goto fail;
        }
    }
    if (rc != SQLITE_DONE) {
        err = db_failure(store, "cannot list traces");
        goto fail;
    }
    sqlite3_finalize(stmt);
    if (n == 0) {
        weft__free(list);
        list = NULL;
    }
    *out = list;
    *count = n;
    return WEFT_OK;
fail:
    sqlite3_finalize(stmt);
    weft_trace_summaries_free(list, n);
    return err;
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

weft_err
weft_store_resolve(struct weft_store *store, const char *ref, char out[WEFT_TRACE_ID_HEX_LEN + 1])
{
    sqlite3_stmt *stmt = NULL;
    char prefix[WEFT_TRACE_ID_HEX_LEN + 1];
    char upper[WEFT_TRACE_ID_HEX_LEN + 2];
    char found[3][WEFT_TRACE_ID_HEX_LEN + 1];
    size_t matches = 0;
    int rc = 0;
    bool is_last = false;

    if (out != NULL) {
        out[0] = '\0';
    }
    if (store == NULL || ref == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    is_last = strcmp(ref, "last") == 0;
    if (!is_last && !normalise_hex(ref, prefix)) {
        set_errmsg(store, "'%.64s' is not a trace id: expected 'last' or up to 32 hex digits", ref);
        return WEFT_EINVAL;
    }
    if (is_last) {
        rc = sqlite3_prepare_v2(store->db,
                                "SELECT trace_id FROM traces ORDER BY start_ns DESC, trace_id"
                                " LIMIT 1",
                                -1, &stmt, NULL);
    } else {
        /* Every id that starts with the prefix sorts in [prefix, prefix + "g"): the next
         * character of such an id is a hex digit, and all of them sort below 'g'. This keeps
         * the lookup on the primary key index. */
        snprintf(upper, sizeof(upper), "%sg", prefix);
        rc = sqlite3_prepare_v2(store->db,
                                "SELECT trace_id FROM traces WHERE trace_id >= ?1 AND trace_id < ?2"
                                " ORDER BY trace_id LIMIT 3",
                                -1, &stmt, NULL);
        sqlite3_bind_text(stmt, 1, prefix, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 2, upper, -1, SQLITE_STATIC);
    }
    if (rc != SQLITE_OK) {
        return db_failure(store, "cannot look the trace up");
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW && matches < 3) {
        const unsigned char *id = sqlite3_column_text(stmt, 0);

        snprintf(found[matches++], sizeof(found[0]), "%s", id != NULL ? (const char *)id : "");
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        weft_err err = db_failure(store, "cannot look the trace up");

        sqlite3_finalize(stmt);
        return err;
    }
    sqlite3_finalize(stmt);
    if (matches == 0) {
        if (is_last) {
            set_errmsg(store, "the store has no traces yet");
        } else {
            set_errmsg(store, "no trace matches '%s'", prefix);
        }
        return WEFT_ENOTFOUND;
    }
    if (matches > 1) {
        set_errmsg(store, "'%s' is ambiguous: it matches %s, %s%s; give more digits", prefix,
                   found[0], found[1], matches > 2 ? " and more" : "");
        return WEFT_EINVAL;
    }
    memcpy(out, found[0], sizeof(found[0]));
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

enum {
    COL_SPAN_ID,
    COL_PARENT,
    COL_PARENT_REMOTE,
    COL_TRACE_STATE,
    COL_FLAGS,
    COL_NAME,
    COL_KIND,
    COL_START,
    COL_END,
    COL_STATUS,
    COL_STATUS_MESSAGE,
    COL_ATTRS,
    COL_EVENTS,
    COL_LINKS,
    COL_DROPPED_ATTRS,
    COL_DROPPED_EVENTS,
    COL_DROPPED_LINKS,
    COL_SERVICE,
    COL_SCOPE_NAME,
    COL_SCOPE_VERSION
};

#define LOAD_COLUMNS                                                                              \
    "SELECT span_id, parent_span_id, parent_is_remote, trace_state, flags, name, kind, start_ns," \
    " end_ns, status_code, status_message, attributes, events, links, dropped_attributes_count,"  \
    " dropped_events_count, dropped_links_count, service_name, scope_name, scope_version"         \
    " FROM spans"

/* In the primary key's order (span id): no index keeps a trace's spans in time order, since
 * each index costs every span written a b-tree insert (a quarter of the writer's time on
 * ingest); read_spans() sorts them by (start, span id) instead. A trace past the cap thus
 * loads the spans with the lowest ids rather than the earliest. */
static const char load_sql[] = LOAD_COLUMNS " WHERE trace_id = ?1 LIMIT ?2";
static const char load_span_sql[] = LOAD_COLUMNS " WHERE trace_id = ?1 AND span_id = ?3 LIMIT ?2";

/* What a load reads: a whole trace, its outline (weft_store_load_outline()), or one span. */
struct load_req {
    bool is_outline;
    const char *span_hex; /* one span; NULL: every span */
};

/* The outline keeps this attribute: the explorer marks circuit-breaker decisions with it. */
#define OUTLINE_ATTR "weft.decision.layer"

static const char *
arena_column(struct weft__arena *arena, sqlite3_stmt *stmt, int col, bool *is_oom)
{
    const unsigned char *text = sqlite3_column_text(stmt, col);
    char *copy = NULL;

    if (text == NULL) {
        return NULL;
    }
    copy = weft__arena_strndup(arena, (const char *)text, (size_t)sqlite3_column_bytes(stmt, col));
    if (copy == NULL) {
        *is_oom = true;
    }
    return copy;
}

/* Parse a JSON column; a corrupt column is logged and read as empty rather than failing the
 * whole trace: a damaged attribute blob should not hide the span tree. */
static json_t *
json_column(struct weft_store *store, sqlite3_stmt *stmt, int col, const char *what)
{
    const char *text = (const char *)sqlite3_column_text(stmt, col);
    json_error_t error;
    json_t *j = NULL;

    if (text == NULL) {
        return NULL;
    }
    j = json_loadb(text, (size_t)sqlite3_column_bytes(stmt, col), JSON_ALLOW_NUL, &error);
    if (j == NULL) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: span %s: unreadable %s column: %s", store->path,
                 sqlite3_column_text(stmt, COL_SPAN_ID), what, error.text);
    }
    return j;
}

/* Only OUTLINE_ATTR of an attributes column, parsed only when its text names it (most spans'
 * do not: their attributes are never parsed). */
static json_t *
outline_attrs(struct weft_store *store, sqlite3_stmt *stmt)
{
    const char *text = (const char *)sqlite3_column_text(stmt, COL_ATTRS);
    json_t *all = NULL;
    json_t *kept = NULL;
    json_t *v = NULL;

    if (text == NULL || strstr(text, "\"" OUTLINE_ATTR "\"") == NULL) {
        return NULL;
    }
    all = json_column(store, stmt, COL_ATTRS, "attributes");
    v = json_object_get(all, OUTLINE_ATTR);
    kept = v != NULL ? json_pack("{s:O}", OUTLINE_ATTR, v) : NULL;
    json_decref(all);
    return kept;
}

/* The attributes, events and links columns of the row into @p span (the outline: events, and
 * of the attributes OUTLINE_ATTR only). */
static weft_err
read_json_columns(struct weft_store *store,
                  struct weft__arena *arena,
                  sqlite3_stmt *stmt,
                  bool is_outline,
                  struct weft_span_data *span)
{
    json_t *attrs =
        is_outline ? outline_attrs(store, stmt) : json_column(store, stmt, COL_ATTRS, "attributes");
    json_t *events = json_column(store, stmt, COL_EVENTS, "events");
    json_t *links = is_outline ? NULL : json_column(store, stmt, COL_LINKS, "links");
    weft_err err =
        weft__store_read_attrs(arena, attrs, &span->attrs, &span->attr_count, &span->dropped_attrs);

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

static weft_err
row_to_span(struct weft_store *store,
            struct weft__arena *arena,
            sqlite3_stmt *stmt,
            const uint8_t *trace_id,
            bool is_outline,
            struct weft_span_data **out)
{
    struct weft_span_data *span = weft__arena_alloc(arena, sizeof(*span));
    struct weft_resource *resource = weft__arena_alloc(arena, sizeof(*resource));
    struct weft_scope *scope = weft__arena_alloc(arena, sizeof(*scope));
    const char *span_hex = (const char *)sqlite3_column_text(stmt, COL_SPAN_ID);
    const char *parent_hex = (const char *)sqlite3_column_text(stmt, COL_PARENT);
    bool is_oom = false;
    weft_err err = WEFT_OK;

    *out = NULL;
    if (span == NULL || resource == NULL || scope == NULL) {
        return WEFT_ENOMEM;
    }
    if (span_hex == NULL || weft__hex_decode_id(span_hex, strlen(span_hex), span->span_id,
                                                WEFT_SPAN_ID_SIZE) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: skipping a span with a malformed id", store->path);
        return WEFT_OK;
    }
    memcpy(span->trace_id, trace_id, WEFT_TRACE_ID_SIZE);
    if (parent_hex != NULL &&
        weft__hex_decode_id(parent_hex, strlen(parent_hex), span->parent_span_id,
                            WEFT_SPAN_ID_SIZE) == WEFT_OK) {
        span->has_parent = true;
        span->parent_is_remote = sqlite3_column_int(stmt, COL_PARENT_REMOTE) != 0;
    }
    span->trace_flags = (uint8_t)sqlite3_column_int(stmt, COL_FLAGS);
    span->trace_state = arena_column(arena, stmt, COL_TRACE_STATE, &is_oom);
    span->name = arena_column(arena, stmt, COL_NAME, &is_oom);
    if (span->name == NULL && !is_oom) {
        span->name = "";
    }
    span->kind = (weft_span_kind)sqlite3_column_int(stmt, COL_KIND);
    span->start_time_ns = column_ns(stmt, COL_START);
    span->end_time_ns = column_ns(stmt, COL_END);
    span->status_code = (weft_status_code)sqlite3_column_int(stmt, COL_STATUS);
    span->status_message = arena_column(arena, stmt, COL_STATUS_MESSAGE, &is_oom);
    span->dropped_attrs = (uint32_t)sqlite3_column_int64(stmt, COL_DROPPED_ATTRS);
    span->dropped_events = (uint32_t)sqlite3_column_int64(stmt, COL_DROPPED_EVENTS);
    span->dropped_links = (uint32_t)sqlite3_column_int64(stmt, COL_DROPPED_LINKS);
    scope->name = arena_column(arena, stmt, COL_SCOPE_NAME, &is_oom);
    scope->version = arena_column(arena, stmt, COL_SCOPE_VERSION, &is_oom);
    if (scope->name == NULL && !is_oom) {
        scope->name = "";
    }
    span->scope = scope;
    span->resource = resource;
    if (sqlite3_column_type(stmt, COL_SERVICE) != SQLITE_NULL) {
        struct weft_attr *attr = weft__arena_alloc(arena, sizeof(*attr));
        const char *service = arena_column(arena, stmt, COL_SERVICE, &is_oom);

        if (attr != NULL && service != NULL) {
            attr->key = "service.name";
            attr->value.type = WEFT_VALUE_STRING;
            attr->value.u.str = service;
            attr->value.len = strlen(service);
            resource->attrs = attr;
            resource->attr_count = 1;
        } else {
            is_oom = true;
        }
    }
    if (is_oom) {
        return WEFT_ENOMEM;
    }
    err = read_json_columns(store, arena, stmt, is_outline, span);
    if (err == WEFT_OK) {
        *out = span;
    }
    return err;
}

/* Loaded spans by (start, span id): the order the time index gave. */
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

/* Read the stored spans of trace @p hex (@p id in bytes) into @p trace's arena, by (start,
 * span id); *rows receives a new array of *count pointers into it (the caller frees it). */
static weft_err
read_spans(struct weft_store *store,
           struct weft_trace *trace,
           const char *hex,
           const uint8_t *id,
           const struct load_req *req,
           struct weft_span_data ***rows,
           size_t *count)
{
    sqlite3_stmt *stmt = NULL;
    size_t cap = 0;
    int rc = 0;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(store->db, req->span_hex != NULL ? load_span_sql : load_sql, -1, &stmt,
                           NULL) != SQLITE_OK) {
        return db_failure(store, "cannot load the trace");
    }
    sqlite3_bind_text(stmt, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, MAX_LOADED_SPANS);
    if (req->span_hex != NULL) {
        sqlite3_bind_text(stmt, 3, req->span_hex, -1, SQLITE_STATIC);
    }
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft_span_data *span = NULL;

        if (*count == cap) {
            size_t new_cap = cap == 0 ? 64 : cap * 2;
            struct weft_span_data **grown = weft__realloc(*rows, new_cap * sizeof(**rows));

            if (grown == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
            *rows = grown;
            cap = new_cap;
        }
        err = row_to_span(store, &trace->arena, stmt, id, req->is_outline, &span);
        if (err == WEFT_OK && span != NULL) {
            (*rows)[(*count)++] = span;
        }
    }
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = db_failure(store, "cannot load the trace");
    }
    sqlite3_finalize(stmt);
    if (err == WEFT_OK && *count > 1) {
        qsort(*rows, *count, sizeof(**rows), by_start);
    }
    return err;
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
/* Tree order                                                                                  */

struct by_start {
    uint64_t start;
    uint64_t end;
    const char *name;
    size_t index;
};

static int
cmp_by_start(const void *a, const void *b)
{
    const struct by_start *x = a;
    const struct by_start *y = b;
    int c = 0;

    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    /* Of two spans that start together, the longer one is more likely the parent. */
    if (x->end != y->end) {
        return x->end > y->end ? -1 : 1;
    }
    c = strcmp(x->name != NULL ? x->name : "", y->name != NULL ? y->name : "");
    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

struct by_id {
    uint8_t id[WEFT_SPAN_ID_SIZE];
    size_t index;
};

static int
cmp_by_id(const void *a, const void *b)
{
    const struct by_id *x = a;
    const struct by_id *y = b;
    int c = memcmp(x->id, y->id, WEFT_SPAN_ID_SIZE);

    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

static int
cmp_id_key(const void *key, const void *elem)
{
    return memcmp(key, ((const struct by_id *)elem)->id, WEFT_SPAN_ID_SIZE);
}

/* What tree order reads of one span. weft__trace_tree() reads it from loaded spans; a page
 * read (weft_store_load_page()) from compact outline nodes, so that ordering a large trace does
 * not cost a whole weft_span_data per span. Both go through one walk, so they agree. */
struct tree_key {
    uint64_t start;
    uint64_t end;
    const char *name;
    const uint8_t *id;
    const uint8_t *parent;
    bool has_parent;
    bool is_parent_remote;
};

/* One stored span as a page read orders it: its outline and its row, 56 bytes and a name. */
struct page_node {
    uint64_t start;
    uint64_t end;
    const char *name;    /* in the read's scratch arena */
    sqlite3_int64 rowid; /* its row, read whole when the span is on the page */
    uint8_t id[WEFT_SPAN_ID_SIZE];
    uint8_t parent[WEFT_SPAN_ID_SIZE];
    bool has_parent;
    bool is_parent_remote;
    bool is_error;
};

struct tree {
    const struct weft_span_data *const *spans; /* one of spans and nodes is set */
    const struct page_node *nodes;
    size_t count;
    size_t *head; /* first child of each span, linked through next; roots under head[count] */
    size_t *next;
    size_t *node_depth;
    size_t *stack;
    bool *is_visited;
    size_t *order;
    size_t *depth;
    bool *is_orphan;
    size_t emitted;
};

static void
tree_key_at(const struct tree *t, size_t i, struct tree_key *k)
{
    if (t->spans != NULL) {
        const struct weft_span_data *s = t->spans[i];

        k->start = s->start_time_ns;
        k->end = s->end_time_ns;
        k->name = s->name;
        k->id = s->span_id;
        k->parent = s->parent_span_id;
        k->has_parent = s->has_parent;
        k->is_parent_remote = s->parent_is_remote;
    } else {
        const struct page_node *n = &t->nodes[i];

        k->start = n->start;
        k->end = n->end;
        k->name = n->name;
        k->id = n->id;
        k->parent = n->parent;
        k->has_parent = n->has_parent;
        k->is_parent_remote = n->is_parent_remote;
    }
}

/* weft__store_has_parent() of a key: a zero parent id counts as none. */
static bool
key_has_parent(const struct tree_key *k)
{
    static const uint8_t zero[WEFT_SPAN_ID_SIZE];

    return k->has_parent && memcmp(k->parent, zero, WEFT_SPAN_ID_SIZE) != 0;
}

/* Emit the subtree under @p root depth-first. Child lists are linked latest first, so
 * pushing a list front to back pops its earliest span first. */
static void
walk(struct tree *t, size_t root)
{
    size_t top = 0;

    t->node_depth[root] = 0;
    t->stack[top++] = root;
    while (top > 0) {
        size_t i = t->stack[--top];
        struct tree_key k;

        if (t->is_visited[i]) {
            continue;
        }
        t->is_visited[i] = true;
        t->order[t->emitted] = i;
        t->depth[t->emitted] = t->node_depth[i];
        if (t->is_orphan != NULL) {
            tree_key_at(t, i, &k);
            t->is_orphan[t->emitted] =
                t->node_depth[i] == 0 && key_has_parent(&k) && !k.is_parent_remote;
        }
        t->emitted++;
        /* Each span is on exactly one list, so the stack never holds more than count. */
        for (size_t c = t->head[i]; c != SIZE_MAX; c = t->next[c]) {
            if (!t->is_visited[c]) {
                t->node_depth[c] = t->node_depth[i] + 1;
                t->stack[top++] = c;
            }
        }
    }
}

/* Tree order of t->count spans (t->spans or t->nodes) into t->order and t->depth (and
 * t->is_orphan): weft__trace_tree()'s contract. */
static weft_err
tree_order(const struct tree *spec)
{
    struct tree t = *spec; /* the walk's scratch arrays go in this copy */
    size_t count = t.count;
    struct by_start *starts = NULL;
    struct by_id *ids = NULL;
    bool *is_root = NULL;
    weft_err err = WEFT_OK;

    if (count == 0) {
        return WEFT_OK;
    }
    if (count > SIZE_MAX / sizeof(struct by_start) - 1) {
        return WEFT_ENOMEM;
    }
    starts = weft__malloc(count * sizeof(*starts));
    ids = weft__malloc(count * sizeof(*ids));
    t.head = weft__malloc((count + 1) * sizeof(*t.head));
    t.next = weft__malloc(count * sizeof(*t.next));
    t.node_depth = weft__malloc(count * sizeof(*t.node_depth));
    t.stack = weft__malloc(count * sizeof(*t.stack));
    t.is_visited = weft__calloc(count, sizeof(*t.is_visited));
    is_root = weft__calloc(count, sizeof(*is_root));
    if (starts == NULL || ids == NULL || t.head == NULL || t.next == NULL || t.node_depth == NULL ||
        t.stack == NULL || t.is_visited == NULL || is_root == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        struct tree_key k;

        tree_key_at(&t, i, &k);
        starts[i].start = k.start;
        starts[i].end = k.end;
        starts[i].name = k.name;
        starts[i].index = i;
        memcpy(ids[i].id, k.id, WEFT_SPAN_ID_SIZE);
        ids[i].index = i;
        t.head[i] = SIZE_MAX;
    }
    t.head[count] = SIZE_MAX;
    qsort(starts, count, sizeof(*starts), cmp_by_start);
    qsort(ids, count, sizeof(*ids), cmp_by_id);
    /* Link every span under its parent (roots and orphans under head[count]), visiting them
     * in ascending start order and prepending, so each list runs latest first. */
    for (size_t k = 0; k < count; k++) {
        size_t i = starts[k].index;
        struct tree_key key;
        const struct by_id *found = NULL;
        size_t p = count;

        tree_key_at(&t, i, &key);
        if (key.has_parent) {
            found = bsearch(key.parent, ids, count, sizeof(*ids), cmp_id_key);
        }
        if (found != NULL && found->index != i) {
            p = found->index;
        }
        is_root[i] = p == count;
        t.next[i] = t.head[p];
        t.head[p] = i;
    }
    /* Walk the roots earliest first; then break any parent cycle (spans no root reaches)
     * by walking its earliest span as a root, so every span is emitted exactly once. */
    for (size_t k = 0; k < count; k++) {
        size_t i = starts[k].index;

        if (is_root[i]) {
            walk(&t, i);
        }
    }
    for (size_t k = 0; k < count && t.emitted < count; k++) {
        if (!t.is_visited[starts[k].index]) {
            walk(&t, starts[k].index);
        }
    }
out:
    weft__free(starts);
    weft__free(ids);
    weft__free(t.head);
    weft__free(t.next);
    weft__free(t.node_depth);
    weft__free(t.stack);
    weft__free(t.is_visited);
    weft__free(is_root);
    return err;
}

weft_err
weft__trace_tree(const struct weft_span_data *const *spans,
                 size_t count,
                 size_t *order,
                 size_t *depth,
                 bool *is_orphan)
{
    struct tree t = {
        .spans = spans, .count = count, .order = order, .depth = depth, .is_orphan = is_orphan};

    return tree_order(&t);
}

/* ------------------------------------------------------------------------------------------ */
/* Page read                                                                                   */

/* The rows read_spans() reads (same filter, same cap), only what tree order needs. */
static const char page_outline_sql[] =
    "SELECT rowid, span_id, parent_span_id, parent_is_remote, name, start_ns, end_ns,"
    " status_code FROM spans WHERE trace_id = ?1 LIMIT ?2";
static const char page_row_sql[] = LOAD_COLUMNS " WHERE rowid = ?1";

/* Nodes by (start, span id): read_spans()'s order, so that tree order breaks ties alike. */
static int
node_by_start(const void *a, const void *b)
{
    const struct page_node *x = a;
    const struct page_node *y = b;

    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    return memcmp(x->id, y->id, WEFT_SPAN_ID_SIZE);
}

/* The outline row of @p stmt into @p node, its name into @p names. *is_skipped: a malformed
 * span id, which row_to_span() skips too. @return WEFT_OK or WEFT_ENOMEM. */
static weft_err
row_to_node(sqlite3_stmt *stmt, struct weft__arena *names, struct page_node *node, bool *is_skipped)
{
    const char *span_hex = (const char *)sqlite3_column_text(stmt, 1);
    const char *parent_hex = (const char *)sqlite3_column_text(stmt, 2);
    const char *name = (const char *)sqlite3_column_text(stmt, 4);

    memset(node, 0, sizeof(*node));
    *is_skipped = span_hex == NULL || weft__hex_decode_id(span_hex, strlen(span_hex), node->id,
                                                          WEFT_SPAN_ID_SIZE) != WEFT_OK;
    if (*is_skipped) {
        return WEFT_OK;
    }
    node->rowid = sqlite3_column_int64(stmt, 0);
    if (parent_hex != NULL && weft__hex_decode_id(parent_hex, strlen(parent_hex), node->parent,
                                                  WEFT_SPAN_ID_SIZE) == WEFT_OK) {
        node->has_parent = true;
        node->is_parent_remote = sqlite3_column_int(stmt, 3) != 0;
    }
    node->name = "";
    if (name != NULL) {
        node->name = weft__arena_strndup(names, name, (size_t)sqlite3_column_bytes(stmt, 4));
        if (node->name == NULL) {
            return WEFT_ENOMEM;
        }
    }
    node->start = column_ns(stmt, 5);
    node->end = column_ns(stmt, 6);
    node->is_error = sqlite3_column_int(stmt, 7) == WEFT_STATUS_ERROR;
    return WEFT_OK;
}

/* Every span of trace @p hex as page nodes in read_spans()'s order; *nodes is a new array of
 * *count (the caller frees it), names in @p names. */
static weft_err
read_nodes(struct weft_store *store,
           const char *hex,
           struct weft__arena *names,
           struct page_node **nodes,
           size_t *count)
{
    sqlite3_stmt *stmt = NULL;
    size_t cap = 0;
    int rc = 0;
    weft_err err = WEFT_OK;

    if (sqlite3_prepare_v2(store->db, page_outline_sql, -1, &stmt, NULL) != SQLITE_OK) {
        return db_failure(store, "cannot load the trace");
    }
    sqlite3_bind_text(stmt, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, MAX_LOADED_SPANS);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        bool is_skipped = false;

        if (*count == cap) {
            size_t new_cap = cap == 0 ? 256 : cap * 2;
            struct page_node *grown = weft__realloc(*nodes, new_cap * sizeof(**nodes));

            if (grown == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
            *nodes = grown;
            cap = new_cap;
        }
        err = row_to_node(stmt, names, &(*nodes)[*count], &is_skipped);
        if (err == WEFT_OK && !is_skipped) {
            (*count)++;
        }
    }
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = db_failure(store, "cannot load the trace");
    }
    sqlite3_finalize(stmt);
    if (err == WEFT_OK && *count > 1) {
        qsort(*nodes, *count, sizeof(**nodes), node_by_start);
    }
    return err;
}

/* Read the @p m rows @p rowids whole into @p trace, which holds them in that order. */
static weft_err
read_page_rows(struct weft_store *store,
               struct weft_trace *trace,
               const uint8_t *id,
               const sqlite3_int64 *rowids,
               size_t m)
{
    sqlite3_stmt *stmt = NULL;
    weft_err err = WEFT_OK;

    /* One prepared lookup by row id per span. Measured on a 200,000-span trace, a page of
     * 10,000 took about as long as a page of none: ordering the outline is the read's cost, so
     * batched IN lists (SQL built at run time) would gain little. */
    if (sqlite3_prepare_v2(store->db, page_row_sql, -1, &stmt, NULL) != SQLITE_OK) {
        return db_failure(store, "cannot load the trace");
    }
    for (size_t k = 0; err == WEFT_OK && k < m; k++) {
        struct weft_span_data *span = NULL;

        sqlite3_reset(stmt);
        sqlite3_bind_int64(stmt, 1, rowids[k]);
        if (sqlite3_step(stmt) != SQLITE_ROW) {
            /* The outline was read in this transaction: a missing row is a database fault. */
            err = db_failure(store, "cannot load the trace");
            break;
        }
        err = row_to_span(store, &trace->arena, stmt, id, false, &span);
        if (err == WEFT_OK && span == NULL) {
            set_errmsg(store, "a span of the page changed its id while read");
            err = WEFT_EIO;
        }
        if (err == WEFT_OK) {
            trace->spans[trace->count++] = span;
        }
    }
    sqlite3_finalize(stmt);
    return err;
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
    struct page_node *nodes = NULL;
    sqlite3_int64 *rowids = NULL;
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
    /* The outline and the page's rows are read in one transaction, so the page is cut from
     * the same snapshot of the trace that was ordered, whatever the writer commits meanwhile. */
    if (sqlite3_exec(store->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        return db_failure(store, "cannot load the trace");
    }
    is_in_txn = true;
    err = read_nodes(store, hex, &names, &nodes, &n);
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
    {
        struct tree t = {.nodes = nodes, .count = n, .order = order, .depth = depth};

        err = tree_order(&t);
        if (err != WEFT_OK) {
            goto out;
        }
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
        rowids = weft__malloc(m * sizeof(*rowids));
        trace->spans = weft__arena_alloc(&trace->arena, m * sizeof(*trace->spans));
        trace->depth = weft__arena_alloc(&trace->arena, m * sizeof(*trace->depth));
        if (rowids == NULL || trace->spans == NULL || trace->depth == NULL) {
            err = WEFT_ENOMEM;
            goto out;
        }
        for (size_t k = 0; k < m; k++) {
            rowids[k] = nodes[order[offset + k]].rowid;
            trace->depth[k] = depth[offset + k];
        }
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
    err = read_page_rows(store, trace, id, rowids, m);
out:
    if (is_in_txn) {
        /* Ends a read transaction; it wrote nothing, so this cannot lose data. */
        sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
    }
    weft__free(rowids);
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
