/* tests/exporters/test_store_checkpoint.c - the span store's WAL checkpoints on their own
 * thread (exporters/store_checkpoint.c), as weft serve's ingest runs them: the WAL starts over
 * while the writer keeps writing, nothing written is lost, the spans written through the batch
 * texts path are the ones export_batch writes, and a reader pinning old frames neither blocks
 * the writer nor keeps the WAL long once it lets go. Real SQLite files under /tmp. */
#include "support/weft_test.h"

#include "base/mem.h"
#include "store/store.h"
#include "tracing/exporter.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MS    1000000ull
#define T0    1700000000000000000ull
#define BATCH 64
#define PAGE  4096 /* SQLite's default page size, which the store keeps */

/* Thresholds far below the ingest's, so that a test crosses them in a few MiB. */
#define PAGES    50
#define BACKSTOP 400

static const struct weft_attr resource_attrs[] = {
    {"service.name", {WEFT_VALUE_STRING, 8, {.str = "svc-ckpt"}}},
};
static const struct weft_resource resource = {resource_attrs, 1, 0, NULL};

struct fixture {
    char dir[64];
    char db[128];
    struct weft_exporter *ex;
    char payload[1024]; /* each span carries 1 KiB, so a batch is about 37 pages */
    struct weft_attr attrs[1];
    struct weft_span_data spans[BATCH];
    const struct weft_span_data *ptrs[BATCH];
    uint32_t next_trace;
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-ckpt-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/weft.db", f->dir);
    assert_weft_ok(weft_store_exporter_new(f->db, &f->ex));
    memset(f->payload, 'x', sizeof(f->payload) - 1);
    f->attrs[0] = weft_attr_str("payload", f->payload);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_exporter_free(f->ex);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* One batch of BATCH spans of a new trace, through the prebuilt texts when @p texts. */
static void
write_batch(struct fixture *f, bool texts)
{
    struct weft__store_texts t;
    uint32_t trace = ++f->next_trace;

    for (size_t i = 0; i < BATCH; i++) {
        struct weft_span_data *s = &f->spans[i];

        memset(s, 0, sizeof(*s));
        memcpy(s->trace_id, &trace, sizeof(trace));
        s->trace_id[15] = 1;
        s->span_id[0] = (uint8_t)(i + 1);
        s->span_id[7] = 1;
        s->name = "chat";
        s->kind = WEFT_SPAN_KIND_CLIENT;
        s->start_time_ns = T0 + trace * MS + i;
        s->end_time_ns = s->start_time_ns + MS;
        s->attrs = f->attrs;
        s->attr_count = 1;
        s->resource = &resource;
        f->ptrs[i] = s;
    }
    if (texts) {
        assert_weft_ok(weft__store_texts_build(&t, f->ptrs, BATCH, 0));
        assert_weft_ok(weft__store_export_texts(f->ex, f->ptrs, BATCH, &t));
        weft__store_texts_cleanup(&t);
    } else {
        struct weft_export_result result = {0};

        assert_weft_ok(f->ex->ops->export_batch(f->ex->self, f->ptrs, BATCH, 0, &result));
    }
}

static long long
wal_size(const struct fixture *f)
{
    char wal[160];
    struct stat sb;

    snprintf(wal, sizeof(wal), "%s-wal", f->db);
    return stat(wal, &sb) == 0 ? (long long)sb.st_size : -1;
}

static long long
query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    long long v = -1;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    v = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
}

/* Frames in the WAL now, asked through @p db (a PASSIVE checkpoint that reports them; busy
 * while the thread runs one). */
