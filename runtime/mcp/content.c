/* runtime/mcp/content.c - a tools/call result as the text a model reads (content.h). */
#include "runtime/mcp/content.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/secrets.h>

/* The content of a CallToolResult as text for the model: text items joined by newlines,
 * every other item (image, audio, resource, resource_link) as compact JSON. */
static weft_err
render_content(const json_t *result, struct weft__buf *buf)
{
    const json_t *content = json_object_get(result, "content");
    const json_t *structured = json_object_get(result, "structuredContent");
    weft_err rc = WEFT_OK;

    for (size_t i = 0; i < json_array_size(content) && rc == WEFT_OK; i++) {
        const json_t *item = json_array_get(content, i);
        const char *type = json_string_value(json_object_get(item, "type"));
        if (i > 0) {
            rc = weft__buf_append_byte(buf, '\n');
        }
        if (rc != WEFT_OK) {
            break;
        }
        if (type != NULL && strcmp(type, "text") == 0 &&
            json_is_string(json_object_get(item, "text"))) {
            const json_t *t = json_object_get(item, "text");
            rc = weft__buf_append(buf, json_string_value(t), json_string_length(t));
        } else {
            char *text = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);
            rc = text != NULL ? weft__buf_append_str(buf, text) : WEFT_ENOMEM;
            free(text);
        }
    }
    /* A result with structured content only (older servers send both) still reads as text. */
    if (rc == WEFT_OK && json_array_size(content) == 0 && structured != NULL) {
        char *text = json_dumps(structured, JSON_COMPACT | JSON_ENCODE_ANY);
        rc = text != NULL ? weft__buf_append_str(buf, text) : WEFT_ENOMEM;
        free(text);
    }
    return rc;
}

weft_err
weft__mcp_fill_text(struct weft__mcp_call_result *out, const char *text, size_t len, size_t max)
{
    char *scrubbed = NULL;
    size_t keep = 0;

    if (weft_secrets_scrub(text, len, &scrubbed) != WEFT_OK) {
        return WEFT_ENOMEM;
    }
    if (scrubbed != NULL) {
        text = scrubbed;
        len = strlen(scrubbed);
    }
    keep = weft__utf8_cut(text, len, max);
    out->is_truncated = keep < len;
    out->text = weft__strndup(text, keep);
    weft_secrets_text_free(scrubbed);
    return out->text != NULL ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__mcp_result_fill(struct weft__mcp_call_result *out, const json_t *result, size_t max)
{
    struct weft__buf buf;
    const json_t *structured = json_object_get(result, "structuredContent");
    weft_err rc = WEFT_OK;

    weft__buf_init(&buf, 0);
    rc = render_content(result, &buf);
    if (rc == WEFT_OK) {
        rc = weft__mcp_fill_text(out, buf.data != NULL ? buf.data : "", buf.len, max);
    }
    weft__buf_cleanup(&buf);
    if (rc == WEFT_OK && structured != NULL && !json_is_null(structured)) {
        out->structured = json_deep_copy(structured);
        rc = out->structured != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    if (json_is_true(json_object_get(result, "isError"))) {
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "tool_error");
    }
    return rc;
}
