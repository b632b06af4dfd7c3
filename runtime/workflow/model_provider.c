/* runtime/workflow/model_provider.c - the LLM provider a workflow's model entry describes: a
 * scripted one over its script, or an OpenAI-compatible client with the key read from the
 * variable the entry names (never from the file). Used by the engine for a run's models and by
 * experiments for an LLM judge's model (docs/experiments.md).
 */
#include "runtime/workflow/workflow.h"

#include "runtime/llm/llm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

weft_err
weft__wf_model_provider(const struct wf_model *m,
                        struct llm_provider **out,
                        char *error,
                        size_t error_len)
{
    struct llm_openai_options o;
    struct llm_error lerr;
    const char *key = NULL;
    json_t *script = NULL;
    weft_err err = WEFT_OK;

    *out = NULL;
    if (m->provider == WF_PROVIDER_SCRIPTED) {
        memset(&lerr, 0, sizeof(lerr));
        if (m->script_doc != NULL) {
            script = json_incref(m->script_doc); /* read and checked by the loader */
        } else {
            err = weft__llm_script_load(m->script, &script, &lerr);
        }
        if (err == WEFT_OK) {
            err = weft__llm_scripted_new(script, m->script, out, &lerr);
        }
        json_decref(script);
        if (err != WEFT_OK) {
            snprintf(error, error_len, "models.%s: %s", m->name, lerr.message);
        }
        return err;
    }
    key = m->api_key_env != NULL ? getenv(m->api_key_env) : NULL;
    if (m->api_key_env != NULL && (key == NULL || key[0] == '\0')) {
        snprintf(error, error_len, "models.%s: environment variable %s is not set", m->name,
                 m->api_key_env);
        return WEFT_EINVAL;
    }
    memset(&o, 0, sizeof(o));
    o.base_url = m->base_url;
    o.api_key = key;
    o.max_retries = m->max_retries;
    err = weft__llm_openai_new(&o, out);
    if (err != WEFT_OK) {
        snprintf(error, error_len, "models.%s: %s", m->name, weft_strerror(err));
    }
    return err;
}
