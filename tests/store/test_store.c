/* tests/store/test_store.c - the SQLite span store: schema and file modes, batches written
 * by the exporter and read back through include/weft/store.h (list order and counts, tree
 * order and rendering, "last", prefix resolution and ambiguity), typed attribute round trips,
 * replacement of duplicate spans, and the failure paths (bad path, foreign or newer
 * databases, out of memory). Span batches are built by hand, independent of the SDK. */
#include "support/failalloc.h"
#ifdef WEFT_TEST_STORE_PG
#include "support/pg_server.h"

#include <libpq-fe.h>
#endif
#include "support/store_spans.h"
#include "support/weft_test.h"

#include "base/buf.h"
#include "store/store.h"
#include "tracing/exporter.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <weft/store.h>

#define MS STORE_SPANS_MS
#define T0 STORE_SPANS_T0

#define make_span    store_spans_make
#define export_batch store_spans_export
#define hex_to_bytes store_spans_hex

/* ---- fixture --------------------------------------------------------------------------- */

struct fixture {
    char dir[64];
    char db[256];
    struct weft_exporter *ex;
    struct weft_store *store;
};

#ifdef WEFT_TEST_STORE_PG
static struct weft_test_pg *pg;

static int
pg_group_setup(void **state)
{
    char err[512] = "";

    (void)state;
    pg = weft_test_pg_start(NULL, err, sizeof(err));
    if (pg == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    return 0;
}

static int
pg_group_teardown(void **state)
{
    (void)state;
    weft_test_pg_stop(pg);
    return 0;
}
#endif

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-store-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
#ifdef WEFT_TEST_STORE_PG
    {
        static unsigned n;
        char name[32];
        snprintf(name, sizeof(name), "store%u", n++);
        assert_int_equal(weft_test_pg_createdb(pg, name, f->db, sizeof(f->db)), 0);
    }
#else
    snprintf(f->db, sizeof(f->db), "%s/home/weft.db", f->dir);
#endif
    assert_weft_ok(weft_store_exporter_new(f->db, &f->ex));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_store_close(f->store);
    weft_exporter_free(f->ex);
    weft_test_rmtree(f->dir);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    weft_set_allocator(NULL, NULL, NULL);
    free(f);
    return 0;
}

static struct weft_store *
open_store(struct fixture *f)
{
    weft_store_close(f->store);
    f->store = NULL;
    assert_weft_ok(weft_store_open(f->db, &f->store));
    return f->store;
}

#define TA "aa110000000000000000000000000001"
#define TB "aa220000000000000000000000000002"
#define TC "bb330000000000000000000000000003"

/* Trace TA (oldest): a workflow with a plan step and an agent whose tool call failed,
 * exported children first in two batches as a batch processor would deliver them. TB and TC
 * are single-span traces started later. */
static void
write_three_traces(struct fixture *f)
{
    struct weft_span_data a[4];
    struct weft_span_data others[2];

    a[0] = make_span(TA, "0000000000000004", "0000000000000003", "execute_tool search", 110, 200);
    a[0].kind = WEFT_SPAN_KIND_CLIENT;
    a[0].status_code = WEFT_STATUS_ERROR;
    a[0].status_message = "timeout";
    a[1] =
        make_span(TA, "0000000000000003", "0000000000000001", "invoke_agent researcher", 100, 300);
    a[1].status_code = WEFT_STATUS_ERROR;
    a[1].status_message = "tool failed";
    a[2] = make_span(TA, "0000000000000002", "0000000000000001", "plan supervisor", 10, 50);
    a[3] = make_span(TA, "0000000000000001", NULL, "invoke_workflow demo", 0, 500);
    assert_weft_ok(export_batch(f->ex, a, 2));
    assert_weft_ok(export_batch(f->ex, a + 2, 2));
    others[0] = make_span(TB, "00000000000000b1", NULL, "invoke_workflow second", 1000, 20);
    others[1] = make_span(TC, "00000000000000c1", NULL, "invoke_workflow third", 2000, 30);
    assert_weft_ok(export_batch(f->ex, others, 2));
}

static void
test_store_exporter_creates_private_wal_database(void **state)
{
    struct fixture *f = *state;
    char dir[160];
    struct stat st;
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;

    assert_string_equal(weft_exporter_name(f->ex), "store");
    snprintf(dir, sizeof(dir), "%s/home", f->dir);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(f->db, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 0), "wal");
    sqlite3_finalize(stmt);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(stmt, 0), 4);
    sqlite3_finalize(stmt);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(stmt, 0), 0x77656674);
    sqlite3_finalize(stmt);
    /* No index on spans but the primary key's, which also keeps trace loads off full scans
     * (each index costs every span written a b-tree insert). */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(name) FROM sqlite_master"
                                        " WHERE type = 'index' AND tbl_name = 'spans'",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 0), "sqlite_autoindex_spans_1");
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

/* A store an older weft wrote carries the spans_start and spans_trace_start indexes: the
 * writer drops them when it opens the store, and the spans stay. */
static void
test_store_writer_drops_the_old_time_indexes(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data a[1];
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;

    a[0] = make_span(TA, "0000000000000001", NULL, "invoke_workflow old", 0, 10);
    assert_weft_ok(export_batch(f->ex, a, 1));
    weft_exporter_free(f->ex);
    f->ex = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE INDEX spans_start ON spans (start_ns);"
                                  "CREATE INDEX spans_trace_start ON spans (trace_id, start_ns)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);

    assert_weft_ok(weft_store_exporter_new(f->db, &f->ex));
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT (SELECT count(*) FROM sqlite_master"
                                        " WHERE name IN ('spans_start', 'spans_trace_start')),"
                                        " (SELECT count(*) FROM spans)",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(stmt, 0), 0);
    assert_int_equal(sqlite3_column_int(stmt, 1), 1);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

static void
test_store_list_returns_newest_first_with_counts(void **state)
{
    struct fixture *f = *state;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;

    write_three_traces(f);
    assert_weft_ok(weft_store_list_traces(open_store(f), 0, &list, &n));
    assert_int_equal(n, 3);
    assert_string_equal(list[0].trace_id, TC);
    assert_string_equal(list[1].trace_id, TB);
    assert_string_equal(list[2].trace_id, TA);
    assert_string_equal(list[2].root_name, "invoke_workflow demo");
    assert_string_equal(list[2].service_name, "svc-store");
    assert_int_equal(list[2].span_count, 4);
    assert_int_equal(list[2].error_count, 2);
    assert_true(list[2].has_root);
    assert_int_equal(list[2].start_ns, T0);
    assert_int_equal(list[2].end_ns - list[2].start_ns, 500 * MS);
    assert_int_equal(list[0].span_count, 1);
    assert_int_equal(list[0].error_count, 0);
    weft_trace_summaries_free(list, n);
}

static void
test_store_list_honours_limit_and_empty_store(void **state)
{
    struct fixture *f = *state;
    struct weft_trace_summary *list = NULL;
    size_t n = 99;

    assert_weft_ok(weft_store_list_traces(open_store(f), 5, &list, &n));
    assert_int_equal(n, 0);
    assert_null(list);
    write_three_traces(f);
    assert_weft_ok(weft_store_list_traces(f->store, 2, &list, &n));
    assert_int_equal(n, 2);
    assert_string_equal(list[0].trace_id, TC);
    assert_string_equal(list[1].trace_id, TB);
    weft_trace_summaries_free(list, n);
}

static void
test_store_load_returns_spans_in_tree_order(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *trace = NULL;
    const char *names[] = {"invoke_workflow demo", "plan supervisor", "invoke_agent researcher",
                           "execute_tool search"};
    const size_t depths[] = {0, 1, 1, 2};
    const struct weft_span_data *tool = NULL;

    write_three_traces(f);
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    assert_int_equal(weft_trace_span_count(trace), 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(weft_trace_span(trace, i)->name, names[i]);
        assert_int_equal(weft_trace_span_depth(trace, i), depths[i]);
    }
    assert_null(weft_trace_span(trace, 4));
    tool = weft_trace_span(trace, 3);
    assert_int_equal(tool->kind, WEFT_SPAN_KIND_CLIENT);
    assert_int_equal(tool->status_code, WEFT_STATUS_ERROR);
    assert_string_equal(tool->status_message, "timeout");
    assert_true(tool->has_parent);
    assert_int_equal(tool->parent_span_id[7], 3);
    assert_int_equal(tool->start_time_ns, T0 + 110 * MS);
    assert_int_equal(tool->end_time_ns, T0 + 310 * MS);
    assert_string_equal(tool->scope->name, "weft.test");
    assert_string_equal(tool->scope->version, "1.2.3");
    assert_int_equal(tool->resource->attr_count, 1);
    assert_string_equal(tool->resource->attrs[0].key, "service.name");
    assert_string_equal(tool->resource->attrs[0].value.u.str, "svc-store");
    assert_false(weft_trace_span(trace, 0)->has_parent);
    weft_trace_free(trace);
}

/* With no time index, the reader orders a trace's spans itself: by start time whatever their
 * ids, and spans that tie on start, end and name by span id, as the index did. */
static void
test_store_load_orders_by_time_then_span_id(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *trace = NULL;
    struct weft_span_data s[5];

    s[0] = make_span(TA, "0000000000000009", NULL, "invoke_workflow root", 0, 100);
    s[1] = make_span(TA, "0000000000000008", "0000000000000009", "late", 50, 10);
    s[2] = make_span(TA, "0000000000000007", "0000000000000009", "tie", 20, 10);
    s[3] = make_span(TA, "0000000000000006", "0000000000000009", "tie", 20, 10);
    s[4] = make_span(TA, "000000000000000a", "0000000000000009", "early", 10, 10);
    assert_weft_ok(export_batch(f->ex, s, 5));
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    assert_int_equal(weft_trace_span_count(trace), 5);
    assert_string_equal(weft_trace_span(trace, 0)->name, "invoke_workflow root");
    assert_string_equal(weft_trace_span(trace, 1)->name, "early");
    assert_int_equal(weft_trace_span(trace, 2)->span_id[7], 0x06);
    assert_int_equal(weft_trace_span(trace, 3)->span_id[7], 0x07);
    assert_string_equal(weft_trace_span(trace, 4)->name, "late");
    weft_trace_free(trace);
}

/* The outline keeps ids, names, times, status and events, and of the attributes only
 * weft.decision.layer; one span loads whole, alone. */
static void
test_store_outline_and_one_span(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data s[2];
    struct weft_attr attrs[2] = {weft_attr_str("weft.decision.layer", "circuit_breaker"),
                                 weft_attr_str("gen_ai.prompt", "a long prompt")};
    struct weft_attr other[1] = {weft_attr_str("gen_ai.prompt", "another prompt")};
    struct weft_trace *trace = NULL;
    const struct weft_span_data *x = NULL;

    s[0] = make_span(TA, "0000000000000001", NULL, "invoke_workflow demo", 0, 500);
    s[0].attrs = other;
    s[0].attr_count = 1;
    s[1] = make_span(TA, "0000000000000002", "0000000000000001", "plan supervisor", 10, 50);
    s[1].attrs = attrs;
    s[1].attr_count = 2;
    s[1].status_code = WEFT_STATUS_ERROR;
    assert_weft_ok(export_batch(f->ex, s, 2));
    assert_weft_ok(weft_store_load_outline(open_store(f), TA, &trace));
    assert_int_equal(weft_trace_span_count(trace), 2);
    assert_int_equal(weft_trace_span(trace, 0)->attr_count, 0);
    x = weft_trace_span(trace, 1);
    assert_string_equal(x->name, "plan supervisor");
    assert_int_equal(weft_trace_span_depth(trace, 1), 1);
    assert_int_equal(x->status_code, WEFT_STATUS_ERROR);
    assert_int_equal(x->attr_count, 1);
    assert_string_equal(x->attrs[0].key, "weft.decision.layer");
    assert_string_equal(x->attrs[0].value.u.str, "circuit_breaker");
    weft_trace_free(trace);
    assert_weft_ok(weft_store_load_span(f->store, TA, "0000000000000002", &trace));
    assert_int_equal(weft_trace_span_count(trace), 1);
    assert_int_equal(weft_trace_span(trace, 0)->attr_count, 2);
    assert_string_equal(weft_trace_span(trace, 0)->name, "plan supervisor");
    weft_trace_free(trace);
    assert_weft_err(weft_store_load_span(f->store, TA, "00000000000000ff", &trace), WEFT_ENOTFOUND);
    assert_weft_err(weft_store_load_span(f->store, TA, "nothex", &trace), WEFT_EINVAL);
}

/* Render into a memory stream; the text goes to *@p text (free with free()). The stream writes
 * the caller's pointer itself: returned from a local, GCC 12 at -O2 took pointers into the text
 * for pointers to that local (-Wdangling-pointer). */
static void
render_into(const struct weft_trace *trace, unsigned flags, char **text)
{
    size_t len = 0;
    FILE *out = open_memstream(text, &len);

    assert_non_null(out);
    assert_weft_ok(weft_trace_render(trace, out, flags));
    fclose(out);
}

static void
test_store_render_draws_tree_with_durations_and_errors(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *trace = NULL;
    char *text = NULL;
    const char *root = NULL;
    const char *plan = NULL;
    const char *agent = NULL;
    const char *tool = NULL;

    write_three_traces(f);
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    render_into(trace, 0, &text);
    /* Header: id, service, total duration, span and error counts. */
    assert_non_null(strstr(text, "trace " TA));
    assert_non_null(strstr(text, "service=svc-store"));
    assert_non_null(strstr(text, "start=2023-11-14T22:13:20.000Z"));
    assert_non_null(strstr(text, "duration=500ms"));
    assert_non_null(strstr(text, "spans=4"));
    assert_non_null(strstr(text, "errors=2"));
    root = strstr(text, "\ninvoke_workflow demo ");
    plan = strstr(text, "\n\xe2\x94\x9c\xe2\x94\x80 plan supervisor ");
    agent = strstr(text, "\n\xe2\x94\x94\xe2\x94\x80 invoke_agent researcher ");
    tool = strstr(text, "\n   \xe2\x94\x94\xe2\x94\x80 execute_tool search (client) ");
    assert_non_null(root);
    assert_non_null(plan);
    assert_non_null(agent);
    assert_non_null(tool);
    assert_true(root < plan && plan < agent && agent < tool);
    assert_non_null(strstr(agent, "300ms  ERROR: tool failed\n"));
    assert_non_null(strstr(tool, "200ms  ERROR: timeout\n"));
    assert_non_null(strstr(plan, "50.0ms\n"));
    assert_null(strstr(text, "\x1b["));
    free(text);

    render_into(trace, WEFT_RENDER_COLOR | WEFT_RENDER_ASCII, &text);
    assert_non_null(strstr(text, "\x1b[31mERROR: timeout\x1b[0m"));
    assert_non_null(strstr(text, "\n|- plan supervisor"));
    assert_non_null(strstr(text, "\n   `- execute_tool search"));
    free(text);
    weft_trace_free(trace);
}

static void
test_store_resolve_last_is_the_newest_trace(void **state)
{
    struct fixture *f = *state;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];

    assert_weft_err(weft_store_resolve(open_store(f), "last", id), WEFT_ENOTFOUND);
    assert_non_null(strstr(weft_store_errmsg(f->store), "no traces"));
    write_three_traces(f);
    assert_weft_ok(weft_store_resolve(f->store, "last", id));
    assert_string_equal(id, TC);
    assert_string_equal(weft_store_errmsg(f->store), "");
}

