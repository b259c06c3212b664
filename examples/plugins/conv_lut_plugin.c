/* A fused conv2d + activation kernel under test, as a fusediff plugin (docs/plugins.md).
 *
 * What it computes, per output element (TFLite's int8 reference kernels):
 *   acc = bias[k] + sum over taps (x - zx) * w          int32 accumulator
 *   u   = sat_u(MultiplyByQuantizedMultiplier(acc, M[k]) + zu),  M[k] = sx * sw[k] / su   (TFLite requantization)
 *   y   = table[u - u_qmin]                             the activation as a lookup table over the 8-bit codes of u
 * The table is the one the case hands over (fusediff builds it as TFLite's LUTPopulate does). Copy this file to
 * start your own: replace run_draw() with a call into your kernel, keep the declaration honest.
 *
 * Build: cc -std=c99 -O2 -fPIC -shared -I<fusediff>/fused/plugin/include conv_lut_plugin.c -o libconv_lut_plugin.so
 * Run:   fusediff run --fused plugin:./libconv_lut_plugin.so
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusediff/plugin/fusediff_plugin.h"

/* What this kernel implements. A case that uses anything else never reaches it: fusediff counts it unsupported. */
static const char* const kFeatures[] = {"producer:conv2d", "stage:act", "table:lut"};

/* What it keeps of the case: copied, so nothing points into host memory after prepare() returns. */
typedef struct {
  int32_t u_qmin, u_qmax, u_zero_point;
  float u_scale;
  int32_t table[256]; /* table[u - u_qmin] */
} instance;

static void say(fusediff_message* m, const char* text) {
  if (m && m->text && m->capacity > 0) snprintf(m->text, m->capacity, "%s", text);
}

/* ---- TFLite's requantization (tensorflow/lite/kernels/internal/quantization_util.cc, common.h). */

/* real = q * 2^shift, q in [0.5, 1) rounded to Q31, half away from zero. */
static void quantize_multiplier(double real, int32_t* multiplier, int* shift) {
  if (real == 0.0) {
    *multiplier = 0;
    *shift = 0;
    return;
  }
  double q = frexp(real, shift);
  int64_t q_fixed = (int64_t)round(q * 2147483648.0);
  if (q_fixed == (int64_t)1 << 31) { /* q rounded up to 1.0 */
    q_fixed /= 2;
    ++*shift;
  }
  if (*shift < -31) { /* every bit shifted out */
    *shift = 0;
    q_fixed = 0;
  }
  *multiplier = (int32_t)q_fixed;
}

/* round(a * b / 2^31), ties away from zero; the one overflowing input saturates. */
static int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  const int64_t ab = (int64_t)a * (int64_t)b; /* |ab| <= 2^62: no overflow */
  const int64_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
  return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* x / 2^exponent, ties away from zero. */
static int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier. The left shift saturates instead of overflowing (as fusediff documents). */
static int32_t multiply_by_quantized_multiplier(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  int64_t shifted = (int64_t)x * ((int64_t)1 << left); /* |x| < 2^31, left <= 31: fits int64 */
  if (shifted > INT32_MAX) shifted = INT32_MAX;
  if (shifted < INT32_MIN) shifted = INT32_MIN;
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul((int32_t)shifted, multiplier), right);
}

/* ---- The kernel. */

