/* tracing/metrics.c - the metrics SDK (include/weft/metrics.h).
 *
 * Layout: an instrument owns an open-addressing table of atomic series pointers sized to
 * twice max_series, and an append-only list of the same series in creation order (allocated
 * at full size up front, so collectors read it without locks while recorders append). A
 * series is never freed before the meter, so a pointer found in the table stays valid.
 *
 * Record path: sort the attributes (a handful, on the stack), serialise them into a stack key,
 * hash it (FNV-1a), probe the table, and update the series with atomics: sums and gauges as
 * doubles through compare-and-swap on their bits, histogram buckets and counts with
 * fetch-add. Only a new attribute set takes the instrument's mutex. Exemplars use a try-lock
 * per series: a contended exemplar update is skipped, never waited for.
 *
 * Why hand-written and not a library: the record path must cost tens of nanoseconds and
 * never block; a general hash map with a lock would do neither.
 */
#include "base/mem.h"
#include "base/time.h"
#include "exporter.h"
#include "sdk.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/metrics.h>

#define MAX_INSTRUMENTS    1024
#define DEFAULT_MAX_SERIES 2000
#define MAX_ATTRS          32
#define MAX_KEY_BYTES      2048
#define MAX_BOUNDS         256

static const double default_bounds[] = {0,   5,   10,   25,   50,   75,   100,  250,
                                        500, 750, 1000, 2500, 5000, 7500, 10000};

struct series {
    uint64_t hash;
    char *key;
    size_t key_len;
    struct weft_attr *attrs; /* sorted, owned */
    size_t attr_count;
    _Atomic uint64_t value_bits; /* double */
    _Atomic uint64_t count;
    _Atomic uint64_t sum_bits;
    _Atomic uint64_t min_bits;
    _Atomic uint64_t max_bits;
    _Atomic uint64_t *buckets;
    struct weft_exemplar *exemplars;
    pthread_mutex_t exemplar_lock;
};

struct weft_instrument {
    struct weft_meter *meter;
    weft_instrument_kind kind;
    char *name;
    char *unit;
    char *description;
    double *bounds;
    size_t bound_count;
    pthread_mutex_t lock; /* creating series */
    _Atomic(struct series *) *slots;
    size_t mask;
    struct series **list;
    _Atomic size_t series_count;
    struct series *overflow;
    _Atomic uint64_t dropped;
    _Atomic uint64_t overflowed;
    weft_gauge_fn callback;
    void *callback_data;
};

struct weft_meter {
    size_t max_series;
    uint64_t start_ns;
    pthread_mutex_t lock; /* creating instruments; collecting */
    struct weft_instrument *instruments[MAX_INSTRUMENTS];
    _Atomic size_t instrument_count;
    struct weft_attr *resource;
    size_t resource_count;
};

/* ------------------------------------------------------------------------------------------ */
/* Doubles in atomics                                                                          */

