/* runtime/common/json_type.c - JSON type names for messages (json_type.h). */
#include "runtime/common/json_type.h"

const char *
weft__json_type_expected(json_type type)
{
    switch (type) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "null";
}

const char *
weft__json_type_name(const json_t *v)
{
    return v != NULL ? weft__json_type_expected(json_typeof(v)) : "null";
}
