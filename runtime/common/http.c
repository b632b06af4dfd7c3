/* runtime/common/http.c - libcurl helpers shared by the runtime's HTTP clients (see http.h). */
#include "runtime/common/http.h"

#include "base/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ok;

static void
curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

bool
weft__rt_curl_ready(void)
{
    pthread_once(&curl_once, curl_init_once);
    return curl_ok;
}

bool
weft__rt_curl_is_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

weft_err
weft__rt_curl_add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *grown = curl_slist_append(*list, line);

    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    *list = grown;
    return WEFT_OK;
}

weft_err
weft__rt_curl_add_bearer(struct curl_slist **list, const char *key)
{
    static const char prefix[] = "Authorization: Bearer ";
    size_t len = sizeof(prefix) + strlen(key);
    char *line = weft__malloc(len);
    weft_err err = WEFT_OK;

    if (line == NULL) {
        return WEFT_ENOMEM;
    }
    snprintf(line, len, "%s%s", prefix, key);
    err = weft__rt_curl_add_header(list, line);
    weft__wipe(line, len);
    weft__free(line);
    return err;
}

void
weft__rt_curl_free_headers(struct curl_slist *list)
{
    for (struct curl_slist *h = list; h != NULL; h = h->next) {
        weft__wipe(h->data, strlen(h->data));
    }
    curl_slist_free_all(list);
}
