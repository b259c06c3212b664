# oneDNN's tests (included by tests/CMakeLists.txt, in its scope: its functions and CMAKE_CURRENT_SOURCE_DIR, tests/):
# the onednn_tests suite, the CLI runs of the oneDNN backend under ISA caps, and the standalone reproductions.
if(NOT FUSEDIFF_WITH_ONEDNN)
  return()
endif()
fusediff_add_test_suite(onednn_tests onednn fusediff::fused_onednn fusediff::cli fusediff::driver fusediff::reports
                        fusediff::reference fusediff::tables fusediff::generators DNNL::dnnl)
# No test assumes the host's ISA: one that needs a oneDNN kernel caps oneDNN to its ISA (DNNL_MAX_CPU_ISA) and is
# skipped, by the line naming the ISA oneDNN dispatched to, where this CPU cannot reach it.
set(fusediff_dispatch_below_vnni "oneDNN [^\n]* dispatched to (sse41|avx|avx2|avx2_vnni|avx512_core) \\(")
# Below bf16 the cases' own reason, naming the ISA, also skips (where every case is unsupported no dispatch line
# prints; a failing test's output is wrapped at spaces).
set(fusediff_dispatch_below_bf16 "oneDNN [^\n]* dispatched to (sse41|avx|avx2|avx2_vnni|avx512_core|avx512_core_vnni) \\(|dispatches[ \n]+to[ \n]+(sse41|avx|avx2|avx2_vnni|avx512_core|avx512_core_vnni)[ \n]+here,[ \n]+which[ \n]+has[ \n]+no[ \n]+native[ \n]+bf16")
fusediff_add_cli_test(onednn_three_comparisons 0 "1 cross-convention measurements"
                      run --fused onednn --activation gelu_erf --samples 3000)
# The default run means something (issue 12): the deconvolution defect is counted as the ledger's known defect
# and the run exits 0; without the ledger the same draws fail (one gelu_erf draw meets its conditions under
# opad:negative_pad, in each of its three cases; with formulations, relu6's no longer do at 40000 samples).
fusediff_add_cli_test(onednn_known_defect_does_not_fail 0
                      "known defect onednn-2.6-jit-deconv-output-padding-drops-last-column: [0-9]+ samples in 3 cases"
                      run --fused onednn --activation gelu_erf --samples 40000)
fusediff_add_cli_test(onednn_without_ledger_fails 1 "gelu_erf.int8.onednn.conv: FAIL: .*fusediff replay"
                      run --fused onednn --activation gelu_erf --samples 40000 --no-known-defects)
