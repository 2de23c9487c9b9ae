/* Probe: ordo_coord_destroy called from a dispatched op's launch function.
 * The op is LAUNCHING (not counted by coord_quiet), so destroy succeeds and
 * frees the coordinator; dispatch then re-locks freed memory. */
#include <stdio.h>
#include "ordo/coordinator.h"
#include "ordo/device.h"
#include "ordo/stream.h"

static ordo_coord_t *coord;
static int cancelled;
static ordo_status_t destroy_rc = 999;

static void cb(void *ctx, ordo_op_id_t op, ordo_status_t st) {
    (void)ctx; (void)op;
    printf("callback: %s\n", ordo_status_name(st));
    if (st == ORDO_ERR_CANCELLED) cancelled++;
}
static ordo_status_t launch(void *ctx, ordo_stream_t *s) {
    (void)ctx; (void)s;
    destroy_rc = ordo_coord_destroy(coord);
    printf("destroy inside launch -> %s\n", ordo_status_name(destroy_rc));
    return ORDO_OK;
}
int main(void) {
    ordo_device_t *dev; ordo_stream_t *s;
    if (ordo_device_open("cpu:0", &dev) || ordo_stream_create(dev, 0, &s)) return 2;
    ordo_coord_create(dev, NULL, &coord);
    ordo_op_desc_t d = {.type = ORDO_OP_KERNEL, .stream = s, .launch = launch, .description = "x"};
    ordo_op_id_t id;
    ordo_coord_register(coord, &d, &id);
    ordo_coord_on_complete(coord, id, cb, NULL);
    size_t n = 0;
    ordo_status_t st = ordo_coord_dispatch(coord, 1, &n); /* touches coord after destroy */
    printf("dispatch -> %s launched=%zu cancelled=%d\n", ordo_status_name(st), n, cancelled);
    return destroy_rc == ORDO_OK ? 1 : 0; /* 1: destroy was accepted mid-dispatch */
}
