# The subprocess protocol (docs/plugins.md, "Subprocess protocol"): frames, the child supervisor, the transports.
fusediff_add_test_suite(transport_tests transport fusediff::plugin_protocol)
