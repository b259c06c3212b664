#pragma once
// The unfused graph's binary and window stages, each rounded by its declared rule (model/pattern.h AddRule,
// AvgPoolRule) from the rule's definition: exact integers and rationals, binary32 steps emulated exactly
// (reference.h Fl32*, and Fl32FusedMultiplyAdd below), never the host FPU's float arithmetic. Nothing here calls
// fused/. Errors are InputError (bad quantization, a code outside its type, a rule's precondition).
//
// Notation: a, b input codes with quantizations (sa, za), (sb, zb); o the output (so, zo), [qmin, qmax] its type.
// fl32(x) rounds an exact x to binary32 (nearest, ties to even); every arrow below is one such rounding.
//
// QuantizedAdd, by rule (sources: tensorflow/tensorflow and microsoft/onnxruntime, files named per rule):
//   tflite       TF lite/kernels/add.cc Prepare; lite/kernels/internal/reference/integer_ops/add.h AddFunc (int8),
//                reference/add.h AddElementwise (uint8, int16 general scale); common.h
//                MultiplyByQuantizedMultiplierSmallerThanOneExp; quantization_util.cc QuantizeMultiplier(...Exp).
//                a, b, o of one scalar type (TFLite requires it). left_shift L = 20 (8-bit) or 15 (int16).
//                Multipliers (binary64, as Prepare writes them): t = double(2 * max(sa, sb)) (the float product is
//                exact); Ma = sa / t, Mb = sb / t, Mo = t / double(2^L * so) (2^L * so formed in binary32, exact
//                unless it overflows), each QuantizeMultiplier'd to (m, e); Prepare refuses Mo >= 1 (and any
//                e > 0 after the multiplier's rounding): InputError.
//                x = (a - za) 2^L; xa = RDBPOT(SRDHM(x, ma), -ea), likewise xb; y = RDBPOT(SRDHM(xa + xb, mo), -eo);
//                code = sat(y + zo). SRDHM(p, m) = round(p m / 2^31) with ties toward +infinity (gemmlowp's nudge,
//                derived in stages.cpp); RDBPOT(v, s) = round(v / 2^s), ties away from zero. No int32 sum can
//                overflow: |x| < 2^31 and every multiplier <= 1/2.
//   onnx_spec    the exact real (sa (a - za) + sb (b - zb)) / so, rounded half to even, + zo, saturated. Any types.
//   ort_mlas     ORT onnxruntime/core/mlas/lib/qladd.cpp MlasQLinearAddKernelHelper (MLAS_SSE2_INTRINSICS), the
//                non-broadcast branch: ra = fl32(sa / so), rb = fl32(sb / so),
//                k = fl32(float(zo) - fl32(fl32(ra za) + fl32(rb zb))), y = fl32(fl32(k + fl32(ra a)) + fl32(rb b)).
//   ort_mlas_fma ORT onnxruntime/core/mlas/lib/intrinsics/avx2/qladd_avx2.cpp MlasQLinearAddKernelAvx2Helper: the
//                same ra, rb, k; y = fma(a, ra, fma(b, rb, k)) (two _mm256_fmadd_ps: b's term first, then a's).
//                k is modelled as written; that file is built with -mavx2 -mfma (cmake/onnxruntime_mlas.cmake), so
//                a compiler that contracts (GCC does by default in C++) may fuse ra za + rb zb into one FMA: not
//                verified against a released binary.
//                Both: r = cvtps2dq(y) (round half to even; |y| >= 2^31 gives the "integer indefinite" INT32_MIN),
//                then saturating packs (int32 -> int16 -> 8-bit): code = clamp(r, type's full range), then
//                clamped to o's range (narrow types). zo is already inside k.
//   ort_raw      ORT qladd.cpp MlasQLinearAddKernelRawHelper (MLAS's portable fallback, and what MLAS's int16
//                instantiation always runs): v = fl32(fl32(fl32(sa (a - za)) + fl32(sb (b - zb))) / so),
//                clamped to [float(lo - zo), float(hi - zo)] (lo, hi the full type's range),
//                code = nearbyint(fl32(v + zo)) (half to even).
//   binary32_unfused oneDNN 2.6's unfused add: src/cpu/x64/jit_uni_reorder.cpp (the dequantizing and quantizing
//                reorders: cvtdq2ps, vsubps src zero point, vmulps scale, vaddps dst zero point, saturate,
//                cvtps2dq), injectors/jit_uni_binary_injector.cpp (binary_add: vaddps):
//                va = fl32(sa fl32(a - za)), vb = fl32(sb fl32(b - zb)) (the differences exact), c = fl32(va + vb),
//                t = fl32(fl32(c fl32(1/so)) + zo), code = clamp(round half to even(t)). Any 8-bit types; every
//                scale in [2^-40, 2^40].
//   The ORT rules need a, b, o of one scalar type (as MLAS's templates do). int8/uint8 follow the helpers above;
//   int16 follows ort_raw under every ORT rule, because MlasQLinearAdd<int16_t> always runs the raw helper
//   (qladd.cpp; ORT's QLinearAdd kernel itself registers int8, uint8 and uint16 only, in
//   contrib_ops/cpu/quantization/qlinear_binary_op.cc). Every scale must lie in [2^-40, 2^40] so that no binary32
//   step overflows or underflows. Note that MLAS rounds y with zo inside it: at an exact tie with an odd zo it
//   rounds the other way from onnx_spec. The broadcast branches (a scalar b folded into k) are not modelled.
//
// QuantizedMul, by rule (model/pattern.h MulRule), P = (a - za)(b - zb) exact:
//   tflite       TF lite/kernels/mul.cc Prepare (real_multiplier = input1 scale * input2 scale / output scale, an
//                expression in float: M = fl32(fl32(sa sb) / so), then widened to double; QuantizeMultiplier to
//                (m, shift), shift may be positive); lite/kernels/internal/reference/integer_ops/mul.h
//                MulElementwise (BroadcastMul4DSlow for a broadcast b: the same expression per element);
//                common.h MultiplyByQuantizedMultiplier (the default double-rounding build):
//                y = RDBPOT(SRDHM(P 2^max(shift, 0), m), max(-shift, 0)); code = sat(y + zo). P 2^max(shift, 0) is
//                int32 in TFLite: a pair that overflows it is an InputError here. a, b, o of one 8-bit type.
//   onnx_spec    the exact real sa (a - za) sb (b - zb) / so, rounded half to even, + zo, saturated (ONNX
//                QLinearMul as DequantizeLinear, Mul, QuantizeLinear). Any types.
//
// AveragePool over the in-bounds taps of one window (padding never counted: n = taps.size(), 1 to 2^16), by rule:
//   tflite       TF lite/kernels/internal/reference/integer_ops/pooling.h AveragePool (int8, int16;
//                reference_ops::AveragePool for uint8 has the same expression): acc = sum of the raw codes,
//                acc > 0 ? (acc + n/2) / n : (acc - n/2) / n with C's truncating division, which is exactly
//                round(acc / n) with ties away from code 0 (not from the zero point), then clamped to o's range.
//                TFLite assumes the input and output quantization equal (TF lite/kernels/pooling.cc only
//                DCHECKs it): qi != qo is an InputError here.
//   ort_qlinear  ORT onnxruntime/contrib_ops/cpu/quantization/qlinear_pool.cc (dequantize_value, the
//                QLinearPool*Task loops, quantize_value) with core/providers/cpu/nn/pool_base.h AveragePool:
//                x_i = fl32(sx (q_i - zx)); s = 0, s = fl32(s + x_i) in tap order (row-major over the window, as
//                ORT's loops visit it); m = fl32(s / n); t = fl32(fl32(m / so) + zo); code = clamp(int32(nearbyint(t)),
//                type's full range) (|t| >= 2^31 converts to INT32_MIN, as x86's cvttss2si), then o's range.
//   ort_global   ORT contrib_ops/cpu/quantization/qlinear_global_average_pool.cc ComputeQLinearGlobalAvgPool ->
//                onnxruntime/core/mlas/lib/qlgavgpool.cpp MlasQLinearGlobalAveragePoolNchw (SSE2) ->
//                MlasRequantizeOutput (quantize.cpp, SSE2): acc = sum q_i - zx n (int32, wrapping);
//                M = fl32(sx / fl32(so n)) (CheckQLinearGlobalAveragePoolScaleAndSize: n < 2^24 and
//                M in [2^-32, 256), else InputError as ORT throws); f = fl32(fl32(acc) M) clamped to
//                [float(lo - zo), float(hi - zo)]; code = cvtps2dq(f) + zo (half to even).
//                ORT takes this kernel when the window covers the whole input without padding.
//   The ORT rules need 8-bit input and output of one scalar type (QLinearAveragePool is int8/uint8 only) and
//   every scale in [2^-40, 2^40].
//
// The tie distance of a result: |v - (k + 1/2)| for the nearest k, where v is the value the rule's last rounding
// step rounds, in units of that step (RequantTrace::tie_distance): 0 = exactly on a tie, 0.5 = farthest away.
// For a value clamped before it is rounded (ort_raw, ort_global) it is that of the clamped value.
#include <cstdint>
#include <span>

