/* common/rows_ready.h: rows become ready only as a contiguous prefix of pieces done in any order; a reader
 * waiting for rows wakes when they are, or at the end; the end says how it went; a decoder that gives up
 * is seen as such. Threads: a decoder thread marks pieces in a shuffled order while the main thread waits
 * for growing prefixes, as the GPU thread does in the daemon. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rows_ready.h"
#include "tap.h"

typedef struct marker {
    hp_rows_ready *t;
    uint32_t pieces;
    hp_code code;
} marker;

static void *mark_all(void *arg)
{
    marker *m = arg;
    uint32_t order[64];
    for (uint32_t i = 0; i < m->pieces; i++)
        order[i] = i;
    uint64_t s = 7;
    for (uint32_t i = m->pieces; i > 1; i--) { /* shuffled: pieces finish out of order */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t j = (uint32_t)(s >> 33) % i, tmp = order[i - 1];
        order[i - 1] = order[j], order[j] = tmp;
    }
    for (uint32_t i = 0; i < m->pieces; i++) {
        struct timespec d = {0, 200000};
        nanosleep(&d, NULL);
        hp_rows_ready_piece(m->t, order[i]);
    }
    hp_err e = {0};
    if (m->code != HP_OK)
        hp_fail(&e, m->code, "chunk 9 is damaged");
    hp_rows_ready_finish(m->t, m->code, &e);
    return NULL;
}

int main(void)
{
    hp_rows_ready t;
    hp_rows_ready_init(&t);
    hp_rows_ready_start(&t);
    tap_ok(hp_rows_ready_wait_start(&t) == HP_ROWS_DECODING, "a started decoder is seen as decoding");
    hp_rows_ready_layout(&t, 100, 16); /* 7 pieces, the last of 4 rows */
    bool finished = true;
    hp_rows_ready_piece(&t, 1);
    hp_rows_ready_piece(&t, 2);
    tap_ok(hp_rows_ready_wait(&t, 0, &finished) == 0 && !finished, "pieces 1 and 2 without 0: no row is ready");
    /* A wait with an end (the daemon's GPU thread, holding the clocks: daemon/worker.c) gives up at it. */
    struct timespec before, until, after;
    clock_gettime(CLOCK_MONOTONIC, &before);
    until = before;
    until.tv_nsec += 20000000L; /* 20 ms */
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    uint32_t early = hp_rows_ready_wait_until(&t, 48, &until, &finished);
    clock_gettime(CLOCK_MONOTONIC, &after);
    double waited_ms = (double)(after.tv_sec - before.tv_sec) * 1e3 + (double)(after.tv_nsec - before.tv_nsec) / 1e6;
    tap_ok(early == 0 && !finished && waited_ms >= 19.9, "a wait until a time gives up at it with the rows ready "
           "then (%u after %.1f ms)", early, waited_ms);
    hp_rows_ready_piece(&t, 0);
    until.tv_sec += 3600; /* rows ready before it: no wait */
    tap_ok(hp_rows_ready_wait_until(&t, 48, &until, &finished) == 48 && !finished,
           "then piece 0: rows [0, 48) are ready, before the time");
    hp_rows_ready_piece(&t, 6);
    hp_rows_ready_piece(&t, 5);
    hp_rows_ready_piece(&t, 4);
    hp_rows_ready_piece(&t, 3);
    tap_ok(hp_rows_ready_wait(&t, 100, &finished) == 100 && !finished,
           "every piece: all 100 rows ready (the last piece short), before the end");
    hp_rows_ready_piece(&t, 7);
    hp_rows_ready_piece(&t, 1000);
    tap_ok(hp_rows_ready_wait(&t, 0, &finished) == 100, "pieces past the end are ignored");
    hp_code code = HP_ERR_INTERNAL;
    tap_ok(!hp_rows_ready_result(&t, &code, NULL) && code == HP_ERR_INTERNAL, "no result before the end");
    hp_rows_ready_finish(&t, HP_OK, NULL);
    tap_ok(hp_rows_ready_wait(&t, 1000, &finished) == UINT32_MAX && finished &&
               hp_rows_ready_result(&t, &code, NULL) && code == HP_OK,
           "finished with HP_OK: every row ready, and a wait for more rows than there are returns at once");
    hp_rows_ready_destroy(&t);

    /* Threads: a reader waits for growing prefixes while a decoder marks shuffled pieces. */
    for (int fail = 0; fail <= 1; fail++) {
        hp_rows_ready_init(&t);
        marker m = {.t = &t, .pieces = 40, .code = fail ? HP_ERR_INVALID_ARGUMENT : HP_OK};
        hp_rows_ready_start(&t);
        hp_rows_ready_layout(&t, 40 * 8 - 3, 8);
        pthread_t th;
        pthread_create(&th, NULL, mark_all, &m);
        uint32_t seen = 0, waits = 0;
        bool monotonic = true;
        for (finished = false; !finished; waits++) {
            uint32_t got = hp_rows_ready_wait(&t, seen + 37, &finished);
            monotonic = monotonic && (got >= seen);
            if (!finished)
                monotonic = monotonic && got >= seen + 37;
            seen = got;
        }
        pthread_join(th, NULL);
        hp_err e = {0};
        hp_rows_ready_result(&t, &code, &e);
        if (!fail)
            tap_ok(monotonic && seen == UINT32_MAX && code == HP_OK,
                   "a reader waiting for prefixes of 37 rows more wakes with at least that many, %u waits, then "
                   "the end", waits);
        else
            tap_ok(monotonic && code == HP_ERR_INVALID_ARGUMENT && strcmp(e.message, "chunk 9 is damaged") == 0,
                   "a failed decoding ends the wait with the decoder's code and message (\"%s\")", e.message);
        hp_rows_ready_destroy(&t);
    }

    /* A decoder that gives up before decoding; and one with no layout: rows only at the end. */
    hp_rows_ready_init(&t);
    hp_rows_ready_abandon(&t);
    tap_ok(hp_rows_ready_wait_start(&t) == HP_ROWS_ABANDONED && hp_rows_ready_wait(&t, 10, &finished) == 0 &&
               finished && !hp_rows_ready_result(&t, NULL, NULL),
           "an abandoned decoder: seen as such, a wait ends at once with no row, and there is no result");
    hp_rows_ready_destroy(&t);
    hp_rows_ready_init(&t);
    hp_rows_ready_start(&t);
    hp_rows_ready_piece(&t, 0);
    tap_ok(hp_rows_ready_wait(&t, 0, &finished) == 0 && !finished, "without a layout, pieces make no row ready");
    hp_rows_ready_finish(&t, HP_OK, NULL);
    tap_ok(hp_rows_ready_wait(&t, 5, &finished) == UINT32_MAX && finished, "and the end makes them all ready");
    hp_rows_ready_destroy(&t);
    return tap_done();
}