static int
wal_frames(sqlite3 *db)
{
    int log = -1;
    int done = -1;
    int rc = SQLITE_BUSY;

    for (int i = 0; i < 500 && rc == SQLITE_BUSY; i++) {
        rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
        if (rc == SQLITE_BUSY) {
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
    }
    assert_int_equal(rc, SQLITE_OK);
    return log;
}

static void
wait_for_checkpoints(struct fixture *f, uint64_t at_least)
{
    uint64_t done = 0;
    uint64_t inline_done = 0;

    for (int i = 0; i < 500 && done < at_least; i++) {
        weft__store_checkpointer_stats(weft__store_checkpointer(f->ex), &done, &inline_done);
        if (done < at_least) {
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
    }
    assert_true(done >= at_least);
}

static void
test_checkpoints_run_on_the_thread_and_the_wal_starts_over(void **state)
{
    struct fixture *f = *state;
    uint64_t done = 0;
    uint64_t inline_done = 0;
    sqlite3 *db = NULL;

    assert_weft_ok(weft__store_checkpoint_in_background(f->ex, PAGES, BACKSTOP));
    assert_int_equal(weft__store_checkpoint_in_background(f->ex, PAGES, BACKSTOP), WEFT_EINVAL);
    /* 100 batches of about 37 pages: 3,700 pages written, 9 times the backstop. Every 5
     * batches (past the thread's 50 pages) the test waits for one more checkpoint, so that a
     * slow machine cannot leave the thread unscheduled until the backstop. */
    for (int b = 0; b < 100; b++) {
        write_batch(f, b % 2 == 0);
        if (b % 5 == 4) {
            wait_for_checkpoints(f, done + 1);
            weft__store_checkpointer_stats(weft__store_checkpointer(f->ex), &done, &inline_done);
        }
    }
    weft__store_checkpointer_stats(weft__store_checkpointer(f->ex), &done, &inline_done);
    assert_true(done >= 10);
    /* The WAL file never grew near what was written: it started over after the thread's
     * checkpoints, before the backstop was ever needed (no reader pinned frames). */
    assert_int_equal(inline_done, 0);
    assert_true(wal_size(f) > 0);
    assert_true(wal_size(f) < (long long)BACKSTOP * PAGE);
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(query_int(db, "SELECT count(*) FROM spans"), 100 * BATCH);
    assert_int_equal(query_int(db, "SELECT sum(span_count) FROM traces"), 100 * BATCH);
    /* Both write paths stored the same columns. */
    assert_int_equal(query_int(db, "SELECT count(DISTINCT attributes || events || links)"
                                   " FROM spans"),
                     1);
    sqlite3_close(db);
}

static void
test_a_reader_pinning_frames_does_not_block_the_writer(void **state)
{
    struct fixture *f = *state;
    uint64_t done = 0;
    uint64_t inline_done = 0;
    sqlite3 *reader = NULL;
    uint64_t t0 = 0;
    int batches = 40;

    assert_weft_ok(weft__store_checkpoint_in_background(f->ex, PAGES, BACKSTOP));
    write_batch(f, true);
    assert_int_equal(sqlite3_open(f->db, &reader), SQLITE_OK);
    assert_int_equal(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(query_int(reader, "SELECT count(*) FROM spans"), BATCH);
    /* 40 batches, 3.7 times the backstop: no checkpoint can copy past the reader's snapshot, and
     * no write waits for it (the busy timeout is 5 s). */
    t0 = weft_monotonic_ns();
    for (int b = 0; b < batches; b++) {
        write_batch(f, true);
    }
    assert_true(weft_monotonic_ns() - t0 < 4000 * MS);
    /* Past the backstop each commit also tries a checkpoint inline. On a loaded machine the
     * thread, woken by the commit before, may be checkpointing at that moment every time (the
     * writer's attempt is then SQLITE_BUSY and not counted): commits spaced so that the thread
     * has finished its pass let the writer's own attempt run. */
    weft__store_checkpointer_stats(weft__store_checkpointer(f->ex), &done, &inline_done);
    for (int tries = 0; inline_done == 0 && tries < 50; tries++) {
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        write_batch(f, true);
        batches++;
        weft__store_checkpointer_stats(weft__store_checkpointer(f->ex), &done, &inline_done);
    }
    assert_true(inline_done >= 1);
    assert_int_equal(query_int(reader, "SELECT count(*) FROM spans"), BATCH);
    assert_true(wal_size(f) > (long long)BACKSTOP * PAGE);
    assert_int_equal(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    /* Let go: the next commits copy everything and the WAL starts over. */
    for (int b = 0; b < 5; b++) {
        write_batch(f, false);
    }
    wait_for_checkpoints(f, done + 1);
    write_batch(f, false);
    assert_true(wal_frames(reader) < BACKSTOP);
    assert_int_equal(query_int(reader, "SELECT count(*) FROM spans"), (batches + 7) * BATCH);
    sqlite3_close(reader);
}

static void
test_stopping_hands_checkpoints_back_to_sqlite(void **state)
{
    struct fixture *f = *state;
    sqlite3 *db = NULL;

    assert_weft_ok(weft__store_checkpoint_in_background(f->ex, PAGES, BACKSTOP));
    for (int b = 0; b < 5; b++) {
        write_batch(f, true);
    }
    /* Closing the exporter stops the thread and closes the store: the last connection's
     * close checkpoints the WAL away. */
    weft_exporter_free(f->ex);
    f->ex = NULL;
    assert_true(wal_size(f) <= 0);
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(query_int(db, "SELECT count(*) FROM spans"), 5 * BATCH);
    sqlite3_close(db);
    /* Not a store exporter: refused. */
    assert_int_equal(weft__store_checkpoint_in_background(NULL, PAGES, BACKSTOP), WEFT_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_checkpoints_run_on_the_thread_and_the_wal_starts_over),
        T(test_a_reader_pinning_frames_does_not_block_the_writer),
        T(test_stopping_hands_checkpoints_back_to_sqlite),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
