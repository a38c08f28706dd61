/*
 * backend/comm.h — the transport under the collectives (internal).
 *
 * A device runs the SPMD program and holds its addressable shards. Two
 * kinds of world, one interface (backend/comm_impl.h: a backend per
 * transport):
 *   - processes (JAX's multi-controller jax.distributed): every process
 *     is one device; across processes and hosts the transport is MPI (Open
 *     MPI, comm_mpi.c): the world is MPI_COMM_WORLD when the process was
 *     started by mpirun (OMPI_COMM_WORLD_SIZE / PMIX_RANK in the
 *     environment), else a world of one process and no MPI at all;
 *   - in-process CPU devices (txc_comm_shm_*, comm_shm.c): threads of one
 *     process, each bound to its device of a shared-memory world; the
 *     calls below made on such a thread are that device's.
 * Groups are sub-communicators (one per mesh axis, MPI_Comm_split's
 * semantics).
 *
 * Every call is bounded by a deadline (txc_comm_timeout, default 60 s,
 * TXC_COLLECTIVE_TIMEOUT=SECONDS): nonblocking MPI calls polled with
 * MPI_Test, and past the deadline one line on stderr and MPI_Abort, so a
 * dead or unreachable peer ends every rank with a nonzero exit, never a
 * hang. Under MPI one thread at a time calls these (MPI_THREAD_SERIALIZED:
 * the main thread, or txc serve's scheduler thread while the main thread
 * waits for a signal); in-process devices call them from their threads.
 */
#ifndef TXC_BACKEND_COMM_H
#define TXC_BACKEND_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "txc/status.h"

/* Join the job: MPI_Init_thread when started by mpirun (and built with
 * MPI), else a world of one. Idempotent. Errors: TXC_ERR_UNSUPPORTED
 * (started by mpirun with more than one rank, built without MPI),
 * TXC_ERR_IO (MPI_Init failed). MPI_Finalize runs at exit. */
txc_status txc_comm_init(void);
bool txc_comm_is_mpi(void);
/* The calling thread's device and the devices of its world (an in-process
 * device's, else the process's: its MPI rank and size). */
int txc_comm_world_rank(void);
int txc_comm_world_size(void);
/* The process's MPI rank and size (0 and 1 without MPI), whatever the thread. */
int txc_comm_process_rank(void);
int txc_comm_process_count(void);
/* "MPI", "shared memory" or "nothing (one device)": the calling thread's transport. */
const char *txc_comm_backend_name(void);
/* The host name of this process (MPI_Get_processor_name, else gethostname). */
const char *txc_comm_host(void);

/* Groups: 0 is the world; txc_comm_split makes the group of the ranks
 * with the same `color` (ordered by `key`), as MPI_Comm_split, collective
 * over the world. Returns the group id (>= 1) or -1 (error recorded). */
#define TXC_COMM_MAX_GROUPS 16
int txc_comm_split(int color, int key);
int txc_comm_group_size(int group);
int txc_comm_group_rank(int group);

/* Seconds a collective may wait for its peers (> 0). */
void txc_comm_set_timeout(double seconds);
double txc_comm_timeout(void);

/* recv[r * bytes ..] = rank r's send (r in group order), on every rank.
 * `what` names the op in the timeout line. Errors: TXC_ERR_INVALID (bad
 * group), TXC_ERR_IO (MPI error). A timeout does not return. */
txc_status txc_comm_all_gather(int group, const void *send, void *recv, size_t bytes, const char *what);
/* buf on every rank = buf of the group's rank `root`. */
txc_status txc_comm_broadcast(int group, void *buf, size_t bytes, int root, const char *what);
/* Every rank waits for all (used by tests and the bench). */
txc_status txc_comm_barrier(int group);

/* Time spent inside collectives by this process (seconds, calls), for
 * txc bench's "collectives" line; reset with txc_comm_stats_reset. */
void txc_comm_stats(double *seconds, uint64_t *calls, uint64_t *bytes);
void txc_comm_stats_reset(void);

/* ---- in-process CPU devices: a shared-memory world (comm_shm.c) ----
 * txc_comm_shm_new(n) makes a world of n devices (1..TXC_SHM_MAX_DEVICES);
 * a thread becomes device d with txc_comm_shm_bind(w, d) (NULL: back to the
 * process's world). A device that fails calls txc_comm_shm_fail: its
 * peers' collectives then end with TXC_ERR_IO naming it and `msg`;
 * txc_comm_shm_failed returns the first failed device (-1: none) and its
 * message. Free the world after every device thread ended. */
#define TXC_SHM_MAX_DEVICES 64
typedef struct txc_comm_world txc_comm_world;
txc_comm_world *txc_comm_shm_new(int n_devices);
void txc_comm_shm_free(txc_comm_world *w);
txc_status txc_comm_shm_bind(txc_comm_world *w, int device);
void txc_comm_shm_fail(txc_comm_world *w, int device, const char *msg);
int txc_comm_shm_failed(const txc_comm_world *w, const char **msg);

/* End the job from any rank: one line on stderr (already printed by the
 * caller) and MPI_Abort(code) under MPI, exit(code) else. */
_Noreturn void txc_comm_abort(int code);

#endif
