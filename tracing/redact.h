/* tracing/redact.h - weft's built-in redaction (the attribute code's secret rules, see
 * weft_redact_builtin() in include/weft/trace.h) applied to free text written to files. */
#ifndef WEFT_TRACING_REDACT_H
#define WEFT_TRACING_REDACT_H

/* @p text with weft's built-in redaction applied to every credential-looking part ("sk-..."
 * keys, Bearer/Basic credentials, AWS key ids), for text written to files. Never longer than
 * needed; NULL only when out of memory. Ownership: borrows @p text; returns new (weft__free). */
char *weft__redact_text(const char *text);

#endif /* WEFT_TRACING_REDACT_H */