set_tests_properties(cli.onednn_known_defect_does_not_fail cli.onednn_without_ledger_fails PROPERTIES
                     ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI" SKIP_REGULAR_EXPRESSION "${fusediff_dispatch_below_vnni}")
# The standalone reproductions (docs/repro) build with the project; the deconvolution one asserts the defect's
# signature (exit 0 while oneDNN has it, 1 once fixed: then update the ledger and docs/onednn.md). Each selects
# the kernel it shows (AVX512_CORE_VNNI unless capped) and exits 77 (skipped) where this CPU cannot reach one.
add_executable(onednn_deconv_repro ${PROJECT_SOURCE_DIR}/docs/repro/onednn_deconv_output_padding.cpp)
target_link_libraries(onednn_deconv_repro PRIVATE DNNL::dnnl)
add_executable(onednn_pre_vnni_probe ${PROJECT_SOURCE_DIR}/docs/repro/onednn_pre_vnni_int8.cpp)
target_link_libraries(onednn_pre_vnni_probe PRIVATE DNNL::dnnl)
# Below VNNI every int8 implementation family follows its documented rule on random draws, with VNNI the exact sum
# (docs/onednn.md, "Without VNNI: documented behaviour"); skipped where this CPU cannot reach the cap.
foreach(isa SSE41 AVX2 AVX512_CORE AVX512_CORE_VNNI)
  add_test(NAME onednn.pre_vnni_rules.${isa} COMMAND onednn_pre_vnni_probe rules)
  set_tests_properties(onednn.pre_vnni_rules.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}"
                       PASS_REGULAR_EXPRESSION "every draw follows its documented rule" SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
# jit_uni_deconv reads the columns its register blocks schedule (docs/onednn.md): the minimal draw on AVX2's
# kernel (selected unless capped; 77, skipped, without it).
add_executable(onednn_uni_deconv_repro ${PROJECT_SOURCE_DIR}/docs/repro/onednn_uni_deconv_columns.cpp)
target_link_libraries(onednn_uni_deconv_repro PRIVATE DNNL::dnnl)
add_test(NAME onednn.uni_deconv_columns_repro_shows_the_defect COMMAND onednn_uni_deconv_repro)
set_tests_properties(onednn.uni_deconv_columns_repro_shows_the_defect PROPERTIES
                     PASS_REGULAR_EXPRESSION "defect: the last block reads input column iw" SKIP_RETURN_CODE 77 TIMEOUT 60)
add_test(NAME onednn.deconv_repro_shows_the_defect COMMAND onednn_deconv_repro)
set_tests_properties(onednn.deconv_repro_shows_the_defect PROPERTIES PASS_REGULAR_EXPRESSION
                     "defect: the taps of input column 0 are dropped" SKIP_RETURN_CODE 77 TIMEOUT 60)
# oneDNN 2.6.3's int8 jit deconvolution reads weights past its buffer on rows no kernel row reaches (u8 source
# without a source zero point, stride_h > kh; docs/onednn.md "Stride-hole rows read past the weights"): exit 0 and
# the signature while oneDNN has it, 1 once fixed (then update the ledger and docs/onednn.md), 77 (skipped) where
# the CPU has no jit int8 deconvolution.
add_executable(onednn_deconv_stride_hole_repro ${PROJECT_SOURCE_DIR}/docs/repro/onednn_deconv_stride_hole.cpp)
target_link_libraries(onednn_deconv_stride_hole_repro PRIVATE DNNL::dnnl)
add_test(NAME onednn.deconv_stride_hole_repro_shows_the_defect COMMAND onednn_deconv_stride_hole_repro)
set_tests_properties(onednn.deconv_stride_hole_repro_shows_the_defect PROPERTIES
                     PASS_REGULAR_EXPRESSION "defect: the row no kernel row reaches adds a kernel row read past the weights"
                     SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "skipped: implementation" TIMEOUT 60)
# The same two draws on the AMX kernels (jit_deconvolution:avx512_core_amx*): neither defect (skipped without AMX).
foreach(repro onednn_deconv_repro onednn_deconv_stride_hole_repro)
  add_test(NAME onednn.${repro}_amx COMMAND ${repro} amx)
  set_tests_properties(onednn.${repro}_amx PROPERTIES PASS_REGULAR_EXPRESSION "correct: the defect is absent here"
                       SKIP_RETURN_CODE 77 TIMEOUT 60)
endforeach()
# oneDNN 2.6.3's brgconv (avx512_core_vnni) dies with SIGSEGV on an output row whose taps all lie in the padding when
# the post-ops hold a sum and an eltwise and it keeps no accumulation buffer (docs/onednn.md, "brgconv: an empty
# kernel range crashes"): the repro runs the draw in a forked child; exit 0 and the signature while oneDNN has it, 1
# once fixed (then update the ledger and docs/onednn.md), 77 (skipped) where the CPU reaches no brgconv (below
# AVX512_CORE_VNNI). `near`: the near misses run, exactly the marked draws crash.
add_executable(onednn_brgconv_repro ${PROJECT_SOURCE_DIR}/docs/repro/onednn_brgconv_empty_kernel_range.cpp)
target_link_libraries(onednn_brgconv_repro PRIVATE DNNL::dnnl)
foreach(isa AVX512_CORE_VNNI AVX512_CORE_BF16)
  add_test(NAME onednn.brgconv_empty_kernel_range_repro.${isa} COMMAND onednn_brgconv_repro)
  set_tests_properties(onednn.brgconv_empty_kernel_range_repro.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}"
                       PASS_REGULAR_EXPRESSION "SIGSEGV: the defect is here" SKIP_RETURN_CODE 77
                       SKIP_REGULAR_EXPRESSION "skipped: implementation" TIMEOUT 60)
endforeach()
# Below VNNI oneDNN has no int8 brgconv: the same draw runs on jit_int8 / jit_uni_int8 (the repro says so, exit 77).
foreach(isa AVX512_CORE AVX2)
  add_test(NAME onednn.brgconv_empty_kernel_range_repro.${isa} COMMAND onednn_brgconv_repro)
  set_tests_properties(onednn.brgconv_empty_kernel_range_repro.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}"
                       PASS_REGULAR_EXPRESSION "minimal draw: [^\n]*: ok[^\n]*\nskipped: implementation (jit_int8|jit_uni_int8):"
                       TIMEOUT 60)
