/* tests/support/embed_server.h - a fake OpenAI-compatible embeddings server for tests.
 *
 * A real HTTP/1.1 server on 127.0.0.1 (tests/support/http_server.h) that answers
 * `POST /v1/embeddings` with {"model", "input"} in OpenAI's wire format: {"object": "list",
 * "data": [{"object": "embedding", "index": 0, "embedding": [...]}], "model",
 * "usage": {"prompt_tokens", "total_tokens"}}. The vectors are deterministic and mean
 * something: each word of the input (lowercased letters and digits) adds 1 to the dimension
 * of its concept in a small synonym table ("compute"/"calculate", "fibonacci"/"fib",
 * "series"/"sequence", ...); other words add to one of 16 further dimensions picked by a hash,
 * and "the", "a", "of" count for nothing. So tasks with synonyms land close and unrelated
 * tasks (nearly) orthogonal. prompt_tokens is the number of words.
 *
 * Modes make it misbehave: an error status, a body that is not JSON, a vector of another
 * length. With an expected key set, a request without `Authorization: Bearer <key>` gets 401.
 *
 * Thread-safety: every function may be called from the test thread while the server runs.
 */
#ifndef WEFT_TESTS_SUPPORT_EMBED_SERVER_H
#define WEFT_TESTS_SUPPORT_EMBED_SERVER_H

#include <jansson.h>
#include <stddef.h>

#define EMBED_SERVER_DIMS 32

typedef enum embed_mode {
    EMBED_MODE_OK = 0,
    EMBED_MODE_500,       /* 500 with an OpenAI error body */
    EMBED_MODE_GARBAGE,   /* 200 with a body that is not JSON */
    EMBED_MODE_WRONG_DIMS /* 200 with a vector of EMBED_SERVER_DIMS / 2 numbers */
} embed_mode;

struct embed_server;

/* @return 0, or -1 when the socket or thread cannot be created. */
int embed_server_start(struct embed_server **out);
/* Stop and free; NULL is a no-op. */
void embed_server_stop(struct embed_server *s);
/* "http://127.0.0.1:<port>/v1" into @p buf; returns @p buf. */
const char *embed_server_base_url(const struct embed_server *s, char *buf, size_t len);
void embed_server_expect_key(struct embed_server *s, const char *key); /* copied; NULL: any */
void embed_server_set_mode(struct embed_server *s, embed_mode mode);
size_t embed_server_request_count(struct embed_server *s);
/* The parsed body of request @p i (NULL when not JSON or out of range); borrowed until stop. */
const json_t *embed_server_request_body(struct embed_server *s, size_t i);
/* The path and the Authorization header of request @p i, copied into @p buf ("" when none). */
const char *embed_server_request_path(struct embed_server *s, size_t i, char *buf, size_t len);
const char *embed_server_request_auth(struct embed_server *s, size_t i, char *buf, size_t len);
/* The vector the server gives @p text (EMBED_SERVER_DIMS floats into @p out). */
void embed_server_vector(const char *text, float *out);

#endif
