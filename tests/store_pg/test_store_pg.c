/* tests/store_pg/test_store_pg.c - the PostgreSQL span store backend (store/pg_*.c) over a real
 * PostgreSQL 15 (tests/support/pg_server.h, one server for the file, a fresh database per
 * test), tested through the backend's own entry points (the reader ops, the exporter, the
 * interrupted span, retention):
 * - a batch read back column by column (ids, parent, remote parent, names, kind, times, status,
 *   every attribute type, events, links, dropped counts, service, scope), text that COPY must
 *   escape or PostgreSQL refuses as it is (tabs, newlines, backslashes, invalid UTF-8, NUL);
 * - the summary row: counts, the root name before and after the root arrives, has_root;
 * - a batch written twice, and by two exporters at once from two threads, stored and counted
 *   once; prebuilt JSON columns; a connection the server ended is made again;
 * - partitions: spans of three days in three partitions, a span at time 0 in the default one;
 *   retention drops old partitions and summaries and keeps the new, and computes again the
 *   summary of a trace that straddles the cutoff (as from scratch; deleted when no span is left);
 * - the interrupted span: written once, never over an existing span;
 * - the read primitives: list order, ids, one span, spans by id, nodes, the outline, a read
 *   transaction; a database without the schema is WEFT_ENOTFOUND; a password never appears in
 *   a message.
 * A server that cannot start fails the file: it never skips. */
#include "support/failalloc.h"
#include "support/mem_exporter.h"
#include "support/pg_server.h"
#include "support/weft_test.h"

#include "base/buf.h"
#include "store/decisions.h"
#include "store/pg.h"
#include "store/store.h"
#include "tracing/exporter.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS  1000000ull
#define DAY (24ull * 3600ull * 1000000000ull)
#define T0  1700000000000000000ull /* 2023-11-14T22:13:20Z */

static struct weft_test_pg *server;
static unsigned databases;

struct fx {
    char url[256];
    PGconn *conn;
};

/* ---- span builder ---------------------------------------------------------------------- */

static const struct weft_attr resource_attrs[] = {
    {"service.name", {WEFT_VALUE_STRING, 6, {.str = "svc-pg"}}},
};
static const struct weft_resource resource = {resource_attrs, 1, 0, NULL};
static const struct weft_scope scope = {"weft.test", "1.2.3", NULL, NULL, 0};

static void
hex_to_bytes(const char *hex, uint8_t *out, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned v = 0;

        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

static struct weft_span_data
make_span(const char *trace_hex,
          const char *span_hex,
          const char *parent_hex,
          const char *name,
          uint64_t start_ns,
          uint64_t dur_ms)
{
    struct weft_span_data s;

    memset(&s, 0, sizeof(s));
    hex_to_bytes(trace_hex, s.trace_id, WEFT_TRACE_ID_SIZE);
    hex_to_bytes(span_hex, s.span_id, WEFT_SPAN_ID_SIZE);
    if (parent_hex != NULL) {
        hex_to_bytes(parent_hex, s.parent_span_id, WEFT_SPAN_ID_SIZE);
        s.has_parent = true;
    }
    s.trace_flags = 1;
    s.name = name;
    s.kind = WEFT_SPAN_KIND_INTERNAL;
    s.start_time_ns = start_ns;
    s.end_time_ns = start_ns + dur_ms * MS;
    s.resource = &resource;
    s.scope = &scope;
    return s;
}

static weft_err
export_batch(struct weft_exporter *ex, const struct weft_span_data *spans, size_t n)
{
    const struct weft_span_data *ptrs[64];
    struct weft_export_result result = {0};

    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = &spans[i];
    }
    return ex->ops->export_batch(ex->self, ptrs, n, weft_monotonic_ns() + 5000 * MS, &result);
}

/* ---- rows ------------------------------------------------------------------------------ */

#define MAX_ROWS 64
#define MAX_COLS 20

struct rows {
    size_t n;
    char *text[MAX_ROWS][MAX_COLS];
    size_t len[MAX_ROWS][MAX_COLS];
    int64_t num[MAX_ROWS][MAX_COLS];
    int cols;
};

static weft_err
collect(const struct weft__store_row *row, void *user)
{
    struct rows *r = user;

    assert_true(r->n < MAX_ROWS);
    for (int c = 0; c < r->cols; c++) {
        size_t len = 0;
        const char *t = row->text(row, c, &len);

        r->text[r->n][c] = t != NULL ? strndup(t, len) : NULL;
        r->len[r->n][c] = len;
        r->num[r->n][c] = row->integer(row, c);
    }
    r->n++;
    return WEFT_OK;
}

static void
rows_init(struct rows *r, int cols)
{
    memset(r, 0, sizeof(*r));
    r->cols = cols;
}

static void
rows_cleanup(struct rows *r)
{
    for (size_t i = 0; i < r->n; i++) {
        for (int c = 0; c < r->cols; c++) {
            free(r->text[i][c]);
        }
    }
    r->n = 0;
}

/* The row whose column 0 is @p id. */
static size_t
row_of(const struct rows *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->text[i][0] != NULL && strcmp(r->text[i][0], id) == 0) {
            return i;
        }
    }
    fail_msg("no row %s", id);
    return 0;
}

/* ---- fixture --------------------------------------------------------------------------- */

static PGresult *
run_ok(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    }
    return res;
}

static long long
count_of(struct fx *f, const char *sql)
{
    PGresult *res = run_ok(f->conn, sql);
    long long n = -1;

    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
        n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    }
    PQclear(res);
    return n;
}