static void
test_store_resolve_accepts_unique_prefix_in_any_case(void **state)
{
    struct fixture *f = *state;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];

    write_three_traces(f);
    assert_weft_ok(weft_store_resolve(open_store(f), "b", id));
    assert_string_equal(id, TC);
    assert_weft_ok(weft_store_resolve(f->store, "AA2", id));
    assert_string_equal(id, TB);
    assert_weft_ok(weft_store_resolve(f->store, TA, id));
    assert_string_equal(id, TA);
}

/* weft_store_trace_stamp(): the trace's summary (as listed) by its full id; an id no trace has
 * is WEFT_ENOTFOUND, a prefix WEFT_EINVAL. */
static void
test_store_trace_stamp_is_the_summary_of_one_trace(void **state)
{
    struct fixture *f = *state;
    struct weft_trace_summary *list = NULL;
    struct weft_trace_stamp st;
    size_t count = 0;

    write_three_traces(f);
    assert_weft_ok(weft_store_list_traces(open_store(f), 10, &list, &count));
    assert_int_equal(count, 3);
    for (size_t i = 0; i < count; i++) {
        assert_weft_ok(weft_store_trace_stamp(f->store, list[i].trace_id, &st));
        assert_true(st.is_found);
        assert_int_equal(st.span_count, list[i].span_count);
        assert_int_equal(st.error_count, list[i].error_count);
        assert_int_equal(st.start_ns, list[i].start_ns);
        assert_int_equal(st.end_ns, list[i].end_ns);
    }
    weft_trace_summaries_free(list, count);
    assert_weft_err(weft_store_trace_stamp(f->store, "ffffffffffffffffffffffffffffffff", &st),
                    WEFT_ENOTFOUND);
    assert_false(st.is_found);
    assert_weft_err(weft_store_trace_stamp(f->store, "aa", &st), WEFT_EINVAL);
}

static void
test_store_resolve_ambiguous_prefix_names_candidates(void **state)
{
    struct fixture *f = *state;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];

    write_three_traces(f);
    assert_weft_err(weft_store_resolve(open_store(f), "aa", id), WEFT_EINVAL);
    assert_string_equal(id, "");
    assert_non_null(strstr(weft_store_errmsg(f->store), "ambiguous"));
    assert_non_null(strstr(weft_store_errmsg(f->store), TA));
    assert_non_null(strstr(weft_store_errmsg(f->store), TB));
}

static void
test_store_resolve_rejects_unknown_and_malformed_refs(void **state)
{
    struct fixture *f = *state;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];

    write_three_traces(f);
    assert_weft_err(weft_store_resolve(open_store(f), "cc", id), WEFT_ENOTFOUND);
    assert_non_null(strstr(weft_store_errmsg(f->store), "no trace matches 'cc'"));
    assert_weft_err(weft_store_resolve(f->store, "xyz", id), WEFT_EINVAL);
    assert_weft_err(weft_store_resolve(f->store, "", id), WEFT_EINVAL);
    assert_weft_err(weft_store_resolve(f->store, TA "0", id), WEFT_EINVAL);
    assert_weft_err(weft_store_resolve(f->store, NULL, id), WEFT_EINVAL);
    assert_weft_err(weft_store_load_trace(f->store, "aa11", NULL), WEFT_EINVAL);
}

static void
test_store_load_unknown_trace_is_not_found(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *trace = NULL;

    write_three_traces(f);
    assert_weft_err(
        weft_store_load_trace(open_store(f), "cccccccccccccccccccccccccccccccc", &trace),
        WEFT_ENOTFOUND);
    assert_null(trace);
}

