/* A plugin that declares FUSEDIFF_THREADING_INSTANCE_PER_THREAD and names, in each draw's implementation, the
 * instance that ran it (its outputs are all 0: only the host's threading is under test, plugin_test.cpp). */
#include <stdlib.h>

#include "fusediff/plugin/fusediff_plugin.h"

static const char* const kFeatures[] = {"producer:conv2d", "stage:act", "table:lut"};
static const char* const kNames[] = {"instance 0", "instance 1", "instance 2", "instance 3", "instance >3"};
static int created; /* the host creates instances one at a time */

static void* create(const fusediff_option* o, uint32_t n, fusediff_message* m) {
  int* self = (int*)malloc(sizeof(int));
  (void)o;
  (void)n;
  (void)m;
  if (self) *self = created < 4 ? created++ : 4;
  return self;
}
static void destroy(void* self) { free(self); }
static int32_t declare(void* self, fusediff_declaration* d) {
  (void)self;
  d->threading = FUSEDIFF_THREADING_INSTANCE_PER_THREAD;
  d->preferred_batch = 1;
  return FUSEDIFF_OK;
}
static int32_t prepare(void* self, const fusediff_case* c, fusediff_message* m) {
  (void)self;
  (void)c;
  (void)m;
  return FUSEDIFF_OK;
}
static int32_t run(void* self, fusediff_batch* batch) {
  uint32_t i;
  uint64_t j;
  for (i = 0; i < batch->draw_count; ++i) {
    fusediff_draw* d = (fusediff_draw*)((char*)batch->draws + (size_t)i * batch->draws[0].struct_size);
    for (j = 0; j < d->y_count; ++j) d->y[j] = 0;
    d->status = FUSEDIFF_OK;
    d->implementation = kNames[*(int*)self];
  }
  return FUSEDIFF_OK;
}

static const fusediff_plugin_api kApi = {sizeof(fusediff_plugin_api), FUSEDIFF_PLUGIN_ABI_MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR,
                                         "threads", "0", kFeatures, 3, create, destroy, declare, prepare, run};

FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
  return fusediff_host_offers(host, FUSEDIFF_PLUGIN_ABI_MINOR) ? &kApi : NULL;
}
