/* tests/runtime/test_sampling_runs.c - tail sampling over real runs (weft_run() on the
 * in-process executor): with "failed,stuck,low=reward<0.5,5%", a batch of 200 runs of which 20
 * fail (a command step exits 1), 10 hit a stuck loop (examples/stuck_loops/route.json, policy
 * warn) and 170 pass keeps exactly the failed and stuck runs plus the passing runs whose trace
 * id falls in the 5 % share, each whole (every span the run recorded) and nothing of the
 * others; the metrics count all 200 runs. A second, unsampled exporter on the same provider
 * sees every span: the reference for "whole". */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/sampling.h>

#define RUNS_PASS  170
#define RUNS_FAIL  20
#define RUNS_STUCK 10

struct run_seen {
    uint8_t trace_id[16];
    int kind; /* 0 pass, 1 fail, 2 stuck */
    bool is_kept;
    char rule[48];
};

static void
write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
}

static struct weft_workflow *
load(const char *path)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};

    if (weft_workflow_load(path, &wf, &d) != WEFT_OK) {
        char line[512];

        for (size_t i = 0; i < d.count; i++) {
            print_message("%s\n", weft_diag_format(&d.items[i], line, sizeof(line)));
        }
        fail_msg("cannot load %s", path);
    }
    weft_diags_cleanup(&d);
    return wf;
}

/* Spans of @p trace_id in @p m. */
static size_t
spans_of(struct mem_exporter *m, const uint8_t *trace_id)
{
    size_t n = 0;

    for (size_t i = 0; i < mem_exporter_count(m); i++) {
        n += memcmp(mem_exporter_span(m, i)->trace_id, trace_id, 16) == 0;
    }
    return n;
}

/* The share rule, computed here independently: the trace id's bytes 8..15 as a fraction. */
static bool
in_five_percent(const uint8_t *trace_id)
{
    double v = 0;

    for (int i = 8; i < 16; i++) {
        v = v * 256.0 + trace_id[i];
    }
    return v < 0.05 * 18446744073709551616.0;
}

