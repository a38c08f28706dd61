/* The flatten/unflatten registry; see include/txc/tree.h. */
#include "txc/tree.h"

#include <pthread.h>
#include <string.h>

#define MAX_TYPES 64

static const txc_tree_def *types[MAX_TYPES];
static int n_types;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

txc_status txc_tree_register(const txc_tree_def *def)
{
    if (!def || !def->name || !def->flatten || !def->unflatten)
        return txc_error(TXC_ERR_INVALID, "tree: a type needs a name, flatten and unflatten");
    txc_status s = TXC_OK;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_types; i++)
        if (strcmp(types[i]->name, def->name) == 0) {
            if (types[i] != def)
                s = txc_error(TXC_ERR_INVALID, "tree: type '%s' is already registered", def->name);
            pthread_mutex_unlock(&lock);
            return s;
        }
    if (n_types == MAX_TYPES)
        s = txc_error(TXC_ERR_CAPACITY, "tree: more than %d types", MAX_TYPES);
    else
        types[n_types++] = def;
    pthread_mutex_unlock(&lock);
    return s;
}

const txc_tree_def *txc_tree_find(const char *name)
{
    const txc_tree_def *d = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_types && !d; i++)
        if (strcmp(types[i]->name, name) == 0)
            d = types[i];
    pthread_mutex_unlock(&lock);
    return d;
}

static const txc_tree_def *find_or_fail(const char *type)
{
    const txc_tree_def *d = txc_tree_find(type);
    if (!d)
        txc_error(TXC_ERR_INVALID, "tree: type '%s' is not registered", type);
    return d;
}

txc_status txc_tree_flatten(const char *type, const void *obj, txc_tensor **leaves, int max, int *n, void *aux,
                            size_t *aux_len)
{
    const txc_tree_def *d = find_or_fail(type);
    if (!d)
        return TXC_ERR_INVALID;
    *n = 0;
    *aux_len = 0;
    return d->flatten(obj, leaves, max, n, aux, aux_len);
}

void *txc_tree_unflatten(const char *type, const void *aux, size_t aux_len, txc_tensor *const *leaves, int n,
                         txc_env *env)
{
    const txc_tree_def *d = find_or_fail(type);
    return d ? d->unflatten(aux, aux_len, leaves, n, env) : NULL;
}

void txc_tree_free(const char *type, void *obj)
{
    const txc_tree_def *d = txc_tree_find(type);
    if (d && d->free && obj)
        d->free(obj);
}
