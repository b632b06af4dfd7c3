/* tests/runtime/mstore_cases.h - per-run metric snapshots (runtime/observe/metrics_store.h) and the
 * fold `weft serve` builds from them, written once and run against both state backends:
 * tests/runtime/test_metrics_store.c over a SQLite file, tests/runtime_pg/test_metrics_pg.c
 * over a real PostgreSQL. Each case is one behaviour the two must share: a resumed run writes a
 * new attempt and the attempts add up; a checkpoint inside the interval is throttled and the
 * final one always writes; histograms merge bucket by bucket across runs; queue gauges count
 * only for runs in progress while span counts add up over every run; and out of memory at any
 * allocation leaves each run's snapshot whole or absent, never half written.
 *
 * The including file defines, before including this one (as for state_cases.h):
 *
 *   struct fx { struct rt_state *st; char location[...]; ... };  the handle and its location
 *   static long long fx_count(struct fx *f, const char *sql);     first column of the first row
 *
 * and lists MSTORE_CASES(setup, teardown) in its cmocka group. */
#ifndef WEFT_TESTS_MSTORE_CASES_H
#define WEFT_TESTS_MSTORE_CASES_H

#include "base/mem.h"
#include "base/time.h"
#include "runtime/observe/metrics_store.h"
#include "runtime/state/state.h"
#include "support/failalloc.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the fold says about one instrument: every series of it whose string label @p key is
 * @p value (all series when @p key is NULL), added up. */
struct probe {
    const char *name;
    const char *key;
    const char *value;
    bool is_found;
    double total;
    uint64_t count;
    double sum;
    uint64_t buckets[8];
};

static bool
probe_visit(const struct weft_instrument_view *in, const struct weft_series_view *s, void *ud)
{
    struct probe *p = ud;
    bool is_match = p->key == NULL;

    if (s == NULL || strcmp(in->name, p->name) != 0) {
        return true;
    }
    for (size_t i = 0; !is_match && i < s->attr_count; i++) {
        is_match = strcmp(s->attrs[i].key, p->key) == 0 &&
                   s->attrs[i].value.type == WEFT_VALUE_STRING &&
                   strcmp(s->attrs[i].value.u.str, p->value) == 0;
    }
    if (!is_match) {
        return true;
    }
    p->is_found = true;
    p->total += s->value;
    p->count += s->count;
    p->sum += s->sum;
    for (size_t i = 0; s->bucket_counts != NULL && i <= in->bound_count && i < 8; i++) {
        p->buckets[i] += s->bucket_counts[i];
    }
    return true;
}

/* Fold the store at @p location and probe it. */
static struct probe
folded(const char *location, const char *name, const char *key, const char *value)
{
    struct weft_meter *meter = NULL;
    struct probe p;

    memset(&p, 0, sizeof(p));
    p.name = name;
    p.key = key;
    p.value = value;
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft__rt_mstore_fold(meter, location));
    assert_weft_ok(weft_meter_collect(meter, probe_visit, &p));
    weft_meter_free(meter);
    return p;
}

/* One run's snapshot writer, started; its meter in *meter. */
static struct rt_mstore *
started(struct fx *f, const char *run_id, struct weft_meter **meter)
{
    struct rt_mstore *ms = weft__rt_mstore_open(f->location);

    assert_non_null(ms);
    assert_weft_ok(weft__rt_mstore_start(ms, run_id, NULL));
    *meter = weft__rt_mstore_meter(ms);
    assert_non_null(*meter);
    return ms;
}

static struct weft_instrument *
counter(struct weft_meter *meter, const char *name)
{
    struct weft_instrument *in = NULL;

    assert_weft_ok(
        weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, name, "{x}", "Test", NULL, 0, &in));
    return in;
}