static void
test_store_attribute_types_round_trip(void **state)
{
    struct fixture *f = *state;
    static const char *const strs[] = {"a", "b\"c", "\xc3\xa9t\xc3\xa9"};
    static const bool bools[] = {true, false, true};
    static const int64_t ints[] = {INT64_MIN, 0, INT64_MAX};
    static const double doubles[] = {1.0, -2.5, 0.1};
    static const double odd_doubles[] = {1.5, NAN};
    static const char embedded[] = {'a', '\0', 'b'};
    struct weft_attr attrs[] = {
        {"s", {WEFT_VALUE_STRING, 5, {.str = "hello"}}},
        {"nul", {WEFT_VALUE_STRING, 3, {.str = embedded}}},
        {"b", {WEFT_VALUE_BOOL, 0, {.b = true}}},
        {"i", {WEFT_VALUE_INT, 0, {.i = -42}}},
        {"d_whole", {WEFT_VALUE_DOUBLE, 0, {.d = 3.0}}},
        {"d", {WEFT_VALUE_DOUBLE, 0, {.d = 0.1}}},
        {"d_inf", {WEFT_VALUE_DOUBLE, 0, {.d = -INFINITY}}},
        {"sa", {WEFT_VALUE_STRING_ARRAY, 3, {.strs = strs}}},
        {"ba", {WEFT_VALUE_BOOL_ARRAY, 3, {.bools = bools}}},
        {"ia", {WEFT_VALUE_INT_ARRAY, 3, {.ints = ints}}},
        {"da", {WEFT_VALUE_DOUBLE_ARRAY, 3, {.doubles = doubles}}},
        {"da_nan", {WEFT_VALUE_DOUBLE_ARRAY, 2, {.doubles = odd_doubles}}},
        {"ia_empty", {WEFT_VALUE_INT_ARRAY, 0, {.ints = ints}}},
    };
    struct weft_attr ev_attrs[] = {{"exception.message", {WEFT_VALUE_STRING, 4, {.str = "boom"}}}};
    struct weft_event_data event = {T0 + 5 * MS, "exception", ev_attrs, 1, 2};
    struct weft_attr link_attrs[] = {{"weft.replan.from", {WEFT_VALUE_INT, 0, {.i = 7}}}};
    struct weft_link_data link = {{0}, {0}, "k=v", 1, true, link_attrs, 1, 0};
    struct weft_span_data span = make_span(TA, "0000000000000001", NULL, "typed", 0, 10);
    struct weft_trace *trace = NULL;
    const struct weft_span_data *got = NULL;
    const struct weft_value *v = NULL;

    hex_to_bytes(TB, link.trace_id, WEFT_TRACE_ID_SIZE);
    hex_to_bytes("00000000000000b1", link.span_id, WEFT_SPAN_ID_SIZE);
    span.attrs = attrs;
    span.attr_count = sizeof(attrs) / sizeof(attrs[0]);
    span.dropped_attrs = 3;
    span.events = &event;
    span.event_count = 1;
    span.dropped_events = 4;
    span.links = &link;
    span.link_count = 1;
    span.dropped_links = 5;
    span.trace_state = "vendor=1";
    assert_weft_ok(export_batch(f->ex, &span, 1));
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    got = weft_trace_span(trace, 0);
    assert_int_equal(got->attr_count, span.attr_count);
    for (size_t i = 0; i < span.attr_count; i++) {
        assert_string_equal(got->attrs[i].key, attrs[i].key); /* recorded order kept */
    }
    v = weft_span_data_attr(got, "s");
    assert_int_equal(v->type, WEFT_VALUE_STRING);
    assert_int_equal(v->len, 5);
    assert_string_equal(v->u.str, "hello");
    v = weft_span_data_attr(got, "nul");
    assert_int_equal(v->len, 3);
    assert_memory_equal(v->u.str, embedded, 3);
    v = weft_span_data_attr(got, "b");
    assert_int_equal(v->type, WEFT_VALUE_BOOL);
    assert_true(v->u.b);
    v = weft_span_data_attr(got, "i");
    assert_int_equal(v->type, WEFT_VALUE_INT);
    assert_int_equal(v->u.i, -42);
    v = weft_span_data_attr(got, "d_whole");
    assert_int_equal(v->type, WEFT_VALUE_DOUBLE); /* not read back as an int */
    assert_true(v->u.d == 3.0);
    v = weft_span_data_attr(got, "d");
    assert_true(v->u.d == 0.1); /* exact: 17 significant digits */
    v = weft_span_data_attr(got, "d_inf");
    assert_int_equal(v->type, WEFT_VALUE_DOUBLE);
    assert_true(isinf(v->u.d) && v->u.d < 0);
    v = weft_span_data_attr(got, "sa");
    assert_int_equal(v->type, WEFT_VALUE_STRING_ARRAY);
    assert_int_equal(v->len, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(v->u.strs[i], strs[i]);
    }
    v = weft_span_data_attr(got, "ba");
    assert_int_equal(v->type, WEFT_VALUE_BOOL_ARRAY);
    assert_memory_equal(v->u.bools, bools, sizeof(bools));
    v = weft_span_data_attr(got, "ia");
    assert_int_equal(v->type, WEFT_VALUE_INT_ARRAY);
    assert_memory_equal(v->u.ints, ints, sizeof(ints));
    v = weft_span_data_attr(got, "da");
    assert_int_equal(v->type, WEFT_VALUE_DOUBLE_ARRAY);
    assert_memory_equal(v->u.doubles, doubles, sizeof(doubles));
    v = weft_span_data_attr(got, "da_nan");
    assert_int_equal(v->type, WEFT_VALUE_DOUBLE_ARRAY);
    assert_int_equal(v->len, 2);
    assert_true(v->u.doubles[0] == 1.5 && isnan(v->u.doubles[1]));
    v = weft_span_data_attr(got, "ia_empty");
    assert_int_equal(v->type, WEFT_VALUE_INT_ARRAY);
    assert_int_equal(v->len, 0);
    assert_int_equal(got->dropped_attrs, 3);
    assert_int_equal(got->dropped_events, 4);
    assert_int_equal(got->dropped_links, 5);
    assert_string_equal(got->trace_state, "vendor=1");

    assert_int_equal(got->event_count, 1);
    assert_string_equal(got->events[0].name, "exception");
    assert_int_equal(got->events[0].time_ns, T0 + 5 * MS);
    assert_int_equal(got->events[0].dropped_attrs, 2);
    assert_int_equal(got->events[0].attr_count, 1);
    assert_string_equal(got->events[0].attrs[0].value.u.str, "boom");

    assert_int_equal(got->link_count, 1);
    assert_memory_equal(got->links[0].trace_id, link.trace_id, WEFT_TRACE_ID_SIZE);
    assert_memory_equal(got->links[0].span_id, link.span_id, WEFT_SPAN_ID_SIZE);
    assert_string_equal(got->links[0].trace_state, "k=v");
    assert_true(got->links[0].is_remote);
    assert_int_equal(got->links[0].trace_flags, 1);
    assert_int_equal(got->links[0].attrs[0].value.type, WEFT_VALUE_INT);
    assert_int_equal(got->links[0].attrs[0].value.u.i, 7);
    weft_trace_free(trace);
}

static void
test_store_attributes_are_queryable_json(void **state)
{
    struct fixture *f = *state;
    struct weft_attr attrs[] = {
        {"gen_ai.usage.input_tokens", {WEFT_VALUE_INT, 0, {.i = 120}}},
    };
    struct weft_span_data span = make_span(TA, "0000000000000001", NULL, "chat", 0, 10);
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;

    span.attrs = attrs;
    span.attr_count = 1;
    assert_weft_ok(export_batch(f->ex, &span, 1));
    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT json_extract(attributes,"
                                        " '$.\"gen_ai.usage.input_tokens\"'),"
                                        " parent_span_id IS NULL, service_name FROM spans",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_int_equal(sqlite3_column_type(stmt, 0), SQLITE_INTEGER);
    assert_int_equal(sqlite3_column_int(stmt, 0), 120);
    assert_int_equal(sqlite3_column_int(stmt, 1), 1);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 2), "svc-store");
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

static void
test_store_invalid_utf8_is_replaced_not_lost(void **state)
{
    struct fixture *f = *state;
    struct weft_attr attrs[] = {
        {"tool.output",
         {WEFT_VALUE_STRING,
          3,
          {.str = "a\xff"
                  "b"}}},
        {"bad\xfekey", {WEFT_VALUE_INT, 0, {.i = 1}}},
    };
    struct weft_span_data span = make_span(TA, "0000000000000001", NULL, "tool", 0, 10);
    struct weft_trace *trace = NULL;
    const struct weft_span_data *got = NULL;

    span.attrs = attrs;
    span.attr_count = 2;
    assert_weft_ok(export_batch(f->ex, &span, 1));
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    got = weft_trace_span(trace, 0);
    assert_int_equal(got->attr_count, 2);
    assert_string_equal(weft_span_data_attr(got, "tool.output")->u.str, "a\xef\xbf\xbd"
                                                                        "b");
    assert_string_equal(got->attrs[1].key, "bad\xef\xbf\xbdkey");
    weft_trace_free(trace);
}

static void
test_store_duplicate_span_is_replaced(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data span = make_span(TA, "0000000000000001", NULL, "first", 0, 10);
    struct weft_trace_summary *list = NULL;
    struct weft_trace *trace = NULL;
    size_t n = 0;

    assert_weft_ok(export_batch(f->ex, &span, 1));
    span.name = "second";
    span.status_code = WEFT_STATUS_ERROR;
    span.status_message = "late failure";
    assert_weft_ok(export_batch(f->ex, &span, 1));
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    assert_int_equal(weft_trace_span_count(trace), 1);
    assert_string_equal(weft_trace_span(trace, 0)->name, "second");
    assert_string_equal(weft_trace_span(trace, 0)->status_message, "late failure");
    weft_trace_free(trace);
    assert_weft_ok(weft_store_list_traces(f->store, 10, &list, &n));
    assert_int_equal(n, 1);
    assert_int_equal(list[0].span_count, 1);
    assert_int_equal(list[0].error_count, 1);
    assert_string_equal(list[0].root_name, "second");
    weft_trace_summaries_free(list, n);
}

static void
test_store_summary_follows_root_arriving_late(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data child =
        make_span(TA, "0000000000000002", "0000000000000001", "step", 10, 10);
    struct weft_span_data root = make_span(TA, "0000000000000001", NULL, "workflow", 0, 100);
    struct weft_trace_summary *list = NULL;
    size_t n = 0;

    assert_weft_ok(export_batch(f->ex, &child, 1));
    assert_weft_ok(weft_store_list_traces(open_store(f), 10, &list, &n));
    assert_int_equal(n, 1);
    assert_false(list[0].has_root);
    assert_string_equal(list[0].root_name, "step");
    weft_trace_summaries_free(list, n);
    assert_weft_ok(export_batch(f->ex, &root, 1));
    assert_weft_ok(weft_store_list_traces(f->store, 10, &list, &n));
    assert_true(list[0].has_root);
    assert_string_equal(list[0].root_name, "workflow");
    assert_int_equal(list[0].span_count, 2);
    assert_int_equal(list[0].end_ns - list[0].start_ns, 100 * MS);
    weft_trace_summaries_free(list, n);
}

/* Every row of @p sql as "a|b|c\n" lines (NULL as "NULL"), into @p out. */
static void
query_text(const char *db_path, const char *sql, char *out, size_t out_len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    size_t used = 0;

    out[0] = '\0';
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(stmt); c++) {
            const char *v = (const char *)sqlite3_column_text(stmt, c);

            used += (size_t)snprintf(out + used, out_len - used, "%s%c", v != NULL ? v : "NULL",
                                     c + 1 < sqlite3_column_count(stmt) ? '|' : '\n');
            assert_true(used < out_len);
        }
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

/* The summary rows as recomputing them from the spans gives (the writer's summary_sql). */
#define ROOT_ORDER_SQL \
    " ORDER BY (parent_span_id IS NULL) DESC, parent_is_remote DESC, start_ns, span_id LIMIT 1)"
static const char summary_oracle_sql[] =
    "SELECT trace_id, MIN(start_ns), MAX(end_ns), COUNT(*), SUM(status_code = 2),"
    " (SELECT name FROM spans s2 WHERE s2.trace_id = s.trace_id" ROOT_ORDER_SQL ","
    " (SELECT service_name FROM spans s2 WHERE s2.trace_id = s.trace_id" ROOT_ORDER_SQL ","
    " EXISTS (SELECT 1 FROM spans s2 WHERE s2.trace_id = s.trace_id"
    " AND (parent_span_id IS NULL OR parent_is_remote))"
    " FROM spans s GROUP BY trace_id ORDER BY trace_id";

/* The writer keeps each trace's summary incrementally (a new trace from its batch, roots
 * arriving late, replaced spans); whatever the batches, the rows equal a recomputation. */
static void
test_store_incremental_summary_matches_recomputation(void **state)
{
    static const char *const traces[] = {TA, TB, TC};
    static const char *const names[] = {"workflow", "step", "tool", "late"};
    static const uint64_t starts[] = {0, 5, 5, 10, 40};
    static const struct weft_attr other_attrs[] = {
        {"service.name", {WEFT_VALUE_STRING, 5, {.str = "other"}}},
    };
    static const struct weft_resource other = {other_attrs, 1, 0, NULL};
    static const struct weft_resource no_service = {NULL, 0, 0, NULL};
    struct fixture *f = *state;
    uint64_t rng = 42;
    char got[8192];
    char want[8192];

    for (int round = 0; round < 300; round++) {
        struct weft_span_data batch[8];
        size_t n = 1 + (size_t)(round % 8);

        for (size_t i = 0; i < n; i++) {
            char span_hex[17];
            char parent_hex[17];
            unsigned kind = 0;

            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            kind = (unsigned)(rng >> 60) % 4;
            snprintf(span_hex, sizeof(span_hex), "%016x", 1 + (unsigned)(rng >> 40) % 12);
            snprintf(parent_hex, sizeof(parent_hex), "%016x",
                     kind == 1 ? 0u : 1 + (unsigned)(rng >> 36) % 12);
            batch[i] = make_span(traces[(rng >> 33) % 3], span_hex, kind == 0 ? NULL : parent_hex,
                                 names[(rng >> 20) % 4], starts[(rng >> 24) % 5], (rng >> 28) % 50);
            batch[i].parent_is_remote = kind == 3;
            batch[i].status_code = (rng >> 18) % 4 == 0 ? WEFT_STATUS_ERROR : WEFT_STATUS_OK;
            batch[i].resource = (rng >> 16) % 3 == 0   ? &other
                                : (rng >> 16) % 3 == 1 ? &no_service
                                                       : &store_spans_resource;
            if ((rng >> 14) % 40 == 0) {
                batch[i].start_time_ns = UINT64_MAX - (rng >> 50); /* clamped when stored */
                batch[i].end_time_ns = UINT64_MAX;
            }
        }
        assert_weft_ok(export_batch(f->ex, batch, n));
        query_text(f->db,
                   "SELECT trace_id, start_ns, end_ns, span_count, error_count, root_name,"
                   " service_name, has_root FROM traces ORDER BY trace_id",
                   got, sizeof(got));
        query_text(f->db, summary_oracle_sql, want, sizeof(want));
        if (strcmp(got, want) != 0) {
            fail_msg("round %d: summary\n%s\nrecomputed\n%s", round, got, want);
        }
    }
}

