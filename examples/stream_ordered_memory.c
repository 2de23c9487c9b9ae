/* Stream-ordered memory: a pool on top of the device's default stack. A
 * block allocated on one stream, written there, read on another and freed
 * there; the next allocation on the first stream reuses the memory only
 * once it is ordered after the read (the pool emits that device wait
 * itself). Statistics come from the default stack. */
#include <ordo/ordo.h>
#include <stdio.h>
#include <string.h>

typedef struct task {
    int *words;
    int value;
    int seen;
} task_t;

static ordo_status_t write_words(void *ctx) {
    task_t *t = ctx;
    for (int i = 0; i < 256; ++i) {
        t->words[i] = t->value;
    }
    return ORDO_OK;
}

static ordo_status_t read_words(void *ctx) {
    task_t *t = ctx;
    t->seen = t->words[255];
    return ORDO_OK;
}

static ordo_status_t launch_write(void *ctx, ordo_stream_t *s) {
    return ordo_stream_host_task(s, write_words, ctx);
}

static ordo_status_t launch_read(void *ctx, ordo_stream_t *s) {
    return ordo_stream_host_task(s, read_words, ctx);
}

static int check(ordo_status_t st, const char *what) {
    if (st != ORDO_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, ordo_status_name(st), ordo_error_message());
    }
    return st == ORDO_OK;
}

int main(void) {
    ordo_device_t *device = NULL;
    ordo_stream_t *a = NULL, *b = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *memory = NULL, *pool = NULL;
    int ok = check(ordo_device_open(ORDO_DEVICE_DEFAULT, &device), "open the device") &&
             check(ordo_stream_create(device, 0, &a), "create a stream") &&
             check(ordo_stream_create(device, 0, &b), "create a stream") &&
             check(ordo_tracker_create(device, &tracker), "create a tracker") &&
             /* The device's own stack: it goes with the device. */
             check(ordo_device_memory(device, &memory), "the device's memory") &&
             check(ordo_mem_pool_create(tracker, memory, NULL, &pool), "create a pool");
    task_t tasks[2] = {{NULL, 7, 0}, {NULL, 0, 0}};
    for (int round = 0; ok && round < 2; ++round) {
        ordo_block_t *block = NULL;
        ordo_buffer_t *buffer = NULL;
        void *ptr = NULL;
        /* Usable on `a` at once. */
        if (!check(ordo_mem_allocate(pool, 1024, 0, a, /*tag*/ 1, &block, &ptr), "allocate")) {
            ok = 0;
            break;
        }
        task_t *w = &tasks[0], *r = &tasks[1];
        w->words = r->words = ptr;
        w->value = 7 + round;
        /* The block's buffer belongs to the block: name it in access
         * lists, never release it. */
        ordo_access_t write = {NULL, ORDO_ACCESS_WRITE}, read = {NULL, ORDO_ACCESS_READ};
        ok = check(ordo_block_buffer(block, &buffer), "the block's buffer");
        write.buffer = read.buffer = buffer;
        ok = ok && check(ordo_tracker_submit(tracker, a, &write, 1, launch_write, w), "submit") &&
             check(ordo_tracker_submit(tracker, b, &read, 1, launch_read, r), "submit");
        /* Dead after b's read; reused on `a` only once ordered after it.
         * Deallocated whatever happened above: the pool reuses it only
         * after the uses that were submitted. */
        ok &= check(ordo_mem_deallocate(pool, block, b), "deallocate");
        ok = ok && check(ordo_stream_synchronize(b, ordo_deadline_after_ms(10000)), "stream b");
        if (ok) {
            printf("round %d: read %d\n", round, r->seen);
            ok = r->seen == 7 + round;
        }
    }
    ordo_mem_pool_stats_t stats;
    if (ok && check(ordo_mem_pool_stats(pool, &stats), "pool statistics")) {
        printf("pool: %llu grows, %llu reuses after a device wait\n",
               (unsigned long long)stats.grows, (unsigned long long)stats.reuses_waited);
    }
    /* Teardown: the streams finish their work, the pool goes (every block
     * was deallocated; reaping completes the frees still pending), then the
     * tracker, the streams and the device, which takes its memory stack. */
    if (a) {
        ok &= check(ordo_stream_synchronize(a, ordo_deadline_after_ms(10000)), "stream a");
    }
    if (b) {
        ok &= check(ordo_stream_synchronize(b, ordo_deadline_after_ms(10000)), "stream b");
    }
    if (pool) {
        ok &= check(ordo_mem_reap_pending(pool, ordo_deadline_after_ms(10000)), "reap") &&
              check(ordo_mem_resource_destroy(pool), "destroy the pool");
    }
    /* The default stack has a statistics adaptor on top, unless the
     * environment variable ORDO_MEMORY chose other adaptors. */
    ordo_mem_statistics_t counts;
    if (memory && ordo_mem_statistics_get(memory, &counts) == ORDO_OK) {
        printf("device memory: peak %llu bytes, %llu bytes held now\n",
               (unsigned long long)counts.overall.peak_bytes,
               (unsigned long long)counts.overall.current_bytes);
    }
    if (tracker) {
        ok &= check(ordo_tracker_destroy(tracker), "destroy the tracker");
    }
    if (a) {
        ok &= check(ordo_stream_destroy(a), "destroy a stream");
    }
    if (b) {
        ok &= check(ordo_stream_destroy(b), "destroy a stream");
    }
    if (device) {
        ok &= check(ordo_device_release(device), "release the device");
    }
    return ok ? 0 : 1;
}
