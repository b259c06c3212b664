// Fused kernels of stage kinds `maxpool` and `avgpool`: windows over the spatial grid, in-bounds taps only; the
// average by the pool rule's production kernel (stages.h AveragePoolKernel). Mutant avgpool-truncate is the
// truncating average (AveragePoolTruncating), selected once.
#include <algorithm>
#include <functional>

#include "fusediff/fused/stage_kernel.h"
#include "fusediff/fused/stages.h"

namespace fusediff::fused {
namespace {

using PoolFn = std::function<int32_t(std::span<const int32_t> taps)>;

class PoolKernel final : public StageKernel {
 public:
  PoolKernel(PoolWindow window, PoolFn pool) : window_(window), pool_(std::move(pool)) {}
  void Run(const StageOperands&, StageTensor& t) const override {
    StageTensor out;
    out.shape = t.shape;
    out.shape.height = pooled_extent(t.shape.height, window_);
    out.shape.width = pooled_extent(t.shape.width, window_);
    out.codes.resize(out.shape.elements());
    std::vector<int32_t> taps;
    size_t o = 0;
    for (int32_t b = 0; b < out.shape.batch; ++b) {
      for (int32_t py = 0; py < out.shape.height; ++py) {
        for (int32_t px = 0; px < out.shape.width; ++px) {
          for (int32_t ch = 0; ch < out.shape.channels; ++ch, ++o) {
            Gather(t, b, py, px, ch, taps);
            out.codes[o] = pool_(taps);
          }
        }
      }
    }
    t = std::move(out);
  }

 private:
  void Gather(const StageTensor& t, int32_t b, int32_t py, int32_t px, int32_t ch, std::vector<int32_t>& taps) const {
    taps.clear();
    for (int32_t ky = 0; ky < window_.kernel; ++ky) {
      const int32_t iy = py * window_.stride - window_.padding + ky;
      if (iy < 0 || iy >= t.shape.height) continue;
      for (int32_t kx = 0; kx < window_.kernel; ++kx) {
        const int32_t ix = px * window_.stride - window_.padding + kx;
        if (ix < 0 || ix >= t.shape.width) continue;
        taps.push_back(
            t.codes[((static_cast<size_t>(b) * t.shape.height + iy) * t.shape.width + ix) * t.shape.channels + ch]);
      }
    }
  }

  PoolWindow window_;
  PoolFn pool_;
};

int32_t MaxOf(std::span<const int32_t> taps) { return *std::max_element(taps.begin(), taps.end()); }

class PoolStage final : public FusedStage {
 public:
  explicit PoolStage(bool average) : average_(average) {}
  StageKind kind() const override { return average_ ? StageKind::avg_pool : StageKind::max_pool; }
  std::unique_ptr<StageKernel> Create(const CaseSpec& spec, const Stage& s, const QuantParams& in,
                                      std::string*) const override {
    if (!average_) return std::make_unique<PoolKernel>(s.window, MaxOf);
    if (spec.mutant == Mutant::avgpool_truncate) return std::make_unique<PoolKernel>(s.window, AveragePoolTruncating);
    return std::make_unique<PoolKernel>(s.window, AveragePoolKernel(s.pool_rule, in, s.out));
  }

 private:
  bool average_;
};

}  // namespace

std::unique_ptr<const FusedStage> MakePoolStage(bool average) { return std::make_unique<PoolStage>(average); }

}  // namespace fusediff::fused