static void
test_store_orphans_and_cycles_are_listed_once_as_roots(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data spans[4];
    struct weft_trace *trace = NULL;
    char *text = NULL;

    /* b1 has a parent that was never exported; c1 and c2 name each other as parents. */
    spans[0] = make_span(TA, "0000000000000001", NULL, "root", 0, 100);
    spans[1] = make_span(TA, "00000000000000b1", "00000000000000ff", "orphan", 20, 10);
    spans[2] = make_span(TA, "00000000000000c1", "00000000000000c2", "cycle one", 30, 10);
    spans[3] = make_span(TA, "00000000000000c2", "00000000000000c1", "cycle two", 40, 10);
    assert_weft_ok(export_batch(f->ex, spans, 4));
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    assert_int_equal(weft_trace_span_count(trace), 4);
    assert_string_equal(weft_trace_span(trace, 0)->name, "root");
    assert_string_equal(weft_trace_span(trace, 1)->name, "orphan");
    assert_int_equal(weft_trace_span_depth(trace, 1), 0);
    assert_string_equal(weft_trace_span(trace, 2)->name, "cycle one");
    assert_int_equal(weft_trace_span_depth(trace, 2), 0);
    assert_string_equal(weft_trace_span(trace, 3)->name, "cycle two");
    assert_int_equal(weft_trace_span_depth(trace, 3), 1);
    render_into(trace, 0, &text);
    assert_non_null(strstr(text, "\norphan "));
    assert_non_null(strstr(text, "(parent span missing)"));
    free(text);
    weft_trace_free(trace);
}

static void
test_store_render_replaces_control_characters(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data span = make_span(TA, "0000000000000001", NULL, "evil\x1b[2Jname", 0, 10);
    struct weft_trace *trace = NULL;
    char *text = NULL;

    span.status_code = WEFT_STATUS_ERROR;
    span.status_message = "line one\nline two\x07";
    assert_weft_ok(export_batch(f->ex, &span, 1));
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    render_into(trace, 0, &text);
    assert_null(strchr(text, '\x1b'));
    assert_null(strchr(text, '\x07'));
    assert_non_null(strstr(text, "evil?[2Jname"));
    assert_non_null(strstr(text, "ERROR: line one line two?"));
    free(text);
    weft_trace_free(trace);
}

static void
test_store_bad_path_returns_eio_and_logs_it(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    char file[160];
    char path[200];
    FILE *fp = NULL;

    snprintf(file, sizeof(file), "%s/plain-file", f->dir);
    fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/sub/weft.db", file);
    weft_test_capture_logs();
    assert_weft_err(weft_store_exporter_new(path, &ex), WEFT_EIO);
    assert_null(ex);
    assert_non_null(strstr(weft_test_logs(), path));
    /* A directory where the database should be: SQLite itself refuses it. */
    weft_test_clear_logs();
    assert_weft_err(weft_store_exporter_new(f->dir, &ex), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), f->dir));
    assert_weft_err(weft_store_exporter_new("", &ex), WEFT_EINVAL);
    assert_weft_err(weft_store_exporter_new(path, NULL), WEFT_EINVAL);
}

static void
test_store_open_missing_database_is_not_found(void **state)
{
    struct fixture *f = *state;
    struct weft_store *store = NULL;
    char path[160];

    snprintf(path, sizeof(path), "%s/nothing/here.db", f->dir);
    assert_weft_err(weft_store_open(path, &store), WEFT_ENOTFOUND);
    assert_null(store);
    assert_weft_err(weft_store_open(path, NULL), WEFT_EINVAL);
}

static void
test_store_refuses_foreign_and_newer_databases(void **state)
{
    struct fixture *f = *state;
    struct weft_store *store = NULL;
    struct weft_exporter *ex = NULL;
    char path[160];
    sqlite3 *db = NULL;

    /* Another program's database: neither read nor extended with weft's tables. */
    snprintf(path, sizeof(path), "%s/other.db", f->dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    weft_test_capture_logs();
    assert_weft_err(weft_store_open(path, &store), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "not a weft span store"));
    weft_test_clear_logs();
    assert_weft_err(weft_store_exporter_new(path, &ex), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "not a weft span store"));
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "SELECT * FROM spans", NULL, NULL, NULL), SQLITE_ERROR);
    sqlite3_close(db);

    /* A store from a newer weft: refused by both sides rather than misread. */
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    weft_test_clear_logs();
    assert_weft_err(weft_store_exporter_new(f->db, &ex), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "newer weft"));
    assert_weft_err(weft_store_open(f->db, &store), WEFT_EIO);
    assert_null(store);
}

static void
test_store_export_after_shutdown_is_refused(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data span = make_span(TA, "0000000000000001", NULL, "late", 0, 10);

    assert_weft_ok(f->ex->ops->force_flush(f->ex->self, 0));
    assert_weft_ok(f->ex->ops->shutdown(f->ex->self, 0));
    assert_weft_err(export_batch(f->ex, &span, 1), WEFT_ESTATE);
}

static void
test_store_reader_sees_batches_written_after_open(void **state)
{
    struct fixture *f = *state;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;

    open_store(f); /* the reader is open before anything is written */
    write_three_traces(f);
    assert_weft_ok(weft_store_list_traces(f->store, 10, &list, &n));
    assert_int_equal(n, 3);
    weft_trace_summaries_free(list, n);
}

static void
test_store_default_path_uses_weft_home(void **state)
{
    char buf[256];
    char tiny[8];

    (void)state;
    weft_test_setenv("WEFT_HOME", "/srv/weft-home");
    assert_weft_ok(weft_store_default_path(buf, sizeof(buf)));
    assert_string_equal(buf, "/srv/weft-home/weft.db");
    assert_weft_err(weft_store_default_path(tiny, sizeof(tiny)), WEFT_EINVAL);
    weft_test_setenv("WEFT_HOME", "");
    assert_weft_ok(weft_store_default_path(buf, sizeof(buf)));
    assert_string_equal(buf, "./.weft/weft.db");
    weft_test_setenv("WEFT_HOME", NULL);
    assert_weft_ok(weft_store_default_path(buf, sizeof(buf)));
    assert_string_equal(buf, "./.weft/weft.db");
    assert_weft_err(weft_store_default_path(NULL, 10), WEFT_EINVAL);
}

/* ---- out of memory ---------------------------------------------------------------------- */

static void
test_store_load_and_render_fail_cleanly_out_of_memory(void **state)
{
    struct fixture *f = *state;
    bool is_done = false;

    write_three_traces(f);
    open_store(f);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 1000 && !is_done; budget++) {
        struct weft_trace *trace = NULL;
        FILE *out = fopen("/dev/null", "w");
        weft_err err = WEFT_OK;

        struct weft_trace_summary *list = NULL;
        size_t n = 0;

        failalloc_budget = budget;
        err = weft_store_list_traces(f->store, 10, &list, &n);
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        assert_true(err == WEFT_OK ? n == 3 : list == NULL && n == 0);
        weft_trace_summaries_free(list, n);
        err = weft_store_load_trace(f->store, TA, &trace);
        if (err == WEFT_OK) {
            err = weft_trace_render(trace, out, WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS);
            is_done = err == WEFT_OK;
        } else {
            assert_null(trace);
        }
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        weft_trace_free(trace);
        fclose(out);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
}

/* Each attempt writes a batch of a trace of its own: a batch that fails for want of memory
 * must leave nothing behind (one transaction per batch). */
static void
test_store_exporter_fails_cleanly_out_of_memory(void **state)
{
    struct fixture *f = *state;
    struct weft_attr attrs[] = {
        {"weft.step.id", {WEFT_VALUE_STRING, 2, {.str = "s1"}}},
        {"weft.ids", {WEFT_VALUE_INT_ARRAY, 2, {.ints = (const int64_t[]){1, 2}}}},
    };
    struct weft_event_data event = {T0, "exception", attrs, 2, 0};
    char path[160];
    bool is_done = false;

    snprintf(path, sizeof(path), "%s/oom/weft.db", f->dir);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 1000 && !is_done; budget++) {
        struct weft_exporter *ex = NULL;
        struct weft_store *store = NULL;
        struct weft_span_data spans[2];
        char trace[WEFT_TRACE_ID_HEX_LEN + 1];
        char found[WEFT_TRACE_ID_HEX_LEN + 1];
        weft_err err = WEFT_OK;

        snprintf(trace, sizeof(trace), "%032lx", budget + 1);
        spans[0] = make_span(trace, "0000000000000002", "0000000000000001", "child", 1, 5);
        spans[0].attrs = attrs;
        spans[0].attr_count = 2;
        spans[0].events = &event;
        spans[0].event_count = 1;
        spans[1] = make_span(trace, "0000000000000001", NULL, "root", 0, 10);
        spans[1].attrs = attrs;
        spans[1].attr_count = 2;
        failalloc_budget = budget;
        err = weft_store_exporter_new(path, &ex);
        if (err == WEFT_OK) {
            err = export_batch(ex, spans, 2);
            is_done = err == WEFT_OK;
        }
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        failalloc_budget = -1;
        weft_exporter_free(ex);
        if (weft_store_open(path, &store) == WEFT_OK) {
            assert_weft_err(weft_store_resolve(store, trace, found),
                            is_done ? WEFT_OK : WEFT_ENOTFOUND);
            weft_store_close(store);
        }
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
}

/* Processes that open one new store at the same moment (a run and its workers on one
 * WEFT_HOME) all get it: turning the file to WAL mode waits for the others. */
static void
test_store_concurrent_first_opens_all_succeed(void **state)
{
    struct fixture *f = *state;
    enum { N = 8, ROUNDS = 5 };

    for (int round = 0; round < ROUNDS; round++) {
        char path[600];
        pid_t pids[N];
        snprintf(path, sizeof(path), "%s/race%d.db", f->dir, round);
        for (int i = 0; i < N; i++) {
            pids[i] = fork();
            assert_true(pids[i] >= 0);
            if (pids[i] == 0) {
                struct weft_exporter *ex = NULL;
                weft_err err = weft_store_exporter_new(path, &ex);
                weft_exporter_free(ex);
                _exit(err == WEFT_OK ? 0 : 1);
            }
        }
        for (int i = 0; i < N; i++) {
            int status = -1;
            assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
        }
    }
}

