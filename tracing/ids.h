/* tracing/ids.h - id generation (per-thread xoshiro256**) and hex helpers. */
#ifndef WEFT_TRACING_IDS_H
#define WEFT_TRACING_IDS_H

#include <weft/trace.h>

struct weft__rng {
    uint64_t s[4];
};

void weft__rng_seed(struct weft__rng *rng, uint64_t seed);
uint64_t weft__rng_next(struct weft__rng *rng);
/* This thread's generator, seeded on first use and again after fork(). */
struct weft__rng *weft__thread_rng(void);
void weft__new_trace_id(struct weft__rng *rng, uint8_t out[WEFT_TRACE_ID_SIZE]);
void weft__new_span_id(struct weft__rng *rng, uint8_t out[WEFT_SPAN_ID_SIZE]);
/* Decode exactly 2 * out_len lowercase hex characters. @return WEFT_OK or WEFT_EPARSE. */
weft_err weft__hex_decode_id(const char *s, size_t len, uint8_t *out, size_t out_len);

#endif /* WEFT_TRACING_IDS_H */
