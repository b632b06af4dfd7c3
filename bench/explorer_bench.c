/* bench/explorer_bench.c - the explorer's API (serve/, docs/explorer.md) at size: the runs list
 * over a state store of 10,000 runs, and one 100,000-span trace, through `weft serve`'s HTTP
 * server started in process on 127.0.0.1 and queried with libcurl (one connection reused, as
 * a browser does). Prints one JSON object per line:
 *
 *   {"bench":"explorer","what":"runs_list","runs":10000,"limit":200,"requests":N,
 *    "p50_ms":...,"p99_ms":...,"bytes":...}
 *   {"bench":"explorer","what":"waterfall","spans":100000,"requests":N,"p50_ms":...,
 *    "p99_ms":...,"bytes":...}   (the rows the explorer draws: ?view=waterfall)
 *   {"bench":"explorer","what":"span","spans":100000,...}   (one span's detail, on a click)
 *   {"bench":"explorer","what":"trace","spans":100000,...}  (the whole weft.trace/v1 document)
 *
 * The runs are written through the state store's own functions in transactions of 1,000; the
 * trace through the span store's exporter in batches of 512: a root, 1,000 step spans, 99
 * children each, 8 attributes a span, every 97th an error.
 *
 * Usage: explorer_bench [--runs N] [--spans N] [--requests N] [--keep DIR]
 *   --keep DIR: build the stores in DIR (state.db, weft.db) and leave them there, for
 *   bench/explorer_render.mjs (first render in Chromium; `make bench-explorer` runs both).
 */
#include "base/time.h"
#include "runtime/state/state.h"
#include "serve/http.h"
#include "tracing/exporter.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/weft.h>

struct opts {
    size_t runs;
    size_t spans;
    size_t requests;
    const char *keep;
};

