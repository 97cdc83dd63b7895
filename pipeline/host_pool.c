/* The pool of pipeline/host_pool.h. */
#include "pipeline/host_pool.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/bigbuf.h"
#include "common/log.h"

/* A load the pool makes ahead for: one kind of block, sizes in one bucket (size_bucket: a render farm's frames
 * of one shape, the decoded ones alike to the byte, the compressed ones a little apart). */
typedef struct ahead_load {
    hp_mem_kind kind;
    unsigned bucket;  /* size_bucket(bytes): 0 for an entry not in use */
    size_t largest;   /* the most bytes asked within it: the size of its spares, which fit every request in it */
    unsigned out;     /* its blocks out now */
    unsigned pending; /* spares asked of the pool's thread, not yet made */
    double last_s;    /* when it was last asked: the oldest idle entry makes room for a new load */
    double retry_s;   /* after a spare could not be made, none is asked for until then */
} ahead_load;

/* Loads tracked at once: a daemon sees a few (per frame shape: the compressed bytes, the decoded ones, the
 * image); a ninth with every entry busy gets no spares until one is free. */
#define AHEAD_LOADS 8
/* After a spare could not be made (pinned memory gone), the seconds before that load asks again: not on every
 * request while memory is short. */
#define AHEAD_RETRY_S 1.0

struct hp_host_pool {
    hp_gpu *gpu;
    pthread_mutex_t lock;
    hp_host_block *kept; /* most recently given back first */
    /* By side, host [0] and device [1] (side_of; device blocks take no host memory): the bytes kept, and the
     * keep limit (the floor: kept up to it always) */
    size_t kept_bytes[2], keep_limit[2];
    _Atomic bool abandoned;   /* hp_host_pool_abandon: blocks given back are set aside, none handed out */
    hp_host_block *dropped;   /* given back after that: freed only at destruction, the device idle */
    unsigned out;        /* handed out, not yet back */
    /* hp_host_pool_counts_get: blocks made (none kept fitted) and freed (past the keep limit), and the time
     * making them took */
    _Atomic unsigned long made, freed;
    _Atomic unsigned long long make_ns;
    _Atomic int test_fail; /* hp_host_pool_test_fail */
    _Atomic bool test_fail_ahead; /* hp_host_pool_test_fail_ahead */
    /* The recent peak (hp_host_pool_get's "what was out"): by side, host [0] and device [1], the bytes out now,
     * and the most out in the current window and in the one before it; out and kept together may reach the
     * larger of the two (within the ceiling), so that a load that held that much gets it back from the pool. */
    size_t out_bytes[2], peak_now[2], peak_before[2], ceiling[2];
    double window_start;
    const double *test_clock; /* hp_host_pool_test_clock */
    /* Making ahead (hp_host_pool_make_ahead): the loads seen, the bytes of spares kept and not yet handed out (by
     * side: counted with out_bytes in the recent peak, so that spares never make the blocks given back past the
     * keep limit freed), and the pool's own thread that makes them: busy while it pins, held by a test. */
    ahead_load loads[AHEAD_LOADS];
    size_t spare_bytes[2];
    unsigned next_load; /* where the thread looks first for spares asked: the loads in turn */
    bool ahead, maker_running, maker_stop, maker_busy, maker_held;
    pthread_t maker;
    pthread_cond_t maker_wake, maker_idle;
    _Atomic unsigned long made_ahead;
    _Atomic unsigned long long make_ahead_ns;
};

/* A window of the recent peak: a load's blocks are kept from 30 to 60 s after it last needed them. */
#define PEAK_WINDOW_S 30.0
/* The most blocks one hp_host_pool_get or hp_host_pool_put frees past the limits: freeing pinned memory takes a
 * while, and the GPU thread is among the callers; the rest go at the next calls or the idle trim. */
#define POOL_TRIM_BLOCKS 8

