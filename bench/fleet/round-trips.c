/* Times every round trip that a process makes to Redis through hiredis,
 * for bench/fleet/scale.R: the package exposes no per-sync round trip, and
 * this measures it from outside, the same for any version of the package.
 *
 * scale.R compiles this file (`cc -shared -fPIC`) and starts each worker
 * with it in LD_PRELOAD. It wraps two generations of hiredis use:
 * - the package's own wire (inst/include/circuitbreaker/redis/wire.hpp,
 *   plain TCP or TLS): hiredis only formats commands
 *   (redisFormatCommandArgv(): a command appended) and parses replies
 *   (redisReaderGetReply(): a reply when it returns REDIS_OK with a
 *   non-NULL reply; REDIS_ERR is a failed round trip, and so is
 *   redisReaderFree() of a reader while commands are pending: the wire
 *   closes the connection on a timeout or an error, which frees its
 *   reader);
 * - older versions of the package, which used a redisContext:
 *   redisAppendCommandArgv(), redisAppendFormattedCommand() and
 *   redisGetReply() (redisCommandArgv() calls these through the PLT, so a
 *   plain command is seen too).
 * Inside one of the older functions the newer ones are not counted
 * (hiredis may call them itself, through its PLT), so that a command is
 * never counted twice. Per thread, a round trip starts with the first
 * command appended while none is pending and ends with the reply that
 * leaves none pending, so a pipeline of several commands is one round
 * trip. Each is recorded (thread id, start, seconds, commands, first
 * command's name, ok) in a fixed table; the worker writes the table out
 * with .C("cb_round_trips_dump", path). No hiredis header is needed: the
 * wrapped functions are found in the loaded libhiredis and called with
 * their arguments untouched. (R loads a package's library, and so
 * libhiredis, with RTLD_LOCAL: dlsym(RTLD_NEXT) does not see it, but its
 * symbols are still looked up in the global scope first, where this
 * library is.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CAPACITY 400000

struct round_trip {
  long tid;
  double start, seconds;
  int commands, ok;
  char name[16];
  atomic_int done;
};

static struct round_trip table[CAPACITY];
static atomic_long used;

static _Thread_local int pending;
static _Thread_local int commands;
static _Thread_local double started;
static _Thread_local char first[16];
/* Inside a wrapped function of the older interface: the newer ones that
 * hiredis calls from there are not counted again. */
static _Thread_local int inside;

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void appended(const char* name, size_t len) {
  if (pending == 0) {
    started = wall();
    commands = 0;
    size_t n = len < sizeof first - 1 ? len : sizeof first - 1;
    memcpy(first, name, n);
    first[n] = '\0';
  }
  pending++;
  commands++;
}

static void replied(int ok) {
  if (pending == 0) return; /* a reply nobody asked for (pub/sub) */
  pending = ok ? pending - 1 : 0;
  if (pending > 0) return;
  long i = atomic_fetch_add(&used, 1);
  if (i >= CAPACITY) return;
  struct round_trip* r = &table[i];
  r->tid = (long)syscall(SYS_gettid);
  r->start = started;
  r->seconds = wall() - started;
  r->commands = commands;
  r->ok = ok;
  memcpy(r->name, first, sizeof first);
  atomic_store(&r->done, 1);
}

/* The loaded libhiredis (the first loaded object whose name has
 * "libhiredis"), or NULL. */
static int find_hiredis(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "libhiredis")) {
    *(void**)data = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return *(void**)data != NULL;
  }
  return 0;
}
static void* hiredis_symbol(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f) return f;
  void* lib = NULL;
  dl_iterate_phdr(find_hiredis, &lib);
  return lib ? dlsym(lib, name) : NULL;
}

typedef int (*append_argv_fn)(void*, int, const char**, const size_t*);
typedef int (*append_formatted_fn)(void*, const char*, size_t);
typedef int (*get_reply_fn)(void*, void**);
typedef int (*format_argv_fn)(char**, int, const char**, const size_t*);
typedef int (*reader_get_reply_fn)(void*, void**);
typedef void (*reader_free_fn)(void*);

/* The older interface (a redisContext). */
int redisAppendCommandArgv(void* c, int argc, const char** argv, const size_t* argvlen) {
  static append_argv_fn next;
  if (!next) next = (append_argv_fn)hiredis_symbol("redisAppendCommandArgv");
  inside++;
  int status = next(c, argc, argv, argvlen);
  inside--;
  if (status == 0 && argc > 0 && !inside) appended(argv[0], argvlen ? argvlen[0] : strlen(argv[0]));
  return status;
}

int redisAppendFormattedCommand(void* c, const char* cmd, size_t len) {
  static append_formatted_fn next;
  if (!next) next = (append_formatted_fn)hiredis_symbol("redisAppendFormattedCommand");
  inside++;
  int status = next(c, cmd, len);
  inside--;
  if (status == 0 && !inside) appended("formatted", 9);
  return status;
}

int redisGetReply(void* c, void** reply) {
  static get_reply_fn next;
  if (!next) next = (get_reply_fn)hiredis_symbol("redisGetReply");
  inside++;
  int status = next(c, reply);
  inside--;
  if (!inside) replied(status == 0);
  return status;
}

/* The package's own wire: hiredis formats and parses, nothing else. A
 * formatted command is one appended (the wire sends what it formats). */
int redisFormatCommandArgv(char** target, int argc, const char** argv, const size_t* argvlen) {
  static format_argv_fn next;
  if (!next) next = (format_argv_fn)hiredis_symbol("redisFormatCommandArgv");
  int n = next(target, argc, argv, argvlen);
  if (n > 0 && argc > 0 && !inside) appended(argv[0], argvlen ? argvlen[0] : strlen(argv[0]));
  return n;
}

/* REDIS_OK (0) with a reply: one reply; REDIS_OK without: no complete
 * reply yet (the wire asks before every read, and until none is left);
 * REDIS_ERR: a protocol error, the connection is dropped. */
int redisReaderGetReply(void* r, void** reply) {
  static reader_get_reply_fn next;
  if (!next) next = (reader_get_reply_fn)hiredis_symbol("redisReaderGetReply");
  int status = next(r, reply);
  if (!inside) {
    if (status != 0) {
      replied(0);
    } else if (reply && *reply) {
      replied(1);
    }
  }
  return status;
}

/* A reader freed while this thread waits for replies: the wire closed the
 * connection (a timeout, a write or read that failed, the peer gone), so
 * the round trip failed, and it ends now. */
void redisReaderFree(void* r) {
  static reader_free_fn next;
  if (!next) next = (reader_free_fn)hiredis_symbol("redisReaderFree");
  if (!inside && r && pending > 0) replied(0);
  next(r);
}

/* .C("cb_round_trips_dump", path): the table so far, tab-separated. */
void cb_round_trips_dump(char** path) {
  FILE* f = fopen(path[0], "w");
  if (!f) return;
  fprintf(f, "tid\tstart\tseconds\tcommands\tname\tok\n");
  long n = atomic_load(&used);
  if (n > CAPACITY) n = CAPACITY;
  for (long i = 0; i < n; i++) {
    struct round_trip* r = &table[i];
    if (!atomic_load(&r->done)) continue;
    fprintf(f, "%ld\t%.6f\t%.9f\t%d\t%s\t%d\n", r->tid, r->start, r->seconds, r->commands,
            r->name, r->ok);
  }
  fclose(f);
}
