/* bench/ingest_bench.c - measures `weft serve`'s OTLP ingest (exporters/ingest.h) without the
 * network: decoding ExportTraceServiceRequest bodies, and decoding plus writing into a span
 * store (SQLite on disk, or PostgreSQL with --pg-url).
 *
 * Prints one JSON object per line (JSON Lines), for example
 *   {"bench":"ingest_bench","case":"decode","format":"protobuf","spans_per_sec":2500000,...}
 * Cases (every batch is 512 spans of one trace with 10 attributes each: strings, ints, a
 * double and a bool, as SDK spans carry; a parent, one event on every 8th span, the
 * resource's service.name; bodies built by weft's own encoders, otlp_encode.h):
 *   decode        weft__otlp_decode_proto / _json alone, into a reused batch.
 *                 "format":"json-jansson-parse" (decode:json-jansson-parse) times
 *                 json_loadb + json_decref of the same JSON body (the jansson tree the JSON
 *                 decoder used to build, a lower bound of its old cost) alternating with
 *                 weft__otlp_decode_json in each run; json_decoder_speedup is the median
 *                 ratio of the decoder's rate to jansson's.
 *   decode_store  a whole request through weft__ingest_handle(): decode, one export call into
 *                 the store (one transaction per request), the response; each batch is a new
 *                 trace. "clients" threads call the handler at once, as the server's
 *                 connection threads do; "instances" is the number of ingest handles they
 *                 share out (client i uses handle i % instances), each with its own store
 *                 connection, as separate `weft serve` processes over one database would.
 *                 "store":"sqlite": a fresh file in a temporary directory, 1 and --threads
 *                 clients on one instance (SQLite allows one writer: one serve per file).
 *                 "store":"postgresql" (with --pg-url): a fresh database per case, created
 *                 through the URL and dropped afterwards; 1 client, --threads clients on one
 *                 instance, --threads instances with a client each, and 2 instances when
 *                 --threads is more than 2.
 * spans_per_sec is the median over the runs; each run handles --batches batches, into the
 * same store (the store grows over the runs of a case). store_bytes is the store's size after
 * the last run (SQLite: the database file once closed, which folds the WAL back in;
 * PostgreSQL: pg_total_relation_size, indexes and TOAST included, of the weft_spans partitions
 * and weft_traces), bytes_per_span that over the spans stored (rows, counted back). SQLite's
 * cases also print the WAL checkpoints over all runs (on their own thread, and inline past the
 * backstop: exporters/store_checkpoint.c) and the WAL file's size before closing.
 * Usage: ingest_bench [--batches N] [--runs N] [--threads N] [--dir DIR] [--only CASE:FORMAT]
 *                     [--pg-url URL] [--store sqlite|postgresql] [--sampling RULES]
 *   defaults 200 batches, 5 runs, 2 threads, $TMPDIR; --only runs one case, e.g.
 *   decode_store:protobuf (handy under perf); --store limits decode_store to one backend.
 *   --pg-url names a server and a user allowed to CREATE DATABASE (e.g.
 *   postgresql://postgres@127.0.0.1:5432/postgres); its own database is never written.
 *   `make bench-ingest-pg` starts a throwaway PostgreSQL 15 for it (scripts/bench-pg.sh).
 *   --sampling RULES: ingest through tail sampling (docs/sampling.md), each batch's trace
 *   decided 1 ms after its root; spans_stored then counts what was received, store_bytes
 *   what was kept.
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "base/mem.h"
#include "bench_util.h"
#include "exporters/ingest.h"
#include "exporters/otlp_decode.h"
#include "exporters/otlp_encode.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <weft/weft.h>

#define MAX_RUNS    31
#define MAX_THREADS 8
#define PG_URL_MAX  1024

static const char *bench_sampling; /* --sampling RULES: tail sampling at ingest; NULL: off */

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

/* The same JSON body through weft__otlp_decode_json and through jansson's json_loadb (with the
 * flags the decoder it replaced used) and json_decref alone: the tree that decoder built
 * before reading a single span, a lower bound of its cost. The two alternate within each run,
 * so that both see the same machine; speedup is the median of the runs' ratios. */