static int
fill_runs(const char *path, size_t n)
{
    struct rt_state *st = NULL;
    char err[256];

    if (weft__state_open(path, &st, err, sizeof(err)) != WEFT_OK) {
        fprintf(stderr, "explorer_bench: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char id[32];
        struct weft__state_run_end end;
        uint64_t t = weft__now_ns() - (uint64_t)(n - i) * 1000000000u;
        if (i % 1000 == 0) {
            (void)weft__state_begin(st);
        }
        snprintf(id, sizeof(id), "bench%07zu", i);
        (void)weft__state_run_begin(st, id, i % 3 == 0 ? "code-review" : "translation", NULL, id,
                                    "Add a login endpoint to the user service", t);
        memset(&end, 0, sizeof(end));
        end.status = i % 11 == 0 ? "failed" : "completed";
        end.reason = i % 11 == 0 ? "step s3 (coder) failed: timeout" : NULL;
        end.iterations = 7;
        end.input_tokens = 1200;
        end.output_tokens = 300;
        end.cost_usd = 0.0004;
        end.ended_ns = t + 15000000;
        end.reward = 4.5;
        end.loops = "{\"replan\":1,\"reflection\":2}";
        (void)weft__state_run_end(st, id, &end);
        if (i % 1000 == 999 || i == n - 1) {
            (void)weft__state_commit(st);
        }
    }
    weft__state_close(st);
    return 0;
}

/* Span @p i of the trace: 0 the root, then step spans, each followed by its children. */
static void
make_span(struct weft_span_data *s, struct weft_attr *attrs, size_t i, uint64_t t0)
{
    static const char *const names[] = {"chat scripted-gpt-4o-mini", "execute_tool read_file",
                                        "execute_tool write_file", "reflect reviewer"};
    size_t step = i == 0 ? 0 : (i - 1) / 100;
    bool is_step = i != 0 && (i - 1) % 100 == 0;
    uint64_t parent = i == 0 ? 0 : is_step ? 1 : 2 + step * 100;

    memset(s, 0, sizeof(*s));
    memset(s->trace_id, 0xab, sizeof(s->trace_id));
    for (size_t b = 0; b < 8; b++) {
        s->span_id[b] = (uint8_t)((i + 1) >> (8 * (7 - b)));
        s->parent_span_id[b] = (uint8_t)(parent >> (8 * (7 - b)));
    }
    s->has_parent = i != 0;
    s->name = i == 0 ? "invoke_workflow bench" : is_step ? "invoke_agent coder" : names[i % 4];
    s->start_time_ns = t0 + i * 1000;
    s->end_time_ns = s->start_time_ns + (i == 0 ? 200000000 : is_step ? 90000 : 700);
    s->status_code = i % 97 == 0 && i != 0 ? WEFT_STATUS_ERROR : WEFT_STATUS_UNSET;
    s->status_message = s->status_code == WEFT_STATUS_ERROR ? "tool failed" : NULL;
    attrs[0] = weft_attr_str("gen_ai.operation.name", is_step ? "invoke_agent" : "chat");
    attrs[1] = weft_attr_str("gen_ai.agent.name", "coder");
    attrs[2] = weft_attr_int("gen_ai.usage.input_tokens", 120);
    attrs[3] = weft_attr_int("gen_ai.usage.output_tokens", 30);
    attrs[4] = weft_attr_str("weft.step.id", "s1");
    attrs[5] = weft_attr_str("weft.run.id", "bench-trace");
    attrs[6] = weft_attr_str("gen_ai.request.model", "scripted-gpt-4o-mini");
    attrs[7] = weft_attr_int("weft.step.attempt", 1);
    s->attrs = attrs;
    s->attr_count = 8;
}

static int
fill_trace(const char *path, size_t n)
{
    struct weft_exporter *exp = NULL;
    struct weft_span_data *spans = calloc(512, sizeof(*spans));
    const struct weft_span_data **ptrs = calloc(512, sizeof(*ptrs));
    struct weft_attr(*attrs)[8] = calloc(512, sizeof(*attrs));
    uint64_t t0 = weft__now_ns();
    int rc = 0;

    if (spans == NULL || ptrs == NULL || attrs == NULL ||
        weft_store_exporter_new(path, &exp) != WEFT_OK) {
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n; i += 512) {
        size_t k = n - i < 512 ? n - i : 512;
        struct weft_export_result res = {0};
        for (size_t j = 0; j < k; j++) {
            make_span(&spans[j], attrs[j], i + j, t0);
            ptrs[j] = &spans[j];
        }
        if (exp->ops->export_batch(exp->self, ptrs, k, 0, &res) != WEFT_OK) {
            rc = -1;
        }
    }
    if (exp != NULL && exp->ops->shutdown != NULL) {
        (void)exp->ops->shutdown(exp->self, 0);
    }
    weft_exporter_free(exp);
    free(spans);
    free(ptrs);
    free(attrs);
    return rc;
}

static size_t
count_bytes(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    *(size_t *)user += size * n;
    return size * n;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* @p requests GETs of @p url; their p50 and p99 in ms, the body size. */
static int
measure(const char *url, size_t requests, double *p50, double *p99, size_t *bytes)
{
    CURL *c = curl_easy_init();
    double *ms = calloc(requests, sizeof(*ms));
    long status = 0;
    int rc = 0;

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, count_bytes);
    for (size_t i = 0; rc == 0 && i < requests; i++) {
        uint64_t t = weft__monotonic_ns();
        *bytes = 0;
        curl_easy_setopt(c, CURLOPT_WRITEDATA, bytes);
        if (curl_easy_perform(c) != CURLE_OK) {
            rc = -1;
        }
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        rc = rc == 0 && status == 200 ? 0 : -1;
        ms[i] = (double)(weft__monotonic_ns() - t) / 1e6;
    }
    qsort(ms, requests, sizeof(*ms), cmp_double);
    *p50 = ms[requests / 2];
    *p99 = ms[(requests * 99) / 100 < requests ? (requests * 99) / 100 : requests - 1];
    free(ms);
    curl_easy_cleanup(c);
    return rc;
}

/* GETs of the bench trace's @p suffix: a tenth as many requests as the runs list (min 3). */
static int
bench_trace(unsigned port, const char *what, const char *suffix, const struct opts *o)
{
    char url[256];
    size_t n = o->requests / 10 > 3 ? o->requests / 10 : 3;
    double p50 = 0;
    double p99 = 0;
    size_t bytes = 0;
    int rc = 0;

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/traces/%s%s", port,
             "abababababababababababababababab", suffix);
    rc = measure(url, n, &p50, &p99, &bytes);
    printf("{\"bench\":\"explorer\",\"what\":\"%s\",\"spans\":%zu,\"requests\":%zu,"
           "\"p50_ms\":%.1f,\"p99_ms\":%.1f,\"bytes\":%zu}\n",
           what, o->spans, n, p50, p99, bytes);
    return rc;
}