static double pool_now(const hp_host_pool *p)
{
    if (p->test_clock)
        return *p->test_clock;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int side_of(hp_mem_kind kind) { return kind == HP_MEM_DEVICE; }

/* Under the lock: the windows moved on to now, on a grid of PEAK_WINDOW_S from the pool's start (so that a
 * peak is forgotten 30 to 60 s after it, whatever came between); a window with no request in it has a peak of
 * what was out. */
static void windows_advance(hp_host_pool *p)
{
    double passed = pool_now(p) - p->window_start;
    if (passed < PEAK_WINDOW_S)
        return;
    double windows = floor(passed / PEAK_WINDOW_S);
    for (int s = 0; s < 2; s++) {
        size_t held = p->out_bytes[s] + p->spare_bytes[s];
        p->peak_before[s] = windows >= 2 ? held : p->peak_now[s];
        p->peak_now[s] = held;
    }
    p->window_start += windows * PEAK_WINDOW_S;
}

/* Under the lock: side s's bytes out (and spares made ahead, which are out's too) are this window's peak if
 * they are the most yet. */
static void note_peak(hp_host_pool *p, int s)
{
    windows_advance(p);
    size_t held = p->out_bytes[s] + p->spare_bytes[s];
    if (held > p->peak_now[s])
        p->peak_now[s] = held;
}

/* Under the lock: whether side s may keep size bytes more. Up to the keep limit always (the floor); past it
 * while out and kept together stay within the recent peak and the ceiling. */
static bool keeps(const hp_host_pool *p, int s, size_t size)
{
    size_t kept = p->kept_bytes[s], floor = p->keep_limit[s];
    size_t peak = p->peak_now[s] > p->peak_before[s] ? p->peak_now[s] : p->peak_before[s];
    size_t allowed = peak < p->ceiling[s] ? peak : p->ceiling[s];
    return kept + size <= floor || p->out_bytes[s] + kept + size <= allowed;
}

/* Under the lock: whether the kept blocks of side s are past what keeps() allows now. */
static bool over(const hp_host_pool *p, int s)
{
    return p->kept_bytes[s] && !keeps(p, s, 0);
}

/* Under the lock: the oldest kept blocks past what keeps() allows now, taken off the kept list into *freed, at
 * most max_blocks of them (0: no limit); whether some are still past it. */
static bool trim_locked(hp_host_pool *p, hp_host_block **freed, unsigned max_blocks)
{
    windows_advance(p);
    unsigned taken = 0;
    for (int s = 0; s < 2; s++)
        while (over(p, s)) { /* the totals alone say whether anything is to go: most calls end here */
            if (max_blocks && taken == max_blocks)
                return true;
            hp_host_block **oldest = NULL;
            for (hp_host_block **at = &p->kept; *at; at = &(*at)->next)
                if (side_of((*at)->kind) == s)
                    oldest = at;
            if (!oldest)
                break;
            hp_host_block *b = *oldest;
            p->kept_bytes[s] -= (size_t)b->buf.size;
            if (b->spare)
                p->spare_bytes[s] -= (size_t)b->buf.size;
            *oldest = b->next;
            b->next = *freed;
            *freed = b;
            taken++;
        }
    return false;
}

static void free_blocks(hp_host_pool *p, hp_host_block *list)
{
    for (hp_host_block *b = list, *next; b; b = next) {
        next = b->next;
        hp_buffer_destroy(p->gpu, &b->buf);
        free(b);
        atomic_fetch_add(&p->freed, 1);
    }
}

/* A new block of bytes, or NULL and *err; *ns: the time making it took. Vulkan lets any thread create buffers
 * and memory (only the objects themselves are externally synchronized), so no lock is held. */
static hp_host_block *make_block(hp_host_pool *p, hp_mem_kind kind, size_t bytes, hp_err *err, unsigned long long *ns)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hp_host_block *b = calloc(1, sizeof(*b));
    const char *name = kind == HP_MEM_UPLOAD ? "request_frame" : kind == HP_MEM_DEVICE ? "request_decoded" : "request_image";
    hp_code rc = b ? hp_buffer_create(p->gpu, bytes, kind, name, &b->buf, err)
                   : hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    if (rc == HP_OK && kind != HP_MEM_DEVICE && !b->buf.mapped)
        rc = hp_fail(err, HP_ERR_MISSING_FEATURE, "the device gave host memory that cannot be mapped");
    if (rc != HP_OK) {
        if (b)
            hp_buffer_destroy(p->gpu, &b->buf);
        free(b);
        return NULL;
    }
    b->kind = kind;
    b->pool = p;
    b->load = -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ns = (unsigned long long)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
    return b;
}

/* A kept block of size fits a request of bytes: large enough, and not over twice as large (a larger one is left
 * for a larger request). */
static bool fits(size_t size, size_t bytes) { return size >= bytes && size / 2 <= bytes; }

