/* runtime/llm/llm.c - the provider vtable calls and the helpers every provider shares. */
#include "llm.h"

#include "base/mem.h"
#include "runtime/common/secrets.h"

#include <stdio.h>
#include <string.h>

static const char *const purpose_names[] = {"plan",    "route",     "act",     "reflect",
                                            "correct", "summarize", "evaluate"};

#define PURPOSE_COUNT (sizeof(purpose_names) / sizeof(purpose_names[0]))

const char *
weft__llm_purpose_name(llm_purpose purpose)
{
    if ((size_t)purpose >= PURPOSE_COUNT) {
        return "unknown";
    }
    return purpose_names[purpose];
}

bool
weft__llm_purpose_parse(const char *name, llm_purpose *out)
{
    if (name == NULL || out == NULL) {
        return false;
    }
    for (size_t i = 0; i < PURPOSE_COUNT; i++) {
        if (strcmp(name, purpose_names[i]) == 0) {
            *out = (llm_purpose)i;
            return true;
        }
    }
    return false;
}

void
weft__llm_response_cleanup(struct llm_response *response)
{
    if (response == NULL) {
        return;
    }
    weft__free(response->content);
    for (size_t i = 0; i < response->tool_call_count; i++) {
        weft__free(response->tool_calls[i].id);
        weft__free(response->tool_calls[i].name);
        weft__free(response->tool_calls[i].arguments);
    }
    weft__free(response->tool_calls);
    weft__free(response->response_model);
    weft__free(response->response_id);
    weft__free(response->finish_reason);
    memset(response, 0, sizeof(*response));
}

/* Ingress: every configured secret (secrets.h) leaves the answer here, before the engine
 * records, stores, traces or prints any of it. Every provider's answer passes through, the
 * scripted and replayed ones included. @return WEFT_OK, WEFT_ENOMEM. */
static weft_err
scrub_response(struct llm_response *r)
{
    weft_err err = WEFT_OK;

    if (weft_secrets_count() == 0) {
        return WEFT_OK;
    }
    err = weft__rt_secrets_scrub_owned(&r->content);
    for (size_t i = 0; err == WEFT_OK && i < r->tool_call_count; i++) {
        err = weft__rt_secrets_scrub_owned(&r->tool_calls[i].arguments);
        if (err == WEFT_OK) {
            err = weft__rt_secrets_scrub_owned(&r->tool_calls[i].name);
        }
        if (err == WEFT_OK) {
            err = weft__rt_secrets_scrub_owned(&r->tool_calls[i].id);
        }
    }
    if (err == WEFT_OK) {
        err = weft__rt_secrets_scrub_owned(&r->response_model);
    }
    if (err == WEFT_OK) {
        err = weft__rt_secrets_scrub_owned(&r->response_id);
    }
    if (err == WEFT_OK) {
        err = weft__rt_secrets_scrub_owned(&r->finish_reason);
    }
    return err;
}

weft_err
weft__llm_complete(struct llm_provider *provider,
                   const struct llm_request *request,
                   struct llm_response *response,
                   struct llm_error *error)
{
    weft_err err = WEFT_OK;

    if (response != NULL) {
        memset(response, 0, sizeof(*response));
        response->input_tokens = -1;
        response->output_tokens = -1;
    }
    if (error != NULL) {
        memset(error, 0, sizeof(*error));
    }
    if (provider == NULL || provider->ops == NULL || request == NULL || response == NULL ||
        error == NULL || request->agent == NULL || request->messages == NULL) {
        return WEFT_EINVAL;
    }
    err = provider->ops->complete(provider->self, request, response, error);
    if (err == WEFT_OK) {
        err = scrub_response(response);
        if (err != WEFT_OK) {
            snprintf(error->type, sizeof(error->type), "%s", "out_of_memory");
            snprintf(error->message, sizeof(error->message), "%s",
                     "could not scrub secrets from the answer");
        }
    }
    if (err != WEFT_OK) {
        weft__llm_response_cleanup(response);
        response->input_tokens = -1;
        response->output_tokens = -1;
        if (error->type[0] == '\0') {
            snprintf(error->type, sizeof(error->type), "%s", "llm_error");
        }
        if (error->message[0] == '\0') {
            snprintf(error->message, sizeof(error->message), "%s", weft_strerror(err));
        }
        weft__rt_secrets_scrub_fixed(error->message, sizeof(error->message));
    }
    return err;
}

void
weft__llm_provider_free(struct llm_provider *provider)
{
    if (provider == NULL) {
        return;
    }
    if (provider->ops != NULL && provider->ops->free != NULL) {
        provider->ops->free(provider->self);
    }
    weft__free(provider);
}