#include "fusediff/model/pattern.h"
#include "fusediff/model/quant.h"

namespace fusediff::reference {

struct StageRounding {
  int32_t code = 0;          // the output code: zero point added, saturated (clamped) to the output type
  int64_t unsaturated = 0;   // the rounded result with its zero point before any clamp or pack (|.| <= 2^62)
  bool saturated = false;    // a clamp or saturating pack changed the result (code != unsaturated)
  double tie_distance = 0.5; // see above
};

// ONNX QuantizeLinear of a binary32 value into `out`, from its definition: the exact quotient y / s_out rounded half
// to even, + z_out, saturated to the output type (+-infinity saturates; a NaN, which a one-pass variance below
// -eps makes, gives z_out and counts as saturated). tie_distance: |y / s_out - (k + 1/2)|.
StageRounding QuantizeLinearHalfEven(float y, const QuantParams& out);

// One element of a quantized add, s = a + b (b: the residual). See the rule table above.
StageRounding QuantizedAdd(AddRule rule, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                           const QuantParams& qo);

// One element of a quantized multiply, o = a * b (b: the stage's second input). See the rule table above.
StageRounding QuantizedMul(MulRule rule, int32_t a, const QuantParams& qa, int32_t b, const QuantParams& qb,
                           const QuantParams& qo);

// One window of an average pool: `taps` are its in-bounds input codes in row-major window order.
StageRounding AveragePool(AvgPoolRule rule, std::span<const int32_t> taps, const QuantParams& qi,
                          const QuantParams& qo);

// An add into an f32 intermediate (model/pattern.h, oneDNN 2.6's post-ops): v the binary32 value so far, r the
// residual code with quantization qr; returns d, binary32:
//   f32_one_rounding  d = fl32(v + sr (r - zr)): the exact value, one rounding (src/cpu/x64/
//                  jit_avx512_core_x8s8s32x_conv_kernel.cpp apply_sum, likewise the 1x1, brgemm and jit_uni int8
//                  kernels: cvt2ps(prev), vsubps(zr) (exact: |r - zr| < 2^17), vfmadd231ps with sr, or vaddps when
//                  sr = 1, which is the same rounding).
//   f32_two_roundings src1 = fl32(sr (r - zr)) (the caller's dequantized residual), d = fl32(v + src1)
//                  (injectors/jit_uni_binary_injector.cpp: uni_vaddps). Two roundings.
// Both need sr in [2^-40, 2^40] (InputError) and r inside qr's type.
float F32PostOpAdd(AddRule rule, float v, int32_t r, const QuantParams& qr);

// fl32(a * b + c): the exact product plus c, rounded once to binary32 (nearest, ties to even), as a fused
// multiply-add (FMA3 vfmadd, C's fmaf) computes it. Inputs must be finite (InputError); +-infinity on overflow.
float Fl32FusedMultiplyAdd(float a, float b, float c);

}  // namespace fusediff::reference
