#pragma once
// The subprocess protocol's messages as frames (plugin_frame.h; docs/plugins.md, "Subprocess protocol"). Each
// request has one reply:
//   hello    -> hello      versions and what the plugin is (name, version, abi, features)
//   prepare  -> prepared   the case (PluginCase's JSON, "case") -> the declaration ("declaration"), or rejected
//   run      -> result     a batch of draws (fusediff_draw's fields; tensors as arrays) -> outputs and statuses
//   bye      -> (none)     the child exits
// Any request may be answered {"type": "error", "message": ...}: the plugin cannot go on (exit 2 for the run).
// The JSON field names are the C header's (fusediff_plugin.h). A batch travels as a few arrays, whatever its size:
// the draws' int32 scalars as one table ("scalars", its "columns" named in the header), each tensor's values end to
// end with "NAME.offsets" ("input_codes", "operands.1.codes"), and the outputs as one array "y" (protocol 2; the
// JSON object per draw of protocol 1 cost more than the draws' own work).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fusediff/fused/plugin_frame.h"
#include "fusediff/model/fused_path.h"
#include "fusediff/model/pattern.h"

namespace fusediff::fused::plugin {

inline constexpr int kProtocolVersion = 2;

// A reply that breaks the protocol (wrong type, a missing field, a count that does not match the request): what
// the other side sent and what was expected.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// run: the batch's draws, with y_count (the number of outputs expected back) for each.
Frame EncodeRun(std::span<const PatternDraw> draws, std::span<const size_t> y_counts);
// The draws of a run message and their y_count (plugin-host's side, the offline answers).
std::vector<PatternDraw> DecodeRun(const Frame& run, std::vector<size_t>* y_counts);

// result: the batch's outputs as one array "y" (draw i's y[i].size() values after draw i - 1's, a rejected draw's
// slots included), the rejected draws with their reasons, and the implementation (one name, or one per draw).
Frame EncodeResult(std::span<const std::span<int32_t>> y, std::span<const DrawOutcome> outcomes);
// Fills y[i] and outcomes[i] from a result for a batch of y.size() draws; ProtocolError for a reply that does not
// answer exactly that batch.
void DecodeResult(const Frame& result, std::span<const std::span<int32_t>> y, std::span<DrawOutcome> outcomes);

// A reply of the expected type, or ProtocolError (an "error" reply: its message).
void ExpectReply(const Frame& reply, const std::string& type, const std::string& request);

// A digest of one draw's encoding (FNV-1a 64 of its fields and tensors, 16 hex digits): the offline mode matches
// answers to draws by it, so that the order, sharding and replay of draws do not matter.
std::string DrawDigest(const PatternDraw& draw);

}  // namespace fusediff::fused::plugin