endforeach()
add_test(NAME onednn.brgconv_empty_kernel_range_near_misses COMMAND onednn_brgconv_repro near)
set_tests_properties(onednn.brgconv_empty_kernel_range_near_misses PROPERTIES PASS_REGULAR_EXPRESSION
                     "near misses: as expected" SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "skipped: implementation"
                     TIMEOUT 120)
# The harness never runs that draw: seed 30's gelu_erf conv2d+add+act draw (sample 18055, brgconv:avx512_core_vnni,
# one thread) is withheld and counted as the ledger's known defect, the run exits 0; without the ledger the case
# fails naming the crash (never a SIGSEGV, never "unsupported").
fusediff_add_cli_test(onednn_brgconv_crash_is_a_known_defect 0
                      "known defect onednn-2.6-brgconv-empty-kernel-range-crashes: 96 samples in 2 cases not executed"
                      run --seed 30 --fused onednn --pattern conv2d+add+act --activation gelu_erf --samples 20000 --threads 1)
fusediff_add_cli_test(onednn_brgconv_crash_without_ledger_fails 1
                      "FAIL: 48 samples not executed: oneDNN 2.6 brgconv dies with SIGSEGV .*first: sample 18055"
                      run --seed 30 --fused onednn --pattern conv2d+add+act --activation gelu_erf --samples 20000 --threads 1
                      --no-known-defects)
set_tests_properties(cli.onednn_brgconv_crash_is_a_known_defect cli.onednn_brgconv_crash_without_ledger_fails PROPERTIES
                     ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI;OMP_NUM_THREADS=1"
                     SKIP_REGULAR_EXPRESSION "${fusediff_dispatch_below_vnni}")
fusediff_add_cli_test(bad_ledger_exits_2 2 "bad_known_defects.json: defects.0..draw.registers: expected an integer"
                      run --fused onednn --activation relu --samples 100
                      --known-defects ${CMAKE_CURRENT_SOURCE_DIR}/onednn/data/bad_known_defects.json)
# The binary32 post-op rule bit for bit under every ISA cap (docs/onednn.md, "Exact binary32 post-ops"): the
# probes' accumulators are exact on pre-VNNI kernels too. A cap above the CPU's ISA leaves the dispatch as it is.
foreach(isa AVX512_CORE_VNNI AVX512_CORE AVX2 SSE41)
  add_test(NAME onednn.binary32_postops.${isa}
           COMMAND onednn_tests --gtest_filter=OneDnnBinary32PostOps.Fused*:OneDnnBinary32PostOps.Eltwise*)
  set_tests_properties(onednn.binary32_postops.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 120)
endforeach()
# The stride-hole defect over fusediff's owned weights tail, equal to the ledger's model on every ISA cap
# (docs/onednn.md, "Known-defect ledger"); weights in [-62, 62] keep the pre-VNNI kernels exact.
foreach(isa AVX512_CORE_VNNI AVX512_CORE AVX2 SSE41)
  add_test(NAME onednn.stride_hole.${isa} COMMAND onednn_tests --gtest_filter=OneDnnStrideHole.*)
  set_tests_properties(onednn.stride_hole.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 120)
endforeach()
# Every ISA cap (docs/onednn.md, "Without VNNI: documented behaviour"): the ledger explains every relu sample that
# differs, by value, and documented behaviour appears exactly below VNNI; skipped where the CPU cannot reach the cap.
foreach(isa SSE41 AVX2 AVX2_VNNI AVX512_CORE AVX512_CORE_VNNI AVX512_CORE_BF16 AVX512_CORE_AMX)
  add_test(NAME onednn.pre_vnni.${isa} COMMAND onednn_tests --gtest_filter=OneDnnPreVnni.*)
  set_tests_properties(onednn.pre_vnni.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 300
                       SKIP_REGULAR_EXPRESSION "is not reachable on this CPU")
