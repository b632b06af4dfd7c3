/* tests/support/http_receiver.h - a real HTTP/1.1 server on 127.0.0.1 for integration tests.
 *
 * Built on tests/support/http_server.h (ephemeral port, one connection at a time with
 * keep-alive, switching to a new connection when one arrives, Content-Length and chunked
 * bodies), it gunzips bodies sent with
 * Content-Encoding: gzip, records every request, and answers from a script of responses
 * (status, extra headers, body, delay, or a dropped connection), falling back to 200 with an
 * empty protobuf body. A handler (http_receiver_set_handler) may answer instead of the fallback,
 * for servers that must look at each request (tests/support/langfuse_server.c). Thread-safe. */
#ifndef WEFT_TESTS_SUPPORT_HTTP_RECEIVER_H
#define WEFT_TESTS_SUPPORT_HTTP_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http_server.h" /* http_deadline_in() */

struct http_receiver;

struct http_response {
    int status;               /* 0 means 200 */
    const char *headers;      /* extra header lines, each ending in "\r\n"; may be NULL */
    const char *body;         /* may be NULL */
    size_t body_len;          /* bytes of body (strlen when 0 and body is set) */
    const char *content_type; /* NULL means application/x-protobuf */
    unsigned delay_ms;        /* wait before answering */
    bool drop;                /* close the connection instead of answering */
};

struct http_request {
    char method[16];
    char path[512];
    char *headers; /* raw header block, lines "Name: value\r\n" */
    char *body;    /* decoded (gunzipped) body */
    size_t body_len;
    size_t wire_len;  /* body bytes as received */
    unsigned conn_id; /* 1 for the first accepted connection, and so on */
    int answered;     /* status sent back; 0 when the connection was dropped */
};

/* Answers a request the script did not: fills *resp (zeroed before the call). Runs on the
 * receiver's thread, one call at a time, without the receiver's lock held. The strings in
 * *resp must stay valid until the handler is called again or the receiver stops; the
 * receiver copies them before it answers. */
typedef void (*http_receiver_handler_fn)(void *user_data,
                                         const struct http_request *req,
                                         struct http_response *resp);

int http_receiver_start(struct http_receiver **out);
void http_receiver_stop(struct http_receiver *r);
unsigned short http_receiver_port(const struct http_receiver *r);
/* "http://127.0.0.1:<port><path>" into buf. */
const char *
http_receiver_url(const struct http_receiver *r, const char *path, char *buf, size_t len);
/* Queue a response (copied). */
void http_receiver_push(struct http_receiver *r, const struct http_response *resp);
/* Answer every request with @p resp once the queue is empty (copied). */
void http_receiver_set_default(struct http_receiver *r, const struct http_response *resp);
/* Answer requests with @p fn once the script queue is empty (before the default response);
 * NULL removes the handler. */
void
http_receiver_set_handler(struct http_receiver *r, http_receiver_handler_fn fn, void *user_data);
size_t http_receiver_count(struct http_receiver *r);
/* Wait until at least @p n requests were recorded. */
bool http_receiver_wait(struct http_receiver *r, size_t n, unsigned timeout_ms);
/* Request @p i; valid until http_receiver_stop(). */
const struct http_request *http_receiver_request(struct http_receiver *r, size_t i);
/* Value of header @p name (case-insensitive) copied into buf, or NULL. */
const char *
http_request_header(const struct http_request *req, const char *name, char *buf, size_t len);

#endif
