/* tests/support/openai_server.h - a fake OpenAI chat-completions server for integration tests.
 *
 * A real HTTP/1.1 server on 127.0.0.1 (tests/support/http_server.h: ephemeral port, its own
 * thread, one keep-alive connection at a time, switching when a new one arrives) that speaks
 * the shape of the OpenAI
 * API: `POST /v1/chat/completions` with a JSON body that must hold "model" and "messages".
 * Every request is recorded (method, path, raw headers, body text and parsed JSON). When an
 * expected key is set, a request without `Authorization: Bearer <key>` gets OpenAI's 401
 * invalid_api_key error. Other requests are answered from a queue of scripted replies: a
 * chat.completion (text or tool call, with usage), an error status with an OpenAI error body and
 * an optional Retry-After, a raw body, a delay, or a dropped connection. With the queue empty,
 * the answer is 500 with an OpenAI server_error body.
 *
 * Unlike OpenAI, the 401 message echoes the presented key in full, so tests can prove that the
 * client never copies what a server sends back about the key.
 *
 * Thread-safety: every function may be called from the test thread while the server thread
 * runs; shared state is under one mutex.
 */
#ifndef WEFT_TESTS_SUPPORT_OPENAI_SERVER_H
#define WEFT_TESTS_SUPPORT_OPENAI_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct openai_server;

/* One scripted reply; every string is copied when queued. */
struct openai_reply {
    int status;                 /* 0 means 200 (a chat.completion built from the fields below) */
    const char *content;        /* assistant text for a 200; NULL sends "content": null */
    const char *tool_id;        /* with tool_name: one tool call; NULL omits the "id" member */
    const char *tool_name;      /* NULL: no tool call */
    const char *tool_arguments; /* JSON text sent as the "arguments" string; NULL means "{}" */
    int64_t prompt_tokens;      /* both < 0: no "usage" member */
    int64_t completion_tokens;
    const char *model;         /* NULL echoes the request's model */
    const char *error_message; /* non-200: error.message (NULL: a generic one) */
    const char *retry_after;   /* Retry-After header value, or NULL */
    const char *raw_body;      /* sent verbatim instead of any JSON (with status, 0 = 200) */
    const char *content_type;  /* for raw_body; NULL means application/json */
    size_t raw_len;            /* bytes of raw_body (strlen when 0) */
    unsigned delay_ms;         /* wait this long before answering */
    bool drop;                 /* close the connection instead of answering */
};

/* @return 0, or -1 when the socket or thread cannot be created. */
int openai_server_start(struct openai_server **out);
/* Stop the thread, close the sockets and free everything; NULL is a no-op. */
void openai_server_stop(struct openai_server *srv);
unsigned short openai_server_port(const struct openai_server *srv);
/* "http://127.0.0.1:<port>/v1" into buf; returns buf. */
const char *openai_server_base_url(const struct openai_server *srv, char *buf, size_t len);
/* Require `Authorization: Bearer <key>` from now on (copied); NULL accepts anything. */
void openai_server_expect_key(struct openai_server *srv, const char *key);

/* Queue a reply (copied). */
void openai_server_push(struct openai_server *srv, const struct openai_reply *reply);
void openai_server_push_text(struct openai_server *srv,
                             const char *content,
                             int64_t prompt_tokens,
                             int64_t completion_tokens);
void openai_server_push_tool_call(struct openai_server *srv,
                                  const char *call_id,
                                  const char *name,
                                  const char *arguments_json,
                                  int64_t prompt_tokens,
                                  int64_t completion_tokens);
/* An error status with an OpenAI error body; @p retry_after may be NULL. */
void openai_server_push_error(struct openai_server *srv,
                              int status,
                              const char *retry_after,
                              const char *message);
/* A text answer sent only after @p delay_ms. */
void openai_server_push_delay(struct openai_server *srv, unsigned delay_ms, const char *content);

size_t openai_server_request_count(struct openai_server *srv);
/* The parsed JSON body of request @p i, or NULL when it was not JSON (then see
 * openai_server_request_text). Borrowed: valid until openai_server_stop(). */
const json_t *openai_server_request_body(struct openai_server *srv, size_t i);
/* The raw body of request @p i, or NULL. Borrowed: valid until openai_server_stop(). */
const char *openai_server_request_text(struct openai_server *srv, size_t i);
/* The request line's path of request @p i, or NULL. */
const char *openai_server_request_path(struct openai_server *srv, size_t i);
/* Raw header block of request @p i ("Name: value\r\n" lines), or NULL. */
const char *openai_server_request_headers(struct openai_server *srv, size_t i);
/* The connection request @p i came on (1 for the first accepted), 0 when out of range. */
unsigned openai_server_request_conn(struct openai_server *srv, size_t i);
/* Value of header @p name (case-insensitive) of request @p i copied into buf, or NULL. */
const char *openai_server_request_header(
    struct openai_server *srv, size_t i, const char *name, char *buf, size_t len);

#endif
