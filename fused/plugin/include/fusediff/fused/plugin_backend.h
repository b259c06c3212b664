#pragma once
// The plugin backend module: a user's kernel under test, reached through a transport (plugin_transport.h). Its path
// words carry the plugin's address: "plugin:PATH.so[,key=value...]" runs the library in process (the C ABI,
// fusediff_plugin.h). docs/plugins.md is the contract.
#include "fusediff/model/backend.h"

namespace fusediff::fused::plugin {

const Backend& PluginBackend();

}  // namespace fusediff::fused::plugin
