/* A plugin that crashes on some draws: conv_lut_plugin.c's kernel, except that a few draws segfault, abort or spin
 * forever. It exists to show (and test) that a crash in the kernel under test loses nothing: run it isolated,
 *
 *   fusediff run --fused plugin:./libcrash_plugin.so,crash=segv --isolate
 *   fusediff run --fused exec:'fusediff plugin-host ./libcrash_plugin.so,crash=loop' --plugin-timeout 2
 *
 * and each lost draw becomes a `crashed` or `timeout` sample with its replay line, while every other draw and case
 * is compared as usual. In process without --isolate it takes fusediff down with it, as any crashing plugin would.
 *
 * Options (beside conv_lut_plugin.c's, which it passes on):
 *   crash=segv|abort|loop|all   what a chosen draw does (all: segv, abort and loop on different draws); none: never
 *   every=N                     one draw in about N is chosen (default 7)
 *   batch=N                     the draws per run() it declares (default conv_lut_plugin.c's)
 * A draw is chosen by a digest of its input codes, never by call order, so a replay line reproduces the crash.
 */
#define fusediff_plugin_entry conv_lut_plugin_entry
#include "conv_lut_plugin.c"
#undef fusediff_plugin_entry

#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum crash_mode { CRASH_NONE, CRASH_SEGV, CRASH_ABORT, CRASH_LOOP, CRASH_ALL };

typedef struct crash_instance {
  void* inner;
  enum crash_mode mode;
  uint32_t every;
  uint32_t batch; /* 0: the inner plugin's preferred batch */
} crash_instance;

static const fusediff_plugin_api* crash_inner;
static fusediff_plugin_api crash_table;

static void crash_say(fusediff_message* m, const char* text) {
  if (m && m->text && m->capacity > 0) {
    strncpy(m->text, text, m->capacity - 1);
    m->text[m->capacity - 1] = '\0';
  }
}

/* FNV-1a 32 of the draw's input codes: which draws crash depends on the draw alone. */
static uint32_t crash_digest(const fusediff_draw* d) {
  uint32_t h = 2166136261u;
  for (uint64_t i = 0; i < d->input_count; ++i) {
    h ^= (uint32_t)d->input_codes[i];
    h *= 16777619u;
  }
  return h;
}

static void* crash_create(const fusediff_option* options, uint32_t count, fusediff_message* message) {
  crash_instance* c = (crash_instance*)calloc(1, sizeof *c);
  fusediff_option kept[64];
  uint32_t kept_count = 0;
  if (!c) return NULL;
  c->mode = CRASH_ALL;
  c->every = 7;
  for (uint32_t i = 0; i < count; ++i) {
    const fusediff_option* o = FUSEDIFF_AT(fusediff_option, options, i);
    if (strcmp(o->key, "crash") == 0) {
      if (strcmp(o->value, "none") == 0) c->mode = CRASH_NONE;
      else if (strcmp(o->value, "segv") == 0) c->mode = CRASH_SEGV;
      else if (strcmp(o->value, "abort") == 0) c->mode = CRASH_ABORT;
      else if (strcmp(o->value, "loop") == 0) c->mode = CRASH_LOOP;
      else if (strcmp(o->value, "all") == 0) c->mode = CRASH_ALL;
      else {
        crash_say(message, "crash: expected none, segv, abort, loop or all");
        free(c);
        return NULL;
      }
    } else if (strcmp(o->key, "every") == 0) {
      c->every = (uint32_t)strtoul(o->value, NULL, 10);
      if (c->every == 0) {
        crash_say(message, "every: expected a positive integer");
        free(c);
        return NULL;
      }
    } else if (strcmp(o->key, "batch") == 0) {
      c->batch = (uint32_t)strtoul(o->value, NULL, 10);
      if (c->batch == 0) {
        crash_say(message, "batch: expected a positive integer");
        free(c);
        return NULL;
      }
    } else if (kept_count < 64) {
      kept[kept_count] = *o;
      kept[kept_count++].struct_size = sizeof(fusediff_option);
    }
  }
  c->inner = crash_inner->create(kept, kept_count, message);
  if (!c->inner) {
    free(c);
    return NULL;
  }
  return c;
}

static void crash_destroy(void* instance) {
  crash_instance* c = (crash_instance*)instance;
  crash_inner->destroy(c->inner);
  free(c);
}

static int32_t crash_declare(void* instance, fusediff_declaration* d) {
  const crash_instance* c = (const crash_instance*)instance;
  const int32_t status = crash_inner->declare(c->inner, d);
  if (c->batch > 0) d->preferred_batch = c->batch;
  return status;
}

static int32_t crash_prepare(void* instance, const fusediff_case* c, fusediff_message* message) {
  return crash_inner->prepare(((crash_instance*)instance)->inner, c, message);
}

static int32_t crash_run(void* instance, fusediff_batch* batch) {
  const crash_instance* c = (const crash_instance*)instance;
  for (uint32_t i = 0; c->mode != CRASH_NONE && i < batch->draw_count; ++i) {
    const uint32_t h = crash_digest(FUSEDIFF_AT(fusediff_draw, batch->draws, i));
    if (h % c->every != 0) continue;
    enum crash_mode what = c->mode;
    if (what == CRASH_ALL) what = (enum crash_mode)(CRASH_SEGV + (h / c->every) % 3);
    if (what == CRASH_SEGV) raise(SIGSEGV);
    if (what == CRASH_ABORT) abort();
    for (volatile int spin = 1; spin;) {
    } /* CRASH_LOOP: never returns */
  }
  return crash_inner->run(c->inner, batch);
}

FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
  crash_inner = conv_lut_plugin_entry(host);
  if (!crash_inner) return NULL;
  crash_table = *crash_inner;
  crash_table.name = "crash_plugin";
  crash_table.version = "1.0";
  crash_table.create = crash_create;
  crash_table.destroy = crash_destroy;
  crash_table.declare = crash_declare;
  crash_table.prepare = crash_prepare;
  crash_table.run = crash_run;
  return &crash_table;
}