static weft_err
no_metrics(void *user_data, char **out, size_t *len)
{
    (void)user_data;
    *out = strdup("");
    *len = 0;
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static bool
parse(int argc, char **argv, struct opts *o)
{
    o->runs = 10000;
    o->spans = 100000;
    o->requests = 200;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v != NULL && strcmp(argv[i], "--runs") == 0) {
            o->runs = strtoul(v, NULL, 10);
        } else if (v != NULL && strcmp(argv[i], "--spans") == 0) {
            o->spans = strtoul(v, NULL, 10);
        } else if (v != NULL && strcmp(argv[i], "--requests") == 0) {
            o->requests = strtoul(v, NULL, 10);
        } else if (v != NULL && strcmp(argv[i], "--keep") == 0) {
            o->keep = v;
        } else {
            return false;
        }
        i++;
    }
    return o->runs > 0 && o->spans > 1 && o->requests > 0;
}

int
main(int argc, char **argv)
{
    struct opts o;
    char dir[256] = "/tmp/weft-explorer-bench-XXXXXX";
    char state[300];
    char store[300];
    char url[256];
    struct weft__serve_config cfg;
    struct weft__serve *srv = NULL;
    double p50 = 0;
    double p99 = 0;
    size_t bytes = 0;
    int rc = 0;

    memset(&o, 0, sizeof(o));
    if (!parse(argc, argv, &o)) {
        fprintf(stderr,
                "usage: explorer_bench [--runs N] [--spans N] [--requests N] [--keep DIR]\n");
        return 2;
    }
    if (o.keep != NULL) {
        snprintf(dir, sizeof(dir), "%s", o.keep);
        if (mkdir(dir, 0755) != 0) {
            fprintf(stderr, "explorer_bench: --keep %s: expected a directory to create\n", dir);
            return 2;
        }
    } else if (mkdtemp(dir) == NULL) {
        return 1;
    }
    snprintf(state, sizeof(state), "%s/state.db", dir);
    snprintf(store, sizeof(store), "%s/weft.db", dir);
    if (fill_runs(state, o.runs) != 0 || fill_trace(store, o.spans) != 0) {
        fprintf(stderr, "explorer_bench: cannot fill the stores in %s\n", dir);
        return 1;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.addr = "127.0.0.1:0";
    cfg.api.state_path = state;
    cfg.api.store_path = store;
    cfg.metrics = no_metrics;
    if (weft__serve_start(&cfg, &srv) != WEFT_OK) {
        fprintf(stderr, "explorer_bench: cannot start the server\n");
        return 1;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/runs?limit=200", weft__serve_port(srv));
    rc |= measure(url, o.requests, &p50, &p99, &bytes);
    printf("{\"bench\":\"explorer\",\"what\":\"runs_list\",\"runs\":%zu,\"limit\":200,"
           "\"requests\":%zu,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"bytes\":%zu}\n",
           o.runs, o.requests, p50, p99, bytes);
    rc |= bench_trace(weft__serve_port(srv), "waterfall", "?view=waterfall&limit=100000", &o);
    rc |= bench_trace(weft__serve_port(srv), "span", "/spans/00000000000130b0", &o);
    rc |= bench_trace(weft__serve_port(srv), "trace", "?limit=100000", &o);
    weft__serve_stop(srv);
    if (o.keep == NULL) {
        unlink(state);
        unlink(store);
        char side[320];
        snprintf(side, sizeof(side), "%s-wal", state);
        unlink(side);
        snprintf(side, sizeof(side), "%s-shm", state);
        unlink(side);
        snprintf(side, sizeof(side), "%s-wal", store);
        unlink(side);
        snprintf(side, sizeof(side), "%s-shm", store);
        unlink(side);
        rmdir(dir);
    }
    return rc == 0 ? 0 : 1;
}
