/* The OCIO stage's programs: made on first use, kept least-recently-used (pipeline/ocio_stage.h).
 *
 * One lock guards the set. A program is made outside it (OCIO's shader, glslang, the LUTs: tens of
 * milliseconds on a GPU host, seconds on lavapipe), marked as being made so that another request for the same
 * key waits for it instead of making it twice, and requests for programs already kept never wait for one
 * being made. */
#include "pipeline/ocio_stage.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "pipeline/ocio_program.h"

struct hp_ocio_entry {
    hp_ocio_view_key key;
    hp_ocio_program program;
    bool making;   /* its maker works on it outside the lock; nobody else touches program */
    uint32_t refs; /* frames holding it, and its maker */
    uint64_t used; /* the stage's tick at its last acquire */
};

struct hp_ocio_stage {
    hp_gpu *gpu;
    const hp_ocio_config *config;
    hp_ocio_program_options options;
    uint32_t capacity;
    pthread_mutex_t lock;
    pthread_cond_t made; /* an entry finished being made (or failed) */
    hp_ocio_entry **entries;
    uint32_t count, allocated;
    uint64_t tick;
    hp_ocio_stage_stats stats;
};

hp_code hp_ocio_stage_create(hp_gpu *gpu, const hp_ocio_config *config, uint32_t capacity, hp_ocio_stage **out,
                             hp_err *err)
{
    return hp_ocio_stage_create_with(gpu, config, capacity, NULL, out, err);
}

hp_code hp_ocio_stage_create_with(hp_gpu *gpu, const hp_ocio_config *config, uint32_t capacity,
                                  const hp_ocio_program_options *options, hp_ocio_stage **out, hp_err *err)
{
    *out = NULL;
    hp_ocio_stage *s = calloc(1, sizeof *s);
    if (!s)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio stage: out of memory");
    s->gpu = gpu;
    s->config = config;
    if (options)
        s->options = *options;
    s->capacity = capacity ? capacity : 1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->made, NULL);
    *out = s;
    return HP_OK;
}

static void entry_free(hp_ocio_stage *s, hp_ocio_entry *e)
{
    hp_ocio_program_destroy(s->gpu, &e->program);
    free(e);
}

void hp_ocio_stage_destroy(hp_ocio_stage **stage)
{
    hp_ocio_stage *s = *stage;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->count; i++)
        entry_free(s, s->entries[i]);
    free(s->entries);
    pthread_cond_destroy(&s->made);
    pthread_mutex_destroy(&s->lock);
    free(s);
    *stage = NULL;
}

const hp_ocio_config *hp_ocio_stage_config(const hp_ocio_stage *s)
{
    return s->config;
}

static bool same_key(const hp_ocio_view_key *a, const hp_ocio_view_key *b)
{
    return !strcmp(a->input, b->input) && !strcmp(a->display, b->display) && !strcmp(a->view, b->view) &&
           !strcmp(a->looks, b->looks);
}

static hp_ocio_entry *find(hp_ocio_stage *s, const hp_ocio_view_key *key)
{
    for (uint32_t i = 0; i < s->count; i++)
        if (same_key(&s->entries[i]->key, key))
            return s->entries[i];
    return NULL;
}

static void remove_at(hp_ocio_stage *s, uint32_t i)
{
    s->entries[i] = s->entries[--s->count];
}

/* While more than `keep` programs are kept, the least recently used that no frame holds goes. When every one
 * is held the set stays over its capacity until they are released. Under the lock. */
static void evict_to(hp_ocio_stage *s, uint32_t keep)
{
    while (s->count > keep) {
        int victim = -1;
        for (uint32_t i = 0; i < s->count; i++) {
            const hp_ocio_entry *e = s->entries[i];
            if (!e->making && e->refs == 0 && (victim < 0 || e->used < s->entries[victim]->used))
                victim = (int)i;
        }
        if (victim < 0)
            return;
        hp_ocio_entry *e = s->entries[victim];
        hp_debug("ocio: program %s / %s from \"%s\" evicted", e->key.display, e->key.view, e->key.input);
        remove_at(s, (uint32_t)victim);
        entry_free(s, e);
        s->stats.evicted++;
    }
}

/* A new entry being made, in the set (room made first). Under the lock. */
static hp_ocio_entry *insert_making(hp_ocio_stage *s, const hp_ocio_view_key *key)
{
    evict_to(s, s->capacity - 1);
    if (s->count == s->allocated) {
        uint32_t n = s->allocated ? 2 * s->allocated : 8;
        hp_ocio_entry **grown = realloc(s->entries, n * sizeof *grown);
        if (!grown)
            return NULL;
        s->entries = grown;
        s->allocated = n;
    }
    hp_ocio_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *key;
    e->making = true;
    e->refs = 1;
    e->used = ++s->tick;
    s->entries[s->count++] = e;
    return e;
}

