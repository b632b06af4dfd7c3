/* runtime/common/attr_keys.c - the runtime's fixed attribute keys interned once per process.
 *
 * Why here: the keys are set from every folder of the runtime, down to mcp/, replay/ and run/,
 * which may call nothing above common/; the module calls only the tracing API.
 *
 * Invariants: weft__rk_names[id] is the key of WEFT__RK_LIST's entry id; weft__rk_handles[id]
 * is NULL or the interned handle of that same key, set once (release store) and never changed.
 * A NULL handle is not an error for the call sites: the wrappers of attr_keys.h then use the
 * string setters with the key's text, so no attribute depends on interning having worked.
 */
#include "runtime/common/attr_keys.h"

#include <pthread.h>

_Atomic(const struct weft_attr_key *) weft__rk_handles[WEFT__RK_COUNT];

const char *const weft__rk_names[WEFT__RK_COUNT] = {
#define WEFT__RK_NAME(id, key) [WEFT__RK_##id] = key,
    WEFT__RK_LIST(WEFT__RK_NAME)
#undef WEFT__RK_NAME
};

static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static void
intern_all(void)
{
    for (size_t i = 0; i < WEFT__RK_COUNT; i++) {
        const struct weft_attr_key *key = NULL;

        /* On failure key stays NULL: the table is full (logged once by weft_key_intern()) and
         * the wrappers fall back to the string setters. */
        (void)weft_key_intern(weft__rk_names[i], &key);
        atomic_store_explicit(&weft__rk_handles[i], key, memory_order_release);
    }
}

void
weft__rt_keys_init(void)
{
    (void)pthread_once(&keys_once, intern_all);
}
