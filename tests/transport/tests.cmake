# The subprocess protocol (docs/plugins.md, "Subprocess protocol"): frames, the child supervisor, the transports,
# and the lost draws' verdicts through the reports.
fusediff_add_test_suite(transport_tests transport fusediff::plugin_protocol fusediff::reports)
