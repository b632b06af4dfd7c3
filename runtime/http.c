/* runtime/http.c - libcurl helpers shared by the runtime's HTTP clients (see http.h). */
#include "http.h"

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
