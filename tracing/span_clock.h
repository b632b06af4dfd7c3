/* tracing/span_clock.h - the span clock: Unix-epoch nanosecond timestamps for span start, end
 * and events, read from the TSC where the kernel itself times by it (span_clock.c says how and
 * why). Private to span.c; the fast paths are inline, the anchor renewal and the calibration
 * are in span_clock.c. */
#ifndef WEFT_TRACING_SPAN_CLOCK_H
#define WEFT_TRACING_SPAN_CLOCK_H

#include "base/time.h"
#include "ids.h" /* WEFT__TLS_HOT */
#include "span.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_TSC_CLOCK 1
#else
#define HAVE_TSC_CLOCK 0
#endif

#if HAVE_TSC_CLOCK
#define ANCHOR_TICKS (UINT64_C(1) << 26)
#define MULT_SHIFT   24
#define CAL_MIN_NS   UINT64_C(50000000)    /* first multiplier after 50 ms */
#define CAL_MAX_NS   UINT64_C(60000000000) /* restart the window after a minute */
#define MAX_TICKS    (UINT64_C(1) << 52)   /* beyond (weeks), ticks_to_ns() could overflow */

/* ns per tick << MULT_SHIFT, 0 until calibrated; read without a lock. */
extern atomic_uint_fast64_t weft__tsc_mult;
/* This thread's anchor: a CLOCK_REALTIME reading and the TSC then (0: none yet). */
extern _Thread_local uint64_t weft__clock_anchor_tsc WEFT__TLS_HOT;
extern _Thread_local uint64_t weft__clock_anchor_ns WEFT__TLS_HOT;
extern _Thread_local uint64_t weft__clock_anchor_mult WEFT__TLS_HOT;
extern _Thread_local bool weft__clock_is_wall WEFT__TLS_HOT; /* no usable TSC: clock_gettime() */

/* Read CLOCK_REALTIME, renew this thread's anchor, and return the time; *tsc_out gets the
 * anchor's TSC, or 0 when the TSC is not (yet) usable. */
uint64_t weft__span_clock_slow(uint64_t *tsc_out);

static inline uint64_t
rdtsc(void)
{
    return __builtin_ia32_rdtsc();
}

static inline uint64_t
ticks_to_ns(uint64_t ticks, uint64_t mult)
{
    /* Split so that neither product overflows for ticks < MAX_TICKS and mult < 2^32 (a TSC
     * faster than 4 Hz). */
    return ((ticks >> 32) * mult << (32 - MULT_SHIFT)) +
           (((ticks & UINT32_MAX) * mult) >> MULT_SHIFT);
}

static inline uint64_t
timespec_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* weft__now_ns() without the call: span start and end read it on every span where the TSC is
 * not usable (a VM whose kernel times by kvm-clock, for one). */
static inline uint64_t
wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return timespec_ns(&ts);
}

/* Now, in Unix epoch ns; *tsc_out as weft__span_clock_slow(). */
static inline uint64_t
span_clock_now(uint64_t *tsc_out)
{
    uint64_t t = 0;
    uint64_t d = 0;

    if (weft__clock_is_wall) {
        *tsc_out = 0;
        return wall_now();
    }
    t = rdtsc();
    d = t - weft__clock_anchor_tsc;
    if (weft__clock_anchor_tsc == 0 || d >= ANCHOR_TICKS) {
        return weft__span_clock_slow(tsc_out);
    }
    *tsc_out = t;
    return weft__clock_anchor_ns + ticks_to_ns(d, weft__clock_anchor_mult);
}

/* Now for a span started at start_time_ns: start plus the ticks since the start. */
static inline uint64_t
span_clock_since(const struct weft_span *span)
{
    uint64_t d = 0;

    if (span->start_tsc == 0) {
        return wall_now();
    }
    d = rdtsc() - span->start_tsc;
    if (d >= MAX_TICKS) {
        /* Backwards (d wrapped) means an unsynchronised TSC: give no duration rather than a
         * wrong one; weeks-long spans take the wall clock. */
        return (int64_t)d < 0 ? span->data.start_time_ns : weft__now_ns();
    }
    return span->data.start_time_ns +
           ticks_to_ns(d, atomic_load_explicit(&weft__tsc_mult, memory_order_relaxed));
}
#else
static inline uint64_t
span_clock_now(uint64_t *tsc_out)
{
    *tsc_out = 0;
    return weft__now_ns();
}

static inline uint64_t
span_clock_since(const struct weft_span *span)
{
    (void)span;
    return weft__now_ns();
}
#endif

#endif /* WEFT_TRACING_SPAN_CLOCK_H */
