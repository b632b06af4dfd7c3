/* runtime/memory/embed.h - a client of an OpenAI-compatible embeddings endpoint (POST
 * {base_url}/embeddings), for skill memory's vector similarity (memory.c, docs/memory.md).
 *
 * One call embeds one text: {"model", "input", "encoding_format": "float"} (and "dimensions"
 * when configured) in, data[0].embedding and usage.prompt_tokens out. No retries: a lookup
 * that cannot be embedded falls back to text ranking at once, and a step never waits on a
 * flaky endpoint for longer than its timeout.
 *
 * The API key lives only in the curl header list (never in a struct field, an error or a
 * log) and is wiped when the client is freed. Errors carry a type (error.type on spans and the
 * metric's label, from a small fixed set) and a message built from the status and curl's
 * error text only, never from what the server sent.
 *
 * Thread-safety: a client may be used from several threads (a parallel flow's agents); calls
 * are serialised on its own mutex, so consecutive calls reuse one connection.
 */
#ifndef WEFT_RUNTIME_EMBED_H
#define WEFT_RUNTIME_EMBED_H

#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

#define WEFT_EMBED_DIMS_MAX 8192u /* longest vector accepted (text-embedding-3-large: 3072) */

struct rt_embedder;

struct rt_embedder_options {
    const char *base_url; /* http:// or https://; "/embeddings" is appended */
    const char *model;    /* sent as "model" */
    const char *api_key;  /* may be NULL (local servers); copied into the header list only */
    uint32_t timeout_ms;  /* per call; 0: 10 s */
    size_t dimensions;    /* 0: whatever the model returns (the first answer fixes it) */
};

/* One embedding. */
struct rt_embedding {
    float *values; /* dims floats, weft__free() */
    size_t dims;
    int64_t input_tokens; /* usage.prompt_tokens; -1 when the answer had none */
};

/* Why a call failed: type is one of connection, timeout, invalid_request (text that is not
 * UTF-8), invalid_response, dimension_mismatch, out_of_memory, or the HTTP status ("401"). */
struct rt_embed_error {
    char type[32];
    char message[256];
};

/* @return WEFT_OK, WEFT_EINVAL (no model, or a base_url that is not http(s)), WEFT_EIO (libcurl
 * could not start), WEFT_ENOMEM; *out is NULL on failure. Ownership: copies every string;
 * free the result with weft__rt_embedder_free(). */
weft_err weft__rt_embedder_new(const struct rt_embedder_options *o, struct rt_embedder **out);

/* Free @p e, wiping the key; NULL is a no-op. */
void weft__rt_embedder_free(struct rt_embedder *e);

/* Embed @p text. @return WEFT_OK, WEFT_EINVAL (NULL arguments, text that is not UTF-8),
 * WEFT_EIO (connection), WEFT_ETIMEDOUT, WEFT_EHTTP (a status
 * other than 2xx), WEFT_EPARSE (not an embeddings answer, or a vector of the wrong length),
 * WEFT_ENOMEM; @p error says which on failure. Ownership: borrows @p text; *out is new on
 * WEFT_OK (weft__rt_embedding_cleanup()), zeroed otherwise. */
weft_err weft__rt_embed(struct rt_embedder *e,
                        const char *text,
                        struct rt_embedding *out,
                        struct rt_embed_error *error);

/* Free @p v's values and zero it; NULL is a no-op. */
void weft__rt_embedding_cleanup(struct rt_embedding *v);

/* The endpoint without user, password or query ("http://host:port/v1/embeddings"), for logs;
 * the host and the port (server.address, server.port). Ownership: returns borrowed (valid until
 * the client is freed). */
const char *weft__rt_embedder_endpoint(const struct rt_embedder *e);
const char *weft__rt_embedder_host(const struct rt_embedder *e);
unsigned weft__rt_embedder_port(const struct rt_embedder *e);
const char *weft__rt_embedder_model(const struct rt_embedder *e);

/* Parse an embeddings answer (@p len bytes of @p data, not NUL-terminated): data[0].embedding,
 * every element a finite number, 1 to WEFT_EMBED_DIMS_MAX of them, not all zero; and
 * usage.prompt_tokens when present. Exposed for tests. @return WEFT_OK, WEFT_EPARSE (@p error
 * set), WEFT_ENOMEM. Ownership: *out is new on WEFT_OK, zeroed otherwise. */
weft_err weft__rt_embed_parse(const char *data,
                              size_t len,
                              struct rt_embedding *out,
                              struct rt_embed_error *error);

#endif /* WEFT_RUNTIME_EMBED_H */
