/* runtime/common/secrets.h - the runtime's side of the secret registry (include/weft/secrets.h):
 * filling it from a workflow's configuration at run start, and scrubbing strings the runtime
 * owns in place at ingress (model answers, tool outputs, error texts). */
#ifndef WEFT_RUNTIME_SECRETS_H
#define WEFT_RUNTIME_SECRETS_H

#include <stddef.h>
#include <weft/secrets.h>

struct weft_workflow;

/* Register every secret the configuration names: each model's api_key_env value, the
 * OTEL_EXPORTER_OTLP_{,TRACES_,METRICS_,LOGS_}HEADERS values (raw and percent-decoded, and the
 * credential after an auth scheme), LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and the base64 of
 * "pk:sk" that Basic authentication sends, and WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION (whole and
 * after its scheme). Values shorter than WEFT_SECRET_MIN_LEN are skipped. @p wf may be NULL
 * (environment only). Never fails: a full registry is logged once by weft_secrets_add(). */
void weft__rt_secrets_load(const struct weft_workflow *wf);

/* Replace the weft__malloc'd string *@p text by its scrubbed copy when a secret occurs in it.
 * NULL *text is left alone. @return WEFT_OK, WEFT_ENOMEM (*text is then freed and NULL, so
 * the secret cannot be written by mistake). */
weft_err weft__rt_secrets_scrub_owned(char **text);

/* Scrub the NUL-terminated text in @p buf (capacity @p cap) in place, cutting the result to
 * cap - 1 bytes. When out of memory the whole text becomes "[REDACTED]". */
void weft__rt_secrets_scrub_fixed(char *buf, size_t cap);

#endif /* WEFT_RUNTIME_SECRETS_H */
