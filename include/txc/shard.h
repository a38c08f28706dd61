/*
 * txc/shard.h — devices, a device mesh, NamedSharding / PartitionSpec,
 * sharded placement and collectives (JAX's jax.sharding and
 * jax.distributed; torchax's `apply_jax_(jax.device_put,
 * NamedSharding(mesh, P()))`).
 *
 * Two ways to have several devices, both running the same program (SPMD):
 *   - multi-controller, as JAX on several hosts: every process is one
 *     device; started by `mpirun -np N` the N processes are the devices
 *     0..N-1 (MPI_COMM_WORLD ranks, Open MPI across processes and hosts),
 *     started alone it is the one device 0;
 *   - in-process CPU devices (as JAX's host platform with
 *     --xla_force_host_platform_device_count=N): txc_devices_run runs a
 *     function on N devices of one process, each a thread with its own
 *     share of the threads (its own thread pool), its own memory (its env,
 *     its tensors) and its device index; collectives between them go over
 *     shared memory.
 * Each device holds its addressable shards only; the calls below made on
 * a device's thread are that device's. A tensor placed with a
 * NamedSharding is its local shard (the local shape) and knows its
 * sharding (txc_tensor_sharding).
 *
 * Ops on sharded tensors follow sharding rules (GSPMD's propagation, as
 * jax.jit over NamedSharding'd arrays; src/shard/rules.c): the op runs on
 * the local shards and its result carries the sharding the rule gives, so
 * a chain of ops computes the global program. Sizes an op takes (a view's
 * shape, a slice's range) are the local ones, as txc_tensor_shape gives
 * them; a tensor without a sharding is replicated. The rules:
 *   - elementwise ops (and rotary, where, masked_fill, to(dtype)) keep the
 *     split dims; a replicated operand that has a split dim in full takes
 *     its block (a slice, no communication); two inputs splitting one dim
 *     over different axes have no rule;
 *   - linear(x, W) with W in torch's (out, in) layout: W P("tp", None)
 *     (column-parallel) needs no communication, the result split on its
 *     last dim; x split on its last dim with W P(None, "tp") (row-
 *     parallel) gives partial sums, which the rule sums with an all_reduce
 *     (then adds the bias once): the result is replicated. matmul the
 *     same over its K dim, its batch dims broadcast;
 *   - embedding with the table split over the vocabulary (P("tp", None))
 *     looks up this block's rows, zeros for the others, and all_reduces
 *     (Megatron-LM's VocabParallelEmbedding); split over the hidden dim it
 *     keeps that split;
 *   - scaled_dot_product_attention and causal_attention run per batch or
 *     head shard: q, k, v split on dim 0 or 1 keep it (replicated k/v take
 *     the kv heads of this block of query heads);
 *   - sum and mean over a split dim all_reduce the partials; max, argmax,
 *     softmax, log_softmax, cumsum over a split dim, rms_norm and
 *     layer_norm over a split last dim have no rule; over other dims they
 *     keep the split;
 *   - permute / transpose / unsqueeze / squeeze / select / slice / expand
 *     move the split with its dim (removing, slicing or expanding a split
 *     dim has no rule); view / reshape keep a split dim where it stays the
 *     outer factor of a result dim (splitting [H*D] into [H, D] keeps it on
 *     H, merging [H, D] into [H*D] keeps it), else no rule;
 *   - cat / stack / index_select / index_copy along an unsplit dim keep the
 *     splits;
 *   - collectives (txc_all_reduce, ...) and txc_vocab_parallel_embedding
 *     run on the local values as called; their results carry no sharding.
 * An op with no rule for the specs it meets fails with TXC_ERR_UNSUPPORTED
 * naming the op and the specs ("no sharding rule for aten::matmul
 * with P('tp', None) x P('tp', None) (...)"), or, with the implicit
 * all-gather on (txc_sharding_set_implicit_gather), gathers its inputs
 * whole, runs replicated and says so once per op on stderr.
 * Every step a rule adds (the slices, the all_reduces) is an op, so the
 * JIT records it as a plan node; a traced function's inputs keep their
 * shardings and so does its outputs' (the signature includes them).
 * Inside txc_shard_map_begin / _end (jax.shard_map's body) none of this
 * applies: ops run on the local shards, results carry no sharding, and
 * the program calls the collectives itself (the models' tensor-parallel
 * forward, src/models/tp.c, runs so).
 *
 * Collectives are ops in the op table (_c10d_functional::all_reduce,
 * all_gather_into_tensor, reduce_scatter_tensor, broadcast, as torchax
 * lowers them), so the JIT records them as plan nodes like any other op.
 * Reductions sum in rank order (every rank gathers the partials and adds
 * them left to right), so every rank and every run get the same bits, over
 * MPI and over shared memory alike.
 * Every collective has a deadline (TXC_COLLECTIVE_TIMEOUT seconds, default
 * 60): a rank that died or cannot be reached ends the job with one line on
 * stderr and a nonzero exit (MPI_Abort), never a hang.
 */
#ifndef TXC_SHARD_H
#define TXC_SHARD_H

