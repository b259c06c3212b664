// fusediff's built-in LUT kernel (fused::FusedKernel, table kind lut) behind the plugin ABI: what bench/plugin_abi_cost
// compares with the same kernel called directly, so that the difference is the ABI's cost (case encoding, batches,
// the C draw structs, the call) and nothing else. The draw's ConvCase is rebuilt per draw: the kernel takes one.
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/fused/plugin_case.h"
#include "fusediff/plugin/fusediff_plugin.h"

namespace {
using namespace fusediff;

struct Instance {
  std::unique_ptr<fused::FusedKernel> kernel;
};

void Say(fusediff_message* m, const std::string& text) {
  if (m && m->text && m->capacity > 0) std::snprintf(m->text, m->capacity, "%s", text.c_str());
}

ConvCase ConvOf(const fusediff_draw& d) {
  const size_t weights = static_cast<size_t>(d.weight_count);
  const size_t k = static_cast<size_t>(d.output_channels);
  ConvCase conv;
  conv.op(d.op == FUSEDIFF_OP_CONV_TRANSPOSE2D ? ConvOp::conv_transpose2d : ConvOp::conv2d)
      .batch(d.batch)
      .input_size(d.input_height, d.input_width)
      .input_channels(d.input_channels)
      .output_channels(d.output_channels)
      .kernel_size(d.kernel_height, d.kernel_width)
      .stride(d.stride_height, d.stride_width)
      .dilation(d.dilation_height, d.dilation_width)
      .padding(d.padding_top, d.padding_left, d.padding_bottom, d.padding_right)
      .output_padding(d.output_padding_height, d.output_padding_width)
      .input_quant(QuantParams{QuantType{d.input.type == FUSEDIFF_UINT8 ? ScalarType::uint8 : ScalarType::int8, false},
                               d.input.scale, d.input.zero_point})
      .weight_scales(std::vector<float>(d.weight_scales, d.weight_scales + k))
      .weights(std::vector<int8_t>(d.weights, d.weights + weights))
      .bias(std::vector<int32_t>(d.bias, d.bias + k));
  return conv;
}

const char* const kFeatures[] = {"producer:conv2d", "stage:act", "table:lut"};

void* Create(const fusediff_option*, uint32_t, fusediff_message*) { return new (std::nothrow) Instance(); }
void Destroy(void* self) { delete static_cast<Instance*>(self); }
int32_t Declare(void*, fusediff_declaration* d) {
  d->weight_range = FUSEDIFF_WEIGHTS_SYMMETRIC;
  d->threading = FUSEDIFF_THREADING_SHARED;  // FusedKernel::Run is const
  d->preferred_batch = 64;
  d->transposed = 1;  // the kernel computes ConvTranspose2D draws too, as the built-in path does
  return FUSEDIFF_OK;
}
int32_t Prepare(void* self, const fusediff_case* c, fusediff_message* m) {
  try {  // no exception crosses the boundary
    const Convention convention = fused::plugin::ConventionOf(fused::plugin::PluginCaseFromC(*c));
    std::string why;
    static_cast<Instance*>(self)->kernel = fused::FusedKernel::Create(convention, TableKind::lut, Mutant::none, &why);
    if (!static_cast<Instance*>(self)->kernel) {
      Say(m, why);
      return FUSEDIFF_REJECTED;
    }
    return FUSEDIFF_OK;
  } catch (const std::exception& e) {
    Say(m, e.what());
    return FUSEDIFF_ERROR;
  }
}
int32_t Run(void* self, fusediff_batch* batch) {
  try {
    const fused::FusedKernel& kernel = *static_cast<Instance*>(self)->kernel;
    for (uint32_t i = 0; i < batch->draw_count; ++i) {
      fusediff_draw& d = *reinterpret_cast<fusediff_draw*>(reinterpret_cast<char*>(batch->draws) +
                                                           size_t{i} * batch->draws[0].struct_size);
      kernel.Run(ConvOf(d), std::span<const int32_t>(d.input_codes, d.input_count), std::span<int32_t>(d.y, d.y_count));
      d.status = FUSEDIFF_OK;
    }
    return FUSEDIFF_OK;
  } catch (const std::exception&) {
    return FUSEDIFF_ERROR;
  }
}

const fusediff_plugin_api kApi = {sizeof(fusediff_plugin_api), FUSEDIFF_PLUGIN_ABI_MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR,
                                  "builtin_lut", "1", kFeatures, 3, Create, Destroy, Declare, Prepare, Run};
}  // namespace

extern "C" FUSEDIFF_PLUGIN_EXPORT const fusediff_plugin_api* fusediff_plugin_entry(const fusediff_host* host) {
  return fusediff_host_offers(host, FUSEDIFF_PLUGIN_ABI_MINOR) ? &kApi : nullptr;
}
