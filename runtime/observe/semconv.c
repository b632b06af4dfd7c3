/* runtime/observe/semconv.c - which GenAI convention version to emit, and the message shapes of the
 * conventions' JSON schemas built from the OpenAI-style messages weft sends.
 *
 * The version is read from OTEL_SEMCONV_STABILITY_OPT_IN once and cached in an atomic, so the
 * span code asks for it at the cost of a load. The message builders never fail half-way: any
 * allocation failure gives NULL and the attribute is left out, as if capture were off.
 */
#include "runtime/observe/semconv.h"

#include "runtime/llm/llm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define OPT_IN_VAR   "OTEL_SEMCONV_STABILITY_OPT_IN"
#define LATEST_VALUE "gen_ai_latest_experimental"
#define MODE_UNKNOWN (-1)

static _Atomic int cached_mode = MODE_UNKNOWN;

static bool
is_blank(char c)
{
    return c == ' ' || c == '\t';
}

weft__semconv_genai
weft__semconv_genai_parse(const char *value)
{
    const char *p = value;
    const size_t want = strlen(LATEST_VALUE);

    if (value == NULL) {
        return WEFT__SEMCONV_GENAI_V1_41;
    }
    while (*p != '\0') {
        const char *start = p;
        const char *end = NULL;

        while (*p != '\0' && *p != ',') {
            p++;
        }
        end = p;
        while (start < end && is_blank(*start)) {
            start++;
        }
        while (end > start && is_blank(end[-1])) {
            end--;
        }
        if ((size_t)(end - start) == want && memcmp(start, LATEST_VALUE, want) == 0) {
            return WEFT__SEMCONV_GENAI_LATEST;
        }
        if (*p == ',') {
            p++;
        }
    }
    return WEFT__SEMCONV_GENAI_V1_41;
}

weft__semconv_genai
weft__semconv_genai_mode(void)
{
    int mode = atomic_load_explicit(&cached_mode, memory_order_relaxed);

    if (mode == MODE_UNKNOWN) {
        /* Two first callers may both parse: they store the same answer. */
        mode = (int)weft__semconv_genai_parse(getenv(OPT_IN_VAR));
        atomic_store_explicit(&cached_mode, mode, memory_order_relaxed);
    }
    return (weft__semconv_genai)mode;
}

void
weft__semconv_reload(void)
{
    atomic_store_explicit(&cached_mode, MODE_UNKNOWN, memory_order_relaxed);
}

bool
weft__semconv_agent_has_provider(weft__semconv_genai mode)
{
    return mode == WEFT__SEMCONV_GENAI_V1_41;
}

const char *
weft__semconv_finish_reason(const char *provider_value)
{
    if (provider_value == NULL) {
        return "stop";
    }
    if (strcmp(provider_value, "tool_calls") == 0 || strcmp(provider_value, "function_call") == 0) {
        return "tool_call";
    }
    return provider_value;
}

/* Append @p value (stolen) to @p array; a NULL value or a failed append marks *failed. */
static void
append(json_t *array, json_t *value, bool *failed)
{
    if (value == NULL || json_array_append_new(array, value) != 0) {
        *failed = true;
    }
}

static json_t *
text_part(const char *text)
{
    return json_pack("{s:s, s:s}", "type", "text", "content", text);
}

/* A tool call's arguments: the parsed object when they are JSON, else the text as sent. */
static json_t *
arguments_value(const char *arguments)
{
    json_t *parsed = NULL;

    if (arguments == NULL) {
        return json_object();
    }
    parsed = json_loads(arguments, JSON_DECODE_ANY, NULL);
    return parsed != NULL ? parsed : json_string(arguments);
}

static json_t *
tool_call_part(const char *id, const char *name, const char *arguments)
{
    json_t *part = json_pack("{s:s, s:s?, s:s}", "type", "tool_call", "id", id, "name",
                             name != NULL ? name : "");
    json_t *args = arguments_value(arguments);

    if (part == NULL || args == NULL || json_object_set_new(part, "arguments", args) != 0) {
        json_decref(part);
        return NULL;
    }
    return part;
}

