#pragma once
// Activation kinds and their parameters. The formulas themselves are documented once, in
// docs/activations.md, and implemented independently by reference/ (exact) and fused/ (double/float).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusediff {

enum class ActivationKind {
  relu,          // max(0, x)
  relu6,         // min(max(0, x), 6)
  leaky_relu,    // x >= 0 ? x : alpha*x                  (alpha, default 0.01)
  hard_sigmoid,  // relu6(x + 3) / 6
  hard_swish,    // x * relu6(x + 3) / 6
  gelu_erf,      // x/2 * (1 + erf(x/sqrt(2)))
  gelu_tanh,     // x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))   -- a different function
  sigmoid,       // 1 / (1 + exp(-x))
  tanh,          // tanh(x)
  silu,          // x * sigmoid(x)
  elu,           // x >= 0 ? x : alpha*(exp(x) - 1)       (alpha, default 1)
  softplus,      // log(1 + exp(x))
  mish,          // x * tanh(softplus(x))
};

inline constexpr ActivationKind kAllActivations[] = {
    ActivationKind::relu,     ActivationKind::relu6,     ActivationKind::leaky_relu, ActivationKind::hard_sigmoid,
    ActivationKind::hard_swish, ActivationKind::gelu_erf, ActivationKind::gelu_tanh, ActivationKind::sigmoid,
    ActivationKind::tanh,     ActivationKind::silu,      ActivationKind::elu,        ActivationKind::softplus,
    ActivationKind::mish};

struct Activation {
  ActivationKind kind = ActivationKind::relu;
  float alpha = 0.0f;  // meaningful only when takes_alpha(kind); otherwise 0
  friend bool operator==(const Activation&, const Activation&) = default;
};

std::string_view to_string(ActivationKind k);
ActivationKind parse_activation_kind(std::string_view text, std::string_view field);
bool takes_alpha(ActivationKind k);
float default_alpha(ActivationKind k);  // 0 when the kind takes none
// An activation with its default parameters.
Activation make_activation(ActivationKind k);
// Piecewise-rational activations are evaluated in exact rationals by the reference; the others need
// transcendental functions (MPFR).
bool is_piecewise_rational(ActivationKind k);

// The real input domain that covers an activation's knees and its approach to saturation, and the image of f on
// it (rounded outward). Default quantizations and generators scale to these.
struct ActivationDomain {
  double input_lo, input_hi;
  double output_lo, output_hi;
};
ActivationDomain default_domain(ActivationKind k);

// Characteristic points ("knees") where fused approximations break: kinks, local minima, maximum-curvature
// points. Used to classify samples into the `knee` region and (later) to aim generators.
std::vector<double> knee_points(const Activation& a);

}  // namespace fusediff