endforeach()
# jit_uni_deconv's column schedule (docs/onednn.md) against the library over a geometry sweep, per ISA it runs at.
foreach(isa SSE41 AVX2 AVX2_VNNI)
  add_test(NAME onednn.uni_deconv_columns.${isa} COMMAND onednn_tests --gtest_filter=OneDnnUniDeconvColumns.*)
  set_tests_properties(onednn.uni_deconv_columns.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}"
                       TIMEOUT 300 SKIP_REGULAR_EXPRESSION "is not reachable on this CPU")
endforeach()
fusediff_add_cli_test(onednn_says_why_unsupported 0 "no hardsigmoid eltwise algorithm"
                      run --fused onednn --activation hard_sigmoid)
# oneDNN's float convolutions (docs/onednn.md, "bf16 convolutions"): the exact-sum draws pass at tolerance 0 on
# oneDNN's AVX512_BF16 kernels (skipped below them); capped below them the cases are unsupported, saying why.
fusediff_add_cli_test(onednn_float_conv_exact_sum 0 "4 passed, 0 failed, 0 unsupported; 4 cases"
                      run --fused onednn --activation relu --float-conv bf16:pow2 --samples 3000)
set_tests_properties(cli.onednn_float_conv_exact_sum PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE_BF16"
                     SKIP_REGULAR_EXPRESSION "${fusediff_dispatch_below_bf16}")
add_test(NAME cli.onednn_float_conv_unsupported_without_bf16
         COMMAND fusediff run --fused onednn --activation relu --float-conv bf16:pow2 --samples 300)
set_tests_properties(cli.onednn_float_conv_unsupported_without_bf16 PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE"
                     PASS_REGULAR_EXPRESSION "4 unsupported.*no native bf16 dot product|no native bf16 dot product.*4 unsupported")
# Below VNNI the same draws meet oneDNN's documented int8 arithmetic (u8 x s8 pairs saturate in vpmaddubsw's
# int16 sums, s8 sources get halved weights): counted and listed as documented behaviour, not failing; --strict
# fails it. AVX2 reaches sse41 kernels on a CPU without AVX2, which behave the same.
fusediff_add_cli_test(onednn_without_vnni_is_documented 0
                      "documented behaviour onednn-2.6-pre-vnni-jit-[a-z0-9-]+: [0-9]+ samples in [0-9]+ cases [^\n]*, not failing.*[0-9]+ documented behaviour \\(not failing\\)"
                      run --fused onednn --activation relu --samples 3000)
fusediff_add_cli_test(onednn_without_vnni_strict_fails 1 "relu.int8.onednn.conv: FAIL: documented behaviour: .*failing under --strict"
                      run --fused onednn --activation relu --samples 3000 --strict)
