/** @file
 * ordo/mpi.h - communication as tracked work, on MPI.
 *
 * Built only where CMake finds MPI (libordo_mpi, beside libordo; the
 * program links both and its MPI). An ordo_mpi_t turns MPI operations into
 * submissions a tracker (ordo/tracker.h) orders like any other: each takes
 * the ordo buffers it reads and writes, and runs on the ordo_mpi_t's
 * communication stream (a stream the program gives it and submits nothing
 * else to), so compute streams and communication are ordered from the
 * declared accesses alone. Compute writes gradient bucket k, the
 * allreduce of bucket k (a write of it: it reads and writes in place) runs
 * while compute goes on to bucket k + 1, and the next write of bucket k
 * waits for that allreduce; no wait is placed by hand.
 *
 * How it runs: an operation's submission enqueues, in order on that stream, a
 * host task that starts the nonblocking MPI call (MPI_Iallreduce, ...)
 * and a wait for the operation's point on the ordo_mpi_t's timeline. A
 * progress thread completes the requests (MPI_Test) and raises the
 * timeline; it sleeps when no request is in flight, and while some are it
 * polls with a growing pause (a few microseconds up to 250 us), so it
 * never spins a core while idle. Operations run one at a time, in stream
 * order (an operation's buffer is in use until its request completes, and
 * the stream's next work waits for that): communication overlaps compute
 * on other streams; two ordo_mpi_t on two streams overlap each other.
 *
 * Thread model: the stream's worker starts requests and the progress
 * thread completes them, while the program may call MPI itself: MPI must
 * be initialised with MPI_THREAD_MULTIPLE (ordo_mpi_create refuses less
 * with ORDO_ERR_UNSUPPORTED). ordo communicates on a duplicate of the
 * communicator it is given (its traffic never matches the program's),
 * with MPI_ERRORS_RETURN: an MPI error becomes the failure of the
 * operation's point (ORDO_ERR_DEVICE, with MPI's error string and the
 * operation's name in the message), which fails the communication stream
 * and, through its signals, whatever waits on it. As with any collective,
 * every rank must submit the same collectives in the same order.
 *
 * Buffers: the data pointers are the program's; they must stay valid and
 * untouched, but through tracked work, until the operation has completed
 * (the tracker's ordering gives exactly that to tracked work).
 *
 * Thread-safety: the operations take the tracker's rules (externally
 * synchronised per tracker); ordo_mpi_destroy must not race with them.
 */
#ifndef ORDO_MPI_H
#define ORDO_MPI_H

#include "ordo/export.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "ordo/buffer.h"
#include "ordo/device.h"
#include "ordo/status.h"
#include "ordo/stream.h"
#include "ordo/time.h"
#include "ordo/tracker.h"

ORDO_BEGIN_DECLS

/** Communication over one communicator, as tracked work (opaque). */
typedef struct ordo_mpi ordo_mpi_t;

/** Creates the communication of comm, submitted through tracker on stream
 * (a stream of the tracker's device, which only this ordo_mpi_t submits
 * to): a duplicate of comm and a progress thread. comm must be an
 * intracommunicator (an intercommunicator: ORDO_ERR_INVALID_ARGUMENT).
 * The tracker and the stream must outlive it (the stream outlives the
 * tracker anyway: ordo/tracker.h). Collective over comm. Signals'
 * messages use a second duplicate that is kept for the process and taken
 * again by a later ordo_mpi_t on the same processes (MPI frees it at
 * MPI_Finalize): creates on communicators of the same processes must not
 * run at once from several threads of a rank. */
ordo_status_t ordo_mpi_create(ordo_tracker_t *tracker, ordo_stream_t *stream, MPI_Comm comm,
                              ordo_mpi_t **out_mpi);

