/* The MPI transport (Open MPI) of backend/comm_impl.h: across processes
 * and hosts, nonblocking calls polled against the deadline. */
#include "backend/comm_impl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TXC_HAVE_MPI
#include <mpi.h>

static MPI_Comm comms[TXC_COMM_MAX_GROUPS];

static void finalize_at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Finalize();
}

/* Poll `req` until done or past the deadline: spin on MPI_Test (it drives
 * the progress engine), yield the CPU after a while (two ranks may share
 * one core). Past the deadline: one line, MPI_Abort. */
static txc_status wait_bounded(MPI_Request *req, const char *what, size_t bytes)
{
    const double deadline = txc_comm_now() + txc_comm_timeout();
    for (long spins = 0;; spins++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return txc_error(TXC_ERR_IO, "%s: MPI error (a peer failed)", what);
        if (done)
            return TXC_OK;
        if (spins > 2000) {
            if ((spins & 63) == 0) {
                char who[320];
                snprintf(who, sizeof who, "rank %d (%s)", txc_comm_world_rank(), txc_comm_host());
                txc_comm_check_deadline(deadline, who, what, bytes);
            }
            sched_yield();
        }
    }
}

static txc_status mpi_split(void *self, int g, int color, int key, void **handle, int *size, int *rank)
{
    (void)self;
    if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &comms[g]) != MPI_SUCCESS)
        return txc_error(TXC_ERR_IO, "MPI_Comm_split failed");
    MPI_Comm_set_errhandler(comms[g], MPI_ERRORS_RETURN);
    MPI_Comm_size(comms[g], size);
    MPI_Comm_rank(comms[g], rank);
    *handle = &comms[g];
    return TXC_OK;
}

static txc_status mpi_all_gather(void *self, void *handle, const void *send, void *recv, size_t bytes,
                                 const char *what)
{
    (void)self;
    if (bytes > (size_t)INT32_MAX)
        return txc_error(TXC_ERR_INVALID, "%s: %zu bytes per rank (at most 2^31 - 1)", what, bytes);
    MPI_Request req;
    if (MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, *(MPI_Comm *)handle, &req) !=
        MPI_SUCCESS)
        return txc_error(TXC_ERR_IO, "%s: MPI_Iallgather failed", what);
    return wait_bounded(&req, what, bytes);
}

static txc_status mpi_broadcast(void *self, void *handle, void *buf, size_t bytes, int root, const char *what)
{
    (void)self;
    if (bytes > (size_t)INT32_MAX)
        return txc_error(TXC_ERR_INVALID, "%s: %zu bytes (at most 2^31 - 1)", what, bytes);
    MPI_Request req;
    if (MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, *(MPI_Comm *)handle, &req) != MPI_SUCCESS)
        return txc_error(TXC_ERR_IO, "%s: MPI_Ibcast failed", what);
    return wait_bounded(&req, what, bytes);
}

static txc_status mpi_barrier(void *self, void *handle, const char *what)
{
    (void)self;
    MPI_Request req;
    if (MPI_Ibarrier(*(MPI_Comm *)handle, &req) != MPI_SUCCESS)
        return txc_error(TXC_ERR_IO, "%s: MPI_Ibarrier failed", what);
    return wait_bounded(&req, what, 0);
}

static const txc_comm_backend mpi_backend = {
    .name = "MPI", .split = mpi_split, .all_gather = mpi_all_gather, .broadcast = mpi_broadcast,
    .barrier = mpi_barrier};

txc_status txc_comm_mpi_init(txc_comm_ctx *ctx, char *host, size_t host_cap)
{
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return txc_error(TXC_ERR_IO, "MPI_Init_thread failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &ctx->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ctx->size);
    int len = 0;
    if (host_cap >= MPI_MAX_PROCESSOR_NAME)
        MPI_Get_processor_name(host, &len);
    atexit(finalize_at_exit);
    comms[0] = MPI_COMM_WORLD;
    ctx->be = &mpi_backend;
    ctx->handles[0] = &comms[0];
    return TXC_OK;
}

_Noreturn void txc_comm_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    _Exit(code);
}

#else

txc_status txc_comm_mpi_init(txc_comm_ctx *ctx, char *host, size_t host_cap)
{
    (void)ctx, (void)host, (void)host_cap;
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    return txc_error(TXC_ERR_UNSUPPORTED, "started by mpirun with %s ranks, but this txc was built without MPI "
                                          "(cmake -DTXC_MPI=ON with libopenmpi-dev)", n ? n : "several");
}

_Noreturn void txc_comm_mpi_abort(int code) { _Exit(code); }

#endif