/* OpenAI content: a string, or an array of {type: "text", text} and other parts. */
static void
add_content_parts(json_t *parts, const json_t *content, bool *failed)
{
    size_t i = 0;
    json_t *item = NULL;

    if (json_is_string(content)) {
        if (json_string_length(content) > 0) {
            append(parts, text_part(json_string_value(content)), failed);
        }
        return;
    }
    if (!json_is_array(content)) {
        return;
    }
    json_array_foreach(content, i, item)
    {
        const char *type = json_string_value(json_object_get(item, "type"));
        const char *text = json_string_value(json_object_get(item, "text"));
        if (type != NULL && strcmp(type, "text") == 0 && text != NULL) {
            append(parts, text_part(text), failed);
        } else if (type != NULL) {
            /* The schemas' GenericPart: any object with a type. */
            append(parts, json_deep_copy(item), failed);
        }
    }
}

static void
add_openai_tool_calls(json_t *parts, const json_t *calls, bool *failed)
{
    size_t i = 0;
    json_t *call = NULL;

    json_array_foreach(calls, i, call)
    {
        const json_t *fn = json_object_get(call, "function");
        append(parts,
               tool_call_part(json_string_value(json_object_get(call, "id")),
                              json_string_value(json_object_get(fn, "name")),
                              json_string_value(json_object_get(fn, "arguments"))),
               failed);
    }
}

static json_t *
input_message(const json_t *m, bool *failed)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    const char *name = json_string_value(json_object_get(m, "name"));
    const json_t *content = json_object_get(m, "content");
    json_t *parts = json_array();
    json_t *msg = NULL;

    if (parts == NULL) {
        *failed = true;
        return NULL;
    }
    if (role != NULL && strcmp(role, "tool") == 0) {
        json_t *part = json_pack("{s:s, s:s?}", "type", "tool_call_response", "id",
                                 json_string_value(json_object_get(m, "tool_call_id")));
        json_t *response =
            json_is_null(content) || content == NULL ? json_null() : json_deep_copy(content);
        if (part == NULL || response == NULL ||
            json_object_set_new(part, "response", response) != 0) {
            json_decref(part);
            part = NULL;
        }
        append(parts, part, failed);
    } else {
        add_content_parts(parts, content, failed);
        add_openai_tool_calls(parts, json_object_get(m, "tool_calls"), failed);
    }
    msg = json_pack("{s:s, s:o}", "role", role != NULL ? role : "user", "parts", parts);
    if (msg != NULL && name != NULL && json_object_set_new(msg, "name", json_string(name)) != 0) {
        *failed = true;
    }
    if (msg == NULL) {
        *failed = true;
    }
    return msg;
}

char *
weft__semconv_input_messages(const json_t *messages)
{
    json_t *out = NULL;
    size_t i = 0;
    json_t *m = NULL;
    bool failed = false;
    char *text = NULL;

    if (!json_is_array(messages)) {
        return NULL;
    }
    out = json_array();
    if (out == NULL) {
        return NULL;
    }
    json_array_foreach(messages, i, m)
    {
        if (json_is_object(m)) {
            append(out, input_message(m, &failed), &failed);
        }
    }
    if (!failed) {
        text = json_dumps(out, JSON_COMPACT);
    }
    json_decref(out);
    return text;
}

char *
weft__semconv_output_messages(weft__semconv_genai mode,
                              const char *content,
                              const struct llm_tool_call *calls,
                              size_t call_count,
                              const char *finish_reason)
{
    json_t *parts = json_array();
    json_t *msg = NULL;
    json_t *out = NULL;
    bool failed = parts == NULL;
    char *text = NULL;

    if (!failed && content != NULL && content[0] != '\0') {
        append(parts, text_part(content), &failed);
    }
    for (size_t i = 0; !failed && i < call_count; i++) {
        append(parts, tool_call_part(calls[i].id, calls[i].name, calls[i].arguments), &failed);
    }
    if (!failed) {
        msg = json_pack("{s:s, s:O}", "role", "assistant", "parts", parts);
        failed = msg == NULL;
    }
    if (!failed && mode == WEFT__SEMCONV_GENAI_V1_41) {
        failed = json_object_set_new(msg, "finish_reason",
                                     json_string(weft__semconv_finish_reason(finish_reason))) != 0;
    }
    if (!failed) {
        out = json_pack("[O]", msg);
        text = out != NULL ? json_dumps(out, JSON_COMPACT) : NULL;
    }
    json_decref(out);
    json_decref(msg);
    json_decref(parts);
    return text;
}

char *
weft__semconv_system_instructions(const char *text)
{
    json_t *out = NULL;
    char *dumped = NULL;

    if (text == NULL || text[0] == '\0') {
        return NULL;
    }
    out = json_pack("[{s:s, s:s}]", "type", "text", "content", text);
    dumped = out != NULL ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return dumped;
}
