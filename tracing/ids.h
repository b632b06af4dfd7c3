/* tracing/ids.h - id generation (per-thread xoshiro256**) and hex helpers. */
#ifndef WEFT_TRACING_IDS_H
#define WEFT_TRACING_IDS_H

#include <stdatomic.h>
#include <weft/trace.h>

struct weft__rng {
    uint64_t s[4];
};

void weft__rng_seed(struct weft__rng *rng, uint64_t seed);
uint64_t weft__rng_next(struct weft__rng *rng);
/* This thread's generator, seeded on first use and again after fork(). */
struct weft__rng *weft__thread_rng(void);

/* The generator step and this thread's generator, inline for span start (three steps a root
 * span): as calls they cost more than the arithmetic. */
static inline uint64_t
weft__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t
weft__rng_step(struct weft__rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = weft__rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = weft__rotl(s[3], 45);
    return result;
}

extern atomic_uint weft__fork_generation; /* bumped in a fork()ed child */
extern _Thread_local struct weft__rng weft__tls_rng;
extern _Thread_local unsigned weft__tls_rng_generation;
extern _Thread_local bool weft__tls_rng_seeded;
struct weft__rng *weft__thread_rng_seed(void); /* seed (again) and return weft__tls_rng */

static inline struct weft__rng *
weft__thread_rng_fast(void)
{
    if (!weft__tls_rng_seeded ||
        weft__tls_rng_generation !=
            atomic_load_explicit(&weft__fork_generation, memory_order_relaxed)) {
        return weft__thread_rng_seed();
    }
    return &weft__tls_rng;
}
void weft__new_trace_id(struct weft__rng *rng, uint8_t out[WEFT_TRACE_ID_SIZE]);
void weft__new_span_id(struct weft__rng *rng, uint8_t out[WEFT_SPAN_ID_SIZE]);
/* Decode exactly 2 * out_len lowercase hex characters. @return WEFT_OK or WEFT_EPARSE. */
weft_err weft__hex_decode_id(const char *s, size_t len, uint8_t *out, size_t out_len);

#endif /* WEFT_TRACING_IDS_H */
