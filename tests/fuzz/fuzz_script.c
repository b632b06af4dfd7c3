/* tests/fuzz/fuzz_script.c - scripted-provider files (runtime/llm/scripted.c): the checker
 * `weft validate` uses, the loader, and the provider answering from what it loaded.
 *
 * A script the checker accepts must load and build a provider; every queue the script names
 * is then drained (each answer or error must be well-formed), and the cursors are saved and
 * restored as a multi-turn conversation does.
 */
#include "fuzz_util.h"

#include "runtime/llm/llm.h"

#include <weft/weft.h>

/* Take up to 16 answers from each agent/purpose queue of @p script. */
static void
drain(struct llm_provider *p, const json_t *script)
{
    static const llm_purpose purposes[] = {
        LLM_PURPOSE_PLAN,    LLM_PURPOSE_ROUTE,     LLM_PURPOSE_ACT,     LLM_PURPOSE_REFLECT,
        LLM_PURPOSE_CORRECT, LLM_PURPOSE_SUMMARIZE, LLM_PURPOSE_EVALUATE};
    const char *agent = NULL;
    json_t *queues = NULL;
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hello");

    json_object_foreach(json_object_get(script, "responses"), agent, queues)
    {
        for (size_t k = 0; k < sizeof(purposes) / sizeof(purposes[0]); k++) {
            struct llm_request req;

            memset(&req, 0, sizeof(req));
            req.agent = agent;
            req.purpose = purposes[k];
            req.model = "fuzz";
            req.messages = messages;
            req.temperature = -1;
            for (int n = 0; n < 16; n++) {
                struct llm_response resp;
                struct llm_error error;
                weft_err err = WEFT_OK;

                memset(&resp, 0, sizeof(resp));
                memset(&error, 0, sizeof(error));
                err = weft__llm_complete(p, &req, &resp, &error);
                if (err == WEFT_OK) {
                    for (size_t i = 0; i < resp.tool_call_count; i++) {
                        FUZZ_CHECK(resp.tool_calls[i].id != NULL);
                        FUZZ_CHECK(resp.tool_calls[i].name != NULL);
                        FUZZ_CHECK(resp.tool_calls[i].arguments != NULL);
                    }
                } else {
                    FUZZ_CHECK(resp.content == NULL && resp.tool_call_count == 0);
                    FUZZ_CHECK(memchr(error.type, '\0', sizeof(error.type)) != NULL);
                    FUZZ_CHECK(memchr(error.message, '\0', sizeof(error.message)) != NULL);
                }
                weft__llm_response_cleanup(&resp);
                if (err == WEFT_ENOTFOUND) {
                    break;
                }
            }
        }
    }
    json_decref(messages);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct llm_script_problem problem;
    struct llm_error error;
    struct llm_provider *p = NULL;
    json_t *script = NULL;
    json_t *cursors = NULL;
    const char *path = fuzz_write_file("script.json", data, size);
    weft_err checked = WEFT_OK;
    weft_err err = WEFT_OK;

    if (path == NULL) {
        return 0;
    }
    memset(&problem, 0, sizeof(problem));
    memset(&error, 0, sizeof(error));
    checked = weft__llm_script_check(path, &problem, NULL);
    FUZZ_CHECK(checked == WEFT_OK || problem.message[0] != '\0');
    err = weft__llm_script_load(path, &script, &error);
    if (err != WEFT_OK) {
        FUZZ_CHECK(script == NULL);
        FUZZ_CHECK(checked != WEFT_OK);
        return 0;
    }
    err = weft__llm_scripted_new(script, path, &p, &error);
    FUZZ_CHECK(err == WEFT_OK || err == WEFT_EPARSE || err == WEFT_ENOMEM);
    FUZZ_CHECK(err != WEFT_EPARSE || checked != WEFT_OK); /* the same rules refuse it */
    if (err == WEFT_OK) {
        FUZZ_CHECK(checked == WEFT_OK);
        drain(p, script);
        cursors = weft__llm_scripted_cursors(p);
        json_decref(weft__llm_scripted_cursors_changed(p));
        if (cursors != NULL) {
            FUZZ_CHECK(weft__llm_scripted_restore(p, cursors) == WEFT_OK);
        }
        json_decref(cursors);
    }
    weft__llm_provider_free(p);
    json_decref(script);
    return 0;
}
