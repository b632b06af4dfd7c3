/* bench/explorer_bench.c - the explorer's API (serve/, docs/explorer.md) at size: the runs list
 * over a state store of 10,000 runs, and traces of 10,000 and 100,000 spans, through `weft
 * serve`'s HTTP server started in process on 127.0.0.1 and queried with libcurl (one connection
 * reused, as a browser does, asking for gzip as a browser does). Prints one JSON object per
 * line:
 *
 *   {"bench":"explorer","what":"runs_list","runs":10000,"limit":200,"requests":N,
 *    "p50_ms":...,"p99_ms":...,"bytes":...,"gzip_bytes":...}
 *   {"bench":"explorer","what":"rows_first","spans":N,"limit":300,...}   the page's first part
 *   {"bench":"explorer","what":"rows_rest","spans":N,...}    the rest of the rows (offset 300)
 *   {"bench":"explorer","what":"rows","spans":N,...,"bytes_per_span":...,"gzip_bytes_per_span":...}
 *       every row in one answer (?view=rows: the server's time for the trace's outline)
 *   {"bench":"explorer","what":"waterfall","spans":N,...}  the older ?view=waterfall, as sent
 *   {"bench":"explorer","what":"span","spans":N,...}       one span's detail, on a click
 *   {"bench":"explorer","what":"trace","spans":N,...}      a page of whole spans (10,000)
 *   {"bench":"explorer","what":"rows_first_cached"|"rows_rest_cached","spans":N,...}
 *       the first part and the rest answered from the rows cache (serve/rows_cache.h); the
 *       measures above run on a server without it (WEFT_SERVE_ROWS_CACHE_MB=0), each a read
 *
 * bytes are the body as decoded, gzip_bytes as sent (Content-Encoding: gzip). The runs are
 * written through the state store's own functions in transactions of 1,000; each trace through
 * the span store's exporter in batches of 512: a root, agent steps of 99 children each, 8
 * attributes a span, every 97th an error, random span ids (as SDKs make them) and start times
 * and durations that vary by the span, so that compression sees what real traces give it.
 *
 * Usage: explorer_bench [--runs N] [--spans N[,N...]] [--requests N] [--keep DIR]
 *   --keep DIR: build the stores in DIR (state.db, weft.db) and leave them there, for
 *   bench/explorer_render.mjs (the page in Chromium; `make bench-explorer` runs both).
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

#define MAX_SIZES  4
#define FIRST_ROWS 300 /* the page's first part (app.js FIRST_ROWS) */

struct opts {
    size_t runs;
    size_t sizes[MAX_SIZES]; /* spans of each trace */
    size_t size_count;
    size_t requests;
    const char *keep;
};

/* splitmix64: a span's random-looking id and jitter, the same on every run. */
static uint64_t
mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* The span id of span @p i of the @p n-span trace (never 0). */
static uint64_t
span_id_of(size_t n, size_t i)
{
    return mix(((uint64_t)n << 32) + i) | 1u;
}

/* The trace id of the @p n-span trace, in hex. */
static void
trace_hex(size_t n, char out[33])
{
    snprintf(out, 33, "abababababababababababab%08zx", n);
}

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

/* Span @p i of the @p n-span trace: 0 the root, then step spans, each followed by its 99
 * children, one after the other within their step (a microsecond each, jittered). */