static const char *
text_of(struct fx *f, const char *sql, char *out, size_t len)
{
    PGresult *res = run_ok(f->conn, sql);

    out[0] = '\0';
    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
        snprintf(out, len, "%s", PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    return out;
}

static int
start_server(void **state)
{
    char err[4096];

    (void)state;
    server = weft_test_pg_start(NULL, err, sizeof(err));
    if (server == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    return 0;
}

static int
stop_server(void **state)
{
    (void)state;
    assert_int_equal(weft_test_pg_stop(server), 0);
    server = NULL;
    return 0;
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char name[32];

    assert_non_null(f);
    snprintf(name, sizeof(name), "s%u", ++databases);
    if (weft_test_pg_createdb(server, name, f->url, sizeof(f->url)) != 0) {
        fail_msg("createdb %s: %s", name, f->url);
    }
    f->conn = PQconnectdb(f->url);
    if (PQstatus(f->conn) != CONNECTION_OK) {
        fail_msg("connect %s: %s", f->url, PQerrorMessage(f->conn));
    }
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    PQfinish(f->conn);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    unsetenv("WEFT_TRACE_PARTITION_HOURS");
    free(f);
    return 0;
}

static void
open_reader(struct fx *f, const struct weft__store_reader_ops **ops, void **impl)
{
    assert_weft_ok(weft__store_pg_reader_open(f->url, ops, impl));
    assert_string_equal((*ops)->name, "postgresql");
}

static uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define TA "aa110000000000000000000000000001"
#define TB "aa220000000000000000000000000002"
#define TC "bb330000000000000000000000000003"

/* ------------------------------------------------------------------------------------------ */
/* Round trip                                                                                  */

static const char *const strs[] = {"x", "y\tz"};
static const int64_t ints[] = {1, -2, 9007199254740993};
static const double doubles[] = {0.5, -1.25};
static const bool bools[] = {true, false};

static void
test_pg_batch_round_trips_every_field(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;
    struct weft_attr attrs[11];
    struct weft_attr ev_attrs[1];
    struct weft_event_data events[2];
    struct weft_link_data links[1];
    struct weft_attr link_attrs[1];
    struct weft_span_data s[2];
    struct weft__buf want;
    struct rows r;
    size_t i = 0;
    json_t *got_j = NULL;
    json_t *want_j = NULL;

    attrs[0] = weft_attr_str("str", "hello \"world\" \\ tab\t nl\n");
    attrs[1] = weft_attr_bool("bool", true);
    attrs[2] = weft_attr_int("int", -9223372036854775807 - 1);
    attrs[3] = weft_attr_double("double", 2.5);
    attrs[4] = (struct weft_attr){"strs", {WEFT_VALUE_STRING_ARRAY, 2, {.strs = strs}}};
    attrs[5] = (struct weft_attr){"ints", {WEFT_VALUE_INT_ARRAY, 3, {.ints = ints}}};
    attrs[6] = (struct weft_attr){"doubles", {WEFT_VALUE_DOUBLE_ARRAY, 2, {.doubles = doubles}}};
    attrs[7] = (struct weft_attr){"bools", {WEFT_VALUE_BOOL_ARRAY, 2, {.bools = bools}}};
    attrs[8] = weft_attr_strn("nul", "a\0b", 3);
    attrs[9] = weft_attr_double("big", 1.5e20);
    attrs[10] = weft_attr_double("huge", -1e300);
    ev_attrs[0] = weft_attr_int("n", 7);
    events[0] = (struct weft_event_data){T0 + 5 * MS, "weft.stuck_loop", ev_attrs, 1, 2};
    events[1] = (struct weft_event_data){T0 + 6 * MS, "second", NULL, 0, 0};
    link_attrs[0] = weft_attr_str("why", "replan");
    memset(links, 0, sizeof(links));
    hex_to_bytes(TB, links[0].trace_id, WEFT_TRACE_ID_SIZE);
    hex_to_bytes("00000000000000bb", links[0].span_id, WEFT_SPAN_ID_SIZE);
    links[0].trace_state = "k=v";
    links[0].attrs = link_attrs;
    links[0].attr_count = 1;
    links[0].dropped_attrs = 3;

    s[0] = make_span(TA, "0000000000000001", NULL, "invoke_workflow wf", T0, 100);
    s[1] = make_span(TA, "0000000000000002", "00000000000000ff", "chat \xff\xfe model\t\\x\n",
                     T0 + 10 * MS, 20);
    s[1].parent_is_remote = true;
    s[1].trace_flags = 0;
    s[1].trace_state = "vendor=1";
    s[1].kind = WEFT_SPAN_KIND_CLIENT;
    s[1].status_code = WEFT_STATUS_ERROR;
    s[1].status_message = "timed out\tafter 3 s";
    s[1].attrs = attrs;
    s[1].attr_count = 11;
    s[1].dropped_attrs = 4;
    s[1].events = events;
    s[1].event_count = 2;
    s[1].dropped_events = 5;
    s[1].links = links;
    s[1].link_count = 1;
    s[1].dropped_links = 6;
    s[0].status_code = WEFT_STATUS_OK;
    s[0].status_message = "not kept for OK";

    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_string_equal(weft_exporter_name(ex), "store");
    assert_weft_ok(export_batch(ex, s, 2));
    open_reader(f, &ops, &impl);
    rows_init(&r, MAX_COLS);
    assert_weft_ok(ops->spans(impl, TA, NULL, 100, false, collect, &r));
    assert_int_equal(r.n, 2);

    i = row_of(&r, "0000000000000001");
    assert_null(r.text[i][WEFT__COL_PARENT]);
    assert_int_equal(r.num[i][WEFT__COL_PARENT_REMOTE], 0);
    assert_null(r.text[i][WEFT__COL_TRACE_STATE]);
    assert_int_equal(r.num[i][WEFT__COL_FLAGS], 1);
    assert_string_equal(r.text[i][WEFT__COL_NAME], "invoke_workflow wf");
    assert_int_equal(r.num[i][WEFT__COL_KIND], WEFT_SPAN_KIND_INTERNAL);
    assert_int_equal(r.num[i][WEFT__COL_START], (int64_t)T0);
    assert_int_equal(r.num[i][WEFT__COL_END], (int64_t)(T0 + 100 * MS));
    assert_int_equal(r.num[i][WEFT__COL_STATUS], WEFT_STATUS_OK);
    assert_null(r.text[i][WEFT__COL_STATUS_MESSAGE]);
    assert_string_equal(r.text[i][WEFT__COL_ATTRS], "{}");
    assert_string_equal(r.text[i][WEFT__COL_EVENTS], "[]");
    assert_string_equal(r.text[i][WEFT__COL_LINKS], "[]");
    assert_string_equal(r.text[i][WEFT__COL_SERVICE], "svc-pg");
    assert_string_equal(r.text[i][WEFT__COL_SCOPE_NAME], "weft.test");
    assert_string_equal(r.text[i][WEFT__COL_SCOPE_VERSION], "1.2.3");

    i = row_of(&r, "0000000000000002");
    assert_string_equal(r.text[i][WEFT__COL_PARENT], "00000000000000ff");
    assert_int_equal(r.num[i][WEFT__COL_PARENT_REMOTE], 1);
    assert_string_equal(r.text[i][WEFT__COL_TRACE_STATE], "vendor=1");
    assert_int_equal(r.num[i][WEFT__COL_FLAGS], 0);
    /* Invalid UTF-8 replaced; tab, backslash and newline kept through COPY. */
    assert_string_equal(r.text[i][WEFT__COL_NAME], "chat \xEF\xBF\xBD\xEF\xBF\xBD model\t\\x\n");
    assert_int_equal(r.num[i][WEFT__COL_KIND], WEFT_SPAN_KIND_CLIENT);
    assert_int_equal(r.num[i][WEFT__COL_STATUS], WEFT_STATUS_ERROR);
    assert_string_equal(r.text[i][WEFT__COL_STATUS_MESSAGE], "timed out\tafter 3 s");
    assert_int_equal(r.num[i][WEFT__COL_DROPPED_ATTRS], 4);
    assert_int_equal(r.num[i][WEFT__COL_DROPPED_EVENTS], 5);
    assert_int_equal(r.num[i][WEFT__COL_DROPPED_LINKS], 6);

    /* The JSON columns hold what json.c wrote (as JSON values: jsonb keeps its own key order),
     * except the NUL, which jsonb cannot hold. */
    weft__buf_init(&want, 0);
    attrs[8] = weft_attr_strn("nul",
                              "a\xEF\xBF\xBD"
                              "b",
                              5);
    assert_weft_ok(weft__store_attrs_text(attrs, 11, NULL, &want));
    want_j = json_loads(want.data, 0, NULL);
    got_j = json_loads(r.text[i][WEFT__COL_ATTRS], 0, NULL);
    assert_non_null(want_j);
    assert_non_null(got_j);
    assert_true(json_equal(want_j, got_j));
    assert_string_equal(json_string_value(json_object_get(got_j, "str")),
                        "hello \"world\" \\ tab\t nl\n");
    assert_true(json_is_integer(json_object_get(got_j, "int")));
    assert_true(json_integer_value(json_object_get(got_j, "int")) == INT64_MIN);
    assert_true(json_is_real(json_object_get(got_j, "double")));
    /* jsonb writes 1.5e+20 without its exponent: read back as the same double. */
    assert_true(json_is_real(json_object_get(got_j, "big")));
    assert_true(json_real_value(json_object_get(got_j, "big")) == 1.5e20);
    assert_true(json_real_value(json_object_get(got_j, "huge")) == -1e300);
    assert_true(json_integer_value(json_array_get(json_object_get(got_j, "ints"), 2)) ==
                9007199254740993);
    json_decref(want_j);
    json_decref(got_j);
    assert_weft_ok(weft__store_events_text(&s[1], &want));
    want_j = json_loads(want.data, 0, NULL);
    got_j = json_loads(r.text[i][WEFT__COL_EVENTS], 0, NULL);
    assert_true(json_equal(want_j, got_j));
    assert_int_equal(json_array_size(got_j), 2);
    json_decref(want_j);
    json_decref(got_j);
    assert_weft_ok(weft__store_links_text(&s[1], &want));
    want_j = json_loads(want.data, 0, NULL);
    got_j = json_loads(r.text[i][WEFT__COL_LINKS], 0, NULL);
    assert_true(json_equal(want_j, got_j));
    assert_int_equal(json_array_size(got_j), 1);
    json_decref(want_j);
    json_decref(got_j);
    weft__buf_cleanup(&want);
    rows_cleanup(&r);

    /* The run id column is filled from weft.run.id only. */
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans WHERE run_id IS NOT NULL"), 0);

    ops->close(impl);
    weft_exporter_free(ex);
}

/* ------------------------------------------------------------------------------------------ */
/* Summary                                                                                     */

static void
summary(struct fx *f, const char *trace, struct rows *r)
{
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;

    open_reader(f, &ops, &impl);
    rows_init(r, 8);
    assert_weft_ok(ops->list(impl, 100, collect, r));
    ops->close(impl);
    (void)row_of(r, trace);
}

static void
test_pg_summary_names_the_trace_by_its_root(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data kids[2];
    struct weft_span_data root[1];
    struct weft_span_data later[1];
    struct weft_attr run[1];
    struct rows r;
    size_t i = 0;

    run[0] = weft_attr_str("weft.run.id", "run-1");
    kids[0] =
        make_span(TA, "0000000000000003", "0000000000000001", "execute_tool t", T0 + 50 * MS, 10);
    kids[0].status_code = WEFT_STATUS_ERROR;
    kids[1] = make_span(TA, "0000000000000002", "0000000000000001", "plan sup", T0 + 20 * MS, 100);
    kids[1].attrs = run;
    kids[1].attr_count = 1;
    root[0] = make_span(TA, "0000000000000001", NULL, "invoke_workflow wf", T0, 500);
    root[0].attrs = run;
    root[0].attr_count = 1;
    later[0] =
        make_span(TA, "0000000000000009", "00000000000000ff", "remote child", T0 - 50 * MS, 1);
    later[0].parent_is_remote = true;

    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, kids, 2));
    summary(f, TA, &r);
    i = row_of(&r, TA);
    assert_int_equal(r.num[i][WEFT__LIST_SPANS], 2);
    assert_int_equal(r.num[i][WEFT__LIST_ERRORS], 1);
    assert_int_equal(r.num[i][WEFT__LIST_START], (int64_t)(T0 + 20 * MS));
    assert_int_equal(r.num[i][WEFT__LIST_END], (int64_t)(T0 + 120 * MS));
    assert_string_equal(r.text[i][WEFT__LIST_ROOT_NAME], "plan sup"); /* the earliest */
    assert_string_equal(r.text[i][WEFT__LIST_SERVICE], "svc-pg");
    assert_int_equal(r.num[i][WEFT__LIST_HAS_ROOT], 0);
    rows_cleanup(&r);

    assert_weft_ok(export_batch(ex, root, 1));
    summary(f, TA, &r);
    i = row_of(&r, TA);
    assert_int_equal(r.num[i][WEFT__LIST_SPANS], 3);
    assert_int_equal(r.num[i][WEFT__LIST_ERRORS], 1);
    assert_int_equal(r.num[i][WEFT__LIST_START], (int64_t)T0);
    assert_int_equal(r.num[i][WEFT__LIST_END], (int64_t)(T0 + 500 * MS));
    assert_string_equal(r.text[i][WEFT__LIST_ROOT_NAME], "invoke_workflow wf");
    assert_int_equal(r.num[i][WEFT__LIST_HAS_ROOT], 1);
    rows_cleanup(&r);

    /* A span with a remote parent, earlier than the root, does not rename the trace. */
    assert_weft_ok(export_batch(ex, later, 1));
    summary(f, TA, &r);
    i = row_of(&r, TA);
    assert_int_equal(r.num[i][WEFT__LIST_SPANS], 4);
    assert_int_equal(r.num[i][WEFT__LIST_START], (int64_t)(T0 - 50 * MS));
    assert_string_equal(r.text[i][WEFT__LIST_ROOT_NAME], "invoke_workflow wf");
    rows_cleanup(&r);

    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans WHERE run_id = 'run-1'"), 2);
    weft_exporter_free(ex);
}

