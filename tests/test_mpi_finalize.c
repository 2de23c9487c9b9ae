/* ordo/mpi.h when the program calls MPI_Finalize before ordo_mpi_destroy
 * (run on 2 ranks): the progress thread stops inside MPI_Finalize (an
 * attribute of MPI_COMM_SELF), before MPI goes away, so no MPI call comes
 * after it; the destroy then frees the rest without calling MPI. A
 * signal is published and another rank's observed (released after the
 * finalize), so the progress thread was listening, and the idle wake-ups
 * had a chance to come. A handle still open when MPI is finalized, and one
 * opened after, fail with ORDO_ERR_UNAVAILABLE (nothing can reach them:
 * a wait on them used to run to its deadline), and their timepoints fire;
 * a publish or a new timeout is refused. Exits 0 when every step returned
 * what it should. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ordo/mpi.h"
#include "ordo/ordo.h"

static int failures;

typedef struct fired {
    ordo_status_t status;
    int count;
} fired_t;

static void on_fire(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    fired_t *f = ctx;
    f->status = status;
    f->count++;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "line %d: %s (%s)\n", __LINE__, #cond, ordo_error_message());          \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    int provided = 0, rank = 0, size = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ordo_device_t *device = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *comm = NULL;
    ordo_mpi_t *mpi = NULL;
    ordo_signal_t *mine = NULL, *theirs = NULL;
    CHECK(ordo_device_open("cpu", &device) == ORDO_OK);
    CHECK(ordo_tracker_create(device, &tracker) == ORDO_OK);
    CHECK(ordo_stream_create(device, 0, &comm) == ORDO_OK);
    CHECK(ordo_mpi_create(tracker, comm, MPI_COMM_WORLD, &mpi) == ORDO_OK);
    CHECK(ordo_mpi_set_peer_timeout(mpi, 100) == ORDO_OK); /* idle looks every 12.5 ms */
    CHECK(ordo_signal_create(0, &mine) == ORDO_OK);
    CHECK(ordo_mpi_signal_publish(mpi, mine, 1) == ORDO_OK);
    CHECK(ordo_signal_advance(mine, 1) == ORDO_OK);
    CHECK(ordo_mpi_signal_open(mpi, (rank + 1) % size, 1, &theirs) == ORDO_OK);
    CHECK(ordo_signal_wait(theirs, 1, ordo_deadline_after_ms(30000)) == ORDO_OK);
    /* Every rank has seen the other's signal (bounded: a bug fails). */
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    ordo_deadline_t until = ordo_deadline_after_ms(30000);
    int met = 0;
    while (MPI_Test(&request, &met, MPI_STATUS_IGNORE) == MPI_SUCCESS && !met &&
           ordo_time_now_ns() < until) {
    }
    if (!met) {
        fprintf(stderr, "rank %d: the ranks did not meet within 30 s\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fired_t before = {ORDO_OK, 0};
    ordo_timepoint_t tp_before = ORDO_TIMEPOINT_INIT;
    CHECK(ordo_timepoint_arm(&tp_before, theirs, 100, on_fire, &before) == ORDO_OK);
    if (MPI_Finalize() != MPI_SUCCESS) {
        return 1;
    }
    /* The handle open across the finalize: failed, its timepoint fired
     * (inside MPI_Finalize, on this thread). */
    CHECK(before.count == 1 && before.status == ORDO_ERR_UNAVAILABLE);
    CHECK(ordo_signal_wait(theirs, 100, ordo_deadline_after_ms(30000)) == ORDO_ERR_UNAVAILABLE);
    CHECK(strstr(ordo_error_message(), "MPI was finalized") != NULL);
    CHECK(ordo_signal_wait(theirs, 1, ORDO_DEADLINE_NOW) == ORDO_OK); /* reached before */
    /* One opened after: failed at once. */
    ordo_signal_t *late = NULL;
    CHECK(ordo_mpi_signal_open(mpi, (rank + 1) % size, 1, &late) == ORDO_OK);
    CHECK(ordo_signal_wait(late, 1, ordo_deadline_after_ms(30000)) == ORDO_ERR_UNAVAILABLE);
    fired_t after = {ORDO_OK, 0};
    ordo_timepoint_t tp_after = ORDO_TIMEPOINT_INIT;
    CHECK(ordo_timepoint_arm(&tp_after, late, 1, on_fire, &after) == ORDO_OK);
    CHECK(after.count == 1 && after.status == ORDO_ERR_UNAVAILABLE);
    CHECK(ordo_signal_release(late) == ORDO_OK);
    ordo_signal_t *other = NULL;
    CHECK(ordo_signal_create(0, &other) == ORDO_OK);
    CHECK(ordo_mpi_signal_publish(mpi, other, 2) == ORDO_ERR_UNAVAILABLE);
    CHECK(ordo_signal_release(other) == ORDO_OK);
    CHECK(ordo_mpi_set_peer_timeout(mpi, 1000) == ORDO_ERR_UNAVAILABLE);
    /* After MPI_Finalize nothing of ordo's calls MPI (Open MPI aborts the
     * process if anything does): a published signal that moves sends no
     * news, a handle's release no UNSUBSCRIBE, and an operation or a stall
     * report is refused. */
    CHECK(ordo_signal_advance(mine, 2) == ORDO_OK);
    CHECK(ordo_signal_release(theirs) == ORDO_OK);
    ordo_buffer_t *buffer = NULL;
    CHECK(ordo_buffer_create(tracker, &buffer) == ORDO_OK);
    uint64_t word = 0;
    CHECK(ordo_mpi_send(mpi, buffer, &word, 1, MPI_UINT64_T, (rank + 1) % size, 5) ==
          ORDO_ERR_UNAVAILABLE);
    char text[256];
    size_t length = 0;
    CHECK(ordo_mpi_stall_report(mpi, ordo_deadline_after_ms(100), text, sizeof text, &length,
                                NULL) == ORDO_ERR_UNAVAILABLE);
    CHECK(ordo_buffer_release(buffer, NULL, NULL) == ORDO_OK);
    CHECK(ordo_tracker_drain(tracker, ordo_deadline_after_ms(30000)) == ORDO_OK);
    CHECK(ordo_mpi_destroy(mpi, ordo_deadline_after_ms(30000)) == ORDO_OK);
    CHECK(ordo_tracker_destroy(tracker) == ORDO_OK);
    CHECK(ordo_stream_destroy(comm) == ORDO_OK);
    CHECK(ordo_signal_release(mine) == ORDO_OK);
    CHECK(ordo_device_release(device) == ORDO_OK);
    if (failures == 0) {
        printf("rank %d: destroyed after MPI_Finalize\n", rank);
    }
    return failures ? 1 : 0;
}
