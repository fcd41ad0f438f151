/* Who keeps it: the census's holders, judged by growth (reports/retention.h, docs/retention.md). */
#include "retention.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

static void copy(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src ? src : "");
}

static int note_census(pl_retention_t *rt, const pl_rec_retention_t *q) {
    if (q->census >= PL_RETENTION_MAX_CENSUS) return 0;
    if (q->census >= rt->cap_census) {
        size_t old = rt->cap_census;
        if (pl_grow_first((void **)&rt->census_step, &rt->cap_census, (size_t)q->census + 1, sizeof *rt->census_step,
                          64))
            return -ENOMEM;
        for (size_t i = old; i < rt->cap_census; i++) rt->census_step[i] = PL_TRACE_NA;
    }
    rt->census_step[q->census] = q->step;
    return 0;
}

static uint64_t step_of(const pl_retention_t *rt, uint32_t census) {
    return census < rt->cap_census ? rt->census_step[census] : PL_TRACE_NA;
}

/* The holder of `path`, or a new one; when the table is full, the one seen longest ago makes room if it was not
 * seen at `census` (a holder no longer reachable is never named), else NULL. */
static pl_retention_holder_t *holder(pl_retention_t *rt, const char *path, uint32_t census) {
    for (size_t i = 0; i < rt->n_holders; i++)
        if (!strcmp(rt->holders[i].path, path)) return &rt->holders[i];
    pl_retention_holder_t *h;
    if (rt->n_holders < PL_RETENTION_MAX_HOLDERS) {
        h = &rt->holders[rt->n_holders++];
    } else {
        h = NULL;
        uint32_t oldest = census;
        for (size_t i = 0; i < rt->n_holders; i++) {
            pl_retention_holder_t *c = &rt->holders[i];
            uint32_t seen = c->n_points ? c->points[c->n_points - 1].census : 0;
            if (seen < oldest) {
                oldest = seen;
                h = c;
            }
        }
        if (!h) return NULL;
    }
    memset(h, 0, sizeof *h);
    copy(h->path, sizeof h->path, path);
    return h;
}

static void add_point(pl_retention_holder_t *h, const pl_rec_retention_t *q) {
    /* a census already held (a holder reported again with its history) keeps its first values */
    for (size_t i = h->n_points; i-- > 0;) {
        if (h->points[i].census == q->census) return;
        if (h->points[i].census < q->census) break;
    }
    if (h->n_points == PL_RETENTION_MAX_POINTS) { /* keep every other point: the span stays, the density halves */
        size_t k = 0;
        for (size_t i = 0; i < h->n_points; i += 2) h->points[k++] = h->points[i];
        h->n_points = k;
    }
    size_t at = h->n_points;
    while (at > 0 && h->points[at - 1].census > q->census) at--;
    memmove(&h->points[at + 1], &h->points[at], (h->n_points - at) * sizeof h->points[0]);
    h->points[at] = (pl_retention_point_t){q->census, q->items, q->nodes, q->bytes, q->flags};
    h->n_points++;
}

pl_retention_holder_t *pl_retention_find(pl_retention_t *rt, const char *path) {
    for (size_t i = 0; path && i < rt->n_holders; i++)
        if (!strcmp(rt->holders[i].path, path)) return &rt->holders[i];
    return NULL;
}

int pl_retention_add(pl_retention_t *rt, const pl_rec_retention_t *q) {
    if (!q->path || !q->path[0]) { /* one census */
        rt->n_census++;
        if (q->census > rt->last_census) rt->last_census = q->census;
        if (q->flags & PL_RETENTION_SHORT) rt->any_short = true;
        if (q->bytes != PL_TRACE_NA) rt->census_seconds += (double)q->bytes / 1e9;
        return note_census(rt, q);
    }
    pl_retention_holder_t *h = holder(rt, q->path, q->census);
    if (!h) return 0;
    copy(h->what, sizeof h->what, q->what);
    copy(h->kind, sizeof h->kind, q->kind);
    copy(h->file, sizeof h->file, q->file);
    copy(h->fix, sizeof h->fix, q->fix);
    h->line = q->line;
    h->flags = q->flags;
    add_point(h, q);
    return 0;
}

static uint64_t size_at(const pl_retention_holder_t *h, size_t i) {
    return h->by_nodes ? h->points[i].nodes : h->points[i].items;
}

static bool capped(const pl_retention_holder_t *h, size_t i) { return h->points[i].flags & PL_RETENTION_CAPPED; }

/* The first and last point whose size is exact (not a lower bound cut by the census's node cap); false if none. */
static bool exact_span(const pl_retention_holder_t *h, size_t *first, size_t *last) {
    size_t n = 0;
    for (size_t i = 0; i < h->n_points; i++)
        if (!capped(h, i)) {
            if (!n++) *first = i;
            *last = i;
        }
    return n > 0;
}

