#include <openssl/evp.h>

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "fusediff/reports/reports.h"

namespace fusediff::reports {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed (OpenSSL EVP_Digest)");
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string CaseSampleSetId(uint64_t seed, const CaseSpec& spec) {
  // effective_samples: a sweep runs every code whatever was requested, so only what actually runs counts.
  return Sha256Hex(fmt::format("fusediff-sample-set/1;seed={};{};mutant={};samples={}", seed, canonical_key(spec),
                               to_string(spec.mutant), effective_samples(spec)));
}

std::string SampleSetId(const RunResult& run) {
  std::string text = fmt::format("fusediff-run-sample-set/1;seed={}", run.seed);
  for (const CaseResult& c : run.cases) text += ";" + CaseSampleSetId(run.seed, c.spec);
  return Sha256Hex(text);
}

}  // namespace fusediff::reports
