/* The CPU thread pools (the process's, and one per in-process device):
 * persistent workers, one generation counter to post a
 * job, a fixed task-to-thread mapping, a pending counter to wait on; spin briefly,
 * then sleep on a futex (Linux) — see include/txc/threads.h. */
#define _GNU_SOURCE
#include "txc/threads.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

/* How long a waiting thread spins before it sleeps: 100 us; when the pool
 * has more threads than the CPUs it may run on, adaptive between
 * SPIN_MIN_NS and SPIN_MAX_NS (as glibc's adaptive mutexes and OpenMP's
 * throttled spinning): a wait that outlasted its spin by far means the
 * thread waited on was not running — spinning took the core it needed —
 * so the next spin is halved; a wait that ended soon after the spin gave up
 * doubles it. (Measured on 2 cores, smollm2-135m decode: 4 threads ran 2.2x
 * faster adaptive than with the fixed spin; 2 threads beside other
 * processes ran 10-15% slower adaptive, so the fixed spin stays there.) */
#define SPIN_MIN_NS 2000
#define SPIN_MAX_NS 200000
struct txc_thread_pool;
typedef struct worker_arg {
    struct txc_thread_pool *pool;
    int id;
} worker_arg;

struct txc_thread_pool {
    pthread_mutex_t lock; /* held by a parallel call, by set/shutdown */
    int n_threads;        /* configured; 0: not yet resolved */
    int n_workers;        /* running workers (the caller is the extra thread) */
    pthread_t tid[TXC_MAX_THREADS];
    uint32_t start_gen;
    /* The job, published as a seqlock: the caller makes gen odd, writes the
     * fields, makes gen even (the futex word workers wait on); a worker
     * reads gen, the fields, and gen again, and takes the job only if both
     * reads agree and are even. */
    _Atomic uint32_t gen;
    _Atomic(txc_task_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n_tasks;
    _Atomic int n_run;  /* threads running the job: the workers and the caller */
    _Atomic bool dynamic;
    /* Fixed shares: every worker runs its share and counts down pending. */
    _Atomic uint32_t pending; /* futex word */
    /* Tasks on demand: claim = (gen << 32) | next task, taken by CAS, so a
     * late worker can never take a task of a later job; done counts the
     * finished tasks (futex word). The caller waits for done only: a worker
     * that is not running (another process has its core) holds nothing up. */
    _Atomic uint64_t claim;
    _Atomic uint32_t done;
    _Atomic int sleepers;     /* workers asleep (or about to be) on gen */
    _Atomic int main_waiting;
    _Atomic int stop;
    bool atexit_done;
    _Atomic int64_t spin_ns; /* how long a wait spins before it sleeps */
    _Atomic int spin_adapts; /* set while the pool has more threads than CPUs */
    worker_arg args[TXC_MAX_THREADS];
};

#define SPIN_DEFAULT_NS 100000

/* The process's pool, and the one this thread's parallel calls use (an
 * in-process device's own, txc_thread_pool_bind; NULL: the process's). */
static struct txc_thread_pool process_pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .spin_ns = SPIN_DEFAULT_NS};
static _Thread_local struct txc_thread_pool *bound_pool;
static void (*_Atomic worker_exit)(void); /* one for every pool */

static inline struct txc_thread_pool *current(void) { return bound_pool ? bound_pool : &process_pool; }

static void adapt_spin(struct txc_thread_pool *p, int64_t spun, int64_t waited)
{
    if (!atomic_load_explicit(&p->spin_adapts, memory_order_relaxed))
        return;
    int64_t s = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    if (waited > 4 * spun + 20000)
        s = s / 2 < SPIN_MIN_NS ? SPIN_MIN_NS : s / 2;
    else
        s = s * 2 > SPIN_MAX_NS ? SPIN_MAX_NS : s * 2;
    atomic_store_explicit(&p->spin_ns, s, memory_order_relaxed);
}

static _Thread_local bool in_task; /* nested calls run serially */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)word, (void)expected;
    sched_yield();
#endif
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#else
    (void)word, (void)n;
#endif
}

/* Wait until *word != value (spin, then sleep); returns the new value.
 * `sleeping` counts the sleepers so that the writer knows to wake them. */
static uint32_t wait_change(struct txc_thread_pool *p, _Atomic uint32_t *word, uint32_t value, _Atomic int *sleeping)
{
    uint32_t v;
    int64_t t0 = 0, t = 0;
    const int64_t limit = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    for (int i = 0;; i++) {
        if ((v = atomic_load_explicit(word, memory_order_acquire)) != value)
            return v;
        cpu_relax();
        if ((i & 255) == 255) {
            t = now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > limit)
                break;
        }
    }
    atomic_fetch_add(sleeping, 1);
    while ((v = atomic_load(word)) == value)
        futex_wait(word, value);
    atomic_fetch_sub(sleeping, 1);
    adapt_spin(p, t - t0, now_ns() - t0);
    return v;
}

