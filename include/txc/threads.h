/*
 * txc/threads.h — the CPU thread pool (backend layer).
 *
 * A pool (the process's, or an in-process device's, see below): persistent workers, created on the first parallel
 * call after a thread count > 1 is chosen, never per op or per token. A
 * parallel call wakes them through one generation counter (workers spin
 * briefly on it, then sleep on a futex) and waits for them the same way;
 * it allocates nothing. With more threads than CPUs the spin adapts (2-200
 * us): it halves after a wait that outlasted it by far (spinning took the
 * core the other thread needed) and doubles after one that ended just after
 * it. Work is split by the caller into tasks (output
 * rows, heads); thread i of n runs tasks i, i + n, ... (the caller is
 * thread 0), so a thread gets the same tasks on every call.
 *
 * The thread count: txc_threads_set(n); 0 restores the default, which is
 * TXC_THREADS from the environment when set to a positive integer, else
 * the number of CPUs this process may run on (sched_getaffinity).
 * txc_threads_set(1) joins the workers; they are joined at exit too.
 *
 * A parallel call made from inside a task, or while another thread's
 * parallel call holds the pool, runs its tasks serially on the calling
 * thread (same results: the split is the caller's, not the pool's).
 *
 * Pools: the process has one; an in-process CPU device (txc/shard.h,
 * txc_devices_run) has its own, bound to its thread (txc_thread_pool_bind):
 * that thread's parallel calls, txc_threads_get and txc_threads_set use its
 * pool, so the devices' threads never wait for one another inside an op.
 */
#ifndef TXC_THREADS_H
#define TXC_THREADS_H

#include <stdint.h>
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_MAX_THREADS 256

/* The thread count parallel calls use (>= 1). */
int txc_threads_get(void);
/* Set it (1..TXC_MAX_THREADS; 0: the default). Workers beyond the new
 * count are joined. TXC_ERR_INVALID for n < 0 or n > TXC_MAX_THREADS. */
txc_status txc_threads_set(int n);
/* The default: TXC_THREADS, else the CPUs of this process's affinity mask. */
int txc_threads_default(void);

/* A task: `task` in [0, n_tasks); per-task results go to per-task slots. */
typedef void (*txc_task_fn)(void *ctx, int64_t task);

/* Run fn(ctx, t) for every t in [0, n_tasks) on the pool and the calling
 * thread; returns when all are done (their writes visible). */
void txc_parallel_for(int64_t n_tasks, txc_task_fn fn, void *ctx);
/* As txc_parallel_for, but each thread takes the next task not yet taken
 * (an atomic counter tagged with the job's generation) instead of a fixed
 * share, and the caller waits only for the tasks, not for every worker: a
 * worker that is not running (another process has its core) holds nothing
 * up — the caller and the running workers take its tasks. For many equal
 * tasks, like a memory-bound GEMV's row chunks. Which thread runs a task varies from call
 * to call, so tasks must not depend on per-thread state sized by earlier
 * calls (no growing scratch buffers). */
void txc_parallel_for_dynamic(int64_t n_tasks, txc_task_fn fn, void *ctx);

/* A function every worker calls before it exits (e.g. to free its
 * thread-local scratch buffers); one at most. Takes no lock: it may be
 * called from inside a parallel task. */
void txc_threads_set_worker_exit(void (*fn)(void));

/* Run the worker-exit function (txc_threads_set_worker_exit) on the
 * calling thread: for a thread that made parallel calls and ends (an
 * in-process device's), as workers do when they exit. */
void txc_threads_thread_exit(void);

/* A pool of its own (n_threads 1..TXC_MAX_THREADS: the binding thread and
 * n_threads - 1 workers, started on its first parallel call). NULL on
 * error (TXC_ERR_INVALID, TXC_ERR_NOMEM). */
typedef struct txc_thread_pool txc_thread_pool;
txc_thread_pool *txc_thread_pool_new(int n_threads);
/* Joins its workers; the pool must not be bound to a thread any more. */
void txc_thread_pool_free(txc_thread_pool *pool);
/* The pool the calling thread's parallel calls use from now on (NULL: the
 * process's); returns the one bound before (NULL: the process's). */
txc_thread_pool *txc_thread_pool_bind(txc_thread_pool *pool);

/* Join every worker now (the count is kept: the next parallel call starts
 * them again). Also run at exit. */
void txc_threads_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