set_tests_properties(cli.onednn_without_vnni_is_documented cli.onednn_without_vnni_strict_fails PROPERTIES
                     ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX2")
# The same finding as a command: one process per cap, side by side, with the verdicts per cap.
fusediff_add_cli_test(isa_matrix 0 "SSE41 \\(sse41\\): 0 pass, [1-9][0-9]* documented_behaviour, [0-9]+ known_defect, 0 fail"
                      run --fused onednn --activation gelu_erf --samples 3000 --isa SSE41,AVX2)
# LayerNorm's declared summation orders (docs/summation-orders.md) bit for bit, per implementation, under every cap:
# the jit kernel from AVX2 up, the C++ kernel below it, lnorm_ref (column-major rows) everywhere.
foreach(isa SSE41 AVX AVX2 AVX512_CORE AVX512_CORE_AMX)
  add_test(NAME onednn.layer_norm_order.${isa} COMMAND onednn_tests --gtest_filter=OneDnnLayerNormOrder.*)
  set_tests_properties(onednn.layer_norm_order.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 120)
endforeach()
# oneDNN's bf16 layer norm (docs/summation-orders.md, "bf16") bit for bit under its declared order and output rule,
# both implementations, under each cap: below AVX512_CORE oneDNN has none (the support test says so, the others skip
# naming the ISA); AVX512_CORE stores y by the emulated conversion, AVX512_CORE_BF16 by vcvtneps2bf16.
foreach(isa AVX2 AVX512_CORE AVX512_CORE_BF16)
  add_test(NAME onednn.layer_norm_bf16.${isa} COMMAND onednn_tests --gtest_filter=OneDnnLayerNormBf16.*)
  set_tests_properties(onednn.layer_norm_bf16.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 300)
endforeach()
# The graph with bf16 boundaries around the layer norm as a fused path (--fused onednn, .int8.onednn.bf16): passes at
# tolerance 0 where oneDNN offers bf16 (AVX512_CORE: the emulated conversion keeps subnormals; AVX512_CORE_BF16:
# vcvtneps2bf16 flushes them, declared per ISA), unsupported at AVX2; the f32 graph on the same draws differs.
foreach(isa AVX2 AVX512_CORE AVX512_CORE_BF16)
  add_test(NAME onednn.layer_norm_bf16_path.${isa} COMMAND onednn_tests --gtest_filter=OneDnnLayerNormBf16Path.*)
  set_tests_properties(onednn.layer_norm_bf16_path.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 300)
endforeach()
# The ISA-dependent bf16 store of a binary32 subnormal (docs/repro/onednn_bf16_subnormal_store.cpp): kept by the
# emulation at AVX512_CORE, flushed by vcvtneps2bf16 at AVX512_CORE_BF16 (skipped where the CPU has no avx512_bf16,
# and, 77, below AVX512_CORE).
add_executable(onednn_bf16_subnormal_store_repro ${PROJECT_SOURCE_DIR}/docs/repro/onednn_bf16_subnormal_store.cpp)
target_link_libraries(onednn_bf16_subnormal_store_repro PRIVATE DNNL::dnnl)
add_test(NAME onednn.bf16_subnormal_store_repro.AVX512_CORE COMMAND onednn_bf16_subnormal_store_repro)
set_tests_properties(onednn.bf16_subnormal_store_repro.AVX512_CORE PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE"
                     PASS_REGULAR_EXPRESSION "kept: " SKIP_RETURN_CODE 77 TIMEOUT 60)
add_test(NAME onednn.bf16_subnormal_store_repro.AVX512_CORE_BF16 COMMAND onednn_bf16_subnormal_store_repro)
set_tests_properties(onednn.bf16_subnormal_store_repro.AVX512_CORE_BF16 PROPERTIES
                     ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE_BF16" PASS_REGULAR_EXPRESSION "flushed: "
                     SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "${fusediff_dispatch_below_bf16}" TIMEOUT 60)
# The strided int8 1x1 convolution's workspace race at avx2 (docs/onednn.md, "The strided int8 1x1 convolution races
# below AVX-512"): two threads, the avx2 kernel on any CPU that reaches it.
add_executable(onednn_rtus_int8_tail_race_repro ${PROJECT_SOURCE_DIR}/docs/repro/onednn_rtus_int8_tail_race.cpp)
target_link_libraries(onednn_rtus_int8_tail_race_repro PRIVATE DNNL::dnnl)
add_test(NAME onednn.rtus_int8_tail_race_repro.AVX2 COMMAND onednn_rtus_int8_tail_race_repro)
set_tests_properties(onednn.rtus_int8_tail_race_repro.AVX2 PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX2;OMP_NUM_THREADS=2"
                     PASS_REGULAR_EXPRESSION "defect: " SKIP_RETURN_CODE 77 TIMEOUT 120)
# oneDNN's layer norm in fc+layernorm+act and fc+add+layernorm (docs/onednn.md, "Layer normalization"): the
# same-convention cases, declared in the order oneDNN dispatches to, at tolerance 0 under every cap; ONNX Runtime's
# order against it within the reordering bound (r <= 1).
foreach(isa SSE41 AVX AVX2 AVX512_CORE AVX512_CORE_AMX)
  add_test(NAME onednn.layernorm_chains.${isa} COMMAND onednn_tests --gtest_filter=OneDnnLayerNorm.*)
  set_tests_properties(onednn.layernorm_chains.${isa} PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa}" TIMEOUT 300)
endforeach()
# The same cases end to end: oneDNN's layer norm chain of fc+add+layernorm passes at tolerance 0, fused, unfused and
# with the graph's bf16 boundaries (the bf16 primitive) and as the float layernorm (f32 y the output), and ONNX
# Runtime's order against it is a measurement.
fusediff_add_cli_test(onednn_layernorm_chains 0 "4 passed, 0 failed, 0 unsupported, 1 cross-convention measurements"
                      run --fused onednn --pattern fc+add+layernorm --samples 3000)
set_tests_properties(cli.onednn_layernorm_chains PROPERTIES ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI"
                     SKIP_REGULAR_EXPRESSION "${fusediff_dispatch_below_vnni}")