static void
test_mstore_resumed_run_attempts_add_up(void **state)
{
    struct fx *f = *state;
    struct weft_meter *meter = NULL;
    struct weft_attr a = weft_attr_str("kind", "a");
    struct rt_mstore *ms = NULL;

    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", "0");
    ms = started(f, "run1", &meter);
    assert_weft_ok(weft_counter_add(counter(meter, "test.things"), 3, &a, 1));
    weft__rt_mstore_checkpoint(ms, 1, true);
    weft__rt_mstore_free(ms);
    assert_true(folded(f->location, "test.things", "kind", "a").total == 3.0);
    /* The same run id again (a resume): attempt 1, beside attempt 0. */
    ms = started(f, "run1", &meter);
    assert_weft_ok(weft_counter_add(counter(meter, "test.things"), 4, &a, 1));
    weft__rt_mstore_checkpoint(ms, 1, true);
    weft__rt_mstore_free(ms);
    assert_int_equal(fx_count(f, "SELECT count(DISTINCT attempt) FROM run_metrics"
                                 " WHERE run_id = 'run1'"),
                     2);
    assert_int_equal(fx_count(f, "SELECT max(attempt) FROM run_metrics WHERE run_id = 'run1'"), 1);
    assert_true(folded(f->location, "test.things", "kind", "a").total == 7.0);
    /* Another run adds in too; a label of its own stays apart. */
    ms = started(f, "run2", &meter);
    assert_weft_ok(weft_counter_add(counter(meter, "test.things"), 5, &a, 1));
    assert_weft_ok(weft_counter_add(counter(meter, "test.things"), 1, NULL, 0));
    weft__rt_mstore_checkpoint(ms, 1, true);
    weft__rt_mstore_free(ms);
    assert_true(folded(f->location, "test.things", "kind", "a").total == 12.0);
    assert_true(folded(f->location, "test.things", NULL, NULL).total == 13.0);
    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", NULL);
}

static void
test_mstore_checkpoint_is_throttled_and_final_always_writes(void **state)
{
    struct fx *f = *state;
    struct weft_meter *meter = NULL;
    struct weft_instrument *c = NULL;
    struct rt_mstore *ms = NULL;

    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", "3600000"); /* an hour: nothing but the first */
    ms = started(f, "slow", &meter);
    c = counter(meter, "test.steps");
    assert_weft_ok(weft_counter_add(c, 1, NULL, 0));
    weft__rt_mstore_checkpoint(ms, 1, false); /* the first: written at once */
    assert_true(folded(f->location, "test.steps", NULL, NULL).total == 1.0);
    assert_weft_ok(weft_counter_add(c, 1, NULL, 0));
    weft__rt_mstore_checkpoint(ms, 2, false); /* within the interval: not written */
    assert_true(folded(f->location, "test.steps", NULL, NULL).total == 1.0);
    weft__rt_mstore_checkpoint(ms, 2, true); /* the run's end: written */
    assert_true(folded(f->location, "test.steps", NULL, NULL).total == 2.0);
    weft__rt_mstore_free(ms);
    /* One snapshot replaces the last: one row for the series, not one per checkpoint. */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM run_metrics WHERE name = 'test.steps'"), 1);
    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", NULL);
}

static void
test_mstore_histograms_merge_bucket_by_bucket(void **state)
{
    static const double bounds[] = {1.0, 10.0};
    struct fx *f = *state;
    struct weft_meter *meter = NULL;
    struct weft_instrument *h = NULL;
    struct rt_mstore *ms = NULL;
    struct probe p;

    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", "0");
    for (int run = 0; run < 2; run++) {
        ms = started(f, run == 0 ? "h0" : "h1", &meter);
        assert_weft_ok(weft_meter_instrument(meter, WEFT_INSTRUMENT_HISTOGRAM, "test.latency", "s",
                                             "Latency", bounds, 2, &h));
        if (run == 0) {
            assert_weft_ok(weft_histogram_record(h, 0.5, NULL, 0));
            assert_weft_ok(weft_histogram_record(h, 5.0, NULL, 0));
        } else {
            assert_weft_ok(weft_histogram_record(h, 20.0, NULL, 0));
        }
        weft__rt_mstore_checkpoint(ms, 1, true);
        weft__rt_mstore_free(ms);
    }
    p = folded(f->location, "test.latency", NULL, NULL);
    assert_true(p.is_found);
    assert_int_equal(p.count, 3);
    assert_true(p.sum == 25.5);
    assert_int_equal(p.buckets[0], 1);
    assert_int_equal(p.buckets[1], 1);
    assert_int_equal(p.buckets[2], 1);
    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", NULL);
}