/* A remote-parent span names a trace without a parentless span, over an earlier plain one. */
static void
test_pg_summary_prefers_a_remote_parent_root(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data a[1];
    struct weft_span_data b[1];
    struct rows r;
    size_t i = 0;

    a[0] = make_span(TB, "0000000000000002", "0000000000000001", "child", T0, 10);
    b[0] = make_span(TB, "0000000000000001", "00000000000000ee", "server", T0 + 5 * MS, 10);
    b[0].parent_is_remote = true;
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, a, 1));
    assert_weft_ok(export_batch(ex, b, 1));
    summary(f, TB, &r);
    i = row_of(&r, TB);
    assert_string_equal(r.text[i][WEFT__LIST_ROOT_NAME], "server");
    assert_int_equal(r.num[i][WEFT__LIST_HAS_ROOT], 1);
    assert_int_equal(r.num[i][WEFT__LIST_SPANS], 2);
    rows_cleanup(&r);
    weft_exporter_free(ex);
}

/* ------------------------------------------------------------------------------------------ */
/* Idempotence                                                                                 */

static void
three_spans(struct weft_span_data s[3])
{
    s[0] = make_span(TC, "0000000000000001", NULL, "root", T0, 100);
    s[1] = make_span(TC, "0000000000000002", "0000000000000001", "a", T0 + MS, 10);
    s[1].status_code = WEFT_STATUS_ERROR;
    s[2] = make_span(TC, "0000000000000003", "0000000000000001", "b", T0 + 2 * MS, 10);
}

