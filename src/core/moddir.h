/*
 * Where the loadable modules (backends, devices) sit beside the code that
 * loads them: the directory of the object that holds this library's code
 * and, when that object is a program of a build tree linked with the
 * library's archive (tools/ddbench, tools/ddtopo, beside libdreamddp.la one
 * level up), that tree's .libs. It only names directories; it never opens
 * a module.
 */
#ifndef DD_CORE_MODDIR_H
#define DD_CORE_MODDIR_H

#include <limits.h>

#define DD_MODDIR_MAX 2

/* Fills dirs with the directories beside the code, most specific first;
 * returns how many (0 when the code's own file cannot be named). */
int dd_moddir_beside(char dirs[DD_MODDIR_MAX][PATH_MAX]);

#endif
