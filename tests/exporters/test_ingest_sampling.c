/* tests/exporters/test_ingest_sampling.c - tail sampling at ingest (exporters/ingest.c with
 * --sampling, exporters/tail.c deciding): OTLP protobuf requests as three processes of a
 * distributed run would send them (two workers' spans, then the orchestrator's root carrying
 * the run's decision) are kept whole or dropped whole; traces of an OpenTelemetry SDK (no
 * weft decision) are decided by the policy from what their spans show once the wait after
 * their root is over; late spans follow; the bound on held traces decides the oldest early;
 * shutdown decides what is held; /metrics-side counters say all of it. The span store read
 * back through the public API is the judge. */
#include "base/buf.h"
#include "exporters/ingest.h"
#include "exporters/otlp_encode.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <weft/sampling.h>

struct fixture {
    char dir[256];
    char db[300];
    struct weft__ingest *ingest;
};

static void
open_ingest(struct fixture *f, const char *rules, uint32_t wait_ms)
{
    struct weft__ingest_options o;

    memset(&o, 0, sizeof(o));
    o.db_path = f->db;
    o.sampling = rules;
    o.sampling_wait_ms = wait_ms;
    assert_weft_ok(weft__ingest_new(&o, &f->ingest));
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-ingest-sampling-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/weft.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft__ingest_free(f->ingest);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* One span of trace @p t: span id @p id, parent @p parent (0: a root), optional status,
 * attributes and event. */
struct spec {
    uint8_t t;
    uint8_t id;
    uint8_t parent;
    bool is_remote_parent;
    weft_status_code status;
    const char *decision; /* weft.sampling.decision on it, or NULL */
    const char *event;    /* an event name, or NULL */
};

static void
post(struct fixture *f, const struct spec *specs, size_t n)
{
    struct weft_attr res_attr = weft_attr_str("service.name", "svc");
    struct weft_resource res = {&res_attr, 1, 0, NULL};
    struct weft_scope scope = {"test", NULL, NULL, NULL, 0};
    struct weft_span_data spans[16];
    const struct weft_span_data *views[16];
    struct weft_attr attrs[16][2];
    struct weft_event_data events[16];
    struct weft__buf body;
    struct weft__ingest_request req;
    struct weft__http_reply reply;

    assert_true(n <= 16);
    memset(spans, 0, sizeof(spans));
    memset(events, 0, sizeof(events));
    for (size_t i = 0; i < n; i++) {
        struct weft_span_data *s = &spans[i];
        size_t na = 0;

        s->trace_id[0] = 0x42;
        s->trace_id[15] = specs[i].t;
        s->span_id[7] = specs[i].id;
        s->has_parent = specs[i].parent != 0;
        s->parent_span_id[7] = specs[i].parent;
        s->parent_is_remote = specs[i].is_remote_parent;
        s->name = specs[i].parent == 0 ? "invoke_workflow w" : "invoke_agent a";
        s->kind = WEFT_SPAN_KIND_INTERNAL;
        s->start_time_ns = 1700000000000000000ull + specs[i].id * 1000u;
        s->end_time_ns = s->start_time_ns + 1000000u;
        s->status_code = specs[i].status;
        s->resource = &res;
        s->scope = &scope;
        if (specs[i].decision != NULL) {
            attrs[i][na++] = weft_attr_str(WEFT_SAMPLING_DECISION_ATTR, specs[i].decision);
            attrs[i][na++] = weft_attr_str(WEFT_SAMPLING_RULE_ATTR, "from-run");
        }
        s->attrs = attrs[i];
        s->attr_count = na;
        if (specs[i].event != NULL) {
            events[i].name = specs[i].event;
            events[i].time_ns = s->start_time_ns;
            s->events = &events[i];
            s->event_count = 1;
        }
        views[i] = s;
    }
    weft__buf_init(&body, 0);
    assert_weft_ok(weft__otlp_encode_proto(views, n, &body));
    memset(&req, 0, sizeof(req));
    memset(&reply, 0, sizeof(reply));
    req.method = "POST";
    req.content_type = "application/x-protobuf";
    req.body = body.data;
    req.len = body.len;
    weft__ingest_handle(f->ingest, &req, &reply);
    assert_int_equal(reply.status, 200);
    if (reply.free_body) {
        free(reply.body);
    }
    free(reply.headers);
    weft__buf_cleanup(&body);
}

/* Spans of trace @p t in the store (0 when the trace is not there). */
static size_t
stored(struct fixture *f, uint8_t t)
{
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    char id[33];
    size_t n = 0;

    snprintf(id, sizeof(id), "42%028x%02x", 0u, t);
    if (weft_store_open(f->db, &store) != WEFT_OK) {
        return 0;
    }
    if (weft_store_load_trace(store, id, &trace) == WEFT_OK) {
        n = weft_trace_span_count(trace);
        weft_trace_free(trace);
    }
    weft_store_close(store);
    return n;
}

static void
sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Wait until trace @p t has @p n spans stored (5 s at most). */
static void
wait_stored(struct fixture *f, uint8_t t, size_t n)
{
    for (int i = 0; i < 250 && stored(f, t) != n; i++) {
        sleep_ms(20);
    }
    assert_int_equal(stored(f, t), n);
}

static void
test_ingest_sampling_follows_the_runs_decision_across_processes(void **state)
{
    struct fixture *f = *state;
    /* The policy would keep everything: only the runs' own decisions can drop. */
    const struct spec worker1[] = {{1, 2, 9, true, WEFT_STATUS_UNSET, NULL, NULL},
                                   {2, 2, 9, true, WEFT_STATUS_UNSET, NULL, NULL}};
    const struct spec worker2[] = {{1, 3, 9, true, WEFT_STATUS_ERROR, NULL, NULL},
                                   {2, 3, 9, true, WEFT_STATUS_UNSET, NULL, NULL}};
    const struct spec orchestrator[] = {{1, 9, 1, false, WEFT_STATUS_UNSET, NULL, NULL},
                                        {1, 1, 0, false, WEFT_STATUS_OK, "keep", NULL},
                                        {2, 9, 1, false, WEFT_STATUS_UNSET, NULL, NULL},
                                        {2, 1, 0, false, WEFT_STATUS_OK, "drop", NULL}};
    const struct spec late[] = {{1, 4, 9, true, WEFT_STATUS_UNSET, NULL, NULL},
                                {2, 4, 9, true, WEFT_STATUS_UNSET, NULL, NULL}};
    struct weft_meter *meter = NULL;

    open_ingest(f, "all", 60000);
    post(f, worker1, 2);
    post(f, worker2, 2);
    assert_int_equal(stored(f, 1), 0); /* held until the run decides */
    post(f, orchestrator, 4);
    assert_int_equal(stored(f, 1), 4); /* whole, from three processes */
    assert_int_equal(stored(f, 2), 0); /* none of it */
    post(f, late, 2);                  /* a worker's last span comes after the root */
    assert_int_equal(stored(f, 1), 5);
    assert_int_equal(stored(f, 2), 0);
    /* /metrics counts both under the rule the runs named, once each (the late spans follow
     * decisions already counted). */
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft__ingest_observe(f->ingest, meter));
    assert_true(weft_test_prom_has(meter, "weft_ingest_traces_kept_total{rule=\"from-run\"} 1\n"));
    assert_true(
        weft_test_prom_has(meter, "weft_ingest_traces_dropped_total{rule=\"from-run\"} 1\n"));
    assert_true(weft_test_prom_has(meter, "weft_ingest_spans_held 0\n"));
    weft_meter_free(meter);
}