static void
test_pg_batch_written_twice_is_stored_once(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[3];

    three_spans(s);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 3));
    assert_weft_ok(export_batch(ex, s, 3));
    assert_weft_ok(export_batch(ex, s, 2));
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 3);
    assert_int_equal(count_of(f, "SELECT span_count FROM weft_traces"), 3);
    assert_int_equal(count_of(f, "SELECT error_count FROM weft_traces"), 1);
    /* The same span twice in one batch, with a new one. */
    s[0] = s[2];
    s[1] = make_span(TC, "0000000000000004", "0000000000000001", "c", T0 + 3 * MS, 10);
    assert_weft_ok(export_batch(ex, s, 3));
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 4);
    assert_int_equal(count_of(f, "SELECT span_count FROM weft_traces"), 4);
    weft_exporter_free(ex);
}

struct writer_arg {
    const char *url;
    weft_err err;
};

static void *
writer_thread(void *p)
{
    struct writer_arg *a = p;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[40];
    char trace[33];
    char span[17];
    static char names[40][8];

    a->err = weft__store_pg_exporter_new(a->url, &ex);
    for (int round = 0; round < 5 && a->err == WEFT_OK; round++) {
        for (int i = 0; i < 40; i++) {
            /* 8 traces of 5 spans, in the same order in both threads. */
            snprintf(trace, sizeof(trace), "cc%030d", i / 5 + round * 8);
            snprintf(span, sizeof(span), "%016d", i % 5 + 1);
            snprintf(names[i], sizeof(names[i]), "n%d", i);
            s[i] = make_span(trace, span, i % 5 == 0 ? NULL : "0000000000000001", names[i],
                             T0 + (uint64_t)i * MS, 1);
            s[i].status_code = i % 2 == 0 ? WEFT_STATUS_ERROR : WEFT_STATUS_UNSET;
        }
        a->err = export_batch(ex, s, 40);
    }
    weft_exporter_free(ex);
    return NULL;
}

static void
test_pg_two_exporters_at_once_store_once(void **state)
{
    struct fx *f = *state;
    struct writer_arg args[2] = {{f->url, WEFT_OK}, {f->url, WEFT_OK}};
    pthread_t threads[2];

    for (int t = 0; t < 2; t++) {
        assert_int_equal(pthread_create(&threads[t], NULL, writer_thread, &args[t]), 0);
    }
    for (int t = 0; t < 2; t++) {
        assert_int_equal(pthread_join(threads[t], NULL), 0);
        assert_weft_ok(args[t].err);
    }
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 200);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_traces"), 40);
    assert_int_equal(count_of(f, "SELECT sum(span_count) FROM weft_traces"), 200);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_traces WHERE span_count <> 5"
                                 " OR error_count <> (SELECT count(*) FROM weft_spans s"
                                 " WHERE s.trace_id = weft_traces.trace_id AND status_code = 2)"
                                 " OR NOT has_root"),
                     0);
    /* Both created the schema at once: one row per version. */
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_span_schema"), 4);
}

static void
test_pg_export_texts_uses_prebuilt_columns(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_exporter *other = NULL;
    struct mem_exporter *mem = NULL;
    struct weft_span_data s[3];
    const struct weft_span_data *ptrs[3] = {&s[0], &s[1], &s[2]};
    struct weft__store_texts texts;
    struct weft_attr a[1];

    three_spans(s);
    a[0] = weft_attr_str("weft.run.id", "r-9");
    s[2].attrs = a;
    s[2].attr_count = 1;
    memset(&texts, 0, sizeof(texts));
    assert_weft_ok(weft__store_texts_build(&texts, ptrs, 3, 0));
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(mem_exporter_new(&other, &mem));
    assert_weft_err(weft__store_pg_export_texts(other, ptrs, 3, &texts), WEFT_EINVAL);
    assert_weft_err(weft__store_pg_export_texts(ex, ptrs, 2, &texts), WEFT_EINVAL);
    assert_weft_ok(weft__store_pg_export_texts(ex, ptrs, 3, &texts));
    assert_weft_ok(weft__store_pg_export_texts(ex, ptrs, 3, NULL));
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 3);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans WHERE run_id = 'r-9'"
                                 " AND attributes @> '{\"weft.run.id\": \"r-9\"}'"),
                     1);
    weft__store_texts_cleanup(&texts);
    weft_exporter_free(other);
    weft_exporter_free(ex);
}

/* A connection the server ended is made again and the batch is written. */
static void
test_pg_lost_connection_is_made_again(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[3];
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;
    struct rows r;

    three_spans(s);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 1));
    open_reader(f, &ops, &impl);
    assert_true(count_of(f, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000)"
                            " FROM pg_stat_activity WHERE datname = current_database()"
                            " AND pid <> pg_backend_pid()) t") >= 2);
    weft_test_capture_logs();
    assert_weft_ok(export_batch(ex, s, 3));
    assert_non_null(strstr(weft_test_logs(), "made again"));
    assert_int_equal(count_of(f, "SELECT span_count FROM weft_traces"), 3);
    rows_init(&r, 8);
    assert_weft_ok(ops->list(impl, 10, collect, &r));
    assert_int_equal(r.n, 1);
    rows_cleanup(&r);
    ops->close(impl);
    weft_exporter_free(ex);
}

/* ------------------------------------------------------------------------------------------ */
/* Partitions and retention                                                                    */

/* The partition holding span @p span_id. */
static const char *
partition_of(struct fx *f, const char *span_id, char *out, size_t len)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "SELECT tableoid::regclass::text FROM weft_spans WHERE span_id = '%s'", span_id);
    return text_of(f, sql, out, len);
}

static void
test_pg_spans_of_three_days_land_in_three_partitions(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[4];
    char p[4][64];
    uint64_t today = now_ns() / DAY * DAY + 3600ull * 1000000000ull;

    s[0] = make_span(TA, "0000000000000001", NULL, "d-10", today - 10 * DAY, 1);
    s[1] = make_span(TA, "0000000000000002", NULL, "d-9", today - 9 * DAY, 1);
    s[2] = make_span(TA, "0000000000000003", NULL, "d-0", today, 1);
    s[3] = make_span(TA, "0000000000000004", NULL, "zero", 0, 1);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    /* today and the next two days exist from the open on */
    assert_int_equal(count_of(f, "SELECT count(*) FROM pg_inherits"
                                 " WHERE inhparent = 'weft_spans'::regclass"),
                     4);
    assert_weft_ok(export_batch(ex, s, 4));
    for (int i = 0; i < 4; i++) {
        char id[17];

        snprintf(id, sizeof(id), "%016d", i + 1);
        partition_of(f, id, p[i], sizeof(p[i]));
    }
    assert_string_not_equal(p[0], p[1]);
    assert_string_not_equal(p[1], p[2]);
    assert_string_not_equal(p[0], p[2]);
    for (int i = 0; i < 3; i++) {
        assert_true(strncmp(p[i], "weft_spans_p", 12) == 0);
        assert_int_equal(strlen(p[i]), strlen("weft_spans_p20261128"));
    }
    assert_string_equal(p[3], "weft_spans_default");
    assert_int_equal(count_of(f, "SELECT count(*) FROM pg_inherits"
                                 " WHERE inhparent = 'weft_spans'::regclass"),
                     6);
    /* Every partition has the parent's indexes (the key, service, name, errors, BRIN, GIN,
     * run id): seven each. */
    assert_int_equal(count_of(f, "SELECT count(*) FROM pg_indexes WHERE tablename = '"
                                 "weft_spans_default'"),
                     7);
    weft_exporter_free(ex);
}