/* A load's bucket: the size's magnitude and its top four bits (8 to 15 sixteenths of the next power of two), so
 * the largest size in a bucket is under 9/8 of its smallest, and a spare made at a load's largest fits all its
 * requests. Sizes either side of a bucket's edge (1 MiB - 1 and 1 MiB) are two loads. Never 0 (an entry not in
 * use). */
static unsigned size_bucket(size_t bytes)
{
    unsigned k = 0;
    while ((bytes >> k) >= 16)
        k++;
    return (k << 4) + (unsigned)(bytes >> k) + 1;
}

/* Under the lock: the load of blocks of kind and about bytes, or a new entry for it in place of the one idle
 * longest (no block out, no spare pending, not waiting to ask again after a failure); NULL when every entry is
 * busy. */
static ahead_load *load_of(hp_host_pool *p, hp_mem_kind kind, size_t bytes, double now)
{
    unsigned bucket = size_bucket(bytes);
    ahead_load *idle = NULL;
    for (int i = 0; i < AHEAD_LOADS; i++) {
        ahead_load *l = &p->loads[i];
        if (l->bucket == bucket && l->kind == kind)
            return l;
        if (!l->out && !l->pending && l->retry_s <= now && (!idle || l->last_s < idle->last_s))
            idle = l;
    }
    if (idle)
        *idle = (ahead_load){.kind = kind, .bucket = bucket};
    return idle;
}

/* Under the lock: whether side s may have bytes more made ahead: out and kept together within the keep limit,
 * where every block given back is kept. */
static bool room_ahead(const hp_host_pool *p, int s, size_t bytes)
{
    return p->out_bytes[s] + p->kept_bytes[s] + bytes <= p->keep_limit[s];
}

/* Under the lock, block b of kind just handed out for a request of bytes: its load counts it (b remembers the
 * entry), and with making ahead on the pool's thread is asked for the spares the load lacks: half its blocks
 * out, rounded up (one client's single block out gets one spare). The spares counted are the kept blocks that
 * fit the load's largest request, whoever gave them back. Why half: with a quarter, 64 clients of 4K frames
 * still made 2-12 blocks in 8 s on requests' paths after the warm-up (16-56 without spares; docs/BENCHMARKS.md,
 * 2026-11-30): their blocks out come in bursts that took the spares faster than one thread pins (5-26 ms a
 * block there). */
static void ahead_note_get(hp_host_pool *p, hp_host_block *b, hp_mem_kind kind, size_t bytes)
{
    double now = pool_now(p);
    ahead_load *l = bytes ? load_of(p, kind, bytes, now) : NULL; /* no load of nothing: its spares never fit */
    if (!l)
        return;
    b->load = (int)(l - p->loads);
    l->out++;
    l->last_s = now;
    if (bytes > l->largest)
        l->largest = bytes;
    if (!p->ahead || atomic_load(&p->abandoned) || l->last_s < l->retry_s)
        return;
    unsigned want = (l->out + 1) / 2, spare = 0;
    for (hp_host_block *k = p->kept; k && spare < want; k = k->next)
        if (k->kind == kind && fits((size_t)k->buf.size, l->largest))
            spare++;
    unsigned asked = 0;
    while (spare + l->pending < want && room_ahead(p, side_of(kind), (size_t)(l->pending + 1) * l->largest)) {
        l->pending++;
        asked++;
    }
    if (asked)
        pthread_cond_signal(&p->maker_wake);
}

/* Under the lock, block b back from its request: off the count of the load that counted it, if one did. That
 * entry is still the load's: an entry with blocks out is never given to another (load_of). */
static void ahead_note_put(hp_host_pool *p, hp_host_block *b)
{
    if (b->load >= 0)
        p->loads[b->load].out--;
    b->load = -1;
}

/* Under the lock: block b, kept or made, handed out for a request of bytes: counted out (a spare's bytes pass
 * from the spares' to out's), the recent peak noted, and its load told. */
static void hand_out(hp_host_pool *p, hp_host_block *b, size_t bytes)
{
    int s = side_of(b->kind);
    p->out_bytes[s] += (size_t)b->buf.size;
    if (b->spare) {
        p->spare_bytes[s] -= (size_t)b->buf.size;
        b->spare = false;
    }
    note_peak(p, s);
    ahead_note_get(p, b, b->kind, bytes);
}

/* Under the lock: the next load with spares asked, the loads in turn (none starves behind a busy one); NULL when
 * there is none, or the thread is held (hp_host_pool_test_hold_ahead). */
