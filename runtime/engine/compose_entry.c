/* runtime/engine/compose_entry.c - the public weft_compose() (include/weft/compose.h): the
 * architect's composition (runtime/steps/compose.c) with the engine's nested-run entry. */
#include "runtime/engine/engine.h"
#include "runtime/steps/compose.h"

weft_err
weft_compose(const struct weft_compose_options *o, char **path, char *error, size_t error_len)
{
    return weft__compose_with(o, weft__eng_run_nested, NULL, path, error, error_len);
}
