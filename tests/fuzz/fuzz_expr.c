/* tests/fuzz/fuzz_expr.c - break-condition expressions (runtime/workflow/expr.c).
 *
 * Input: the expression, a newline, then a JSON document to evaluate it against (absent or
 * invalid: an object of typical fields). A parse error must carry a message and a position
 * inside the text; a parsed expression keeps its text and evaluates without failing.
 */
#include "fuzz_util.h"

#include "runtime/workflow/expr.h"

#include <weft/weft.h>

static const char default_doc[] =
    "{\"score\": 0.92, \"status\": \"approved\", \"needs_revision\": false, "
    "\"result\": {\"issues\": [1, \"two\", {\"length\": 3}], \"length\": null}, "
    "\"text\": \"h\\u00e9llo\", \"n\": -7, \"big\": 9007199254740993, \"e\": {}, \"a\": []}";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct expr *e = NULL;
    struct expr_error error;
    char *text = NULL;
    const uint8_t *rest = NULL;
    size_t rest_size = 0;
    json_t *root = NULL;
    bool result = false;
    weft_err err = WEFT_OK;

    if (!fuzz_split(data, size, '\n', &text, &rest, &rest_size)) {
        return 0;
    }
    memset(&error, 0, sizeof(error));
    err = weft__expr_parse(text, &e, &error);
    if (err != WEFT_OK) {
        FUZZ_CHECK(e == NULL);
        FUZZ_CHECK(err == WEFT_EPARSE || err == WEFT_ENOMEM);
        FUZZ_CHECK(err == WEFT_ENOMEM || error.message[0] != '\0');
        FUZZ_CHECK(memchr(error.message, '\0', sizeof(error.message)) != NULL);
        FUZZ_CHECK(error.position <= strlen(text) + 1);
        free(text);
        return 0;
    }
    FUZZ_CHECK(strcmp(weft__expr_text(e), text) == 0);
    root = json_loadb((const char *)rest, rest_size, JSON_DECODE_ANY, NULL);
    if (root == NULL) {
        root = json_loads(default_doc, 0, NULL);
    }
    FUZZ_CHECK(weft__expr_eval(e, root, &result) == WEFT_OK);
    weft__expr_free(e);
    json_decref(root);
    free(text);
    return 0;
}
