#pragma once
// Internal to the driver: the exact reference's y_ref tables, built once per activation_table_key and shared by
// every case or search draw with that key. Bounded: past 64 tables the cache starts over (a search that draws a
// new convention per draw would otherwise keep every table). A returned reference stays valid until the next get.
#include <map>
#include <memory>
#include <string>

#include "fusediff/driver/driver.h"
#include "fusediff/model/case_spec.h"
#include "fusediff/reference/reference.h"

namespace fusediff::driver {

class TableCache {
 public:
  const reference::ActivationTable& get(const Convention& c) {
    const std::string key = activation_table_key(c);
    auto it = tables_.find(key);
    if (it == tables_.end()) {
      if (tables_.size() >= 64) tables_.clear();
      it = tables_.emplace(key, std::make_unique<reference::ActivationTable>(c)).first;
    }
    return *it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<reference::ActivationTable>> tables_;
};

// The driver's public cache is this one (canonical.cpp reads it too).
struct ReferenceCache::Impl : TableCache {};

}  // namespace fusediff::driver
