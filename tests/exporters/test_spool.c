/* tests/exporters/test_spool.c - the on-disk spool of the OTLP exporters (exporters/spool.c and
 * its use in otlp_transport.c).
 *
 * Unit: order across reopen, the caps (oldest dropped first, counted), a torn file (truncated
 * at every offset) or a damaged body deleted and counted and never returned, leftover
 * temporary files, lock contention between two holders (the second gets another slot) and a
 * restart taking over the slots of stopped holders, out of memory.
 * Integration, against a real HTTP/1.1 receiver on 127.0.0.1 whose requests are decoded with
 * the independent OTLP decoder: an outage longer than the retry budget (dropped connections,
 * then 503) sends every span to the spool, and when the receiver answers again each span
 * arrives exactly once, in the order the spans were spooled; the spool counters reach the
 * processor stats and /metrics.
 * Crash: this executable started again as a child (--child) exports while the receiver
 * refuses, is killed with SIGKILL mid-outage, and a new exporter on the same spool directory
 * delivers every span the child had spooled, once.
 */
#include "base/buf.h"
#include "exporters/spool.h"
#include "support/failalloc.h"
#include "support/http_receiver.h"
#include "support/otlp_decode.h"
#include "support/weft_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fx {
    char root[64]; /* the spool root, a fresh temporary directory */
    struct http_receiver *rx;
    char url[128];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->root, sizeof(f->root), "/tmp/weft-spool-XXXXXX");
    if (mkdtemp(f->root) == NULL) {
        fail_msg("mkdtemp: %s", strerror(errno));
    }
    weft_test_setenv("WEFT_EXPORT_SPOOL", NULL);
    weft_test_setenv("WEFT_EXPORT_SPOOL_DIR", NULL);
    weft_test_setenv("WEFT_EXPORT_SPOOL_MAX_BYTES", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_COMPRESSION", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_PROTOCOL", NULL);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    if (f->rx != NULL) {
        http_receiver_stop(f->rx);
    }
    weft_test_rmtree(f->root);
    free(f);
    return 0;
}

static struct weft__spool *
open_spool(struct fx *f, uint64_t max_bytes, size_t max_files)
{
    struct weft__spool_config c = {.root = f->root,
                                   .kind = "otlp",
                                   .url = "http://127.0.0.1:4318/v1/traces",
                                   .max_bytes = max_bytes,
                                   .max_files = max_files};
    struct weft__spool *s = NULL;

    assert_weft_ok(weft__spool_open(&c, &s));
    return s;
}

static void
put_text(struct weft__spool *s, const char *text, uint32_t spans)
{
    assert_weft_ok(weft__spool_put(s, text, strlen(text), WEFT__SPOOL_JSON, spans));
}

/* Peek the oldest request and compare it with @p text, then pop it. */
static void
expect_next(struct weft__spool *s, const char *text, uint32_t spans)
{
    struct weft__buf b;
    uint32_t flags = 0;
    uint32_t n = 0;

    weft__buf_init(&b, 0);
    assert_weft_ok(weft__spool_peek(s, &b, &flags, &n));
    assert_int_equal(b.len, strlen(text));
    assert_memory_equal(b.data, text, b.len);
    assert_int_equal(flags, WEFT__SPOOL_JSON);
    assert_int_equal(n, spans);
    weft__spool_pop(s);
    weft__buf_cleanup(&b);
}

static void
expect_empty(struct weft__spool *s)
{
    struct weft__buf b;
    uint32_t flags = 0;
    uint32_t n = 0;

    weft__buf_init(&b, 0);
    assert_true(weft__spool_is_empty(s));
    assert_weft_err(weft__spool_peek(s, &b, &flags, &n), WEFT_ENOTFOUND);
    weft__buf_cleanup(&b);
}

