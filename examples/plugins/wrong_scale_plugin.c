/* A wrong fused conv2d + activation kernel, as a fusediff plugin: fusediff must reject it (docs/plugins.md).
 *
 * It is conv_lut_plugin.c with one bug, the arithmetic of fusediff's use-output-scale mutant: its table reads the
 * intermediate code u with the output's scale sy in place of su,
 *   table[u - u_qmin] = round(f(sy * (u - zu)) / sy) + zy        (should be f(su * (u - zu)))
 * built here in double with the case's output rounding and zero-point order. Where su == sy it is right; elsewhere
 * the activation is evaluated at the wrong point, and `fusediff run` fails the case, shrinks the failing sample to
 * one output element, and prints a replay line that reproduces it through this plugin.
 */
#define fusediff_plugin_entry conv_lut_plugin_entry
#include "conv_lut_plugin.c"
#undef fusediff_plugin_entry

/* ---- The activation, in double (docs/activations.md), and the table built with the wrong scale. */

static double activation(int32_t kind, double alpha, double x) {
  const double relu6 = x < 0 ? 0 : x > 6 ? 6 : x;
  switch (kind) {
    case FUSEDIFF_ACT_RELU: return x > 0 ? x : 0;
    case FUSEDIFF_ACT_RELU6: return relu6;
    case FUSEDIFF_ACT_LEAKY_RELU: return x >= 0 ? x : alpha * x;
    case FUSEDIFF_ACT_HARD_SIGMOID: return (x + 3 < 0 ? 0 : x + 3 > 6 ? 6 : x + 3) / 6;
    case FUSEDIFF_ACT_HARD_SWISH: return x * (x + 3 < 0 ? 0 : x + 3 > 6 ? 6 : x + 3) / 6;
    case FUSEDIFF_ACT_GELU_ERF: return x / 2 * (1 + erf(x / sqrt(2.0)));
    case FUSEDIFF_ACT_GELU_TANH: return x / 2 * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case FUSEDIFF_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case FUSEDIFF_ACT_TANH: return tanh(x);
    case FUSEDIFF_ACT_SILU: return x / (1 + exp(-x));
    case FUSEDIFF_ACT_ELU: return x >= 0 ? x : alpha * expm1(x);
    case FUSEDIFF_ACT_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    default: return x * tanh(x > 30 ? x : log1p(exp(x))); /* mish */
  }
}

static double round_as(int32_t rounding, double t) {
  if (rounding == FUSEDIFF_HALF_TO_EVEN) return nearbyint(t); /* the default rounding mode: ties to even */
  if (rounding == FUSEDIFF_HALF_UP) return floor(t + 0.5);
  return round(t);
}

static void build_wrong_table(instance* in, const fusediff_case* c) {
  const fusediff_boundary* y = &c->output;
  for (int32_t u = c->intermediate.qmin; u <= c->intermediate.qmax; ++u) {
    const double x = (double)y->scale * (u - c->intermediate.zero_point); /* THE BUG: sy, not su */
    const double t = activation(c->activation, c->alpha, x) / y->scale;
    const double code = y->zero_point_order == FUSEDIFF_ZP_BEFORE_ROUNDING ? round_as(y->rounding, t + y->zero_point)
                                                                          : round_as(y->rounding, t) + y->zero_point;
    in->table[u - c->intermediate.qmin] = (int32_t)(code < y->qmin ? y->qmin : code > y->qmax ? y->qmax : code);
  }
}

/* ---- conv_lut_plugin.c's entries, with the wrong table built after its prepare(). */

static int32_t wrong_prepare(void* self, const fusediff_case* c, fusediff_message* message) {
  const int32_t status = prepare(self, c, message);
  if (status == FUSEDIFF_OK) build_wrong_table((instance*)self, c);
  return status;
}

static int32_t wrong_run(void* self, fusediff_batch* batch) {
  const int32_t status = run(self, batch);
  for (uint32_t i = 0; i < batch->draw_count; ++i) {
    fusediff_draw* d = (fusediff_draw*)((char*)batch->draws + (size_t)i * batch->draws[0].struct_size);
    if (d->status == FUSEDIFF_OK) {
      d->implementation = "wrong_scale_plugin.c: int32 conv2d, TFLite requantization, 8-bit LUT read with the output scale";
    }
  }
  return status;
}

static const fusediff_plugin_api kWrongApi = {
    sizeof(fusediff_plugin_api), FUSEDIFF_PLUGIN_ABI_MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR,
    "wrong_scale", "1.0.0", kFeatures, sizeof kFeatures / sizeof kFeatures[0],
    create, destroy, declare, wrong_prepare, wrong_run,
};

FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
  return fusediff_host_offers(host, FUSEDIFF_PLUGIN_ABI_MINOR) ? &kWrongApi : NULL;
}