/* Queue fill counts only for a run in progress; span counts add up over all runs. */
static void
test_mstore_queue_gauges_count_only_live_runs(void **state)
{
    struct fx *f = *state;
    struct weft__state_run_end end;
    struct weft_attr ex = weft_attr_str("exporter", "x");
    struct weft_meter *meter = NULL;
    struct weft_instrument *g = NULL;
    uint64_t now = weft__now_ns();

    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", "0");
    assert_weft_ok(weft__state_run_begin(f->st, "live", "wf", "wf.json", "s1", "in", now - 1000));
    assert_weft_ok(weft__state_run_begin(f->st, "done", "wf", "wf.json", "s2", "in", now - 2000));
    memset(&end, 0, sizeof(end));
    end.status = "completed";
    end.ended_ns = now - 500;
    end.loops = "{}";
    assert_weft_ok(weft__state_run_end(f->st, "done", &end));
    for (int run = 0; run < 2; run++) {
        struct rt_mstore *ms = started(f, run == 0 ? "live" : "done", &meter);
        assert_weft_ok(weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE,
                                             "weft.exporter.queue.size", "{span}", "Queue", NULL, 0,
                                             &g));
        assert_weft_ok(weft_gauge_set(g, 5, &ex, 1));
        assert_weft_ok(weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.spans.ended",
                                             "{span}", "Spans", NULL, 0, &g));
        assert_weft_ok(weft_gauge_set(g, 10, &ex, 1));
        weft__rt_mstore_checkpoint(ms, 1, true);
        weft__rt_mstore_free(ms);
    }
    assert_true(folded(f->location, "weft.exporter.queue.size", "exporter", "x").total == 5.0);
    assert_true(folded(f->location, "weft.spans.ended", "exporter", "x").total == 20.0);
    /* The live run is in progress, the other not. */
    assert_true(folded(f->location, "weft.runs.active", "workflow", "wf").total == 1.0);
    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", NULL);
}

/* Out of memory at every allocation of a run's snapshots and of the fold: a snapshot is stored
 * whole (both its series) or not at all, and nothing crashes or leaks (ASan). */
static void
test_mstore_out_of_memory_never_half_writes(void **state)
{
    struct fx *f = *state;
    bool is_done = false;
    long budget = 0;

    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", "0");
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (budget = 0; !is_done && budget < 5000; budget++) {
        char id[32];
        struct rt_mstore *ms = NULL;
        struct weft_meter *meter = NULL;
        struct weft_instrument *c = NULL;
        bool is_saved = false;
        bool is_folded = false;

        snprintf(id, sizeof(id), "oom%ld", budget);
        failalloc_budget = budget;
        ms = weft__rt_mstore_open(f->location);
        if (ms != NULL && weft__rt_mstore_start(ms, id, NULL) == WEFT_OK) {
            meter = weft__rt_mstore_meter(ms);
            if (weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "test.oom", "", "", NULL, 0,
                                      &c) == WEFT_OK) {
                struct weft_attr a = weft_attr_str("k", "a");
                struct weft_attr b = weft_attr_str("k", "b");
                is_saved = weft_counter_add(c, 1, &a, 1) == WEFT_OK &&
                           weft_counter_add(c, 1, &b, 1) == WEFT_OK;
            }
            weft__rt_mstore_checkpoint(ms, 1, true);
        }
        weft__rt_mstore_free(ms);
        {
            struct weft_meter *fm = NULL;
            if (weft_meter_new(NULL, &fm) == WEFT_OK) {
                is_folded = weft__rt_mstore_fold(fm, f->location) == WEFT_OK;
            }
            weft_meter_free(fm);
        }
        failalloc_budget = -1;
        if (is_saved && is_folded) {
            char sql[160];
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM run_metrics WHERE run_id = '%s'", id);
            is_done = fx_count(f, sql) == 2;
        }
    }
    failalloc_budget = -1;
    assert_weft_ok(weft_set_allocator(NULL, NULL, NULL));
    print_message("mstore failalloc budgets: %ld\n", budget);
    assert_true(is_done);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM (SELECT run_id FROM run_metrics"
                                 " GROUP BY run_id, attempt HAVING count(*) <> 2) x"),
                     0);
    /* Every whole snapshot counts once in the fold. */
    assert_true(folded(f->location, "test.oom", "k", "a").total ==
                (double)fx_count(f, "SELECT count(DISTINCT run_id) FROM run_metrics"));
    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", NULL);
}

#define MSTORE_CASES(setup, teardown)                                                          \
    cmocka_unit_test_setup_teardown(test_mstore_resumed_run_attempts_add_up, setup, teardown), \
        cmocka_unit_test_setup_teardown(                                                       \
            test_mstore_checkpoint_is_throttled_and_final_always_writes, setup, teardown),     \
        cmocka_unit_test_setup_teardown(test_mstore_histograms_merge_bucket_by_bucket, setup,  \
                                        teardown),                                             \
        cmocka_unit_test_setup_teardown(test_mstore_queue_gauges_count_only_live_runs, setup,  \
                                        teardown),                                             \
        cmocka_unit_test_setup_teardown(test_mstore_out_of_memory_never_half_writes, setup,    \
                                        teardown)

#endif /* WEFT_TESTS_MSTORE_CASES_H */
