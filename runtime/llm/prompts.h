/* runtime/llm/prompts.h - agent instructions kept in Langfuse prompt management.
 *
 * A workflow may give an agent's instructions as {"langfuse_prompt": NAME, "label": L} (or
 * "version": N) with an optional "fallback" text. The text is fetched through Langfuse's public
 * prompts API (GET {LANGFUSE_HOST}/api/public/v2/prompts/{name}?label=L, Basic auth from
 * LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY) and cached per process for a TTL
 * (WEFT_LANGFUSE_PROMPT_TTL_S, default 60 s; at most 64 prompts). When a fetch fails the last
 * cached text is used, even when stale; the fallback only when nothing was ever cached.
 * Chat prompts become their messages' contents joined by blank lines.
 *
 * The generation spans of an agent with such instructions carry langfuse.observation.prompt.name
 * and .version, which link them to the prompt in Langfuse. When the fallback text was used they
 * carry weft.prompt.name and weft.prompt.is_fallback=true instead, so no generation is linked to
 * a prompt version it did not use. Without instructions to fall back on, the step fails
 * (error.type prompt_unavailable) and says why.
 *
 * Thread-safety: weft__rt_prompt_resolve() may be called from any run thread; the cache is locked,
 * the fetch is not (two threads may fetch the same prompt once each).
 */
#ifndef WEFT_RUNTIME_PROMPTS_H
#define WEFT_RUNTIME_PROMPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

struct rt_prompt_ref {
    char *name;      /* the Langfuse prompt name */
    char *label;     /* NULL: "production" unless a version is given */
    int64_t version; /* 0: by label */
    char *fallback;  /* may be NULL */
};

struct rt_prompt {
    char *text;      /* owned */
    int64_t version; /* 0 for the fallback */
    bool is_fallback;
};

/* Resolve @p ref. @return WEFT_OK (*out filled; free with weft__rt_prompt_cleanup()), WEFT_EINVAL
 * (Langfuse not configured and no fallback), WEFT_ENOTFOUND / WEFT_EIO / WEFT_EHTTP (fetch
 * failed, nothing cached and no fallback), WEFT_ENOMEM. @p err receives a sentence. */
/* Parse a Langfuse prompt API answer (@p len bytes of @p data; NULL data reads as empty):
 * a text prompt's string or a chat prompt's message contents (joined by blank lines), and its
 * integer version. Exposed for the fuzz harness (tests/fuzz/fuzz_http_answer.c).
 * @return WEFT_OK (out->text new: weft__rt_prompt_cleanup()), WEFT_EPARSE (out->text NULL; also
 * when out of memory). */
weft_err weft__prompt_parse_answer(const char *data, size_t len, struct rt_prompt *out);

weft_err weft__rt_prompt_resolve(const struct rt_prompt_ref *ref,
                                 struct rt_prompt *out,
                                 char *err,
                                 size_t err_len);

void weft__rt_prompt_cleanup(struct rt_prompt *p);
void weft__rt_prompt_ref_cleanup(struct rt_prompt_ref *ref);

/* Forget every cached prompt (tests). */
void weft__rt_prompt_cache_clear(void);

#endif /* WEFT_RUNTIME_PROMPTS_H */