#include <stdbool.h>
#include <stdint.h>
#include "txc/status.h"
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Join the job (jax.distributed.initialize): MPI_Init when started by
 * mpirun, else a job of one process. Idempotent; the other calls here call
 * it. Errors: TXC_ERR_UNSUPPORTED (started by mpirun with several ranks,
 * built without MPI), TXC_ERR_IO (MPI_Init failed), TXC_ERR_INVALID
 * (TXC_COLLECTIVE_TIMEOUT not a positive number). */
txc_status txc_distributed_init(void);
/* jax.process_index() / jax.process_count(): this process's rank and the
 * number of processes (MPI; 1 without mpirun). jax.device_count(): the
 * devices of the calling thread's job (the processes, or the in-process
 * devices on a txc_devices_run thread); txc_device_index: the calling
 * thread's device among them (jax.Device.id). */
int txc_process_index(void);
int txc_process_count(void);
int txc_device_count(void);
int txc_device_index(void);
/* Whether the processes talk over MPI (false: a job of one process). */
bool txc_distributed_is_mpi(void);
/* The calling thread's transport: "MPI", "shared memory" (an in-process
 * device) or "nothing (one device)". */
const char *txc_collective_transport(void);

/* Run fn(ctx, d) on n_devices in-process CPU devices d = 0..n_devices-1
 * (1 to 64), SPMD: device 0 on the calling thread, the others on threads
 * of their own; device d gets a thread pool of threads[d] threads (>= 1;
 * NULL: 1 each) bound to its thread, so its parallel ops never wait for
 * another device's, an env of its own entered on its thread (named
 * "cpu:d"; txc_env_active() there: what it loads and computes lives in
 * it), and txc_device_count() = n_devices,
 * txc_device_index() = d there. Meshes made on the device threads (each
 * makes the same meshes in the same order, as MPI ranks do) span the
 * devices; their collectives go over shared memory, summed in device
 * order (the same bits as over MPI). rcs[d] (NULL: not kept) gets fn's
 * return value (0: success); a device whose fn fails (nonzero) marks the
 * job failed, with its thread's txc_last_error(): its peers' collectives
 * then fail at once naming it, never wait. Collectives keep their
 * deadline (TXC_COLLECTIVE_TIMEOUT): a device stalled past it ends the
 * process with one line on stderr, exit status 3. Returns TXC_OK when
 * every device returned 0; the first failed device's status (its error
 * recorded on the calling thread) otherwise; TXC_ERR_INVALID (a count out
 * of range), TXC_ERR_UNSUPPORTED (inside an MPI job of several processes,
 * or on a device thread), TXC_ERR_NOMEM / TXC_ERR_IO (no thread). */
typedef int (*txc_device_fn)(void *ctx, int device);
txc_status txc_devices_run(int n_devices, const int *threads, txc_device_fn fn, void *ctx, int *rcs);

#define TXC_MESH_MAX_AXES 4
typedef struct txc_mesh txc_mesh;
typedef struct txc_sharding txc_sharding;

/* jax.sharding.Mesh(devices.reshape(shape), axis_names): `devices` the
 * prod(shape) device ids in row-major mesh order (NULL: 0, 1, ... in
 * order), which must be every device of the job exactly once; ndim 1 to
 * TXC_MESH_MAX_AXES axes, distinct non-empty names of at most 31 bytes.
 * Collective over the job (each axis gets its communicator): every
 * process makes the same meshes in the same order. NULL on error
 * (TXC_ERR_INVALID naming what is wrong; TXC_ERR_NOMEM). */
txc_mesh *txc_mesh_new(const int *devices, int ndim, const int64_t *shape, const char *const *axis_names);
/* Frees the mesh and every sharding made over it. */
void txc_mesh_free(txc_mesh *mesh);
int txc_mesh_ndim(const txc_mesh *mesh);
/* Size of the axis named `axis`, 0 when the mesh has none. */
int64_t txc_mesh_axis_size(const txc_mesh *mesh, const char *axis);
/* This process's coordinate along `axis` (-1: no such axis). */
int64_t txc_mesh_axis_index(const txc_mesh *mesh, const char *axis);

/* jax.sharding.PartitionSpec: per tensor dim the mesh axis it is split
 * over, NULL for a dim that is not split; ndim 0 (or fewer entries than
 * the tensor's dims: the rest NULL) is P(), replicated. */
typedef struct txc_partition_spec {
    int ndim;
    const char *axes[8];
} txc_partition_spec;
/* P("tp", NULL): TXC_P("tp", NULL); P(): TXC_P_REPLICATED. */
#define TXC_P(...)                                                                                                 \
    ((txc_partition_spec){.ndim = (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)),         \
                          .axes = {__VA_ARGS__}})
#define TXC_P_REPLICATED ((txc_partition_spec){.ndim = 0})

/* jax.sharding.NamedSharding(mesh, spec): owned by the mesh. NULL on
 * error: TXC_ERR_INVALID for an axis the mesh does not have, an axis used
 * twice, more than 8 dims. */