/** ORDO_ERR_BUSY while a handle of ordo_mpi_signal_open is still open,
 * and from inside a callback (a timepoint's or a link's, on any thread,
 * the progress thread included: the destroy would wait for itself).
 * Waits for a handle released on another thread (a stream's worker
 * dropping the last reference) to finish closing, and until every
 * operation submitted has completed or the stream has failed (the
 * deadline: ORDO_ERR_TIMEOUT, and nothing is freed), then
 * stops the progress thread, frees the duplicate communicator and gives
 * back the one of signals' messages (kept, see ordo_mpi_create); the
 * observers of its published signals (and those waiting for signals it
 * never published) fail with ORDO_ERR_CANCELLED. Returns the
 * communication's failure, if an operation failed, after freeing. It may
 * come after MPI_Finalize: the progress thread stops at the start of
 * MPI_Finalize (an attribute of MPI_COMM_SELF), and the destroy then frees
 * the rest without calling MPI (observers then hear nothing). From
 * MPI_Finalize on no call of ordo's calls MPI: operations, stall
 * reports, publications and timeouts are refused (ORDO_ERR_UNAVAILABLE),
 * an operation still in flight or not started fails the stream, every
 * handle of ordo_mpi_signal_open fails with ORDO_ERR_UNAVAILABLE (inside
 * MPI_Finalize; one opened later fails at once), and handles may still
 * be released (docs/MPI.md, "Teardown"). */
ordo_status_t ordo_mpi_destroy(ordo_mpi_t *mpi, ordo_deadline_t deadline);

/** The communication stream. */
ordo_status_t ordo_mpi_stream(ordo_mpi_t *mpi, ordo_stream_t **out_stream);

/** This rank and the number of ranks of the communicator. */
ordo_status_t ordo_mpi_rank(ordo_mpi_t *mpi, int *out_rank, int *out_size);

/** In-place allreduce of count elements at data (a write of buffer). */
ordo_status_t ordo_mpi_allreduce(ordo_mpi_t *mpi, ordo_buffer_t *buffer, void *data, int count,
                                 MPI_Datatype type, MPI_Op op);

/** Broadcast from root of count elements at data (a read of buffer on
 * root, a write elsewhere). */
ordo_status_t ordo_mpi_bcast(ordo_mpi_t *mpi, ordo_buffer_t *buffer, void *data, int count,
                             MPI_Datatype type, int root);

/** Sends count elements at data to rank dest with tag (a read of buffer). */
ordo_status_t ordo_mpi_send(ordo_mpi_t *mpi, ordo_buffer_t *buffer, const void *data, int count,
                            MPI_Datatype type, int dest, int tag);

/** Receives count elements into data from rank source with tag (a write
 * of buffer). A message longer than count is an MPI error. */
ordo_status_t ordo_mpi_recv(ordo_mpi_t *mpi, ordo_buffer_t *buffer, void *data, int count,
                            MPI_Datatype type, int source, int tag);

/** All-to-all: count elements to each rank from send_data (a read of
 * send_buffer), count from each rank into recv_data (a write of
 * recv_buffer); the two buffers differ, and so must their memory: ordo
 * buffers carry no address, so two buffers over the same memory (MPI
 * calls such aliasing erroneous) are not ordered against each other. */
ordo_status_t ordo_mpi_alltoall(ordo_mpi_t *mpi, ordo_buffer_t *send_buffer, const void *send_data,
                                ordo_buffer_t *recv_buffer, void *recv_data, int count,
                                MPI_Datatype type);

/** Publishes signal (a signal of this rank: local or shared) under id, so
 * other ranks can observe it with ordo_mpi_signal_open; mpi holds a
 * reference until it is destroyed. ORDO_ERR_BUSY if id is published
 * already; ORDO_ERR_INVALID_ARGUMENT for a handle from
 * ordo_mpi_signal_open. Advances and failures that observers' handles
 * sent for id before this call are applied here, on this thread: the
 * signal is raised to the highest such value, then failed with the first
 * such failure. */
ordo_status_t ordo_mpi_signal_publish(ordo_mpi_t *mpi, ordo_signal_t *signal, uint32_t id);

