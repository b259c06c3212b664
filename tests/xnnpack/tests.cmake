# XNNPACK's tests (included by tests/CMakeLists.txt, in its scope): the xnnpack_tests suite and the CLI runs of the
# XNNPACK backend. No test assumes the host's ISA: every rule XNNPACK declares is the same on each x86 branch
# (docs/xnnpack.md, "Dispatch").
if(NOT FUSEDIFF_WITH_XNNPACK)
  return()
endif()
fusediff_add_test_suite(xnnpack_tests xnnpack fusediff::fused_xnnpack fusediff::reference fusediff::driver fusediff::cli
                        fusediff::reports)
# The module's internal operator calls (fused/xnnpack/src/xnnpack_ops.h), tested directly.
target_include_directories(xnnpack_tests PRIVATE ${PROJECT_SOURCE_DIR}/fused/xnnpack/src)
# Every same-convention case passes at tolerance 0 (the average pool with and without padding); the cross-convention
# ones are measurements.
fusediff_add_cli_test(xnnpack_same_convention_passes 0 "conv2d\\+act xnnpack: 10 passed, 10 cross-convention"
                      run --fused xnnpack --samples 3000)
fusediff_add_cli_test(xnnpack_fc_passes 0 "fc\\+act xnnpack: 10 passed, 10 cross-convention"
                      run --fused xnnpack --pattern fc+act --samples 2000)
fusediff_add_cli_test(xnnpack_unsupported_activation_is_listed 0 "no 8-bit operator for gelu_erf"
                      run --fused xnnpack --activation gelu_erf --samples 500)
fusediff_add_cli_test(xnnpack_add_passes 0 "conv2d\\+add\\+act xnnpack: 2 passed, 2 cross-convention"
                      run --fused xnnpack --pattern conv2d+add+act --activation sigmoid --samples 2000)
fusediff_add_cli_test(xnnpack_pools_pass 0 "conv2d\\+act\\+avgpool xnnpack: 2 passed, 2 cross-convention"
                      run --fused xnnpack --pattern conv2d+act+avgpool --activation relu --samples 2000)
# The standalone reproductions (docs/repro/xnnpack_*.cpp): plain C++ against xnnpack.h (and the one-line
# pthreadpool.h the module vendors), built with the project. Each prints its verdict; the test passes on the line
# that says XNNPACK behaves as the program shows (its exit status is 0 exactly then).
function(fusediff_xnnpack_repro name verdict)
  add_executable(xnnpack_${name} ${PROJECT_SOURCE_DIR}/docs/repro/xnnpack_${name}.cpp)
  target_include_directories(xnnpack_${name} PRIVATE ${PROJECT_SOURCE_DIR}/fused/xnnpack/private)
  target_link_libraries(xnnpack_${name} PRIVATE XNNPACK::XNNPACK)
  target_compile_options(xnnpack_${name} PRIVATE -ffp-contract=off -fno-fast-math)
  add_test(NAME xnnpack.repro.${name} COMMAND xnnpack_${name})
  set_tests_properties(xnnpack.repro.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${verdict}" TIMEOUT 120)
endfunction()
# Max pooling with dilation reads past its input (docs/xnnpack.md, "Max pooling with dilation reads past its input"):
# exit 0 and the signature while XNNPACK has the defect, 1 once fixed (then update docs/xnnpack.md).
fusediff_xnnpack_repro(maxpool_dilation_overread "defect: max pooling with dilation reads input row 4")
# The declared rules, each shown on XNNPACK's operators by a program that knows nothing of fusediff (docs/xnnpack.md,
# "Declared rules"): exit 0 and "rule holds" while XNNPACK computes them, 1 when an output differs.
fusediff_xnnpack_repro(requantization_rule "rule holds: y = clamp\\(rne\\(fl32\\(fl32\\(acc\\) s\\)\\) \\+ zo\\)")
fusediff_xnnpack_repro(table_rule "rule holds: [0-9]+/[0-9]+ table entries are the binary32 glibc lrintf rule")
fusediff_xnnpack_repro(add_multiply_rule "rule holds: [0-9]+/[0-9]+ add and multiply outputs")
fusediff_xnnpack_repro(pool_rules "rule holds: [0-9]+/[0-9]+ pooling outputs")
