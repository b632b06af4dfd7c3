/* tests/serve_pg/test_serve_pg.c - `weft serve` reading a PostgreSQL span store (the built
 * binary, its own process, over a real PostgreSQL 15 started with log_connections on:
 * tests/support/pg_server.h):
 * - the explorer API's reads reuse their connections (store/pool.c): 50 requests, counted in
 *   the server's log of connections, open at most a pool's worth; the connections left open
 *   (pg_stat_activity) are at most the pool's size;
 * - PostgreSQL restarted: the next request reconnects and succeeds, whether the outage was
 *   seen by a request (that handle is discarded, counted on /metrics) or not (the idle
 *   connection is made again);
 * - /metrics reports the partitions of weft_spans after a retention pass
 *   (weft_store_partitions equals pg_inherits' count) and the oldest span's age;
 * - over a PostgreSQL state store, the datasets and experiments routes answer the documents
 *   `weft dataset list|show --json` and `weft eval list|show|compare --json` print for it. */
#include "support/pg_server.h"
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/store_spans.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/dataset.h>
#include <weft/weft.h>

#define WEFT     WEFT_BINARY_DIR "/weft"
#define TA       "5e7e0000000000000000000000000001"
#define REQUESTS 50
#define DAY_MS   (24ull * 3600ull * 1000ull)

static struct weft_test_pg *pg;

struct fx {
    char dir[64];
    char name[32];
    char url[256];
    char state[300];
    char home_env[128];
    char log[128];
    pid_t pid;
    unsigned port;
};