static ahead_load *pick_pending(hp_host_pool *p)
{
    for (unsigned i = 0; i < AHEAD_LOADS && !p->maker_held; i++) {
        ahead_load *l = &p->loads[(p->next_load + i) % AHEAD_LOADS];
        if (l->pending) {
            p->next_load = (p->next_load + i + 1) % AHEAD_LOADS;
            return l;
        }
    }
    return NULL;
}

/* Under the lock, a spare b just made for load l: kept as a spare where there is still room for it (the load
 * may have grown while it was pinned), else freed (never used by the device: at once, even after the device is
 * lost). Returns what is to be freed outside the lock. */
static hp_host_block *keep_spare(hp_host_pool *p, ahead_load *l, hp_host_block *b, unsigned long long ns)
{
    int s = side_of(b->kind);
    l->pending--;
    atomic_fetch_add(&p->made_ahead, 1);
    atomic_fetch_add(&p->make_ahead_ns, ns);
    if (atomic_load(&p->abandoned) || !room_ahead(p, s, (size_t)b->buf.size))
        return b;
    b->spare = true;
    b->next = p->kept;
    p->kept = b;
    p->kept_bytes[s] += (size_t)b->buf.size;
    p->spare_bytes[s] += (size_t)b->buf.size;
    note_peak(p, s);
    return NULL;
}

/* The pool's own thread: makes the spares asked for, one at a time, the lock let go while it pins. A spare that
 * cannot be made ends that load's asking for AHEAD_RETRY_S (its requests then make their own, or fall back to
 * ordinary memory, as without making ahead). */
