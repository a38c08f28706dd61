/*
 * What a tokenizer holds once loaded: the parse tree of tokenizer.json
 * (cJSON's, about a million small allocations for a large vocabulary) is
 * freed and handed back to the system at the end of txc_tokenizer_load
 * (malloc_trim on glibc), so the RSS it leaves behind is its tables, not
 * the tree as well. Qwen3's tokenizer.json (11 MB, 151k tokens and merges)
 * from ../shared/tokenizers; skipped where it is absent, under ASan (its
 * allocator keeps freed memory in quarantine) and off glibc. And loads
 * from several threads at once.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats/files.h"
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

/* Four threads load the same tokenizer at once, as the four devices of
 * `txc generate --devices cpu:4` do, each trimming the heap after its parse.
 * Under AddressSanitizer glibc's malloc_trim raced in its lazy set-up of
 * arenas that glibc never used and crashed (SEGV at 0x8 in mtrim); every
 * load must succeed and encode the same ids. stories260K's tokenizer.json
 * is small, so the loads overlap many times over the rounds. */
#define LOADERS 4
struct loader { const char *dir; txc_status st; size_t n; int32_t id0; };

static void *load_one(void *arg)
{
    struct loader *l = arg;
    for (int round = 0; round < 8 && l->st == TXC_OK; round++) {
        txc_tokenizer *t = NULL;
        l->st = txc_tokenizer_load(l->dir, &t);
        if (l->st != TXC_OK)
            break;
        int32_t *ids = NULL;
        l->st = txc_tokenizer_encode(t, "Once upon a time", 16, false, &ids, &l->n);
        if (l->st == TXC_OK && l->n > 0)
            l->id0 = ids[0];
        free(ids);
        txc_tokenizer_free(t);
    }
    return NULL;
}

static void test_loads_from_threads_at_once(void **state)
{
    (void)state;
    const char *dir = tu_path("%s/models/stories260K", tu_shared_dir());
    struct loader l[LOADERS];
    pthread_t th[LOADERS];
    for (int i = 0; i < LOADERS; i++) {
        l[i] = (struct loader){.dir = dir, .st = TXC_OK};
        assert_int_equal(pthread_create(&th[i], NULL, load_one, &l[i]), 0);
    }
    for (int i = 0; i < LOADERS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < LOADERS; i++) {
        assert_int_equal(l[i].st, TXC_OK);
        assert_true(l[i].n > 0);
        assert_int_equal(l[i].n, l[0].n);
        assert_int_equal(l[i].id0, l[0].id0);
    }
}

/* The heap trim itself, from four threads released by one barrier in a
 * fresh process, the first trim of that process: the race above was in
 * glibc's first-call set-up, so it needs a new process each time (fork).
 * With malloc_trim called bare under ASan, about 15% of such processes
 * died; 40 processes must all exit 0. It runs first in main(): a trim
 * in this process before the forks would have done the set-up for them. */
static pthread_barrier_t trim_barrier;

static void *trim_at_once(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&trim_barrier);
    txc_hf_trim_heap();
    return NULL;
}

static void test_first_trims_race_free(void **state)
{
    (void)state;
    int died = 0;
    for (int k = 0; k < 40; k++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            pthread_t th[LOADERS];
            if (pthread_barrier_init(&trim_barrier, NULL, LOADERS) != 0)
                _exit(3);
            for (int i = 0; i < LOADERS; i++)
                if (pthread_create(&th[i], NULL, trim_at_once, NULL) != 0)
                    _exit(3);
            for (int i = 0; i < LOADERS; i++)
                pthread_join(th[i], NULL);
            _exit(0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        died += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (died)
        fail_msg("%d of 40 processes died trimming the heap from %d threads at once", died, LOADERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: no trim may have run in this process before its forks */
        cmocka_unit_test(test_first_trims_race_free),
        cmocka_unit_test(test_load_leaves_tables_only),
        cmocka_unit_test(test_loads_from_threads_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
