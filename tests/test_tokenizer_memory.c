/*
 * What a tokenizer holds once loaded: the parse tree of tokenizer.json
 * (cJSON's, about a million small allocations for a large vocabulary) is
 * freed and handed back to the system at the end of txc_tokenizer_load
 * (malloc_trim on glibc), so the RSS it leaves behind is its tables, not
 * the tree as well. Qwen3's tokenizer.json (11 MB, 151k tokens and merges)
 * from ../shared/tokenizers; skipped where it is absent, under ASan (its
 * allocator keeps freed memory in quarantine) and off glibc.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "txc/tokenizer.h"

static void test_load_leaves_tables_only(void **state)
{
    (void)state;
#ifndef __GLIBC__
    skip();
#endif
    if (!TU_HEAP_COUNTED)
        skip();
    const char *dir = tu_path("%s/tokenizers/qwen3", tu_shared_dir());
    struct stat sb;
    if (stat(tu_path("%s/tokenizer.json", dir), &sb) != 0) {
        print_message("skipped: %s/tokenizer.json is absent\n", dir);
        skip();
    }
    txc_tokenizer *t = NULL;
    long before = tu_status_kb("VmRSS:");
    assert_int_equal(txc_tokenizer_load(dir, &t), TXC_OK);
    long after = tu_status_kb("VmRSS:");
    assert_true(before > 0 && after > 0);
    long file_kb = (long)(sb.st_size / 1024);
    if (getenv("TU_VERBOSE"))
        print_message("the tokenizer holds %ld KiB of RSS (tokenizer.json: %ld KiB)\n", after - before, file_kb);
    /* its tables: here 1.7x the file (19 MiB); with the freed tree kept, 7x (80 MiB) */
    if (after - before > 4 * file_kb)
        fail_msg("loading a %ld KiB tokenizer.json left %ld KiB more RSS: over 4x the file (the parse tree's "
                 "freed heap kept?)", file_kb, after - before);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(txc_tokenizer_encode(t, "Hello", 5, false, &ids, &n), TXC_OK);
    assert_true(n == 1); /* "Hello": one token of Qwen3's vocabulary */
    free(ids);
    txc_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_leaves_tables_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
