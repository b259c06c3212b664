// The first divergent boundary of a bisect step (bisect.h, FindDivergence). Practitioners debug a fusion by dumping
// the tensors at its boundaries; marking every tensor as an output (Polygraphy's way) prevents the very fusions under
// study. Here only tensors both optimized graphs hold are fetched, and only where fetching them leaves the step's
// optimized graph as it was.
#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "fusediff/bisect/bisect.h"
#include "fusediff/model/errors.h"
#include "memory_file.h"

namespace fusediff::bisect {

namespace {

using Results = std::vector<std::vector<onnx_io::Tensor>>;

// Where the model with extra outputs is written for ONNX Runtime to read: a MemoryFile rewritten for each session,
// else the request's scratch file.
class ScratchModel {
 public:
  explicit ScratchModel(const std::string& fallback) : memory_("fusediff-divergence-model"), fallback_(fallback) {}
  void Write(const std::string& bytes) {
    if (memory_.valid()) {
      memory_.Write(bytes);
    } else {
      std::ofstream(fallback_, std::ios::binary | std::ios::trunc) << bytes;
    }
  }
  const std::string& path() const { return memory_.valid() ? memory_.path() : fallback_; }

 private:
  MemoryFile memory_;
  std::string fallback_;
};

class Search {
 public:
  explicit Search(const DivergenceRequest& q) : q_(q), scratch_(q.scratch) {}

  // The model with `extra` as outputs, written to the scratch path; the step's session on it. Whether the step's
  // optimized graph stayed as it was (then its results are kept in `results_`).
  bool Unchanged(const std::vector<std::string>& extra) {
    if (sessions_ >= q_.max_sessions) return false;
    ++sessions_;
    WriteModel(extra);
    fused::ort::SessionSpec spec = q_.step;
    spec.model = scratch_.path();
    uint64_t digest = 0;
    const Results& r = q_.run(spec, digest);
    if (digest != q_.step_digest) return false;
    results_ = r;
    kept_ = extra;
    return true;
  }

  // The largest fetchable subset found by halving: a set whose fetching changes the graph is split, and the halves'
  // fetchable parts are tried together (the larger half alone where together they change it again).
  std::vector<std::string> Fetchable(const std::vector<std::string>& c) {
    if (c.empty() || Unchanged(c)) return c;
    if (c.size() == 1 || sessions_ >= q_.max_sessions) return {};
    const auto mid = c.begin() + static_cast<std::ptrdiff_t>(c.size() / 2);
    std::vector<std::string> left = Fetchable({c.begin(), mid}), right = Fetchable({mid, c.end()});
    std::vector<std::string> both = left;
    both.insert(both.end(), right.begin(), right.end());
    if (both.empty() || both == kept_ || Unchanged(both)) return both;
    return left.size() >= right.size() ? left : right;
  }

  void WriteModel(const std::vector<std::string>& extra) {
    scratch_.Write(onnx_io::WithExtraOutputs(q_.model_bytes, extra, q_.model->path));
  }

  // The kept tensors' step results, re-run where the last session tried was another set.
  Results StepResults(const std::vector<std::string>& kept) {
    if (kept_ != kept || results_.empty()) Unchanged(kept);
    return results_;
  }

  Results BaselineResults(const std::vector<std::string>& kept) {
    ++sessions_;
    WriteModel(kept);
    fused::ort::SessionSpec spec = q_.baseline;
    spec.model = scratch_.path();
    uint64_t digest = 0;
    return q_.run(spec, digest);
  }

  int sessions() const { return sessions_; }

 private:
  const DivergenceRequest& q_;
  ScratchModel scratch_;
  int sessions_ = 0;
  Results results_;
  std::vector<std::string> kept_;
};

// The model's outputs followed by the fetched tensors, typed as ONNX Runtime returned them.
onnx_io::ModelInfo Extended(const DivergenceRequest& q, const std::vector<std::string>& kept, const Results& results) {
  onnx_io::ModelInfo m = *q.model;
  const auto quants = onnx_io::TensorQuants(q.model_bytes, kept, q.model->path);
  for (size_t k = 0; k < kept.size(); ++k) {
    const onnx_io::Tensor& t = results.front().at(q.model->outputs.size() + k);
    m.outputs.push_back({kept[k], t.type, t.dims});
    m.output_quant.push_back(quants[k]);
  }
  return m;
}

// The bounds of every extended output, from the request's (none where it has none for a tensor).
std::vector<OutputBound> BoundsOf(const DivergenceRequest& q, const onnx_io::ModelInfo& m) {
  std::vector<OutputBound> bounds;
  for (const auto& o : m.outputs) {
    const auto it = q.bounds != nullptr ? q.bounds->find(o.name) : decltype(q.bounds->end()){};
    if (q.bounds != nullptr && it != q.bounds->end()) {
      bounds.push_back(it->second);
    } else {
      bounds.push_back(OutputBound{{}, {}, "no bound was computed for it"});
    }
  }
  return bounds;
}

// Paths from `from` to each model output it reaches, over the model's graph: tensor, op, tensor, ..., output.
std::vector<std::vector<std::string>> PathsToOutputs(const onnx_io::GraphContent& g, const std::string& from) {
  std::map<std::string, std::vector<const onnx_io::GraphNode*>> consumers;
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs) consumers[i].push_back(&n);
  }
  std::map<std::string, std::pair<std::string, std::string>> came_from;  // tensor -> (previous tensor, op)
  std::deque<std::string> queue{from};
  came_from[from] = {"", ""};
  while (!queue.empty()) {
    const std::string t = queue.front();
    queue.pop_front();
    for (const onnx_io::GraphNode* n : consumers[t]) {
      for (const auto& o : n->outputs) {
        if (o.empty() || came_from.count(o)) continue;
        came_from[o] = {t, n->op};
        queue.push_back(o);
      }
    }
  }
  std::vector<std::vector<std::string>> paths;
  for (const auto& out : g.outputs) {
    if (!came_from.count(out.name)) continue;
    std::vector<std::string> path{out.name};
    for (std::string t = out.name; t != from;) {
      const auto& [prev, op] = came_from.at(t);
      path.insert(path.begin(), {prev, op});
      t = prev;
    }
    paths.push_back(std::move(path));
  }
  return paths;
}

