/* runtime/engine/compose_entry.c - the public weft_compose() (include/weft/compose.h): the
 * architect's composition (runtime/steps/compose.c) with weft_run() as its run's entry. */
#include "runtime/steps/compose.h"

#include <weft/runtime.h>

static weft_err
run_entry(void *ctx,
          const struct weft_workflow *workflow,
          const struct weft_run_options *options,
          struct weft_run_result **out,
          char *error,
          size_t error_len)
{
    (void)ctx;
    return weft_run(workflow, options, out, error, error_len);
}

weft_err
weft_compose(const struct weft_compose_options *o, char **path, char *error, size_t error_len)
{
    return weft__compose_with(o, run_entry, NULL, path, error, error_len);
}
