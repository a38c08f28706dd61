/* The collectives' transport: MPI across processes and hosts, or a world
 * of one; see backend/comm.h. */
#include "backend/comm.h"
#include "txc/status.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TXC_HAVE_MPI
#include <mpi.h>
#endif

static bool inited, use_mpi;
static int world_rank, world_size = 1;
static double timeout_s = 60.0;
static double stat_seconds;
static uint64_t stat_calls, stat_bytes;
static char host[256];

#ifdef TXC_HAVE_MPI
static MPI_Comm groups[TXC_COMM_MAX_GROUPS];
#endif
static int group_sizes[TXC_COMM_MAX_GROUPS], group_ranks[TXC_COMM_MAX_GROUPS];
static int n_groups;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One collective done: its time since t0 and its bytes join the counters. */
static txc_status count_call(double t0, size_t bytes)
{
    stat_seconds += now_s() - t0;
    stat_calls++;
    stat_bytes += bytes;
    return TXC_OK;
}

static bool launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

#ifdef TXC_HAVE_MPI
static void finalize_at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Finalize();
}
#endif

txc_status txc_comm_init(void)
{
    if (inited)
        return TXC_OK;
    const char *t = getenv("TXC_COLLECTIVE_TIMEOUT");
    if (t && *t) {
        char *end;
        double v = strtod(t, &end);
        if (*end || !(v > 0) || v > 1e6)
            return txc_error(TXC_ERR_INVALID, "TXC_COLLECTIVE_TIMEOUT must be a number of seconds > 0, got '%s'", t);
        timeout_s = v;
    }
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    if (launched_by_mpirun()) {
#ifdef TXC_HAVE_MPI
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return txc_error(TXC_ERR_IO, "MPI_Init_thread failed");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size);
        int len = 0;
        MPI_Get_processor_name(host, &len);
        atexit(finalize_at_exit);
        use_mpi = true;
        groups[0] = MPI_COMM_WORLD;
#else
        const char *n = getenv("OMPI_COMM_WORLD_SIZE");
        if (n && atoi(n) > 1)
            return txc_error(TXC_ERR_UNSUPPORTED, "started by mpirun with %s ranks, but this txc was built without "
                                                  "MPI (cmake -DTXC_MPI=ON with libopenmpi-dev)", n);
#endif
    }
    group_sizes[0] = world_size;
    group_ranks[0] = world_rank;
    n_groups = 1;
    inited = true;
    return TXC_OK;
}

bool txc_comm_is_mpi(void) { return use_mpi; }
int txc_comm_world_rank(void) { return world_rank; }
int txc_comm_world_size(void) { return world_size; }
const char *txc_comm_host(void)
{
    if (!host[0] && gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    return host;
}

int txc_comm_split(int color, int key)
{
    if (txc_comm_init() != TXC_OK)
        return -1;
    if (n_groups == TXC_COMM_MAX_GROUPS) {
        txc_error(TXC_ERR_INVALID, "at most %d communicator groups", TXC_COMM_MAX_GROUPS);
        return -1;
    }
    int g = n_groups;
#ifdef TXC_HAVE_MPI
    if (use_mpi) {
        if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &groups[g]) != MPI_SUCCESS) {
            txc_error(TXC_ERR_IO, "MPI_Comm_split failed");
            return -1;
        }
        MPI_Comm_set_errhandler(groups[g], MPI_ERRORS_RETURN);
        MPI_Comm_size(groups[g], &group_sizes[g]);
        MPI_Comm_rank(groups[g], &group_ranks[g]);
        n_groups++;
        return g;
    }
#endif
    (void)color, (void)key;
    group_sizes[g] = 1;
    group_ranks[g] = 0;
    n_groups++;
    return g;
}

int txc_comm_group_size(int group) { return group >= 0 && group < n_groups ? group_sizes[group] : 0; }
int txc_comm_group_rank(int group) { return group >= 0 && group < n_groups ? group_ranks[group] : -1; }

void txc_comm_set_timeout(double seconds)
{
    if (seconds > 0)
        timeout_s = seconds;
}
double txc_comm_timeout(void) { return timeout_s; }