/* ---- summarised rendering of large traces ------------------------------------------------- */

#define TD "dd440000000000000000000000000004"

static size_t
count_of(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

/* A plan of 5,000 spans: a root with 3,998 `invoke_agent coder` children (37 failed, one with a
 * stuck-loop event, one with a failed tool call below it) and 1,000 `plan supervisor`. */
static void
write_big_trace(struct fixture *f)
{
    static const struct weft_attr loop_attrs[] = {
        {"weft.stuck_loop.kind", {WEFT_VALUE_STRING, 7, {.str = "handoff"}}},
    };
    static const struct weft_event_data stuck = {T0 + 60 * MS, "weft.stuck_loop", loop_attrs, 1, 0};
    struct weft_span_data batch[64];
    char ids[5000][17];
    size_t n = 0;

    for (size_t i = 0; i < 5000; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%016zx", i + 1);
    }
    batch[n++] = make_span(TD, ids[0], NULL, "invoke_workflow big", 0, 100000);
    for (size_t i = 1; i < 5000; i++) {
        if (i <= 3998) {
            size_t k = i - 1;

            batch[n] = make_span(TD, ids[i], ids[0], "invoke_agent coder", 1 + 2 * k, 1);
            if (k % 100 == 7 && k < 3700) {
                batch[n].status_code = WEFT_STATUS_ERROR;
                batch[n].status_message = k == 3607 ? "coder failed at last" : "coder failed";
            }
            if (k == 50) {
                batch[n].events = &stuck;
                batch[n].event_count = 1;
            }
        } else if (i == 3999) {
            /* Below coder k = 60 (span index 61). */
            batch[n] = make_span(TD, ids[i], ids[61], "execute_tool run_tests", 1 + 2 * 60, 1);
            batch[n].status_code = WEFT_STATUS_ERROR;
            batch[n].status_message = "tool failed";
        } else {
            batch[n] = make_span(TD, ids[i], ids[0], "plan supervisor", 2 * (i - 4000), 1);
        }
        n++;
        if (n == 64) {
            assert_weft_ok(export_batch(f->ex, batch, n));
            n = 0;
        }
    }
    assert_weft_ok(export_batch(f->ex, batch, n));
}

static void
test_store_render_summarises_5000_spans_keeping_errors(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *trace = NULL;
    char *text = NULL;
    char expected[160];
    size_t lines = 0;
    size_t shown_coders = 0;
    size_t shown_errors = 0;

    write_big_trace(f);
    assert_weft_ok(weft_store_load_trace(open_store(f), TD, &trace));
    assert_int_equal(weft_trace_span_count(trace), 5000);
    render_into(trace, WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS | WEFT_RENDER_LINKS, &text);
    lines = count_of(text, "\n");
    assert_true(lines < 100);
    assert_non_null(strstr(text, "spans=5000  errors=38"));
    assert_non_null(strstr(text, "of 5000 spans summarised"));
    /* Errors, the failed tool call (and the span above it) and the stuck loop stay visible. */
    shown_coders = count_of(text, " invoke_agent coder ");
    shown_errors = count_of(text, "ERROR: coder failed");
    assert_true(shown_errors >= 15);
    assert_true(shown_coders >= shown_errors + 8);
    assert_non_null(strstr(text, "ERROR: coder failed at last")); /* the last error too */
    assert_non_null(strstr(text, "execute_tool run_tests"));
    assert_non_null(strstr(text, "ERROR: tool failed"));
    assert_non_null(strstr(text, "weft.stuck_loop +"));
    assert_non_null(strstr(text, "weft.stuck_loop.kind=handoff"));
    /* Everything else is counted, per name, on one line each. */
    snprintf(expected, sizeof(expected),
             "\xe2\x80\xa6 %zu more `invoke_agent coder` spans (%zu ok, %zu error)\n",
             3998 - shown_coders, 3998 - shown_coders - (37 - shown_errors), 37 - shown_errors);
    assert_non_null(strstr(text, expected));
    assert_non_null(
        strstr(text, "\xe2\x80\xa6 990 more `plan supervisor` spans (990 ok, 0 error)\n"));
    free(text);

    render_into(trace, WEFT_RENDER_ALL, &text);
    assert_int_equal(count_of(text, "\n"), 5001); /* the header and every span */
    free(text);
    weft_trace_free(trace);
}

static void
test_store_render_keeps_outcome_attributes_events_and_links(void **state)
{
    struct fixture *f = *state;
    static const char *const reason =
        "the break condition result.passed == true held after the third iteration";
    const struct weft_attr attrs[] = {
        {"weft.step.id", {WEFT_VALUE_STRING, 5, {.str = "loop1"}}},
        {"weft.step.executor", {WEFT_VALUE_STRING, 4, {.str = "flow"}}},
        {"weft.step.attempt", {WEFT_VALUE_INT, 0, {.i = 1}}},
        {"weft.step.task", {WEFT_VALUE_STRING, 23, {.str = "iterate until tests run"}}},
        {"gen_ai.usage.input_tokens", {WEFT_VALUE_INT, 0, {.i = 42}}},
        {"weft.loop.iterations", {WEFT_VALUE_INT, 0, {.i = 3}}},
        {"weft.loop.outcome", {WEFT_VALUE_STRING, 5, {.str = "break"}}},
        {"weft.decision.reason", {WEFT_VALUE_STRING, strlen(reason), {.str = reason}}},
    };
    const struct weft_attr breaker_attrs[] = {
        {"weft.circuit_breaker.route", {WEFT_VALUE_STRING, 5, {.str = "coder"}}},
    };
    const struct weft_attr link_attrs[] = {
        {"weft.link.reason", {WEFT_VALUE_STRING, 7, {.str = "resumed"}}},
    };
    struct weft_event_data events[6];
    struct weft_link_data link;
    struct weft_span_data spans[2];
    struct weft_trace *trace = NULL;
    char *text = NULL;

    for (size_t i = 0; i < 5; i++) {
        events[i] = (struct weft_event_data){T0 + (1 + i) * MS, "progress", NULL, 0, 0};
    }
    events[5] = (struct weft_event_data){T0 + 9 * MS, "weft.circuit_breaker", breaker_attrs, 1, 0};
    memset(&link, 0, sizeof(link));
    hex_to_bytes(TB, link.trace_id, WEFT_TRACE_ID_SIZE);
    hex_to_bytes("00000000000000b2", link.span_id, WEFT_SPAN_ID_SIZE);
    link.attrs = link_attrs;
    link.attr_count = 1;
    spans[0] = make_span(TD, "00000000000000a1", NULL, "invoke_workflow loops", 0, 20);
    spans[0].links = &link;
    spans[0].link_count = 1;
    spans[1] = make_span(TD, "00000000000000a2", "00000000000000a1", "loop fix", 1, 10);
    spans[1].attrs = attrs;
    spans[1].attr_count = sizeof(attrs) / sizeof(attrs[0]);
    spans[1].events = events;
    spans[1].event_count = 6;
    assert_weft_ok(export_batch(f->ex, spans, 2));
    assert_weft_ok(weft_store_load_trace(open_store(f), TD, &trace));
    render_into(trace, WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS | WEFT_RENDER_LINKS, &text);
    /* The loop's ending is never cut by the per-line budget, and the reason is whole. */
    assert_non_null(strstr(text, "weft.loop.outcome=break"));
    assert_non_null(strstr(text, "weft.loop.iterations=3"));
    assert_non_null(strstr(text, reason));
    /* The breaker trip is shown although three ordinary events came first. */
    assert_int_equal(count_of(text, "progress +"), 3);
    assert_non_null(strstr(text, "weft.circuit_breaker +8.0ms  weft.circuit_breaker.route=coder"));
    assert_non_null(strstr(text, "2 more events"));
    assert_non_null(strstr(text, "\xe2\x86\xaa link trace " TB " span 00000000000000b2"
                                 "  weft.link.reason=resumed\n"));
    free(text);
    /* Without the flags, neither events nor links are printed. */
    render_into(trace, 0, &text);
    assert_null(strstr(text, "link trace"));
    assert_null(strstr(text, "progress +"));
    free(text);
    weft_trace_free(trace);
}

/* ---- page reads ------------------------------------------------------------------------- */

#define TE               "ee550000000000000000000000000005"
#define PAGE_TRACE_SPANS 47

/* The JSON the store keeps of a span's attributes, events and links, for comparing spans. */
static void
assert_same_columns(const struct weft_span_data *a, const struct weft_span_data *b)
{
    struct weft__buf x;
    struct weft__buf y;

    weft__buf_init(&x, 0);
    weft__buf_init(&y, 0);
    assert_weft_ok(weft__store_attrs_text(a->attrs, a->attr_count, NULL, &x));
    assert_weft_ok(weft__store_attrs_text(b->attrs, b->attr_count, NULL, &y));
    assert_string_equal(x.data, y.data);
    assert_weft_ok(weft__store_events_text(a, &x));
    assert_weft_ok(weft__store_events_text(b, &y));
    assert_string_equal(x.data, y.data);
    assert_weft_ok(weft__store_links_text(a, &x));
    assert_weft_ok(weft__store_links_text(b, &y));
    assert_string_equal(x.data, y.data);
    weft__buf_cleanup(&x);
    weft__buf_cleanup(&y);
}

static void
assert_same_span(const struct weft_span_data *a, const struct weft_span_data *b)
{
    assert_memory_equal(a->trace_id, b->trace_id, WEFT_TRACE_ID_SIZE);
    assert_memory_equal(a->span_id, b->span_id, WEFT_SPAN_ID_SIZE);
    assert_memory_equal(a->parent_span_id, b->parent_span_id, WEFT_SPAN_ID_SIZE);
    assert_int_equal(a->has_parent, b->has_parent);
    assert_int_equal(a->parent_is_remote, b->parent_is_remote);
    assert_int_equal(a->trace_flags, b->trace_flags);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->start_time_ns, b->start_time_ns);
    assert_int_equal(a->end_time_ns, b->end_time_ns);
    assert_int_equal(a->status_code, b->status_code);
    assert_string_equal(a->status_message != NULL ? a->status_message : "(null)",
                        b->status_message != NULL ? b->status_message : "(null)");
    assert_int_equal(a->attr_count, b->attr_count);
    assert_int_equal(a->event_count, b->event_count);
    assert_int_equal(a->link_count, b->link_count);
    assert_int_equal(a->dropped_attrs, b->dropped_attrs);
    assert_string_equal(weft__store_service_name(a), weft__store_service_name(b));
    assert_string_equal(a->scope->name, b->scope->name);
    assert_string_equal(a->scope->version, b->scope->version);
    assert_same_columns(a, b);
}

/* Trace TE: a root with a link and attributes; four agents under it, each with six tool calls
 * (every third with an event, every fifth failed); spans that tie on start and end (apart by
 * name, and by span id alone); an orphan and a root under a remote parent. Span ids run
 * against time order and the spans arrive in batches out of order, so the page must order
 * them itself, exactly as the whole load does. */
