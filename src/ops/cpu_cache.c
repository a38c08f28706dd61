/* The CPU's cache hierarchy as the kernel reports it (see ops/cpu_cache.h).
 *
 * Order of the sources: Linux's sysfs cache tree (cacheinfo: one directory
 * per cache of a CPU, index0..N with level, type, size and
 * shared_cpu_list), which gives the size of one instance of each cache
 * whatever the vendor: on AMD Zen the L3 is one per CCX (core complex,
 * 8 cores on Zen 3-5) and sysfs gives that CCX's 32 MiB, on Intel one per
 * socket. Without sysfs (some containers hide it) the CPUID leaf with the
 * same per-instance description: Intel's leaf 4 (deterministic cache
 * parameters), AMD's (and Hygon's) leaf 0x8000001D (cache topology, with
 * TOPOEXT). glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) is the last resort and
 * only on other vendors: on AMD it reports leaf 0x80000006's L3 size, the
 * whole package's (256 MiB on an 8-CCD EPYC whose instances are 32 MiB).
 */
#include "ops/cpu_cache.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define HAVE_CPUID 1
#else
#define HAVE_CPUID 0
#endif

/* The first line of dir/name, trailing whitespace removed; false if absent. */
static bool read_line(const char *dir, const char *name, char *buf, size_t cap)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return false;
    size_t n = strlen(buf);
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = 0;
    return n > 0;
}

/* sysfs's "size": a decimal number with an optional K, M or G suffix
 * (the kernel writes "%uK"); 0 when malformed. */
static size_t parse_size(const char *s)
{
    if (!isdigit((unsigned char)s[0]))
        return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return 0;
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (*end == 'B')
        end++;
    if (*end || v > (SIZE_MAX >> shift) || v > (1ull << 50) >> shift) /* (1 PiB: not a cache) */
        return 0;
    return (size_t)(v << shift);
}

int txc_cpu_list_count(const char *s)
{
    int count = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return -1;
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (*end == '-') {
            if (!isdigit((unsigned char)end[1]))
                return -1;
            b = strtol(end + 1, &end, 10);
        }
        if (a < 0 || b < a || b - a >= 1 << 20 || count > (1 << 20))
            return -1;
        count += (int)(b - a + 1);
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return count > 0 ? count : -1;
}

static void keep(txc_cpu_caches *c, int level, bool data, bool unified, size_t bytes, int shared)
{
    if (level == 1 && data && bytes > c->l1d_bytes)
        c->l1d_bytes = bytes;
    if (level == 2 && bytes > c->l2_bytes)
        c->l2_bytes = bytes;
    if ((data || unified) && (level > c->llc_level || (level == c->llc_level && bytes > c->llc_bytes))) {
        c->llc_level = level;
        c->llc_bytes = bytes;
        c->llc_shared_cpus = shared;
    }
}

bool txc_cpu_caches_sysfs(const char *cpu_root, int cpu, txc_cpu_caches *out)
{
    txc_cpu_caches c = {.source = "sysfs"};
    char dir[4096], buf[256];
    int found = 0, misses = 0;
    /* index0, index1, ...: stop after a few missing names (there are no gaps
     * in the kernel's numbering; a tolerance costs nothing). */
    for (int i = 0; i < 64 && misses < 4; i++) {
        if ((size_t)snprintf(dir, sizeof dir, "%s/cpu%d/cache/index%d", cpu_root, cpu, i) >= sizeof dir)
            return false;
        if (!read_line(dir, "level", buf, sizeof buf)) {
            misses++;
            continue;
        }
        char *end;
        long level = strtol(buf, &end, 10);
        if (*end || level < 1 || level > 8)
            continue;
        if (!read_line(dir, "type", buf, sizeof buf))
            continue;
        bool data = strcmp(buf, "Data") == 0, unified = strcmp(buf, "Unified") == 0;
        if (!data && !unified) /* Instruction (or unknown) */
            continue;
        if (!read_line(dir, "size", buf, sizeof buf))
            continue;
        size_t bytes = parse_size(buf);
        if (bytes == 0)
            continue;
        int shared = read_line(dir, "shared_cpu_list", buf, sizeof buf) ? txc_cpu_list_count(buf) : 0;
        keep(&c, (int)level, data, unified, bytes, shared > 0 ? shared : 0);
        found++;
    }
    if (!found || c.llc_bytes == 0)
        return false;
    *out = c;
    return true;
}

