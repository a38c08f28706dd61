/*
 * backend/comm_impl.h — the transports behind backend/comm.h (internal to
 * backend/).
 *
 * One interface, several implementations: a backend moves bytes between
 * the members of a group (all_gather, broadcast, barrier) and makes
 * groups (split, MPI_Comm_split's semantics). MPI across processes and
 * hosts (comm_mpi.c), shared memory between the in-process CPU devices of
 * one process (comm_shm.c); a GPU library's communicator (NCCL) would be
 * a third. comm.c keeps what they share: the context each thread calls
 * through (the process's, or the device's it is bound to), the group table,
 * the statistics and the deadline; the reduction arithmetic stays in the
 * ops (ops/collective.c), so every backend gives the same bits.
 *
 * Backends are called only for groups of two or more members.
 */
#ifndef TXC_BACKEND_COMM_IMPL_H
#define TXC_BACKEND_COMM_IMPL_H

#include "backend/comm.h"

typedef struct txc_comm_backend {
    const char *name; /* "MPI", "shared memory" */
    /* The group of the world's members with the same color, ordered by
     * (key, world rank); collective over the world. *handle is the
     * backend's group (NULL allowed for a group of one). */
    txc_status (*split)(void *self, int group_index, int color, int key, void **handle, int *size, int *rank);
    txc_status (*all_gather)(void *self, void *handle, const void *send, void *recv, size_t bytes, const char *what);
    txc_status (*broadcast)(void *self, void *handle, void *buf, size_t bytes, int root, const char *what);
    txc_status (*barrier)(void *self, void *handle, const char *what);
} txc_comm_backend;

/* One device's view of its world. */
typedef struct txc_comm_ctx {
    const txc_comm_backend *be; /* NULL: a world of one */
    void *self;                 /* the backend's state for this device */
    int rank, size;             /* in the world */
    int n_groups;
    int group_sizes[TXC_COMM_MAX_GROUPS], group_ranks[TXC_COMM_MAX_GROUPS];
    void *handles[TXC_COMM_MAX_GROUPS]; /* [0]: the world */
    double stat_seconds;
    uint64_t stat_calls, stat_bytes;
} txc_comm_ctx;

/* The context of the calling thread's collectives from now on (NULL: the
 * process's). */
void txc_comm_ctx_bind(txc_comm_ctx *ctx);
/* Seconds on the monotonic clock. */
double txc_comm_now(void);
/* Past `deadline` (txc_comm_now() seconds): the timeout line on stderr and
 * txc_comm_abort(3); else nothing. `who` names the rank or device. */
void txc_comm_check_deadline(double deadline, const char *who, const char *what, size_t bytes);

/* MPI (comm_mpi.c): MPI_Init_thread into ctx (rank, size, group 0), or
 * TXC_ERR_UNSUPPORTED when built without MPI. */
txc_status txc_comm_mpi_init(txc_comm_ctx *ctx, char *host, size_t host_cap);
_Noreturn void txc_comm_mpi_abort(int code);

#endif