static void
test_pg_hourly_partitions_are_named_by_hour(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[1];
    char p[64];

    weft_test_setenv("WEFT_TRACE_PARTITION_HOURS", "6");
    s[0] = make_span(TA, "0000000000000001", NULL, "x", 1700000000000000000ull, 1);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 1));
    /* 2023-11-14T22:13:20Z is in the 6-hour range from 18:00. */
    assert_string_equal(partition_of(f, "0000000000000001", p, sizeof(p)),
                        "weft_spans_p2023111418");
    weft_exporter_free(ex);
}

static void
test_pg_drop_before_drops_old_partitions_and_traces(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[5];
    uint64_t today = now_ns() / DAY * DAY;
    size_t dropped = 99;
    size_t deleted = 99;

    s[0] = make_span(TA, "0000000000000001", NULL, "old", today - 5 * DAY, 1);
    s[1] = make_span(TA, "0000000000000002", "0000000000000001", "old-0", 0, 1); /* default */
    s[2] = make_span(TB, "0000000000000001", NULL, "older", today - 6 * DAY, 1);
    s[3] = make_span(TC, "0000000000000001", NULL, "new", today + 60 * 1000 * MS, 1);
    s[4] = make_span(TC, "0000000000000002", "0000000000000001", "new-0", 0, 1); /* default */
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 5));
    weft_exporter_free(ex);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_traces"), 3);

    assert_weft_ok(weft__store_pg_drop_before(f->url, today - 4 * DAY, &dropped, &deleted, NULL));
    assert_int_equal(dropped, 2);
    assert_int_equal(deleted, 2);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_traces"), 1);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_traces WHERE trace_id = '" TC "'"), 1);
    /* The old trace's span in the default partition went with it; the new trace's stays. */
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 2);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans_default"), 1);
    assert_int_equal(count_of(f, "SELECT count(*) FROM pg_inherits"
                                 " WHERE inhparent = 'weft_spans'::regclass"),
                     4);
    /* Nothing more to drop. */
    assert_weft_ok(weft__store_pg_drop_before(f->url, today - 4 * DAY, &dropped, &deleted, NULL));
    assert_int_equal(dropped, 0);
    assert_int_equal(deleted, 0);
}

/* Retention collects the payload records no span left refers to, in its transaction: a text
 * only the dropped trace had goes, one the kept trace shares stays and reads back whole. */
static void
test_pg_drop_before_collects_payloads(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[2];
    struct weft_attr a[2][2];
    struct weft_store *store = NULL;
    struct weft_trace *tr = NULL;
    uint64_t today = now_ns() / DAY * DAY;
    char shared[20000];
    char own[20000];
    uint32_t x = 28;
    size_t dropped = 0;
    size_t deleted = 0;
    size_t payloads = 0;
    bool is_found = false;

    for (size_t i = 0; i < sizeof(shared) - 1; i++) { /* several chunks each (an LCG) */
        x = x * 1103515245u + 12345u;
        shared[i] = (char)('a' + (x >> 16) % 26);
        x = x * 1103515245u + 12345u;
        own[i] = (char)('A' + (x >> 16) % 26);
    }
    shared[sizeof(shared) - 1] = '\0';
    own[sizeof(own) - 1] = '\0';
    s[0] = make_span(TA, "0000000000000001", NULL, "old", today - 5 * DAY, 1);
    s[1] = make_span(TC, "0000000000000001", NULL, "new", today + 60 * 1000 * MS, 1);
    a[0][0] = weft_attr_str("gen_ai.input.messages", shared);
    a[0][1] = weft_attr_str("gen_ai.output.messages", own);
    a[1][0] = weft_attr_str("gen_ai.input.messages", shared);
    a[1][1] = weft_attr_str("weft.note", "short");
    for (int i = 0; i < 2; i++) {
        s[i].attrs = a[i];
        s[i].attr_count = 2;
    }
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 2));
    weft_exporter_free(ex);
    assert_true(count_of(f, "SELECT count(*) FROM weft_payloads") >= 4);
    assert_weft_ok(
        weft__store_pg_drop_before(f->url, today - 4 * DAY, &dropped, &deleted, &payloads));
    assert_int_equal(deleted, 1);
    assert_true(payloads >= 2); /* own's chunks and list */
    /* What is left is exactly what TC refers to: its text and the chunks of that text. */
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_payloads"),
                     count_of(f, "SELECT 1 + length(data) / 32 FROM weft_payloads WHERE kind = 1"));
    assert_weft_ok(weft_store_open(f->url, &store));
    assert_weft_ok(weft_store_load_trace(store, TC, &tr));
    for (size_t i = 0; i < weft_trace_span(tr, 0)->attr_count; i++) {
        const struct weft_attr *at = &weft_trace_span(tr, 0)->attrs[i];

        if (strcmp(at->key, "gen_ai.input.messages") == 0) {
            assert_string_equal(at->value.u.str, shared);
            is_found = true;
        }
    }
    assert_true(is_found);
    weft_trace_free(tr);
    weft_store_close(store);
}

/* Trace @p trace's summary row, every column, as one text. */
static const char *
summary_of(PGconn *conn, const char *trace, char *out, size_t len)
{
    char sql[200];
    PGresult *res = NULL;

    snprintf(sql, sizeof(sql), "SELECT t::text FROM weft_traces t WHERE trace_id = '%s'", trace);
    res = run_ok(conn, sql);
    snprintf(out, len, "%s", PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "(none)");
    PQclear(res);
    return out;
}

/* A trace with spans on two days, the older dropped: its summary is what a store holding
 * only the spans left computes from scratch, and what the read API gives; a trace whose
 * every span went with the partition (one long span that ended after the cutoff) has no
 * summary left. */
