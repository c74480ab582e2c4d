/*
 * Run-time CPU feature checks for the vector paths. Only F16C needs this
 * header: clang before 16 does not know "f16c" in __builtin_cpu_supports,
 * so it is read from CPUID, with the OS's AVX state checked too. No state.
 */
#ifndef DD_CORE_CPU_H
#define DD_CORE_CPU_H

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/** Whether the CPU and the OS run F16C and AVX instructions. */
static inline int dd_cpu_has_f16c_avx(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        return 0;
    }
    /* OSXSAVE (27), AVX (28), F16C (29); then XCR0 enables XMM and YMM. */
    if ((c & (7u << 27)) != (7u << 27)) {
        return 0;
    }
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
}
#else
static inline int dd_cpu_has_f16c_avx(void)
{
    return 0;
}
#endif

#endif