static void
write_page_trace(struct fixture *f)
{
    static const struct weft_attr root_attrs[] = {
        {"weft.run.id", {WEFT_VALUE_STRING, 6, {.str = "run-42"}}},
        {"gen_ai.usage.input_tokens", {WEFT_VALUE_INT, 0, {.i = 1234}}},
    };
    static const struct weft_attr tool_attrs[] = {
        {"gen_ai.tool.name", {WEFT_VALUE_STRING, 6, {.str = "search"}}},
        {"weft.step.attempt", {WEFT_VALUE_INT, 0, {.i = 2}}},
    };
    static const struct weft_attr ev_attrs[] = {
        {"weft.stuck_loop.kind", {WEFT_VALUE_STRING, 7, {.str = "handoff"}}},
    };
    static const struct weft_event_data event = {T0 + 5 * MS, "weft.stuck_loop", ev_attrs, 1, 0};
    static char ids[PAGE_TRACE_SPANS][17];
    static char names[PAGE_TRACE_SPANS][32];
    struct weft_link_data link;
    struct weft_span_data s[PAGE_TRACE_SPANS];
    size_t n = 0;

    memset(&link, 0, sizeof(link));
    hex_to_bytes(TB, link.trace_id, WEFT_TRACE_ID_SIZE);
    hex_to_bytes("00000000000000b1", link.span_id, WEFT_SPAN_ID_SIZE);
    link.attrs = tool_attrs;
    link.attr_count = 1;
    for (size_t i = 0; i < PAGE_TRACE_SPANS; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%016zx", 0x1000 - 37 * i);
    }
    s[n] = make_span(TE, ids[0], NULL, "invoke_workflow paged", 0, 10000);
    s[n].attrs = root_attrs;
    s[n].attr_count = 2;
    s[n].links = &link;
    s[n++].link_count = 1;
    for (size_t a = 0; a < 4; a++) {
        size_t agent = n;
        uint64_t start_ms = 100 + 2000 * (a / 2);

        snprintf(names[agent], sizeof(names[agent]), "invoke_agent a%zu", a % 2);
        /* Agents 0 and 1 tie on start and end (apart by name), 2 and 3 on all three. */
        s[n++] = make_span(TE, ids[agent], ids[0], names[agent], start_ms, a < 2 ? 900 : 800);
        if (a >= 2) {
            s[agent].name = "invoke_agent same";
        }
        for (size_t t = 0; t < 6; t++) {
            snprintf(names[n], sizeof(names[n]), "execute_tool t%zu", t);
            s[n] = make_span(TE, ids[n], ids[agent], names[n], start_ms + 10 + 100 * (5 - t), 50);
            s[n].attrs = tool_attrs;
            s[n].attr_count = 2;
            s[n].kind = WEFT_SPAN_KIND_CLIENT;
            if (n % 3 == 0) {
                s[n].events = &event;
                s[n].event_count = 1;
            }
            if (n % 5 == 0) {
                s[n].status_code = WEFT_STATUS_ERROR;
                s[n].status_message = "tool failed";
            }
            n++;
        }
    }
    /* Under tool 0 of agent 0, a chain three deep. */
    for (size_t d = 0; d < 3; d++, n++) {
        s[n] = make_span(TE, ids[n], ids[d == 0 ? 2 : n - 1], "chat m", 620 + d, 10 - d);
    }
    /* An orphan (its parent was never stored), a root under a remote parent, and a span
     * starting with the root. */
    s[n] = make_span(TE, ids[n], "00000000deadbeef", "lost child", 50, 5);
    n++;
    s[n] = make_span(TE, ids[n], "00000000cafebabe", "remote child", 60, 5);
    s[n++].parent_is_remote = true;
    s[n] = make_span(TE, ids[n], ids[0], "early", 0, 1);
    n++;
    while (n < PAGE_TRACE_SPANS) {
        s[n] = make_span(TE, ids[n], ids[0], "plan", 9000 - n, 3);
        n++;
    }
    /* Out of order, in batches of up to 13. */
    for (size_t from = PAGE_TRACE_SPANS; from > 0;) {
        size_t k = from >= 13 ? 13 : from;

        from -= k;
        assert_weft_ok(export_batch(f->ex, s + from, k));
    }
}

/* A page equals the same page cut out of the whole load: same spans, whole, in the same order
 * with the same depths, and the whole trace's counts; for every page size, including a last
 * partial page, an offset at or past the end (no spans), and a limit of 0. */
static void
test_store_page_equals_the_page_of_the_whole_load(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *full = NULL;
    const size_t limits[] = {1, 7, 10, PAGE_TRACE_SPANS, 10000};
    size_t errors = 0;

    write_page_trace(f);
    write_three_traces(f); /* other traces in the table are not read */
    assert_weft_ok(weft_store_load_trace(open_store(f), TE, &full));
    assert_int_equal(weft_trace_span_count(full), PAGE_TRACE_SPANS);
    for (size_t i = 0; i < PAGE_TRACE_SPANS; i++) {
        errors += weft_trace_span(full, i)->status_code == WEFT_STATUS_ERROR;
    }
    assert_true(errors > 0);
    for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
        for (size_t offset = 0; offset <= PAGE_TRACE_SPANS + limits[l]; offset += limits[l]) {
            struct weft_trace *page = NULL;
            size_t total = 0;
            size_t page_errors = 0;
            size_t want = offset < PAGE_TRACE_SPANS ? PAGE_TRACE_SPANS - offset : 0;

            want = want < limits[l] ? want : limits[l];
            assert_weft_ok(
                weft_store_load_page(f->store, TE, offset, limits[l], &page, &total, &page_errors));
            assert_int_equal(total, PAGE_TRACE_SPANS);
            assert_int_equal(page_errors, errors);
            assert_int_equal(weft_trace_span_count(page), want);
            for (size_t k = 0; k < want; k++) {
                assert_same_span(weft_trace_span(page, k), weft_trace_span(full, offset + k));
                assert_int_equal(weft_trace_span_depth(page, k),
                                 weft_trace_span_depth(full, offset + k));
            }
            assert_null(weft_trace_span(page, want));
            weft_trace_free(page);
        }
    }
    weft_trace_free(full);
}

static void
test_store_page_edges_and_errors(void **state)
{
    struct fixture *f = *state;
    struct weft_trace *page = NULL;
    size_t total = 7;

    write_page_trace(f);
    open_store(f);
    assert_weft_ok(weft_store_load_page(f->store, TE, SIZE_MAX, SIZE_MAX, &page, &total, NULL));
    assert_int_equal(total, PAGE_TRACE_SPANS);
    assert_int_equal(weft_trace_span_count(page), 0);
    assert_null(weft_trace_span(page, 0));
    weft_trace_free(page);
    assert_weft_ok(weft_store_load_page(f->store, TE, 3, 0, &page, &total, NULL));
    assert_int_equal(weft_trace_span_count(page), 0);
    weft_trace_free(page);
    /* Uppercase ids are accepted as by weft_store_load_trace(). */
    assert_weft_ok(weft_store_load_page(f->store, "EE550000000000000000000000000005", 0, 2, &page,
                                        &total, NULL));
    assert_int_equal(weft_trace_span_count(page), 2);
    assert_string_equal(weft_trace_span(page, 0)->name, "invoke_workflow paged");
    weft_trace_free(page);
    assert_weft_err(weft_store_load_page(f->store, TD, 0, 10, &page, &total, NULL), WEFT_ENOTFOUND);
    assert_null(page);
    assert_int_equal(total, 0);
    assert_non_null(strstr(weft_store_errmsg(f->store), "no spans stored"));
    assert_weft_err(weft_store_load_page(f->store, "xyz", 0, 10, &page, &total, NULL), WEFT_EINVAL);
    assert_weft_err(weft_store_load_page(f->store, TE, 0, 10, &page, NULL, NULL), WEFT_EINVAL);
    assert_weft_err(weft_store_load_page(NULL, TE, 0, 10, &page, &total, NULL), WEFT_EINVAL);
    assert_null(page);
}

static void
test_store_page_fails_cleanly_out_of_memory(void **state)
{
    struct fixture *f = *state;
    bool is_done = false;

    write_page_trace(f);
    open_store(f);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 2000 && !is_done; budget++) {
        struct weft_trace *page = NULL;
        size_t total = 0;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft_store_load_page(f->store, TE, 5, 20, &page, &total, NULL);
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        if (err == WEFT_OK) {
            assert_int_equal(weft_trace_span_count(page), 20);
            assert_int_equal(total, PAGE_TRACE_SPANS);
            is_done = true;
        } else {
            assert_null(page);
            assert_int_equal(total, 0);
        }
        weft_trace_free(page);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
}

/* ---- payloads ------------------------------------------------------------------------- */

#define CONV_TURNS 6

/* The conversation a chat span carries at turn @p turn: the history so far, as JSON. */
static char *
conversation(unsigned turn)
{
    struct weft__buf b;

    weft__buf_init(&b, 0);
    assert_weft_ok(weft__buf_append_str(&b, "[{\"role\":\"system\",\"content\":\"You plan.\"}"));
    for (unsigned t = 0; t <= turn; t++) {
        assert_weft_ok(weft__buf_printf(&b, ",{\"role\":\"user\",\"content\":\"turn %u:", t));
        for (unsigned w = 0; w < 90; w++) {
            assert_weft_ok(weft__buf_printf(&b, " w%u-%u", t, (w * 7919u + t) % 1000u));
        }
        assert_weft_ok(weft__buf_append_str(&b, "\"}"));
    }
    assert_weft_ok(weft__buf_append_str(&b, "]"));
    return b.data;
}

/* Trace @p trace: one chat span per turn carrying the conversation twice (the GenAI and the
 * Langfuse attribute, as weft's own chat spans do), plus a 511-byte text and a long text with
 * an invalid byte, which stay inline. */
static void
write_conversation(struct fixture *f,
                   const char *trace,
                   char **conv,
                   const char *short_text,
                   const char *bad_text,
                   bool is_prebuilt)
{
    struct weft_span_data spans[CONV_TURNS];
    struct weft_attr attrs[CONV_TURNS][4];
    char ids[CONV_TURNS][17];

    for (unsigned t = 0; t < CONV_TURNS; t++) {
        snprintf(ids[t], sizeof(ids[t]), "%016x", t + 1);
        spans[t] = make_span(trace, ids[t], t == 0 ? NULL : ids[0], "chat m", 10 * t, 5);
        attrs[t][0] = weft_attr_str("gen_ai.input.messages", conv[t]);
        attrs[t][1] = weft_attr_str("langfuse.observation.input", conv[t]);
        attrs[t][2] = weft_attr_str("short", short_text);
        attrs[t][3] = weft_attr_str("bad", bad_text);
        spans[t].attrs = attrs[t];
        spans[t].attr_count = 4;
    }
    /* Two batches: the records of the second are partly the first's. Prebuilt: the columns
     * and records made ahead of the writer, as OTLP ingest makes them. */
    for (int half = 0; half < 2; half++) {
        const struct weft_span_data *views[CONV_TURNS];
        size_t from = half == 0 ? 0 : CONV_TURNS / 2;
        size_t n = half == 0 ? CONV_TURNS / 2 : CONV_TURNS - CONV_TURNS / 2;
        struct weft__store_texts texts;

        if (!is_prebuilt) {
            assert_weft_ok(export_batch(f->ex, spans + from, n));
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            views[i] = &spans[from + i];
        }
        assert_weft_ok(weft__store_texts_build(&texts, views, n, 0));
        assert_true(texts.payloads.count > 0);
        assert_weft_ok(weft__store_export_texts(f->ex, views, n, &texts));
        weft__store_texts_cleanup(&texts);
    }
}