static uint64_t
bits_of(double d)
{
    uint64_t u = 0;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static double
double_of(uint64_t u)
{
    double d = 0;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static void
atomic_add_double(_Atomic uint64_t *slot, double delta)
{
    uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(slot, &old, bits_of(double_of(old) + delta),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

static void
atomic_min_double(_Atomic uint64_t *slot, double v)
{
    uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);
    while (v < double_of(old) &&
           !atomic_compare_exchange_weak_explicit(slot, &old, bits_of(v), memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

static void
atomic_max_double(_Atomic uint64_t *slot, double v)
{
    uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);
    while (v > double_of(old) &&
           !atomic_compare_exchange_weak_explicit(slot, &old, bits_of(v), memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Meter and instruments                                                                       */

weft_err
weft_meter_new(const struct weft_meter_options *options, struct weft_meter **out)
{
    static const struct weft_meter_options defaults;
    struct weft_meter *m = NULL;
    const char *service = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (options == NULL) {
        options = &defaults;
    }
    m = weft__calloc(1, sizeof(*m));
    if (m == NULL) {
        return WEFT_ENOMEM;
    }
    m->max_series = options->max_series != 0 ? options->max_series : DEFAULT_MAX_SERIES;
    if (m->max_series < 2) {
        m->max_series = 2;
    }
    m->start_ns = weft__now_ns();
    pthread_mutex_init(&m->lock, NULL);
    service = options->service_name != NULL ? options->service_name : "weft";
    m->resource = weft__calloc(options->resource_attr_count + 1, sizeof(*m->resource));
    if (m->resource == NULL) {
        weft_meter_free(m);
        return WEFT_ENOMEM;
    }
    m->resource[0].key = weft__strdup("service.name");
    m->resource[0].value.type = WEFT_VALUE_STRING;
    m->resource[0].value.u.str = weft__strdup(service);
    m->resource[0].value.len = strlen(service);
    m->resource_count = 1;
    if (m->resource[0].key == NULL || m->resource[0].value.u.str == NULL) {
        weft_meter_free(m);
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < options->resource_attr_count; i++) {
        const struct weft_attr *a = &options->resource_attrs[i];
        struct weft_attr *r = &m->resource[m->resource_count];
        if (a->key == NULL || a->value.type != WEFT_VALUE_STRING || a->value.u.str == NULL ||
            strcmp(a->key, "service.name") == 0) {
            continue;
        }
        r->key = weft__strdup(a->key);
        r->value.type = WEFT_VALUE_STRING;
        r->value.u.str = weft__strndup(a->value.u.str, a->value.len);
        r->value.len = a->value.len;
        m->resource_count++;
        if (r->key == NULL || r->value.u.str == NULL) {
            weft_meter_free(m);
            return WEFT_ENOMEM;
        }
    }
    *out = m;
    return WEFT_OK;
}

static void
free_attrs(struct weft_attr *attrs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        weft__free((char *)attrs[i].key);
        if (attrs[i].value.type == WEFT_VALUE_STRING) {
            weft__free((char *)attrs[i].value.u.str);
        }
    }
    weft__free(attrs);
}

static void
free_series(struct series *s)
{
    if (s == NULL) {
        return;
    }
    weft__free(s->key);
    free_attrs(s->attrs, s->attr_count);
    weft__free((void *)s->buckets);
    weft__free(s->exemplars);
    pthread_mutex_destroy(&s->exemplar_lock);
    weft__free(s);
}

static void
free_instrument(struct weft_instrument *in)
{
    size_t n = 0;

    if (in == NULL) {
        return;
    }
    n = atomic_load(&in->series_count);
    for (size_t i = 0; in->list != NULL && i < n; i++) {
        free_series(in->list[i]);
    }
    free_series(in->overflow);
    weft__free(in->list);
    weft__free((void *)in->slots);
    weft__free(in->name);
    weft__free(in->unit);
    weft__free(in->description);
    weft__free(in->bounds);
    pthread_mutex_destroy(&in->lock);
    weft__free(in);
}

void
weft_meter_free(struct weft_meter *meter)
{
    if (meter == NULL) {
        return;
    }
    for (size_t i = 0; i < atomic_load(&meter->instrument_count); i++) {
        free_instrument(meter->instruments[i]);
    }
    free_attrs(meter->resource, meter->resource_count);
    pthread_mutex_destroy(&meter->lock);
    weft__free(meter);
}

const struct weft_attr *
weft_meter_resource(const struct weft_meter *meter, size_t *count)
{
    if (meter == NULL || count == NULL) {
        return NULL;
    }
    *count = meter->resource_count;
    return meter->resource;
}

static bool
is_valid_name(const char *name)
{
    size_t len = name != NULL ? strlen(name) : 0;

    if (len == 0 || len > 255 ||
        !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z'))) {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-' || c == '/')) {
            return false;
        }
    }
    return true;
}

static bool
same_shape(const struct weft_instrument *in,
           weft_instrument_kind kind,
           const char *unit,
           const double *bounds,
           size_t bound_count)
{
    if (in->kind != kind || strcmp(in->unit, unit != NULL ? unit : "") != 0) {
        return false;
    }
    if (kind != WEFT_INSTRUMENT_HISTOGRAM || bounds == NULL) {
        return true;
    }
    return bound_count == in->bound_count &&
           memcmp(bounds, in->bounds, bound_count * sizeof(*bounds)) == 0;
}

weft_err
weft_meter_instrument(struct weft_meter *meter,
                      weft_instrument_kind kind,
                      const char *name,
                      const char *unit,
                      const char *description,
                      const double *bounds,
                      size_t bound_count,
                      struct weft_instrument **out)
{
    struct weft_instrument *in = NULL;
    size_t slots = 4;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (meter == NULL || out == NULL || !is_valid_name(name) || kind > WEFT_INSTRUMENT_HISTOGRAM ||
        bound_count > MAX_BOUNDS || (bounds == NULL && bound_count > 0)) {
        return WEFT_EINVAL;
    }
    for (size_t i = 1; bounds != NULL && i < bound_count; i++) {
        if (!(bounds[i] > bounds[i - 1]) || !isfinite(bounds[i])) {
            return WEFT_EINVAL;
        }
    }
    pthread_mutex_lock(&meter->lock);
    n = atomic_load(&meter->instrument_count);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(meter->instruments[i]->name, name) == 0) {
            in = meter->instruments[i];
            err = same_shape(in, kind, unit, bounds, bound_count) ? WEFT_OK : WEFT_EINVAL;
            *out = err == WEFT_OK ? in : NULL;
            pthread_mutex_unlock(&meter->lock);
            return err;
        }
    }
    if (n >= MAX_INSTRUMENTS) {
        pthread_mutex_unlock(&meter->lock);
        return WEFT_ELIMIT;
    }
    while (slots < meter->max_series * 2) {
        slots *= 2;
    }
    in = weft__calloc(1, sizeof(*in));
    if (in == NULL) {
        pthread_mutex_unlock(&meter->lock);
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&in->lock, NULL);
    in->meter = meter;
    in->kind = kind;
    in->name = weft__strdup(name);
    in->unit = weft__strdup(unit != NULL ? unit : "");
    in->description = weft__strdup(description != NULL ? description : "");
    in->slots = weft__calloc(slots, sizeof(*in->slots));
    in->mask = slots - 1;
    in->list = weft__calloc(meter->max_series, sizeof(*in->list));
    if (kind == WEFT_INSTRUMENT_HISTOGRAM) {
        const double *b = bounds != NULL ? bounds : default_bounds;
        in->bound_count =
            bounds != NULL ? bound_count : sizeof(default_bounds) / sizeof(default_bounds[0]);
        in->bounds = weft__calloc(in->bound_count + 1, sizeof(*in->bounds));
        if (in->bounds != NULL) {
            memcpy(in->bounds, b, in->bound_count * sizeof(*b));
        }
    }
    if (in->name == NULL || in->unit == NULL || in->description == NULL || in->slots == NULL ||
        in->list == NULL || (kind == WEFT_INSTRUMENT_HISTOGRAM && in->bounds == NULL)) {
        free_instrument(in);
        pthread_mutex_unlock(&meter->lock);
        return WEFT_ENOMEM;
    }
    meter->instruments[n] = in;
    atomic_store(&meter->instrument_count, n + 1);
    pthread_mutex_unlock(&meter->lock);
    *out = in;
    return WEFT_OK;
}

weft_err
weft_gauge_set_callback(struct weft_instrument *gauge, weft_gauge_fn fn, void *user_data)
{
    if (gauge == NULL || gauge->kind != WEFT_INSTRUMENT_GAUGE) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&gauge->meter->lock);
    gauge->callback = fn;
    gauge->callback_data = user_data;
    pthread_mutex_unlock(&gauge->meter->lock);
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Series lookup                                                                               */

static bool
put(char *key, size_t cap, size_t *len, const void *data, size_t n)
{
    if (n > cap - *len) {
        return false;
    }
    memcpy(key + *len, data, n);
    *len += n;
    return true;
}

/* Serialise the sorted attributes into @p key. @return the length, or 0 when they do not fit
 * or a value type is not supported (arrays). Hand-written rather than snprintf: this is the
 * record path, and formatting dominated its cost. */
static size_t
make_key(const struct weft_attr **sorted, size_t n, char *key, size_t cap)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++) {
        const struct weft_attr *a = sorted[i];
        char tag[2] = {'\x1f', 0};
        const void *data = NULL;
        size_t data_len = 0;
        uint8_t b = 0;

        switch (a->value.type) {
        case WEFT_VALUE_STRING:
            tag[1] = 's';
            data = a->value.u.str != NULL ? a->value.u.str : "";
            data_len = a->value.u.str != NULL ? a->value.len : 0;
            break;
        case WEFT_VALUE_BOOL:
            tag[1] = 'b';
            b = a->value.u.b ? 1 : 0;
            data = &b;
            data_len = 1;
            break;
        case WEFT_VALUE_INT:
            tag[1] = 'i';
            data = &a->value.u.i;
            data_len = sizeof(a->value.u.i);
            break;
        case WEFT_VALUE_DOUBLE:
            tag[1] = 'd';
            data = &a->value.u.d;
            data_len = sizeof(a->value.u.d);
            break;
        default:
            return 0;
        }
        if (!put(key, cap, &len, a->key, strlen(a->key)) || !put(key, cap, &len, tag, 2) ||
            !put(key, cap, &len, data, data_len) || !put(key, cap, &len, "\x1e", 1)) {
            return 0;
        }
    }
    return len;
}

static uint64_t
fnv1a(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static struct series *
new_series(const struct weft_instrument *in,
           const struct weft_attr **sorted,
           size_t n,
           const char *key,
           size_t key_len,
           uint64_t hash)
{
    struct series *s = weft__calloc(1, sizeof(*s));

    if (s == NULL) {
        return NULL;
    }
    pthread_mutex_init(&s->exemplar_lock, NULL);
    s->hash = hash;
    s->key = weft__strndup(key, key_len);
    s->key_len = key_len;
    s->attrs = weft__calloc(n + 1, sizeof(*s->attrs));
    atomic_store(&s->min_bits, bits_of(INFINITY));
    atomic_store(&s->max_bits, bits_of(-INFINITY));
    if (s->key == NULL || s->attrs == NULL) {
        free_series(s);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct weft_attr *a = &s->attrs[i];
        a->key = weft__strdup(sorted[i]->key);
        a->value = sorted[i]->value;
        s->attr_count = i + 1;
        if (a->value.type == WEFT_VALUE_STRING) {
            a->value.u.str =
                weft__strndup(a->value.u.str != NULL ? a->value.u.str : "", a->value.len);
            if (a->value.u.str == NULL) {
                a->value.type = WEFT_VALUE_BOOL; /* nothing to free */
                free_series(s);
                return NULL;
            }
        }
        if (a->key == NULL) {
            free_series(s);
            return NULL;
        }
    }
    if (in->kind == WEFT_INSTRUMENT_HISTOGRAM) {
        s->buckets = weft__calloc(in->bound_count + 1, sizeof(*s->buckets));
        s->exemplars = weft__calloc(in->bound_count + 1, sizeof(*s->exemplars));
        if (s->buckets == NULL || s->exemplars == NULL) {
            free_series(s);
            return NULL;
        }
    }
    return s;
}

/* The series for @p attrs, created if needed; the overflow series when the instrument is full.
 * NULL when the attributes cannot be keyed or memory ran out (the caller counts a drop). */
static struct series *
find_series(struct weft_instrument *in,
            const struct weft_attr *attrs,
            size_t attr_count,
            bool *is_overflow)
{
    const struct weft_attr *sorted[MAX_ATTRS];
    char key[MAX_KEY_BYTES];
    size_t key_len = 0;
    uint64_t hash = 0;
    size_t i = 0;
    struct series *s = NULL;

    *is_overflow = false;
    if (attr_count > MAX_ATTRS || (attrs == NULL && attr_count > 0)) {
        return NULL;
    }
    for (size_t k = 0; k < attr_count; k++) {
        if (attrs[k].key == NULL) {
            return NULL;
        }
        sorted[k] = &attrs[k];
    }
    /* Insertion sort: attribute sets are small, and qsort's indirect calls cost more. */
    for (size_t k = 1; k < attr_count; k++) {
        const struct weft_attr *x = sorted[k];
        size_t j = k;
        while (j > 0 && strcmp(sorted[j - 1]->key, x->key) > 0) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = x;
    }
    key_len = attr_count > 0 ? make_key(sorted, attr_count, key, sizeof(key)) : 0;
    if (attr_count > 0 && key_len == 0) {
        return NULL;
    }
    hash = fnv1a(key, key_len);
    for (i = hash & in->mask;; i = (i + 1) & in->mask) {
        s = atomic_load_explicit(&in->slots[i], memory_order_acquire);
        if (s == NULL) {
            break;
        }
        if (s->hash == hash && s->key_len == key_len && memcmp(s->key, key, key_len) == 0) {
            return s;
        }
    }
    /* A new attribute set: insert under the lock, probing again (another thread may have). */
    pthread_mutex_lock(&in->lock);
    for (i = hash & in->mask;; i = (i + 1) & in->mask) {
        s = atomic_load_explicit(&in->slots[i], memory_order_acquire);
        if (s == NULL) {
            break;
        }
        if (s->hash == hash && s->key_len == key_len && memcmp(s->key, key, key_len) == 0) {
            pthread_mutex_unlock(&in->lock);
            return s;
        }
    }
    if (atomic_load(&in->series_count) + 1 >= in->meter->max_series) {
        /* Full: the one overflow series, as the OTel specification prescribes. */
        if (in->overflow == NULL) {
            struct weft_attr flag = weft_attr_bool("otel.metric.overflow", true);
            const struct weft_attr *one[1] = {&flag};
            char okey[64];
            size_t olen = make_key(one, 1, okey, sizeof(okey));
            in->overflow = new_series(in, one, 1, okey, olen, fnv1a(okey, olen));
        }
        s = in->overflow;
        pthread_mutex_unlock(&in->lock);
        *is_overflow = s != NULL;
        return s;
    }
    s = new_series(in, sorted, attr_count, key, key_len, hash);
    if (s != NULL) {
        size_t n = atomic_load(&in->series_count);
        in->list[n] = s;
        atomic_store_explicit(&in->series_count, n + 1, memory_order_release);
        atomic_store_explicit(&in->slots[i], s, memory_order_release);
    }
    pthread_mutex_unlock(&in->lock);
    return s;
}

static weft_err
locate(struct weft_instrument *in,
       const struct weft_attr *attrs,
       size_t attr_count,
       struct series **out)
{
    bool is_overflow = false;

    *out = find_series(in, attrs, attr_count, &is_overflow);
    if (*out == NULL) {
        atomic_fetch_add_explicit(&in->dropped, 1, memory_order_relaxed);
        return attr_count > MAX_ATTRS || attrs == NULL ? WEFT_EINVAL : WEFT_ENOMEM;
    }
    if (is_overflow) {
        atomic_fetch_add_explicit(&in->overflowed, 1, memory_order_relaxed);
        return WEFT_ELIMIT;
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Recording                                                                                   */

weft_err
weft_counter_add(struct weft_instrument *counter,
                 double value,
                 const struct weft_attr *attrs,
                 size_t attr_count)
{
    struct series *s = NULL;
    weft_err err = WEFT_OK;

    if (counter == NULL || (counter->kind != WEFT_INSTRUMENT_COUNTER &&
                            counter->kind != WEFT_INSTRUMENT_UPDOWN_COUNTER)) {
        return WEFT_EINVAL;
    }
    if (!isfinite(value) || (counter->kind == WEFT_INSTRUMENT_COUNTER && value < 0)) {
        atomic_fetch_add_explicit(&counter->dropped, 1, memory_order_relaxed);
        return WEFT_EINVAL;
    }
    err = locate(counter, attrs, attr_count, &s);
    if (s != NULL) {
        atomic_add_double(&s->value_bits, value);
    }
    return err;
}

weft_err
weft_gauge_set(struct weft_instrument *gauge,
               double value,
               const struct weft_attr *attrs,
               size_t attr_count)
{
    struct series *s = NULL;
    weft_err err = WEFT_OK;

    if (gauge == NULL || gauge->kind != WEFT_INSTRUMENT_GAUGE) {
        return WEFT_EINVAL;
    }
    if (!isfinite(value)) {
        atomic_fetch_add_explicit(&gauge->dropped, 1, memory_order_relaxed);
        return WEFT_EINVAL;
    }
    err = locate(gauge, attrs, attr_count, &s);
    if (s != NULL) {
        atomic_store_explicit(&s->value_bits, bits_of(value), memory_order_relaxed);
        atomic_store_explicit(&s->count, 1, memory_order_relaxed); /* has a value */
    }
    return err;
}

weft_err
weft_gauge_observe(struct weft_instrument *gauge,
                   double value,
                   const struct weft_attr *attrs,
                   size_t attr_count)
{
    return weft_gauge_set(gauge, value, attrs, attr_count);
}

weft_err
weft_histogram_record(struct weft_instrument *histogram,
                      double value,
                      const struct weft_attr *attrs,
                      size_t attr_count)
{
    struct series *s = NULL;
    struct weft_span *current = NULL;
    size_t lo = 0;
    size_t hi = 0;
    weft_err err = WEFT_OK;

    if (histogram == NULL || histogram->kind != WEFT_INSTRUMENT_HISTOGRAM) {
        return WEFT_EINVAL;
    }
    if (!isfinite(value)) {
        atomic_fetch_add_explicit(&histogram->dropped, 1, memory_order_relaxed);
        return WEFT_EINVAL;
    }
    err = locate(histogram, attrs, attr_count, &s);
    if (s == NULL) {
        return err;
    }
    /* Bucket i holds (bounds[i-1], bounds[i]]: the first bound >= value. */
    hi = histogram->bound_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (value <= histogram->bounds[mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    atomic_fetch_add_explicit(&s->buckets[lo], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
    atomic_add_double(&s->sum_bits, value);
    atomic_min_double(&s->min_bits, value);
    atomic_max_double(&s->max_bits, value);
    current = weft_context_current();
    if (current != NULL && weft_span_is_recording(current) &&
        pthread_mutex_trylock(&s->exemplar_lock) == 0) {
        struct weft_span_context ctx;
        struct weft_exemplar *ex = &s->exemplars[lo];
        weft_span_context_of(current, &ctx);
        if ((ctx.trace_flags & WEFT_TRACE_FLAG_SAMPLED) != 0) {
            ex->value = value;
            ex->time_ns = weft__now_ns();
            memcpy(ex->trace_id, ctx.trace_id, sizeof(ex->trace_id));
            memcpy(ex->span_id, ctx.span_id, sizeof(ex->span_id));
        }
        pthread_mutex_unlock(&s->exemplar_lock);
    }
    return err;
}

/* Add a whole histogram series (as collected elsewhere) into @p histogram: `weft serve` sums
 * the per-run snapshots of the state store this way. No exemplars are merged. */
weft_err
weft__histogram_merge(struct weft_instrument *histogram,
                      const struct weft_attr *attrs,
                      size_t attr_count,
                      const uint64_t *buckets,
                      size_t bucket_count,
                      double sum,
                      double min,
                      double max)
{
    struct series *s = NULL;
    uint64_t count = 0;
    weft_err err = WEFT_OK;

    if (histogram == NULL || histogram->kind != WEFT_INSTRUMENT_HISTOGRAM || buckets == NULL ||
        bucket_count != histogram->bound_count + 1 || !isfinite(sum)) {
        return WEFT_EINVAL;
    }
    err = locate(histogram, attrs, attr_count, &s);
    if (s == NULL) {
        return err;
    }
    for (size_t b = 0; b < bucket_count; b++) {
        atomic_fetch_add_explicit(&s->buckets[b], buckets[b], memory_order_relaxed);
        count += buckets[b];
    }
    atomic_fetch_add_explicit(&s->count, count, memory_order_relaxed);
    atomic_add_double(&s->sum_bits, sum);
    if (count > 0 && isfinite(min) && isfinite(max)) {
        atomic_min_double(&s->min_bits, min);
        atomic_max_double(&s->max_bits, max);
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Collection                                                                                  */

static bool
visit_series(const struct weft_instrument_view *view,
             struct series *s,
             size_t bound_count,
             uint64_t *buckets,
             struct weft_exemplar *exemplars,
             weft_metric_visit_fn fn,
             void *user_data)
{
    struct weft_series_view sv;

    memset(&sv, 0, sizeof(sv));
    sv.attrs = s->attrs;
    sv.attr_count = s->attr_count;
    sv.value = double_of(atomic_load_explicit(&s->value_bits, memory_order_relaxed));
    sv.count = atomic_load_explicit(&s->count, memory_order_relaxed);
    if (view->kind == WEFT_INSTRUMENT_HISTOGRAM) {
        uint64_t total = 0;
        for (size_t b = 0; b <= bound_count; b++) {
            buckets[b] = atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
            total += buckets[b];
        }
        /* Buckets, count and sum are read one by one while recorders run: report the bucket
         * total as the count so that the exposition stays self-consistent. */
        sv.count = total;
        sv.sum = double_of(atomic_load_explicit(&s->sum_bits, memory_order_relaxed));
        sv.min = double_of(atomic_load_explicit(&s->min_bits, memory_order_relaxed));
        sv.max = double_of(atomic_load_explicit(&s->max_bits, memory_order_relaxed));
        pthread_mutex_lock(&s->exemplar_lock);
        memcpy(exemplars, s->exemplars, (bound_count + 1) * sizeof(*exemplars));
        pthread_mutex_unlock(&s->exemplar_lock);
        sv.bucket_counts = buckets;
        sv.exemplars = exemplars;
    }
    if (view->kind == WEFT_INSTRUMENT_GAUGE && sv.count == 0) {
        return true; /* a gauge series without a value yet */
    }
    return fn(view, &sv, user_data);
}

weft_err
weft_meter_collect(struct weft_meter *meter, weft_metric_visit_fn fn, void *user_data)
{
    size_t n = 0;
    uint64_t *buckets = NULL;
    struct weft_exemplar *exemplars = NULL;
    weft_err err = WEFT_OK;

    if (meter == NULL || fn == NULL) {
        return WEFT_EINVAL;
    }
    buckets = weft__calloc(MAX_BOUNDS + 1, sizeof(*buckets));
    exemplars = weft__calloc(MAX_BOUNDS + 1, sizeof(*exemplars));
    if (buckets == NULL || exemplars == NULL) {
        weft__free(buckets);
        weft__free(exemplars);
        return WEFT_ENOMEM;
    }
    /* One collection at a time; callbacks run first so their values are in this collection. */
    pthread_mutex_lock(&meter->lock);
    n = atomic_load(&meter->instrument_count);
    for (size_t i = 0; i < n; i++) {
        struct weft_instrument *in = meter->instruments[i];
        if (in->kind == WEFT_INSTRUMENT_GAUGE && in->callback != NULL) {
            in->callback(in, in->callback_data);
        }
    }
    for (size_t i = 0; i < n && err == WEFT_OK; i++) {
        struct weft_instrument *in = meter->instruments[i];
        struct weft_instrument_view view;
        size_t count = atomic_load_explicit(&in->series_count, memory_order_acquire);
        bool is_going = true;

        memset(&view, 0, sizeof(view));
        view.name = in->name;
        view.unit = in->unit;
        view.description = in->description;
        view.kind = in->kind;
        view.bounds = in->bounds;
        view.bound_count = in->bound_count;
        view.start_time_ns = meter->start_ns;
        view.time_ns = weft__now_ns();
        view.dropped = atomic_load_explicit(&in->dropped, memory_order_relaxed);
        view.overflowed = atomic_load_explicit(&in->overflowed, memory_order_relaxed);
        if (!fn(&view, NULL, user_data)) {
            break;
        }
        for (size_t k = 0; k < count && is_going; k++) {
            is_going = visit_series(&view, in->list[k], in->bound_count, buckets, exemplars, fn,
                                    user_data);
        }
        pthread_mutex_lock(&in->lock);
        if (in->overflow != NULL && is_going) {
            is_going = visit_series(&view, in->overflow, in->bound_count, buckets, exemplars, fn,
                                    user_data);
        }
        pthread_mutex_unlock(&in->lock);
        if (!is_going) {
            break;
        }
    }
    pthread_mutex_unlock(&meter->lock);
    weft__free(buckets);
    weft__free(exemplars);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Provider health                                                                             */

/* Span counts: weft.spans.ended for the provider, the others per processor labelled with its
 * exporter's name, so that a failing OTLP collector is not hidden behind a healthy store.
 * Spans the provider itself lost (before any processor) count as exporter="provider". */
static void
observe_spans(struct weft_instrument *gauge, void *user_data)
{
    struct weft_provider *provider = user_data;
    struct weft_trace_stats st;
    struct weft_processor *proc = NULL;
    uint64_t per_exporter = 0;
    int which = 0;

    weft_provider_get_stats(provider, &st);
    if (strcmp(gauge->name, "weft.spans.ended") == 0) {
        weft_gauge_observe(gauge, (double)st.spans_ended, NULL, 0);
        return;
    }
    which = strcmp(gauge->name, "weft.spans.exported") == 0  ? 0
            : strcmp(gauge->name, "weft.spans.dropped") == 0 ? 1
            : strcmp(gauge->name, "weft.spans.spooled") == 0 ? 3
                                                             : 2;
    for (size_t i = 0; (proc = weft_provider_processor(provider, i)) != NULL; i++) {
        struct weft_processor_stats ps;
        struct weft_attr attr;
        uint64_t v = 0;

        if (weft_processor_get_stats(proc, &ps) != WEFT_OK) {
            continue;
        }
        v = which == 0   ? ps.exported
            : which == 1 ? ps.dropped
            : which == 3 ? ps.spooled
                         : ps.failed;
        per_exporter += v;
        attr = weft_attr_str("exporter", weft_exporter_name(proc->exporter));
        weft_gauge_observe(gauge, (double)v, &attr, 1);
    }
    if (which == 1 && st.spans_dropped > per_exporter) {
        struct weft_attr attr = weft_attr_str("exporter", "provider");
        weft_gauge_observe(gauge, (double)(st.spans_dropped - per_exporter), &attr, 1);
    }
}

/* Queue fill per batch processor, labelled with its exporter's name: a queue that stays full
 * is about to drop spans, so it is worth an alert before weft.spans.dropped moves. */
static void
observe_queues(struct weft_instrument *gauge, void *user_data)
{
    struct weft_provider *provider = user_data;
    bool is_ratio = strcmp(gauge->name, "weft.exporter.queue.utilization") == 0;
    bool is_cap = strcmp(gauge->name, "weft.exporter.queue.capacity") == 0;
    struct weft_processor *proc = NULL;

    for (size_t i = 0; (proc = weft_provider_processor(provider, i)) != NULL; i++) {
        struct weft_processor_stats ps;
        struct weft_attr attr;

        if (weft_processor_get_stats(proc, &ps) != WEFT_OK || ps.queue_cap == 0) {
            continue; /* the simple processor has no queue */
        }
        attr = weft_attr_str("exporter", weft_exporter_name(proc->exporter));
        weft_gauge_observe(gauge,
                           is_ratio ? (double)ps.queue_len / (double)ps.queue_cap
                           : is_cap ? (double)ps.queue_cap
                                    : (double)ps.queue_len,
                           &attr, 1);
    }
}

/* Export calls per batch processor, labelled with its exporter's name: how many, how many
 * failed, and the time spent in them (cumulative; latency = rate(time) / rate(exports)). */
static void
observe_exports(struct weft_instrument *gauge, void *user_data)
{
    struct weft_provider *provider = user_data;
    int which = strcmp(gauge->name, "weft.exporter.exports") == 0           ? 0
                : strcmp(gauge->name, "weft.exporter.export.failures") == 0 ? 1
                                                                            : 2;
    struct weft_processor *proc = NULL;

    for (size_t i = 0; (proc = weft_provider_processor(provider, i)) != NULL; i++) {
        struct weft_processor_stats ps;
        struct weft_attr attr;

        if (weft_processor_get_stats(proc, &ps) != WEFT_OK || ps.queue_cap == 0) {
            continue; /* the simple processor exports inline and keeps no timings */
        }
        attr = weft_attr_str("exporter", weft_exporter_name(proc->exporter));
        weft_gauge_observe(gauge,
                           which == 0   ? (double)ps.batches
                           : which == 1 ? (double)ps.failed_batches
                                        : (double)ps.export_ns / 1e9,
                           &attr, 1);
    }
}

/* 1 while an exporter's last attempt failed (its retries are still going, or it gave up and
 * nothing was delivered since), per exporter: a collector that is down shows at its first
 * failed attempt, not when the batch's time limit ends the retries. Exporters without a
 * last_error operation are 0. */
static void
observe_failing(struct weft_instrument *gauge, void *user_data)
{
    struct weft_provider *provider = user_data;
    struct weft_processor *proc = NULL;

    for (size_t i = 0; (proc = weft_provider_processor(provider, i)) != NULL; i++) {
        const struct weft_exporter *ex = proc->exporter;
        char text[8];
        struct weft_attr attr = weft_attr_str("exporter", weft_exporter_name(ex));
        bool is_failing = ex != NULL && ex->ops->last_error != NULL &&
                          ex->ops->last_error(ex->self, text, sizeof(text)) > 0;

        weft_gauge_observe(gauge, is_failing ? 1.0 : 0.0, &attr, 1);
    }
}

/* The on-disk spool of each exporter that has one (docs/spool.md): spans waiting and bytes
 * on disk now, spans sent from it, and spans that left it unsent, by reason. */
static void
observe_spool(struct weft_instrument *gauge, void *user_data)
{
    struct weft_provider *provider = user_data;
    int which = strcmp(gauge->name, "weft.exporter.spool.size") == 0      ? 0
                : strcmp(gauge->name, "weft.exporter.spool.bytes") == 0   ? 1
                : strcmp(gauge->name, "weft.exporter.spool.drained") == 0 ? 2
                                                                          : 3;
    struct weft_processor *proc = NULL;

    for (size_t i = 0; (proc = weft_provider_processor(provider, i)) != NULL; i++) {
        struct weft_spool_stats ss;
        struct weft_attr attrs[2];

        weft_processor_spool_stats(proc, &ss);
        if (!ss.is_enabled) {
            continue;
        }
        attrs[0] = weft_attr_str("exporter", weft_exporter_name(proc->exporter));
        if (which < 3) {
            weft_gauge_observe(gauge,
                               which == 0   ? (double)ss.spans
                               : which == 1 ? (double)ss.bytes
                                            : (double)ss.spans_drained,
                               attrs, 1);
            continue;
        }
        attrs[1] = weft_attr_str("reason", "cap");
        weft_gauge_observe(gauge, (double)ss.spans_dropped, attrs, 2);
        attrs[1] = weft_attr_str("reason", "corrupt");
        weft_gauge_observe(gauge, (double)ss.spans_corrupt, attrs, 2);
        attrs[1] = weft_attr_str("reason", "rejected");
        weft_gauge_observe(gauge, (double)ss.spans_rejected, attrs, 2);
        attrs[1] = weft_attr_str("reason", "write_error");
        weft_gauge_observe(gauge, (double)ss.spans_lost, attrs, 2);
    }
}

weft_err
weft_meter_observe_provider(struct weft_meter *meter, struct weft_provider *provider)
{
    struct weft_instrument *g = NULL;
    weft_err err = WEFT_OK;

    static const char *const names[] = {"weft.spans.ended", "weft.spans.exported",
                                        "weft.spans.dropped", "weft.spans.failed",
                                        "weft.spans.spooled"};
    static const char *const help[] = {
        "Spans ended since start", "Spans accepted by exporters since start",
        "Spans lost before export (queue full, out of memory, after shutdown) since start",
        "Spans an exporter failed or rejected since start",
        "Spans an exporter kept in its on-disk spool (endpoint down) since start"};

    if (meter == NULL || provider == NULL) {
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, names[i], "{span}", help[i], NULL,
                                    0, &g);
        if (err != WEFT_OK) {
            return err;
        }
        weft_gauge_set_callback(g, observe_spans, provider);
    }
    err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.queue.size", "{span}",
                                "Spans waiting in an exporter's queue", NULL, 0, &g);
    if (err == WEFT_OK) {
        weft_gauge_set_callback(g, observe_queues, provider);
        err = weft_meter_instrument(
            meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.queue.utilization", "1",
            "Fill of an exporter's queue (0 empty, 1 full: spans drop)", NULL, 0, &g);
    }
    if (err == WEFT_OK) {
        weft_gauge_set_callback(g, observe_queues, provider);
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.queue.capacity",
                                    "{span}", "Capacity of an exporter's queue", NULL, 0, &g);
    }
    if (err == WEFT_OK) {
        weft_gauge_set_callback(g, observe_queues, provider);
    }
    {
        static const char *const ex_names[] = {
            "weft.exporter.exports", "weft.exporter.export.failures", "weft.exporter.export.time"};
        static const char *const ex_units[] = {"{export}", "{export}", "s"};
        static const char *const ex_help[] = {
            "Export calls of an exporter since start", "Export calls that failed since start",
            "Time spent in an exporter's export calls since start"};
        for (size_t i = 0; err == WEFT_OK && i < 3; i++) {
            err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, ex_names[i], ex_units[i],
                                        ex_help[i], NULL, 0, &g);
            if (err == WEFT_OK) {
                weft_gauge_set_callback(g, observe_exports, provider);
            }
        }
    }
    if (err == WEFT_OK) {
        err =
            weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.exporter.failing", "",
                                  "1 while an exporter's last export attempt failed", NULL, 0, &g);
    }
    if (err == WEFT_OK) {
        weft_gauge_set_callback(g, observe_failing, provider);
    }
    {
        static const char *const sp_names[] = {
            "weft.exporter.spool.size", "weft.exporter.spool.bytes", "weft.exporter.spool.drained",
            "weft.exporter.spool.dropped"};
        static const char *const sp_units[] = {"{span}", "By", "{span}", "{span}"};
        static const char *const sp_help[] = {
            "Spans waiting in an exporter's on-disk spool", "Bytes of an exporter's on-disk spool",
            "Spooled spans an exporter sent once its endpoint answered, since start",
            "Spooled spans lost (reason: cap, corrupt, rejected, write_error) since start"};

        for (size_t i = 0; err == WEFT_OK && i < 4; i++) {
            err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, sp_names[i], sp_units[i],
                                        sp_help[i], NULL, 0, &g);
            if (err == WEFT_OK) {
                weft_gauge_set_callback(g, observe_spool, provider);
            }
        }
    }
    return err;
}
