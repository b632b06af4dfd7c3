/* tests/fuzz/fuzz_workflow.c - the workflow loader (runtime/workflow/workflow.c) on arbitrary
 * files.
 *
 * The input is written to a workflow file in a private temporary directory and loaded the way
 * `weft run` and `weft validate` load one: every outcome must be WEFT_OK with a workflow, or
 * an error with at least one diagnostic and no workflow. References to other files (scripts,
 * sub-flows) resolve against that directory and are only read.
 */
#include "fuzz_util.h"

#include <weft/weft.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct weft_diags diags;
    struct weft_workflow *wf = NULL;
    const char *path = fuzz_write_file("workflow.json", data, size);
    weft_err err = WEFT_OK;
    char line[512];

    if (path == NULL) {
        return 0;
    }
    memset(&diags, 0, sizeof(diags));
    err = weft_workflow_load(path, &wf, &diags);
    if (err == WEFT_OK) {
        FUZZ_CHECK(wf != NULL);
        FUZZ_CHECK(weft_workflow_name(wf) != NULL);
    } else {
        FUZZ_CHECK(wf == NULL);
        FUZZ_CHECK(err == WEFT_ENOMEM || diags.count > 0);
    }
    for (size_t i = 0; i < diags.count; i++) {
        FUZZ_CHECK(weft_diag_format(&diags.items[i], line, sizeof(line)) == line);
    }
    weft_workflow_free(wf);
    weft_diags_cleanup(&diags);
    return 0;
}