static void
make_span(struct weft_span_data *s, struct weft_attr *attrs, size_t n, size_t i, uint64_t t0)
{
    static const char *const names[] = {"chat scripted-gpt-4o-mini", "execute_tool read_file",
                                        "execute_tool write_file", "reflect reviewer"};
    size_t step = i == 0 ? 0 : (i - 1) / 100;
    bool is_step = i != 0 && (i - 1) % 100 == 0;
    uint64_t id = span_id_of(n, i);
    uint64_t parent = i == 0 ? 0 : span_id_of(n, is_step ? 0 : 1 + step * 100);
    uint64_t jitter = mix(id) % 1000;

    memset(s, 0, sizeof(*s));
    for (size_t b = 0; b < sizeof(s->trace_id); b++) {
        s->trace_id[b] = b < 12 ? 0xab : (uint8_t)(n >> (8 * (15 - b)));
    }
    for (size_t b = 0; b < 8; b++) {
        s->span_id[b] = (uint8_t)(id >> (8 * (7 - b)));
        s->parent_span_id[b] = (uint8_t)(parent >> (8 * (7 - b)));
    }
    s->has_parent = i != 0;
    s->name = i == 0 ? "invoke_workflow bench" : is_step ? "invoke_agent coder" : names[i % 4];
    s->start_time_ns = t0 + i * 1000 + (i == 0 ? 0 : jitter / 4);
    s->end_time_ns = s->start_time_ns + (i == 0    ? n * 1000 + 50000
                                         : is_step ? 100000 + jitter * 3
                                                   : 200 + jitter / 2);
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
fill_trace(const char *path, size_t n, uint64_t t0)
{
    struct weft_exporter *exp = NULL;
    struct weft_span_data *spans = calloc(512, sizeof(*spans));
    const struct weft_span_data **ptrs = calloc(512, sizeof(*ptrs));
    struct weft_attr(*attrs)[8] = calloc(512, sizeof(*attrs));
    int rc = 0;

    if (spans == NULL || ptrs == NULL || attrs == NULL ||
        weft_store_exporter_new(path, &exp) != WEFT_OK) {
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n; i += 512) {
        size_t k = n - i < 512 ? n - i : 512;
        struct weft_export_result res = {0};
        for (size_t j = 0; j < k; j++) {
            make_span(&spans[j], attrs[j], n, i + j, t0);
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

/* What a series of GETs measured: p50 and p99 in ms, the last body as decoded and as sent. */
struct result {
    double p50;
    double p99;
    size_t bytes;
    size_t gzip_bytes;
};

/* @p requests GETs of @p url, asking for gzip as a browser does. */
static int
measure(const char *url, size_t requests, struct result *r)
{
    CURL *c = curl_easy_init();
    double *ms = calloc(requests, sizeof(*ms));
    long status = 0;
    curl_off_t sent = 0;
    int rc = c != NULL && ms != NULL ? 0 : -1;

    if (rc == 0) {
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "gzip");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, count_bytes);
    }
    for (size_t i = 0; rc == 0 && i < requests; i++) {
        uint64_t t = weft__monotonic_ns();
        r->bytes = 0;
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->bytes);
        if (curl_easy_perform(c) != CURLE_OK) {
            rc = -1;
        }
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &sent);
        r->gzip_bytes = (size_t)sent;
        rc = rc == 0 && status == 200 ? 0 : -1;
        ms[i] = (double)(weft__monotonic_ns() - t) / 1e6;
    }
    if (rc == 0) {
        qsort(ms, requests, sizeof(*ms), cmp_double);
        r->p50 = ms[requests / 2];
        r->p99 = ms[(requests * 99) / 100 < requests ? (requests * 99) / 100 : requests - 1];
    }
    free(ms);
    curl_easy_cleanup(c);
    return rc;
}

/* GETs of the @p spans-span trace's @p suffix: a tenth as many requests as the runs list (min
 * 3); per-span sizes when @p per_span. */
static int
bench_trace(unsigned port,
            const char *what,
            const char *suffix,
            size_t spans,
            size_t requests,
            bool per_span)
{
    char url[256];
    char hex[33];
    size_t n = requests / 10 > 3 ? requests / 10 : 3;
    struct result r = {0};
    int rc = 0;

    trace_hex(spans, hex);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/traces/%s%s", port, hex, suffix);
    rc = measure(url, n, &r);
    printf("{\"bench\":\"explorer\",\"what\":\"%s\",\"spans\":%zu,\"requests\":%zu,"
           "\"p50_ms\":%.1f,\"p99_ms\":%.1f,\"bytes\":%zu,\"gzip_bytes\":%zu",
           what, spans, n, r.p50, r.p99, r.bytes, r.gzip_bytes);
    if (per_span) {
        printf(",\"bytes_per_span\":%.1f,\"gzip_bytes_per_span\":%.1f",
               (double)r.bytes / (double)spans, (double)r.gzip_bytes / (double)spans);
    }
    printf("%s}\n", rc == 0 ? "" : ",\"error\":true");
    fflush(stdout);
    return rc;
}

/* Every measure of the @p spans-span trace, on a server without the rows cache. */
static int
bench_size(unsigned port, size_t spans, size_t requests)
{
    char suffix[64];
    char hex[17];
    int rc = 0;

    snprintf(suffix, sizeof(suffix), "?view=rows&limit=%d", FIRST_ROWS);
    rc |= bench_trace(port, "rows_first", suffix, spans, requests, false);
    snprintf(suffix, sizeof(suffix), "?view=rows&offset=%d&limit=100000", FIRST_ROWS);
    rc |= bench_trace(port, "rows_rest", suffix, spans, requests, false);
    rc |= bench_trace(port, "rows", "?view=rows&limit=100000", spans, requests, true);
    rc |= bench_trace(port, "waterfall", "?view=waterfall&limit=100000", spans, requests, true);
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)span_id_of(spans, spans * 3 / 4));
    snprintf(suffix, sizeof(suffix), "/spans/%s", hex);
    rc |= bench_trace(port, "span", suffix, spans, requests, false);
    rc |= bench_trace(port, "trace", "?limit=10000", spans, requests, false);
    return rc;
}

/* The rows of the @p spans-span trace on a server with the rows cache (serve/rows_cache.h),
 * after a first part has read them: the first part and the rest as a page's later loads and
 * its second request get them. */
