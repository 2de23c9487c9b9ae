/* A rank killed mid-run (ordo/mpi.h: ordo_mpi_set_peer_timeout), run by
 * tests/mpi_dead_rank.cmake under mpirun on 2 and 4 ranks, with the
 * launcher told not to end the job when a rank dies
 * (orte_abort_on_non_zero_status=0).
 *
 * The last rank publishes a signal every other rank observes (a wait, and
 * a stream waiting on it), and rank 0 publishes one the others observe
 * too. Once every rank has seen the first values, the last rank kills
 * itself (SIGKILL: no goodbye). Rank 0 then moves its signal on ADVANCES
 * times at once: the dead rank observed it too, and the news for it, more
 * than its queue holds, must not hold rank 0 up. Each survivor then
 * checks:
 *   - its wait on the dead rank's signal ends with ORDO_ERR_ABANDONED, its
 *     message naming the rank, within the bound (the timeout, plus an
 *     eighth of it, plus SLACK_MS for a loaded machine);
 *   - the stream that waited on it failed, rather than hanging;
 *   - a new handle of the dead rank's signal fails at once;
 *   - signals among the survivors still work (rank 0's moves on).
 * Then each prints "rank R: survived", the survivors meet, and they end
 * with _exit: MPI_Finalize would wait for the dead rank (Open MPI 4.1's
 * runtime does). The script counts the survivors' lines. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ordo/mpi.h"
#include "ordo/ordo.h"

#define PEER_TIMEOUT_MS 1000u
#define SLACK_MS 3000u
#define WAIT_MS 30000u
/* Rank 0's moves right after the kill: more than a dead rank's queue of
 * small messages holds (about 70 on one machine). */
#define ADVANCES 2000u

static int rank, size, failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "[rank %d/%d] line %d: %s (%s)\n", rank, size, __LINE__, #cond,        \
                    ordo_error_message());                                                         \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "[rank %d/%d] line %d: %s (%s): cannot go on\n", rank, size, __LINE__, \
                    #cond, ordo_error_message());                                                  \
            fflush(stderr);                                                                        \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static ordo_deadline_t deadline(void) {
    return ordo_deadline_after_ms(WAIT_MS);
}

/* Completes a request of the test's own within WAIT_MS, or ends this rank
 * (a bug fails instead of hanging). */