static void
test_sampling_keeps_failed_stuck_and_a_share_of_the_rest(void **state)
{
    char dir[] = "/tmp/weft-sampling-XXXXXX";
    char path[600];
    char state_path[600];
    struct weft_provider *provider = NULL;
    struct weft_exporter *sampled = NULL;
    struct weft_exporter *all = NULL;
    struct mem_exporter *m_sampled = NULL;
    struct mem_exporter *m_all = NULL;
    struct weft_processor *proc = NULL;
    struct weft_tail *tail = NULL;
    struct weft_sampling_policy *policy = NULL;
    struct weft_meter *meter = NULL;
    struct weft_workflow *wf[3] = {NULL, NULL, NULL};
    struct run_seen *seen = calloc(RUNS_PASS + RUNS_FAIL + RUNS_STUCK, sizeof(*seen));
    struct weft_batch_options bo = {.max_queue_size = 8192,
                                    .max_export_batch_size = 512,
                                    .schedule_delay_ms = 50,
                                    .export_timeout_ms = 30000};
    size_t n = 0;
    size_t kept_pass = 0;
    char *prom = NULL;
    size_t prom_len = 0;
    char line[160];

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(state_path, sizeof(state_path), "%s/state.db", dir);
    write_file(dir, "script.json", "{\"responses\": {}}");
    write_file(dir, "pass.json",
               "{\"name\": \"pass\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"s1\", "
               "\"executor\": \"command\", \"argv\": [\"true\"]}]}");
    write_file(dir, "fail.json",
               "{\"name\": \"fail\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"s1\", "
               "\"executor\": \"command\", \"argv\": [\"false\"]}]}");
    snprintf(path, sizeof(path), "%s/pass.json", dir);
    wf[0] = load(path);
    snprintf(path, sizeof(path), "%s/fail.json", dir);
    wf[1] = load(path);
    snprintf(path, sizeof(path), "%s/examples/stuck_loops/route.json", WEFT_SOURCE_DIR);
    wf[2] = load(path);

    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(mem_exporter_new(&sampled, &m_sampled));
    assert_weft_ok(mem_exporter_new(&all, &m_all));
    mem_exporter_keep(m_sampled);
    mem_exporter_keep(m_all);
    assert_weft_ok(weft_tail_new(NULL, &tail));
    assert_weft_ok(weft_tail_wrap(tail, sampled, &sampled));
    assert_weft_ok(weft_batch_processor_new(sampled, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    assert_weft_ok(weft_batch_processor_new(all, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    assert_weft_ok(weft_sampling_policy_parse("failed,stuck,low=reward<0.5,5%", &policy, NULL, 0));
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_register(meter));

    for (int kind = 0; kind < 3; kind++) {
        size_t count = kind == 0 ? RUNS_PASS : kind == 1 ? RUNS_FAIL : RUNS_STUCK;

        for (size_t i = 0; i < count; i++, n++) {
            struct weft_run_options ro;
            struct weft_run_result *r = NULL;
            char error[256] = "";

            memset(&ro, 0, sizeof(ro));
            ro.provider = provider;
            ro.meter = meter;
            ro.workspace = dir;
            ro.state_path = state_path;
            ro.capture_content = -1;
            ro.sampling = policy;
            ro.input = "go";
            if (weft_run(wf[kind], &ro, &r, error, sizeof(error)) != WEFT_OK) {
                fail_msg("run %zu: %s", n, error);
            }
            /* Each run is of the kind it was made to be. */
            assert_int_equal(r->status == WEFT_RUN_COMPLETED, kind != 1);
            assert_true(r->is_trace_sampled);
            assert_int_equal(strlen(r->trace_id), 32);
            for (int b = 0; b < 16; b++) {
                unsigned byte = 0;

                assert_int_equal(sscanf(r->trace_id + 2 * b, "%2x", &byte), 1);
                seen[n].trace_id[b] = (uint8_t)byte;
            }
            seen[n].kind = kind;
            seen[n].is_kept = r->is_trace_kept;
            snprintf(seen[n].rule, sizeof(seen[n].rule), "%s", r->sampling_rule);
            weft_run_result_free(r);
        }
    }
    assert_weft_ok(weft_provider_force_flush(provider, 30000));

    for (size_t i = 0; i < n; i++) {
        size_t recorded = spans_of(m_all, seen[i].trace_id);
        size_t arrived = spans_of(m_sampled, seen[i].trace_id);
        bool expect = seen[i].kind != 0 || in_five_percent(seen[i].trace_id);

        assert_true(recorded >= 3);
        if (seen[i].is_kept != expect) {
            fail_msg("run %zu (kind %d): kept=%d, expected %d (rule %s)", i, seen[i].kind,
                     seen[i].is_kept, expect, seen[i].rule);
        }
        /* Nothing half-kept: a kept trace whole, a dropped one not at all. */
        assert_int_equal(arrived, expect ? recorded : 0);
        assert_string_equal(seen[i].rule, seen[i].kind == 1   ? "failed"
                                          : seen[i].kind == 2 ? "stuck"
                                                              : "sample");
        kept_pass += seen[i].kind == 0 && expect;
    }
    print_message("kept %zu of %d passing runs (5 %% share)\n", kept_pass, RUNS_PASS);

    /* Metrics count every run, kept or not, and the decisions by rule. */
    assert_weft_ok(weft_prometheus_render(meter, &prom, &prom_len));
    snprintf(line, sizeof(line), "weft_traces_kept_total{rule=\"failed\",workflow=\"fail\"} %d\n",
             RUNS_FAIL);
    assert_non_null(strstr(prom, line));
    snprintf(line, sizeof(line),
             "weft_traces_kept_total{rule=\"stuck\",workflow=\"stuck-route\"} %d\n", RUNS_STUCK);
    assert_non_null(strstr(prom, line));
    snprintf(line, sizeof(line),
             "weft_traces_dropped_total{rule=\"sample\",workflow=\"pass\"} %zu\n",
             RUNS_PASS - kept_pass);
    assert_non_null(strstr(prom, line));
    snprintf(line, sizeof(line), "weft_runs_total{status=\"completed\",workflow=\"pass\"} %d\n",
             RUNS_PASS);
    assert_non_null(strstr(prom, line));
    snprintf(line, sizeof(line), "weft_runs_total{status=\"failed\",workflow=\"fail\"} %d\n",
             RUNS_FAIL);
    assert_non_null(strstr(prom, line));

    free(prom);
    weft_meter_free(meter);
    weft_provider_free(provider);
    weft_tail_unref(tail);
    weft_sampling_policy_free(policy);
    for (int i = 0; i < 3; i++) {
        weft_workflow_free(wf[i]);
    }
    mem_exporter_state_free(m_sampled);
    mem_exporter_state_free(m_all);
    free(seen);
    weft_test_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling_keeps_failed_stuck_and_a_share_of_the_rest),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
