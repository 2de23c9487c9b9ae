/* libordo.so loaded with dlopen, used by a thread (an error, which gives
 * the thread a message buffer freed by a pthread key destructor at its
 * exit), and closed with dlclose before that thread exits: the exit must
 * not call into unmapped code. The library is linked -z nodelete, so
 * dlclose leaves it mapped. argv[1]: the library. Exit status 0 on
 * success; non-zero, or a crash, otherwise (every wait is bounded). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef int (*signal_create_fn)(uint64_t, void **);
typedef const char *(*error_message_fn)(void);

static signal_create_fn signal_create;
static error_message_fn error_message;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int called;  /* under lock: the thread made its call */
static int refused; /* under lock: and the call failed */
static int closed;  /* under lock */
static int gave_up; /* under lock: the thread's wait ran out */
static char seen[256];

/* Waits under lock until *flag is set; 0 once WAIT_SECONDS have passed. */
#define WAIT_SECONDS 20
static int wait_for(const int *flag) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_SECONDS;
    while (!*flag) {
        if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT) {
            return *flag;
        }
    }
    return 1;
}

static void *user(void *arg) {
    (void)arg;
    int st = signal_create(0, NULL); /* refused: no out pointer */
    snprintf(seen, sizeof seen, "%s", error_message());
    pthread_mutex_lock(&lock);
    called = 1;
    refused = st != 0;
    pthread_cond_broadcast(&changed);
    gave_up = !wait_for(&closed);
    pthread_mutex_unlock(&lock);
    return NULL; /* the key destructors run now, after the dlclose */
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBORDO_SO\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    signal_create = (signal_create_fn)(uintptr_t)dlsym(lib, "ordo_signal_create");
    error_message = (error_message_fn)(uintptr_t)dlsym(lib, "ordo_error_message");
    if (!signal_create || !error_message) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, user, NULL) != 0) {
        return 1;
    }
    pthread_mutex_lock(&lock);
    int was_called = wait_for(&called);
    int was_refused = refused;
    pthread_mutex_unlock(&lock);
    if (!was_called || !was_refused) {
        fprintf(stderr,
                was_called ? "ordo_signal_create(0, NULL) was not refused\n"
                           : "the thread made no call in %d s\n",
                WAIT_SECONDS);
        return 1; /* the thread is left behind: the process ends with it */
    }
    if (dlclose(lib) != 0) {
        fprintf(stderr, "dlclose: %s\n", dlerror());
        return 1;
    }
    pthread_mutex_lock(&lock);
    closed = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    if (gave_up) {
        fprintf(stderr, "the thread's wait for the dlclose ran out\n");
        return 1;
    }
    if (!strstr(seen, "ordo_signal_create")) {
        fprintf(stderr, "the thread's message was \"%s\"\n", seen);
        return 1;
    }
    printf("the thread exited after dlclose: %s\n", seen);
    return 0;
}