static void complete_bounded(MPI_Request *request, int line) {
    ordo_deadline_t until = deadline();
    int done = 0;
    while (MPI_Test(request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        if (ordo_time_now_ns() >= until) {
            fprintf(stderr,
                    "[rank %d/%d] line %d: an MPI request of the test's own did not "
                    "complete within %u ms\n",
                    rank, size, line, WAIT_MS);
            fflush(stderr);
            _exit(1);
        }
    }
}

int main(int argc, char **argv) {
    int provided = 0;
    REQUIRE(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    REQUIRE(size >= 2);
    const int victim = size - 1;

    ordo_device_t *device;
    ordo_tracker_t *tracker;
    ordo_stream_t *comm, *waiter;
    ordo_mpi_t *mpi;
    REQUIRE(ordo_device_open("cpu", &device) == ORDO_OK);
    REQUIRE(ordo_tracker_create(device, &tracker) == ORDO_OK);
    REQUIRE(ordo_stream_create(device, 0, &comm) == ORDO_OK);
    REQUIRE(ordo_stream_create(device, 0, &waiter) == ORDO_OK);
    REQUIRE(ordo_mpi_create(tracker, comm, MPI_COMM_WORLD, &mpi) == ORDO_OK);

    /* Bad input. */
    CHECK(ordo_mpi_set_peer_timeout(mpi, 99) == ORDO_ERR_OUT_OF_RANGE);
    CHECK(ordo_mpi_set_peer_timeout(mpi, 3600001) == ORDO_ERR_OUT_OF_RANGE);
    CHECK(ordo_mpi_set_peer_timeout(NULL, PEER_TIMEOUT_MS) == ORDO_ERR_INVALID_HANDLE);
    REQUIRE(ordo_mpi_set_peer_timeout(mpi, PEER_TIMEOUT_MS) == ORDO_OK);

    ordo_signal_t *own = NULL;      /* the victim's, or rank 0's */
    ordo_signal_t *doomed = NULL;   /* the victim's, observed */
    ordo_signal_t *survivor = NULL; /* rank 0's, observed by ranks 1 .. victim - 1 */
    if (rank == victim || rank == 0) {
        REQUIRE(ordo_signal_create(0, &own) == ORDO_OK);
        REQUIRE(ordo_mpi_signal_publish(mpi, own, rank == victim ? 1 : 2) == ORDO_OK);
        REQUIRE(ordo_signal_advance(own, 1) == ORDO_OK);
    }
    if (rank != victim) {
        REQUIRE(ordo_mpi_signal_open(mpi, victim, 1, &doomed) == ORDO_OK);
        CHECK(ordo_signal_wait(doomed, 1, deadline()) == ORDO_OK);
        REQUIRE(ordo_stream_wait(waiter, doomed, 2) == ORDO_OK);
    }
    if (rank != 0) { /* the victim too: rank 0 sends it news */
        REQUIRE(ordo_mpi_signal_open(mpi, 0, 2, &survivor) == ORDO_OK);
        CHECK(ordo_signal_wait(survivor, 1, deadline()) == ORDO_OK);
    }
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    complete_bounded(&request, __LINE__);
    if (rank == victim) {
        raise(SIGKILL);
    }
    uint64_t killed = ordo_time_now_ns();
    if (rank == 0) {
        /* Each move sends an update to every observer, the dead one
         * included until it is found dead: none may wait for it. */
        for (uint64_t v = 2; v <= ADVANCES + 1; ++v) {
            CHECK(ordo_signal_advance(own, v) == ORDO_OK);
        }
        printf("rank 0: %u moves after the kill took %llu ms\n", ADVANCES,
               (unsigned long long)((ordo_time_now_ns() - killed) / 1000000u));
    }

    ordo_status_t st = ordo_signal_wait(doomed, 2, deadline());
    uint64_t ms = (ordo_time_now_ns() - killed) / 1000000u;
    char expected[64];
    snprintf(expected, sizeof expected, "rank %d is gone", victim);
    CHECK(st == ORDO_ERR_ABANDONED);
    CHECK(strstr(ordo_error_message(), expected) != NULL);
    CHECK(ms <= PEER_TIMEOUT_MS + PEER_TIMEOUT_MS / 8 + SLACK_MS);
    printf("rank %d: rank %d's signal failed after %llu ms (timeout %u ms): %s\n", rank, victim,
           (unsigned long long)ms, PEER_TIMEOUT_MS, ordo_error_message());
    ordo_status_t failure = ORDO_OK;
    char message[ORDO_SIGNAL_MESSAGE_MAX] = "";
    CHECK(ordo_signal_failure(doomed, &failure, message, sizeof message) == ORDO_OK);
    CHECK(failure == ORDO_ERR_ABANDONED);
    CHECK(ordo_stream_synchronize(waiter, deadline()) == ORDO_ERR_ABANDONED);

    ordo_signal_t *again = NULL;
    CHECK(ordo_mpi_signal_open(mpi, victim, 1, &again) == ORDO_OK);
    if (again) {
        CHECK(ordo_signal_wait(again, 1, deadline()) == ORDO_ERR_ABANDONED);
        CHECK(ordo_signal_release(again) == ORDO_OK);
    }

    /* The survivors' signals go on. */
    if (rank == 0) {
        CHECK(ordo_signal_advance(own, ADVANCES + 2) == ORDO_OK);
    } else {
        CHECK(ordo_signal_wait(survivor, ADVANCES + 2, deadline()) == ORDO_OK);
        CHECK(ordo_signal_release(survivor) == ORDO_OK);
    }
    CHECK(ordo_signal_release(doomed) == ORDO_OK);

    if (failures == 0) {
        printf("rank %d: survived\n", rank);
    }
    fflush(stdout);
    fflush(stderr);

    /* The survivors end together, once each has printed (the launcher ends the job when one exits
     * without MPI_Finalize): point to point through rank 0, as no
     * collective of MPI_COMM_WORLD can complete any more. */
    int token = 0;
    if (rank == 0) {
        for (int r = 1; r < victim; ++r) {
            MPI_Irecv(&token, 1, MPI_INT, r, 99, MPI_COMM_WORLD, &request);
            complete_bounded(&request, __LINE__);
        }
        for (int r = 1; r < victim; ++r) {
            MPI_Isend(&token, 1, MPI_INT, r, 99, MPI_COMM_WORLD, &request);
            complete_bounded(&request, __LINE__);
        }
    } else {
        MPI_Isend(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &request);
        complete_bounded(&request, __LINE__);
        MPI_Irecv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &request);
        complete_bounded(&request, __LINE__);
    }
    _exit(failures ? 1 : 0);
}