static int
bench_decode_json_vs_jansson(struct fixture *f, int batches, int runs)
{
    struct weft__buf body;
    struct weft__otlp_batch batch;
    double rates[MAX_RUNS];
    double parse_rates[MAX_RUNS];
    double ratios[MAX_RUNS];

    weft__buf_init(&body, 0);
    fixture_ids(f, 1);
    if (weft__otlp_encode_json(f->views, BATCH, &body) != WEFT_OK) {
        fprintf(stderr, "ingest_bench: encode failed\n");
        return 1;
    }
    weft__otlp_batch_init(&batch, (size_t)1 << 30);
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        double t1 = 0;

        for (int b = 0; b < batches; b++) {
            if (weft__otlp_decode_json(body.data, body.len, &batch, NULL, 0) != WEFT_OK ||
                batch.count != BATCH) {
                fprintf(stderr, "ingest_bench: decode failed\n");
                return 1;
            }
            weft__otlp_batch_cleanup(&batch);
        }
        t1 = now_s();
        for (int b = 0; b < batches; b++) {
            json_t *root =
                json_loadb(body.data, body.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);

            if (root == NULL) {
                fprintf(stderr, "ingest_bench: json_loadb failed\n");
                return 1;
            }
            json_decref(root);
        }
        rates[r] = (double)batches * BATCH / (t1 - t0);
        parse_rates[r] = (double)batches * BATCH / (now_s() - t1);
        ratios[r] = rates[r] / parse_rates[r];
    }
    printf("{\"bench\":\"ingest_bench\",\"case\":\"decode\",\"format\":\"json-jansson-parse\","
           "\"batch\":%d,\"attrs_per_span\":10,\"bytes_per_span\":%.1f,\"spans_per_sec\":%.0f,"
           "\"json_decoder_spans_per_sec\":%.0f,\"json_decoder_speedup\":%.2f}\n",
           BATCH, (double)body.len / BATCH, median(parse_rates, runs), median(rates, runs),
           median(ratios, runs));
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

