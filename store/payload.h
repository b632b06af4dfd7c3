/* store/payload.h - content-addressed payloads: large text (prompts, answers, tool arguments
 * and results) stored once per content hash, compressed, by the span stores (store/) and the
 * run state's records (runtime/state_*.c). docs/payloads.md tells the story.
 *
 * A text of at least WEFT__PAYLOAD_MIN bytes is cut into content-defined chunks (a gear
 * rolling hash picks the cut points, so two texts that share a prefix or a passage share the
 * chunks that lie inside it: a conversation that grows by one message re-stores about one
 * chunk, not the whole history). Records, keyed by the lowercase hex SHA-256 of what they
 * stand for:
 *   WEFT__PAYLOAD_TEXT    one chunk, or a whole text that is one chunk: data is the raw
 *                         DEFLATE (RFC 1951) of the text, raw_len its length in bytes.
 *   WEFT__PAYLOAD_CHUNKS  a text of several chunks: data is the chunks' 32-byte binary SHA-256s
 *                         in order (uncompressed: hashes do not compress), raw_len the text's
 *                         length.
 * A text's reference is the SHA-256 of the whole text whatever its record's kind, so the same
 * text always has the same reference, in every process and store. Storage is the caller's
 * (a table of hash, kind, raw_len, data in each backend); this module only cuts, hashes,
 * compresses and puts back together, and checks the result against its hash on the way out.
 *
 * Thread-safety: every function is reentrant; nothing is shared.
 */
#ifndef WEFT_STORE_PAYLOAD_H
#define WEFT_STORE_PAYLOAD_H

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <weft/common.h>

/* Texts shorter than this stay where they are (a reference and its row would cost more). */
#define WEFT__PAYLOAD_MIN      512
#define WEFT__PAYLOAD_HEX_LEN  64 /* a reference: lowercase hex SHA-256, without a NUL */
#define WEFT__PAYLOAD_HASH_LEN 32 /* binary SHA-256, as in a CHUNKS record */
/* The longest text a reference may stand for (as the span store's JSON columns). */
#define WEFT__PAYLOAD_MAX (64u << 20)

typedef enum { WEFT__PAYLOAD_TEXT = 0, WEFT__PAYLOAD_CHUNKS = 1 } weft__payload_kind;

/* One stored record. Every pointer is borrowed for the call it is passed to. */
struct weft__payload_record {
    char hash[WEFT__PAYLOAD_HEX_LEN + 1];
    weft__payload_kind kind;
    size_t raw_len; /* bytes of the text the record stands for */
    const unsigned char *data;
    size_t len;
};

/* Where records go when a text is stored. has(): is a record with this hash stored already?
 * (may be NULL: every record is put; a false "no" costs a compression and a put, never
 * correctness). put(): store one record; a store that has it already ignores it (INSERT OR
 * IGNORE, ON CONFLICT DO NOTHING). A non-WEFT_OK return from put() stops weft__payload_put(). */
struct weft__payload_sink {
    bool (*has)(void *user, const char *hash);
    weft_err (*put)(void *user, const struct weft__payload_record *rec);
    void *user;
};

/* Where records come from when a text is read back. get() looks up @p count hashes (in one
 * query where the backend can) and calls @p each once for every record it finds, in any order;
 * a hash it does not find is simply not reported. @return WEFT_OK (also when some were not
 * found), WEFT_EIO (the database failed), WEFT_ENOMEM, or what @p each returned. */
typedef weft_err (*weft__payload_each_fn)(const struct weft__payload_record *rec, void *each_user);
struct weft__payload_source {
    weft_err (*get)(void *user,
                    const char *const *hashes,
                    size_t count,
                    weft__payload_each_fn each,
                    void *each_user);
    void *user;
};

/* Are texts stored as payloads? Yes unless WEFT_PAYLOADS is false ("0", "false", "no",
 * "off"): inline text is how stores were written before, kept to measure the difference and
 * as a way back. A store reads references either way. Read at each call (stores open rarely). */
bool weft__payload_enabled(void);

/* The SHA-256 of @p len bytes at @p data as lowercase hex into @p hex (NUL-terminated). */
void weft__payload_hash(const void *data, size_t len, char hex[WEFT__PAYLOAD_HEX_LEN + 1]);

/* Is @p s a well-formed reference (64 lowercase hex digits, NUL-terminated)? */
bool weft__payload_is_ref(const char *s);

/* Store @p text (@p len bytes, WEFT__PAYLOAD_MIN..WEFT__PAYLOAD_MAX) through @p sink: its
 * chunks first, then, for a text of several chunks, the record that lists them, so a reader
 * never finds a list whose chunks are missing. @p ref receives the text's reference.
 * @return WEFT_OK, WEFT_EINVAL (a length out of range), WEFT_ENOMEM, or put()'s error; on
 * error some chunks may have been put (harmless: unreferenced records are collected).
 * Ownership: borrows @p text for the call. */
weft_err weft__payload_put(const char *text,
                           size_t len,
                           const struct weft__payload_sink *sink,
                           char ref[WEFT__PAYLOAD_HEX_LEN + 1]);

/* Append the text of reference @p ref, read through @p src, to @p out (NUL-terminated).
 * @return WEFT_OK; WEFT_ENOTFOUND (a record is missing); WEFT_EIO (a record is damaged: it
 * does not inflate to its length, or the text does not hash to @p ref; or get() failed);
 * WEFT_EINVAL (@p ref is not a reference); WEFT_ENOMEM; WEFT_ELIMIT (@p out's cap). @p out
 * is unchanged on error. */
weft_err
weft__payload_get(const char *ref, const struct weft__payload_source *src, struct weft__buf *out);

/* The hashes of the chunks a CHUNKS record @p rec lists, as hex, each through @p fn (which
 * returns false to stop): how garbage collection follows a text to its chunks. */
void weft__payload_chunks_each(const struct weft__payload_record *rec,
                               bool (*fn)(const char *hash, void *user),
                               void *user);

/* This thread's libdeflate compressor for @p level (0..12; below 0: 6), built on first use and
 * freed when the thread exits; shared with the OTLP exporters' gzip. NULL when out of memory.
 * When the thread-exit destructor cannot be registered, *owned is true and the caller frees it
 * with libdeflate_free_compressor(). */
struct libdeflate_compressor;
struct libdeflate_compressor *weft__deflate_compressor(int level, bool *owned);

#endif /* WEFT_STORE_PAYLOAD_H */