static int
group_setup(void **state)
{
    const char *settings[] = {"log_connections=on", NULL};
    char err[512] = "";

    (void)state;
    pg = weft_test_pg_start(settings, err, sizeof(err));
    if (pg == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    return 0;
}

static int
group_teardown(void **state)
{
    (void)state;
    weft_test_pg_stop(pg);
    return 0;
}

/* ms after STORE_SPANS_T0 of now minus @p days_ago days. */
static uint64_t
ms_ago(uint64_t days_ago)
{
    struct timespec ts;
    uint64_t now_ms = 0;

    clock_gettime(CLOCK_REALTIME, &ts);
    now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    return now_ms - STORE_SPANS_T0 / 1000000u - days_ago * DAY_MS;
}

/* A trace of four spans, two of them @p days_ago days old, in the store at @p url. */
static void
write_trace(const char *url, uint64_t days_ago)
{
    struct weft_exporter *ex = NULL;
    struct weft_span_data s[4];

    s[0] = store_spans_make(TA, "0000000000000001", NULL, "invoke_workflow pool", ms_ago(days_ago),
                            10);
    s[1] = store_spans_make(TA, "0000000000000002", "0000000000000001", "plan a",
                            ms_ago(days_ago) + 1, 1);
    s[2] = store_spans_make(TA, "0000000000000003", "0000000000000001", "invoke_agent b", ms_ago(0),
                            1);
    s[3] = store_spans_make(TA, "0000000000000004", "0000000000000001", "invoke_agent c",
                            ms_ago(0) + 2, 1);
    assert_weft_ok(weft_store_exporter_new(url, &ex));
    assert_weft_ok(store_spans_export(ex, s, 4));
    weft_exporter_free(ex);
}

static int
setup(void **state)
{
    static unsigned n;
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-serve-pg-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->home_env, sizeof(f->home_env), "WEFT_HOME=%s", f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    snprintf(f->log, sizeof(f->log), "%s/serve.log", f->dir);
    snprintf(f->name, sizeof(f->name), "servepg%u", n++);
    assert_int_equal(weft_test_pg_createdb(pg, f->name, f->url, sizeof(f->url)), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    if (f->pid > 0) {
        weft_test_kill_group(f->pid, 5000);
    }
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* `weft serve` over the test's database, no ingest (so that only the API connects), with
 * @p extra arguments (NULL-terminated, at most 4). */
static void
start_serve(struct fx *f, const char *const *extra)
{
    const char *argv[16] = {WEFT,   "serve",   "--addr", "127.0.0.1:0", "--store",
                            f->url, "--state", f->state, "--no-ingest"};
    const char *env[] = {f->home_env,       "WEFT_SERVE_TOKEN*",     "WEFT_TRACE_STORE_URL*",
                         "WEFT_STATE_URL*", "WEFT_STORE_POOL_SIZE*", NULL};
    size_t n = 9;

    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    f->pid = serve_proc_spawn(argv, env, f->dir, f->log, &f->port);
}

/* Connections PostgreSQL authorized to the test's database so far (its log). */
static long
connections_logged(const struct fx *f)
{
    FILE *log = fopen(weft_test_pg_log(pg), "r");
    char line[2048];
    char needle[64];
    long n = 0;

    assert_non_null(log);
    snprintf(needle, sizeof(needle), "database=%s ", f->name);
    while (fgets(line, sizeof(line), log) != NULL) {
        n += strstr(line, "connection authorized") != NULL && strstr(line, needle) != NULL;
    }
    fclose(log);
    return n;
}

/* One integer from @p sql on a connection of the test's own (not counted: another name). */
static long
query_long(const struct fx *f, const char *sql)
{
    char url[300];
    PGconn *c = NULL;
    PGresult *r = NULL;
    long v = -1;

    snprintf(url, sizeof(url), "%s?application_name=test", f->url);
    c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    }
    v = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return v;
}

/* weft serve's open connections to the test's database. */
static long
serve_connections(const struct fx *f)
{
    char sql[200];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s'"
             " AND application_name = 'weft'",
             f->name);
    return query_long(f, sql);
}

static long
get_status(const struct fx *f, const char *path)
{
    long status = 0;
    char *body = serve_proc_get(f->port, path, 15000, &status);

    free(body);
    return status;
}

static void
test_serve_pg_api_reuses_connections(void **state)
{
    struct fx *f = *state;
    static const char *const paths[] = {
        "/api/v1/traces/" TA "?limit=10", "/api/v1/traces/" TA "?view=waterfall",
        "/api/v1/traces/" TA "/spans/0000000000000002",
        "/api/v1/traces/5e7e?limit=1", /* a prefix: resolved, then read */
    };
    long before = 0;
    long after = 0;
    double t0 = 0;
    struct timespec ts;

    write_trace(f->url, 1);
    start_serve(f, NULL);
    before = connections_logged(f);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    for (int i = 0; i < REQUESTS; i++) {
        assert_int_equal(get_status(f, paths[i % 4]), 200);
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    print_message("%d API requests over PostgreSQL: %.2f ms each\n", REQUESTS,
                  ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - t0) * 1000.0 / REQUESTS);
    after = connections_logged(f);
    /* One request at a time: one connection, made once (at most the API's two at once). */
    assert_true(after - before >= 1);
    assert_true(after - before <= 2);
    assert_true(serve_connections(f) >= 1); /* kept open while idle */
    assert_true(serve_connections(f) <= WEFT_STORE_POOL_DEFAULT_IDLE);
}

static void
test_serve_pg_reconnects_after_a_restart(void **state)
{
    struct fx *f = *state;
    char err[512] = "";
    long status = 0;
    char *metrics = NULL;
    const char *discarded[] = {"event=\"discarded\"", NULL};

    write_trace(f->url, 1);
    start_serve(f, NULL);
    assert_int_equal(get_status(f, "/api/v1/traces/" TA "?limit=5"), 200);
    assert_int_equal(serve_connections(f), 1);

    /* Restarted while the pooled connection was idle: the next request makes it again. */
    assert_int_equal(weft_test_pg_halt(pg), 0);
    assert_int_equal(weft_test_pg_restart(pg, err, sizeof(err)), 0);
    assert_int_equal(get_status(f, "/api/v1/traces/" TA "?limit=5"), 200);
    assert_int_equal(serve_connections(f), 1);

    /* A request during the outage fails; its broken handle is not kept, and the first request
     * once the server is back opens a new connection and succeeds. */
    assert_int_equal(weft_test_pg_halt(pg), 0);
    assert_int_equal(get_status(f, "/api/v1/traces/" TA "?limit=5"), 500);
    assert_int_equal(weft_test_pg_restart(pg, err, sizeof(err)), 0);
    assert_int_equal(get_status(f, "/api/v1/traces/" TA "?limit=5"), 200);
    assert_int_equal(get_status(f, "/api/v1/traces/" TA "/spans/0000000000000003"), 200);
    assert_int_equal(serve_connections(f), 1);
    metrics = serve_proc_get(f->port, "/metrics", 10000, &status);
    assert_int_equal(status, 200);
    assert_non_null(metrics);
    assert_true(serve_proc_sum(metrics, "weft_store_read_handles_total", discarded, NULL) >= 1);
    free(metrics);
}

static void
test_serve_pg_metrics_report_partitions(void **state)
{
    struct fx *f = *state;
    const char *extra[] = {"--retention", "30d", NULL};
    char sql[200];
    char *metrics = NULL;
    double partitions = -1;
    double age = -1;
    long want = 0;
    size_t found = 0;

    write_trace(f->url, 3); /* today, two days ahead, the default, and 3 days ago */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_inherits WHERE inhparent = 'weft_spans'::regclass");
    want = query_long(f, sql);
    assert_int_equal(want, 5);
    start_serve(f, extra);
    /* The first retention pass runs at start, on its own thread. */
    for (int i = 0; i < 100 && found == 0; i++) {
        long status = 0;

        free(metrics);
        metrics = serve_proc_get(f->port, "/metrics", 10000, &status);
        assert_int_equal(status, 200);
        partitions = serve_proc_sum(metrics, "weft_store_partitions", NULL, &found);
        if (found == 0) {
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    assert_int_equal(found, 1);
    assert_true(partitions == (double)want);
    age = serve_proc_sum(metrics, "weft_store_oldest_span_age_seconds", NULL, &found);
    assert_int_equal(found, 1);
    assert_true(age > 3 * 86400.0 - 60 && age < 3 * 86400.0 + 60);
    free(metrics);
}

/* Experiment @p name over pgds@1: its items @p statuses, in order. */
static void
put_experiment(const struct fx *f,
               const char *name,
               const struct weft_dataset_item *items,
               const char *const *statuses)
{
    struct weft_experiment e;
    char id[37];
    char why[256] = "";

    memset(&e, 0, sizeof(e));
    e.name = (char *)name;
    e.dataset = "pgds";
    e.dataset_version = 1;
    e.workflow = "wf";
    if (weft_experiment_begin(f->url, &e, id, why, sizeof(why)) != WEFT_OK) {
        fail_msg("experiment %s: %s", name, why);
    }
    for (size_t i = 0; i < 2; i++) {
        struct weft_experiment_item it;
        bool is_pass = strcmp(statuses[i], "passed") == 0;
        memset(&it, 0, sizeof(it));
        it.item_id = items[i].id;
        it.status = (char *)statuses[i];
        it.scores = is_pass ? "[{\"evaluator\": \"exact\", \"value\": 1, \"passed\": true, "
                              "\"explanation\": \"the same text\"}]"
                            : "[{\"evaluator\": \"exact\", \"value\": 0, \"passed\": false, "
                              "\"explanation\": \"another text\"}]";
        it.tokens = 10 + i;
        assert_weft_ok(weft_experiment_item_put(f->url, id, &it, why, sizeof(why)));
    }
    assert_weft_ok(
        weft_experiment_end(f->url, id, "completed", "{\"items\": 2}", why, sizeof(why)));
}

/* GET @p path answers what `weft ARGS --state URL --json` prints (compared parsed). */
static void
same_as_cli(const struct fx *f, const char *path, const char *const *args)
{
    static char out[1 << 16];
    static char err[4096];
    const char *argv[12];
    size_t n = 0;
    long status = 0;
    char *body = serve_proc_get(f->port, path, 15000, &status);
    json_t *api = body != NULL ? json_loads(body, 0, NULL) : NULL;
    json_t *cli = NULL;

    for (; args[n] != NULL; n++) {
        argv[n] = args[n];
    }
    argv[n++] = "--state";
    argv[n++] = f->url;
    argv[n++] = "--json";
    argv[n] = NULL;
    assert_int_equal(weft_test_run_captured(WEFT, argv, f->dir, out, sizeof(out), err, sizeof(err)),
                     0);
    cli = json_loads(out, 0, NULL);
    if (status != 200 || api == NULL || cli == NULL || !json_equal(api, cli)) {
        fail_msg("GET %s (%ld) differs from weft %s %s:\nAPI %.400s\nCLI %.400s", path, status,
                 args[0], args[1], body != NULL ? body : "(none)", out);
    }
    json_decref(api);
    json_decref(cli);
    free(body);
}

static void
test_serve_pg_datasets_and_experiments(void **state)
{
    struct fx *f = *state;
    struct weft_dataset_source src;
    struct weft_dataset_item *items = NULL;
    size_t count = 0;
    char file[128];
    const char *base[] = {"passed", "failed"};
    const char *next[] = {"passed", "passed"};
    long status = 0;
    char *body = NULL;

    weft_test_write_file(f->dir, "items.jsonl",
                         "{\"input\": \"add 2 and 2\", \"expected\": \"4\"}\n{\"input\": "
                         "{\"ticket\": 7}}\n");
    snprintf(file, sizeof(file), "%s/items.jsonl", f->dir);
    memset(&src, 0, sizeof(src));
    src.file = file;
    assert_weft_ok(weft_dataset_create(f->url, "pgds", "on PostgreSQL", NULL, &src, NULL, NULL, 0));
    assert_weft_ok(weft_dataset_show(f->url, "pgds", 0, NULL, &items, &count));
    assert_int_equal(count, 2);
    put_experiment(f, "base", items, base);
    put_experiment(f, "next", items, next);
    weft_dataset_items_free(items, count);
    snprintf(f->state, sizeof(f->state), "%s", f->url);
    start_serve(f, NULL);
    {
        const char *a[] = {"dataset", "list", NULL};
        same_as_cli(f, "/api/v1/datasets", a);
    }
    {
        const char *a[] = {"dataset", "show", "pgds@1", NULL};
        same_as_cli(f, "/api/v1/datasets/pgds@1", a);
    }
    {
        const char *a[] = {"eval", "list", "--dataset", "pgds", NULL};
        same_as_cli(f, "/api/v1/experiments?dataset=pgds", a);
    }
    {
        const char *a[] = {"eval", "show", "next", NULL};
        same_as_cli(f, "/api/v1/experiments/next", a);
    }
    {
        const char *a[] = {"eval", "compare", "base", "next", NULL};
        same_as_cli(f, "/api/v1/experiments/compare?a=base&b=next", a);
    }
    body = serve_proc_get(f->port, "/api/v1/experiments/compare?a=base&b=next", 15000, &status);
    assert_non_null(body);
    assert_non_null(strstr(body, "\"fixed\":1"));
    free(body);
    assert_int_equal(get_status(f, "/api/v1/datasets/nope"), 404);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_serve_pg_api_reuses_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_pg_reconnects_after_a_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_pg_metrics_report_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_pg_datasets_and_experiments, setup, teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
