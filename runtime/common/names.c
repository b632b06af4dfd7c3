/* runtime/common/names.c - the names of the public enums of include/weft/runtime.h: a run's
 * status and a loop's kind, as spans, metrics, the CLI and the API print them. Here rather than
 * in the engine so that every folder may name them without calling into the engine. */
#include <stddef.h>
#include <weft/runtime.h>

const char *
weft_run_status_name(weft_run_status status)
{
    static const char *const names[] = {"completed", "failed",  "budget_exhausted",
                                        "timed_out", "aborted", "stuck"};
    return (size_t)status < sizeof(names) / sizeof(names[0]) ? names[status] : "unknown";
}

const char *
weft_loop_kind_name(weft_loop_kind kind)
{
    static const char *const names[] = {"replan",          "reflection", "clarification",
                                        "circuit_breaker", "flow",       "correction"};
    return (size_t)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}
