/* bench/ingest_bench.c - measures `weft serve`'s OTLP ingest (exporters/ingest.h) without the
 * network: decoding ExportTraceServiceRequest bodies, and decoding plus writing into a span
 * store on disk.
 *
 * Prints one JSON object per line (JSON Lines), for example
 *   {"bench":"ingest_bench","case":"decode","format":"protobuf","spans_per_sec":2500000,...}
 * Cases (every batch is 512 spans of one trace with 10 attributes each: strings, ints, a
 * double and a bool, as SDK spans carry; a parent, one event on every 8th span, the
 * resource's service.name; bodies built by weft's own encoders, otlp_encode.h):
 *   decode        weft__otlp_decode_proto / _json alone, into a reused batch.
 *   decode_store  a whole request through weft__ingest_handle(): decode, one export call into
 *                 the SQLite store (one transaction per request), the response; the store is a
 *                 fresh file in a temporary directory, and each batch is a new trace. Run with
 *                 one client and with --threads clients at once (threads calling the handler
 *                 as the server's connection threads do; "clients" in the output).
 * spans_per_sec is the median over the runs; each run handles --batches batches. decode_store
 * also prints the store's WAL checkpoints over all runs (on their own thread, and inline past
 * the backstop: exporters/store_checkpoint.c) and the WAL file's size at the end.
 * Usage: ingest_bench [--batches N] [--runs N] [--threads N] [--dir DIR] [--only CASE:FORMAT]
 *   defaults 200 batches, 5 runs, 2 threads, $TMPDIR; --only runs one case, e.g.
 *   decode_store:protobuf (handy under perf).
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "base/mem.h"
#include "exporters/ingest.h"
#include "exporters/otlp_decode.h"
#include "exporters/otlp_encode.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <weft/weft.h>

#define BATCH       512
#define MAX_RUNS    31
#define MAX_THREADS 8

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* One batch of spans to encode: fixed content, ids varied by @p seq. */
struct fixture {
    struct weft_attr res_attr;
    struct weft_resource resource;
    struct weft_scope scope;
    struct weft_attr attrs[10];
    struct weft_attr ev_attr;
    struct weft_event_data event;
    struct weft_span_data spans[BATCH];
    const struct weft_span_data *views[BATCH];
};

static void
fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    f->res_attr = weft_attr_str("service.name", "bench-service");
    f->resource.attrs = &f->res_attr;
    f->resource.attr_count = 1;
    f->scope.name = "bench";
    f->scope.version = "1.0.0";
    f->attrs[0] = weft_attr_str("gen_ai.operation.name", "chat");
    f->attrs[1] = weft_attr_str("gen_ai.request.model", "gpt-4o-mini");
    f->attrs[2] = weft_attr_str("gen_ai.provider.name", "openai");
    f->attrs[3] = weft_attr_int("gen_ai.usage.input_tokens", 1234);
    f->attrs[4] = weft_attr_int("gen_ai.usage.output_tokens", 567);
    f->attrs[5] = weft_attr_double("weft.cost.usd", 0.00123);
    f->attrs[6] = weft_attr_bool("weft.cache.hit", false);
    f->attrs[7] = weft_attr_str("weft.step.id", "step-0042");
    f->attrs[8] = weft_attr_int("weft.step.attempt", 1);
    f->attrs[9] = weft_attr_str("http.url", "https://api.example.com/v1/chat/completions");
    f->ev_attr = weft_attr_str("weft.note", "retry after 429");
    f->event.name = "weft.retry";
    f->event.attrs = &f->ev_attr;
    f->event.attr_count = 1;
    for (size_t i = 0; i < BATCH; i++) {
        struct weft_span_data *s = &f->spans[i];

        s->name = i == 0 ? "invoke_workflow bench" : "chat gpt-4o-mini";
        s->kind = i == 0 ? WEFT_SPAN_KIND_INTERNAL : WEFT_SPAN_KIND_CLIENT;
        s->attrs = f->attrs;
        s->attr_count = 10;
        s->resource = &f->resource;
        s->scope = &f->scope;
        s->trace_flags = 1;
        s->events = i % 8 == 7 ? &f->event : NULL;
        s->event_count = i % 8 == 7 ? 1 : 0;
        f->views[i] = s;
    }
}

