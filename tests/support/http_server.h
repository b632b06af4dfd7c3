/* tests/support/http_server.h - the HTTP/1.1 server skeleton every fake server in tests/support
 * builds on (http_receiver, openai_server, and through http_receiver langfuse_server and
 * otlp_sink): they keep only their protocol logic in a request handler.
 *
 * It listens on 127.0.0.1 on an ephemeral port and runs one thread that accepts one connection
 * at a time and serves it with keep-alive until it closes, or until it is idle while another
 * connection waits (curl opens a new one after a timeout or an error). A request's body is read
 * whole, by Content-Length or Transfer-Encoding: chunked (at most 80 MiB, headers at most
 * 64 KiB); a malformed or oversized request closes the connection. For each request the handler
 * fills a response: status, content type, extra header lines, body, a delay before answering,
 * or a dropped connection.
 *
 * Thread-safety: the handler runs on the server thread, one call at a time, with no lock of the
 * server held; start and stop belong to the test thread.
 */
#ifndef WEFT_TESTS_SUPPORT_HTTP_SERVER_H
#define WEFT_TESTS_SUPPORT_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct http_server;

struct http_server_request {
    char method[16];
    char path[512];
    char *headers; /* raw header block, "Name: value\r\n" lines; the handler may take it */
    char *body;    /* NUL-terminated, de-chunked; the handler may take it (set it to NULL) */
    size_t body_len;
    unsigned conn_id; /* 1 for the first accepted connection, and so on */
};

/* What to answer. The server owns (and frees) the strings once the handler returns. */
struct http_server_response {
    int status;         /* 0 means 200 */
    char *content_type; /* malloc'ed, or NULL for no Content-Type header */
    char *headers;      /* malloc'ed extra header lines, each ending in "\r\n", or NULL */
    char *body;         /* malloc'ed, or NULL */
    size_t body_len;    /* bytes of body */
    unsigned delay_ms;  /* wait before answering (cut short by http_server_stop) */
    bool drop;          /* close the connection instead of answering */
};

/* Fill *resp (zeroed before the call) for *req. */
typedef void (*http_server_handler_fn)(void *user_data,
                                       struct http_server_request *req,
                                       struct http_server_response *resp);

/* @return 0, or -1 when the socket or thread cannot be created. */
int http_server_start(http_server_handler_fn fn, void *user_data, struct http_server **out);
/* Stop the thread (a delayed answer is dropped), close the sockets, free; NULL is a no-op. */
void http_server_stop(struct http_server *s);
unsigned short http_server_port(const struct http_server *s);

/* The value of header @p name (case-insensitive) in a raw header block, not NUL-terminated:
 * *vlen receives its length. NULL when absent. */
const char *http_find_header(const char *headers, const char *name, size_t *vlen);
/* The same, copied into @p buf (truncated to fit); NULL when absent or @p len is 0. */
const char *http_header_copy(const char *headers, const char *name, char *buf, size_t len);
/* CLOCK_REALTIME @p timeout_ms from now, for pthread_cond_timedwait() in the test servers. */
struct timespec http_deadline_in(unsigned timeout_ms);

#endif
