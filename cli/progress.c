/* cli/progress.c - the live progress of a run on stderr: one line rewritten in place on a
 * terminal, plain lines of decisions, steps and verdicts otherwise (weft run, resume, replay,
 * fork). */
#include "cli.h"

#include <stdio.h>
#include <weft/weft.h>

static const char *const event_names[] = {"start", "decide",  "step", "step-end", "llm",
                                          "tool",  "verdict", "end",  "progress"};

void
cli_on_progress(const struct weft_run_event *ev, void *user_data)
{
    struct cli_progress *p = user_data;
    char elapsed[32];
    const char *kind = (size_t)ev->kind < sizeof(event_names) / sizeof(event_names[0])
                           ? event_names[ev->kind]
                           : "event";

    if (p->is_quiet) {
        return;
    }
    cli_format_duration(ev->elapsed_ns, elapsed, sizeof(elapsed));
    if (p->is_tty) {
        /* One live line, rewritten in place. */
        fprintf(stderr, "\r\033[K[%s] iter %zu  steps %zu/%zu  %s%s%s  %-8s ", elapsed,
                ev->iteration, ev->steps_done, ev->steps_total,
                ev->step_id != NULL ? ev->step_id : "", ev->agent != NULL ? " " : "",
                ev->agent != NULL ? ev->agent : "", kind);
        cli_put_clean(stderr, ev->detail, 40);
        fprintf(stderr, "  %lld tok", (long long)(ev->input_tokens + ev->output_tokens));
        p->has_line = true;
        if (ev->kind == WEFT_EVENT_RUN_END) {
            fputc('\n', stderr);
            p->has_line = false;
        }
        fflush(stderr);
        return;
    }
    if (ev->kind == WEFT_EVENT_LLM_CALL || ev->kind == WEFT_EVENT_TOOL_CALL) {
        return; /* plain logs keep to decisions, steps and verdicts */
    }
    fprintf(stderr, "[%s] iter=%zu %s", elapsed, ev->iteration, kind);
    if (ev->step_id != NULL) {
        fprintf(stderr, " step=%s agent=%s", ev->step_id, ev->agent);
    }
    fputc(' ', stderr);
    cli_put_clean(stderr, ev->detail, 160);
    fputc('\n', stderr);
}
