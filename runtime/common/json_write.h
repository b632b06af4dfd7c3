/* runtime/common/json_write.h - a JSON value written as compact text, for the records a run
 * stores at every step (LLM exchanges): the same text as jansson's json_dumps(JSON_COMPACT),
 * written straight into one buffer instead of through a callback per fragment. */
#ifndef WEFT_RUNTIME_JSON_WRITE_H
#define WEFT_RUNTIME_JSON_WRITE_H

#include <jansson.h>

/* @p v as compact JSON text (objects in their keys' order, strings escaped as jansson escapes
 * them, reals in their shortest round-trip form). @return the text, or NULL when out of memory
 * or nested deeper than 2,048 levels. Ownership: returns new (free with weft__free()). */
char *weft__json_compact(const json_t *v);

#endif /* WEFT_RUNTIME_JSON_WRITE_H */