/* Give batch @p seq its own trace id and span ids. */
static void
fixture_ids(struct fixture *f, uint32_t seq)
{
    for (size_t i = 0; i < BATCH; i++) {
        struct weft_span_data *s = &f->spans[i];

        memset(s->trace_id, 0, sizeof(s->trace_id));
        memcpy(s->trace_id, &seq, sizeof(seq));
        s->trace_id[15] = 1;
        memset(s->span_id, 0, sizeof(s->span_id));
        s->span_id[0] = (uint8_t)(i >> 8);
        s->span_id[1] = (uint8_t)i;
        s->span_id[7] = 1;
        s->has_parent = i > 0;
        memset(s->parent_span_id, 0, sizeof(s->parent_span_id));
        if (i > 0) {
            s->parent_span_id[7] = 1; /* span 0 */
        }
        s->start_time_ns = 1700000000000000000ull + (uint64_t)seq * 1000000000ull + i * 1000u;
        s->end_time_ns = s->start_time_ns + 500000u;
    }
}

static int
bench_decode(struct fixture *f, bool is_json, int batches, int runs)
{
    struct weft__buf body;
    struct weft__otlp_batch batch;
    double rates[MAX_RUNS];

    weft__buf_init(&body, 0);
    fixture_ids(f, 1);
    if ((is_json ? weft__otlp_encode_json(f->views, BATCH, &body)
                 : weft__otlp_encode_proto(f->views, BATCH, &body)) != WEFT_OK) {
        fprintf(stderr, "ingest_bench: encode failed\n");
        return 1;
    }
    weft__otlp_batch_init(&batch, (size_t)1 << 30);
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();

        for (int b = 0; b < batches; b++) {
            weft_err err = is_json ? weft__otlp_decode_json(body.data, body.len, &batch, NULL, 0)
                                   : weft__otlp_decode_proto((const uint8_t *)body.data, body.len,
                                                             &batch, NULL, 0);

            if (err != WEFT_OK || batch.count != BATCH) {
                fprintf(stderr, "ingest_bench: decode failed (%s)\n", weft_strerror(err));
                return 1;
            }
            weft__otlp_batch_cleanup(&batch);
        }
        rates[r] = (double)batches * BATCH / (now_s() - t0);
    }
    printf("{\"bench\":\"ingest_bench\",\"case\":\"decode\",\"format\":\"%s\",\"batch\":%d,"
           "\"attrs_per_span\":10,\"bytes_per_span\":%.1f,\"spans_per_sec\":%.0f}\n",
           is_json ? "json" : "protobuf", BATCH, (double)body.len / BATCH, median(rates, runs));
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&body);
    return 0;
}

/* Encode every batch first, so that only ingest is timed. */
static struct weft__buf *
encode_all(struct fixture *f, bool is_json, int batches, uint32_t first_seq)
{
    struct weft__buf *bodies = calloc((size_t)batches, sizeof(*bodies));

    for (int b = 0; bodies != NULL && b < batches; b++) {
        weft__buf_init(&bodies[b], 0);
        fixture_ids(f, first_seq + (uint32_t)b);
        if ((is_json ? weft__otlp_encode_json(f->views, BATCH, &bodies[b])
                     : weft__otlp_encode_proto(f->views, BATCH, &bodies[b])) != WEFT_OK) {
            return NULL;
        }
    }
    return bodies;
}