static int32_t clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void run_draw(const instance* in, fusediff_draw* d) {
  const int32_t zx = d->input.zero_point;
  const int32_t K = d->output_channels, C = d->input_channels, KH = d->kernel_height, KW = d->kernel_width;
  for (int32_t k = 0; k < K; ++k) {
    int32_t multiplier;
    int shift;
    quantize_multiplier((double)d->input.scale * (double)d->weight_scales[k] / (double)in->u_scale, &multiplier, &shift);
    for (int32_t n = 0; n < d->batch; ++n) {
      for (int32_t oy = 0; oy < d->output_height; ++oy) {
        for (int32_t ox = 0; ox < d->output_width; ++ox) {
          /* int32 accumulator: fusediff draws only cases whose |acc| bound stays below 2^31. */
          int32_t acc = d->bias[k];
          for (int32_t ky = 0; ky < KH; ++ky) {
            const int32_t iy = oy * d->stride_height - d->padding_top + ky * d->dilation_height;
            if (iy < 0 || iy >= d->input_height) continue; /* padding: the real value 0 adds nothing */
            for (int32_t kx = 0; kx < KW; ++kx) {
              const int32_t ix = ox * d->stride_width - d->padding_left + kx * d->dilation_width;
              if (ix < 0 || ix >= d->input_width) continue;
              const int32_t* x = d->input_codes + (((int64_t)n * d->input_height + iy) * d->input_width + ix) * C;
              const int8_t* w = d->weights + (((int64_t)k * KH + ky) * KW + kx) * C;
              for (int32_t c = 0; c < C; ++c) acc += (x[c] - zx) * (int32_t)w[c];
            }
          }
          const int32_t u = clamp(multiply_by_quantized_multiplier(acc, multiplier, shift) + in->u_zero_point,
                                  in->u_qmin, in->u_qmax);
          d->y[(((int64_t)n * d->output_height + oy) * d->output_width + ox) * K + k] = in->table[u - in->u_qmin];
        }
      }
    }
  }
  d->status = FUSEDIFF_OK;
  d->implementation = "conv_lut_plugin.c: int32 conv2d, TFLite requantization, 8-bit LUT";
}

/* ---- The ABI entries. */

static void* create(const fusediff_option* options, uint32_t option_count, fusediff_message* message) {
  (void)options;
  if (option_count > 0) {
    say(message, "conv_lut takes no options");
    return NULL;
  }
  return calloc(1, sizeof(instance));
}

static void destroy(void* self) { free(self); }

static int32_t declare(void* self, fusediff_declaration* d) {
  (void)self;
  d->requant = FUSEDIFF_REQUANT_DOUBLE_ROUNDING; /* TFLite's MultiplyByQuantizedMultiplier */
  d->intermediate_kind = FUSEDIFF_INTERMEDIATE_QUANTIZED;
  d->post_ops = FUSEDIFF_POST_OPS_EXACT;         /* the table's entries are the exact activation, rounded once */
  d->weight_range = FUSEDIFF_WEIGHTS_SYMMETRIC;
  d->threading = FUSEDIFF_THREADING_SHARED;      /* run() only reads the instance */
  d->preferred_batch = 64;
  d->transposed = 0;                             /* no ConvTranspose2D: fusediff draws none */
  return FUSEDIFF_OK;
}

static int32_t prepare(void* self, const fusediff_case* c, fusediff_message* message) {
  instance* in = (instance*)self;
  if (c->intermediate.qmax - c->intermediate.qmin + 1 > 256 || c->table_lut_count != (uint32_t)(c->intermediate.qmax - c->intermediate.qmin + 1)) {
    say(message, "expects an 8-bit intermediate with one table entry per code");
    return FUSEDIFF_REJECTED;
  }
  in->u_qmin = c->intermediate.qmin;
  in->u_qmax = c->intermediate.qmax;
  in->u_zero_point = c->intermediate.zero_point;
  in->u_scale = c->intermediate.scale;
  memcpy(in->table, c->table_lut, c->table_lut_count * sizeof(int32_t));
  return FUSEDIFF_OK;
}

static int32_t run(void* self, fusediff_batch* batch) {
  for (uint32_t i = 0; i < batch->draw_count; ++i) {
    fusediff_draw* d = (fusediff_draw*)((char*)batch->draws + (size_t)i * batch->draws[0].struct_size);
    if (d->op != FUSEDIFF_OP_CONV2D) {
      d->status = FUSEDIFF_REJECTED;
      say(&d->message, "ConvTranspose2D is not implemented");
      continue;
    }
    run_draw((const instance*)self, d);
  }
  return FUSEDIFF_OK;
}

static const fusediff_plugin_api kApi = {
    sizeof(fusediff_plugin_api), FUSEDIFF_PLUGIN_ABI_MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR,
    "conv_lut", "1.0.0", kFeatures, sizeof kFeatures / sizeof kFeatures[0],
    create, destroy, declare, prepare, run,
};

FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
  /* Speak minor FUSEDIFF_PLUGIN_ABI_MINOR of the host's major, if the host reads it. */
  return fusediff_host_offers(host, FUSEDIFF_PLUGIN_ABI_MINOR) ? &kApi : NULL;
}
