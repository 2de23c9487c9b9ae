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

int main(void) {
    ordo_device_t *device = NULL;
    ordo_stream_t *a = NULL, *b = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *memory = NULL, *pool = NULL;
    if (ordo_device_open(ORDO_DEVICE_DEFAULT, &device) != ORDO_OK ||
        ordo_stream_create(device, 0, &a) != ORDO_OK ||
        ordo_stream_create(device, 0, &b) != ORDO_OK ||
        ordo_tracker_create(device, &tracker) != ORDO_OK ||
        ordo_device_memory(device, &memory) != ORDO_OK ||
        ordo_mem_pool_create(tracker, memory, NULL, &pool) != ORDO_OK) {
        fprintf(stderr, "setup: %s\n", ordo_error_message());
        return 1;
    }
    task_t tasks[2] = {{NULL, 7, 0}, {NULL, 0, 0}};
    for (int round = 0; round < 2; ++round) {
        ordo_block_t *block = NULL;
        ordo_buffer_t *buffer = NULL;
        void *ptr = NULL;
        /* Usable on `a` at once. */
        ordo_mem_allocate(pool, 1024, 0, a, /*tag*/ 1, &block, &ptr);
        ordo_block_buffer(block, &buffer);
        task_t *w = &tasks[0], *r = &tasks[1];
        w->words = r->words = ptr;
        w->value = 7 + round;
        ordo_access_t write = {buffer, ORDO_ACCESS_WRITE}, read = {buffer, ORDO_ACCESS_READ};
        ordo_submit(tracker, a, &write, 1, launch_write, w);
        ordo_submit(tracker, b, &read, 1, launch_read, r);
        /* Dead after b's read; reused on `a` only once ordered after it. */
        ordo_mem_deallocate(pool, block, b);
        ordo_stream_synchronize(b, ordo_deadline_after_ms(10000));
        printf("round %d: read %d\n", round, r->seen);
    }
    ordo_mem_pool_stats_t stats;
    ordo_mem_pool_stats(pool, &stats);
    printf("pool: %llu grows, %llu reuses after a device wait\n", (unsigned long long)stats.grows,
           (unsigned long long)stats.reuses_waited);
    ordo_stream_synchronize(a, ordo_deadline_after_ms(10000));
    ordo_mem_reap_pending(pool, ordo_deadline_after_ms(10000));
    ordo_mem_resource_destroy(pool);
    ordo_mem_statistics_t counts;
    if (ordo_mem_statistics_get(memory, &counts) == ORDO_OK) {
        printf("device memory: peak %llu bytes, %llu bytes held now\n",
               (unsigned long long)counts.overall.peak_bytes,
               (unsigned long long)counts.overall.current_bytes);
    }
    ordo_tracker_destroy(tracker);
    ordo_stream_destroy(a);
    ordo_stream_destroy(b);
    ordo_device_release(device);
    return tasks[1].seen == 8 ? 0 : 1;
}
