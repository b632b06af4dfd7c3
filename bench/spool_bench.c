/* bench/spool_bench.c - measures the on-disk spool of the OTLP exporters (exporters/spool.h):
 * what a request costs when the endpoint is down (written to the spool) and when it is back
 * (read back, checked and deleted), without the network.
 *
 * Prints one JSON object per line (JSON Lines), for example
 *   {"bench":"spool_bench","case":"put","encoding":"protobuf","spans":512,"body_bytes":...,
 *    "us_per_request":...,"p99_us":...,"spans_per_sec":...}
 * Every request is a batch of 512 spans (10 attributes each, one event on every 8th span, as
 * bench/ingest_bench.c builds them) encoded by weft's protobuf encoder; "gzip" is the same
 * body compressed at level 1, as the exporter writes it with OTEL_EXPORTER_OTLP_COMPRESSION=gzip.
 * Cases:
 *   put     weft__spool_put(): header and CRC-32, write to a temporary file, fsync, rename,
 *           fsync of the directory: what an export costs the export thread while the endpoint
 *           is down, beyond the one failed attempt.
 *   drain   weft__spool_peek() and weft__spool_pop(): open, read, check both CRCs, unlink: what
 *           resending costs beyond the HTTP request itself.
 *   open    weft__spool_open() over --requests files: the scan a process does at start.
 * us_per_request is the median over --requests requests; p99_us the 99th percentile.
 * Usage: spool_bench [--requests N] [--dir DIR]   (defaults 200 requests, the current
 *   directory: fsync costs what the disk under DIR costs, so do not point it at a tmpfs).
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "bench_util.h"
#include "exporters/gzip.h"
#include "exporters/otlp_encode.h"
#include "exporters/spool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
report(const char *name, const char *encoding, size_t body, double *us, int n)
{
    double med = 0;
    double p99 = 0;

    qsort(us, (size_t)n, sizeof(*us), cmp_double);
    med = us[n / 2];
    p99 = us[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
    printf("{\"bench\":\"spool_bench\",\"case\":\"%s\",\"encoding\":\"%s\",\"spans\":%d,"
           "\"body_bytes\":%zu,\"requests\":%d,\"us_per_request\":%.1f,\"p99_us\":%.1f,"
           "\"spans_per_sec\":%.0f}\n",
           name, encoding, BATCH, body, n, med, p99, med > 0 ? BATCH * 1e6 / med : 0.0);
    fflush(stdout);
}

static int
run_case(const char *dir, const char *encoding, const struct weft__buf *body, int requests)
{
    char root[4096];
    struct weft__spool_config cfg = {0};
    struct weft__spool *s = NULL;
    struct weft__buf back;
    double *us = calloc((size_t)requests, sizeof(*us));
    int rc = 1;

    snprintf(root, sizeof(root), "%s/spool-bench-%ld", dir, (long)getpid());
    cfg.root = root;
    cfg.kind = "bench";
    cfg.url = encoding;
    cfg.max_bytes = 1ull << 40;
    cfg.max_files = (size_t)requests + 1;
    weft__buf_init(&back, 0);
    if (us == NULL || weft__spool_open(&cfg, &s) != WEFT_OK) {
        fprintf(stderr, "spool_bench: cannot open a spool under %s\n", root);
        goto out;
    }
    for (int i = 0; i < requests; i++) {
        double t0 = now_us();

        if (weft__spool_put(s, body->data, body->len, 0, BATCH) != WEFT_OK) {
            fprintf(stderr, "spool_bench: put failed\n");
            goto out;
        }
        us[i] = now_us() - t0;
    }
    report("put", encoding, body->len, us, requests);
    weft__spool_close(s);
    s = NULL;
    {
        double t0 = now_us();

        if (weft__spool_open(&cfg, &s) != WEFT_OK) {
            goto out;
        }
        us[0] = now_us() - t0;
        printf("{\"bench\":\"spool_bench\",\"case\":\"open\",\"encoding\":\"%s\",\"files\":%d,"
               "\"us\":%.0f}\n",
               encoding, requests, us[0]);
    }
    for (int i = 0; i < requests; i++) {
        uint32_t flags = 0;
        uint32_t spans = 0;
        double t0 = now_us();

        if (weft__spool_peek(s, &back, &flags, &spans) != WEFT_OK || back.len != body->len) {
            fprintf(stderr, "spool_bench: peek failed\n");
            goto out;
        }
        weft__spool_pop(s);
        us[i] = now_us() - t0;
    }
    report("drain", encoding, body->len, us, requests);
    rc = 0;
out:
    weft__spool_close(s);
    weft__buf_cleanup(&back);
    free(us);
    {
        char cmd[4200];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        if (system(cmd) != 0) {
            fprintf(stderr, "spool_bench: could not remove %s\n", root);
        }
    }
    return rc;
}

int
main(int argc, char **argv)
{
    static struct fixture f;
    struct weft__buf body;
    struct weft__buf gz;
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    int requests = 200;
    int rc = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
            requests = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: spool_bench [--requests N] [--dir DIR (default $TMPDIR or /tmp)]\n");
            return 2;
        }
    }
    if (requests < 1) {
        requests = 1;
    }
    fixture_init(&f);
    fixture_ids(&f, 1);
    weft__buf_init(&body, 0);
    weft__buf_init(&gz, 0);
    if (weft__otlp_encode_proto(f.views, BATCH, &body) != WEFT_OK ||
        weft__gzip_compress(body.data, body.len, 1, &gz) != WEFT_OK) {
        fprintf(stderr, "spool_bench: encoding failed\n");
        return 1;
    }
    rc = run_case(dir, "protobuf", &body, requests);
    if (rc == 0) {
        rc = run_case(dir, "protobuf+gzip", &gz, requests);
    }
    weft__buf_cleanup(&body);
    weft__buf_cleanup(&gz);
    return rc;
}