#if HAVE_CPUID
/* Leaf 4 (Intel) and 0x8000001D (AMD) share a layout: EAX[4:0] type (1 data,
 * 2 instruction, 3 unified, 0 end), EAX[7:5] level, EAX[25:14] CPUs sharing
 * minus 1; EBX ways, partitions and line size minus 1; ECX sets minus 1. */
static bool caches_cpuid(unsigned leaf, txc_cpu_caches *out)
{
    txc_cpu_caches c = {.source = "cpuid"};
    for (unsigned i = 0; i < 16; i++) {
        unsigned a, b, cc, d;
        __cpuid_count(leaf, i, a, b, cc, d);
        unsigned type = a & 31;
        if (type == 0)
            break;
        int level = (int)((a >> 5) & 7);
        size_t bytes = (size_t)((b >> 22) + 1) * (((b >> 12) & 1023) + 1) * ((b & 4095) + 1) * ((size_t)cc + 1);
        keep(&c, level, type == 1, type == 3, bytes, (int)((a >> 14) & 4095) + 1);
    }
    if (c.llc_bytes == 0)
        return false;
    *out = c;
    return true;
}
#endif

/* CPUID's vendor string ("GenuineIntel", "AuthenticAMD", "HygonGenuine"). */
static void cpu_vendor(char v[13])
{
    memset(v, 0, 13);
#if HAVE_CPUID
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(v, &b, 4);
        memcpy(v + 4, &d, 4);
        memcpy(v + 8, &c, 4);
    }
#endif
}

/* The CPU this process would run its first thread on: the lowest in its
 * affinity mask (cpu0 may be outside it, or offline). */
static int first_cpu(void)
{
#if defined(__linux__) && defined(CPU_ISSET)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set))
                return i;
#endif
    return 0;
}

bool txc_cpu_caches_probe(const char *cpu_root, int cpu, const char *vendor, txc_cpu_caches *out)
{
    if (cpu_root && txc_cpu_caches_sysfs(cpu_root, cpu, out))
        return true;
    bool amd = strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0;
#if HAVE_CPUID
    unsigned a, b, c, d;
    if (amd && __get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x8000001D && __get_cpuid(0x80000001, &a, &b, &c, &d) &&
        (c & (1u << 22)) /* TOPOEXT */ && caches_cpuid(0x8000001D, out))
        return true;
    if (strcmp(vendor, "GenuineIntel") == 0 && __get_cpuid(0, &a, &b, &c, &d) && a >= 4 && caches_cpuid(4, out))
        return true;
#endif
    txc_cpu_caches s = {.source = "sysconf"};
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!amd) {
        long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE),
             l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        s.l1d_bytes = l1 > 0 ? (size_t)l1 : 0;
        s.l2_bytes = l2 > 0 ? (size_t)l2 : 0;
        if (l3 > 0)
            s.llc_bytes = (size_t)l3, s.llc_level = 3;
        else if (l2 > 0)
            s.llc_bytes = (size_t)l2, s.llc_level = 2;
    }
#endif
    *out = s;
    return s.llc_bytes > 0;
}

static txc_cpu_caches caches;
static pthread_once_t caches_once = PTHREAD_ONCE_INIT;

static void caches_init(void)
{
    char vendor[13];
    cpu_vendor(vendor);
    if (!txc_cpu_caches_probe("/sys/devices/system/cpu", first_cpu(), vendor, &caches))
        caches = (txc_cpu_caches){.source = "unknown"};
}

const txc_cpu_caches *txc_cpu_caches_get(void)
{
    pthread_once(&caches_once, caches_init);
    return &caches;
}
