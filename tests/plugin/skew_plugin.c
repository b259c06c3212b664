/* Plugins that break the ABI's version rules, one per define (tests/plugin/tests.cmake builds each): fusediff must
 * refuse every one with a clear error and exit 2 (docs/plugins.md, "Versions").
 *   SKEW_MAJOR        speaks ABI major FUSEDIFF_PLUGIN_ABI_MAJOR + 1, whatever the host offers
 *   SKEW_SMALL_TABLE  an API table whose struct_size is smaller than its minor's
 *   SKEW_NO_ENTRY     exports no entry symbol
 *   SKEW_REFUSE       returns NULL: speaks none of the offered versions (a plugin built for a newer minor) */
#include "fusediff/plugin/fusediff_plugin.h"

static const char* const kFeatures[] = {"producer:conv2d", "stage:act", "table:lut"};
static void* create(const fusediff_option* o, uint32_t n, fusediff_message* m) { (void)o; (void)n; (void)m; return (void*)kFeatures; }
static void destroy(void* self) { (void)self; }
static int32_t declare(void* self, fusediff_declaration* d) { (void)self; (void)d; return FUSEDIFF_OK; }
static int32_t prepare(void* self, const fusediff_case* c, fusediff_message* m) { (void)self; (void)c; (void)m; return FUSEDIFF_OK; }
static int32_t run(void* self, fusediff_batch* b) { (void)self; (void)b; return FUSEDIFF_ERROR; }

#if defined(SKEW_MAJOR)
#define MAJOR (FUSEDIFF_PLUGIN_ABI_MAJOR + 1)
#else
#define MAJOR FUSEDIFF_PLUGIN_ABI_MAJOR
#endif
#if defined(SKEW_SMALL_TABLE)
#define SIZE (sizeof(fusediff_plugin_api) - sizeof(void*))
#else
#define SIZE sizeof(fusediff_plugin_api)
#endif

static const fusediff_plugin_api kApi = {SIZE, MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR, "skew", "0", kFeatures, 3,
                                         create, destroy, declare, prepare, run};

#if !defined(SKEW_NO_ENTRY)
FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
#if defined(SKEW_REFUSE)
  return host->abi_major == 0xFFFFFFFFu ? &kApi : 0; /* no host offers that major: always NULL */
#else
  (void)host;
  return &kApi;
#endif
}
#else
FUSEDIFF_PLUGIN_EXPORT int skew_not_the_entry(void) { return kApi.abi_major == 0 ? 0 : 1; }
#endif
