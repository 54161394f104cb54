/* layerset.c - the layer set of layered prefixes (a hash table) */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* the layer set                                                       */
/* ------------------------------------------------------------------ */

/* The paths under layered prefixes that the upper layer changes, with their
 * kind (UM_LAYER_DIR or UM_LAYER_HIDE), mirrored from the Python module. A
 * look-up is made for every component of every path under a layered prefix,
 * so: open addressing with linear probing over (pointer, length) keys, which
 * lets a path's ancestors be looked up in place, without copying or
 * allocating. The table stays at most half full (tombstones included). */

static struct layer_slot *layer_tab;
static size_t layer_cap, layer_used, layer_live; /* used = live + tombstones */
static char layer_tomb;

/* FNV-1a, which can be continued: the hash of a path is that of its parent
 * continued over "/name", so a walk down a path hashes each byte once
 * (layer_hit, the symlink walk), however deep the path. */
uint64_t layer_hash_more(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_path(const char *p, size_t n) { return layer_hash_more(LAYER_HASH_START, p, n); }

/* The entry of path p (n bytes) whose layer_hash_more() is h, or NULL. */
struct layer_slot *layer_find_hashed(const char *p, size_t n, uint64_t h)
{
    if (!layer_live)
        return NULL;
    for (size_t i = (size_t)(h ^ (h >> 29)) & (layer_cap - 1);; i = (i + 1) & (layer_cap - 1)) {
        struct layer_slot *e = &layer_tab[i];
        if (!e->path)
            return NULL;
        if (e->path != &layer_tomb && e->len == n && memcmp(e->path, p, n) == 0)
            return e;
    }
}

struct layer_slot *layer_find(const char *p, size_t n) { return layer_find_hashed(p, n, hash_path(p, n)); }

/* The empty or deleted slot where a key absent from the table goes. */
static struct layer_slot *layer_free_slot(const char *p, size_t n)
{
    uint64_t h = hash_path(p, n);
    for (size_t i = (size_t)(h ^ (h >> 29)) & (layer_cap - 1);; i = (i + 1) & (layer_cap - 1))
        if (!layer_tab[i].path || layer_tab[i].path == &layer_tomb)
            return &layer_tab[i];
}

static int layer_rehash(size_t cap)
{
    struct layer_slot *old = layer_tab;
    size_t old_cap = layer_cap;
    layer_tab = calloc(cap, sizeof *layer_tab);
    if (!layer_tab) {
        layer_tab = old;
        return -ENOMEM;
    }
    layer_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].path && old[i].path != &layer_tomb)
            *layer_free_slot(old[i].path, old[i].len) = old[i];
    layer_used = layer_live;
    free(old);
    return 0;
}

/* strip trailing slashes, as um_prefix_add does: keys are normalized paths */
static size_t layer_key_len(const char *p)
{
    size_t l = strlen(p);
    while (l > 1 && p[l - 1] == '/')
        l--;
    return l;
}

static int um_layer_add_unlocked(const char *p, int kind)
{
    if (p[0] != '/' || (kind != UM_LAYER_DIR && kind != UM_LAYER_HIDE && kind != UM_LAYER_FILE))
        return -EINVAL;
    size_t n = layer_key_len(p);
    struct layer_slot *e = layer_find(p, n);
    if (e) {
        e->kind = kind;
        return 0;
    }
    if ((layer_used + 1) * 2 > layer_cap) {
        size_t cap = 64;
        while (cap < (layer_live + 1) * 4)
            cap *= 2;
        int r = layer_rehash(cap);
        if (r)
            return r;
    }
    char *key = strndup(p, n);
    if (!key)
        return -ENOMEM;
    e = layer_free_slot(p, n);
    if (!e->path)
        layer_used++;
    *e = (struct layer_slot){key, n, kind};
    layer_live++;
    return 0;
}

int um_layer_add(const char *p, int kind)
{
    tables_write_lock();
    int r = um_layer_add_unlocked(p, kind);
    tables_write_unlock();
    return r;
}

static int um_layer_del_unlocked(const char *p)
{
    struct layer_slot *e = layer_find(p, layer_key_len(p));
    if (!e)
        return -ENOENT;
    free(e->path);
    e->path = &layer_tomb;
    layer_live--;
    return 0;
}

int um_layer_del(const char *p)
{
    tables_write_lock();
    int r = um_layer_del_unlocked(p);
    tables_write_unlock();
    return r;
}

static void um_layer_clear_unlocked(void)
{
    for (size_t i = 0; i < layer_cap; i++)
        if (layer_tab[i].path && layer_tab[i].path != &layer_tomb)
            free(layer_tab[i].path);
    if (layer_tab)
        memset(layer_tab, 0, layer_cap * sizeof *layer_tab);
    layer_used = layer_live = 0;
}

void um_layer_clear(void)
{
    tables_write_lock();
    um_layer_clear_unlocked();
    tables_write_unlock();
}

int um_layer_get(const char *p)
{
    struct layer_slot *e = layer_find(p, layer_key_len(p));
    return e ? e->kind : 0;
}

/* Must Python see a call that reads the normalized path p, under a layered
 * prefix? Yes if p itself is in the set (the upper layer changes it), or a
 * proper ancestor is a HIDE entry (the lower tree below it is hidden). */
int layer_hides(int kind) { return kind == UM_LAYER_HIDE || kind == UM_LAYER_FILE; }

/* Does an ancestor of p (n bytes), "/" included, hide what lies below it? */
static int ancestor_hides(const char *p, size_t n)
{
    const struct layer_slot *e = layer_find("/", 1);
    if (e && layer_hides(e->kind))
        return 1;
    /* each ancestor's hash continues the previous one's: linear in n */
    uint64_t h = LAYER_HASH_START;
    size_t done = 0;
    for (size_t i = 1; i < n; i++)
        if (p[i] == '/') {
            h = layer_hash_more(h, p + done, i - done);
            done = i;
            if ((e = layer_find_hashed(p, i, h)) && layer_hides(e->kind))
                return 1;
        }
    return 0;
}

int layer_hit(const char *p, size_t n)
{
    if (!layer_live)
        return 0;
    if (layer_find(p, n))
        return 1;
    return ancestor_hides(p, n);
}

int layer_hides_dir(const char *p, size_t n)
{
    if (!layer_live)
        return 0;
    const struct layer_slot *e = layer_find(p, n);
    return (e && layer_hides(e->kind)) || ancestor_hides(p, n);
}

int layer_upper(const char *p, size_t n)
{
    const struct layer_slot *e = layer_live ? layer_find(p, n) : NULL;
    return e && (e->kind == UM_LAYER_FILE || e->kind == UM_LAYER_DIR) && !ancestor_hides(p, n);
}

int layer_upper_dir(const char *p, size_t n)
{
    const struct layer_slot *e = layer_live ? layer_find(p, n) : NULL;
    return e && e->kind == UM_LAYER_DIR && !ancestor_hides(p, n);
}
