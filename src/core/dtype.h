/*
 * The element types' sizes, in one table: dd_dtype_size() returns it, and
 * the modules (backends, devices), which link none of the library, read it
 * inline, with whether a type is a float. Nothing else here; the names
 * are in dtype.c.
 */
#ifndef DD_CORE_DTYPE_H
#define DD_CORE_DTYPE_H

#include <dreamddp.h>

#include <stddef.h>

/** Bytes of one element; 0 for an invalid dtype. */
static inline size_t dd_coll_dtype_size(dd_dtype_t dtype)
{
    static const unsigned char sizes[DD_DTYPE_LAST] = {4, 8, 2, 2, 4, 8, 1};
    return (unsigned)dtype < DD_DTYPE_LAST ? sizes[dtype] : 0;
}

/** Whether dtype is a floating-point type. */
static inline int dd_dtype_is_float(dd_dtype_t dtype)
{
    return dtype == DD_DTYPE_F32 || dtype == DD_DTYPE_F64 ||
           dtype == DD_DTYPE_F16 || dtype == DD_DTYPE_BF16;
}

#endif