/* The request files of a slot, sorted by name (the sequence). */
static size_t
list_files(const char *dir, const char *ext, char names[][64], size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *de = NULL;
    size_t n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        const char *dot = strrchr(de->d_name, '.');

        if (dot != NULL && strcmp(dot + 1, ext) == 0 && n < max) {
            snprintf(names[n++], 64, "%.63s", de->d_name);
        }
    }
    closedir(d);
    qsort(names, n, 64, (int (*)(const void *, const void *))strcmp);
    return n;
}

static char *
read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    char *data = NULL;
    long n = 0;

    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    data = malloc((size_t)n + 1);
    assert_int_equal(fread(data, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return data;
}

static void
write_all(const char *path, const char *data, size_t len)
{
    FILE *fp = fopen(path, "wb");

    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Unit                                                                                        */

static void
test_spool_keeps_order_across_reopen(void **state)
{
    struct fx *f = *state;
    struct weft__spool *s = open_spool(f, 0, 0);
    struct weft_spool_stats st;

    put_text(s, "request 0", 1);
    put_text(s, "request 1", 2);
    put_text(s, "request 2", 3);
    weft__spool_stats(s, &st);
    assert_true(st.is_enabled);
    assert_int_equal(st.files, 3);
    assert_int_equal(st.spans, 6);
    assert_int_equal(st.spans_spooled, 6);
    expect_next(s, "request 0", 1);
    weft__spool_close(s);

    /* A new holder finds the rest in order, and its new requests go behind them. */
    s = open_spool(f, 0, 0);
    weft__spool_stats(s, &st);
    assert_int_equal(st.files, 2);
    assert_int_equal(st.spans, 5);
    put_text(s, "request 3", 4);
    weft__spool_close(s);
    s = open_spool(f, 0, 0);
    expect_next(s, "request 1", 2);
    expect_next(s, "request 2", 3);
    expect_next(s, "request 3", 4);
    expect_empty(s);
    weft__spool_stats(s, &st);
    assert_int_equal(st.spans_drained, 9);
    assert_int_equal(st.bytes, 0);
    weft__spool_close(s);
}

static void
test_spool_cap_drops_oldest_and_counts(void **state)
{
    struct fx *f = *state;
    char body[101];
    struct weft__spool *s = NULL;
    struct weft_spool_stats st;

    memset(body, 'x', 100);
    body[100] = '\0';
    /* Room for three files of 32 + 100 bytes. */
    s = open_spool(f, 3 * 132, 0);
    for (int i = 0; i < 5; i++) {
        body[0] = (char)('0' + i);
        put_text(s, body, 10 + (uint32_t)i);
    }
    weft__spool_stats(s, &st);
    assert_int_equal(st.files, 3);
    assert_int_equal(st.bytes, 3 * 132);
    assert_int_equal(st.requests_dropped, 2);
    assert_int_equal(st.spans_dropped, 10 + 11);
    assert_int_equal(st.spans, 12 + 13 + 14);
    body[0] = '2';
    expect_next(s, body, 12);

    /* Larger than the whole cap: not written, counted. */
    {
        char big[400];

        memset(big, 'y', sizeof(big));
        assert_weft_err(weft__spool_put(s, big, sizeof(big), 0, 7), WEFT_ELIMIT);
    }
    weft__spool_stats(s, &st);
    assert_int_equal(st.spans_dropped, 10 + 11 + 7);
    assert_int_equal(st.files, 2);
    weft__spool_close(s);

    /* The file-count cap works the same way. */
    weft_test_rmtree(f->root);
    assert_int_equal(mkdir(f->root, 0700), 0);
    s = open_spool(f, 0, 2);
    put_text(s, "a", 1);
    put_text(s, "b", 2);
    put_text(s, "c", 4);
    weft__spool_stats(s, &st);
    assert_int_equal(st.files, 2);
    assert_int_equal(st.spans_dropped, 1);
    expect_next(s, "b", 2);
    expect_next(s, "c", 4);
    weft__spool_close(s);
}

static void
test_spool_torn_file_is_deleted_and_counted_at_every_offset(void **state)
{
    struct fx *f = *state;
    struct weft__spool *s = open_spool(f, 0, 0);
    char dir[256];
    char names[4][64];
    char first_path[512];
    char second_path[512];
    char *first = NULL;
    char *second = NULL;
    size_t first_len = 0;
    size_t second_len = 0;
    char body[201];

    memset(body, 'z', 200);
    body[200] = '\0';
    put_text(s, body, 7);
    put_text(s, "the good one", 3);
    snprintf(dir, sizeof(dir), "%s", weft__spool_dir(s));
    weft__spool_close(s);
    assert_int_equal(list_files(dir, "req", names, 4), 2);
    snprintf(first_path, sizeof(first_path), "%s/%s", dir, names[0]);
    snprintf(second_path, sizeof(second_path), "%s/%s", dir, names[1]);
    first = read_all(first_path, &first_len);
    second = read_all(second_path, &second_len);
    assert_int_equal(first_len, 32 + 200);

    for (size_t cut = 0; cut < first_len; cut++) {
        struct weft_spool_stats st;

        write_all(first_path, first, cut);
        write_all(second_path, second, second_len);
        s = open_spool(f, 0, 0);
        weft__spool_stats(s, &st);
        assert_int_equal(st.files_corrupt, 1);
        /* The span count is known once the header is whole. */
        assert_int_equal(st.spans_corrupt, cut >= 32 ? 7 : 0);
        assert_int_equal(st.files, 1);
        expect_next(s, "the good one", 3);
        expect_empty(s);
        weft__spool_close(s);
    }

    /* A damaged body (one bit) is caught on read: deleted, counted, never returned. */
    first[32 + 100] ^= 0x01;
    write_all(first_path, first, first_len);
    write_all(second_path, second, second_len);
    s = open_spool(f, 0, 0);
    expect_next(s, "the good one", 3);
    {
        struct weft_spool_stats st;

        weft__spool_stats(s, &st);
        assert_int_equal(st.files_corrupt, 1);
        assert_int_equal(st.spans_corrupt, 7);
        assert_int_equal(st.spans_drained, 3);
    }
    expect_empty(s);
    weft__spool_close(s);

    /* A temporary file a crash left behind was never spooled: deleted and counted. */
    snprintf(first_path, sizeof(first_path), "%s/00000000000000000099.tmp", dir);
    write_all(first_path, first, 40);
    s = open_spool(f, 0, 0);
    {
        struct weft_spool_stats st;

        weft__spool_stats(s, &st);
        assert_int_equal(st.files_corrupt, 1);
        assert_int_equal(st.files, 0);
    }
    assert_int_equal(list_files(dir, "tmp", names, 4), 0);
    weft__spool_close(s);
    free(first);
    free(second);
}

static void
test_spool_lock_gives_a_second_holder_its_own_slot(void **state)
{
    struct fx *f = *state;
    struct weft__spool *a = open_spool(f, 0, 0);
    struct weft__spool *b = NULL;
    struct weft__spool *more[WEFT__SPOOL_SLOTS];
    struct weft__spool_config c = {
        .root = f->root, .kind = "otlp", .url = "http://127.0.0.1:4318/v1/traces"};
    struct weft__spool *none = NULL;
    struct weft__spool *other = NULL;

    put_text(a, "a0", 1);
    put_text(a, "a1", 1);
    /* flock() locks belong to an open file description: a second open conflicts even in one
     * process, as it does between two processes. */
    b = open_spool(f, 0, 0);
    assert_string_not_equal(weft__spool_dir(a), weft__spool_dir(b));
    expect_empty(b); /* a's files are a's while a lives */
    put_text(b, "b0", 1);

    /* Every slot held: the exporter runs without a spool. */
    for (int i = 2; i < WEFT__SPOOL_SLOTS; i++) {
        more[i] = open_spool(f, 0, 0);
    }
    assert_weft_err(weft__spool_open(&c, &none), WEFT_ESTATE);
    assert_null(none);
    for (int i = 2; i < WEFT__SPOOL_SLOTS; i++) {
        weft__spool_close(more[i]);
    }

    /* Another endpoint has a directory of its own. */
    c.url = "http://127.0.0.1:4319/v1/traces";
    assert_weft_ok(weft__spool_open(&c, &other));
    expect_empty(other);
    weft__spool_close(other);

    /* Both holders stop (crash or exit): the next one sends both spools, each in order. */
    weft__spool_close(a);
    weft__spool_close(b);
    a = open_spool(f, 0, 0);
    expect_next(a, "a0", 1);
    expect_next(a, "a1", 1);
    expect_next(a, "b0", 1);
    expect_empty(a);
    weft__spool_close(a);
}

static void
test_spool_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;

    {
        struct weft__spool *s = open_spool(f, 0, 0);

        put_text(s, "kept", 1);
        weft__spool_close(s);
    }
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0;; budget++) {
        struct weft__spool_config c = {
            .root = f->root, .kind = "otlp", .url = "http://127.0.0.1:4318/v1/traces"};
        struct weft__spool *s = NULL;
        struct weft__buf b;
        uint32_t flags = 0;
        uint32_t n = 0;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__spool_open(&c, &s);
        if (err != WEFT_OK) {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(s);
            continue;
        }
        weft__buf_init(&b, 0);
        err = weft__spool_peek(s, &b, &flags, &n);
        weft__buf_cleanup(&b);
        weft__spool_close(s);
        if (err == WEFT_ENOMEM) {
            continue;
        }
        assert_weft_ok(err);
        break;
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    /* The file survived every failed attempt. */
    {
        struct weft__spool *s = open_spool(f, 0, 0);

        expect_next(s, "kept", 1);
        weft__spool_close(s);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Integration: an exporter behind a batch processor, a receiver that refuses, then answers    */

static void
span_id_hex(const json_t *sp, char *out)
{
    snprintf(out, 17, "%s", json_string_value(json_object_get(sp, "spanId")));
}

/* Call @p fn for every span of every request the receiver accepted (2xx), in arrival order. */
static void
each_delivered_span(struct http_receiver *rx, void (*fn)(void *, const json_t *), void *ud)
{
    for (size_t i = 0; i < http_receiver_count(rx); i++) {
        const struct http_request *raw = http_receiver_request(rx, i);
        struct weft_test_otlp_error err;
        json_t *req = NULL;
        json_t *rs = NULL;
        size_t a = 0;

        if (raw->answered < 200 || raw->answered > 299) {
            continue;
        }
        req = weft_test_otlp_decode_request(raw->body, raw->body_len, 0, &err);
        if (req == NULL) {
            fail_msg("the receiver could not decode a request: %s", err.text);
        }
        json_array_foreach(json_object_get(req, "resourceSpans"), a, rs)
        {
            json_t *ss = NULL;
            size_t b = 0;

            json_array_foreach(json_object_get(rs, "scopeSpans"), b, ss)
            {
                json_t *sp = NULL;
                size_t c = 0;

                json_array_foreach(json_object_get(ss, "spans"), c, sp)
                {
                    fn(ud, sp);
                }
            }
        }
        json_decref(req);
    }
}

struct order {
    long next;      /* the "i" attribute expected next */
    size_t count;   /* spans delivered */
    bool is_broken; /* one arrived out of order or twice */
};

static void
check_order(void *ud, const json_t *sp)
{
    struct order *o = ud;
    json_t *attr = NULL;
    size_t i = 0;

    json_array_foreach(json_object_get(sp, "attributes"), i, attr)
    {
        if (strcmp(json_string_value(json_object_get(attr, "key")), "i") == 0) {
            const char *v =
                json_string_value(json_object_get(json_object_get(attr, "value"), "intValue"));
            long got = v != NULL ? strtol(v, NULL, 10) : -1;

            if (got != o->next) {
                o->is_broken = true;
            }
            o->next = got + 1;
        }
    }
    o->count++;
}

static struct weft_exporter *
make_exporter(struct fx *f, bool is_gzip)
{
    struct weft_otlp_options o = {0};
    struct weft_exporter *e = NULL;

    o.endpoint = f->url;
    o.spool = 2;
    o.spool_dir = f->root;
    o.compression = is_gzip ? 2 : 1;
    o.timeout_ms = 2000;
    o.max_retry_ms = 40; /* the retry budget, far shorter than the outage */
    o.initial_backoff_ms = 5;
    o.max_backoff_ms = 10;
    assert_weft_ok(weft_otlp_exporter_new(&o, &e));
    return e;
}

static bool
wait_spool_empty(struct weft_processor *proc, unsigned timeout_ms)
{
    uint64_t end = weft_monotonic_ns() + (uint64_t)timeout_ms * 1000000u;

    for (;;) {
        struct weft_spool_stats ss;

        weft_processor_spool_stats(proc, &ss);
        if (ss.files == 0) {
            return true;
        }
        if (weft_monotonic_ns() > end) {
            return false;
        }
        sleep_ms(5);
    }
}

static void
run_outage(struct fx *f, bool is_gzip)
{
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {1024, 10, 20, 30000};
    struct weft_processor_stats ps;
    struct weft_spool_stats ss;
    struct weft_meter *meter = NULL;
    struct order order = {0};

    assert_int_equal(http_receiver_start(&f->rx), 0);
    http_receiver_url(f->rx, "", f->url, sizeof(f->url));
    /* Down: connections closed without an answer, then 503s. */
    http_receiver_set_default(f->rx, &(struct http_response){.drop = true});
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "spool", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, is_gzip), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_meter_observe_provider(meter, provider));
    for (int i = 0; i < 100; i++) {
        struct weft_span *s = weft_span_start(tracer, "step", NULL);

        weft_span_set_int(s, "i", i);
        weft_span_end(s, 0);
        if (i % 10 == 9) {
            /* One batch at a time, so that the order of spooling is the order of i. */
            assert_weft_ok(weft_processor_force_flush(proc, 10000));
        }
        if (i == 49) {
            http_receiver_set_default(f->rx, &(struct http_response){.status = 503});
        }
    }
    weft_processor_get_stats(proc, &ps);
    weft_processor_spool_stats(proc, &ss);
    assert_int_equal(ps.exported, 0);
    assert_int_equal(ps.failed + ps.dropped, 0);
    assert_int_equal(ps.spooled, 100);
    assert_int_equal(ss.spans_spooled, 100);
    assert_int_equal(ss.spans, 100);
    assert_true(ss.bytes > 0);
    assert_true(weft_test_prom_has(meter, "weft_exporter_spool_size{exporter=\"otlp\"} 100"));
    assert_true(weft_test_prom_has(meter, "weft_spans_spooled{exporter=\"otlp\"} 100"));

    /* Back: the processor's idle calls send the spool, no new span needed. */
    http_receiver_set_default(f->rx, &(struct http_response){.status = 200});
    assert_true(wait_spool_empty(proc, 20000));
    weft_processor_spool_stats(proc, &ss);
    assert_int_equal(ss.spans_drained, 100);
    assert_int_equal(ss.spans_dropped + ss.spans_corrupt + ss.spans_rejected + ss.spans_lost, 0);
    assert_true(weft_test_prom_has(meter, "weft_exporter_spool_drained{exporter=\"otlp\"} 100"));
    assert_true(weft_test_prom_has(meter, "weft_exporter_spool_size{exporter=\"otlp\"} 0"));

    /* New spans go straight out again. */
    for (int i = 100; i < 110; i++) {
        struct weft_span *s = weft_span_start(tracer, "step", NULL);

        weft_span_set_int(s, "i", i);
        weft_span_end(s, 0);
    }
    assert_weft_ok(weft_provider_shutdown(provider, 10000));
    weft_processor_get_stats(proc, &ps);
    assert_int_equal(ps.exported, 10);

    /* Every span once, in the order of spooling, then the new ones. */
    each_delivered_span(f->rx, check_order, &order);
    assert_false(order.is_broken);
    assert_int_equal(order.count, 110);
    assert_int_equal(order.next, 110);
    weft_meter_free(meter);
    weft_provider_free(provider);
}

static void
test_spool_outage_longer_than_retry_budget_delivers_each_span_once_in_order(void **state)
{
    run_outage(*state, false);
}

static void
test_spool_outage_with_gzip_delivers_each_span_once_in_order(void **state)
{
    run_outage(*state, true);
}

static void
test_spool_final_refusal_of_a_spooled_request_is_counted(void **state)
{
    struct fx *f = *state;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {64, 5, 3600000, 30000};
    struct weft_spool_stats ss;

    assert_int_equal(http_receiver_start(&f->rx), 0);
    http_receiver_url(f->rx, "", f->url, sizeof(f->url));
    http_receiver_set_default(f->rx, &(struct http_response){.status = 503});
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "spool", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, false), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    for (int i = 0; i < 5; i++) {
        weft_span_end(weft_span_start(tracer, "refused later", NULL), 0);
    }
    assert_weft_ok(weft_processor_force_flush(proc, 10000));
    /* The endpoint answers again but refuses that request for good (400): dropped, counted;
     * the next one goes through. */
    http_receiver_push(f->rx, &(struct http_response){.status = 400});
    http_receiver_set_default(f->rx, &(struct http_response){.status = 200});
    for (int i = 0; i < 5; i++) {
        weft_span_end(weft_span_start(tracer, "fine", NULL), 0);
    }
    assert_weft_ok(weft_processor_force_flush(proc, 10000));
    weft_processor_spool_stats(proc, &ss);
    assert_int_equal(ss.spans_rejected, 5);
    assert_int_equal(ss.files, 0);
    {
        struct weft_processor_stats ps;

        weft_processor_get_stats(proc, &ps);
        assert_int_equal(ps.spooled, 5);
        assert_int_equal(ps.exported, 5);
    }
    weft_provider_free(provider);
}