/* The size of file @p path plus @p suffix, -1 when there is none. */
static long long
file_bytes(const char *path, const char *suffix)
{
    char file[PG_URL_MAX + 8];
    struct stat sb;

    snprintf(file, sizeof(file), "%s%s", path, suffix);
    return stat(file, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* One client: every step-th body from its first, one request at a time. */
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

/* Send @p batches bodies through @p clients threads at once, client t on ing[t % instances].
 * @return 0 or the first failed status. */
static unsigned
send_all(struct weft__ingest **ing,
         int instances,
         const struct weft__buf *bodies,
         bool is_json,
         int batches,
         int clients)
{
    struct client c[MAX_THREADS];
    unsigned failed = 0;

    for (int t = 0; t < clients; t++) {
        c[t] = (struct client){0, ing[t % instances], bodies, is_json, t, clients, batches, 0};
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

/* --- PostgreSQL: a database of its own per case ---------------------------------------------- */

/* Run @p sql on @p conn; false (and a message) when it fails. */
static bool
pg_exec(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    bool is_ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;

    if (!is_ok) {
        fprintf(stderr, "ingest_bench: %s: %s", sql, PQerrorMessage(conn));
    }
    PQclear(res);
    return is_ok;
}

/* NOTICEs such as "database ... does not exist, skipping" are not worth a line. */
static void
quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static PGconn *
pg_connect(const char *url)
{
    PGconn *conn = PQconnectdb(url);

    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "ingest_bench: cannot connect to --pg-url: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, quiet_notice, NULL);
    return conn;
}

/* Create database @p name through @p base_url and write a URL for it into @p out: a dbname
 * parameter appended to the URL's query overrides the database in its path (libpq keeps the
 * last value of a keyword). */
static bool
pg_create_db(const char *base_url, const char *name, char *out, size_t out_len)
{
    char sql[128];
    PGconn *conn = pg_connect(base_url);
    bool is_ok = conn != NULL;
    int n = 0;

    if (is_ok) {
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", name);
        is_ok = pg_exec(conn, sql);
    }
    if (is_ok) {
        snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
        is_ok = pg_exec(conn, sql);
    }
    PQfinish(conn);
    n = snprintf(out, out_len, "%s%sdbname=%s", base_url, strchr(base_url, '?') ? "&" : "?", name);
    return is_ok && n > 0 && (size_t)n < out_len;
}

static void
pg_drop_db(const char *base_url, const char *name)
{
    char sql[128];
    PGconn *conn = pg_connect(base_url);

    if (conn != NULL) {
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
        (void)pg_exec(conn, sql);
    }
    PQfinish(conn);
}

/* The span store's size on disk in the database at @p url and the spans it holds. */
static bool
pg_store_size(const char *url, long long *bytes, long long *rows)
{
    PGconn *conn = pg_connect(url);
    PGresult *res = NULL;
    bool is_ok = false;

    if (conn == NULL) {
        return false;
    }
    res = PQexec(conn, "SELECT (SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0)"
                       "   FROM pg_inherits i WHERE i.inhparent = 'weft_spans'::regclass)"
                       " + pg_total_relation_size('weft_traces'),"
                       " (SELECT count(*) FROM weft_spans)");
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        *bytes = atoll(PQgetvalue(res, 0, 0));
        *rows = atoll(PQgetvalue(res, 0, 1));
        is_ok = true;
    } else {
        fprintf(stderr, "ingest_bench: cannot measure the store: %s", PQerrorMessage(conn));
    }
    PQclear(res);
    PQfinish(conn);
    return is_ok;
}

/* --- decode_store ------------------------------------------------------------------------------
 */

/* decode_store into SQLite (@p pg_url NULL: a file in @p dir) or PostgreSQL (a new database
 * through @p pg_url), @p clients threads over @p instances ingest handles. */
static int
bench_store(struct fixture *f,
            bool is_json,
            int batches,
            int runs,
            int clients,
            int instances,
            const char *dir,
            const char *pg_url)
{
    static int case_seq;
    double rates[MAX_RUNS];
    char path[PG_URL_MAX];
    char db_name[64];
    struct weft__ingest *ing[MAX_THREADS] = {NULL};
    /* --sampling: tail sampling at ingest, each batch's trace decided 1 ms after its root
     * (the wait a real deployment sets to seconds only delays the writes, not their cost). */
    struct weft__ingest_options opts = {path, 0, bench_sampling, 1};
    struct weft__ingest_stats stats;
    struct weft__ingest_stats total = {0};
    long long wal = -1;
    long long store_bytes = -1;
    long long rows = (long long)runs * batches * BATCH;
    int rc = 1;

    case_seq++;
    snprintf(db_name, sizeof(db_name), "weft_ingest_bench_%d_%d", (int)getpid(), case_seq);
    if (pg_url != NULL) {
        if (!pg_create_db(pg_url, db_name, path, sizeof(path))) {
            fprintf(stderr, "ingest_bench: cannot create database %s\n", db_name);
            pg_drop_db(pg_url, db_name);
            return 1;
        }
    } else {
        snprintf(path, sizeof(path), "%s/ingest_bench_%d_%s_%d.db", dir, (int)getpid(),
                 is_json ? "json" : "proto", case_seq);
    }
    for (int i = 0; i < instances; i++) {
        if (weft__ingest_new(&opts, &ing[i]) != WEFT_OK) {
            fprintf(stderr, "ingest_bench: cannot open a store at %s\n",
                    pg_url != NULL ? db_name : path);
            goto out;
        }
    }
    for (int r = 0; r < runs; r++) {
        struct weft__buf *bodies = encode_all(f, is_json, batches, (uint32_t)(r * batches + 1));
        unsigned failed = 0;
        double t0 = 0;

        if (bodies == NULL) {
            fprintf(stderr, "ingest_bench: encode failed\n");
            goto out;
        }
        t0 = now_s();
        failed = send_all(ing, instances, bodies, is_json, batches, clients);
        rates[r] = (double)batches * BATCH / (now_s() - t0);
        for (int b = 0; b < batches; b++) {
            weft__buf_cleanup(&bodies[b]);
        }
        free(bodies);
        if (failed != 0) {
            fprintf(stderr, "ingest_bench: ingest answered %u\n", failed);
            goto out;
        }
    }
    for (int i = 0; i < instances; i++) {
        weft__ingest_stats(ing[i], &stats);
        total.spans_rejected += stats.spans_rejected;
        total.checkpoints += stats.checkpoints;
        total.inline_checkpoints += stats.inline_checkpoints;
    }
    if (pg_url == NULL) {
        wal = file_bytes(path, "-wal");
    }
    /* Closed first: SQLite folds the WAL into the file when its last connection closes. */
    for (int i = 0; i < instances; i++) {
        weft__ingest_free(ing[i]);
        ing[i] = NULL;
    }
    if (pg_url != NULL) {
        if (!pg_store_size(path, &store_bytes, &rows)) {
            goto out;
        }
    } else {
        store_bytes =
            file_bytes(path, "") + (file_bytes(path, "-wal") > 0 ? file_bytes(path, "-wal") : 0);
    }
    printf("{\"bench\":\"ingest_bench\",\"case\":\"decode_store\",\"store\":\"%s\","
           "\"format\":\"%s\",\"batch\":%d,\"attrs_per_span\":10,\"instances\":%d,"
           "\"clients\":%d,\"spans_per_sec\":%.0f,\"spans_stored\":%lld,\"spans_rejected\":%llu,"
           "\"store_bytes\":%lld,\"bytes_per_span\":%.1f,\"sampling\":\"%s\"",
           pg_url != NULL ? "postgresql" : "sqlite", is_json ? "json" : "protobuf", BATCH,
           instances, clients, median(rates, runs), rows, (unsigned long long)total.spans_rejected,
           store_bytes, rows > 0 ? (double)store_bytes / (double)rows : 0.0,
           bench_sampling != NULL ? bench_sampling : "off");
    if (pg_url == NULL) {
        printf(",\"checkpoints\":%llu,\"inline_checkpoints\":%llu,\"wal_bytes\":%lld",
               (unsigned long long)total.checkpoints, (unsigned long long)total.inline_checkpoints,
               wal);
    }
    printf("}\n");
    fflush(stdout);
    rc = 0;
out:
    for (int i = 0; i < instances; i++) {
        weft__ingest_free(ing[i]);
    }
    if (pg_url != NULL) {
        pg_drop_db(pg_url, db_name);
    } else {
        (void)unlink(path);
        for (size_t i = 0; i < 2; i++) {
            char file[PG_URL_MAX + 8];

            snprintf(file, sizeof(file), "%s%s", path, i == 0 ? "-wal" : "-shm");
            (void)unlink(file);
        }
    }
    return rc;
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
    const char *pg_url = NULL;
    const char *store = NULL;
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
        } else if (strcmp(argv[i], "--pg-url") == 0) {
            pg_url = argv[i + 1];
        } else if (strcmp(argv[i], "--store") == 0) {
            store = argv[i + 1];
        } else if (strcmp(argv[i], "--sampling") == 0) {
            bench_sampling = argv[i + 1];
        }
    }
    if (batches < 1 || runs < 1 || runs > MAX_RUNS || threads < 1 || threads > MAX_THREADS ||
        argc % 2 == 0 || (pg_url != NULL && strlen(pg_url) > PG_URL_MAX - 64) ||
        (store != NULL && strcmp(store, "sqlite") != 0 && strcmp(store, "postgresql") != 0) ||
        (store != NULL && strcmp(store, "postgresql") == 0 && pg_url == NULL)) {
        fprintf(stderr, "usage: ingest_bench [--batches N] [--runs 1..31] [--threads 1..8]"
                        " [--dir DIR]"
                        " [--only decode|decode_store:protobuf|json, or"
                        " decode:json-jansson-parse]"
                        " [--pg-url postgresql://...] [--store sqlite|postgresql]"
                        " [--sampling RULES]\n"
                        "  (--store postgresql needs --pg-url)\n");
        return 2;
    }
    fixture_init(&f);
    for (int c = 0; c < 5; c++) {
        static const char *const names[] = {"decode:protobuf", "decode:json",
                                            "decode:json-jansson-parse", "decode_store:protobuf",
                                            "decode_store:json"};
        bool is_json = c == 1 || c == 4;

        if (only != NULL && strcmp(only, names[c]) != 0) {
            continue;
        }
        if (c < 2) {
            rc |= bench_decode(&f, is_json, batches, runs);
            continue;
        }
        if (c == 2) {
            rc |= bench_decode_json_vs_jansson(&f, batches, runs);
            continue;
        }
        if (store == NULL || strcmp(store, "sqlite") == 0) {
            rc |= bench_store(&f, is_json, batches, runs, 1, 1, dir, NULL);
            if (threads > 1) {
                rc |= bench_store(&f, is_json, batches, runs, threads, 1, dir, NULL);
            }
        }
        if (pg_url == NULL || (store != NULL && strcmp(store, "sqlite") == 0)) {
            continue;
        }
        rc |= bench_store(&f, is_json, batches, runs, 1, 1, dir, pg_url);
        if (threads > 1) {
            rc |= bench_store(&f, is_json, batches, runs, threads, 1, dir, pg_url);
            rc |= bench_store(&f, is_json, batches, runs, threads, threads, dir, pg_url);
        }
        if (threads > 2) {
            rc |= bench_store(&f, is_json, batches, runs, 2, 2, dir, pg_url);
        }
    }
    return rc;
}
