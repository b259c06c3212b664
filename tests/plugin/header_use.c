/* Compiled by ctest as C99 and as C++17 with -Wall -Wextra -Werror -pedantic (tests/plugin/tests.cmake): the ABI
 * header and its macros, used as a plugin uses them, must compile cleanly in both languages. */
#include "fusediff/plugin/fusediff_plugin.h"

static const char* const kFeatures[] = {"producer:conv2d", "stage:act"};

static void* create(const fusediff_option* options, uint32_t count, fusediff_message* message) {
  (void)options;
  (void)count;
  (void)message;
  return 0;
}
static void destroy(void* self) { (void)self; }
static int32_t declare(void* self, fusediff_declaration* d) {
  (void)self;
  if (FUSEDIFF_HAS_FIELD(fusediff_declaration, d, transposed)) d->transposed = 0;
  d->requant = FUSEDIFF_GRAPH;
  return FUSEDIFF_OK;
}
static int32_t prepare(void* self, const fusediff_case* c, fusediff_message* message) {
  (void)self;
  (void)message;
  if (c->stage_count > 0 && FUSEDIFF_AT(fusediff_stage, c->stages, 0)->kind[0] == 'a') return FUSEDIFF_OK;
  return c->table_kind == FUSEDIFF_TABLE_NONE ? FUSEDIFF_REJECTED : FUSEDIFF_OK;
}
static int32_t run(void* self, fusediff_batch* batch) {
  uint32_t i;
  (void)self;
  for (i = 0; i < batch->draw_count; ++i) batch->draws[i].status = FUSEDIFF_OK;
  return FUSEDIFF_OK;
}

static const fusediff_plugin_api kApi = {sizeof(fusediff_plugin_api), FUSEDIFF_PLUGIN_ABI_MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR,
                                         "header_use", "0", kFeatures, 2, create, destroy, declare, prepare, run};

#ifdef __cplusplus
extern "C"
#endif
FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host);

FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
  return host->abi_major == FUSEDIFF_PLUGIN_ABI_MAJOR ? &kApi : 0;
}
