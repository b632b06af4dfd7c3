/* tests/fuzz/fuzz_otlp_response.c - what an OTLP/HTTP receiver answers
 * (exporters/otlp_proto.c, exporters/otlp_transport.c, tracing/util.c).
 *
 * The first byte chooses what the rest is: a protobuf or JSON ExportTraceServiceResponse
 * (partial_success), or a response header line ("Retry-After: ..." as libcurl hands it over).
 * Rejected counts and messages must be bounded and NUL-terminated; a Retry-After wait is
 * never longer than the cap the transport relies on.
 */
#include "fuzz_util.h"

#include "base/http.h"
#include "exporters/otlp_encode.h"

#include <weft/weft.h>

/* The largest wait weft__http_retry_after_ms() reports (tracing/util.c). */
#define RETRY_AFTER_MAX_MS (1000000000ull * 1000u)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t rejected = 0;
    char message[64];
    char value[64];
    weft_err err = WEFT_OK;

    if (size == 0) {
        return 0;
    }
    switch (data[0] % 3) {
    case 0:
    case 1:
        memset(message, 'x', sizeof(message));
        err = weft__otlp_parse_response((const char *)data + 1, size - 1, data[0] % 3 == 1,
                                        &rejected, message, sizeof(message));
        FUZZ_CHECK(err == WEFT_OK || err == WEFT_EPARSE);
        if (err == WEFT_OK) {
            FUZZ_CHECK(memchr(message, '\0', sizeof(message)) != NULL);
        }
        /* A NULL message buffer is allowed too. */
        (void)weft__otlp_parse_response((const char *)data + 1, size - 1, data[0] % 3 == 1,
                                        &rejected, NULL, 0);
        break;
    default: {
        char *raw = fuzz_cstr(data + 1, size - 1);

        if (raw != NULL) {
            FUZZ_CHECK(weft__http_retry_after_ms(raw) <= RETRY_AFTER_MAX_MS);
            free(raw);
        }
        if (weft__http_header_value((const char *)data + 1, size - 1, "Retry-After", value,
                                    sizeof(value))) {
            FUZZ_CHECK(strlen(value) < sizeof(value));
            FUZZ_CHECK(weft__http_retry_after_ms(value) <= RETRY_AFTER_MAX_MS);
        }
        break;
    }
    }
    return 0;
}
