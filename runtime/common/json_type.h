/* runtime/common/json_type.h - the one place a JSON value's type is named in a message ("expected
 * string, got array"): the workflow loader's diagnostics and the LLM providers' errors read
 * the same words. */
#ifndef WEFT_RUNTIME_JSON_TYPE_H
#define WEFT_RUNTIME_JSON_TYPE_H

#include <jansson.h>

/* The JSON type of @p v as a user reads it: "object", "array", "string", "integer",
 * "number", "boolean" or "null" (also for a NULL @p v). Never NULL; a static string. */
const char *weft__json_type_name(const json_t *v);

/* The name of JSON type @p type, as above (JSON_TRUE and JSON_FALSE are both "boolean"). */
const char *weft__json_type_expected(json_type type);

#endif /* WEFT_RUNTIME_JSON_TYPE_H */
