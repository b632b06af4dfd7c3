/* include/weft/weft.h - umbrella header: include this to use the whole public API. */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <weft/common.h>
#include <weft/export.h>
#include <weft/metrics.h>
#include <weft/runtime.h>
#include <weft/secrets.h>
#include <weft/store.h>
#include <weft/tool.h>
#include <weft/trace.h>

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION       "0.1.0"

#endif /* WEFT_WEFT_H */
