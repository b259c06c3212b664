#include "fusediff/model/activation.h"

#include <cmath>
#include <string>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
// In kAllActivations' order, the order an unknown name's error lists them in.
constexpr detail::Names<ActivationKind, 13> kActivations{{{"relu", ActivationKind::relu},
                                                          {"relu6", ActivationKind::relu6},
                                                          {"leaky_relu", ActivationKind::leaky_relu},
                                                          {"hard_sigmoid", ActivationKind::hard_sigmoid},
                                                          {"hard_swish", ActivationKind::hard_swish},
                                                          {"gelu_erf", ActivationKind::gelu_erf},
                                                          {"gelu_tanh", ActivationKind::gelu_tanh},
                                                          {"sigmoid", ActivationKind::sigmoid},
                                                          {"tanh", ActivationKind::tanh},
                                                          {"silu", ActivationKind::silu},
                                                          {"elu", ActivationKind::elu},
                                                          {"softplus", ActivationKind::softplus},
                                                          {"mish", ActivationKind::mish}}};
}  // namespace

std::string_view to_string(ActivationKind k) { return detail::NameOf(k, kActivations); }

ActivationKind parse_activation_kind(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "activation", kActivations);
}

bool takes_alpha(ActivationKind k) { return k == ActivationKind::leaky_relu || k == ActivationKind::elu; }

float default_alpha(ActivationKind k) {
  if (k == ActivationKind::leaky_relu) return 0.01f;
  if (k == ActivationKind::elu) return 1.0f;
  return 0.0f;
}

Activation make_activation(ActivationKind k) { return Activation{k, default_alpha(k)}; }

bool is_piecewise_rational(ActivationKind k) {
  switch (k) {
    case ActivationKind::relu:
    case ActivationKind::relu6:
    case ActivationKind::leaky_relu:
    case ActivationKind::hard_sigmoid:
    case ActivationKind::hard_swish: return true;
    default: return false;
  }
}

ActivationDomain default_domain(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::relu: return {-8, 8, 0, 8};
    case ActivationKind::relu6: return {-8, 8, 0, 6};
    case ActivationKind::leaky_relu: return {-8, 8, -0.08, 8};
    case ActivationKind::hard_sigmoid: return {-6, 6, 0, 1};
    case ActivationKind::hard_swish: return {-6, 6, -0.375, 6};
    case ActivationKind::gelu_erf:
    case ActivationKind::gelu_tanh: return {-6, 6, -0.17, 6};
    case ActivationKind::sigmoid: return {-8, 8, 0, 1};
    case ActivationKind::tanh: return {-4, 4, -1, 1};
    case ActivationKind::silu: return {-8, 8, -0.28, 8};
    case ActivationKind::elu: return {-6, 6, -1, 6};
    case ActivationKind::softplus: return {-8, 8, 0, 8};
    case ActivationKind::mish: return {-6, 6, -0.31, 6};
  }
  return {-8, 8, -8, 8};
}

std::vector<double> knee_points(const Activation& a) {
  switch (a.kind) {
    case ActivationKind::relu:
    case ActivationKind::leaky_relu:
    case ActivationKind::elu: return {0.0};
    case ActivationKind::relu6: return {0.0, 6.0};
    case ActivationKind::hard_sigmoid:
    case ActivationKind::hard_swish: return {-3.0, 3.0};
    // GELU (erf form) minimum at x ~= -0.75179; the tanh form's is within 1e-3 of it.
    case ActivationKind::gelu_erf:
    case ActivationKind::gelu_tanh: return {-0.7517915, 0.0};
    // SiLU minimum at x ~= -1.27846 (root of 1 + x(1 - sigmoid(x)) = 0).
    case ActivationKind::silu: return {-1.2784645, 0.0};
    // Maximum curvature of sigmoid at x = +-ln(2 + sqrt 3); of tanh at +-ln(2 + sqrt 3)/2.
    case ActivationKind::sigmoid: return {-1.3169579, 1.3169579};
    case ActivationKind::tanh: return {-0.6584789, 0.6584789};
    // Mish minimum at x ~= -1.19; softplus bends around 0.
    case ActivationKind::mish: return {-1.1924, 0.0};
    case ActivationKind::softplus: return {0.0};
  }
  return {};
}

}  // namespace fusediff
