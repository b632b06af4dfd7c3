/* base/time.h - clocks: wall time for span timestamps, monotonic time for durations and deadlines.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_TIME_H
#define WEFT_BASE_TIME_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

uint64_t weft__now_ns(void);
uint64_t weft__monotonic_ns(void);

/* Sleep @p ms milliseconds (resumed after signals). */
void weft__sleep_ms(unsigned ms);

/* Initialise @p cond on the monotonic clock, for weft__cond_timedwait_ns(). */
void weft__cond_init_monotonic(pthread_cond_t *cond);

/* Wait on @p cond (initialised by weft__cond_init_monotonic) until @p deadline_mono_ns
 * (weft__monotonic_ns() time) at the latest. */
void
weft__cond_timedwait_ns(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t deadline_mono_ns);

#endif /* WEFT_BASE_TIME_H */
