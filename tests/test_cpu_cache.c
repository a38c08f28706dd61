/* The cache hierarchy read from Linux's sysfs (src/ops/cpu_cache.c), on
 * fake trees written here:
 * - an AMD EPYC Zen 3/5 (L3 32 MiB per CCX, "32768K", shared by 16 CPUs)
 *   reads 32 MiB, not glibc's package-wide 256-384 MiB;
 * - an Intel Xeon (L3 "107520K" per socket) reads 105 MiB;
 * - instruction caches never count, a machine without L3 reports its L2,
 *   malformed entries are skipped, a missing tree is "not found";
 * - the CPU list parser; the probe's fallbacks (no sysfs: AMD never trusts
 *   sysconf);
 * - on this machine, when /sys has a cache tree, txc_cpu_caches_get() is
 *   what that tree says.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/cpu_cache.h"

/* root/cpu<cpu>/cache/index<i>/{level,type,size,shared_cpu_list}; a NULL
 * field is not written. */
static void write_index(const char *root, int cpu, int i, const char *level, const char *type, const char *size,
                        const char *shared)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/cpu%d", root, cpu);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/cpu%d/cache", root, cpu);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/cpu%d/cache/index%d", root, cpu, i);
    assert_int_equal(mkdir(dir, 0755), 0);
    const char *names[] = {"level", "type", "size", "shared_cpu_list"};
    const char *vals[] = {level, type, size, shared};
    for (int k = 0; k < 4; k++) {
        if (!vals[k])
            continue;
        char line[256];
        snprintf(line, sizeof line, "%s\n", vals[k]);
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        assert_int_equal(tu_write_file(path, line, strlen(line)), 0);
    }
}

static void test_amd_l3_per_ccx(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    write_index(root, 0, 0, "1", "Data", "32K", "0,64");
    write_index(root, 0, 1, "1", "Instruction", "32K", "0,64");
    write_index(root, 0, 2, "2", "Unified", "1024K", "0,64");
    write_index(root, 0, 3, "3", "Unified", "32768K", "0-7,64-71");
    txc_cpu_caches c;
    assert_true(txc_cpu_caches_sysfs(root, 0, &c));
    assert_int_equal(c.llc_bytes, (size_t)32 << 20);
    assert_int_equal(c.llc_level, 3);
    assert_int_equal(c.llc_shared_cpus, 16);
    assert_int_equal(c.l1d_bytes, (size_t)32 << 10);
    assert_int_equal(c.l2_bytes, (size_t)1 << 20);
    assert_string_equal(c.source, "sysfs");
    /* The probe takes sysfs first whatever the vendor. */
    memset(&c, 0, sizeof c);
    assert_true(txc_cpu_caches_probe(root, 0, "AuthenticAMD", &c));
    assert_int_equal(c.llc_bytes, (size_t)32 << 20);
    /* Another CPU of the tree is not there: not found, *out untouched. */
    c.llc_bytes = 7;
    assert_false(txc_cpu_caches_sysfs(root, 1, &c));
    assert_int_equal(c.llc_bytes, 7);
    tu_rm_rf(root);
}

static void test_intel_and_odd_trees(void **state)
{
    (void)state;
    char *root = tu_mkdtemp();
    /* Intel: one L3 per socket, an L1i listed last and bigger than the rest. */
    write_index(root, 0, 0, "1", "Data", "48K", "0,56");
    write_index(root, 0, 1, "2", "Unified", "2048K", "0,56");
    write_index(root, 0, 2, "3", "Unified", "107520K", "0-55,112-167");
    write_index(root, 0, 3, "4", "Instruction", "1G", "0-223");
    /* A CPU without L3 (a small Arm core): its L2 is the last level; a
     * malformed L3 entry (size "lots") and one without a type are skipped. */
    write_index(root, 3, 0, "1", "Data", "64K", "3");
    write_index(root, 3, 1, "2", "Unified", "2M", "2-3");
    write_index(root, 3, 2, "3", "Unified", "lots", "0-3");
    write_index(root, 3, 3, "3", NULL, "8M", "0-3");
    /* Only an instruction cache: nothing found. */
    write_index(root, 5, 0, "1", "Instruction", "32K", "5");
    /* Unknown level text and an unreadable shared list (the size counts). */
    write_index(root, 6, 0, "x", "Data", "32K", "6");
    write_index(root, 6, 1, "2", "Unified", "512K", "6-");
    txc_cpu_caches c;
    assert_true(txc_cpu_caches_sysfs(root, 0, &c));
    assert_int_equal(c.llc_bytes, (size_t)107520 << 10);
    assert_int_equal(c.llc_level, 3);
    assert_int_equal(c.llc_shared_cpus, 112);
    assert_true(txc_cpu_caches_sysfs(root, 3, &c));
    assert_int_equal(c.llc_bytes, (size_t)2 << 20);
    assert_int_equal(c.llc_level, 2);
    assert_int_equal(c.llc_shared_cpus, 2);
    assert_false(txc_cpu_caches_sysfs(root, 5, &c));
    assert_true(txc_cpu_caches_sysfs(root, 6, &c));
    assert_int_equal(c.llc_bytes, (size_t)512 << 10);
    assert_int_equal(c.llc_level, 2);
    assert_int_equal(c.llc_shared_cpus, 0);
    assert_int_equal(c.l1d_bytes, 0);
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/nothing-here", root);
    assert_false(txc_cpu_caches_sysfs(missing, 0, &c));
    tu_rm_rf(root);
}

