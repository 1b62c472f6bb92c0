/* copycount: an LD_PRELOAD shim that counts the user-space copies of a process's large buffers
 * (gateway.tools.bench.copies, issue 36): the bytes of memcpy and memmove calls of at least
 * MIN bytes made through the PLT (CPython's, uvloop's, the kernel module's), and the bytes of
 * blocks realloc moved (glibc copies those inside, where no PLT call shows). At exit it writes
 * "memcpy-bytes memcpy-calls realloc-bytes realloc-calls" to $COPYCOUNT_OUT. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN 4096 /* smaller copies are headers, envelopes, Python objects: not a body's */

static atomic_ulong copied, copies, moved, moves;
static void *(*real_memcpy)(void *, const void *, size_t);
static void *(*real_memmove)(void *, const void *, size_t);
static void *(*real_realloc)(void *, size_t);

static void init(void) {
  real_memcpy = dlsym(RTLD_NEXT, "memcpy");
  real_memmove = dlsym(RTLD_NEXT, "memmove");
  real_realloc = dlsym(RTLD_NEXT, "realloc");
}

void *memcpy(void *d, const void *s, size_t n) {
  if (!real_memcpy) init();
  if (n >= MIN) { copied += n; copies++; }
  return real_memcpy(d, s, n);
}

void *memmove(void *d, const void *s, size_t n) {
  if (!real_memmove) init();
  if (n >= MIN) { copied += n; copies++; }
  return real_memmove(d, s, n);
}

void *realloc(void *p, size_t n) {
  if (!real_realloc) init();
  size_t old = p ? malloc_usable_size(p) : 0;
  void *q = real_realloc(p, n);
  if (p && q && q != p) {
    size_t m = old < n ? old : n;
    if (m >= MIN) { moved += m; moves++; }
  }
  return q;
}

__attribute__((destructor)) static void dump(void) {
  const char *path = getenv("COPYCOUNT_OUT");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  fprintf(f, "%lu %lu %lu %lu\n", (unsigned long)copied, (unsigned long)copies,
          (unsigned long)moved, (unsigned long)moves);
  fclose(f);
}
