/* The control communicators, kept for the process (mpi_internal.h).
 *
 * Signals' messages travel on a duplicate of the ordo_mpi_t's
 * communicator, and some are never received: a heartbeat or an update
 * sent as a peer destroys its own ordo_mpi_t, a stall answer that came
 * late. Freed with such messages in flight, a duplicate's context id goes
 * back to MPI, and the next duplicate may get it; Open MPI then matches
 * the stale messages against the new communicator's sequence numbers, and
 * a new message with the number a stale one took is lost (a SUBSCRIBE,
 * so an observer never heard of its signal again). So a control
 * communicator is never freed: a destroy gives it back here, and the next
 * ordo_mpi_create on a congruent communicator (the same processes in the
 * same order) takes it again, where a stale message is one of an earlier
 * epoch and is dropped (mpi_signal.c).
 *
 * The ranks must agree on which one they take: each communicator kept
 * has the same number on every rank of its group (they are made together,
 * by a collective duplicate, and numbered in the order made), and the
 * create takes the lowest number free on every rank (an MPI_BAND of the
 * ranks' masks of free ones), or makes a new one when none is: kept by
 * every rank under the same number, or by none (an MPI_LAND of whether
 * each could), and if one rank cannot set it up, the create fails on
 * every rank. MPI frees them all at MPI_Finalize; the records of them are
 * plain memory, kept until the process ends.
 */
#include <stdlib.h>

#include "mpi/mpi_internal.h"

/* The communicators kept per group; a create beyond them makes one of
 * its own, freed at its destroy. */
#define CONTROL_KEPT_MAX 64

typedef struct control_group {
    struct control_group *next;
    uint32_t count;
    uint64_t in_use; /* by number */
    MPI_Comm comms[CONTROL_KEPT_MAX];
} control_group_t;

static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static control_group_t *groups; /* kept until the process ends */

/* The group of comm's processes, under groups_lock; NULL if none yet. */
static control_group_t *group_of(MPI_Comm comm) {
    for (control_group_t *g = groups; g; g = g->next) {
        int result = MPI_UNEQUAL;
        if (MPI_Comm_compare(g->comms[0], comm, &result) == MPI_SUCCESS &&
            (result == MPI_IDENT || result == MPI_CONGRUENT)) {
            return g;
        }
    }
    return NULL;
}

int ordo__mpi_control_take(MPI_Comm comm, MPI_Comm *out_control, int *out_number,
                           const char **out_call) {
    pthread_mutex_lock(&groups_lock);
    control_group_t *g = group_of(comm);
    uint64_t free_here = 0;
    if (g) {
        uint64_t made = g->count == 64 ? ~(uint64_t)0 : ((uint64_t)1 << g->count) - 1;
        free_here = made & ~g->in_use;
    }
    pthread_mutex_unlock(&groups_lock);
    uint64_t free_everywhere = 0;
    *out_call = "MPI_Allreduce";
    int code = MPI_Allreduce(&free_here, &free_everywhere, 1, MPI_UINT64_T, MPI_BAND, comm);
    if (code != MPI_SUCCESS) {
        return code;
    }
    if (free_everywhere) {
        int number = __builtin_ctzll(free_everywhere);
        pthread_mutex_lock(&groups_lock);
        g->in_use |= (uint64_t)1 << number;
        *out_control = g->comms[number];
        pthread_mutex_unlock(&groups_lock);
        *out_number = number;
        return MPI_SUCCESS;
    }
    MPI_Comm control;
    *out_call = "MPI_Comm_dup";
    code = MPI_Comm_dup(comm, &control);
    if (code != MPI_SUCCESS) {
        return code;
    }
    /* Without MPI_ERRORS_RETURN an MPI error would abort the job. */
    int handler = MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
    /* Room to keep it: its group's record (plain memory, kept until the
     * process ends, outside the allocator hooks' count of live blocks). */
    pthread_mutex_lock(&groups_lock);
    g = group_of(comm);
    pthread_mutex_unlock(&groups_lock);
    control_group_t *made = g ? NULL : calloc(1, sizeof *made);
    int here[2] = {handler == MPI_SUCCESS, g ? g->count < CONTROL_KEPT_MAX : made != NULL};
    int everywhere[2] = {0, 0};
    /* Every rank keeps it under the same number, or none does; every rank
     * fails the create, or none does. */
    code = MPI_Allreduce(here, everywhere, 2, MPI_INT, MPI_LAND, comm);
    if (code != MPI_SUCCESS || !everywhere[0]) {
        MPI_Comm_free(&control);
        free(made);
        if (handler != MPI_SUCCESS) {
            *out_call = "MPI_Comm_set_errhandler";
            return handler;
        }
        if (code != MPI_SUCCESS) {
            return code; /* MPI_Allreduce's */
        }
        *out_call = "MPI_Comm_set_errhandler (on another rank)";
        return MPI_ERR_OTHER;
    }
    int number = -1;
    if (everywhere[1]) {
        pthread_mutex_lock(&groups_lock);
        if (made) {
            made->next = groups;
            groups = made;
            g = made;
        }
        number = (int)g->count++;
        g->comms[number] = control;
        g->in_use |= (uint64_t)1 << number;
        pthread_mutex_unlock(&groups_lock);
    } else {
        free(made); /* not kept anywhere: freed at the destroy */
    }
    *out_control = control;
    *out_number = number;
    return MPI_SUCCESS;
}

void ordo__mpi_control_give(MPI_Comm *control, int number, bool mpi_usable) {
    if (number < 0) {
        if (mpi_usable) {
            MPI_Comm_free(control);
        }
        return;
    }
    /* No MPI call: MPI may have been finalized. */
    pthread_mutex_lock(&groups_lock);
    for (control_group_t *g = groups; g; g = g->next) {
        if ((uint32_t)number < g->count && g->comms[number] == *control) {
            g->in_use &= ~((uint64_t)1 << number);
            break;
        }
    }
    pthread_mutex_unlock(&groups_lock);
}