static void *maker_main(void *arg)
{
    hp_host_pool *p = arg;
    pthread_setname_np(pthread_self(), "hp-pool-ahead");
    bool warned = false;
    pthread_mutex_lock(&p->lock);
    while (!p->maker_stop) {
        ahead_load *l = pick_pending(p);
        if (!l) {
            pthread_cond_broadcast(&p->maker_idle);
            pthread_cond_wait(&p->maker_wake, &p->lock);
            continue;
        }
        hp_mem_kind kind = l->kind;
        size_t size = l->largest;
        if (!p->ahead || atomic_load(&p->abandoned) || atomic_load(&p->test_fail) ||
            !room_ahead(p, side_of(kind), size)) {
            l->pending = 0;
            continue;
        }
        p->maker_busy = true;
        pthread_mutex_unlock(&p->lock);
        hp_err err = {0};
        unsigned long long ns = 0;
        hp_host_block *b = NULL;
        if (atomic_load(&p->test_fail_ahead))
            hp_fail(&err, HP_ERR_OUT_OF_MEMORY, "no pinned block of %zu bytes (hp_host_pool_test_fail_ahead)", size);
        else
            b = make_block(p, kind, size, &err, &ns);
        if (!b && !warned) /* once a shortage: warned again after a block has been made since */
            hp_warn("host pool: a block made ahead: %s; the requests make their own", err.message);
        warned = !b;
        pthread_mutex_lock(&p->lock);
        /* l is still this load's: an entry with spares pending is never given to another (load_of) */
        hp_host_block *freed = NULL;
        if (b) {
            freed = keep_spare(p, l, b, ns);
        } else {
            l->pending = 0;
            l->retry_s = pool_now(p) + AHEAD_RETRY_S;
        }
        if (freed) {
            pthread_mutex_unlock(&p->lock);
            free_blocks(p, freed);
            pthread_mutex_lock(&p->lock);
        }
        p->maker_busy = false;
    }
    p->maker_busy = false;
    pthread_cond_broadcast(&p->maker_idle);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void hp_host_pool_make_ahead(hp_host_pool *p, bool on)
{
    pthread_mutex_lock(&p->lock);
    p->ahead = on;
    if (on && !p->maker_running) {
        if (pthread_create(&p->maker, NULL, maker_main, p) == 0)
            p->maker_running = true;
        else {
            p->ahead = false;
            hp_warn("host pool: no thread to make blocks ahead; the requests make their own");
        }
    }
    pthread_mutex_unlock(&p->lock);
}

void hp_host_pool_ahead_settle(hp_host_pool *p)
{
    pthread_mutex_lock(&p->lock);
    for (;;) {
        bool pending = p->maker_busy;
        for (int i = 0; i < AHEAD_LOADS; i++)
            pending |= p->loads[i].pending != 0;
        if (!pending || !p->maker_running || p->maker_stop || p->maker_held)
            break;
        pthread_cond_wait(&p->maker_idle, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
}

void hp_host_pool_test_hold_ahead(hp_host_pool *p, bool held)
{
    pthread_mutex_lock(&p->lock);
    p->maker_held = held;
    pthread_cond_broadcast(&p->maker_wake);
    pthread_mutex_unlock(&p->lock);
}

void hp_host_pool_keep_recent_peak(hp_host_pool *p, size_t host_ceiling, size_t device_ceiling)
{
    pthread_mutex_lock(&p->lock);
    p->ceiling[0] = host_ceiling;
    p->ceiling[1] = device_ceiling;
    pthread_mutex_unlock(&p->lock);
}

void hp_host_pool_test_clock(hp_host_pool *p, const double *now_s)
{
    pthread_mutex_lock(&p->lock);
    p->test_clock = now_s;
    p->window_start = pool_now(p);
    pthread_mutex_unlock(&p->lock);
}

bool hp_host_pool_trim(hp_host_pool *p, unsigned max_blocks)
{
    hp_host_block *freed = NULL;
    bool more = false;
    pthread_mutex_lock(&p->lock);
    if (!atomic_load(&p->abandoned))
        more = trim_locked(p, &freed, max_blocks);
    pthread_mutex_unlock(&p->lock);
    free_blocks(p, freed);
    return more;
}

void hp_host_pool_keep_device(hp_host_pool *p, size_t keep_bytes)
{
    pthread_mutex_lock(&p->lock);
    p->keep_limit[1] = keep_bytes;
    pthread_mutex_unlock(&p->lock);
}

void hp_host_pool_test_fail(hp_host_pool *p, int level) { atomic_store(&p->test_fail, level); }

void hp_host_pool_test_fail_ahead(hp_host_pool *p, bool fail) { atomic_store(&p->test_fail_ahead, fail); }

hp_code hp_host_pool_create(hp_gpu *gpu, size_t keep_bytes, hp_host_pool **out, hp_err *err)
{
    hp_host_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    p->gpu = gpu;
    p->keep_limit[0] = p->keep_limit[1] = keep_bytes;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->maker_wake, NULL);
    pthread_cond_init(&p->maker_idle, NULL);
    p->window_start = pool_now(p);
    *out = p;
    return HP_OK;
}

void hp_host_pool_destroy(hp_host_pool **pp)
{
    hp_host_pool *p = *pp;
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->maker_stop = true;
    pthread_cond_broadcast(&p->maker_wake);
    pthread_mutex_unlock(&p->lock);
    if (p->maker_running)
        pthread_join(p->maker, NULL);
    if (p->out)
        hp_error("host pool: %u block(s) still out at destruction (leaked)", p->out);
    if (p->dropped) /* nothing of the device's may still use them once it is idle (or lost) */
        vkDeviceWaitIdle(hp_gpu_device(p->gpu));
    hp_host_block *lists[2] = {p->kept, p->dropped};
    for (int l = 0; l < 2; l++)
        for (hp_host_block *b = lists[l], *next; b; b = next) {
            next = b->next;
            hp_buffer_destroy(p->gpu, &b->buf);
            free(b);
        }
    pthread_cond_destroy(&p->maker_wake);
    pthread_cond_destroy(&p->maker_idle);
    pthread_mutex_destroy(&p->lock);
    free(p);
    *pp = NULL;
}

hp_host_block *hp_host_pool_get(hp_host_pool *p, hp_mem_kind kind, size_t bytes, hp_err *err)
{
    if (atomic_load(&p->test_fail) >= 1) {
        hp_fail(err, HP_ERR_OUT_OF_MEMORY, "test_fail_host_memory: no pinned block of %zu bytes (a setting for "
                "tests only)", bytes);
        return NULL;
    }
    if (atomic_load(&p->abandoned)) {
        hp_fail(err, HP_ERR_DEVICE_LOST, "the device is lost: no block of %zu bytes", bytes);
        return NULL;
    }
    pthread_mutex_lock(&p->lock);
    hp_host_block **best = NULL;
    for (hp_host_block **at = &p->kept; *at; at = &(*at)->next) {
        size_t size = (size_t)(*at)->buf.size;
        if ((*at)->kind == kind && fits(size, bytes) && (!best || size < (size_t)(*best)->buf.size))
            best = at;
    }
    hp_host_block *b = NULL;
    if (best) {
        b = *best;
        *best = b->next;
        p->kept_bytes[side_of(kind)] -= (size_t)b->buf.size;
    }
    p->out++;
    hp_host_block *freed = NULL;
    if (b) {
        hand_out(p, b, bytes);
    } else {
        /* None fits: a load of another size or kind. The kept blocks of a load that has passed go first, so
         * that they and the new load's never add up past the ceiling. */
        trim_locked(p, &freed, POOL_TRIM_BLOCKS);
    }
    pthread_mutex_unlock(&p->lock);
    free_blocks(p, freed);
    if (b) {
        b->next = NULL;
        return b;
    }
    /* A new one, outside the lock: pinning tens of megabytes takes milliseconds. */
    unsigned long long ns = 0;
    b = make_block(p, kind, bytes, err, &ns);
    pthread_mutex_lock(&p->lock);
    if (!b) {
        p->out--;
        pthread_mutex_unlock(&p->lock);
        return NULL;
    }
    hand_out(p, b, bytes); /* counted out once made, never a block that could not be: no peak raised by a failure */
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_add(&p->made, 1);
    atomic_fetch_add(&p->make_ns, ns);
    return b;
}

void hp_host_pool_put(hp_host_block *b)
{
    if (!b)
        return;
    hp_host_pool *p = b->pool;
    int s = side_of(b->kind);
    pthread_mutex_lock(&p->lock);
    windows_advance(p); /* first: a window that turns over now counts the block as out */
    p->out--;
    p->out_bytes[s] -= (size_t)b->buf.size;
    ahead_note_put(p, b);
    if (atomic_load(&p->abandoned)) { /* the device may still touch it: never reused, freed at destruction */
        b->next = p->dropped;
        p->dropped = b;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    /* Kept if it fits the limits, else freed; either way the oldest of a load that has passed go too (a load of
     * another size also frees them as it asks: hp_host_pool_get). */
    windows_advance(p);
    hp_host_block *freed = NULL;
    if (keeps(p, s, (size_t)b->buf.size)) {
        b->next = p->kept;
        p->kept = b;
        p->kept_bytes[s] += (size_t)b->buf.size;
    } else {
        b->next = NULL;
        freed = b;
    }
    trim_locked(p, &freed, POOL_TRIM_BLOCKS);
    pthread_mutex_unlock(&p->lock);
    free_blocks(p, freed);
}

void hp_host_pool_abandon(hp_host_pool *p)
{
    if (!atomic_exchange(&p->abandoned, true))
        hp_error("host pool: the device is lost: blocks given back from now on are set aside, none is handed out");
}

void hp_host_pool_usage(hp_host_pool *p, unsigned *out_blocks, size_t *kept_bytes)
{
    pthread_mutex_lock(&p->lock);
    if (out_blocks)
        *out_blocks = p->out;
    if (kept_bytes)
        *kept_bytes = p->kept_bytes[0];
    pthread_mutex_unlock(&p->lock);
}

void hp_host_pool_counts_get(hp_host_pool *p, hp_host_pool_counts *out)
{
    pthread_mutex_lock(&p->lock);
    size_t kept_device = p->kept_bytes[1];
    pthread_mutex_unlock(&p->lock);
    *out = (hp_host_pool_counts){.made = atomic_load(&p->made), .freed = atomic_load(&p->freed),
                                 .make_seconds = (double)atomic_load(&p->make_ns) * 1e-9,
                                 .made_ahead = atomic_load(&p->made_ahead),
                                 .make_ahead_seconds = (double)atomic_load(&p->make_ahead_ns) * 1e-9,
                                 .kept_device_bytes = kept_device};
}

bool hp_host_mem_get(hp_host_pool *pool, hp_mem_kind kind, size_t bytes, hp_host_mem *out)
{
    out->block = NULL;
    out->ptr = NULL;
    if (pool && atomic_load(&pool->test_fail) >= 2)
        return false;
    if (pool) {
        hp_err err = {0};
        out->block = hp_host_pool_get(pool, kind, bytes, &err);
        if (out->block) {
            out->ptr = out->block->buf.mapped;
            return true;
        }
        /* Pinned memory can run out before ordinary memory does: the frame still runs, one copy slower. */
        hp_warn("host pool: %s; this frame goes through ordinary memory", err.message);
    }
    out->ptr = hp_bigbuf_get(bytes);
    return out->ptr != NULL;
}

void hp_host_mem_put(hp_host_mem *m)
{
    if (m->block)
        hp_host_pool_put(m->block);
    else
        hp_bigbuf_put(m->ptr);
    m->block = NULL;
    m->ptr = NULL;
}