static void
test_pg_drop_before_recounts_a_trace_that_straddles_the_cutoff(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[6];
    uint64_t today = now_ns() / DAY * DAY;
    size_t dropped = 99;
    size_t deleted = 99;
    char fresh_url[256];
    char name[32];
    char got[1024];
    char want[1024];
    PGconn *fresh = NULL;
    struct weft_store *store = NULL;
    struct weft_trace_summary *list = NULL;
    struct weft_trace *page = NULL;
    size_t count = 0;
    size_t spans = 0;
    size_t errors = 0;

    s[0] = make_span(TA, "0000000000000001", NULL, "invoke_workflow straddle", today - 5 * DAY,
                     3 * 24 * 3600 * 1000ull);
    s[1] = make_span(TA, "0000000000000002", "0000000000000001", "plan old",
                     today - 5 * DAY + 10 * MS, 1);
    s[1].status_code = WEFT_STATUS_ERROR;
    s[2] =
        make_span(TA, "0000000000000003", "0000000000000001", "invoke_agent a", today - 3 * DAY, 1);
    s[2].status_code = WEFT_STATUS_ERROR;
    s[3] = make_span(TA, "0000000000000004", "0000000000000001", "invoke_agent b",
                     today - 3 * DAY + 5 * MS, 2);
    s[4] =
        make_span(TB, "0000000000000001", NULL, "long", today - 5 * DAY, 2 * 24 * 3600 * 1000ull);
    s[5] = make_span(TC, "0000000000000001", NULL, "new", today + 60 * 1000 * MS, 1);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 6));
    weft_exporter_free(ex);
    assert_int_equal(count_of(f, "SELECT span_count FROM weft_traces WHERE trace_id = '" TA "'"),
                     4);

    assert_weft_ok(weft__store_pg_drop_before(f->url, today - 4 * DAY, &dropped, &deleted, NULL));
    assert_int_equal(dropped, 1);
    assert_int_equal(deleted, 1); /* TB: no span left */
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_traces WHERE trace_id = '" TB "'"), 0);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans WHERE trace_id = '" TA "'"), 2);
    assert_int_equal(count_of(f, "SELECT span_count FROM weft_traces WHERE trace_id = '" TA "'"),
                     2);
    assert_int_equal(count_of(f, "SELECT error_count FROM weft_traces WHERE trace_id = '" TA "'"),
                     1);

    /* From scratch: a store that was only ever sent the spans left. */
    snprintf(name, sizeof(name), "fresh%u", ++databases);
    if (weft_test_pg_createdb(server, name, fresh_url, sizeof(fresh_url)) != 0) {
        fail_msg("createdb %s: %s", name, fresh_url);
    }
    assert_weft_ok(weft__store_pg_exporter_new(fresh_url, &ex));
    assert_weft_ok(export_batch(ex, &s[2], 2));
    weft_exporter_free(ex);
    fresh = PQconnectdb(fresh_url);
    assert_int_equal(PQstatus(fresh), CONNECTION_OK);
    assert_string_equal(summary_of(f->conn, TA, got, sizeof(got)),
                        summary_of(fresh, TA, want, sizeof(want)));
    PQfinish(fresh);

    /* What the explorer reads: the list (the summary) and the trace (its spans) agree. */
    assert_weft_ok(weft_store_open(f->url, &store));
    assert_weft_ok(weft_store_list_traces(store, 10, &list, &count));
    assert_int_equal(count, 2); /* TA and TC */
    assert_string_equal(list[1].trace_id, TA);
    assert_int_equal(list[1].span_count, 2);
    assert_int_equal(list[1].error_count, 1);
    assert_true(list[1].start_ns == today - 3 * DAY);
    assert_false(list[1].has_root);
    assert_string_equal(list[1].root_name, "invoke_agent a");
    assert_weft_ok(weft_store_load_page(store, TA, 0, 10, &page, &spans, &errors));
    assert_int_equal(spans, list[1].span_count);
    assert_int_equal(errors, list[1].error_count);
    assert_int_equal(weft_trace_span_count(page), 2);
    weft_trace_free(page);
    weft_trace_summaries_free(list, count);
    weft_store_close(store);
}

/* ------------------------------------------------------------------------------------------ */
/* Interrupted spans                                                                           */

static void
test_pg_interrupted_span_is_written_once(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[1];
    struct weft_interrupted_span root = {
        TA, "0000000000000001", NULL, "invoke_workflow wf", "run-7", T0, T0 - 5};
    struct weft_interrupted_span ended = {TA,      "0000000000000002", "0000000000000001", "again",
                                          "run-7", T0 + 9 * MS,        T0 + 20 * MS};
    struct weft_interrupted_span bad = {"xyz", "0000000000000002", NULL, NULL, NULL, 0, 0};
    char buf[256];

    s[0] = make_span(TA, "0000000000000002", "0000000000000001", "step", T0 + 10 * MS, 5);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 1));
    weft_exporter_free(ex);

    assert_weft_err(weft__store_pg_add_interrupted_span(f->url, &bad), WEFT_EINVAL);
    assert_weft_ok(weft__store_pg_add_interrupted_span(f->url, &root));
    assert_weft_ok(weft__store_pg_add_interrupted_span(f->url, &root));
    /* Over an existing span (another start): nothing. */
    assert_weft_ok(weft__store_pg_add_interrupted_span(f->url, &ended));
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 2);
    assert_string_equal(text_of(f,
                                "SELECT name FROM weft_spans WHERE span_id ="
                                " '0000000000000002'",
                                buf, sizeof(buf)),
                        "step");
    assert_string_equal(text_of(f,
                                "SELECT status_code || '|' || status_message || '|' ||"
                                " (attributes->>'weft.interrupted') || '|' || run_id || '|' ||"
                                " service_name || '|' || scope_name || '|' || end_ns - start_ns"
                                " FROM weft_spans WHERE span_id = '0000000000000001'",
                                buf, sizeof(buf)),
                        "2|interrupted|true|run-7|svc-pg|weft.runtime|0");
    assert_string_equal(text_of(f,
                                "SELECT span_count || '|' || error_count || '|' || root_name"
                                " || '|' || has_root FROM weft_traces",
                                buf, sizeof(buf)),
                        "2|1|invoke_workflow wf|true");
}

/* ------------------------------------------------------------------------------------------ */
/* Reads                                                                                       */

