/* runtime/common/http.h - libcurl helpers shared by the runtime's HTTP clients (the OpenAI provider
 * and the webhook sender). The OTLP transport in exporters/ keeps its own copy of the retry list:
 * exporters do not depend on the runtime, and tracing/ stays free of libcurl. */
#ifndef WEFT_RUNTIME_HTTP_H
#define WEFT_RUNTIME_HTTP_H

#include <curl/curl.h>
#include <stdbool.h>
#include <weft/common.h>

/* libcurl's global initialisation, run once for the process by whichever HTTP client of the
 * runtime comes first (curl_global_init() must not race with itself).
 * @return true when libcurl is ready; false when its initialisation failed. */
bool weft__rt_curl_ready(void);

/* Transport failures worth another attempt: the server may be restarting, overloaded or not
 * reachable yet (resolve, connect, timeout, send or receive, empty answer, TLS handshake). */
bool weft__rt_curl_is_retryable(CURLcode rc);

/* Append header line @p line ("Name: value", copied by libcurl) to @p list.
 * @return WEFT_OK, WEFT_ENOMEM (the list is unchanged). */
weft_err weft__rt_curl_add_header(struct curl_slist **list, const char *line);

/* Append "Authorization: Bearer <key>" to @p list. The line is built in an exactly sized
 * buffer (no realloc can leave a stray copy) and wiped once libcurl has its own copy.
 * @return WEFT_OK, WEFT_ENOMEM (the list is unchanged). */
weft_err weft__rt_curl_add_bearer(struct curl_slist **list, const char *key);

/* Wipe every line of @p list (API keys, tokens) and free it. NULL is a no-op. */
void weft__rt_curl_free_headers(struct curl_slist *list);

#endif /* WEFT_RUNTIME_HTTP_H */
