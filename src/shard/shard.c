/* Devices, meshes, NamedShardings, placement, gathers and the collectives'
 * frontends; see include/txc/shard.h. */
#include "backend/comm.h"
#include "env/env_impl.h"
#include "ops/registry.h"
#include "shard/shard_impl.h"
#include "txc/ops.h"
#include "txc/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

txc_status txc_distributed_init(void) { return txc_comm_init(); }
int txc_process_index(void) { return txc_comm_init() ? 0 : txc_comm_process_rank(); }
int txc_process_count(void) { return txc_comm_init() ? 1 : txc_comm_process_count(); }
int txc_device_count(void) { return txc_comm_init() ? 1 : txc_comm_world_size(); }
int txc_device_index(void) { return txc_comm_init() ? 0 : txc_comm_world_rank(); }
const char *txc_collective_transport(void)
{
    return txc_comm_init() ? "nothing (one device)" : txc_comm_backend_name();
}
bool txc_distributed_is_mpi(void) { return txc_comm_init() == TXC_OK && txc_comm_is_mpi(); }

static int axis_of(const txc_mesh *m, const char *name)
{
    for (int i = 0; name && i < m->ndim; i++)
        if (strcmp(m->axis[i], name) == 0)
            return i;
    return -1;
}

txc_mesh *txc_mesh_new(const int *devices, int ndim, const int64_t *shape, const char *const *axis_names)
{
    if (txc_comm_init() != TXC_OK)
        return NULL;
    if (ndim < 1 || ndim > TXC_MESH_MAX_AXES || !shape || !axis_names) {
        txc_error(TXC_ERR_INVALID, "mesh: 1 to %d axes with a shape and names, got %d", TXC_MESH_MAX_AXES, ndim);
        return NULL;
    }
    const int n_dev = txc_comm_world_size(), me = txc_comm_world_rank();
    int64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1 || shape[i] > n_dev) {
            txc_error(TXC_ERR_INVALID, "mesh: axis %d has size %lld (1 to the %d devices)", i, (long long)shape[i],
                      n_dev);
            return NULL;
        }
        total *= shape[i];
        const char *a = axis_names[i];
        if (!a || !*a || strlen(a) > 31) {
            txc_error(TXC_ERR_INVALID, "mesh: axis %d needs a name of 1 to 31 bytes", i);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(axis_names[j], a) == 0) {
                txc_error(TXC_ERR_INVALID, "mesh: axis name '%s' is used twice", a);
                return NULL;
            }
    }
    if (total != n_dev) {
        txc_error(TXC_ERR_INVALID, "mesh: its shape holds %lld devices but the job has %d (mpirun -np %lld, or "
                                   "txc_devices_run on %lld)",
                  (long long)total, n_dev, (long long)total, (long long)total);
        return NULL;
    }
    int pos = -1;
    bool seen[4096] = {false};
    if (n_dev > 4096) {
        txc_error(TXC_ERR_INVALID, "mesh: at most 4096 devices, the job has %d", n_dev);
        return NULL;
    }
    for (int i = 0; i < n_dev; i++) {
        int d = devices ? devices[i] : i;
        if (d < 0 || d >= n_dev || seen[d]) {
            txc_error(TXC_ERR_INVALID, "mesh: device %d is %s", d, d < 0 || d >= n_dev ? "not a device of the job"
                                                                                         : "listed twice");
            return NULL;
        }
        seen[d] = true;
        if (d == me)
            pos = i;
    }
    txc_mesh *m = calloc(1, sizeof *m);
    if (!m) {
        txc_error(TXC_ERR_NOMEM, "out of memory (mesh)");
        return NULL;
    }
    m->ndim = ndim;
    for (int i = ndim - 1, p = pos; i >= 0; i--) {
        m->shape[i] = shape[i];
        snprintf(m->axis[i], sizeof m->axis[i], "%s", axis_names[i]);
        m->coord[i] = p % shape[i];
        p /= (int)shape[i];
    }
    /* one communicator per axis: the processes that agree on every other coordinate */
    bool identity = ndim == 1 && !devices;
    for (int i = 0; i < ndim; i++) {
        if (identity) {
            m->group[i] = 0;
            continue;
        }
        int64_t color = 0;
        for (int j = 0; j < ndim; j++)
            if (j != i)
                color = color * m->shape[j] + m->coord[j];
        if ((m->group[i] = txc_comm_split((int)color, (int)m->coord[i])) < 0) {
            free(m);
            return NULL;
        }
    }
    return m;
}

void txc_mesh_free(txc_mesh *m)
{
    if (!m)
        return;
    for (txc_sharding *s = m->shardings, *n; s; s = n) {
        n = s->next;
        free(s);
    }
    free(m);
}

int txc_mesh_ndim(const txc_mesh *m) { return m ? m->ndim : 0; }
int64_t txc_mesh_axis_size(const txc_mesh *m, const char *axis)
{
    int i = m ? axis_of(m, axis) : -1;
    return i < 0 ? 0 : m->shape[i];
}
int64_t txc_mesh_axis_index(const txc_mesh *m, const char *axis)
{
    int i = m ? axis_of(m, axis) : -1;
    return i < 0 ? -1 : m->coord[i];
}

