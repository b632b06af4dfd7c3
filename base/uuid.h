/* base/uuid.h - random (version 4) UUIDs in their canonical text form.
 *
 * Internal to weft; base/ depends on libc only. Distributed runs name every task with one
 * (the `tasks.task_id` of the PostgreSQL state and the task messages on the broker).
 */
#ifndef WEFT_BASE_UUID_H
#define WEFT_BASE_UUID_H

#include <stdbool.h>
#include <stddef.h>

#define WEFT_UUID_LEN 36 /* "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" */

/* Write a new random UUID (RFC 9562 version 4, from getrandom(2)) into @p out, lowercase and
 * NUL-terminated. Errors: none (falls back to /dev/urandom, then to time and pid when the
 * kernel gives no randomness; such ids are still unique per process). Thread-safe. */
void weft__uuid_v4(char out[WEFT_UUID_LEN + 1]);

/* Is @p s a UUID in canonical text form (36 characters, hyphens at 8, 13, 18, 23, hex digits
 * elsewhere, either case)? NULL is not. */
bool weft__uuid_is_valid(const char *s);

#endif /* WEFT_BASE_UUID_H */
