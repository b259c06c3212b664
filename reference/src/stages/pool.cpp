// Reference of stage kinds `maxpool` and `avgpool`: windows over the spatial grid, in-bounds taps only (padding is
// never a candidate for the max, and counted in the average only by the rule that counts it, fixed_point_half_away:
// a padding tap is then the input's zero-point code, model/pattern.h). A max pool's element is the first window
// element holding the maximum; an average pool's keeps its first in-bounds tap's accumulator, the union of those
// taps' regions and its own rounding's (stages.h AveragePool).
#include <algorithm>

#include "fusediff/reference/stage_eval.h"
#include "fusediff/reference/stages.h"

namespace fusediff::reference {
namespace {

class PoolReference final : public ReferenceStage {
 public:
  explicit PoolReference(bool average) : average_(average) {}
  StageKind kind() const override { return average_ ? StageKind::avg_pool : StageKind::max_pool; }

  void Apply(const Stage& stage, const StageInputs& in, GraphTensor& t) const override {
    GraphTensor pooled;
    pooled.shape = t.shape;
    pooled.shape.height = pooled_extent(t.shape.height, stage.window);
    pooled.shape.width = pooled_extent(t.shape.width, stage.window);
    pooled.e.resize(pooled.shape.elements());
    Window w;
    for (int32_t n = 0; n < pooled.shape.batch; ++n) {
      for (int32_t py = 0; py < pooled.shape.height; ++py) {
        for (int32_t px = 0; px < pooled.shape.width; ++px) {
          for (int32_t ch = 0; ch < pooled.shape.channels; ++ch) {
            Gather(t, stage.window, n, py, px, ch, w);
            if (CountsPadding(stage)) w.taps.resize(WindowTaps(stage.window), in.in.zero_point);
            pooled.e[pooled.index(n, py, px, ch)] = Pool(stage, in.in, w);
          }
        }
      }
    }
    t = std::move(pooled);
  }

 private:
  struct Window {
    std::vector<int32_t> taps;
    std::vector<const GraphElement*> members;
  };

  bool CountsPadding(const Stage& stage) const {
    return average_ && stage.pool_rule == AvgPoolRule::fixed_point_half_away;
  }
  static size_t WindowTaps(const PoolWindow& pw) { return static_cast<size_t>(pw.kernel) * static_cast<size_t>(pw.kernel); }

  static void Gather(const GraphTensor& t, const PoolWindow& pw, int32_t n, int32_t py, int32_t px, int32_t ch,
                     Window& w) {
    w.taps.clear();
    w.members.clear();
    for (int32_t ky = 0; ky < pw.kernel; ++ky) {
      const int32_t iy = py * pw.stride - pw.padding + ky;
      if (iy < 0 || iy >= t.shape.height) continue;
      for (int32_t kx = 0; kx < pw.kernel; ++kx) {
        const int32_t ix = px * pw.stride - pw.padding + kx;
        if (ix < 0 || ix >= t.shape.width) continue;
        const GraphElement& member = t.e[t.index(n, iy, ix, ch)];
        w.taps.push_back(member.y);
        w.members.push_back(&member);
      }
    }
  }

  GraphElement Pool(const Stage& stage, const QuantParams& in, const Window& w) const {
    if (!average_) {
      const size_t arg = static_cast<size_t>(std::max_element(w.taps.begin(), w.taps.end()) - w.taps.begin());
      return *w.members[arg];
    }
    GraphElement out = *w.members.front();
    for (const GraphElement* m : w.members) out.regions |= m->regions;
    const StageRounding r = AveragePool(stage.pool_rule, w.taps, in, stage.out);
    out.regions |= RoundingRegions(r.saturated, r.tie_distance);
    out.y = r.code;
    return out;
  }

  bool average_;
};

}  // namespace

std::unique_ptr<const ReferenceStage> MakePoolReference(bool average) {
  return std::make_unique<PoolReference>(average);
}

}  // namespace fusediff::reference