const txc_sharding *txc_named_sharding(txc_mesh *m, txc_partition_spec spec)
{
    if (!m || spec.ndim < 0 || spec.ndim > 8) {
        txc_error(TXC_ERR_INVALID, "NamedSharding: a mesh and a spec of 0 to 8 dims");
        return NULL;
    }
    for (int i = 0; i < spec.ndim; i++) {
        if (!spec.axes[i])
            continue;
        if (axis_of(m, spec.axes[i]) < 0) {
            txc_error(TXC_ERR_INVALID, "NamedSharding: the mesh has no axis '%s'", spec.axes[i]);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (spec.axes[j] && strcmp(spec.axes[j], spec.axes[i]) == 0) {
                txc_error(TXC_ERR_INVALID, "NamedSharding: axis '%s' splits two dims", spec.axes[i]);
                return NULL;
            }
    }
    txc_sharding *s = calloc(1, sizeof *s);
    if (!s) {
        txc_error(TXC_ERR_NOMEM, "out of memory (sharding)");
        return NULL;
    }
    s->mesh = m;
    s->spec.ndim = spec.ndim;
    for (int i = 0; i < TXC_MAX_DIMS; i++)
        s->axis[i] = -1;
    for (int i = 0; i < spec.ndim; i++)
        if (spec.axes[i]) {
            snprintf(s->names[i], sizeof s->names[i], "%s", spec.axes[i]);
            s->spec.axes[i] = s->names[i];
            s->axis[i] = (int8_t)axis_of(m, spec.axes[i]);
        }
    s->next = m->shardings;
    m->shardings = s;
    txc_shard_rules_install();
    return s;
}

const txc_sharding *txc_shard_intern(txc_mesh *m, int ndim, const int8_t *axis)
{
    int n = 0; /* the spec's length: up to the last split dim */
    for (int d = 0; d < ndim; d++)
        if (axis[d] >= 0)
            n = d + 1;
    for (txc_sharding *s = m->shardings; s; s = s->next) {
        bool same = true;
        for (int d = 0; d < TXC_MAX_DIMS && same; d++)
            same = s->axis[d] == (d < n ? axis[d] : -1);
        if (same)
            return s;
    }
    txc_partition_spec spec = {.ndim = n};
    for (int d = 0; d < n; d++)
        spec.axes[d] = axis[d] >= 0 ? m->axis[axis[d]] : NULL;
    return txc_named_sharding(m, spec);
}

const txc_mesh *txc_sharding_mesh(const txc_sharding *s) { return s ? s->mesh : NULL; }
txc_partition_spec txc_sharding_spec(const txc_sharding *s) { return s ? s->spec : TXC_P_REPLICATED; }

void txc_sharding_str(const txc_sharding *s, char *buf, size_t cap)
{
    if (!s) {
        snprintf(buf, cap, "(not sharded)");
        return;
    }
    size_t o = (size_t)snprintf(buf, cap, "NamedSharding(mesh=Mesh(");
    for (int i = 0; i < s->mesh->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s'%s': %lld", i ? ", " : "", s->mesh->axis[i],
                              (long long)s->mesh->shape[i]);
    if (o < cap)
        o += (size_t)snprintf(buf + o, cap - o, "), spec=P(");
    for (int i = 0; i < s->spec.ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, s->spec.axes[i] ? "%s'%s'" : "%sNone%.0s", i ? ", " : "",
                              s->spec.axes[i] ? s->spec.axes[i] : "");
    if (o < cap)
        snprintf(buf + o, cap - o, "))");
}

txc_tensor *txc_device_put(txc_tensor *x, const txc_sharding *s)
{
    if (!x)
        return NULL;
    if (!s) {
        txc_error(TXC_ERR_INVALID, "device_put: no sharding");
        return NULL;
    }
    for (int d = 0; x->sharding && d < x->ndim; d++)
        if (x->sharding->axis[d] >= 0) {
            char have[256];
            txc_sharding_str(x->sharding, have, sizeof have);
            txc_error(TXC_ERR_INVALID, "device_put: the tensor is already a shard (%s); pass the global value "
                                       "(txc_gather it first)", have);
            return NULL;
        }
    if (s->spec.ndim > x->ndim) {
        txc_error(TXC_ERR_INVALID, "device_put: the spec has %d dims but the tensor %d", s->spec.ndim, x->ndim);
        return NULL;
    }
    txc_tensor *v = x;
    for (int d = 0; d < s->spec.ndim && v; d++) {
        if (!s->spec.axes[d])
            continue;
        int a = axis_of(s->mesh, s->spec.axes[d]);
        int64_t n = s->mesh->shape[a];
        if (x->shape[d] % n) {
            txc_error(TXC_ERR_INVALID, "device_put: dim %d of size %lld does not divide by axis '%s' of size %lld", d,
                      (long long)x->shape[d], s->spec.axes[d], (long long)n);
            return NULL;
        }
        int64_t len = x->shape[d] / n;
        v = txc_narrow(v, d, s->mesh->coord[a] * len, len);
    }
    txc_tensor *out = v ? txc_clone(v) : NULL;
    if (out)
        out->sharding = s;
    return out;
}

const txc_sharding *txc_tensor_sharding(const txc_tensor *t) { return t ? t->sharding : NULL; }

int txc_tensor_num_addressable_shards(const txc_tensor *t) { return t ? 1 : 0; }

txc_status txc_tensor_shard_index(const txc_tensor *t, int i, int64_t *start, int64_t *global_shape)
{
    if (!t || i != 0)
        return txc_error(TXC_ERR_INVALID, "addressable shard %d: a process holds one shard (index 0)", i);
    const txc_sharding *s = t->sharding;
    for (int d = 0; d < t->ndim; d++) {
        int a = s && d < s->spec.ndim && s->spec.axes[d] ? axis_of(s->mesh, s->spec.axes[d]) : -1;
        if (start)
            start[d] = a < 0 ? 0 : s->mesh->coord[a] * t->shape[d];
        if (global_shape)
            global_shape[d] = a < 0 ? t->shape[d] : s->mesh->shape[a] * t->shape[d];
    }
    return TXC_OK;
}

/* ---- collectives -------------------------------------------------------------- */

static txc_tensor *collective(txc_op_id op, txc_tensor *x, const txc_mesh *m, const char *axis, int64_t extra)
{
    if (!x)
        return NULL;
    int a = m ? axis_of(m, axis) : -1;
    if (a < 0) {
        txc_error(TXC_ERR_INVALID, "%s: the mesh has no axis '%s'", txc_op_name(op), axis ? axis : "(null)");
        return NULL;
    }
    txc_op_attrs at = {0};
    at.n_ints = 3;
    at.ints[0] = m->group[a];
    at.ints[1] = m->shape[a];
    at.ints[2] = extra;
    txc_tensor *in[] = {x};
    return txc_dispatch(op, NULL, in, 1, &at);
}

txc_tensor *txc_all_reduce(txc_tensor *x, const txc_mesh *m, const char *axis)
{
    return collective(TXC_OP_ALL_REDUCE, x, m, axis, 0);
}
txc_tensor *txc_all_gather(txc_tensor *x, const txc_mesh *m, const char *axis, int dim)
{
    return collective(TXC_OP_ALL_GATHER, x, m, axis, dim);
}
txc_tensor *txc_reduce_scatter(txc_tensor *x, const txc_mesh *m, const char *axis, int dim)
{
    return collective(TXC_OP_REDUCE_SCATTER, x, m, axis, dim);
}
txc_tensor *txc_broadcast(txc_tensor *x, const txc_mesh *m, const char *axis, int root)
{
    return collective(TXC_OP_BROADCAST, x, m, axis, root);
}

txc_tensor *txc_vocab_parallel_embedding(txc_tensor *weight, txc_tensor *ids, int64_t offset)
{
    if (!weight || !ids)
        return NULL;
    txc_op_attrs at = {0};
    at.n_ints = 1;
    at.ints[0] = offset;
    txc_tensor *in[] = {weight, ids};
    return txc_dispatch(TXC_OP_VOCAB_EMBEDDING, NULL, in, 2, &at);
}

txc_tensor *txc_gather(txc_tensor *t)
{
    if (!t)
        return NULL;
    const txc_sharding *s = t->sharding;
    if (!s) /* (the open scope's, as every result) */
        return txc_env_scope_adopt(t->env, txc_tensor_retain(t));
    txc_env *env = txc_tensor_env(t);
    bool split = false;
    for (int d = 0; d < s->spec.ndim; d++)
        split |= s->spec.axes[d] != NULL;
    if (!split) /* replicated (P()): the same values, without the sharding */
        return txc_tensor_to_env(t, env);
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return NULL;
    txc_tensor *v = t;
    for (int d = 0; d < s->spec.ndim && v; d++)
        if (s->spec.axes[d])
            v = txc_all_gather(v, s->mesh, s->spec.axes[d], d);
    txc_tensor *keep = v ? txc_tensor_retain(v) : NULL;
    txc_env_scope_end(env, mark);
    return keep ? txc_env_scope_adopt(env, keep) : NULL;
}

void txc_shard_map_begin(void) { txc_env_shard_map_add(1); }
void txc_shard_map_end(void)
{
    if (txc_env_shard_map_depth() > 0)
        txc_env_shard_map_add(-1);
}

txc_status txc_sync_global_devices(void)
{
    txc_status s = txc_comm_init();
    return s ? s : txc_comm_barrier(0);
}

void txc_collective_stats(double *seconds, uint64_t *calls, uint64_t *bytes) { txc_comm_stats(seconds, calls, bytes); }
void txc_collective_stats_reset(void) { txc_comm_stats_reset(); }
void txc_collective_set_timeout(double seconds) { txc_comm_set_timeout(seconds); }
