/*
 * Slurm's compressed host lists. An item is text with bracket groups; a
 * group is a comma-separated list of numbers and ranges. The list is never
 * expanded in memory: the count is a product of group sizes and a host is
 * found by its place, so node[0-99999] costs nothing. Must not log: the
 * caller names the variable the list came from.
 */
#include "boot/nodelist.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define DD_NODELIST_MAX_GROUPS 8

/* One item of the list, cut into its bracket groups. */
typedef struct {
    const char *begin, *end;
    int n_groups;
    const char *group[DD_NODELIST_MAX_GROUPS];     /* after '[' */
    const char *group_end[DD_NODELIST_MAX_GROUPS]; /* at ']' */
    long size[DD_NODELIST_MAX_GROUPS];
    long count;
} dd_nodelist_item_t;

/* Reads one number or range lo-hi of a group; *p moves past it. */
static int dd_nodelist_range(const char **p, const char *end, long *lo_p,
                             long *hi_p, int *width_p)
{
    const char *s = *p;
    long lo = 0, hi;
    int width = 0;

    while (s < end && isdigit((unsigned char)*s)) {
        if (lo > (LONG_MAX - 9) / 10) {
            return -1;
        }
        lo = lo * 10 + (*s++ - '0');
        width++;
    }
    if (width == 0) {
        return -1;
    }
    hi = lo;
    if (s < end && *s == '-') {
        const char *h = ++s;
        hi = 0;
        while (s < end && isdigit((unsigned char)*s)) {
            if (hi > (LONG_MAX - 9) / 10) {
                return -1;
            }
            hi = hi * 10 + (*s++ - '0');
        }
        if (s == h || hi < lo) {
            return -1;
        }
    }
    if (s < end && (*s != ',' || s + 1 == end)) {
        return -1; /* not a separator, or one with nothing after it */
    }
    *p = s < end ? s + 1 : s;
    *lo_p = lo;
    *hi_p = hi;
    *width_p = width;
    return 0;
}

/* The number of hosts a group names, or -1 when it does not parse. */
static long dd_nodelist_group_size(const char *g, const char *end)
{
    long total = 0, lo, hi;
    int width;

    if (g == end) {
        return -1;
    }
    while (g < end) {
        if (dd_nodelist_range(&g, end, &lo, &hi, &width) != 0 ||
            hi - lo >= INT_MAX - total) {
            return -1;
        }
        total += hi - lo + 1;
    }
    return total;
}

/* Writes the k-th number of a group, zero-padded as its range is. */
static int dd_nodelist_group_nth(const char *g, const char *end, long k,
                                 char *out, size_t size)
{
    long lo, hi;
    int width;

    while (g < end && dd_nodelist_range(&g, end, &lo, &hi, &width) == 0) {
        if (k <= hi - lo) {
            int n = snprintf(out, size, "%0*ld", width, lo + k);
            return n > 0 && (size_t)n < size ? n : -1;
        }
        k -= hi - lo + 1;
    }
    return -1;
}

/* Cuts the item starting at p; item->end is at its ',' or at the end. */
static int dd_nodelist_item(const char *p, dd_nodelist_item_t *item)
{
    memset(item, 0, sizeof(*item));
    item->begin = p;
    item->count = 1;
    for (; *p != '\0' && *p != ','; p++) {
        if (*p == ']') {
            return -1;
        }
        if (*p != '[') {
            continue;
        }
        const char *close = strchr(p, ']');
        const char *open = strchr(p + 1, '[');
        if (close == NULL || (open != NULL && open < close) ||
            item->n_groups == DD_NODELIST_MAX_GROUPS) {
            return -1;
        }
        int i = item->n_groups++;
        item->group[i] = p + 1;
        item->group_end[i] = close;
        item->size[i] = dd_nodelist_group_size(p + 1, close);
        if (item->size[i] < 0 || item->count > INT_MAX / item->size[i]) {
            return -1;
        }
        item->count *= item->size[i];
        p = close;
    }
    item->end = p;
    return item->end == item->begin ? -1 : 0;
}

/* Writes the k-th host of one item: the last group varies fastest. */
static int dd_nodelist_item_host(const dd_nodelist_item_t *item, long k,
                                 char *out, size_t size)
{
    long place[DD_NODELIST_MAX_GROUPS];
    const char *p = item->begin;
    size_t o = 0;

    for (int i = item->n_groups - 1; i >= 0; i--) {
        place[i] = k % item->size[i];
        k /= item->size[i];
    }
    for (int i = 0; i <= item->n_groups; i++) {
        const char *text_end =
            i < item->n_groups ? item->group[i] - 1 : item->end;
        size_t len = (size_t)(text_end - p);
        if (o + len >= size) {
            return -1;
        }
        memcpy(out + o, p, len);
        o += len;
        if (i == item->n_groups) {
            break;
        }
        int n = dd_nodelist_group_nth(item->group[i], item->group_end[i],
                                      place[i], out + o, size - o);
        if (n < 0) {
            return -1;
        }
        o += (size_t)n;
        p = item->group_end[i] + 1;
    }
    out[o] = '\0';
    return 0;
}

dd_status_t dd_boot_nodelist_count(const char *list, int *count_p)
{
    dd_nodelist_item_t item;
    long total = 0;

    if (list == NULL || *list == '\0') {
        return DD_ERR_INVALID_PARAM;
    }
    for (const char *p = list;; p = item.end + 1) {
        if (dd_nodelist_item(p, &item) != 0 || item.count > INT_MAX - total) {
            return DD_ERR_INVALID_PARAM;
        }
        total += item.count;
        if (*item.end == '\0') {
            break;
        }
    }
    *count_p = (int)total;
    return DD_OK;
}

dd_status_t dd_boot_nodelist_host(const char *list, int index, char *host,
                                  size_t size)
{
    dd_nodelist_item_t item;
    char name[1024];
    long k = index;
    int count;

    if (index < 0 || size == 0 ||
        dd_boot_nodelist_count(list, &count) != DD_OK) {
        return DD_ERR_INVALID_PARAM;
    }
    if (index >= count) {
        return DD_ERR_NOT_FOUND;
    }
    for (const char *p = list;; p = item.end + 1) {
        dd_nodelist_item(p, &item); /* parsed once already by the count */
        if (k < item.count) {
            if (dd_nodelist_item_host(&item, k, name, sizeof(name)) != 0 ||
                strlen(name) >= size) {
                return DD_ERR_INVALID_PARAM;
            }
            memcpy(host, name, strlen(name) + 1);
            return DD_OK;
        }
        k -= item.count;
    }
}
