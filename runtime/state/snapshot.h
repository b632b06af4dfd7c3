/* runtime/state/snapshot.h - the workflow files a run keeps with its state (snapshot.c; the reading
 * side is weft_run_snapshot_load() in include/weft/runtime.h). */
#ifndef WEFT_RUNTIME_SNAPSHOT_H
#define WEFT_RUNTIME_SNAPSHOT_H

#include <stddef.h>
#include <weft/runtime.h>

struct rt_state;

/* @p path without the prefix @p root (a snapshot's directory, weft_run_options.snapshot_root)
 * when it lies under it: the name of the file the run had. Else, or for a NULL @p root,
 * @p path. Ownership: returns borrowed (a suffix of @p path). */
const char *weft__rt_snapshot_unroot(const char *root, const char *path);

/* The snapshot of @p wf's files as a JSON text, each named without @p root (may be NULL).
 * @p why receives the reason of a failure.
 * @return WEFT_OK, WEFT_ELIMIT (over 4 MiB or 256 files), WEFT_EINVAL (a file holds what
 * looks like a credential, or is not UTF-8 text), WEFT_EIO (a file cannot be read),
 * WEFT_ENOMEM. Ownership: caller owns *out (free with weft__free()). */
weft_err weft__rt_snapshot_build(
    const struct weft_workflow *wf, const char *root, char **out, char *why, size_t why_len);

/* The hash of @p wf's snapshot (as weft_run_snapshot.hash: every file's path and bytes), for
 * what names a version of a workflow (an experiment's workflow_hash). @return as
 * weft__rt_snapshot_build(). */
weft_err weft__rt_snapshot_hash(const struct weft_workflow *wf,
                                char out[WEFT_RUN_SNAPSHOT_HASH_LEN],
                                char *why,
                                size_t why_len);

/* Build and store @p wf's snapshot (files named without @p root) for run @p run_id; a failure
 * is logged (WARN), never fatal: the run goes on without one. */
void weft__rt_snapshot_save(struct rt_state *st,
                            const char *run_id,
                            const struct weft_workflow *wf,
                            const char *root);

#endif /* WEFT_RUNTIME_SNAPSHOT_H */