/* Thread `id` of `n` runs tasks id, id + n, ...: a fixed mapping, so a
 * thread reads the same slice of a weight on every call (its caches) and
 * its scratch buffers are sized by the first call. */
static void run_share(int id, int n, txc_task_fn fn, void *ctx, int64_t n_tasks)
{
    for (int64_t t = id; t < n_tasks; t += n)
        fn(ctx, t);
}

/* Take tasks of job `g` until none is left (or the job is over). */
static void run_claims(struct txc_thread_pool *p, uint32_t g, txc_task_fn fn, void *ctx, int64_t n_tasks)
{
    
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(c >> 32) != g || (int64_t)(c & 0xffffffffu) >= n_tasks)
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        fn(ctx, (int64_t)(c & 0xffffffffu));
        uint32_t d = atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1;
        if ((int64_t)d == n_tasks && atomic_load(&p->main_waiting))
            futex_wake(&p->done, 1);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg_)
{
    const worker_arg *arg = arg_;
    struct txc_thread_pool *const p = arg->pool;
    const int id = arg->id;
    in_task = true;
    uint32_t seen = p->start_gen;
    for (;;) {
        uint32_t g = wait_change(p, &p->gen, seen, &p->sleepers);
        while (g & 1) { /* the caller is writing a job: it takes no time */
            cpu_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (atomic_load(&p->stop))
            break;
        txc_task_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        int64_t n_tasks = atomic_load_explicit(&p->n_tasks, memory_order_relaxed);
        int n_run = atomic_load_explicit(&p->n_run, memory_order_relaxed);
        bool dynamic = atomic_load_explicit(&p->dynamic, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&p->gen, memory_order_relaxed) != g) {
            seen = g; /* a newer job came while reading: take that one */
            continue;
        }
        seen = g;
        if (dynamic) {
            run_claims(p, g, fn, ctx, n_tasks);
            continue;
        }
        run_share(id, n_run, fn, ctx, n_tasks);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->main_waiting))
            futex_wake(&p->pending, 1);
    }
    txc_threads_thread_exit();
    return NULL;
}

static int cpus_available(void)
{
    int n = 0;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
#endif
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n;
}

int txc_threads_default(void)
{
    const char *e = getenv("TXC_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (!*end && v > 0)
            return v > TXC_MAX_THREADS ? TXC_MAX_THREADS : (int)v;
    }
    int n = cpus_available();
    return n > TXC_MAX_THREADS ? TXC_MAX_THREADS : n;
}

int txc_threads_get(void)
{
    struct txc_thread_pool *p = current();
    int n = __atomic_load_n(&p->n_threads, __ATOMIC_RELAXED);
    if (n > 0)
        return n;
    n = txc_threads_default();
    int zero = 0;
    __atomic_compare_exchange_n(&p->n_threads, &zero, n, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return __atomic_load_n(&p->n_threads, __ATOMIC_RELAXED);
}

/* Join every worker; the caller holds the lock. */
static void stop_workers(struct txc_thread_pool *p)
{
    if (!p->n_workers)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 2); /* (stays even: no job is being written) */
    futex_wake(&p->gen, INT_MAX);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->tid[i], NULL);
    p->n_workers = 0;
    atomic_store(&p->stop, 0);
}

static void shutdown_pool(struct txc_thread_pool *p)
{
    pthread_mutex_lock(&p->lock);
    stop_workers(p);
    pthread_mutex_unlock(&p->lock);
}

void txc_threads_shutdown(void) { shutdown_pool(current()); }

static void at_exit(void) { shutdown_pool(&process_pool); }

txc_status txc_threads_set(int n)
{
    if (n < 0 || n > TXC_MAX_THREADS)
        return txc_error(TXC_ERR_INVALID, "thread count %d out of range (1..%d, or 0 for the default)", n,
                         TXC_MAX_THREADS);
    if (n == 0)
        n = txc_threads_default();
    struct txc_thread_pool *p = current();
    pthread_mutex_lock(&p->lock);
    if (p->n_workers > n - 1)
        stop_workers(p);
    __atomic_store_n(&p->n_threads, n, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->lock);
    return TXC_OK;
}

void txc_threads_set_worker_exit(void (*fn)(void))
{
    /* No lock: it may be called from inside a parallel task, while the
     * caller of txc_parallel_for holds the pool. */
    atomic_store_explicit(&worker_exit, fn, memory_order_release);
}

void txc_threads_thread_exit(void)
{
    void (*fn)(void) = atomic_load_explicit(&worker_exit, memory_order_acquire);
    if (fn)
        fn();
}

