/* Uses the installed ordo: a version check and a signal crossing a stream. */
#include <ordo/ordo.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (strcmp(ordo_version(), ORDO_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", ORDO_VERSION_STRING, ordo_version());
        return 1;
    }
    ordo_device_t *device = NULL;
    ordo_stream_t *stream = NULL;
    ordo_signal_t *done = NULL;
    if (ordo_device_open(ORDO_DEVICE_DEFAULT, &device) != ORDO_OK ||
        ordo_stream_create(device, 0, &stream) != ORDO_OK ||
        ordo_signal_create(0, &done) != ORDO_OK || ordo_stream_signal(stream, done, 1) != ORDO_OK ||
        ordo_signal_wait(done, 1, ordo_deadline_after_ms(10000)) != ORDO_OK) {
        fprintf(stderr, "consumer: %s\n", ordo_error_message());
        return 1;
    }
    ordo_signal_release(done);
    ordo_stream_destroy(stream);
    ordo_device_release(device);
    printf("consumer: ordo %s works\n", ordo_version());
    return 0;
}
