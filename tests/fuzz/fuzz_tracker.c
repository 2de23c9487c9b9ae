/* libFuzzer target: random sequences of buffer creation, submissions and
 * releases drive a tracker on real CPU streams; the reference model
 * (tests/tracker_model.c) checks every emitted wait and every hazard, and
 * AddressSanitizer watches the reclamation of released buffers. Any
 * violation aborts, which libFuzzer reports with the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tracker_observer.h"
#include "ordo/ordo.h"
#include "tracker_model.h"

#define STREAMS 3
#define BUFFERS 6
#define MAX_OPS 256

static ordo_device_t *device;
static ordo_stream_t *streams[STREAMS];

static void die(const char *what) {
    fprintf(stderr, "fuzz_tracker: %s (%s)\n", what, ordo_error_message());
    abort();
}

static ordo_status_t noop(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, noop, ctx);
}

static void reclaim(void *ctx) {
    free(ctx); /* each buffer owns a heap block: ASan sees a premature free */
}

typedef struct observe {
    model_t *model;
} observe_t;

static uint32_t index_of(ordo_stream_t *s) {
    for (uint32_t i = 0; i < STREAMS; ++i) {
        if (streams[i] == s) {
            return i;
        }
    }
    return UINT32_MAX;
}

static void on_wait(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin, uint64_t point,
                    uint64_t needed) {
    model_on_wait(((observe_t *)ctx)->model, index_of(waiting), index_of(origin), point, needed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!device) {
        if (ordo_device_open("cpu", &device) != ORDO_OK) {
            die("cannot open the cpu device");
        }
        for (int s = 0; s < STREAMS; ++s) {
            if (ordo_stream_create(device, 0, &streams[s]) != ORDO_OK) {
                die("cannot create a stream");
            }
        }
    }
    ordo_tracker_t *tracker;
    if (ordo_tracker_create(device, &tracker) != ORDO_OK) {
        die("cannot create a tracker");
    }
    observe_t obs = {model_create(STREAMS, MAX_OPS)};
    ordo__tracker_set_wait_observer(tracker, on_wait, &obs);
    ordo_buffer_t *live[BUFFERS] = {0};
    uint32_t ids[BUFFERS] = {0};
    uint32_t next_id = 0;
    size_t ops = 0;
    /* Each op takes two bytes: kind and stream / buffer, then modes. */
    for (size_t i = 0; i + 1 < size && ops < MAX_OPS; i += 2) {
        uint8_t op = data[i];
        uint8_t arg = data[i + 1];
        uint32_t b = arg % BUFFERS;
        if ((op & 7) == 0) {
            if (live[b]) {
                if (ordo_buffer_release(live[b], reclaim, malloc(16)) != ORDO_OK) {
                    die("release refused");
                }
                live[b] = NULL;
            }
            continue;
        }
        uint32_t stream = (op >> 3) % STREAMS;
        ordo_access_t accesses[2];
        model_access_t modeled[2];
        size_t count = 0;
        for (int k = 0; k < 2; ++k) {
            uint32_t which = k == 0 ? b : (arg / BUFFERS) % BUFFERS;
            ordo_access_mode_t mode = (ordo_access_mode_t)(1 + ((op >> (k ? 5 : 0)) % 3));
            if (k == 1 && (!(op & 0x80) || which == b)) {
                break;
            }
            if (!live[which]) {
                if (ordo_buffer_create(tracker, &live[which]) != ORDO_OK) {
                    die("cannot create a buffer");
                }
                ids[which] = next_id++;
            }
            accesses[count] = (ordo_access_t){live[which], mode};
            modeled[count] = (model_access_t){ids[which], mode};
            ++count;
        }
        model_begin(obs.model, stream, modeled, count);
        if (ordo_tracker_submit(tracker, streams[stream], accesses, count, launch, NULL) !=
            ORDO_OK) {
            die("submit refused");
        }
        model_end(obs.model);
        ++ops;
    }
    for (uint32_t b = 0; b < BUFFERS; ++b) {
        if (live[b] && ordo_buffer_release(live[b], reclaim, malloc(16)) != ORDO_OK) {
            die("release refused");
        }
    }
    if (ordo_tracker_drain(tracker, ordo_deadline_after_ms(10000)) != ORDO_OK) {
        die("reclamation did not drain");
    }
    const char *why = NULL;
    if (model_violations(obs.model, &why)) {
        fprintf(stderr, "fuzz_tracker: model violation: %s\n", why);
        abort();
    }
    model_free(obs.model);
    if (ordo_tracker_destroy(tracker) != ORDO_OK) {
        die("tracker destroy refused");
    }
    return 0;
}