const txc_sharding *txc_named_sharding(txc_mesh *mesh, txc_partition_spec spec);
const txc_mesh *txc_sharding_mesh(const txc_sharding *s);
txc_partition_spec txc_sharding_spec(const txc_sharding *s);
/* "NamedSharding(mesh=Mesh('tp': 2), spec=P('tp', None))" into buf. */
void txc_sharding_str(const txc_sharding *s, char *buf, size_t cap);

/* jax.device_put(x, sharding): `x` the global value (every process passes
 * the same); returns this process's shard, a new contiguous tensor of the
 * local shape (each split dim divided by its axis size, the block at this
 * device's coordinate), with txc_tensor_sharding = `s`. Caller-owned (or
 * the open scope's). Errors: TXC_ERR_INVALID (a split dim that does not
 * divide by its axis size, naming both; a spec with more dims than x). */
txc_tensor *txc_device_put(txc_tensor *x, const txc_sharding *s);
/* The sharding a tensor was placed with (NULL: not sharded). */
const txc_sharding *txc_tensor_sharding(const txc_tensor *t);
/* jax.Array.addressable_shards: the shards this process holds (one: its
 * device's), and where shard i starts in the global tensor (start[d] per
 * dim) and the global shape. Errors: TXC_ERR_INVALID (i out of range). */
int txc_tensor_num_addressable_shards(const txc_tensor *t);
txc_status txc_tensor_shard_index(const txc_tensor *t, int i, int64_t *start, int64_t *global_shape);
/* The global value of a sharded tensor on every process
 * (jax.experimental.multihost_utils.process_allgather): all_gather along
 * every split dim; the result carries no sharding. An unsharded tensor is
 * returned retained, a replicated one (P()) as a view without the
 * sharding; either way caller-owned, or the open scope's. */
txc_tensor *txc_gather(txc_tensor *t);

/* Collectives over the processes along one mesh axis (the others fixed):
 *   all_reduce      sum of x (float32) over the axis, on every process;
 *   all_gather      the axis' x concatenated along dim (any float/int dtype);
 *   reduce_scatter  sum of x (float32), then this process's block of dim
 *                   (dim must divide by the axis size);
 *   broadcast       x of the process at coordinate `root` of the axis.
 * Shapes as torch.distributed's; NULL on error (the op named). */
txc_tensor *txc_all_reduce(txc_tensor *x, const txc_mesh *mesh, const char *axis);
txc_tensor *txc_all_gather(txc_tensor *x, const txc_mesh *mesh, const char *axis, int dim);
txc_tensor *txc_reduce_scatter(txc_tensor *x, const txc_mesh *mesh, const char *axis, int dim);
txc_tensor *txc_broadcast(txc_tensor *x, const txc_mesh *mesh, const char *axis, int root);
/* Megatron-LM's VocabParallelEmbedding on one shard: `weight` holds rows
 * [offset, offset + rows) of the table; ids in that range are looked up
 * (as float32), others give zero rows; an all_reduce over the axis gives
 * the whole lookup. */
txc_tensor *txc_vocab_parallel_embedding(txc_tensor *weight, txc_tensor *ids, int64_t offset);

/* jax.shard_map's body on the calling thread: until the matching
 * txc_shard_map_end, ops on sharded tensors run on the local shards with
 * no sharding rule and their results carry no sharding (the program calls
 * the collectives itself). Nests. txc_model_forward runs inside one. */
void txc_shard_map_begin(void);
void txc_shard_map_end(void);

/* The implicit all-gather (JAX's name for it): with it on, an op that has
 * no sharding rule for the specs it meets gathers its sharded inputs whole
 * (all_gather along each split dim), runs replicated (its result P()) and
 * prints one line on stderr the first time each op does so; off (the
 * default), it fails naming the op and the specs. Until set here the
 * environment variable TXC_SHARDING_IMPLICIT_GATHER (1: on) decides. An
 * in-place op (index_copy_) never gathers. Process-wide. */
void txc_sharding_set_implicit_gather(bool on);
bool txc_sharding_implicit_gather(void);
/* Op calls that gathered implicitly in this process so far. */
uint64_t txc_sharding_implicit_gather_count(void);

/* jax.experimental.multihost_utils.sync_global_devices: returns when
 * every device of the calling thread's job has called it (a barrier over
 * the MPI ranks or the in-process devices; at once in a job of one).
 * Errors: TXC_ERR_IO (a peer failed); past the deadline the job ends as a
 * collective's does. txc bench calls it before each timed run, so that no
 * device's first collective waits for a peer still loading. */
txc_status txc_sync_global_devices(void);

/* Seconds and calls spent in collectives by the calling thread's device
 * (this process, or an in-process device) since its last reset (txc bench
 * --tp's "collectives" line). */
void txc_collective_stats(double *seconds, uint64_t *calls, uint64_t *bytes);
void txc_collective_stats_reset(void);
/* Bound every later collective to `seconds` (> 0). */
void txc_collective_set_timeout(double seconds);

#ifdef __cplusplus
}
#endif
#endif
