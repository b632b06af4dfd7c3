/* include/weft/weft.h - umbrella header: include this to use the whole public API.
 *
 * Documentation convention of every public function (checked by the ctest install/api_docs,
 * tests/install/check-api-docs.py): its comment carries
 * - "Ownership:" who owns what it takes and returns, in jansson's terms: a parameter is
 *   borrowed for the call, kept (borrowed until a named event), copied, or taken (the
 *   function frees it, also on failure); a returned pointer is new (freed with a named
 *   function) or borrowed (valid until a named event), or a static string. "Ownership: none"
 *   when nothing owned goes in or out;
 * - "@return" with every weft_err code it returns and when, or "Errors: none" for a function
 *   that cannot fail (it says what it gives back for NULL or out-of-range arguments).
 * A declaration with no comment of its own that directly follows another (no blank line)
 * shares that one's comment, for groups such as weft_span_set_str/int/double. */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <weft/common.h>
#include <weft/compose.h>
#include <weft/dataset.h>
#include <weft/eval.h>
#include <weft/experiment.h>
#include <weft/export.h>
#include <weft/mcp.h>
#include <weft/metrics.h>
#include <weft/runtime.h>
#include <weft/sampling.h>
#include <weft/secrets.h>
#include <weft/skills.h>
#include <weft/store.h>
#include <weft/tool.h>
#include <weft/trace.h>

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION       "0.1.0"

#endif /* WEFT_WEFT_H */
