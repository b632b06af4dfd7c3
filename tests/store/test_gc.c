/* tests/store/test_gc.c - retention of the SQLite span store (weft_store_gc(), store/gc.c) and
 * its thread (store/retention.c): whole traces past an age or a size cap go, oldest first, the
 * summaries with them; a dry run changes nothing and says the same; the file shrinks; a store
 * made before auto_vacuum was set is vacuumed once; the thread runs a pass at start and counts
 * what it deleted. */
#include "support/store_spans.h"
#include "support/weft_test.h"

#include "base/time.h"
#include "store/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/metrics.h>
#include <weft/store.h>

struct fx {
    char dir[64];
    char db[128];
    struct weft_exporter *ex;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-gc-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/weft.db", f->dir);
    assert_weft_ok(weft_store_exporter_new(f->db, &f->ex));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_exporter_free(f->ex);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* Trace @p k (its id from k): @p spans spans starting at @p start_ms, each with a payload
 * attribute of @p payload bytes. */
static void
write_trace(struct fx *f, unsigned k, uint64_t start_ms, size_t spans, size_t payload)
{
    struct weft_span_data *batch = calloc(spans, sizeof(*batch));
    struct weft_attr *attrs = calloc(spans, sizeof(*attrs));
    char(*ids)[17] = calloc(spans, sizeof(*ids));
    char *text = calloc(1, payload + 1);
    char trace[33];

    assert_non_null(batch);
    assert_non_null(attrs);
    assert_non_null(ids);
    assert_non_null(text);
    snprintf(trace, sizeof(trace), "%032x", k + 1);
    for (size_t i = 0; i < spans; i++) {
        /* Text of its own per span (a repeated one would be stored once, as a payload). */
        uint32_t x = k * 7919u + (uint32_t)i * 104729u + 1;

        for (size_t b = 0; b < payload; b++) {
            x = x * 1103515245u + 12345u;
            text[b] = (char)('a' + (x >> 16) % 26);
        }
        snprintf(ids[i], sizeof(ids[i]), "%016zx", i + 1);
        batch[i] = store_spans_make(trace, ids[i], i == 0 ? NULL : ids[0], "work", start_ms + i, 1);
        attrs[i] = weft_attr_str("payload", strdup(text));
        batch[i].attrs = &attrs[i];
        batch[i].attr_count = 1;
    }
    assert_weft_ok(store_spans_export(f->ex, batch, spans));
    free(text);
    free(ids);
    for (size_t i = 0; i < spans; i++) {
        free((char *)(uintptr_t)attrs[i].value.u.str);
    }
    free(attrs);
    free(batch);
}

static size_t
stored_traces(const struct fx *f, char first[33])
{
    struct weft_store *st = NULL;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;

    assert_weft_ok(weft_store_open(f->db, &st));
    assert_weft_ok(weft_store_list_traces(st, 1000, &list, &n));
    if (first != NULL && n > 0) {
        memcpy(first, list[n - 1].trace_id, 33); /* the oldest */
    }
    weft_trace_summaries_free(list, n);
    weft_store_close(st);
    return n;
}

static int64_t
count_spans(const struct fx *f)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int64_t n = -1;

    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM spans", -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
}

/* Ten traces a minute apart, three spans each: the cutoff between the fourth and the fifth
 * takes the first four whole, and their spans. */
static void
test_gc_deletes_whole_traces_past_the_age(void **state)
{
    struct fx *f = *state;
    struct weft_store_gc_report rep;
    uint64_t cutoff = STORE_SPANS_T0 + 4 * 60000 * STORE_SPANS_MS - 1;
    char oldest[33] = "";
    char error[256] = "";

    for (unsigned k = 0; k < 10; k++) {
        write_trace(f, k, (uint64_t)k * 60000, 3, 10);
    }
    assert_int_equal(stored_traces(f, NULL), 10);
    /* A dry run counts what would go and changes nothing. */
    assert_weft_ok(weft_store_gc(f->db, cutoff, 0, true, &rep, error, sizeof(error)));
    assert_int_equal(rep.traces, 4);
    assert_int_equal(rep.spans, 12);
    assert_int_equal(stored_traces(f, NULL), 10);
    assert_int_equal(count_spans(f), 30);
    assert_weft_ok(weft_store_gc(f->db, cutoff, 0, false, &rep, error, sizeof(error)));
    assert_int_equal(rep.traces, 4);
    assert_int_equal(rep.spans, 12);
    assert_int_equal(stored_traces(f, oldest), 6);
    assert_string_equal(oldest, "00000000000000000000000000000005");
    assert_int_equal(count_spans(f), 18);
    /* Again: nothing more is that old. */
    assert_weft_ok(weft_store_gc(f->db, cutoff, 0, false, &rep, error, sizeof(error)));
    assert_int_equal(rep.traces, 0);
    /* The exporter goes on writing into the store gc changed. */
    write_trace(f, 20, 3600000, 2, 10);
    assert_int_equal(stored_traces(f, NULL), 7);
}

/* A size cap deletes the oldest traces (by start) until the live pages fit, and the file
 * shrinks to about what is kept. */
