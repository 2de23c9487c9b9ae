/* ordo/mpi.h's thread model, under mpirun -np 1: with MPI initialised at
 * MPI_THREAD_SERIALIZED (less than MPI_THREAD_MULTIPLE), ordo_mpi_create
 * refuses with ORDO_ERR_UNSUPPORTED, leaves NULL in its output and a
 * message naming it, and leaves the tracker and MPI as they were. Exits 77
 * (skipped) where MPI gives MPI_THREAD_MULTIPLE anyway. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "ordo/mpi.h"
#include "ordo/ordo.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "test_mpi_thread: line %d: %s\n", __LINE__, #cond);                    \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        ordo_status_t st_ = (expr);                                                                \
        if (st_ != ORDO_OK) {                                                                      \
            fprintf(stderr, "test_mpi_thread: line %d: %s returned %s (%s)\n", __LINE__, #expr,    \
                    ordo_status_name(st_), ordo_error_message());                                  \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    int provided = -1;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "test_mpi_thread: MPI_Init_thread failed\n");
        return 1;
    }
    if (provided >= MPI_THREAD_MULTIPLE) {
        printf("test_mpi_thread: MPI gave MPI_THREAD_MULTIPLE for MPI_THREAD_SERIALIZED; "
               "nothing to test\n");
        MPI_Finalize();
        return 77;
    }
    ordo_device_t *device = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *stream = NULL;
    if (ordo_device_open("cpu:0", &device) != ORDO_OK ||
        ordo_tracker_create(device, &tracker) != ORDO_OK ||
        ordo_stream_create(device, 0, &stream) != ORDO_OK) {
        fprintf(stderr, "test_mpi_thread: no device or tracker: %s\n", ordo_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (int round = 0; round < 2; ++round) {
        ordo_mpi_t *mpi = (ordo_mpi_t *)&provided; /* not NULL: the call must clear it */
        ordo_status_t st = ordo_mpi_create(tracker, stream, MPI_COMM_WORLD, &mpi);
        if (st != ORDO_ERR_UNSUPPORTED) {
            fprintf(stderr,
                    "test_mpi_thread: ordo_mpi_create at thread level %d returned %s, "
                    "expected ORDO_ERR_UNSUPPORTED (%s)\n",
                    provided, ordo_status_name(st), st ? ordo_error_message() : "");
            ++failures;
            if (st == ORDO_OK && mpi) {
                CHECK_OK(ordo_mpi_destroy(mpi, ordo_deadline_after_ms(10000)));
            }
            break;
        }
        const char *message = ordo_error_message();
        CHECK(mpi == NULL);
        CHECK(strncmp(message, "ordo_mpi_create: ", strlen("ordo_mpi_create: ")) == 0);
        if (!strstr(message, "MPI_THREAD_MULTIPLE")) {
            fprintf(stderr,
                    "test_mpi_thread: the message \"%s\" does not name MPI_THREAD_MULTIPLE\n",
                    message);
            ++failures;
        }
    }

    /* The tracker and the stream are untouched (nothing was submitted) and
     * MPI still works. */
    ordo_tracker_metrics_t m;
    CHECK_OK(ordo_tracker_metrics(tracker, &m));
    CHECK(m.submissions == 0);
    CHECK(m.buffers_live == 0);
    CHECK_OK(ordo_tracker_synchronize(tracker, ordo_deadline_after_ms(10000)));
    CHECK_OK(ordo_tracker_destroy(tracker));
    CHECK_OK(ordo_stream_destroy(stream));
    CHECK_OK(ordo_device_release(device));
    int one = 1, sum = 0;
    CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(sum == 1);
    MPI_Finalize();
    printf("test_mpi_thread: %s (thread level %d)\n", failures ? "FAILED" : "ok", provided);
    return failures ? 1 : 0;
}
