/* The CRC-32 of a large buffer on several threads (crc32_threads.h). */
#include "api/codecs/crc32_threads.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdbool.h>
#include <zlib.h>

#include "common/clock.h"

#define MAX_THREADS 16

typedef struct crc_piece {
    const uint8_t *data;
    size_t len;
    uint32_t crc;
    double cpu_ms; /* its thread's, when it had one */
} crc_piece;

static void *piece_crc(void *arg)
{
    crc_piece *p = arg;
    p->crc = libdeflate_crc32(0, p->data, p->len);
    return NULL;
}

static void *piece_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-crc32");
    double c0 = hp_thread_cpu_ms();
    piece_crc(arg);
    ((crc_piece *)arg)->cpu_ms = hp_thread_cpu_ms() - c0;
    return NULL;
}

uint32_t hp_crc32_threads(uint32_t crc, const uint8_t *data, size_t len, unsigned threads, double *helper_cpu_ms)
{
    if (helper_cpu_ms)
        *helper_cpu_ms = 0;
    size_t n = len / HP_CRC32_THREADS_PIECE;
    n = n < threads ? n : threads;
    n = n < MAX_THREADS ? n : MAX_THREADS;
    if (len < HP_CRC32_THREADS_MIN_BYTES || n < 2)
        return libdeflate_crc32(crc, data, len);
    crc_piece pieces[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    size_t at = 0, step = len / n;
    for (size_t i = 0; i < n; i++) {
        pieces[i] = (crc_piece){.data = data + at, .len = i + 1 < n ? step : len - at, .cpu_ms = 0};
        at += pieces[i].len;
    }
    /* Piece 0 here, the others on their threads. */
    for (size_t i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, piece_thread, &pieces[i]) == 0;
    pieces[0].crc = libdeflate_crc32(crc, pieces[0].data, pieces[0].len);
    uint32_t out = pieces[0].crc;
    for (size_t i = 1; i < n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            piece_crc(&pieces[i]);
        if (helper_cpu_ms)
            *helper_cpu_ms += pieces[i].cpu_ms;
        /* zlib's z_off_t is 64-bit here (_FILE_OFFSET_BITS=64); pieces are far below either limit. */
        out = (uint32_t)crc32_combine(out, pieces[i].crc, (z_off_t)pieces[i].len);
    }
    return out;
}