static void
test_ingest_sampling_decides_sdk_traces_after_the_wait(void **state)
{
    struct fixture *f = *state;
    /* Trace 3 has an ERROR span (kept by "failed"), trace 4 a stuck-loop event (kept by
     * "stuck"), trace 5 is clean (dropped: 0 %). */
    const struct spec spans[] = {{3, 2, 1, false, WEFT_STATUS_ERROR, NULL, NULL},
                                 {3, 1, 0, false, WEFT_STATUS_UNSET, NULL, NULL},
                                 {4, 2, 1, false, WEFT_STATUS_UNSET, NULL, "weft.stuck_loop"},
                                 {4, 1, 0, false, WEFT_STATUS_UNSET, NULL, NULL},
                                 {5, 2, 1, false, WEFT_STATUS_UNSET, NULL, NULL},
                                 {5, 1, 0, false, WEFT_STATUS_UNSET, NULL, NULL}};
    const struct spec late[] = {{3, 3, 1, false, WEFT_STATUS_UNSET, NULL, NULL},
                                {5, 3, 1, false, WEFT_STATUS_UNSET, NULL, NULL}};

    open_ingest(f, "failed,stuck,0%", 300);
    post(f, spans, 6);
    assert_int_equal(stored(f, 3), 0); /* the wait after the root is not over */
    /* The ticker decides once the wait is over, with no further request. */
    wait_stored(f, 3, 2);
    wait_stored(f, 4, 2);
    assert_int_equal(stored(f, 5), 0);
    post(f, late, 2);
    assert_int_equal(stored(f, 3), 3);
    assert_int_equal(stored(f, 5), 0);
}

