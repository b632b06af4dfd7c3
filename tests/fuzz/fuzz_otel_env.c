/* tests/fuzz/fuzz_otel_env.c - OpenTelemetry environment values: OTEL_RESOURCE_ATTRIBUTES
 * (tracing/resource.c) and OTEL_EXPORTER_OTLP_HEADERS (exporters/otlp_transport.c), both
 * "key=value,..." lists with percent-encoded values.
 *
 * The value is parsed by both parsers directly (no setenv: the environment is process-wide
 * and glibc keeps every value ever set). Resource keys must be non-empty and unique; header
 * lines must hold "name: value" with no line break.
 */
#include "fuzz_util.h"

#include "base/mem.h"
#include "base/str.h"
#include "exporters/otlp_transport.h"
#include "tracing/sdk.h"

#include <curl/curl.h>
#include <weft/weft.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct weft_attr *attrs = NULL;
    struct curl_slist *headers = NULL;
    size_t count = 0;
    char *value = fuzz_cstr(data, size);
    char *decoded = NULL;

    if (value == NULL) {
        return 0;
    }
    if (weft__resource_parse_env(value, &attrs, &count) == WEFT_OK) {
        for (size_t i = 0; i < count; i++) {
            FUZZ_CHECK(attrs[i].key != NULL && attrs[i].key[0] != '\0');
            FUZZ_CHECK(attrs[i].value.type == WEFT_VALUE_STRING);
            for (size_t j = 0; j < i; j++) {
                FUZZ_CHECK(strcmp(attrs[i].key, attrs[j].key) != 0);
            }
        }
    }
    weft__free(attrs);
    if (weft__otlp_headers_add(&headers, value, "OTEL_EXPORTER_OTLP_HEADERS") == WEFT_OK) {
        for (const struct curl_slist *h = headers; h != NULL; h = h->next) {
            const char *colon = strchr(h->data, ':');

            /* A header name is a token; no line break may smuggle in another header. */
            FUZZ_CHECK(colon != NULL && colon > h->data);
            for (const char *c = h->data; c < colon; c++) {
                FUZZ_CHECK(*c > 0x20 && *c < 0x7f);
            }
            FUZZ_CHECK(strpbrk(h->data, "\r\n") == NULL);
        }
    }
    curl_slist_free_all(headers);
    decoded = weft__percent_decode(value, size);
    weft__free(decoded);
    free(value);
    return 0;
}
