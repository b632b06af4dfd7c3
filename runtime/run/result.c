/* runtime/run/result.c - freeing a run's result (include/weft/runtime.h): the nested runs of
 * the steps (subrun.c, compose.c) free theirs without calling into the engine. */
#include "base/mem.h"
#include "runtime/replay/replay.h"

#include <weft/runtime.h>

void
weft_run_result_free(struct weft_run_result *r)
{
    if (r == NULL) {
        return;
    }
    weft__free(r->run_id);
    weft__free(r->session_id);
    weft__free(r->output);
    weft__free(r->reason);
    weft__free(r->sampling_rule);
    weft__free(r->route);
    for (size_t i = 0; i < r->step_count; i++) {
        weft__free(r->steps[i].id);
        weft__free(r->steps[i].agent);
        weft__free(r->steps[i].task);
        weft__free(r->steps[i].status);
        weft__free(r->steps[i].result);
        weft__free(r->steps[i].requested_by);
        weft__free(r->steps[i].parent);
        weft__free(r->steps[i].executor);
        weft__free(r->steps[i].depends_on);
    }
    weft__free(r->steps);
    for (size_t i = 0; i < r->decision_count; i++) {
        weft__free(r->decisions[i].layer);
        weft__free(r->decisions[i].next);
        weft__free(r->decisions[i].reason);
    }
    weft__free(r->decisions);
    for (size_t i = 0; i < r->verdict_count; i++) {
        weft__free(r->verdicts[i]);
    }
    weft__free(r->verdicts);
    weft__replay_report_free(r->replay);
    weft__free(r);
}
