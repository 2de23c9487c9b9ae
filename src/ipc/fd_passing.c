/* Passing file descriptors between processes over UNIX sockets
 * (ordo_fd_send, ordo_fd_receive: SCM_RIGHTS). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/error.h"
#include "ordo/shared_signal.h"

static ordo_status_t socket_check(int socket, const char *api) {
    if (socket < 0 || fcntl(socket, F_GETFD) < 0) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "socket %d is not an open descriptor",
                           socket);
    }
    return ORDO_OK;
}

/* The poll timeout, in milliseconds, left until deadline (-1: none); a
 * day at most, so a longer deadline is waited for a day a poll. */
static int poll_timeout_ms(ordo_deadline_t deadline) {
    if (deadline == ORDO_DEADLINE_NEVER) {
        return -1;
    }
    uint64_t now = ordo_time_now_ns();
    uint64_t left = deadline > now ? deadline - now : 0;
    uint64_t ms = (left + 999999u) / 1000000u;
    return ms > 86400000u ? 86400000 : (int)ms;
}

/* Waits until socket is ready for events (or has an error, which the
 * next call on it reports), bounded by deadline: then ORDO_ERR_TIMEOUT
 * for api, whose message says what did not come (late, with the socket's
 * number for its %d). */
static ordo_status_t socket_ready(int socket, short events, ordo_deadline_t deadline,
                                  const char *late, const char *api) {
    for (;;) {
        struct pollfd p = {.fd = socket, .events = events};
        int ready = poll(&p, 1, poll_timeout_ms(deadline));
        if (ready > 0) {
            return ORDO_OK;
        }
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready < 0) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "poll on socket %d: %s", socket,
                               strerror(errno));
        }
        if (deadline != ORDO_DEADLINE_NEVER && ordo_time_now_ns() >= deadline) {
            return ordo__error(ORDO_ERR_TIMEOUT, api, late, socket);
        }
        /* else a day's slice of a longer deadline */
    }
}

ordo_status_t ordo_fd_send(int socket, int fd, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(socket_check(socket, __func__));
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, __func__, "fd %d is not an open descriptor",
                           fd);
    }
    char byte = 'o';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.space,
                         .msg_controllen = sizeof control.space};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
    ssize_t sent;
    for (;;) {
        /* Not blocking, whatever the socket's mode: a peer that does not
         * read fills the buffer, and the wait for room is the poll's,
         * bounded by the deadline. */
        sent = sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
            break;
        }
        if (errno != EINTR) {
            ORDO_RETURN_IF_ERROR(socket_ready(socket, POLLOUT, deadline,
                                              "deadline passed before socket %d had room for the "
                                              "descriptor (its peer is not reading)",
                                              __func__));
        }
    }
    if (sent != 1) {
        int err = errno;
        return ordo__error(err == ENOTSOCK ? ORDO_ERR_INVALID_ARGUMENT : ORDO_ERR_UNAVAILABLE,
                           __func__, "sendmsg on socket %d: %s", socket, strerror(err));
    }
    return ORDO_OK;
}

ordo_status_t ordo_fd_receive(int socket, ordo_deadline_t deadline, int *out_fd) {
    if (out_fd) {
        *out_fd = -1;
    }
    ORDO_RETURN_IF_ERROR(socket_check(socket, __func__));
    if (!out_fd) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_fd is NULL");
    }
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int) * 4)];
    } control;
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.space,
                         .msg_controllen = sizeof control.space};
    ssize_t got;
    for (;;) {
        ORDO_RETURN_IF_ERROR(socket_ready(socket, POLLIN, deadline,
                                          "deadline passed before a descriptor arrived on "
                                          "socket %d",
                                          __func__));
        /* Not blocking: another thread may have taken the message since
         * the poll; then poll again, within the deadline. */
        msg.msg_controllen = sizeof control.space;
        got = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (got >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
            break;
        }
    }
    if (got < 0) {
        int err = errno;
        return ordo__error(err == ENOTSOCK ? ORDO_ERR_INVALID_ARGUMENT : ORDO_ERR_UNAVAILABLE,
                           __func__, "recvmsg on socket %d: %s", socket, strerror(err));
    }
    int received = -1;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        size_t n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof fd);
            if (received < 0) {
                received = fd;
            } else {
                close(fd); /* one descriptor a message: the rest are not the caller's */
            }
        }
    }
    if (received < 0) {
        return got == 0
                   ? ordo__error(ORDO_ERR_NOT_FOUND, __func__,
                                 "the peer closed socket %d before sending a descriptor", socket)
                   : ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                                 "the message on socket %d carried no descriptor", socket);
    }
    *out_fd = received;
    return ORDO_OK;
}