static int
bench_cached(unsigned port, size_t spans, size_t requests)
{
    char suffix[64];
    int rc = 0;

    snprintf(suffix, sizeof(suffix), "?view=rows&limit=%d", FIRST_ROWS);
    rc |= bench_trace(port, "rows_first_cached", suffix, spans, requests, false);
    snprintf(suffix, sizeof(suffix), "?view=rows&offset=%d&limit=100000", FIRST_ROWS);
    rc |= bench_trace(port, "rows_rest_cached", suffix, spans, requests, false);
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

/* "10000,100000" into o->sizes; false when malformed. */
static bool
parse_sizes(const char *v, struct opts *o)
{
    char *end = NULL;

    o->size_count = 0;
    while (*v != '\0' && o->size_count < MAX_SIZES) {
        unsigned long long n = strtoull(v, &end, 10);
        if (end == v || n < 2 || n > 1000000 || (*end != ',' && *end != '\0')) {
            return false;
        }
        o->sizes[o->size_count++] = (size_t)n;
        v = *end == ',' ? end + 1 : end;
    }
    return o->size_count > 0 && *v == '\0';
}

static bool
parse(int argc, char **argv, struct opts *o)
{
    o->runs = 10000;
    o->sizes[0] = 10000;
    o->sizes[1] = 100000;
    o->size_count = 2;
    o->requests = 200;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v != NULL && strcmp(argv[i], "--runs") == 0) {
            o->runs = strtoul(v, NULL, 10);
        } else if (v != NULL && strcmp(argv[i], "--spans") == 0) {
            if (!parse_sizes(v, o)) {
                return false;
            }
        } else if (v != NULL && strcmp(argv[i], "--requests") == 0) {
            o->requests = strtoul(v, NULL, 10);
        } else if (v != NULL && strcmp(argv[i], "--keep") == 0) {
            o->keep = v;
        } else {
            return false;
        }
        i++;
    }
    return o->runs > 0 && o->requests > 0;
}

/* The stores in @p dir: the runs, then one trace per size, a second apart. */
static int
fill(const char *state, const char *store, const struct opts *o)
{
    uint64_t t0 = weft__now_ns() - (uint64_t)o->size_count * 1000000000u;

    if (fill_runs(state, o->runs) != 0) {
        return -1;
    }
    for (size_t k = 0; k < o->size_count; k++) {
        if (fill_trace(store, o->sizes[k], t0 + k * 1000000000u) != 0) {
            return -1;
        }
    }
    return 0;
}

static void
remove_stores(const char *dir, const char *state, const char *store)
{
    const char *const files[] = {state, store};
    const char *const sides[] = {"", "-wal", "-shm"};
    char path[320];

    for (size_t f = 0; f < 2; f++) {
        for (size_t k = 0; k < 3; k++) {
            snprintf(path, sizeof(path), "%s%s", files[f], sides[k]);
            unlink(path);
        }
    }
    rmdir(dir);
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
    struct result r = {0};
    int rc = 0;

    memset(&o, 0, sizeof(o));
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: explorer_bench [--runs N] [--spans N[,N...]] [--requests N] "
                        "[--keep DIR]   (spans: 2 to 1000000 each, at most 4 sizes)\n");
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
    if (fill(state, store, &o) != 0) {
        fprintf(stderr, "explorer_bench: cannot fill the stores in %s\n", dir);
        return 1;
    }
    memset(&cfg, 0, sizeof(cfg));
    setenv("WEFT_SERVE_ROWS_CACHE_MB", "0", 1); /* every request reads (the cached: below) */
    cfg.addr = "127.0.0.1:0";
    cfg.api.state_path = state;
    cfg.api.store_path = store;
    cfg.metrics = no_metrics;
    if (weft__serve_start(&cfg, &srv) != WEFT_OK) {
        fprintf(stderr, "explorer_bench: cannot start the server\n");
        return 1;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/runs?limit=200", weft__serve_port(srv));
    rc |= measure(url, o.requests, &r);
    printf("{\"bench\":\"explorer\",\"what\":\"runs_list\",\"runs\":%zu,\"limit\":200,"
           "\"requests\":%zu,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"bytes\":%zu,\"gzip_bytes\":%zu}\n",
           o.runs, o.requests, r.p50, r.p99, r.bytes, r.gzip_bytes);
    for (size_t k = 0; k < o.size_count; k++) {
        rc |= bench_size(weft__serve_port(srv), o.sizes[k], o.requests);
    }
    weft__serve_stop(srv);
    unsetenv("WEFT_SERVE_ROWS_CACHE_MB");
    if (weft__serve_start(&cfg, &srv) != WEFT_OK) {
        fprintf(stderr, "explorer_bench: cannot start the server\n");
        return 1;
    }
    for (size_t k = 0; k < o.size_count; k++) {
        rc |= bench_cached(weft__serve_port(srv), o.sizes[k], o.requests);
    }
    weft__serve_stop(srv);
    if (o.keep == NULL) {
        remove_stores(dir, state, store);
    }
    return rc == 0 ? 0 : 1;
}
