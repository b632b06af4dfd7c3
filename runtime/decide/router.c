/* runtime/decide/router.c - three-layer routing for conversational workflows.
 *
 * Layer 1 (counter_limit): after max_clarifications clarifications in a row, force the
 * default route; the count resets because the forced route is not a clarification.
 * Layer 2 (pattern): the previous assistant turn asked for clarification and the user's reply
 * is not vague (matches none of vague_patterns): it is an answer, so take the default route
 * without an LLM call.
 * Layer 3 (llm): ask the router's model at low temperature for {"route", "reason"}; a failed
 * call or an unknown route falls back to the default route (layer fallback).
 *
 * The counters are derived from the session's stored messages, so they survive between
 * `weft run --session S` invocations without extra state.
 */
#define _GNU_SOURCE /* strcasestr, realpath */

#include "runtime/decide/router.h"
#include "runtime/common/attr_keys.h"

#include "base/buf.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Clarifications asked in a row at the end of the history. */
static unsigned
trailing_clarifications(const struct wf_router *r, const json_t *history)
{
    const char *clar =
        r->clarification_route != WF_NONE ? r->routes[r->clarification_route].name : NULL;
    unsigned n = 0;

    if (clar == NULL || history == NULL) {
        return 0;
    }
    for (size_t i = json_array_size(history); i > 0; i--) {
        const json_t *m = json_array_get(history, i - 1);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *route = json_string_value(json_object_get(m, "route"));
        if (role == NULL || strcmp(role, "assistant") != 0) {
            continue;
        }
        if (route == NULL || strcmp(route, clar) != 0) {
            break;
        }
        n++;
    }
    return n;
}

static bool
is_vague(const struct wf_router *r, const char *input)
{
    for (size_t i = 0; i < r->vague_pattern_count; i++) {
        if (strcasestr(input, r->vague_patterns[i]) != NULL) {
            return true;
        }
    }
    return false;
}

static size_t
find_route(const struct wf_router *r, const char *name)
{
    for (size_t i = 0; i < r->route_count; i++) {
        if (strcmp(r->routes[i].name, name) == 0) {
            return i;
        }
    }
    return WF_NONE;
}

/* What the router's model is shown: its instructions and the routes, the session's earlier
 * messages, then the user's message. */
static json_t *
route_messages(const struct wf_router *r,
               const char *instructions,
               const char *input,
               const json_t *history)
{
    struct weft__buf sys;
    json_t *msgs = json_array();

    weft__buf_init(&sys, 0);
    weft__buf_printf(&sys, "%s\nRoutes:",
                     instructions != NULL      ? instructions
                     : r->instructions != NULL ? r->instructions
                                               : "Route the user's message.");
    for (size_t i = 0; i < r->route_count; i++) {
        weft__buf_printf(&sys, " %s", r->routes[i].name);
    }
    weft__buf_printf(&sys, "\nAnswer as JSON: {\"route\": ..., \"reason\": ...}");
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content",
                                          sys.data != NULL ? sys.data : ""));
    weft__buf_cleanup(&sys);
    for (size_t i = 0; history != NULL && i < json_array_size(history); i++) {
        const json_t *m = json_array_get(history, i);
        json_array_append_new(msgs, json_pack("{s:O, s:O}", "role", json_object_get(m, "role"),
                                              "content", json_object_get(m, "content")));
    }
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", input));
    return msgs;
}

void
weft__rt_router_decide(const struct run_services *svc,
                       const struct wf_router *r,
                       const char *instructions,
                       const char *input_or_null,
                       const json_t *history,
                       struct weft_span *decision_span,
                       struct rt_route_decision *out)
{
    const char *input = input_or_null != NULL ? input_or_null : "";
    unsigned clarifications = trailing_clarifications(r, history);
    size_t *route = &out->route;
    rt_layer *layer = &out->layer;
    char *reason = out->reason;
    size_t reason_len = sizeof(out->reason);
    struct run_llm_call call;
    struct llm_response resp;
    struct llm_error lerr;
    json_t *msgs = NULL;
    json_t *answer = NULL;
    const char *chosen = NULL;

    weft__rk_set_int(decision_span, WEFT__RK_ROUTER_CLARIFICATIONS, clarifications);
    if (r->clarification_route != WF_NONE && clarifications >= r->max_clarifications) {
        *route = r->default_route;
        *layer = RT_LAYER_COUNTER_LIMIT;
        snprintf(reason, reason_len, "%u clarifications in a row (max %u): forcing %s",
                 clarifications, r->max_clarifications, r->routes[r->default_route].name);
        return;
    }
    if (clarifications > 0 && !is_vague(r, input)) {
        *route = r->default_route;
        *layer = RT_LAYER_PATTERN;
        snprintf(reason, reason_len, "the user answered a clarification: %s without an LLM call",
                 r->routes[r->default_route].name);
        return;
    }
    msgs = route_messages(r, instructions, input, history);
    memset(&call, 0, sizeof(call));
    call.parent = decision_span;
    call.agent = "router";
    call.purpose = LLM_PURPOSE_ROUTE;
    call.model = r->model;
    call.messages = msgs;
    call.json_mode = true;
    call.temperature = r->temperature;
    if (svc->llm_call(svc->ctx, &call, &resp, &lerr) != WEFT_OK) {
        *route = r->default_route;
        *layer = RT_LAYER_FALLBACK;
        snprintf(reason, reason_len, "router LLM failed (%s): falling back to %s", lerr.type,
                 r->routes[r->default_route].name);
        json_decref(msgs);
        return;
    }
    json_decref(msgs);
    answer = json_loads(resp.content != NULL ? resp.content : "", 0, NULL);
    chosen = json_string_value(json_object_get(answer, "route"));
    if (chosen == NULL || find_route(r, chosen) == WF_NONE) {
        *route = r->default_route;
        *layer = RT_LAYER_FALLBACK;
        snprintf(reason, reason_len, "router LLM gave no known route: falling back to %s",
                 r->routes[r->default_route].name);
    } else {
        const char *why = json_string_value(json_object_get(answer, "reason"));
        *route = find_route(r, chosen);
        *layer = RT_LAYER_LLM;
        snprintf(reason, reason_len, "%.300s", why != NULL ? why : chosen);
    }
    json_decref(answer);
    weft__llm_response_cleanup(&resp);
}
