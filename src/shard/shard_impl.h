/* shard/shard_impl.h — the mesh and sharding structs, shared by shard.c
 * (placement, collectives) and rules.c (propagation). Internal. */
#ifndef TXC_SHARD_IMPL_H
#define TXC_SHARD_IMPL_H

#include "txc/shard.h"
#include "txc/array.h"

struct txc_sharding {
    txc_mesh *mesh;
    txc_partition_spec spec;
    char names[8][32];      /* spec.axes point here */
    int8_t axis[TXC_MAX_DIMS]; /* per dim: the mesh axis index it is split over, -1: not split */
    struct txc_sharding *next;
};

struct txc_mesh {
    int ndim;
    int64_t shape[TXC_MESH_MAX_AXES];
    char axis[TXC_MESH_MAX_AXES][32];
    int64_t coord[TXC_MESH_MAX_AXES]; /* this process's */
    int group[TXC_MESH_MAX_AXES];     /* comm group along each axis */
    txc_sharding *shardings;
};

/* The mesh's sharding whose dims d < ndim are split over mesh axis
 * axis[d] (-1: not split): an existing one with the same split (whatever
 * spec length wrote it), or a new one (owned by the mesh). All -1: P().
 * NULL on out of memory (error recorded). */
const txc_sharding *txc_shard_intern(txc_mesh *m, int ndim, const int8_t *axis);

/* Installs the propagation rules (rules.c) as the env's hook: called when
 * the first NamedSharding is made. */
void txc_shard_rules_install(void);

#endif
