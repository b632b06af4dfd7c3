/* tests/fuzz/fuzz_webhook_langfuse.c - answers of webhook receivers (runtime/observe/webhook.c) and
 * of Langfuse (runtime/llm/prompts.c prompt API; exporters/langfuse.c reads only the status and
 * the headers of its OTLP answers).
 *
 * The first byte chooses what the rest is: a response header line as libcurl hands it to the
 * webhook and Langfuse transports (Retry-After, Content-Type), or the body of a Langfuse
 * prompt answer. A prompt is accepted only with its text and an integer version.
 */
#include "fuzz_util.h"

#include "base/http.h"
#include "runtime/llm/prompts.h"

#include <weft/weft.h>

#define RETRY_AFTER_MAX_MS (1000000000ull * 1000u)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rt_prompt prompt;
    char value[64];
    char type[16];

    if (size == 0) {
        return 0;
    }
    if (data[0] % 2 == 0) {
        /* Short buffers, as the transports use: a long value is cut, never overrun. */
        if (weft__http_header_value((const char *)data + 1, size - 1, "Retry-After", value,
                                    sizeof(value))) {
            FUZZ_CHECK(strlen(value) < sizeof(value));
            FUZZ_CHECK(weft__http_retry_after_ms(value) <= RETRY_AFTER_MAX_MS);
        }
        if (weft__http_header_value((const char *)data + 1, size - 1, "Content-Type", type,
                                    sizeof(type))) {
            FUZZ_CHECK(strlen(type) < sizeof(type));
        }
        return 0;
    }
    memset(&prompt, 0, sizeof(prompt));
    if (weft__prompt_parse_answer((const char *)data + 1, size - 1, &prompt) == WEFT_OK) {
        FUZZ_CHECK(prompt.text != NULL);
        FUZZ_CHECK(!prompt.is_fallback);
    } else {
        FUZZ_CHECK(prompt.text == NULL);
    }
    weft__rt_prompt_cleanup(&prompt);
    return 0;
}
