/*
 * Names and sizes of the public element types (the sizes' table is in
 * dtype.h), reductions, memory types and operations, for messages, tools
 * and the configuration. Includes nothing but core and the public header.
 */
#include "core/dtype.h"

#include <dreamddp.h>

size_t dd_dtype_size(dd_dtype_t dtype)
{
    return dd_coll_dtype_size(dtype);
}

const char *dd_dtype_name(dd_dtype_t dtype)
{
    static const char *const names[DD_DTYPE_LAST] = {
        "f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
    return (unsigned)dtype < DD_DTYPE_LAST ? names[dtype] : "?";
}

const char *dd_reduce_op_name(dd_reduce_op_t op)
{
    static const char *const names[DD_REDUCE_LAST] = {"sum", "avg", "max",
                                                      "min"};
    return (unsigned)op < DD_REDUCE_LAST ? names[op] : "?";
}

const char *dd_mem_type_name(dd_mem_type_t mem_type)
{
    static const char *const names[DD_MEM_LAST] = {"host", "cuda"};
    return (unsigned)mem_type < DD_MEM_LAST ? names[mem_type] : "?";
}

const char *dd_coll_name(dd_coll_t coll)
{
    static const char *const names[DD_COLL_LAST] = {
        "allreduce", "broadcast", "reduce_scatter", "allgather"};
    return (unsigned)coll < DD_COLL_LAST ? names[coll] : "?";
}
