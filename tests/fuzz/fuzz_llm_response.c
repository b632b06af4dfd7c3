/* tests/fuzz/fuzz_llm_response.c - answers of an OpenAI-compatible server
 * (runtime/llm/openai.c) and the tool-call arguments in them (runtime/tools/schema.c).
 *
 * The input is a chat-completions response body. A parsed answer must be well-formed (every
 * tool call has an id, a name and argument text); its arguments are then parsed and checked
 * against each built-in tool's schema, as the engine does before running a tool.
 */
#include "fuzz_util.h"

#include "runtime/llm/llm.h"
#include "runtime/tools/tools.h"

#include <weft/weft.h>

static void
check_arguments(const char *arguments)
{
    static const tool_type types[] = {TOOL_REQUEST_AGENT, TOOL_READ_FILE, TOOL_WRITE_FILE,
                                      TOOL_HTTP_GET, TOOL_COMMAND};
    json_t *args = json_loads(arguments, JSON_DECODE_ANY, NULL);

    for (size_t i = 0; args != NULL && i < sizeof(types) / sizeof(types[0]); i++) {
        json_t *schema = weft__tool_builtin_schema(types[i]);
        char err[256];

        err[0] = '\0';
        if (schema != NULL && !weft__tool_schema_validate(schema, args, err, sizeof(err))) {
            FUZZ_CHECK(err[0] != '\0');
        }
        json_decref(schema);
    }
    json_decref(args);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct llm_response resp;
    struct llm_error error;
    uint64_t generated = 0;
    weft_err err = WEFT_OK;

    memset(&resp, 0, sizeof(resp));
    memset(&error, 0, sizeof(error));
    err = weft__llm_openai_parse((const char *)data, size, &generated, &resp, &error);
    if (err == WEFT_OK) {
        for (size_t i = 0; i < resp.tool_call_count; i++) {
            FUZZ_CHECK(resp.tool_calls[i].id != NULL && resp.tool_calls[i].id[0] != '\0');
            FUZZ_CHECK(resp.tool_calls[i].name != NULL && resp.tool_calls[i].name[0] != '\0');
            FUZZ_CHECK(resp.tool_calls[i].arguments != NULL);
            check_arguments(resp.tool_calls[i].arguments);
        }
        FUZZ_CHECK(resp.input_tokens >= -1 && resp.output_tokens >= -1);
    } else {
        FUZZ_CHECK(err == WEFT_EPARSE || err == WEFT_ENOMEM);
        FUZZ_CHECK(err == WEFT_ENOMEM || error.message[0] != '\0');
    }
    weft__llm_response_cleanup(&resp);
    return 0;
}
