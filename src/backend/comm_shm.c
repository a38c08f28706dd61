/* The shared-memory transport of backend/comm_impl.h: the in-process CPU
 * devices of one process (threads) exchange pointers to their buffers
 * through a group's slots and copy from one another, between two
 * barriers (a counter and a generation word: spin briefly, then sleep on
 * a futex). Every wait watches the deadline (txc_comm_timeout) and the
 * world's failure flag: a device that failed (txc_comm_shm_fail) ends its
 * peers' collectives with an error naming it, never a hang. */
#define _GNU_SOURCE
#include "backend/comm_impl.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* A wait spins on the generation word for SPIN_S (the peer is running on
 * another core: it arrives within microseconds), then yields the CPU until
 * YIELD_S (the peer may need this core: more threads than cores), then
 * sleeps on the futex in 2 ms slices, watching the failure flag and the
 * deadline between them. */
#define SPIN_S 50e-6
#define YIELD_S 200e-6

typedef struct shm_group {
    int size;
    int members[TXC_SHM_MAX_DEVICES]; /* world ranks, in group order */
    _Alignas(64) _Atomic uint32_t arrive;
    _Alignas(64) _Atomic uint32_t gen; /* futex word */
    _Atomic int sleepers;
    const void *_Atomic ptr[TXC_SHM_MAX_DEVICES]; /* each member's buffer, by group rank */
    size_t bytes[TXC_SHM_MAX_DEVICES];
} shm_group;

typedef struct shm_device {
    struct txc_comm_world *w;
    int rank;
    txc_comm_ctx ctx;
} shm_device;