static const char *
attr_text(const struct weft_span_data *span, const char *key, size_t *len)
{
    for (size_t i = 0; i < span->attr_count; i++) {
        if (strcmp(span->attrs[i].key, key) == 0) {
            assert_int_equal(span->attrs[i].value.type, WEFT_VALUE_STRING);
            *len = span->attrs[i].value.len;
            return span->attrs[i].value.u.str;
        }
    }
    fail_msg("no attribute %s", key);
    return NULL;
}

static void
assert_conversation(struct fixture *f, const char *trace, char **conv, const char *short_text)
{
    struct weft_trace *tr = NULL;
    struct weft_trace *one = NULL;
    size_t len = 0;

    assert_weft_ok(weft_store_load_trace(open_store(f), trace, &tr));
    assert_int_equal(weft_trace_span_count(tr), CONV_TURNS);
    for (size_t i = 0; i < CONV_TURNS; i++) {
        const struct weft_span_data *span = weft_trace_span(tr, i);
        unsigned t = span->span_id[7] - 1u;
        const char *got = attr_text(span, "gen_ai.input.messages", &len);

        assert_int_equal(len, strlen(conv[t]));
        assert_memory_equal(got, conv[t], len);
        got = attr_text(span, "langfuse.observation.input", &len);
        assert_int_equal(len, strlen(conv[t]));
        assert_memory_equal(got, conv[t], len);
        assert_string_equal(attr_text(span, "short", &len), short_text);
        got = attr_text(span, "bad", &len);
        assert_non_null(strstr(got, "\xef\xbf\xbd")); /* replaced, as an inline text is */
    }
    weft_trace_free(tr);
    assert_weft_ok(weft_store_load_span(f->store, trace, "0000000000000006", &one));
    assert_memory_equal(attr_text(weft_trace_span(one, 0), "gen_ai.input.messages", &len), conv[5],
                        strlen(conv[5]));
    weft_trace_free(one);
}

/* Long texts are stored once per content hash and read back byte for byte, by every read. */
static void
test_store_long_texts_round_trip_as_payloads(void **state)
{
    struct fixture *f = *state;
    char *conv[CONV_TURNS];
    char short_text[512];
    char bad_text[700];

    for (unsigned t = 0; t < CONV_TURNS; t++) {
        conv[t] = conversation(t);
        assert_true(strlen(conv[t]) >= WEFT__PAYLOAD_MIN);
    }
    memset(short_text, 's', 511);
    short_text[511] = '\0';
    memset(bad_text, 'b', sizeof(bad_text) - 1);
    bad_text[300] = (char)0xff;
    bad_text[sizeof(bad_text) - 1] = '\0';
    write_conversation(f, TA, conv, short_text, bad_text, false);
    write_conversation(f, TB, conv, short_text, bad_text, true);
    assert_conversation(f, TA, conv, short_text);
    assert_conversation(f, TB, conv, short_text);
#ifndef WEFT_TEST_STORE_PG
    {
        sqlite3 *db = NULL;
        sqlite3_stmt *stmt = NULL;
        int64_t raw = 0;
        struct weft_store_gc_report rep;

        for (unsigned t = 0; t < CONV_TURNS; t++) {
            raw += 2 * 2 * (int64_t)strlen(conv[t]); /* two attributes, two traces */
        }
        assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT (SELECT count(*) FROM spans WHERE"
                                            " json_extract(attributes, '$.\"gen_ai.input.messages\""
                                            ".type') = 'payload'), (SELECT sum(length(data)) FROM"
                                            " payloads), (SELECT count(*) FROM spans WHERE"
                                            " json_extract(attributes, '$.short') IS NOT NULL"
                                            " AND json_type(attributes, '$.short') = 'text')",
                                            -1, &stmt, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(stmt, 0), 2 * CONV_TURNS);
        /* The history is stored about once: far less than the texts the spans carry. */
        assert_true(sqlite3_column_int64(stmt, 1) * 10 < raw);
        assert_int_equal(sqlite3_column_int(stmt, 2), 2 * CONV_TURNS); /* 511 bytes: inline */
        sqlite3_finalize(stmt);
        sqlite3_close_v2(db);
        /* Deleting TA keeps what TB refers to; deleting TB too leaves no record. */
        assert_weft_ok(weft_store_gc(f->db, T0 + 4 * MS, 0, false, &rep, NULL, 0));
        assert_int_equal(rep.traces, 0);
        assert_weft_ok(weft_store_gc(f->db, T0 + 1000 * MS, 0, true, &rep, NULL, 0));
        assert_int_equal(rep.traces, 2);
        assert_true(rep.payloads > 0); /* the dry run counts them */
        assert_conversation(f, TB, conv, short_text);
        assert_weft_ok(weft_store_gc(f->db, T0 + 1000 * MS, 0, false, &rep, NULL, 0));
        assert_int_equal(rep.traces, 2);
        assert_true(rep.payloads > 0);
        assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM payloads", -1, &stmt, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(stmt, 0), 0);
        sqlite3_finalize(stmt);
        sqlite3_close_v2(db);
    }
#endif
    for (unsigned t = 0; t < CONV_TURNS; t++) {
        free(conv[t]);
    }
}

/* A reference whose record is gone reads as a sentence saying so, and the rest of the span
 * reads as before. */
static void
test_store_missing_payload_reads_as_a_sentence(void **state)
{
    struct fixture *f = *state;
    char *conv[CONV_TURNS];
    struct weft_trace *one = NULL;
    size_t len = 0;
    char short_text[600];

    for (unsigned t = 0; t < CONV_TURNS; t++) {
        conv[t] = conversation(t);
    }
    memset(short_text, 's', 10);
    short_text[10] = '\0';
    write_conversation(f, TA, conv, short_text, short_text, false);
    {
#ifdef WEFT_TEST_STORE_PG
        PGconn *conn = PQconnectdb(f->db);

        PQclear(PQexec(conn, "DELETE FROM weft_payloads"));
        PQfinish(conn);
#else
        sqlite3 *db = NULL;

        assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "DELETE FROM payloads", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close_v2(db);
#endif
    }
    weft_test_capture_logs();
    assert_weft_ok(weft_store_load_span(open_store(f), TA, "0000000000000002", &one));
    assert_non_null(strstr(attr_text(weft_trace_span(one, 0), "gen_ai.input.messages", &len),
                           "is missing from"));
    assert_string_equal(attr_text(weft_trace_span(one, 0), "short", &len), short_text);
    assert_non_null(strstr(weft_test_logs(), "payload"));
    weft_trace_free(one);
    for (unsigned t = 0; t < CONV_TURNS; t++) {
        free(conv[t]);
    }
}

/* ---- the resource a trace arrived with ------------------------------------------------- */

/* The value of resource attribute @p key of @p span, or NULL. */
static const struct weft_value *
resource_value(const struct weft_span_data *span, const char *key)
{
    for (size_t i = 0; span->resource != NULL && i < span->resource->attr_count; i++) {
        if (strcmp(span->resource->attrs[i].key, key) == 0) {
            return &span->resource->attrs[i].value;
        }
    }
    return NULL;
}

/* The root keeps its resource's attributes (at most 64, values cut at 1 KiB, secrets
 * redacted, what was left out counted); its children keep service.name only. */
static void
test_store_resource_kept_on_roots_bounded_and_redacted(void **state)
{
    struct fixture *f = *state;
    enum { EXTRA = 70 };
    struct weft_attr attrs[5 + EXTRA];
    char keys[EXTRA][32];
    char long_value[3000];
    const char *args[] = {"serve", "--token=sk-abcdefghijklmnopqrstuvwx"};
    struct weft_resource res = {attrs, 0, 2, NULL};
    struct weft_span_data a[2];
    struct weft_trace *trace = NULL;
    const struct weft_span_data *root = NULL;
    const struct weft_value *v = NULL;

    memset(long_value, 'x', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 1] = '\0';
    attrs[res.attr_count++] = weft_attr_str("service.name", "checkout");
    attrs[res.attr_count++] = weft_attr_str("service.version", "2.4.1");
    attrs[res.attr_count++] = weft_attr_str("telemetry.sdk.language", "python");
    attrs[res.attr_count++] = weft_attr_str("deployment.auth_token", "plain-looking-value");
    attrs[res.attr_count++] = weft_attr_str("process.command_line", long_value);
    attrs[res.attr_count].key = "process.command_args";
    attrs[res.attr_count].value.type = WEFT_VALUE_STRING_ARRAY;
    attrs[res.attr_count].value.len = 2;
    attrs[res.attr_count++].value.u.strs = args;
    for (size_t i = 0; res.attr_count < sizeof(attrs) / sizeof(attrs[0]); i++) {
        snprintf(keys[i], sizeof(keys[i]), "extra.%zu", i);
        attrs[res.attr_count++] = weft_attr_int(keys[i], (int64_t)i);
    }
    a[0] = make_span(TA, "0000000000000001", NULL, "POST /checkout", 0, 50);
    a[1] = make_span(TA, "0000000000000002", "0000000000000001", "charge", 10, 20);
    a[0].resource = &res;
    a[1].resource = &res;
    assert_weft_ok(export_batch(f->ex, a, 2));

    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    root = weft_trace_span(trace, 0);
    assert_string_equal(root->name, "POST /checkout");
    assert_int_equal(root->resource->attr_count, 64);
    /* The sender's 2, and the 75 - 64 attributes beyond the cap. */
    assert_int_equal(root->resource->dropped_attrs, 2 + (5 + EXTRA - 64));
    assert_string_equal(resource_value(root, "service.version")->u.str, "2.4.1");
    assert_string_equal(resource_value(root, "telemetry.sdk.language")->u.str, "python");
    assert_string_equal(resource_value(root, "deployment.auth_token")->u.str, WEFT_REDACTED);
    assert_int_equal(strlen(resource_value(root, "process.command_line")->u.str), 1024);
    v = resource_value(root, "process.command_args");
    assert_non_null(v);
    assert_int_equal(v->type, WEFT_VALUE_STRING_ARRAY);
    assert_string_equal(v->u.strs[0], "serve");
    assert_null(strstr(v->u.strs[1], "sk-abcdefghijklmnopqrstuvwx"));
    assert_non_null(strstr(v->u.strs[1], WEFT_REDACTED));
    assert_int_equal(weft_trace_span(trace, 1)->resource->attr_count, 1);
    assert_string_equal(resource_value(weft_trace_span(trace, 1), "service.name")->u.str,
                        "checkout");
    weft_trace_free(trace);
    /* The outline (the explorer's waterfall) reads the root's resource too. */
    assert_weft_ok(weft_store_load_outline(f->store, TA, &trace));
    assert_string_equal(resource_value(weft_trace_span(trace, 0), "service.version")->u.str,
                        "2.4.1");
    weft_trace_free(trace);
}

