/* tests/fuzz/fuzz_serve.c - what `weft serve` parses itself (exporters/metrics_server.c,
 * runtime/observe/metrics_store.c); the HTTP request line and headers are libmicrohttpd's.
 *
 * Input: newline-separated fields, missing ones empty: method, URL path, listen address,
 * instrument name, unit, description, labels JSON, histogram bounds JSON, bucket counts JSON.
 * The request is routed; the address is parsed; the row fields go the way a stored run_metrics
 * row goes (labels and numbers parsed, the series folded into a meter) and the meter is
 * rendered as Prometheus text, which must stay line-structured whatever the names and labels.
 */
#include "fuzz_util.h"

#include "exporters/metrics_server.h"
#include "runtime/observe/metrics_store.h"
#include "tracing/sdk.h"

#include <arpa/inet.h>
#include <weft/weft.h>

#define FIELDS 9

/* Every line of Prometheus text is empty (the last), a comment, or starts with a metric name. */
static void
check_exposition(const char *text, size_t len)
{
    const char *line = text;

    FUZZ_CHECK(strlen(text) == len);
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        char c = line[0];

        FUZZ_CHECK(end != NULL);
        FUZZ_CHECK(c == '#' || c == '_' || c == ':' || (c >= 'a' && c <= 'z') ||
                   (c >= 'A' && c <= 'Z'));
        line = end + 1;
    }
}

static void
fold_row(char **f)
{
    struct weft_meter *meter = NULL;
    struct weft_instrument *in = NULL;
    struct weft_attr attrs[WEFT__MSTORE_MAX_LABELS];
    double bounds[256];
    uint64_t buckets[257];
    json_t *labels = json_loads(f[6], 0, NULL);
    size_t n = weft__mstore_labels(labels, attrs);
    long nb = weft__mstore_numbers(f[7], bounds, NULL, 256);
    long nc = weft__mstore_numbers(f[8], NULL, buckets, 257);
    bool is_histogram = nb > 0 && nc == nb + 1;
    char *text = NULL;
    size_t len = 0;
    weft_err err = WEFT_OK;

    FUZZ_CHECK(n <= WEFT__MSTORE_MAX_LABELS);
    FUZZ_CHECK(nb >= -1 && nb <= 256 && nc >= -1 && nc <= 257);
    if (weft_meter_new(NULL, &meter) != WEFT_OK) {
        json_decref(labels);
        return;
    }
    err = weft_meter_instrument(
        meter, is_histogram ? WEFT_INSTRUMENT_HISTOGRAM : WEFT_INSTRUMENT_COUNTER, f[3], f[4], f[5],
        is_histogram ? bounds : NULL, is_histogram ? (size_t)nb : 0, &in);
    if (err == WEFT_OK && is_histogram) {
        (void)weft__histogram_merge(in, attrs, n, buckets, (size_t)nc, 1.5, 0.5, 2.5);
    } else if (err == WEFT_OK) {
        (void)weft_counter_add(in, 2, attrs, n);
    }
    if (weft_prometheus_render(meter, &text, &len) == WEFT_OK) {
        check_exposition(text, len);
        free(text);
    }
    weft_meter_free(meter);
    json_decref(labels);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *f[FIELDS] = {NULL};
    const uint8_t *rest = data;
    size_t rest_size = size;
    struct sockaddr_in sa;
    weft__metrics_route route = WEFT__ROUTE_NOT_FOUND;
    bool ok = true;

    for (size_t i = 0; i < FIELDS && ok; i++) {
        const uint8_t *next = NULL;
        size_t next_size = 0;

        ok = fuzz_split(rest, rest_size, '\n', &f[i], &next, &next_size) != 0;
        rest = next;
        rest_size = next_size;
    }
    if (ok) {
        route = weft__metrics_server_route(f[0], f[1]);
        if (route == WEFT__ROUTE_METRICS || route == WEFT__ROUTE_HEALTHZ) {
            FUZZ_CHECK(strcmp(f[0], "GET") == 0 || strcmp(f[0], "HEAD") == 0);
            FUZZ_CHECK(f[1][0] == '/');
        }
        if (weft__metrics_server_parse_addr(f[2], &sa) == WEFT_OK) {
            FUZZ_CHECK(sa.sin_family == AF_INET);
            FUZZ_CHECK(strchr(f[2], ':') != NULL);
        }
        fold_row(f);
    }
    for (size_t i = 0; i < FIELDS; i++) {
        free(f[i]);
    }
    return 0;
}