static void
test_pg_primitive_reads(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;
    struct weft_span_data s[5];
    struct weft_attr layer[2];
    struct rows r;
    const char *ids[3] = {"0000000000000003", "0000000000000001", "not hex"};

    layer[0] = weft_attr_str("weft.decision.layer", "circuit_breaker");
    layer[1] = weft_attr_str("other", "dropped by the outline");
    s[0] = make_span(TA, "0000000000000001", NULL, "a-root", T0, 10);
    s[1] = make_span(TA, "0000000000000002", "0000000000000001", "a-1", T0 + MS, 1);
    s[1].attrs = layer;
    s[1].attr_count = 2;
    s[2] = make_span(TA, "0000000000000003", "0000000000000001", "a-2", T0 + 2 * MS, 1);
    s[2].status_code = WEFT_STATUS_ERROR;
    s[3] = make_span(TB, "0000000000000001", NULL, "b-root", T0 + DAY, 10);
    s[4] = make_span(TC, "0000000000000001", NULL, "c-root", T0 + 2 * DAY, 10);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 5));
    open_reader(f, &ops, &impl);

    rows_init(&r, 8);
    assert_weft_ok(ops->list(impl, 2, collect, &r));
    assert_int_equal(r.n, 2);
    assert_string_equal(r.text[0][0], TC); /* newest first */
    assert_string_equal(r.text[1][0], TB);
    rows_cleanup(&r);

    rows_init(&r, 1);
    assert_weft_ok(ops->ids(impl, NULL, NULL, 10, collect, &r));
    assert_int_equal(r.n, 1);
    assert_string_equal(r.text[0][0], TC);
    rows_cleanup(&r);
    assert_weft_ok(ops->ids(impl, "aa", "aag", 10, collect, &r));
    assert_int_equal(r.n, 2);
    assert_string_equal(r.text[0][0], TA);
    assert_string_equal(r.text[1][0], TB);
    rows_cleanup(&r);
    assert_weft_ok(ops->ids(impl, "aa2", "aa2g", 10, collect, &r));
    assert_int_equal(r.n, 1);
    rows_cleanup(&r);

    rows_init(&r, MAX_COLS);
    assert_weft_ok(ops->spans(impl, TA, "0000000000000002", 10, false, collect, &r));
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text[0][WEFT__COL_ATTRS], "dropped by the outline"));
    rows_cleanup(&r);
    assert_weft_ok(ops->spans(impl, TA, NULL, 2, false, collect, &r));
    assert_int_equal(r.n, 2); /* the limit */
    rows_cleanup(&r);
    assert_weft_ok(ops->spans(impl, TA, NULL, 10, true, collect, &r));
    assert_int_equal(r.n, 3);
    assert_null(r.text[row_of(&r, "0000000000000001")][WEFT__COL_ATTRS]);
    assert_string_equal(r.text[row_of(&r, "0000000000000002")][WEFT__COL_ATTRS],
                        "{\"weft.decision.layer\": \"circuit_breaker\"}");
    assert_null(r.text[0][WEFT__COL_LINKS]);
    assert_non_null(r.text[0][WEFT__COL_EVENTS]);
    rows_cleanup(&r);

    assert_weft_ok(ops->begin(impl));
    rows_init(&r, 7);
    assert_weft_ok(ops->nodes(impl, TA, 100, false, collect, &r));
    assert_int_equal(r.n, 3);
    assert_string_equal(r.text[row_of(&r, "0000000000000003")][WEFT__NODE_PARENT],
                        "0000000000000001");
    assert_int_equal(r.num[row_of(&r, "0000000000000003")][WEFT__NODE_STATUS], 2);
    assert_string_equal(r.text[row_of(&r, "0000000000000003")][WEFT__NODE_NAME], "a-2");
    assert_int_equal(r.num[row_of(&r, "0000000000000003")][WEFT__NODE_START],
                     (int64_t)(T0 + 2 * MS));
    assert_null(r.text[row_of(&r, "0000000000000001")][WEFT__NODE_PARENT]);
    rows_cleanup(&r);
    /* Written during the read transaction: not seen by it. */
    s[0] = make_span(TA, "0000000000000007", "0000000000000001", "late", T0 + 3 * MS, 1);
    assert_weft_ok(export_batch(ex, s, 1));
    rows_init(&r, MAX_COLS);
    assert_weft_ok(ops->spans_by_id(impl, TA, ids, 3, collect, &r));
    assert_int_equal(r.n, 2);
    (void)row_of(&r, "0000000000000003");
    (void)row_of(&r, "0000000000000001");
    rows_cleanup(&r);
    rows_init(&r, 7);
    assert_weft_ok(ops->nodes(impl, TA, 100, false, collect, &r));
    assert_int_equal(r.n, 3);
    rows_cleanup(&r);
    ops->end(impl);
    assert_weft_ok(ops->nodes(impl, TA, 100, false, collect, &r));
    assert_int_equal(r.n, 4);
    rows_cleanup(&r);

    /* Reads of a trace without its summary row (retention) still find its spans. */
    PQclear(run_ok(f->conn, "DELETE FROM weft_traces WHERE trace_id = '" TA "'"));
    assert_weft_ok(ops->nodes(impl, TA, 100, false, collect, &r));
    assert_int_equal(r.n, 4);
    rows_cleanup(&r);
    assert_weft_ok(ops->nodes(impl, "ffff", 100, false, collect, &r));
    assert_int_equal(r.n, 0);
    assert_non_null(ops->errmsg(impl));

    ops->close(impl);
    weft_exporter_free(ex);
}

static weft_err
stop_at_first(const struct weft__store_row *row, void *user)
{
    (void)row;
    (*(int *)user)++;
    return WEFT_ELIMIT;
}

static void
test_pg_callback_error_stops_the_read(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;
    struct weft_span_data s[3];
    int calls = 0;

    three_spans(s);
    assert_weft_ok(weft__store_pg_exporter_new(f->url, &ex));
    assert_weft_ok(export_batch(ex, s, 3));
    open_reader(f, &ops, &impl);
    assert_weft_err(ops->nodes(impl, TC, 10, false, stop_at_first, &calls), WEFT_ELIMIT);
    assert_int_equal(calls, 1);
    ops->close(impl);
    weft_exporter_free(ex);
}

/* Out of memory anywhere in the writer or the reader fails cleanly (ASan checks for leaks),
 * and a failed batch leaves nothing behind: the spans end up stored and counted once. */
static void
test_pg_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    struct weft_span_data s[3];
    struct weft_attr a[2];
    const char *ids[2] = {"0000000000000001", "0000000000000002"};
    bool is_done = false;

    three_spans(s);
    a[0] = weft_attr_str("weft.run.id", "r-oom");
    a[1] = weft_attr_double("big", 1e30);
    s[1].attrs = a;
    s[1].attr_count = 2;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 2000 && !is_done; budget++) {
        struct weft_exporter *ex = NULL;
        const struct weft__store_reader_ops *ops = NULL;
        void *impl = NULL;
        struct rows r;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__store_pg_exporter_new(f->url, &ex);
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        if (err == WEFT_OK) {
            err = export_batch(ex, s, 3);
            assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        }
        weft_exporter_free(ex);
        if (err != WEFT_OK) {
            continue;
        }
        err = weft__store_pg_reader_open(f->url, &ops, &impl);
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        if (err == WEFT_OK) {
            rows_init(&r, MAX_COLS);
            err = ops->spans_by_id(impl, TC, ids, 2, collect, &r);
            assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
            assert_true(err != WEFT_OK || r.n == 2);
            rows_cleanup(&r);
            ops->close(impl);
        }
        is_done = err == WEFT_OK && failalloc_budget > 0;
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_spans"), 3);
    assert_int_equal(count_of(f, "SELECT span_count FROM weft_traces"), 3);
}

