/* include/weft/secrets.h - the process-wide registry of secret values that weft scrubs from
 * everything it writes (spans, the state and span databases, trace files, recordings, the
 * terminal).
 *
 * weft_run() fills it at run start from the configuration: each model's api_key_env variable,
 * the OTEL_EXPORTER_OTLP_*HEADERS values, LANGFUSE_SECRET_KEY and LANGFUSE_PUBLIC_KEY (and the
 * Basic credentials made of both) and WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION. Every model answer
 * and every tool output is scrubbed as soon as it arrives, before anything records, stores,
 * traces or prints it. An embedding program registers its own credentials (for instance those
 * a native tool uses) with weft_secrets_add().
 *
 * An occurrence of a registered value is replaced by "[REDACTED:NAME]", NAME being the name
 * it was registered under (an environment variable's name, never the value).
 *
 * Thread-safety: every function may be called from any thread, except weft_secrets_clear(),
 * which must not run while another thread adds or scrubs.
 */
#ifndef WEFT_SECRETS_H
#define WEFT_SECRETS_H

#include <stddef.h>
#include <weft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Values shorter than this are not registered: scrubbing "true" or "1234" would mangle
 * ordinary text. */
#define WEFT_SECRET_MIN_LEN 8
/** The registry holds at most this many values (encodings included). */
#define WEFT_SECRETS_MAX 64

/** Register @p value (and its base64 and JSON-escaped forms when they differ) under @p name.
 * Registering a value twice is a no-op.
 * @param name what the replacement says ("OPENAI_API_KEY"): 1 to 47 bytes of letters,
 * digits, '_', '-', '.' or ':'.
 * @return WEFT_OK, WEFT_EINVAL (NULL or bad name, value NULL, shorter than
 * WEFT_SECRET_MIN_LEN or longer than 16 KiB), WEFT_ELIMIT (the registry is full: the value is
 * dropped and a warning logged once), WEFT_ENOMEM.
 * Ownership: copies both; the copies live until weft_secrets_clear() or process exit. */
WEFT_API weft_err weft_secrets_add(const char *name, const char *value);

/** Scrub @p len bytes of @p text: every occurrence of a registered value becomes
 * "[REDACTED:NAME]" (longer values first, so a value that contains another goes whole).
 * @return WEFT_OK with *out NULL when nothing matched, WEFT_OK with *out the scrubbed text
 * (NUL-terminated), WEFT_EINVAL (NULL @p text or @p out), WEFT_ENOMEM (*out NULL: the caller
 * must not write @p text unscrubbed).
 * Ownership: *out is new; release it with weft_secrets_text_free(). */
WEFT_API weft_err weft_secrets_scrub(const char *text, size_t len, char **out);

/** Free text returned by weft_secrets_scrub(); NULL is a no-op.
 * Errors: none. Ownership: takes @p text. */
WEFT_API void weft_secrets_text_free(char *text);

/** How many values (encodings included) are registered.
 * Errors: none. Ownership: none. */
WEFT_API size_t weft_secrets_count(void);

/** Forget every registered value (their copies are wiped). For tests and for programs that
 * rotate credentials between runs; not while other threads add or scrub.
 * Errors: none. Ownership: none. */
WEFT_API void weft_secrets_clear(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_SECRETS_H */