/* Makes the program of an entry marked making, outside the lock, then publishes it or takes it out. */
static hp_code make_entry(hp_ocio_stage *s, hp_ocio_entry *e, hp_pixel_format format, hp_tone_output kind,
                          hp_err *err)
{
    const hp_compute *pipe;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hp_code code = hp_ocio_program_make(s->gpu, s->config, &e->key, &s->options, &e->program, err);
    if (code == HP_OK)
        code = hp_ocio_program_pipeline(s->gpu, &e->program, format, kind, &pipe, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* The whole first use: OCIO's shader, glslang, the LUTs and the first pipeline (the driver's compile). */
    e->program.compile_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    pthread_mutex_lock(&s->lock);
    e->making = false;
    if (code == HP_OK) {
        s->stats.made++;
        s->stats.last_made_ms = e->program.compile_ms;
        s->stats.made_ms += e->program.compile_ms;
    } else {
        for (uint32_t i = 0; i < s->count; i++)
            if (s->entries[i] == e)
                remove_at(s, i);
        entry_free(s, e);
        s->stats.failed++;
    }
    pthread_cond_broadcast(&s->made);
    pthread_mutex_unlock(&s->lock);
    if (code == HP_OK)
        hp_info("ocio: program for %s / %s from \"%s\"%s%s made in %.0f ms", e->key.display, e->key.view,
                e->key.input, e->key.looks[0] ? " with looks " : "", e->key.looks, e->program.compile_ms);
    return code;
}

hp_code hp_ocio_stage_acquire(hp_ocio_stage *s, const hp_ocio_view_key *key, hp_pixel_format format,
                              hp_tone_output kind, hp_ocio_entry **out, bool *made, hp_err *err)
{
    *out = NULL;
    *made = false;
    pthread_mutex_lock(&s->lock);
    hp_ocio_entry *e;
    while ((e = find(s, key)) && e->making)
        pthread_cond_wait(&s->made, &s->lock); /* it may have failed and gone: look again */
    if (e) {
        const hp_compute *pipe;
        hp_code code = hp_ocio_program_pipeline(s->gpu, &e->program, format, kind, &pipe, err);
        if (code == HP_OK) {
            e->refs++;
            e->used = ++s->tick;
            s->stats.hits++;
            *out = e;
        }
        pthread_mutex_unlock(&s->lock);
        return code;
    }
    e = insert_making(s, key);
    pthread_mutex_unlock(&s->lock);
    if (!e)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio stage: out of memory");
    hp_code code = make_entry(s, e, format, kind, err);
    if (code == HP_OK) {
        *out = e;
        *made = true;
    }
    return code;
}

void hp_ocio_stage_release(hp_ocio_stage *s, hp_ocio_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&s->lock);
    e->refs--;
    evict_to(s, s->capacity);
    pthread_mutex_unlock(&s->lock);
}

bool hp_ocio_stage_has(const hp_ocio_entry *e, hp_pixel_format format, hp_tone_output kind)
{
    return (kind == HP_TONE_OUT_RGBA8 || kind == HP_TONE_OUT_RGBA16) &&
           e->program.pipelines[format == HP_PIXEL_RGBA16F ? 1 : 0][kind == HP_TONE_OUT_RGBA16 ? 1 : 0].pipeline;
}

uint32_t hp_ocio_entry_buffer_luts(const hp_ocio_entry *e)
{
    return e->program.buffer_luts;
}

void hp_ocio_entry_statistics(hp_gpu *gpu, const hp_ocio_entry *e, hp_pixel_format format, hp_tone_output kind,
                              char *buf, size_t len)
{
    hp_compute_statistics(gpu, &e->program.pipelines[format == HP_PIXEL_RGBA16F ? 1 : 0]
                                                   [kind == HP_TONE_OUT_RGBA16 ? 1 : 0], buf, len);
}

void hp_ocio_stage_record(const hp_ocio_entry *e, VkCommandBuffer cmd, const hp_ocio_io *io)
{
    const hp_compute *c = &e->program.pipelines[io->format == HP_PIXEL_RGBA16F ? 1 : 0]
                                                [io->kind == HP_TONE_OUT_RGBA16 ? 1 : 0];
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
    if (e->program.set) /* none when it has no LUT, or only LUTs in buffers */
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0, 1, &e->program.set, 0, NULL);
    /* shaders/ocio_display.comp's Push: three addresses, width, height, dither, a pad, the buffer LUTs'
     * addresses in the order of the program's LUTs. */
    uint32_t words[18] = {
        (uint32_t)io->pixels, (uint32_t)(io->pixels >> 32), (uint32_t)io->output, (uint32_t)(io->output >> 32),
        (uint32_t)io->state,  (uint32_t)(io->state >> 32),  io->width,            io->height,
        io->dither ? 1u : 0u, 0u,
    };
    uint32_t slot = 0;
    for (uint32_t i = 0; i < e->program.lut_count && slot < HP_OCIO_MAX_BUFFER_LUTS; i++) {
        VkDeviceAddress a = e->program.luts[i].buffer.buffer ? e->program.luts[i].buffer.address : 0;
        if (a) {
            words[10 + 2 * slot] = (uint32_t)a;
            words[11 + 2 * slot++] = (uint32_t)(a >> 32);
        }
    }
    _Static_assert(sizeof words == HP_OCIO_PUSH_BYTES, "shaders/ocio_display.comp's Push");
    vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof words, words);
    vkCmdDispatch(cmd, (io->width + 31) / 32, (io->height + 7) / 8, 1);
}

void hp_ocio_stage_stats_get(hp_ocio_stage *s, hp_ocio_stage_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    out->kept = s->count;
    pthread_mutex_unlock(&s->lock);
}
