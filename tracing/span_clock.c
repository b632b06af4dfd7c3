/* tracing/span_clock.c - the span clock's slow paths: an anchor renewed per thread and the TSC's
 * calibration (the fast paths are inline in span_clock.h).
 *
 * Span timestamps. clock_gettime(CLOCK_REALTIME) costs about 25 ns even through the vDSO,
 * and a span needs two readings (more with events): a third of the hot-path budget. On
 * x86-64 Linux with the kernel itself timing by the TSC, the span clock reads the TSC
 * instead (about 10 ns) and converts it the way the vDSO does, with a multiplier:
 *
 * - Start times are Unix epoch ns: each thread keeps an anchor (a CLOCK_REALTIME reading
 *   and the TSC at that moment) and adds the TSC ticks since then. The anchor is renewed
 *   every ANCHOR_TICKS (2^26 ticks, 15-70 ms), so a step of the wall clock (settimeofday,
 *   an NTP step) reaches start times within that bound, and the drift between threads'
 *   anchors stays within tens of ns.
 * - End and event times are the start time plus the TSC ticks since the start, so a
 *   span's duration is measured on a monotonic clock (as the OTel specification
 *   recommends) and end >= start holds even across a wall-clock step. The TSC is the
 *   same on every core when the kernel uses it as its clocksource (it checks that at boot
 *   and switches away from an unsynchronised TSC), so a span may end on another thread.
 * - The multiplier (ns per tick << MULT_SHIFT) is calibrated against CLOCK_MONOTONIC
 *   over a window that grows from CAL_MIN_NS to CAL_MAX_NS, then restarts, so that it
 *   follows NTP frequency corrections the way CLOCK_MONOTONIC does. Until the first
 *   calibration (the first 50 ms of the process), and everywhere else, the span clock is
 *   clock_gettime(CLOCK_REALTIME). Measured against clock_gettime brackets, start times
 *   were within 80 ns of the wall clock.
 *
 * Explicit start or end times from the caller are used as given. */

#include "span_clock.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#if HAVE_TSC_CLOCK
/* Process-wide calibration, under cal_lock (taken with trylock: the hot path never waits).
 * weft__tsc_mult is also read without the lock: 0 until calibrated. */
static pthread_mutex_t cal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cal_once = PTHREAD_ONCE_INIT;
static bool tsc_usable;
static uint64_t cal_tsc;  /* start of the calibration window */
static uint64_t cal_mono; /* CLOCK_MONOTONIC at cal_tsc */
atomic_uint_fast64_t weft__tsc_mult;

_Thread_local uint64_t weft__clock_anchor_tsc WEFT__TLS_HOT;
_Thread_local uint64_t weft__clock_anchor_ns WEFT__TLS_HOT;
_Thread_local uint64_t weft__clock_anchor_mult WEFT__TLS_HOT;
_Thread_local bool weft__clock_is_wall WEFT__TLS_HOT;

static void
tsc_check(void)
{
    char buf[16] = {0};
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    ssize_t n = 0;

    if (fd < 0) {
        return;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    tsc_usable = n >= 3 && memcmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

/* Renew the calibration when its window is long enough; called on anchor renewals. */
static void
tsc_calibrate(void)
{
    struct timespec ts;
    uint64_t t = 0;
    uint64_t mono = 0;

    if (pthread_mutex_trylock(&cal_lock) != 0) {
        return; /* another thread is at it */
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t = rdtsc();
    mono = timespec_ns(&ts);
    if (cal_tsc == 0 || t <= cal_tsc || mono <= cal_mono) {
        cal_tsc = t; /* first call, or the TSC went backwards (not synchronised after all) */
        cal_mono = mono;
    } else if (mono - cal_mono >= CAL_MIN_NS) {
        double mult = (double)(mono - cal_mono) / (double)(t - cal_tsc) * (1u << MULT_SHIFT);

        if (mult >= 1.0 && mult < 4294967296.0) {
            atomic_store_explicit(&weft__tsc_mult, (uint64_t)mult, memory_order_relaxed);
        }
        if (mono - cal_mono >= CAL_MAX_NS) {
            cal_tsc = t;
            cal_mono = mono;
        }
    }
    pthread_mutex_unlock(&cal_lock);
}

uint64_t
weft__span_clock_slow(uint64_t *tsc_out)
{
    struct timespec ts;
    uint64_t t0 = 0;
    uint64_t t1 = 0;
    uint64_t mult = 0;

    *tsc_out = 0;
    pthread_once(&cal_once, tsc_check);
    if (!tsc_usable) {
        weft__clock_is_wall = true;
        return weft__now_ns();
    }
    tsc_calibrate();
    mult = atomic_load_explicit(&weft__tsc_mult, memory_order_relaxed);
    t0 = rdtsc();
    clock_gettime(CLOCK_REALTIME, &ts);
    t1 = rdtsc();
    if (mult == 0 || t1 < t0) {
        return timespec_ns(&ts);
    }
    /* The clock was read between t0 and t1: pin it to the middle. */
    weft__clock_anchor_tsc = t0 + (t1 - t0) / 2;
    weft__clock_anchor_ns = timespec_ns(&ts);
    weft__clock_anchor_mult = mult;
    *tsc_out = weft__clock_anchor_tsc;
    return weft__clock_anchor_ns;
}

#endif