txc_thread_pool *txc_thread_pool_new(int n_threads)
{
    if (n_threads < 1 || n_threads > TXC_MAX_THREADS) {
        txc_error(TXC_ERR_INVALID, "thread pool: %d threads (1..%d)", n_threads, TXC_MAX_THREADS);
        return NULL;
    }
    struct txc_thread_pool *p = calloc(1, sizeof *p);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory (thread pool)");
        return NULL;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        txc_error(TXC_ERR_NOMEM, "thread pool: pthread_mutex_init failed");
        return NULL;
    }
    p->n_threads = n_threads;
    p->spin_ns = SPIN_DEFAULT_NS;
    p->atexit_done = true; /* joined by txc_thread_pool_free */
    return p;
}

void txc_thread_pool_free(txc_thread_pool *p)
{
    if (!p || p == &process_pool)
        return;
    shutdown_pool(p);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

txc_thread_pool *txc_thread_pool_bind(txc_thread_pool *p)
{
    txc_thread_pool *old = bound_pool;
    bound_pool = p == &process_pool ? NULL : p;
    return old;
}

/* Start workers up to want (the caller holds the lock). */
static void start_workers(struct txc_thread_pool *p, int want)
{
    if (!p->atexit_done) {
        p->atexit_done = true;
        atexit(at_exit);
    }
    p->start_gen = atomic_load(&p->gen);
    while (p->n_workers < want) {
        worker_arg *a = &p->args[p->n_workers];
        a->pool = p;
        a->id = p->n_workers + 1;
        if (pthread_create(&p->tid[p->n_workers], NULL, worker_main, a) != 0)
            break; /* run with the ones there are */
        p->n_workers++;
    }
}

static void parallel_for(int64_t n_tasks, txc_task_fn fn, void *ctx, bool dynamic)
{
    if (n_tasks <= 0)
        return;
    struct txc_thread_pool *p = current();
    int nt = txc_threads_get();
    if (n_tasks == 1 || nt <= 1 || in_task || pthread_mutex_trylock(&p->lock) != 0) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t);
        return;
    }
    if (p->n_workers != nt - 1) {
        if (p->n_workers > nt - 1)
            stop_workers(p);
        start_workers(p, nt - 1);
        atomic_store(&p->spin_adapts, nt > cpus_available());
        if (nt <= cpus_available())
            atomic_store(&p->spin_ns, SPIN_DEFAULT_NS);
    }
    if (!p->n_workers) {
        pthread_mutex_unlock(&p->lock);
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t);
        return;
    }
    if (n_tasks > (int64_t)0xffffffff)
        dynamic = false; /* (a claim holds 32 bits of task index) */
    const uint32_t g0 = atomic_load_explicit(&p->gen, memory_order_relaxed), g = g0 + 2;
    atomic_store_explicit(&p->gen, g0 + 1, memory_order_relaxed); /* odd: writing */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store_explicit(&p->n_run, p->n_workers + 1, memory_order_relaxed);
    atomic_store_explicit(&p->dynamic, dynamic, memory_order_relaxed);
    atomic_store_explicit(&p->pending, dynamic ? 0 : (uint32_t)p->n_workers, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (uint64_t)g << 32, memory_order_relaxed);
    atomic_store_explicit(&p->gen, g, memory_order_release); /* publishes the job */
    if (atomic_load(&p->sleepers))
        futex_wake(&p->gen, INT_MAX);
    in_task = true;
    if (dynamic)
        run_claims(p, g, fn, ctx, n_tasks);
    else
        run_share(0, p->n_workers + 1, fn, ctx, n_tasks);
    in_task = false;
    /* Wait: for the workers' shares (pending to 0), or for the last claimed
     * task (done to n_tasks). */
    _Atomic uint32_t *word = dynamic ? &p->done : &p->pending;
    const uint32_t target = dynamic ? (uint32_t)n_tasks : 0;
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    if (v != target) {
        int64_t t0 = 0, t = 0;
        const int64_t limit = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
        for (int i = 0; (v = atomic_load_explicit(word, memory_order_acquire)) != target; i++) {
            cpu_relax();
            if ((i & 255) == 255) {
                t = now_ns();
                if (!t0)
                    t0 = t;
                else if (t - t0 > limit)
                    break;
            }
        }
        if (v != target) {
            atomic_store(&p->main_waiting, 1);
            while ((v = atomic_load(word)) != target)
                futex_wait(word, v);
            atomic_store(&p->main_waiting, 0);
            adapt_spin(p, t - t0, now_ns() - t0);
        }
    }
    pthread_mutex_unlock(&p->lock);
}

void txc_parallel_for(int64_t n_tasks, txc_task_fn fn, void *ctx) { parallel_for(n_tasks, fn, ctx, false); }

void txc_parallel_for_dynamic(int64_t n_tasks, txc_task_fn fn, void *ctx) { parallel_for(n_tasks, fn, ctx, true); }
