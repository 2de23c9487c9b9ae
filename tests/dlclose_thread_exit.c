/* libordo.so loaded with dlopen, used by a thread (an error, which gives
 * the thread a message buffer freed by a pthread key destructor at its
 * exit), and closed with dlclose before that thread exits: the exit must
 * not call into unmapped code. The library is linked -z nodelete, so
 * dlclose leaves it mapped. argv[1]: the library. Exit status 0 on
 * success; a crash otherwise. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int (*signal_create_fn)(uint64_t, void **);
typedef const char *(*error_message_fn)(void);

static signal_create_fn signal_create;
static error_message_fn error_message;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int failed_once; /* under lock */
static int closed;      /* under lock */
static char seen[256];

static void *user(void *arg) {
    (void)arg;
    int st = signal_create(0, NULL); /* refused: no out pointer */
    snprintf(seen, sizeof seen, "%s", error_message());
    pthread_mutex_lock(&lock);
    failed_once = st != 0;
    pthread_cond_broadcast(&changed);
    while (!closed) {
        pthread_cond_wait(&changed, &lock);
    }
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
    while (!failed_once) {
        pthread_cond_wait(&changed, &lock);
    }
    pthread_mutex_unlock(&lock);
    if (dlclose(lib) != 0) {
        fprintf(stderr, "dlclose: %s\n", dlerror());
        return 1;
    }
    pthread_mutex_lock(&lock);
    closed = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    if (!strstr(seen, "ordo_signal_create")) {
        fprintf(stderr, "the thread's message was \"%s\"\n", seen);
        return 1;
    }
    printf("the thread exited after dlclose: %s\n", seen);
    return 0;
}