/* Growth, not size (docs/retention.md): at least PL_RETENTION_MIN_POINTS censuses with known steps; the size grew
 * from first to last, grew in at least 2/3 of the intervals, never shrank, and grew over the last third too. The
 * holder must still be there at the process's last census. Sizes the census cut at its node cap are lower bounds:
 * the rule runs on the exact ones (3 are enough when the rest are capped), and a capped one must not be below the
 * exact one before it. */
static bool grows(const pl_retention_t *rt, pl_retention_holder_t *h) {
    size_t n = h->n_points;
    h->by_nodes = h->points[0].items == PL_TRACE_NA;
    if (!n || h->points[n - 1].census != rt->last_census) return false;
    size_t ix[PL_RETENTION_MAX_POINTS], m = 0;
    uint64_t floor = 0;
    for (size_t i = 0; i < n; i++) {
        if (size_at(h, i) == PL_TRACE_NA || step_of(rt, h->points[i].census) == PL_TRACE_NA) return false;
        if (size_at(h, i) < floor) return false; /* shrank */
        floor = size_at(h, i);
        if (!capped(h, i)) ix[m++] = i;
    }
    if (m < (m < n ? 3u : (size_t)PL_RETENTION_MIN_POINTS)) return false;
    size_t up = 0;
    for (size_t k = 1; k < m; k++)
        if (size_at(h, ix[k]) > size_at(h, ix[k - 1])) up++;
    size_t last = (m - 1) / 3 ? (m - 1) / 3 : 1;
    size_t third = m - 1 - last; /* the point that starts the last third of the intervals (at least the last one) */
    uint64_t s0 = step_of(rt, h->points[ix[0]].census), s1 = step_of(rt, h->points[ix[m - 1]].census);
    return s1 > s0 && 3 * up >= 2 * (m - 1) && size_at(h, ix[m - 1]) > size_at(h, ix[third]) &&
           size_at(h, ix[m - 1]) > size_at(h, ix[0]);
}

static int by_rank(const void *a, const void *b) {
    const pl_retention_holder_t *x = a, *y = b;
    if (x->named != y->named) return x->named ? -1 : 1;
    double bx = isnan(x->bytes_per_step) ? -1 : x->bytes_per_step, by = isnan(y->bytes_per_step) ? -1 : y->bytes_per_step;
    if (bx != by) return bx > by ? -1 : 1;
    if (x->size_per_step != y->size_per_step) return x->size_per_step > y->size_per_step ? -1 : 1;
    return strcmp(x->path, y->path);
}

void pl_retention_judge(pl_retention_t *rt) {
    rt->n_named = 0;
    for (size_t i = 0; i < rt->n_holders; i++) {
        pl_retention_holder_t *h = &rt->holders[i];
        h->named = false;
        h->size_per_step = 0;
        h->bytes_per_step = NAN;
        h->nodes_per_step = NAN;
        h->size_last = 0;
        h->bytes_last = PL_TRACE_NA;
        h->first_step = h->last_step = -1;
        if (!h->n_points) continue;
        h->named = grows(rt, h);
        size_t i0 = 0, i1 = h->n_points - 1; /* rates over the exact sizes */
        if (!exact_span(h, &i0, &i1)) i1 = h->n_points - 1;
        const pl_retention_point_t *a = &h->points[i0], *b = &h->points[i1];
        uint64_t s0 = step_of(rt, a->census), s1 = step_of(rt, b->census);
        h->size_last = size_at(h, h->n_points - 1);
        h->bytes_last = h->points[h->n_points - 1].bytes;
        uint64_t f0 = step_of(rt, h->points[0].census), f1 = step_of(rt, h->points[h->n_points - 1].census);
        if (f0 != PL_TRACE_NA && f1 != PL_TRACE_NA) {
            h->first_step = (int64_t)f0;
            h->last_step = (int64_t)f1;
        }
        if (s0 != PL_TRACE_NA && s1 != PL_TRACE_NA && s1 > s0) {
            uint64_t z0 = size_at(h, i0), z1 = size_at(h, i1);
            if (z0 != PL_TRACE_NA && z1 != PL_TRACE_NA) h->size_per_step = ((double)z1 - (double)z0) / (double)(s1 - s0);
            if (a->bytes != PL_TRACE_NA && b->bytes != PL_TRACE_NA)
                h->bytes_per_step = ((double)b->bytes - (double)a->bytes) / (double)(s1 - s0);
            if (!h->by_nodes && a->nodes != PL_TRACE_NA && b->nodes != PL_TRACE_NA)
                h->nodes_per_step = ((double)b->nodes - (double)a->nodes) / (double)(s1 - s0);
        }
        if (h->named) rt->n_named++;
    }
    qsort(rt->holders, rt->n_holders, sizeof rt->holders[0], by_rank);
}

void pl_retention_free(pl_retention_t *rt) {
    if (!rt) return;
    free(rt->census_step);
    rt->census_step = NULL;
    rt->cap_census = 0;
}
