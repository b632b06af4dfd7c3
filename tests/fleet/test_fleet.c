/* tests/fleet/test_fleet.c - `weft serve` as the fleet's collector (docs/fleet.md): two
 * instances, each its own process, over one real PostgreSQL 15 (tests/support/pg_server.h),
 * fed by OTLP/HTTP protobuf senders (weft's own OTLP exporter, which retries as the
 * OpenTelemetry SDKs do).
 *
 * - One trace's batches spread over both instances, some sent to both: every span stored
 *   once (rows and distinct ids counted in PostgreSQL), and either instance's explorer API
 *   shows the whole trace.
 * - An instance killed with SIGKILL while senders keep going: what it did not answer is sent
 *   again to the other; every span stored exactly once.
 * - PostgreSQL stopped: the instances answer 503 with Retry-After (the senders' requests fail
 *   over to their retries); once it is back, a sender that retries loses nothing.
 */
#include "support/pg_server.h"
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/store_spans.h"
#include "support/weft_test.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <weft/weft.h>

#define WEFT      WEFT_BINARY_DIR "/weft"
#define BATCH     50
#define TRACE_HEX "f1ee7000000000000000000000000001"

static struct weft_test_pg *pg;

struct fx {
    char dir[64];
    char url[256];
    char home_env[128];
    pid_t pid[2];
    unsigned port[2];
    char log[2][128];
};

static int
group_setup(void **state)
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
group_teardown(void **state)
{
    (void)state;
    weft_test_pg_stop(pg);
    return 0;
}

static void
start_instance(struct fx *f, int i)
{
    const char *argv[] = {WEFT,   "serve",   "--addr", "127.0.0.1:0", "--store",
                          f->url, "--state", f->url,   NULL};
    const char *env[] = {f->home_env, "WEFT_SERVE_TOKEN*", "WEFT_TRACE_STORE_URL*", NULL};

    snprintf(f->log[i], sizeof(f->log[i]), "%s/serve%d.log", f->dir, i);
    f->pid[i] = serve_proc_spawn(argv, env, f->dir, f->log[i], &f->port[i]);
}

static int
setup(void **state)
{
    static unsigned n;
    struct fx *f = calloc(1, sizeof(*f));
    char name[32];

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-fleet-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->home_env, sizeof(f->home_env), "WEFT_HOME=%s", f->dir);
    snprintf(name, sizeof(name), "fleet%u", n++);
    assert_int_equal(weft_test_pg_createdb(pg, name, f->url, sizeof(f->url)), 0);
    start_instance(f, 0);
    start_instance(f, 1);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    for (int i = 0; i < 2; i++) {
        if (f->pid[i] > 0) {
            weft_test_kill_group(f->pid[i], 5000);
        }
    }
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* An OTLP/HTTP protobuf exporter to instance @p port that retries for @p retry_ms. */
static struct weft_exporter *
sender(unsigned port, uint32_t retry_ms)
{
    struct weft_otlp_options o;
    struct weft_exporter *ex = NULL;
    char url[64];

    memset(&o, 0, sizeof(o));
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    o.endpoint = url;
    o.protocol_set = true;
    o.protocol = WEFT_OTLP_HTTP_PROTOBUF;
    o.compression = 2;
    o.timeout_ms = 5000;
    o.max_retry_ms = retry_ms;
    o.initial_backoff_ms = 100;
    o.max_backoff_ms = 1000;
    assert_weft_ok(weft_otlp_exporter_new(&o, &ex));
    return ex;
}

/* Batch @p b of the test trace: spans b*BATCH+1 .. (b+1)*BATCH, all children of span 1. */
static void
make_batch(unsigned b, struct weft_span_data *spans, char (*ids)[17])
{
    for (unsigned i = 0; i < BATCH; i++) {
        unsigned id = b * BATCH + i + 1;
        snprintf(ids[i], 17, "%016x", id);
        spans[i] = store_spans_make(TRACE_HEX, ids[i], id == 1 ? NULL : "0000000000000001",
                                    id == 1 ? "invoke_workflow fleet" : "execute_tool step",
                                    (uint64_t)id, 1);
    }
}

static weft_err
send_batch(struct weft_exporter *ex, unsigned b)
{
    struct weft_span_data spans[BATCH];
    char ids[BATCH][17];

    make_batch(b, spans, ids);
    return store_spans_export(ex, spans, BATCH);
}

/* Rows and distinct span ids of the test trace in PostgreSQL. */
static void
count_rows(const struct fx *f, long *rows, long *distinct)
{
    PGconn *c = PQconnectdb(f->url);
    PGresult *r = NULL;

    assert_int_equal(PQstatus(c), CONNECTION_OK);
    r = PQexec(
        c, "SELECT count(*), count(DISTINCT span_id) FROM weft_spans WHERE trace_id = '" TRACE_HEX
           "'");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fail_msg("count: %s", PQerrorMessage(c));
    }
    *rows = atol(PQgetvalue(r, 0, 0));
    *distinct = atol(PQgetvalue(r, 0, 1));
    PQclear(r);
    PQfinish(c);
}

