/*
 * Run-time CPU feature checks for the vector paths: every test of an
 * instruction set goes through dd_cpu_has(), which asks CPUID once per
 * process. CPUID is read directly rather than through
 * __builtin_cpu_supports, which clang before 16 does not know "f16c" in;
 * a feature counts only when the OS saves the registers it uses (XCR0).
 */
#ifndef DD_CORE_CPU_H
#define DD_CORE_CPU_H

/** Instruction sets that a vector path needs (bits, combined with |). */
typedef enum {
    DD_CPU_F16C = 1u << 0, /* F16C and AVX: f16 <-> f32 in eight lanes */
    DD_CPU_AVX2 = 1u << 1, /* AVX2: 256-bit integer lanes */
} dd_cpu_feature_t;

/**
 * Whether this CPU, and the OS, run every feature in mask (DD_CPU_* bits).
 * Always 0 off x86. Any thread; the first call probes, later ones read.
 */
int dd_cpu_has(unsigned mask);

#endif
