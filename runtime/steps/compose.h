/* runtime/steps/compose.h - the architect's composition with the run entry it starts its run
 * through (compose.c). weft_compose() (include/weft/compose.h) is this with weft_run();
 * an architect step (architect.c) passes its run's run_nested service, so that no step calls
 * the engine.
 */
#ifndef WEFT_RUNTIME_STEPS_COMPOSE_H
#define WEFT_RUNTIME_STEPS_COMPOSE_H

#include "runtime/run/run.h"

#include <weft/compose.h>

/* As weft_compose(), the architect's own run started by @p run_entry(@p run_ctx, ...).
 * @return as weft_compose(). */
weft_err weft__compose_with(const struct weft_compose_options *o,
                            weft__run_entry_fn run_entry,
                            void *run_ctx,
                            char **path,
                            char *error,
                            size_t error_len);

#endif /* WEFT_RUNTIME_STEPS_COMPOSE_H */
