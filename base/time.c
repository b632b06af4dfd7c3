/* base/time.c - wall and monotonic clocks. */
#include "base/time.h"

#include <errno.h>
#include <time.h>

uint64_t
weft__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
weft__monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
weft__sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void
weft__cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

void
weft__cond_timedwait_ns(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t deadline_mono_ns)
{
    struct timespec until = {(time_t)(deadline_mono_ns / 1000000000u),
                             (long)(deadline_mono_ns % 1000000000u)};

    (void)pthread_cond_timedwait(cond, lock, &until);
}
