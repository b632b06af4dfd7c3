/* tests/fuzz/fuzz_traceparent.c - W3C trace context headers (tracing/ids.c).
 *
 * Input: traceparent, a newline, tracestate (no newline: no tracestate). An accepted context
 * must be valid and survive formatting and parsing again unchanged.
 */
#include "fuzz_util.h"

#include <weft/weft.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct weft_span_context ctx;
    struct weft_span_context again;
    char *traceparent = NULL;
    char *tracestate = NULL;
    const uint8_t *rest = NULL;
    size_t rest_size = 0;
    bool has_state = size > 0 && memchr(data, '\n', size) != NULL;
    char buf[WEFT_TRACEPARENT_LEN + 1];
    weft_err err = WEFT_OK;

    if (!fuzz_split(data, size, '\n', &traceparent, &rest, &rest_size)) {
        return 0;
    }
    tracestate = has_state ? fuzz_cstr(rest, rest_size) : NULL;
    if (has_state && tracestate == NULL) {
        free(traceparent);
        return 0;
    }
    (void)weft_tracestate_validate(tracestate);
    memset(&ctx, 0, sizeof(ctx));
    err = weft_traceparent_parse(traceparent, tracestate, &ctx);
    if (err == WEFT_OK) {
        FUZZ_CHECK(weft_span_context_is_valid(&ctx));
        FUZZ_CHECK(weft_traceparent_format(&ctx, buf, sizeof(buf)) == WEFT_OK);
        memset(&again, 0, sizeof(again));
        FUZZ_CHECK(weft_traceparent_parse(buf, NULL, &again) == WEFT_OK);
        FUZZ_CHECK(memcmp(again.trace_id, ctx.trace_id, sizeof(ctx.trace_id)) == 0);
        FUZZ_CHECK(memcmp(again.span_id, ctx.span_id, sizeof(ctx.span_id)) == 0);
        FUZZ_CHECK(again.trace_flags ==
                   (ctx.trace_flags & (WEFT_TRACE_FLAG_SAMPLED | WEFT_TRACE_FLAG_RANDOM)));
    }
    free(traceparent);
    free(tracestate);
    return 0;
}