static void
test_pg_database_without_schema_is_not_found(void **state)
{
    struct fx *f = *state;
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;
    size_t dropped = 0;

    assert_weft_err(weft__store_pg_reader_open(f->url, &ops, &impl), WEFT_ENOTFOUND);
    assert_null(ops);
    assert_null(impl);
    assert_weft_err(weft__store_pg_drop_before(f->url, 1, &dropped, NULL, NULL), WEFT_ENOTFOUND);
    /* A newer schema is refused by both sides. */
    PQclear(run_ok(f->conn, "CREATE TABLE weft_span_schema (version INT PRIMARY KEY);"
                            " INSERT INTO weft_span_schema VALUES (99);"
                            " CREATE TABLE weft_spans (x INT)"));
    weft_test_capture_logs();
    assert_weft_err(weft__store_pg_reader_open(f->url, &ops, &impl), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "newer weft"));
    {
        struct weft_exporter *ex = NULL;

        assert_weft_err(weft__store_pg_exporter_new(f->url, &ex), WEFT_EIO);
        assert_null(ex);
    }
}

static void
test_pg_password_never_in_messages(void **state)
{
    struct fx *f = *state;
    const struct weft__store_reader_ops *ops = NULL;
    void *impl = NULL;
    struct weft_exporter *ex = NULL;
    struct weft_interrupted_span span = {TA, "0000000000000001", NULL, NULL, NULL, 1, 2};
    const char *url = "postgresql://u:secret@127.0.0.1:1/x?password=secret&sslmode=disable";
    char out[256];

    (void)f;
    weft__store_redact_url(url, out, sizeof(out));
    assert_string_equal(out, "postgresql://u:***@127.0.0.1:1/x?password=***&sslmode=disable");
    weft__store_redact_url("postgres://h/d?a=1&password=p@x#frag", out, sizeof(out));
    assert_string_equal(out, "postgres://h/d?a=1&password=***#frag");
    weft__store_redact_url("postgres://user@h/d", out, sizeof(out));
    assert_string_equal(out, "postgres://user@h/d");
    weft__store_redact_url("postgresql://u:a@b@h/d", out, sizeof(out));
    assert_string_equal(out, "postgresql://u:***@h/d");
    weft__store_redact_url("postgresql://u:a@b@h/d", out, 12);
    assert_string_equal(out, "postgresql:");

    weft_test_capture_logs();
    assert_weft_err(weft__store_pg_reader_open(url, &ops, &impl), WEFT_EIO);
    /* The exporter is made (the database may answer later); its batches fail meanwhile. */
    assert_weft_ok(weft__store_pg_exporter_new(url, &ex));
    {
        struct weft_span_data one = make_span(TA, "0000000000000001", NULL, "root", T0, 1);
        assert_weft_err(export_batch(ex, &one, 1), WEFT_EIO);
    }
    weft_exporter_free(ex);
    assert_weft_err(weft__store_pg_add_interrupted_span(url, &span), WEFT_EIO);
    assert_weft_err(weft__store_pg_drop_before(url, 1, NULL, NULL, NULL), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "store postgresql://u:***@127.0.0.1:1/x"));
    assert_non_null(strstr(weft_test_logs(), "cannot connect"));
    assert_null(strstr(weft_test_logs(), "secret"));
}

/* A span store that does not answer when the exporter is made (here: its database does not
 * exist yet) gets the batches sent once it answers; the ones before fail, counted by their
 * processor, and are not written later by surprise. */
static void
test_pg_exporter_writes_once_the_database_answers(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data a = make_span(TA, "0000000000000001", NULL, "root", T0, 1);
    struct weft_span_data b = make_span(TA, "0000000000000002", "0000000000000001", "kid", T0, 1);
    char url[512];
    char name[32];
    PGconn *c = NULL;
    PGresult *r = NULL;

    snprintf(name, sizeof(name), "late%u", ++databases);
    snprintf(url, sizeof(url), "%.*s/%s", (int)(strrchr(f->url, '/') - f->url), f->url, name);
    assert_weft_ok(weft__store_pg_exporter_new(url, &ex));
    assert_weft_err(export_batch(ex, &a, 1), WEFT_EIO);
    if (weft_test_pg_createdb(server, name, url, sizeof(url)) != 0) {
        fail_msg("createdb %s: %s", name, url);
    }
    assert_weft_ok(export_batch(ex, &b, 1));
    weft_exporter_free(ex);
    c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    r = PQexec(c, "SELECT span_id FROM weft_spans");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 0), "0000000000000002");
    PQclear(r);
    PQfinish(c);
}

struct seen_decision {
    size_t index;
    bool keep;
    char rule[48];
    int calls;
};

static void
on_seen(void *user, size_t index, bool keep, const char *rule)
{
    struct seen_decision *s = user;

    s->index = index;
    s->keep = keep;
    snprintf(s->rule, sizeof(s->rule), "%s", rule);
    s->calls++;
}

/* Tail sampling's shared decisions (store/decisions.c): the first claim of a trace stands for
 * every later claimer, on two connections as two weft serve processes would hold them, and a
 * lookup finds it for a trace decided, nothing for one not. */
static void
test_pg_sampling_decisions_first_claim_stands(void **state)
{
    struct fx *f = *state;
    struct weft__store_decisions *a = NULL;
    struct weft__store_decisions *b = NULL;
    const char *ids[] = {"00000000000000000000000000000abc", "00000000000000000000000000000def"};
    struct seen_decision seen = {0, false, "", 0};
    char rule[48];
    bool keep = false;

    assert_weft_ok(weft__store_decisions_open(f->url, &a));
    assert_weft_ok(weft__store_decisions_open(f->url, &b));
    assert_weft_ok(
        weft__store_decisions_claim(a, ids[0], true, "failed", &keep, rule, sizeof(rule)));
    assert_true(keep);
    assert_string_equal(rule, "failed");
    /* B decided otherwise, later: A's decision stands for B too. */
    assert_weft_ok(
        weft__store_decisions_claim(b, ids[0], false, "sample", &keep, rule, sizeof(rule)));
    assert_true(keep);
    assert_string_equal(rule, "failed");
    assert_weft_ok(weft__store_decisions_lookup(b, ids, 2, on_seen, &seen));
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.index, 0);
    assert_true(seen.keep);
    assert_string_equal(seen.rule, "failed");
    assert_int_equal(count_of(f, "SELECT count(*) FROM weft_trace_decisions"), 1);
    weft__store_decisions_close(a);
    weft__store_decisions_close(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pg_batch_round_trips_every_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_summary_names_the_trace_by_its_root, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_summary_prefers_a_remote_parent_root, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_batch_written_twice_is_stored_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_two_exporters_at_once_store_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_export_texts_uses_prebuilt_columns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_connection_is_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_exporter_writes_once_the_database_answers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_spans_of_three_days_land_in_three_partitions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_hourly_partitions_are_named_by_hour, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_drop_before_collects_payloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_drop_before_drops_old_partitions_and_traces, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_pg_drop_before_recounts_a_trace_that_straddles_the_cutoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_sampling_decisions_first_claim_stands, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_interrupted_span_is_written_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_primitive_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_callback_error_stops_the_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_out_of_memory_fails_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_database_without_schema_is_not_found, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_password_never_in_messages, setup, teardown),
    };

    return cmocka_run_group_tests(tests, start_server, stop_server);
}