/* The size of the store's WAL file, -1 when there is none. */
static long long
wal_bytes(const char *db_path)
{
    char wal[600];
    struct stat sb;

    snprintf(wal, sizeof(wal), "%s-wal", db_path);
    return stat(wal, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* One client: every clients-th body from its first, one request at a time. */
struct client {
    pthread_t thread;
    struct weft__ingest *ing;
    const struct weft__buf *bodies;
    bool is_json;
    int first;
    int step;
    int batches;
    unsigned failed_status; /* 0, or the first status other than 200 */
};

static void *
client_main(void *arg)
{
    struct client *c = arg;

    for (int b = c->first; b < c->batches && c->failed_status == 0; b += c->step) {
        struct weft__ingest_request req = {"POST",
                                           c->is_json ? "application/json"
                                                      : "application/x-protobuf",
                                           NULL,
                                           c->bodies[b].data,
                                           c->bodies[b].len,
                                           false};
        struct weft__http_reply reply;

        weft__ingest_handle(c->ing, &req, &reply);
        if (reply.free_body) {
            weft__free(reply.body);
        }
        if (reply.status != 200) {
            c->failed_status = reply.status;
        }
    }
    return NULL;
}

/* Send @p batches bodies through @p clients threads at once. @return 0 or the first failed
 * status. */
static unsigned
send_all(struct weft__ingest *ing,
         const struct weft__buf *bodies,
         bool is_json,
         int batches,
         int clients)
{
    struct client c[MAX_THREADS];
    unsigned failed = 0;

    for (int t = 0; t < clients; t++) {
        c[t] = (struct client){0, ing, bodies, is_json, t, clients, batches, 0};
        if (pthread_create(&c[t].thread, NULL, client_main, &c[t]) != 0) {
            failed = 1;
            clients = t;
        }
    }
    for (int t = 0; t < clients; t++) {
        pthread_join(c[t].thread, NULL);
        failed = failed != 0 ? failed : c[t].failed_status;
    }
    return failed;
}

static int
bench_store(struct fixture *f, bool is_json, int batches, int runs, int clients, const char *dir)
{
    double rates[MAX_RUNS];
    char path[512];
    struct weft__ingest *ing = NULL;
    struct weft__ingest_options opts = {path, 0};
    struct weft__ingest_stats stats;

    snprintf(path, sizeof(path), "%s/ingest_bench_%d_%s_%d.db", dir, (int)getpid(),
             is_json ? "json" : "proto", clients);
    if (weft__ingest_new(&opts, &ing) != WEFT_OK) {
        fprintf(stderr, "ingest_bench: cannot open a store at %s\n", path);
        return 1;
    }
    for (int r = 0; r < runs; r++) {
        struct weft__buf *bodies = encode_all(f, is_json, batches, (uint32_t)(r * batches + 1));
        unsigned failed = 0;
        double t0 = 0;

        if (bodies == NULL) {
            fprintf(stderr, "ingest_bench: encode failed\n");
            return 1;
        }
        t0 = now_s();
        failed = send_all(ing, bodies, is_json, batches, clients);
        if (failed != 0) {
            fprintf(stderr, "ingest_bench: ingest answered %u\n", failed);
            return 1;
        }
        rates[r] = (double)batches * BATCH / (now_s() - t0);
        for (int b = 0; b < batches; b++) {
            weft__buf_cleanup(&bodies[b]);
        }
        free(bodies);
    }
    weft__ingest_stats(ing, &stats);
    printf("{\"bench\":\"ingest_bench\",\"case\":\"decode_store\",\"format\":\"%s\","
           "\"batch\":%d,\"attrs_per_span\":10,\"clients\":%d,\"spans_per_sec\":%.0f,"
           "\"checkpoints\":%llu,\"inline_checkpoints\":%llu,\"wal_bytes\":%lld}\n",
           is_json ? "json" : "protobuf", BATCH, clients, median(rates, runs),
           (unsigned long long)stats.checkpoints, (unsigned long long)stats.inline_checkpoints,
           wal_bytes(path));
    weft__ingest_free(ing);
    for (size_t i = 0; i < 3; i++) {
        char file[600];

        snprintf(file, sizeof(file), "%s%s", path, i == 0 ? "" : i == 1 ? "-wal" : "-shm");
        (void)unlink(file);
    }
    return 0;
}

int
main(int argc, char **argv)
{
    static struct fixture f;
    int batches = 200;
    int runs = 5;
    int threads = 2;
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    const char *only = NULL;
    int rc = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--batches") == 0) {
            batches = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--runs") == 0) {
            runs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--dir") == 0) {
            dir = argv[i + 1];
        } else if (strcmp(argv[i], "--only") == 0) {
            only = argv[i + 1];
        }
    }
    if (batches < 1 || runs < 1 || runs > MAX_RUNS || threads < 1 || threads > MAX_THREADS ||
        argc % 2 == 0) {
        fprintf(stderr, "usage: ingest_bench [--batches N] [--runs 1..31] [--threads 1..8]"
                        " [--dir DIR]"
                        " [--only decode|decode_store:protobuf|json]\n");
        return 2;
    }
    fixture_init(&f);
    for (int c = 0; c < 4; c++) {
        static const char *const names[] = {"decode:protobuf", "decode:json",
                                            "decode_store:protobuf", "decode_store:json"};

        if (only != NULL && strcmp(only, names[c]) != 0) {
            continue;
        }
        if (c < 2) {
            rc |= bench_decode(&f, c == 1, batches, runs);
            continue;
        }
        rc |= bench_store(&f, c == 3, batches, runs, 1, dir);
        if (threads > 1) {
            rc |= bench_store(&f, c == 3, batches, runs, threads, dir);
        }
    }
    return rc;
}
