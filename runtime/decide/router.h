/* runtime/decide/router.h - three-layer routing of conversational turns (router.c).
 *
 * The router is a pure decision function over its inputs: the workflow's router section, the
 * user's message and the session history. Its only way out is the run services' llm_call (the
 * LLM layer), so a test drives it with a services table of its own and scripted answers.
 */
#ifndef WEFT_RUNTIME_ROUTER_H
#define WEFT_RUNTIME_ROUTER_H

#include "runtime/run/run.h"

/* One routing decision. */
struct rt_route_decision {
    size_t route;   /* index into the router's routes */
    rt_layer layer; /* counter_limit, pattern, llm or fallback */
    char reason[1024];
};

/* Choose the route for this turn. @p input (NULL: "") and @p history (NULL: none; an array of
 * {role, content, route} messages) are borrowed. @p instructions: the router's instructions as
 * resolved by the caller (a managed prompt), NULL for the router's own text or the default. The LLM
 * layer calls svc->llm_call (and no other service) under @p decision_span, on which the
 * clarification count is recorded. Never fails: a failed call or an unusable answer falls back to
 * the default route. */
void weft__rt_router_decide(const struct run_services *svc,
                            const struct wf_router *router,
                            const char *instructions,
                            const char *input,
                            const json_t *history,
                            struct weft_span *decision_span,
                            struct rt_route_decision *out);

#endif /* WEFT_RUNTIME_ROUTER_H */