static void
test_gc_size_cap_takes_the_oldest_and_shrinks_the_file(void **state)
{
    struct fx *f = *state;
    struct weft_store_gc_report rep;
    char oldest[33] = "";
    char error[256] = "";

    for (unsigned k = 0; k < 40; k++) {
        write_trace(f, k, (uint64_t)k * 1000, 4, 8000); /* ~32 KB a trace */
    }
    assert_weft_ok(weft_store_gc(f->db, 0, 400 * 1024, false, &rep, error, sizeof(error)));
    assert_true(rep.traces > 0);
    assert_true(rep.traces < 40);
    assert_int_equal(stored_traces(f, oldest) + rep.traces, 40);
    /* the survivors are the newest: the oldest left is the one after those deleted */
    {
        char want[33];
        snprintf(want, sizeof(want), "%032zx", rep.traces + 1);
        assert_string_equal(oldest, want);
    }
    assert_true(rep.bytes_before > 40 * 32000);
    assert_true(rep.bytes_after > 0);
    assert_true(rep.bytes_after <= 400 * 1024 + 64 * 1024); /* the cap, plus a little schema */
}

/* A store from before auto_vacuum: gc vacuums it whole once, which switches it over. */
static void
test_gc_vacuums_an_old_store_once(void **state)
{
    struct fx *f = *state;
    struct weft_store_gc_report rep;
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char error[256] = "";

    weft_exporter_free(f->ex);
    f->ex = NULL;
    /* An old store: the schema made with auto_vacuum off. */
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA auto_vacuum = NONE; VACUUM", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_weft_ok(weft_store_exporter_new(f->db, &f->ex));
    for (unsigned k = 0; k < 20; k++) {
        write_trace(f, k, (uint64_t)k * 1000, 4, 8000);
    }
    assert_weft_ok(weft_store_gc(f->db, STORE_SPANS_T0 + 15000 * STORE_SPANS_MS, 0, false, &rep,
                                 error, sizeof(error)));
    assert_int_equal(rep.traces, 15);
    assert_true(rep.bytes_after < rep.bytes_before / 2);
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA auto_vacuum", -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(stmt, 0), 2); /* INCREMENTAL from now on */
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

static void
test_gc_reports_a_missing_or_foreign_store(void **state)
{
    struct fx *f = *state;
    struct weft_store_gc_report rep;
    char path[160];
    char error[256] = "";
    sqlite3 *db = NULL;

    snprintf(path, sizeof(path), "%s/none.db", f->dir);
    assert_int_equal(weft_store_gc(path, 1, 0, false, &rep, error, sizeof(error)), WEFT_ENOTFOUND);
    assert_non_null(strstr(error, "none.db"));
    snprintf(path, sizeof(path), "%s/other.db", f->dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE mine (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(weft_store_gc(path, 1, 0, false, &rep, error, sizeof(error)), WEFT_EIO);
    assert_non_null(strstr(error, "not a weft span store"));
    assert_int_equal(weft_store_gc(f->db, 1, 0, false, NULL, error, sizeof(error)), WEFT_EINVAL);
}

/* The thread's first pass runs at start; its counts reach a meter. */
static void
test_retention_thread_runs_at_start_and_counts(void **state)
{
    struct fx *f = *state;
    struct weft__store_retention *r = NULL;
    struct weft__store_retention_config cfg;
    struct weft__store_retention_stats st;
    struct weft_meter *meter = NULL;

    for (unsigned k = 0; k < 5; k++) {
        write_trace(f, k, (uint64_t)k * 1000, 2, 600); /* long texts: payload records */
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.max_age_ns = 1000000000ull; /* a second: every trace of 2023 is older */
    cfg.interval_ms = 3600000;
    assert_weft_ok(weft__store_retention_start(f->db, &cfg, &r));
    assert_non_null(r);
    for (int i = 0; i < 500; i++) {
        weft__store_retention_stats(r, &st);
        if (st.passes_ok + st.passes_failed > 0) {
            break;
        }
        weft__sleep_ms(10);
    }
    weft__store_retention_stats(r, &st);
    assert_int_equal(st.passes_ok, 1);
    assert_int_equal(st.traces_deleted, 5);
    assert_true(st.payloads_deleted >= 10); /* a text of its own per span: its records */
    assert_true(st.store_bytes > 0);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft__store_retention_observe(r, meter));
    assert_true(weft_test_prom_has(meter, "weft_store_retention_traces_deleted_total 5"));
    {
        char line[96];

        snprintf(line, sizeof(line), "weft_store_retention_payloads_deleted_total %llu",
                 (unsigned long long)st.payloads_deleted);
        assert_true(weft_test_prom_has(meter, line));
    }
    assert_true(weft_test_prom_has(meter, "weft_store_retention_passes_total{outcome=\"ok\"} 1"));
    weft_meter_free(meter);
    weft__store_retention_stop(r); /* does not wait out the hour */
    assert_int_equal(stored_traces(f, NULL), 0);
    /* Nothing to bound: no thread. */
    memset(&cfg, 0, sizeof(cfg));
    assert_weft_ok(weft__store_retention_start(f->db, &cfg, &r));
    assert_null(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gc_deletes_whole_traces_past_the_age, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_size_cap_takes_the_oldest_and_shrinks_the_file,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_vacuums_an_old_store_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_reports_a_missing_or_foreign_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retention_thread_runs_at_start_and_counts, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