/* A store of the schema before the resource column reads as before (service.name alone), and
 * gets the column when a writer opens it. */
static void
test_store_resource_column_migrates_an_older_store(void **state)
{
    struct fixture *f = *state;
    struct weft_attr attrs[2] = {weft_attr_str("service.name", "svc-new"),
                                 weft_attr_str("service.version", "9")};
    struct weft_resource res = {attrs, 2, 0, NULL};
    struct weft_span_data a[1];
    struct weft_trace *trace = NULL;

    a[0] = make_span(TA, "0000000000000001", NULL, "old root", 0, 10);
    assert_weft_ok(export_batch(f->ex, a, 1));
    weft_exporter_free(f->ex);
    f->ex = NULL;
    {
#ifdef WEFT_TEST_STORE_PG
        PGconn *conn = PQconnectdb(f->db);
        PGresult *r = PQexec(conn, "ALTER TABLE weft_spans DROP COLUMN resource;"
                                   " DELETE FROM weft_span_schema WHERE version = 4");

        assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
        PQclear(r);
        PQfinish(conn);
#else
        sqlite3 *db = NULL;

        assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db,
                                      "ALTER TABLE spans DROP COLUMN resource;"
                                      " PRAGMA user_version = 3",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close_v2(db);
#endif
    }
    /* Read as it is: no writer has opened it since. */
    assert_weft_ok(weft_store_load_trace(open_store(f), TA, &trace));
    assert_int_equal(weft_trace_span(trace, 0)->resource->attr_count, 1);
    assert_string_equal(resource_value(weft_trace_span(trace, 0), "service.name")->u.str,
                        "svc-store");
    weft_trace_free(trace);
    weft_store_close(f->store);
    f->store = NULL;

    assert_weft_ok(weft_store_exporter_new(f->db, &f->ex));
    a[0] = make_span(TB, "0000000000000001", NULL, "new root", 20, 10);
    a[0].resource = &res;
    assert_weft_ok(export_batch(f->ex, a, 1));
    assert_weft_ok(weft_store_load_trace(open_store(f), TB, &trace));
    assert_string_equal(resource_value(weft_trace_span(trace, 0), "service.version")->u.str, "9");
    weft_trace_free(trace);
    assert_weft_ok(weft_store_load_trace(f->store, TA, &trace));
    assert_int_equal(weft_trace_span(trace, 0)->resource->attr_count, 1);
    weft_trace_free(trace);
}

/* The rows the explorer reads (weft_store_load_rows()) are the whole load's spans in the same
 * order and depths, however the trace's spans lie in the table: trace TX written at once (its
 * rows together: SQLite scans their range), trace TY a span at a time between batches of TZ
 * (spread out: SQLite looks its rows up one by one). Random span ids, ties of start times,
 * an orphan whose parent was never stored, children before their parents. */
#define TX     "cc440000000000000000000000000004"
#define TY     "cc550000000000000000000000000005"
#define TZ     "cc660000000000000000000000000006"
#define ROWS_N 60

static void
check_rows_equal_the_load(struct fixture *f, const char *trace_id)
{
    struct weft_trace *trace = NULL;
    struct weft_trace_rows *rows = NULL;
    const struct weft_trace_row *r = NULL;

    assert_weft_ok(weft_store_load_trace(open_store(f), trace_id, &trace));
    assert_weft_ok(weft_store_load_rows(f->store, trace_id, &rows));
    assert_int_equal(weft_trace_rows_count(rows), ROWS_N);
    assert_int_equal(weft_trace_span_count(trace), ROWS_N);
    r = weft_trace_rows_get(rows);
    for (size_t i = 0; i < ROWS_N; i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);

        assert_memory_equal(r[i].span_id, s->span_id, WEFT_SPAN_ID_SIZE);
        assert_int_equal(r[i].depth, weft_trace_span_depth(trace, i));
        assert_string_equal(r[i].name, s->name);
        assert_int_equal(r[i].start_time_ns, s->start_time_ns);
    }
    weft_trace_rows_free(rows);
    weft_trace_free(trace);
}

static void
test_store_rows_equal_the_load_stored_together_or_interleaved(void **state)
{
    struct fixture *f = *state;
    static const char *const names[] = {"step", "call", "tool"};
    char ids[2][ROWS_N][17];
    char parents[2][ROWS_N][17];
    char other_ids[ROWS_N * 5][17];
    struct weft_span_data x[ROWS_N];
    struct weft_span_data z[5];
    uint64_t seed = 0x1234567u;

    for (size_t t = 0; t < 2; t++) {
        for (size_t i = 0; i < ROWS_N; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            snprintf(ids[t][i], sizeof(ids[t][i]), "%016llx", (unsigned long long)(seed | 1));
            /* Span i's parent: an earlier span, or (span 7) one never stored. */
            snprintf(parents[t][i], sizeof(parents[t][i]), "%s",
                     i == 7   ? "00000000000000ff"
                     : i == 0 ? ""
                              : ids[t][(seed >> 33) % i]);
        }
    }
    for (size_t i = 0; i < ROWS_N; i++) { /* TX: one batch, children first */
        size_t k = ROWS_N - 1 - i;
        x[i] = make_span(TX, ids[0][k], k == 0 ? NULL : parents[0][k], names[k % 3], 10 * (k / 3),
                         1 + k % 4);
    }
    assert_weft_ok(export_batch(f->ex, x, ROWS_N));
    for (size_t i = 0; i < ROWS_N; i++) { /* TY: a span, then five of TZ */
        size_t k = (i * 7) % ROWS_N;
        x[0] = make_span(TY, ids[1][k], k == 0 ? NULL : parents[1][k], names[k % 3], 10 * (k / 3),
                         1 + k % 4);
        assert_weft_ok(export_batch(f->ex, x, 1));
        for (size_t j = 0; j < 5; j++) {
            snprintf(other_ids[i * 5 + j], sizeof(other_ids[0]), "%016zx", i * 5 + j + 1);
            z[j] = make_span(TZ, other_ids[i * 5 + j], NULL, "other", i, 1);
        }
        assert_weft_ok(export_batch(f->ex, z, 5));
    }
#ifndef WEFT_TEST_STORE_PG
    { /* the two layouts the SQLite reader tells apart (store/sqlite_read.c, NODES_SPREAD) */
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT max(rowid) - min(rowid) + 1 FROM spans"
                                            " WHERE trace_id = ?1",
                                            -1, &st, NULL),
                         SQLITE_OK);
        sqlite3_bind_text(st, 1, TX, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int64(st, 0), ROWS_N);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, TY, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_true(sqlite3_column_int64(st, 0) > 4 * ROWS_N);
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
#endif
    check_rows_equal_the_load(f, TX);
    check_rows_equal_the_load(f, TY);
}

#ifdef WEFT_TEST_STORE_PG
/* The backend-neutral tests again, on PostgreSQL: the same public read and write API over a
 * real server (store_pg/store_api; PostgreSQL's own cases are tests/store_pg/test_store_pg.c). */
int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_store_list_returns_newest_first_with_counts),
        T(test_store_list_honours_limit_and_empty_store),
        T(test_store_load_returns_spans_in_tree_order),
        T(test_store_load_orders_by_time_then_span_id),
        T(test_store_outline_and_one_span),
        T(test_store_render_draws_tree_with_durations_and_errors),
        T(test_store_resolve_last_is_the_newest_trace),
        T(test_store_resolve_accepts_unique_prefix_in_any_case),
        T(test_store_resolve_ambiguous_prefix_names_candidates),
        T(test_store_trace_stamp_is_the_summary_of_one_trace),
        T(test_store_resolve_rejects_unknown_and_malformed_refs),
        T(test_store_load_unknown_trace_is_not_found),
        T(test_store_summary_follows_root_arriving_late),
        T(test_store_orphans_and_cycles_are_listed_once_as_roots),
        T(test_store_reader_sees_batches_written_after_open),
        T(test_store_render_summarises_5000_spans_keeping_errors),
        T(test_store_page_equals_the_page_of_the_whole_load),
        T(test_store_page_edges_and_errors),
        T(test_store_rows_equal_the_load_stored_together_or_interleaved),
        T(test_store_long_texts_round_trip_as_payloads),
        T(test_store_missing_payload_reads_as_a_sentence),
        T(test_store_resource_kept_on_roots_bounded_and_redacted),
        T(test_store_resource_column_migrates_an_older_store),
#undef T
    };

    return cmocka_run_group_tests(tests, pg_group_setup, pg_group_teardown);
}
#else
int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_store_exporter_creates_private_wal_database),
        T(test_store_concurrent_first_opens_all_succeed),
        T(test_store_writer_drops_the_old_time_indexes),
        T(test_store_list_returns_newest_first_with_counts),
        T(test_store_list_honours_limit_and_empty_store),
        T(test_store_load_returns_spans_in_tree_order),
        T(test_store_load_orders_by_time_then_span_id),
        T(test_store_outline_and_one_span),
        T(test_store_render_draws_tree_with_durations_and_errors),
        T(test_store_resolve_last_is_the_newest_trace),
        T(test_store_resolve_accepts_unique_prefix_in_any_case),
        T(test_store_resolve_ambiguous_prefix_names_candidates),
        T(test_store_trace_stamp_is_the_summary_of_one_trace),
        T(test_store_resolve_rejects_unknown_and_malformed_refs),
        T(test_store_load_unknown_trace_is_not_found),
        T(test_store_attribute_types_round_trip),
        T(test_store_attributes_are_queryable_json),
        T(test_store_invalid_utf8_is_replaced_not_lost),
        T(test_store_duplicate_span_is_replaced),
        T(test_store_summary_follows_root_arriving_late),
        T(test_store_incremental_summary_matches_recomputation),
        T(test_store_orphans_and_cycles_are_listed_once_as_roots),
        T(test_store_render_replaces_control_characters),
        T(test_store_bad_path_returns_eio_and_logs_it),
        T(test_store_open_missing_database_is_not_found),
        T(test_store_refuses_foreign_and_newer_databases),
        T(test_store_export_after_shutdown_is_refused),
        T(test_store_reader_sees_batches_written_after_open),
        T(test_store_default_path_uses_weft_home),
        T(test_store_load_and_render_fail_cleanly_out_of_memory),
        T(test_store_long_texts_round_trip_as_payloads),
        T(test_store_missing_payload_reads_as_a_sentence),
        T(test_store_exporter_fails_cleanly_out_of_memory),
        T(test_store_render_summarises_5000_spans_keeping_errors),
        T(test_store_render_keeps_outcome_attributes_events_and_links),
        T(test_store_page_equals_the_page_of_the_whole_load),
        T(test_store_page_edges_and_errors),
        T(test_store_rows_equal_the_load_stored_together_or_interleaved),
        T(test_store_page_fails_cleanly_out_of_memory),
        T(test_store_resource_kept_on_roots_bounded_and_redacted),
        T(test_store_resource_column_migrates_an_older_store),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