/** A handle on this rank of the signal rank owner published (or will
 * publish) under id: every call of ordo/signal.h, ordo/timepoint.h,
 * ordo/link.h and ordo/stream.h takes it. Its value follows the owner's
 * (monotonic: it starts at 0 and takes each value the owner sends, never
 * going back); a failure at the owner reaches it with its status and
 * message; a destroy of the owner's signal reaches it as ORDO_ERR_CANCELLED.
 * An advance or failure on it is sent to the owner (and taken here at
 * once; the owner applies one that comes before its publish at the
 * publish). The handle's last release ends it; ordo_mpi_destroy refuses with
 * ORDO_ERR_BUSY while the program holds any. While signals are published or
 * observed, the progress thread looks for messages (at least every 1 ms).
 * Callbacks may run on the progress thread (a timepoint or link on this
 * handle, or on a published signal that another rank's advance moved):
 * keep them short, since this rank sends no heartbeat while one runs, and
 * one longer than the peer timeout gets the rank found dead by the
 * others (ordo_mpi_set_peer_timeout). */
ordo_status_t ordo_mpi_signal_open(ordo_mpi_t *mpi, int owner, uint32_t id,
                                   ordo_signal_t **out_signal);

/** Sets how long a rank that exchanges signals' messages with this one
 * may stay silent before it is found dead (default 2000 ms; 100 ms to one
 * hour; every rank must set the same; it may be changed at any time, and
 * every rank counts as heard at the change). MPI tells survivors nothing when a
 * rank dies, so the ranks that observe each other's signals send each
 * other heartbeats (8 a timeout, from the progress threads). A rank found
 * dead is dead for good on this one: every handle of a signal it owns
 * fails with ORDO_ERR_ABANDONED, its message naming the rank, within the
 * timeout plus an eighth of it plus two milliseconds after its last
 * message; its subscriptions
 * are dropped and its later messages ignored. MPI operations with a dead
 * rank are MPI's: they may never complete (bound their waits with a
 * deadline). */
ordo_status_t ordo_mpi_set_peer_timeout(ordo_mpi_t *mpi, uint64_t timeout_ms);

/** A stall report across ranks, for when a wait timed out: gathers every
 * rank's wait-for edges that cross ranks (not a collective: the other
 * ranks' progress threads answer, whatever their programs are doing) until
 * all answered or the deadline passed, and writes them as text, a line
 * each:
 * @code{.unparsed}
 *   rank 1: stream "consumer" waits for rank 0's signal 7 to reach 3 (now 2)
 *   rank 1: a thread waits for rank 0's signal 7 to reach 3 (now 2)
 *   rank 0: signal 7 (at 2) is held by stream "producer", which waits for
 *           rank 1's signal 8 to reach 1 (now 0)
 *   rank 0: signal 9 (at 4): no enqueued work raises it; only its host or
 *           a link can
 *   rank 2: no answer before the deadline
 *   cycle: rank 0 signal 7 -> rank 1 signal 8 -> rank 0 signal 7 (a
 *          deadlock across ranks: ...)
 * @endcode
 * (each on one line; streams and signals of a rank's own are named as in
 * ordo/stall.h; signals across ranks by their rank and published id). A
 * publication is "held" when the only enqueued work that would raise it
 * sits behind a blocked wait (ordo_stall_holder); a cycle is a ring of
 * publications each held by a stream waiting for the next: nothing but a
 * host can break it. *out_cycles (may be NULL) receives the cycles named.
 * Text and lengths as ordo_stall_report_format: truncated and terminated
 * to capacity (ORDO_ERR_OUT_OF_RANGE then), *out_len the full length. The
 * deadline must be finite (a rank may never answer). Threads in
 * ordo_signal_wait_all or _any on observed handles are not listed. */
ordo_status_t ordo_mpi_stall_report(ordo_mpi_t *mpi, ordo_deadline_t deadline, char *out_text,
                                    size_t capacity, size_t *out_len, int *out_cycles);

ORDO_END_DECLS

#endif