/* ------------------------------------------------------------------------------------------ */
/* Crash: kill -9 mid-outage, then a new process with the same spool                           */

/* The child: export spans one at a time through a simple processor (each span is spooled
 * when weft_span_end returns) and append each span id to @p ids_path after that. Runs until
 * killed. */
static int
child_main(const char *url, const char *root, const char *ids_path)
{
    struct weft_otlp_options o = {0};
    struct weft_exporter *e = NULL;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    int fd = open(ids_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

    o.endpoint = url;
    o.spool = 2;
    o.spool_dir = root;
    o.compression = 1;
    o.timeout_ms = 2000;
    o.max_retry_ms = 20;
    o.initial_backoff_ms = 2;
    o.max_backoff_ms = 5;
    if (fd < 0 || weft_otlp_exporter_new(&o, &e) != WEFT_OK ||
        weft_provider_new(NULL, &provider) != WEFT_OK ||
        weft_provider_get_tracer(provider, "crash", NULL, &tracer) != WEFT_OK ||
        weft_simple_processor_new(e, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(provider, proc) != WEFT_OK) {
        return 3;
    }
    for (;;) {
        struct weft_span *s = weft_span_start(tracer, "before the crash", NULL);
        struct weft_span_context ctx;
        char line[20];

        weft_span_context_of(s, &ctx);
        weft_span_end(s, 0);
        weft_hex_encode(ctx.span_id, 8, line);
        line[16] = '\n';
        if (write(fd, line, 17) != 17) {
            return 4;
        }
    }
}

struct tally {
    json_t *count; /* span id -> times delivered */
};

static void
tally_span(void *ud, const json_t *sp)
{
    struct tally *t = ud;
    char id[17];
    json_t *n = NULL;

    span_id_hex(sp, id);
    n = json_object_get(t->count, id);
    json_object_set_new(t->count, id, json_integer(n == NULL ? 1 : json_integer_value(n) + 1));
}

static void
test_spool_kill_9_mid_outage_then_restart_delivers_everything_once(void **state)
{
    struct fx *f = *state;
    char ids_path[128];
    char exe[4096];
    ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    pid_t pid = 0;
    int status = 0;
    char *ids = NULL;
    size_t ids_len = 0;
    size_t recorded = 0;
    struct tally t = {json_object()};
    const char *key = NULL;
    json_t *value = NULL;
    struct weft_provider *provider = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {64, 8, 10, 30000};
    struct weft_spool_stats ss;
    size_t extra = 0;

    assert_true(exe_len > 0);
    exe[exe_len] = '\0';
    snprintf(ids_path, sizeof(ids_path), "%s/ids.txt", f->root);
    assert_int_equal(http_receiver_start(&f->rx), 0);
    http_receiver_url(f->rx, "", f->url, sizeof(f->url));
    http_receiver_set_default(f->rx, &(struct http_response){.status = 503});

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char root[96];

        snprintf(root, sizeof(root), "%s/spool", f->root);
        execl(exe, exe, "--child", f->url, root, ids_path, (char *)NULL);
        _exit(127);
    }
    /* Let it spool a few dozen spans, then kill it wherever it is (mid-write, mid-request). */
    for (int i = 0; i < 3000; i++) {
        struct stat st;

        if (stat(ids_path, &st) == 0 && st.st_size >= 40 * 17) {
            break;
        }
        sleep_ms(10);
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    ids = read_all(ids_path, &ids_len);
    recorded = ids_len / 17; /* a torn last line is not a recorded span */
    assert_true(recorded >= 40);

    /* The next process: same spool directory, the receiver answers. */
    http_receiver_set_default(f->rx, &(struct http_response){.status = 200});
    {
        char root[96];
        struct weft_otlp_options o = {0};
        struct weft_exporter *e = NULL;

        snprintf(root, sizeof(root), "%s/spool", f->root);
        o.endpoint = f->url;
        o.spool = 2;
        o.spool_dir = root;
        o.compression = 1;
        assert_weft_ok(weft_otlp_exporter_new(&o, &e));
        assert_weft_ok(weft_provider_new(NULL, &provider));
        assert_weft_ok(weft_batch_processor_new(e, &bo, &proc));
        assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    }
    assert_true(wait_spool_empty(proc, 30000));
    weft_processor_spool_stats(proc, &ss);
    /* A kill during a write leaves at most a temporary file: counted, never sent. */
    assert_true(ss.files_corrupt <= 1);
    assert_int_equal(ss.spans_dropped + ss.spans_rejected + ss.spans_lost, 0);
    assert_true(ss.spans_drained >= recorded);

    each_delivered_span(f->rx, tally_span, &t);
    for (size_t i = 0; i < recorded; i++) {
        char id[17];
        json_t *n = NULL;

        memcpy(id, ids + i * 17, 16);
        id[16] = '\0';
        n = json_object_get(t.count, id);
        if (n == NULL || json_integer_value(n) != 1) {
            fail_msg("span %s recorded by the child was delivered %lld times", id,
                     n == NULL ? 0LL : (long long)json_integer_value(n));
        }
    }
    json_object_foreach(t.count, key, value)
    {
        assert_int_equal(json_integer_value(value), 1); /* nothing twice */
    }
    /* At most the span the kill caught between its spooling and its line in ids.txt. */
    extra = json_object_size(t.count) - recorded;
    assert_true(extra <= 1);
    assert_int_equal(ss.spans_drained, json_object_size(t.count));
    json_decref(t.count);
    free(ids);
    weft_provider_free(provider);
}

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spool_keeps_order_across_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_cap_drops_oldest_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_torn_file_is_deleted_and_counted_at_every_offset,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_lock_gives_a_second_holder_its_own_slot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_spool_out_of_memory_fails_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_spool_outage_longer_than_retry_budget_delivers_each_span_once_in_order, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_spool_outage_with_gzip_delivers_each_span_once_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_final_refusal_of_a_spooled_request_is_counted,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_spool_kill_9_mid_outage_then_restart_delivers_everything_once, setup, teardown),
    };

    if (argc == 5 && strcmp(argv[1], "--child") == 0) {
        return child_main(argv[2], argv[3], argv[4]);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
