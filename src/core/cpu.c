/*
 * dd_cpu_has(): CPUID and XGETBV read once, the answer kept for the
 * process. No other state, no I/O.
 */
#include "core/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stddef.h>

static unsigned dd_cpu_probe(void)
{
    unsigned a, b, c, d, lo, hi, features = 0;

    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) {
        return 0;
    }
    /* XCR0 must enable the XMM and YMM state, or AVX code faults. */
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 6u) != 6u) {
        return 0;
    }
    if ((c & bit_AVX) && (c & bit_F16C)) {
        features |= DD_CPU_F16C;
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if (b & bit_AVX2) {
            features |= DD_CPU_AVX2;
        }
    }
    return features;
}
#else
static unsigned dd_cpu_probe(void)
{
    return 0;
}
#endif

int dd_cpu_has(unsigned mask)
{
    /* Racing first calls probe alike and store the same answer. */
    static int features = -1;
    int f = __atomic_load_n(&features, __ATOMIC_RELAXED);

    if (f < 0) {
        f = (int)dd_cpu_probe();
        __atomic_store_n(&features, f, __ATOMIC_RELAXED);
    }
    return ((unsigned)f & mask) == mask;
}
