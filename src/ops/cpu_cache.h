/*
 * ops/cpu_cache.h — the CPU's cache sizes as the Linux kernel reports them
 * (not a public header): what txc bench compares a model's bytes per token
 * with (tools/peak.h's txc_llc_bytes), and what the GEMM's cache blocking
 * may size itself by.
 */
#ifndef TXC_OPS_CPU_CACHE_H
#define TXC_OPS_CPU_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* One CPU's caches; every size is one instance of that cache (bytes). */
typedef struct txc_cpu_caches {
    size_t l1d_bytes;    /* level-1 data cache, 0: unknown */
    size_t l2_bytes;     /* level-2 cache, 0: unknown */
    size_t llc_bytes;    /* the highest level's data or unified cache, 0: unknown */
    int llc_level;       /* its level (3 on most x86 servers), 0: unknown */
    int llc_shared_cpus; /* CPUs sharing that instance (shared_cpu_list / CPUID), 0: unknown */
    const char *source;  /* "sysfs", "cpuid", "sysconf" or "unknown" */
} txc_cpu_caches;

/* Read <cpu_root>/cpu<cpu>/cache/index<N>/{level,type,size,shared_cpu_list}
 * (Linux's cacheinfo; cpu_root is normally "/sys/devices/system/cpu",
 * tests pass a tree of their own). Instruction caches are skipped, as are
 * entries whose level, type or size is missing or malformed ("32768K",
 * "512K", "2M" are sizes). Returns false, leaving *out untouched, when no
 * data or unified cache was found. */
bool txc_cpu_caches_sysfs(const char *cpu_root, int cpu, txc_cpu_caches *out);

/* Everything txc_cpu_caches_get() tries, with its inputs given: sysfs under
 * cpu_root (NULL: skipped); else CPUID's per-instance leaf for the vendor
 * string ("AuthenticAMD"/"HygonGenuine": 0x8000001D, "GenuineIntel": 4);
 * else sysconf, except on AMD (glibc reports the package's whole L3 there,
 * CPUID 0x80000006). False with *out zeroed (source "sysconf") when nothing
 * is known. */
bool txc_cpu_caches_probe(const char *cpu_root, int cpu, const char *vendor, txc_cpu_caches *out);

/* This machine's caches for the first CPU of the process's affinity mask,
 * probed once (thread-safe); never NULL. */
const txc_cpu_caches *txc_cpu_caches_get(void);

/* CPUs in a Linux CPU list ("0-3,8-11" is 8, "5" is 1); -1 when malformed. */
int txc_cpu_list_count(const char *list);

#endif
