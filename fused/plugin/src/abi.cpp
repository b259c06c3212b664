// The ABI header's enum values against fusediff's enums: one mapping table per enum, each row checked at compile
// time, so that a value changed on either side breaks the build instead of a plugin's reading of a case.
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "fusediff/fused/plugin_case.h"
#include "fusediff/model/activation.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

namespace {
template <typename E, size_t N>
using Table = std::array<std::pair<int32_t, E>, N>;

// Every row's C value is the enum's own value, and the rows are the values 0..N-1 in order: ToC is then a cast and
// FromC a range check.
template <typename E, size_t N>
constexpr bool Matches(const Table<E, N>& table) {
  for (size_t i = 0; i < N; ++i) {
    if (table[i].first != static_cast<int32_t>(table[i].second) || table[i].first != static_cast<int32_t>(i)) return false;
  }
  return true;
}

constexpr Table<ScalarType, 3> kScalarTypes{{{FUSEDIFF_INT8, ScalarType::int8},
                                             {FUSEDIFF_UINT8, ScalarType::uint8},
                                             {FUSEDIFF_INT16, ScalarType::int16}}};
constexpr Table<RoundingMode, 3> kRoundings{{{FUSEDIFF_HALF_AWAY_FROM_ZERO, RoundingMode::half_away_from_zero},
                                             {FUSEDIFF_HALF_TO_EVEN, RoundingMode::half_to_even},
                                             {FUSEDIFF_HALF_UP, RoundingMode::half_up}}};
constexpr Table<ZeroPointOrder, 2> kZeroPointOrders{{{FUSEDIFF_ZP_AFTER_ROUNDING, ZeroPointOrder::after_rounding},
                                                     {FUSEDIFF_ZP_BEFORE_ROUNDING, ZeroPointOrder::before_rounding}}};
constexpr Table<RequantVariant, 5> kRequants{{{FUSEDIFF_REQUANT_EXACT, RequantVariant::exact},
                                              {FUSEDIFF_REQUANT_DOUBLE_ROUNDING, RequantVariant::double_rounding},
                                              {FUSEDIFF_REQUANT_SINGLE_ROUNDING, RequantVariant::single_rounding},
                                              {FUSEDIFF_REQUANT_F32_HALF_EVEN, RequantVariant::f32_half_even},
                                              {FUSEDIFF_REQUANT_F32_ZERO_POINT_FIRST, RequantVariant::f32_zero_point_first}}};
constexpr Table<IntermediateKind, 2> kIntermediateKinds{{{FUSEDIFF_INTERMEDIATE_QUANTIZED, IntermediateKind::quantized},
                                                         {FUSEDIFF_INTERMEDIATE_F32, IntermediateKind::f32}}};
constexpr Table<PostOpArithmetic, 3> kPostOps{{{FUSEDIFF_POST_OPS_EXACT, PostOpArithmetic::exact},
                                               {FUSEDIFF_POST_OPS_BINARY32, PostOpArithmetic::binary32},
                                               {FUSEDIFF_POST_OPS_BINARY32_LIBM, PostOpArithmetic::binary32_libm}}};
constexpr Table<ActivationKind, 13> kActivations{{{FUSEDIFF_ACT_RELU, ActivationKind::relu},
                                                  {FUSEDIFF_ACT_RELU6, ActivationKind::relu6},
                                                  {FUSEDIFF_ACT_LEAKY_RELU, ActivationKind::leaky_relu},
                                                  {FUSEDIFF_ACT_HARD_SIGMOID, ActivationKind::hard_sigmoid},
                                                  {FUSEDIFF_ACT_HARD_SWISH, ActivationKind::hard_swish},
                                                  {FUSEDIFF_ACT_GELU_ERF, ActivationKind::gelu_erf},
                                                  {FUSEDIFF_ACT_GELU_TANH, ActivationKind::gelu_tanh},
                                                  {FUSEDIFF_ACT_SIGMOID, ActivationKind::sigmoid},
                                                  {FUSEDIFF_ACT_TANH, ActivationKind::tanh},
                                                  {FUSEDIFF_ACT_SILU, ActivationKind::silu},
                                                  {FUSEDIFF_ACT_ELU, ActivationKind::elu},
                                                  {FUSEDIFF_ACT_SOFTPLUS, ActivationKind::softplus},
                                                  {FUSEDIFF_ACT_MISH, ActivationKind::mish}}};
constexpr Table<TableKind, 3> kTableKinds{{{FUSEDIFF_TABLE_LUT, TableKind::lut},
                                           {FUSEDIFF_TABLE_LUT_INTERP, TableKind::lut_interp},
                                           {FUSEDIFF_TABLE_PWL, TableKind::pwl}}};
constexpr Table<Producer, 2> kProducers{{{FUSEDIFF_PRODUCER_CONV2D, Producer::conv2d},
                                         {FUSEDIFF_PRODUCER_FULLY_CONNECTED, Producer::fully_connected}}};
constexpr Table<ConvOp, 2> kConvOps{{{FUSEDIFF_OP_CONV2D, ConvOp::conv2d},
                                     {FUSEDIFF_OP_CONV_TRANSPOSE2D, ConvOp::conv_transpose2d}}};
constexpr Table<WeightRange, 2> kWeightRanges{{{FUSEDIFF_WEIGHTS_SYMMETRIC, WeightRange::symmetric},
                                               {FUSEDIFF_WEIGHTS_FULL, WeightRange::full}}};

static_assert(Matches(kScalarTypes), "fusediff_scalar_type != fusediff::ScalarType");
static_assert(Matches(kRoundings), "fusediff_rounding != fusediff::RoundingMode");
static_assert(Matches(kZeroPointOrders), "fusediff_zero_point_order != fusediff::ZeroPointOrder");
static_assert(Matches(kRequants), "fusediff_requant != fusediff::RequantVariant");
static_assert(Matches(kIntermediateKinds), "fusediff_intermediate_kind != fusediff::IntermediateKind");
static_assert(Matches(kPostOps), "fusediff_post_ops != fusediff::PostOpArithmetic");
static_assert(Matches(kActivations), "fusediff_activation != fusediff::ActivationKind");
static_assert(std::size(kAllActivations) == kActivations.size(), "an activation kind the ABI header lacks");
static_assert(Matches(kTableKinds), "fusediff_table_kind != fusediff::TableKind");
static_assert(Matches(kProducers), "fusediff_producer != fusediff::Producer");
static_assert(Matches(kConvOps), "fusediff_conv_op != fusediff::ConvOp");
static_assert(Matches(kWeightRanges), "fusediff_weight_range != fusediff::WeightRange");
// The sentinels sit outside every enum's values.
static_assert(FUSEDIFF_GRAPH < 0 && FUSEDIFF_TABLE_NONE < 0, "sentinels must not collide with enum values");

template <typename E, size_t N>
E FromC(const Table<E, N>& table, int32_t v, const std::string& field, const char* what) {
  if (v < 0 || static_cast<size_t>(v) >= N) {
    throw InputError(field + ": " + std::to_string(v) + " is no " + what + " of fusediff_plugin.h (0 to " +
                     std::to_string(N - 1) + ")");
  }
  return table[static_cast<size_t>(v)].second;
}
}  // namespace

