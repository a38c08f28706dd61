/* The collectives' transport: what every backend shares (the calling
 * thread's context, groups, statistics, the deadline); see backend/comm.h
 * and backend/comm_impl.h. */
#include "backend/comm_impl.h"
#include "txc/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool inited;
static double timeout_s = 60.0;
static char host[256];
static txc_comm_ctx process_ctx = {.size = 1};  /* MPI's world, or a world of one */
static _Thread_local txc_comm_ctx *bound;        /* an in-process device's */

static txc_comm_ctx *ctx(void) { return bound ? bound : &process_ctx; }

void txc_comm_ctx_bind(txc_comm_ctx *c) { bound = c; }

double txc_comm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One collective done: its time since t0 and its bytes join the counters. */
static txc_status count_call(txc_comm_ctx *c, double t0, size_t bytes)
{
    c->stat_seconds += txc_comm_now() - t0;
    c->stat_calls++;
    c->stat_bytes += bytes;
    return TXC_OK;
}

static bool launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

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
        txc_status s = txc_comm_mpi_init(&process_ctx, host, sizeof host);
        if (s)
            return s;
#else
        const char *n = getenv("OMPI_COMM_WORLD_SIZE");
        if (n && atoi(n) > 1)
            return txc_comm_mpi_init(&process_ctx, host, sizeof host);
#endif
    }
    process_ctx.group_sizes[0] = process_ctx.size;
    process_ctx.group_ranks[0] = process_ctx.rank;
    process_ctx.n_groups = 1;
    inited = true;
    return TXC_OK;
}

bool txc_comm_is_mpi(void) { return process_ctx.be != NULL; }
int txc_comm_process_rank(void) { return process_ctx.rank; }
int txc_comm_process_count(void) { return process_ctx.size; }
int txc_comm_world_rank(void) { return ctx()->rank; }
int txc_comm_world_size(void) { return ctx()->size; }
const char *txc_comm_backend_name(void)
{
    const txc_comm_ctx *c = ctx();
    return c->be ? c->be->name : "nothing (one device)";
}
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
    txc_comm_ctx *c = ctx();
    if (c->n_groups == TXC_COMM_MAX_GROUPS) {
        txc_error(TXC_ERR_INVALID, "at most %d communicator groups", TXC_COMM_MAX_GROUPS);
        return -1;
    }
    int g = c->n_groups;
    if (c->be && c->size > 1) {
        if (c->be->split(c->self, g, color, key, &c->handles[g], &c->group_sizes[g], &c->group_ranks[g]) != TXC_OK)
            return -1;
    } else {
        c->handles[g] = NULL;
        c->group_sizes[g] = 1;
        c->group_ranks[g] = 0;
    }
    c->n_groups++;
    return g;
}

int txc_comm_group_size(int group)
{
    const txc_comm_ctx *c = ctx();
    return group >= 0 && group < c->n_groups ? c->group_sizes[group] : 0;
}
int txc_comm_group_rank(int group)
{
    const txc_comm_ctx *c = ctx();
    return group >= 0 && group < c->n_groups ? c->group_ranks[group] : -1;
}

void txc_comm_set_timeout(double seconds)
{
    if (seconds > 0)
        timeout_s = seconds;
}
double txc_comm_timeout(void) { return timeout_s; }

void txc_comm_stats(double *seconds, uint64_t *calls, uint64_t *bytes)
{
    const txc_comm_ctx *c = ctx();
    if (seconds)
        *seconds = c->stat_seconds;
    if (calls)
        *calls = c->stat_calls;
    if (bytes)
        *bytes = c->stat_bytes;
}

void txc_comm_stats_reset(void)
{
    txc_comm_ctx *c = ctx();
    c->stat_seconds = 0;
    c->stat_calls = c->stat_bytes = 0;
}

_Noreturn void txc_comm_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (process_ctx.be)
        txc_comm_mpi_abort(code);
    _exit(code);
}

void txc_comm_check_deadline(double deadline, const char *who, const char *what, size_t bytes)
{
    if (txc_comm_now() <= deadline)
        return;
    fprintf(stderr,
            "txc: %s: %s of %zu bytes timed out after %g s waiting for its peers (a %s died, stalled or cannot be "
            "reached; TXC_COLLECTIVE_TIMEOUT)\n",
            who, what, bytes, timeout_s, bound ? "device" : "rank");
    txc_comm_abort(3);
}

/* The group, or an error; *c the calling thread's context. */
static txc_status check_group(int group, const char *what, txc_comm_ctx **c)
{
    if (!inited && txc_comm_init() != TXC_OK)
        return txc_last_status();
    *c = ctx();
    if (group < 0 || group >= (*c)->n_groups)
        return txc_error(TXC_ERR_INVALID, "%s: no communicator group %d", what, group);
    return TXC_OK;
}

txc_status txc_comm_all_gather(int group, const void *send, void *recv, size_t bytes, const char *what)
{
    txc_comm_ctx *c = NULL;
    txc_status s = check_group(group, what, &c);
    if (s)
        return s;
    const double t0 = txc_comm_now();
    if (c->group_sizes[group] == 1 || !c->be)
        memmove(recv, send, bytes);
    else if ((s = c->be->all_gather(c->self, c->handles[group], send, recv, bytes, what)))
        return s;
    return count_call(c, t0, bytes);
}

txc_status txc_comm_broadcast(int group, void *buf, size_t bytes, int root, const char *what)
{
    txc_comm_ctx *c = NULL;
    txc_status s = check_group(group, what, &c);
    if (s)
        return s;
    if (root < 0 || root >= c->group_sizes[group])
        return txc_error(TXC_ERR_INVALID, "%s: root %d is not a rank of a group of %d", what, root,
                         c->group_sizes[group]);
    const double t0 = txc_comm_now();
    if (c->be && c->group_sizes[group] > 1 &&
        (s = c->be->broadcast(c->self, c->handles[group], buf, bytes, root, what)))
        return s;
    return count_call(c, t0, bytes);
}

txc_status txc_comm_barrier(int group)
{
    txc_comm_ctx *c = NULL;
    txc_status s = check_group(group, "barrier", &c);
    if (s)
        return s;
    if (c->be && c->group_sizes[group] > 1)
        return c->be->barrier(c->self, c->handles[group], "barrier");
    return TXC_OK;
}
