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

uint64_t weft__now_ns(void);
uint64_t weft__monotonic_ns(void);

#endif /* WEFT_BASE_TIME_H */