int32_t ToC(ScalarType v) { return static_cast<int32_t>(v); }
int32_t ToC(RoundingMode v) { return static_cast<int32_t>(v); }
int32_t ToC(ZeroPointOrder v) { return static_cast<int32_t>(v); }
int32_t ToC(RequantVariant v) { return static_cast<int32_t>(v); }
int32_t ToC(IntermediateKind v) { return static_cast<int32_t>(v); }
int32_t ToC(PostOpArithmetic v) { return static_cast<int32_t>(v); }
int32_t ToC(ActivationKind v) { return static_cast<int32_t>(v); }
int32_t ToC(TableKind v) { return static_cast<int32_t>(v); }
int32_t ToC(Producer v) { return static_cast<int32_t>(v); }
int32_t ToC(ConvOp v) { return static_cast<int32_t>(v); }
int32_t ToC(WeightRange v) { return static_cast<int32_t>(v); }

ScalarType ScalarTypeFromC(int32_t v, const std::string& f) { return FromC(kScalarTypes, v, f, "fusediff_scalar_type"); }
RoundingMode RoundingFromC(int32_t v, const std::string& f) { return FromC(kRoundings, v, f, "fusediff_rounding"); }
ZeroPointOrder ZeroPointOrderFromC(int32_t v, const std::string& f) {
  return FromC(kZeroPointOrders, v, f, "fusediff_zero_point_order");
}
RequantVariant RequantFromC(int32_t v, const std::string& f) { return FromC(kRequants, v, f, "fusediff_requant"); }
IntermediateKind IntermediateKindFromC(int32_t v, const std::string& f) {
  return FromC(kIntermediateKinds, v, f, "fusediff_intermediate_kind");
}
PostOpArithmetic PostOpsFromC(int32_t v, const std::string& f) { return FromC(kPostOps, v, f, "fusediff_post_ops"); }
ActivationKind ActivationFromC(int32_t v, const std::string& f) { return FromC(kActivations, v, f, "fusediff_activation"); }
TableKind TableKindFromC(int32_t v, const std::string& f) { return FromC(kTableKinds, v, f, "fusediff_table_kind"); }
Producer ProducerFromC(int32_t v, const std::string& f) { return FromC(kProducers, v, f, "fusediff_producer"); }
WeightRange WeightRangeFromC(int32_t v, const std::string& f) { return FromC(kWeightRanges, v, f, "fusediff_weight_range"); }

}  // namespace fusediff::fused::plugin