void txc_comm_stats(double *seconds, uint64_t *calls, uint64_t *bytes)
{
    if (seconds)
        *seconds = stat_seconds;
    if (calls)
        *calls = stat_calls;
    if (bytes)
        *bytes = stat_bytes;
}

void txc_comm_stats_reset(void)
{
    stat_seconds = 0;
    stat_calls = stat_bytes = 0;
}

_Noreturn void txc_comm_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
#ifdef TXC_HAVE_MPI
    if (use_mpi)
        MPI_Abort(MPI_COMM_WORLD, code);
#endif
    _exit(code);
}

static txc_status check_group(int group, const char *what)
{
    if (!inited && txc_comm_init() != TXC_OK)
        return txc_last_status();
    if (group < 0 || group >= n_groups)
        return txc_error(TXC_ERR_INVALID, "%s: no communicator group %d", what, group);
    return TXC_OK;
}

#ifdef TXC_HAVE_MPI
/* Poll `req` until done or past the deadline: spin on MPI_Test (it drives
 * the progress engine), yield the CPU after a while (two ranks may share
 * one core). Past the deadline: one line, MPI_Abort. */
static txc_status wait_bounded(MPI_Request *req, const char *what, size_t bytes)
{
    const double t0 = now_s(), deadline = t0 + timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return txc_error(TXC_ERR_IO, "%s: MPI error (a peer failed)", what);
        if (done)
            return TXC_OK;
        if (spins > 2000) {
            if ((spins & 63) == 0 && now_s() > deadline) {
                fprintf(stderr,
                        "txc: rank %d (%s): %s of %zu bytes timed out after %.0f s waiting for its peers (a rank died "
                        "or cannot be reached; TXC_COLLECTIVE_TIMEOUT)\n",
                        world_rank, host, what, bytes, timeout_s);
                txc_comm_abort(3);
            }
            sched_yield();
        }
    }
}
#endif

txc_status txc_comm_all_gather(int group, const void *send, void *recv, size_t bytes, const char *what)
{
    txc_status s = check_group(group, what);
    if (s)
        return s;
    const double t0 = now_s();
    if (group_sizes[group] == 1 || !use_mpi) {
        memmove(recv, send, bytes);
    } else {
#ifdef TXC_HAVE_MPI
        if (bytes > (size_t)INT32_MAX)
            return txc_error(TXC_ERR_INVALID, "%s: %zu bytes per rank (at most 2^31 - 1)", what, bytes);
        MPI_Request req;
        if (MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, groups[group], &req) !=
            MPI_SUCCESS)
            return txc_error(TXC_ERR_IO, "%s: MPI_Iallgather failed", what);
        if ((s = wait_bounded(&req, what, bytes)))
            return s;
#endif
    }
    return count_call(t0, bytes);
}

txc_status txc_comm_broadcast(int group, void *buf, size_t bytes, int root, const char *what)
{
    txc_status s = check_group(group, what);
    if (s)
        return s;
    if (root < 0 || root >= group_sizes[group])
        return txc_error(TXC_ERR_INVALID, "%s: root %d is not a rank of a group of %d", what, root,
                         group_sizes[group]);
    const double t0 = now_s();
#ifdef TXC_HAVE_MPI
    if (use_mpi && group_sizes[group] > 1) {
        if (bytes > (size_t)INT32_MAX)
            return txc_error(TXC_ERR_INVALID, "%s: %zu bytes (at most 2^31 - 1)", what, bytes);
        MPI_Request req;
        if (MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, groups[group], &req) != MPI_SUCCESS)
            return txc_error(TXC_ERR_IO, "%s: MPI_Ibcast failed", what);
        if ((s = wait_bounded(&req, what, bytes)))
            return s;
    }
#endif
    return count_call(t0, bytes);
}

txc_status txc_comm_barrier(int group)
{
    txc_status s = check_group(group, "barrier");
    if (s)
        return s;
#ifdef TXC_HAVE_MPI
    if (use_mpi && group_sizes[group] > 1) {
        MPI_Request req;
        if (MPI_Ibarrier(groups[group], &req) != MPI_SUCCESS)
            return txc_error(TXC_ERR_IO, "barrier: MPI_Ibarrier failed");
        return wait_bounded(&req, "barrier", 0);
    }
#endif
    return TXC_OK;
}
