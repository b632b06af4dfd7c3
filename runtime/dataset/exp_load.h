/* runtime/dataset/exp_load.h - an experiment and its items read for report/experiment.h's
 * documents, by `weft eval show|compare`, `weft serve` and the MCP tools alike. */
#ifndef WEFT_RUNTIME_DATASET_EXP_LOAD_H
#define WEFT_RUNTIME_DATASET_EXP_LOAD_H

#include "report/experiment.h"

/* Find experiment @p ref (an id, a unique id prefix of 4+ characters, or a name: its newest)
 * in the state store @p state (NULL: the default) and load it with its items into @p x.
 * @return WEFT_OK; WEFT_ENOTFOUND (no such experiment), WEFT_EINVAL (@p ref names several),
 * WEFT_EIO, WEFT_ENOMEM. Ownership: release @p x with weft__exp_cleanup() (also after an
 * error: it is zeroed first). */
weft_err weft__exp_load(const char *state, const char *ref, struct weft__exp *x);
void weft__exp_cleanup(struct weft__exp *x);

#endif /* WEFT_RUNTIME_DATASET_EXP_LOAD_H */