static void test_cpu_list(void **state)
{
    (void)state;
    assert_int_equal(txc_cpu_list_count("0"), 1);
    assert_int_equal(txc_cpu_list_count("0-1"), 2);
    assert_int_equal(txc_cpu_list_count("0-7,64-71"), 16);
    assert_int_equal(txc_cpu_list_count("3,5,9-10"), 4);
    assert_int_equal(txc_cpu_list_count(""), -1);
    assert_int_equal(txc_cpu_list_count("1-"), -1);
    assert_int_equal(txc_cpu_list_count("5-2"), -1);
    assert_int_equal(txc_cpu_list_count("a"), -1);
    assert_int_equal(txc_cpu_list_count("1,,2"), -1);
}

/* Without a sysfs tree, AMD gets CPUID 0x8000001D (on an AMD CPU) or
 * nothing, never sysconf's package-wide L3. */
static void test_probe_fallbacks(void **state)
{
    (void)state;
    txc_cpu_caches c;
    char vendor[13] = {0};
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, cc, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(cc), "=d"(d) : "a"(0), "c"(0));
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &cc, 4);
#endif
    bool amd_here = strcmp(vendor, "AuthenticAMD") == 0;
    bool ok = txc_cpu_caches_probe(NULL, 0, "AuthenticAMD", &c);
    if (amd_here) {
        assert_true(ok);
        assert_string_equal(c.source, "cpuid");
        print_message("  AMD CPUID 0x8000001D: L%d %zu KiB shared by %d CPUs\n", c.llc_level, c.llc_bytes >> 10,
                      c.llc_shared_cpus);
        /* one CCX's L3 of a Zen part is at most 96 MiB (with 3D V-Cache) */
        assert_true(c.llc_bytes > 0 && c.llc_bytes <= (size_t)96 << 20);
    } else if (ok) {
        assert_string_equal(c.source, "cpuid"); /* (a non-AMD CPU answering AMD's leaf) */
    } else {
        assert_string_equal(c.source, "sysconf");
        assert_int_equal(c.llc_bytes, 0);
    }
    /* A vendor the probe does not know: sysconf (whatever it says). */
    ok = txc_cpu_caches_probe(NULL, 0, "SomeOtherCPU", &c);
    assert_string_equal(c.source, "sysconf");
    assert_true(ok == (c.llc_bytes > 0));
}

/* This machine: what its own sysfs tree says, for the CPU the probe used. */
static void test_this_machine(void **state)
{
    (void)state;
    const txc_cpu_caches *g = txc_cpu_caches_get();
    print_message("  this machine: L%d %zu KiB (shared by %d CPUs), L2 %zu KiB, L1d %zu KiB, from %s\n",
                  g->llc_level, g->llc_bytes >> 10, g->llc_shared_cpus, g->l2_bytes >> 10, g->l1d_bytes >> 10,
                  g->source);
    struct stat st;
    if (stat("/sys/devices/system/cpu/cpu0/cache/index0", &st) != 0) {
        print_message("  no sysfs cache tree here\n");
        return;
    }
    assert_string_equal(g->source, "sysfs");
    bool same = false;
    for (int cpu = 0; cpu < 4096 && !same; cpu++) {
        txc_cpu_caches c;
        if (txc_cpu_caches_sysfs("/sys/devices/system/cpu", cpu, &c))
            same = c.llc_bytes == g->llc_bytes && c.llc_level == g->llc_level;
    }
    assert_true(same);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_amd_l3_per_ccx),     cmocka_unit_test(test_intel_and_odd_trees),
        cmocka_unit_test(test_cpu_list),           cmocka_unit_test(test_probe_fallbacks),
        cmocka_unit_test(test_this_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