static void
test_ingest_sampling_counts_by_rule_and_decides_at_shutdown(void **state)
{
    struct fixture *f = *state;
    const struct spec undecided[] = {{6, 2, 1, false, WEFT_STATUS_ERROR, NULL, NULL}};
    const struct spec decided[] = {{7, 1, 0, false, WEFT_STATUS_OK, "drop", NULL}};

    open_ingest(f, "failed,0%", 3600000);
    post(f, undecided, 1); /* no root: it would wait for silence */
    post(f, decided, 1);
    assert_int_equal(stored(f, 6), 0);
    /* Stopping decides what is held from what it has: trace 6 failed, so it is kept. */
    weft__ingest_free(f->ingest);
    f->ingest = NULL;
    assert_int_equal(stored(f, 6), 1);
    assert_int_equal(stored(f, 7), 0);
}

/* Two serve processes writing one store: what one decides, the other follows for the spans
 * of that trace it holds without the root (each keeps its own run buffer). */
static void
test_ingest_sampling_two_instances_decide_each_trace_once(void **state)
{
    struct fixture *f = *state;
    struct fixture other;
    const struct spec at_a[] = {{9, 1, 0, false, WEFT_STATUS_UNSET, NULL, NULL},
                                {9, 2, 1, false, WEFT_STATUS_ERROR, NULL, NULL},
                                {10, 1, 0, false, WEFT_STATUS_UNSET, NULL, NULL},
                                {10, 2, 1, false, WEFT_STATUS_UNSET, NULL, NULL}};
    /* At B: a clean span of the failed trace 9, and an ERROR span of trace 10 that B alone
     * would keep: A's decisions must win for both. */
    const struct spec at_b[] = {{9, 3, 1, false, WEFT_STATUS_UNSET, NULL, NULL},
                                {10, 3, 1, false, WEFT_STATUS_ERROR, NULL, NULL}};

    open_ingest(f, "failed,0%", 300);
    other = *f;
    other.ingest = NULL;
    open_ingest(&other, "failed,0%", 300);
    post(&other, at_b, 2);
    post(f, at_a, 4);
    /* A decides after its wait; B asks the store about what it holds once a second. */
    for (int i = 0; i < 160 && stored(f, 9) != 3; i++) {
        sleep_ms(50);
    }
    assert_int_equal(stored(f, 9), 3);
    sleep_ms(1500); /* B's next lookups: trace 10 must stay out */
    assert_int_equal(stored(f, 10), 0);
    /* Stopping B decides nothing of trace 10 on its own: it was settled already. */
    weft__ingest_free(other.ingest);
    assert_int_equal(stored(f, 10), 0);
}

static void
test_ingest_sampling_refuses_a_bad_policy(void **state)
{
    struct fixture *f = *state;
    struct weft__ingest_options o;

    memset(&o, 0, sizeof(o));
    o.db_path = f->db;
    o.sampling = "failed,sometimes";
    assert_int_equal(weft__ingest_new(&o, &f->ingest), WEFT_EINVAL);
    assert_null(f->ingest);
    o.sampling = "off"; /* off: spans are stored as they come */
    assert_weft_ok(weft__ingest_new(&o, &f->ingest));
    {
        const struct spec one[] = {{8, 2, 1, false, WEFT_STATUS_UNSET, NULL, NULL}};

        post(f, one, 1);
    }
    assert_int_equal(stored(f, 8), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_ingest_sampling_follows_the_runs_decision_across_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_sampling_decides_sdk_traces_after_the_wait,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_sampling_counts_by_rule_and_decides_at_shutdown,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_sampling_refuses_a_bad_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_sampling_two_instances_decide_each_trace_once,
                                        setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
