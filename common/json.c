/* common/json: the JSON emitter (see json.h for the layout rules and the contract). Every token goes through
 * item(), which writes what separates it from the previous one; the goldens of every JSON document depend on the
 * exact bytes written here. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>

void pl_json_write_str(FILE *o, const char *s) {
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(o, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", o);
        else if (*p == '\t') fputs("\\t", o);
        else if (*p < 0x20 || *p == 0x7f) fprintf(o, "\\u%04x", *p);
        else fputc(*p, o); /* UTF-8 passes through as bytes */
    }
    fputc('"', o);
}

void pl_json_init(pl_json_t *j, FILE *o, unsigned flags) {
    *j = (pl_json_t){.o = o, .flags = flags, .brk = -1};
}

int pl_json_done(const pl_json_t *j) {
    if (j->misuse || j->depth) return -EINVAL;
    return ferror(j->o) ? -EIO : 0;
}

static void newline(pl_json_t *j, int indent) {
    fprintf(j->o, "\n%*s", indent, "");
    j->line_indent = indent;
}

/* Before a key (objects) or a value (arrays, top level): the comma and the line break or space. false on misuse. */
static bool item(pl_json_t *j, bool is_key) {
    if (j->misuse) return false;
    if (j->depth == 0) {
        if (is_key || j->any_top) goto misuse;
        j->any_top = true;
        return true;
    }
    pl_json_level_t *l = &j->lv[j->depth - 1];
    bool in_object = l->close == '}';
    if (in_object && l->want_value) {
        if (is_key) goto misuse;
        l->want_value = false;
        return true;
    }
    if (in_object != is_key) goto misuse;
    if (l->any) fputc(',', j->o);
    if (j->brk >= 0) newline(j, j->brk);
    else if (l->block) newline(j, l->item_indent);
    else if (l->any && !(j->flags & PL_JSON_COMPACT)) fputc(' ', j->o);
    j->brk = -1;
    l->any = true;
    return true;
misuse:
    j->misuse = true;
    return false;
}

static void open_container(pl_json_t *j, char c, bool block) {
    if (!item(j, false)) return;
    if (j->depth == PL_JSON_MAX_DEPTH) {
        j->misuse = true;
        return;
    }
    fputc(c, j->o);
    j->lv[j->depth++] = (pl_json_level_t){.close = c == '{' ? '}' : ']', .block = block,
                                          .item_indent = j->line_indent + 2, .close_indent = j->line_indent};
}

void pl_json_object(pl_json_t *j) { open_container(j, '{', false); }
void pl_json_array(pl_json_t *j) { open_container(j, '[', false); }
void pl_json_object_block(pl_json_t *j) { open_container(j, '{', true); }
void pl_json_array_block(pl_json_t *j) { open_container(j, '[', true); }

void pl_json_end(pl_json_t *j) {
    if (j->misuse) return;
    if (j->depth == 0 || j->lv[j->depth - 1].want_value) {
        j->misuse = true;
        return;
    }
    pl_json_level_t *l = &j->lv[--j->depth];
    if (j->brk >= 0) newline(j, j->brk);
    else if (l->block && l->any) newline(j, l->close_indent);
    j->brk = -1;
    fputc(l->close, j->o);
    if (j->depth == 0 && !(j->flags & PL_JSON_NO_NEWLINE)) fputc('\n', j->o);
}

void pl_json_break(pl_json_t *j, int n) {
    if (n < 0) j->misuse = true;
    else j->brk = n;
}

void pl_json_key(pl_json_t *j, const char *k) {
    if (!item(j, true)) return;
    pl_json_write_str(j->o, k);
    fputs(j->flags & PL_JSON_COMPACT ? ":" : ": ", j->o);
    j->lv[j->depth - 1].want_value = true;
}

void pl_json_str(pl_json_t *j, const char *s) {
    if (item(j, false)) pl_json_write_str(j->o, s);
}

void pl_json_str_or_null(pl_json_t *j, const char *s) {
    if (s) pl_json_str(j, s);
    else pl_json_null(j);
}

void pl_json_num(pl_json_t *j, double v) {
    if (!item(j, false)) return;
    if (isfinite(v)) fprintf(j->o, "%.10g", v);
    else fputs("null", j->o);
}

void pl_json_numf(pl_json_t *j, const char *fmt, ...) {
    if (!item(j, false)) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(j->o, fmt, ap);
    va_end(ap);
}

void pl_json_int(pl_json_t *j, long long v) {
    if (item(j, false)) fprintf(j->o, "%lld", v);
}

void pl_json_uint(pl_json_t *j, unsigned long long v) {
    if (item(j, false)) fprintf(j->o, "%llu", v);
}

void pl_json_bool(pl_json_t *j, bool v) {
    if (item(j, false)) fputs(v ? "true" : "false", j->o);
}

void pl_json_null(pl_json_t *j) {
    if (item(j, false)) fputs("null", j->o);
}

void pl_json_kstr(pl_json_t *j, const char *k, const char *s) {
    pl_json_key(j, k);
    pl_json_str(j, s);
}

void pl_json_knum(pl_json_t *j, const char *k, double v) {
    pl_json_key(j, k);
    pl_json_num(j, v);
}

void pl_json_kint(pl_json_t *j, const char *k, long long v) {
    pl_json_key(j, k);
    pl_json_int(j, v);
}

void pl_json_kuint(pl_json_t *j, const char *k, unsigned long long v) {
    pl_json_key(j, k);
    pl_json_uint(j, v);
}

void pl_json_kbool(pl_json_t *j, const char *k, bool v) {
    pl_json_key(j, k);
    pl_json_bool(j, v);
}
