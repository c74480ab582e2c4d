/*
 * Slurm's compressed host lists (node[01-03], a1,b[2-4,7],c,
 * rack[1-2]-n[01-02]): how many hosts a list names and which one is at a
 * given place, without expanding the whole list. Pure string work: it reads
 * no environment and resolves no name.
 */
#ifndef DD_BOOT_NODELIST_H
#define DD_BOOT_NODELIST_H

#include <dreamddp.h>

#include <stddef.h>

/**
 * Counts the hosts of a host list. Returns DD_ERR_INVALID_PARAM for a list
 * that does not parse (an unclosed bracket, a range that runs backwards, an
 * empty item) or names more than INT_MAX hosts.
 */
dd_status_t dd_boot_nodelist_count(const char *list, int *count_p);

/**
 * Writes the index-th host of a host list (0 is the first), in Slurm's
 * order: items left to right; within an item, the last bracket group varies
 * fastest. Numbers keep the width of their range's lower bound (node[08-10]
 * gives node08, node09, node10). Returns DD_ERR_NOT_FOUND when the list has
 * fewer hosts, DD_ERR_INVALID_PARAM when it does not parse or the name does
 * not fit in size bytes.
 */
dd_status_t dd_boot_nodelist_host(const char *list, int index, char *host,
                                  size_t size);

#endif