struct txc_comm_world {
    int n;
    _Atomic int failed; /* 0, or the first failed device + 1 */
    char fail_msg[1024];
    pthread_mutex_t lock;
    shm_group world;
    shm_group *groups[TXC_COMM_MAX_GROUPS][TXC_SHM_MAX_DEVICES]; /* by group index, lowest member */
    int colors[TXC_SHM_MAX_DEVICES], keys[TXC_SHM_MAX_DEVICES];
    shm_device dev[TXC_SHM_MAX_DEVICES];
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait_ms(_Atomic uint32_t *word, uint32_t expected, long ms)
{
#if defined(__linux__)
    struct timespec ts = {0, ms * 1000000L};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
#else
    (void)word, (void)expected, (void)ms;
    sched_yield();
#endif
}

static void futex_wake_all(_Atomic uint32_t *word)
{
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

static txc_status failed_error(const struct txc_comm_world *w, const char *what)
{
    int f = atomic_load(&w->failed);
    return txc_error(TXC_ERR_IO, "%s: device %d failed (%s)", what, f - 1, w->fail_msg);
}

/* Wait until every member of g arrived. */
static txc_status group_barrier(shm_device *d, shm_group *g, const char *what, size_t bytes)
{
    struct txc_comm_world *w = d->w;
    if (atomic_load_explicit(&w->failed, memory_order_acquire))
        return failed_error(w, what);
    const uint32_t gen = atomic_load_explicit(&g->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&g->arrive, 1, memory_order_acq_rel) == (uint32_t)g->size - 1) {
        atomic_store_explicit(&g->arrive, 0, memory_order_relaxed);
        atomic_store(&g->gen, gen + 1); /* (seq_cst: ordered before the sleepers' load) */
        if (atomic_load(&g->sleepers))
            futex_wake_all(&g->gen);
        return TXC_OK;
    }
    const double t0 = txc_comm_now(), deadline = t0 + txc_comm_timeout();
    for (int i = 0;; i++) {
        if (atomic_load_explicit(&g->gen, memory_order_acquire) != gen)
            return TXC_OK;
        cpu_relax();
        if ((i & 63) == 63) {
            double t = txc_comm_now() - t0;
            if (t > YIELD_S)
                break;
            if (t > SPIN_S)
                sched_yield();
        }
    }
    char who[32];
    snprintf(who, sizeof who, "device %d", d->rank);
    for (;;) {
        atomic_fetch_add(&g->sleepers, 1);
        futex_wait_ms(&g->gen, gen, 2);
        atomic_fetch_sub(&g->sleepers, 1);
        if (atomic_load_explicit(&g->gen, memory_order_acquire) != gen)
            return TXC_OK;
        if (atomic_load_explicit(&w->failed, memory_order_acquire))
            return failed_error(w, what);
        txc_comm_check_deadline(deadline, who, what, bytes);
    }
}

static int rank_in(const shm_group *g, int world_rank)
{
    for (int i = 0; i < g->size; i++)
        if (g->members[i] == world_rank)
            return i;
    return -1;
}

static txc_status shm_split(void *self, int gi, int color, int key, void **handle, int *size, int *rank)
{
    shm_device *d = self;
    struct txc_comm_world *w = d->w;
    w->colors[d->rank] = color;
    w->keys[d->rank] = key;
    txc_status s = group_barrier(d, &w->world, "mesh (split)", 0);
    if (s)
        return s;
    /* the members of this color ordered by (key, world rank), as MPI_Comm_split */
    int members[TXC_SHM_MAX_DEVICES] = {0}, n = 0;
    for (int r = 0; r < w->n; r++) {
        if (w->colors[r] != color)
            continue;
        int j = n++;
        while (j > 0 && w->keys[members[j - 1]] > w->keys[r]) {
            members[j] = members[j - 1];
            j--;
        }
        members[j] = r;
    }
    int low = members[0];
    for (int i = 1; i < n; i++)
        low = members[i] < low ? members[i] : low;
    if (low == d->rank) {
        shm_group *g = calloc(1, sizeof *g);
        if (g) {
            g->size = n;
            memcpy(g->members, members, sizeof(int) * (size_t)n);
        }
        w->groups[gi][low] = g;
    }
    if ((s = group_barrier(d, &w->world, "mesh (split)", 0)))
        return s;
    shm_group *g = w->groups[gi][low];
    if (!g)
        return txc_error(TXC_ERR_NOMEM, "out of memory (communicator group)");
    *handle = g;
    *size = g->size;
    *rank = rank_in(g, d->rank);
    return TXC_OK;
}

static txc_status shm_all_gather(void *self, void *handle, const void *send, void *recv, size_t bytes,
                                 const char *what)
{
    shm_device *d = self;
    shm_group *g = handle;
    const int me = rank_in(g, d->rank);
    g->bytes[me] = bytes;
    atomic_store_explicit(&g->ptr[me], send, memory_order_relaxed);
    txc_status s = group_barrier(d, g, what, bytes); /* (its release/acquire publishes the slots) */
    if (s)
        return s;
    bool same = true;
    for (int r = 0; r < g->size; r++)
        same &= g->bytes[r] == bytes;
    if (same)
        for (int r = 0; r < g->size; r++) /* in group order: every device the same copy of each part */
            memcpy((char *)recv + (size_t)r * bytes, atomic_load_explicit(&g->ptr[r], memory_order_relaxed), bytes);
    /* nobody leaves (and reuses its buffer) before every member copied */
    if ((s = group_barrier(d, g, what, bytes)))
        return s;
    return same ? TXC_OK
                : txc_error(TXC_ERR_INVALID, "%s: the devices sent different sizes (%zu bytes here)", what, bytes);
}

static txc_status shm_broadcast(void *self, void *handle, void *buf, size_t bytes, int root, const char *what)
{
    shm_device *d = self;
    shm_group *g = handle;
    const int me = rank_in(g, d->rank);
    g->bytes[me] = bytes;
    atomic_store_explicit(&g->ptr[me], buf, memory_order_relaxed);
    txc_status s = group_barrier(d, g, what, bytes);
    if (s)
        return s;
    const bool same = g->bytes[root] == bytes;
    if (same && me != root)
        memcpy(buf, atomic_load_explicit(&g->ptr[root], memory_order_relaxed), bytes);
    if ((s = group_barrier(d, g, what, bytes)))
        return s;
    return same ? TXC_OK
                : txc_error(TXC_ERR_INVALID, "%s: the devices sent different sizes (%zu bytes here)", what, bytes);
}

static txc_status shm_barrier(void *self, void *handle, const char *what)
{
    return group_barrier(self, handle, what, 0);
}

static const txc_comm_backend shm_backend = {
    .name = "shared memory", .split = shm_split, .all_gather = shm_all_gather, .broadcast = shm_broadcast,
    .barrier = shm_barrier};

txc_comm_world *txc_comm_shm_new(int n_devices)
{
    if (n_devices < 1 || n_devices > TXC_SHM_MAX_DEVICES) {
        txc_error(TXC_ERR_INVALID, "devices: 1 to %d in one process, got %d", TXC_SHM_MAX_DEVICES, n_devices);
        return NULL;
    }
    txc_comm_world *w = calloc(1, sizeof *w);
    if (!w) {
        txc_error(TXC_ERR_NOMEM, "out of memory (devices)");
        return NULL;
    }
    w->n = n_devices;
    w->world.size = n_devices;
    for (int i = 0; i < n_devices; i++)
        w->world.members[i] = i;
    pthread_mutex_init(&w->lock, NULL);
    return w;
}

void txc_comm_shm_free(txc_comm_world *w)
{
    if (!w)
        return;
    for (int g = 0; g < TXC_COMM_MAX_GROUPS; g++)
        for (int r = 0; r < TXC_SHM_MAX_DEVICES; r++)
            free(w->groups[g][r]);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

txc_status txc_comm_shm_bind(txc_comm_world *w, int device)
{
    if (!w) {
        txc_comm_ctx_bind(NULL);
        return TXC_OK;
    }
    if (txc_comm_init() != TXC_OK)
        return txc_last_status();
    if (device < 0 || device >= w->n)
        return txc_error(TXC_ERR_INVALID, "devices: no device %d of %d", device, w->n);
    shm_device *d = &w->dev[device];
    memset(d, 0, sizeof *d);
    d->w = w;
    d->rank = device;
    txc_comm_ctx *c = &d->ctx;
    c->be = w->n > 1 ? &shm_backend : NULL;
    c->self = d;
    c->rank = device;
    c->size = w->n;
    c->n_groups = 1;
    c->group_sizes[0] = w->n;
    c->group_ranks[0] = device;
    c->handles[0] = &w->world;
    txc_comm_ctx_bind(c);
    return TXC_OK;
}

void txc_comm_shm_fail(txc_comm_world *w, int device, const char *msg)
{
    pthread_mutex_lock(&w->lock);
    if (!atomic_load(&w->failed)) {
        snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg && *msg ? msg : "no message");
        atomic_store(&w->failed, device + 1);
    }
    pthread_mutex_unlock(&w->lock);
}

int txc_comm_shm_failed(const txc_comm_world *w, const char **msg)
{
    int f = atomic_load(&((txc_comm_world *)w)->failed);
    if (msg)
        *msg = f ? w->fail_msg : NULL;
    return f - 1;
}