/* The span count instance @p port's explorer API gives the test trace. */
static long
api_span_count(unsigned port)
{
    long status = 0;
    char *body = serve_proc_get(port, "/api/v1/traces/" TRACE_HEX "?limit=1", 10000, &status);
    const char *at = body != NULL ? strstr(body, "\"span_count\":") : NULL;
    long n = at != NULL ? atol(at + strlen("\"span_count\":")) : -1;

    if (status != 200 || at == NULL) {
        fail_msg("GET trace on port %u: %ld %.300s", port, status, body != NULL ? body : "");
    }
    free(body);
    return n;
}

static void
test_two_instances_store_every_span_once(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex[2] = {sender(f->port[0], 10000), sender(f->port[1], 10000)};
    long rows = 0;
    long distinct = 0;

    for (unsigned b = 0; b < 40; b++) {
        assert_weft_ok(send_batch(ex[b % 2], b));
    }
    /* A sender that did not hear the answer sends again, maybe to the other instance. */
    for (unsigned b = 0; b < 6; b++) {
        assert_weft_ok(send_batch(ex[(b + 1) % 2], b));
    }
    count_rows(f, &rows, &distinct);
    assert_int_equal(rows, 40 * BATCH);
    assert_int_equal(distinct, 40 * BATCH);
    assert_int_equal(api_span_count(f->port[0]), 40 * BATCH);
    assert_int_equal(api_span_count(f->port[1]), 40 * BATCH);
    weft_exporter_free(ex[0]);
    weft_exporter_free(ex[1]);
}

static void
test_an_instance_killed_mid_ingest_loses_nothing(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex[2] = {sender(f->port[0], 1500), sender(f->port[1], 10000)};
    long rows = 0;
    long distinct = 0;
    size_t moved = 0;

    for (unsigned b = 0; b < 60; b++) {
        if (b == 25) {
            kill(-f->pid[0], SIGKILL); /* mid-ingest: the next batches for it find nobody */
            assert_int_equal(weft_test_wait(f->pid[0], 10000), 128 + SIGKILL);
            f->pid[0] = 0;
        }
        if (send_batch(ex[b % 2], b) != WEFT_OK) {
            /* Not acknowledged: the sender sends it to the instance that is left. */
            assert_weft_ok(send_batch(ex[1], b));
            moved++;
        }
    }
    assert_true(moved >= 15);
    count_rows(f, &rows, &distinct);
    assert_int_equal(rows, 60 * BATCH);
    assert_int_equal(distinct, 60 * BATCH);
    assert_int_equal(api_span_count(f->port[1]), 60 * BATCH);
    weft_exporter_free(ex[0]);
    weft_exporter_free(ex[1]);
}

static void
test_database_outage_answers_503_and_loses_nothing(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *ex = sender(f->port[0], 3000); /* room for a Retry-After: 1 */
    struct weft_otlp_stats st;
    char err[512] = "";
    long rows = 0;
    long distinct = 0;
    long status = 0;
    char *metrics = NULL;

    assert_weft_ok(send_batch(ex, 0));
    assert_int_equal(weft_test_pg_halt(pg), 0);
    /* PostgreSQL is down: the instance answers 503 (Retry-After), the sender retries for its
     * budget and gives up on this try; the batch is not stored. */
    assert_int_not_equal(send_batch(ex, 1), WEFT_OK);
    weft_otlp_exporter_stats(ex, &st);
    assert_int_equal(st.last_http_status, 503);
    assert_true(st.retries >= 1);
    assert_int_equal(weft_test_pg_restart(pg, err, sizeof(err)), 0);
    weft_exporter_free(ex);
    ex = sender(f->port[0], 20000); /* the sender's next try, with a longer budget */
    assert_weft_ok(send_batch(ex, 1));
    assert_weft_ok(send_batch(ex, 2));
    count_rows(f, &rows, &distinct);
    assert_int_equal(rows, 3 * BATCH);
    assert_int_equal(distinct, 3 * BATCH);
    /* The refusals are counted, with their reason. */
    metrics = serve_proc_get(f->port[0], "/metrics", 10000, &status);
    assert_int_equal(status, 200);
    assert_non_null(metrics);
    {
        const char *labels[] = {"status=\"503\"", NULL};
        const char *refused[] = {"outcome=\"refused\"", NULL};
        const char *accepted[] = {"outcome=\"accepted\"", NULL};
        assert_true(serve_proc_sum(metrics, "weft_ingest_requests_total", labels, NULL) >= 1);
        assert_true(serve_proc_sum(metrics, "weft_ingest_spans_total", refused, NULL) >= BATCH);
        assert_true(serve_proc_sum(metrics, "weft_ingest_spans_total", accepted, NULL) ==
                    3 * BATCH);
        assert_true(serve_proc_sum(metrics, "weft_ingest_store_writes_total", NULL, NULL) >= 4);
        assert_true(
            serve_proc_sum(metrics, "weft_ingest_store_write_time_seconds_total", NULL, NULL) > 0);
        assert_true(serve_proc_sum(metrics, "weft_ingest_in_flight_limit", NULL, NULL) >= 1);
    }
    free(metrics);
    weft_exporter_free(ex);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_instances_store_every_span_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_instance_killed_mid_ingest_loses_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_database_outage_answers_503_and_loses_nothing, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