std::string ProducerOf(const onnx_io::GraphContent& g, const std::string& tensor) {
  for (const auto& n : g.nodes) {
    if (std::find(n.outputs.begin(), n.outputs.end(), tensor) != n.outputs.end()) return n.op;
  }
  return "";
}

// The first differing tensor: the fetched ones in the baseline's order, then the outputs.
void PickFirst(const DivergenceRequest& q, const std::vector<OutputDelta>& deltas, Divergence& d) {
  const size_t outputs = q.model->outputs.size();
  std::vector<size_t> order;
  for (size_t k = outputs; k < deltas.size(); ++k) order.push_back(k);
  for (size_t k = 0; k < outputs; ++k) order.push_back(k);
  for (size_t k : order) {
    if (deltas[k].differing == 0) continue;
    d.tensor = deltas[k].output;
    d.is_output = k < outputs;
    d.delta = deltas[k];
    d.producer = ProducerOf(*q.graph, d.tensor);
    d.paths = PathsToOutputs(*q.graph, d.tensor);
    return;
  }
}

}  // namespace

std::vector<std::string> BoundaryCandidates(const onnx_io::ModelInfo& model, const std::vector<std::string>& baseline,
                                            const std::vector<std::string>& step) {
  const std::set<std::string> in_step(step.begin(), step.end());
  std::set<std::string> outputs;
  for (const auto& o : model.outputs) outputs.insert(o.name);
  std::vector<std::string> out;
  for (const auto& t : baseline) {
    if (in_step.count(t) && !outputs.count(t) && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

Divergence FindDivergence(const DivergenceRequest& q) {
  Divergence d;
  const std::vector<std::string> candidates = BoundaryCandidates(*q.model, q.baseline_tensors, q.step_tensors);
  d.candidates = static_cast<int>(candidates.size());
  Search search(q);
  std::vector<std::string> kept;
  try {
    kept = search.Fetchable(candidates);
    for (const auto& c : candidates) {
      if (std::find(kept.begin(), kept.end(), c) == kept.end()) d.skipped.push_back(c);
    }
    if (candidates.empty()) d.note = "the two optimized graphs hold no tensor in common besides the inputs and outputs";
    if (!candidates.empty() && kept.empty()) d.note = "fetching any of them changes the step's optimized graph";
    const Results step = search.StepResults(kept);
    const Results base = search.BaselineResults(kept);
    const size_t want = q.model->outputs.size() + kept.size();
    if (step.empty() || step.front().size() != want || base.empty() || base.front().size() != want) {
      throw fused::ort::Refused("run", "a session returned another number of outputs than the " + std::to_string(want) +
                                           " asked for");
    }
    const onnx_io::ModelInfo m = Extended(q, kept, step);
    const Outputs b = DecodeOutputs(base, m.outputs.size()), s = DecodeOutputs(step, m.outputs.size());
    std::vector<OutputBound> bounds = BoundsOf(q, m);
    for (size_t o = 0; o < bounds.size(); ++o) {
      if (bounds[o].uncovered.empty() && bounds[o].baseline.size() != b.values[o].size()) {
        bounds[o] = OutputBound{{}, {}, "the evaluated shape differs from ONNX Runtime's tensor"};
      }
    }
    PickFirst(q, CompareOutputs(m, b, s, &bounds, q.criteria), d);
  } catch (const fused::ort::Refused& e) {
    d.note = "ONNX Runtime refused a session with the extra outputs: " + std::string(e.what());
  }
  d.fetched = static_cast<int>(kept.size());
  d.sessions = search.sessions();
  return d;
}

}  // namespace fusediff::bisect
