// Replay strings written by earlier releases, as literals: each still parses to the same case and draw (printed
// back byte for byte) and replays to the same values (fusediff replay of main at 5305dda).
#include <gtest/gtest.h>

#include <string>

#include "fusediff/driver/driver.h"
#include "fusediff/model/case_spec.h"

namespace fusediff {
namespace {

struct ReplayLine {
  std::string text;
  int64_t acc_reference;
  int32_t u, y_reference, y_fused;
};

TEST(ReplayLines, V1AndV2LinesReplayTheSameDraw) {
  const ReplayLine lines[] = {
      // conv2d+act, a generated draw
      {"fusediff-replay/1;seed=1;sample=195;name=gelu_erf.int8.lut.conv;source=conv;act=gelu_erf;alpha=0;"
       "requant=double_rounding;u=int8:0.047058824:-1;u_round=half_away_from_zero;y=int8:0.024196079:-121;"
       "y_round=half_away_from_zero;zp_order=after_rounding;fused=lut;"
       "mix=knee:2/saturation:4/quant_boundary:2/bulk:1;mutant=use-output-scale",
       109323, 127, 127, 7},
      // conv2d+add+act, a generated draw
      {"fusediff-replay/1;seed=1;sample=21;name=conv2d+add+act.relu.tflite.keep_all;source=conv;act=relu;"
       "alpha=0;requant=double_rounding;u=int8:0.0627451:-1;u_round=half_away_from_zero;"
       "y=uint8:0.03137255:0;y_round=half_away_from_zero;zp_order=after_rounding;fused=lut;"
       "mix=knee:2/saturation:4/quant_boundary:2/bulk:1;pattern=conv2d+add+act;add=tflite;"
       "r=int8:0.03137255:-1;s=int8:0.0627451:-1;mutant=residual-output-scale",
       97781, 127, 130, 2},
      // an add stage's residual (res=)
      {"fusediff-replay/2;name=mutant.residual-output-scale.0;source=conv;act=tanh;alpha=0;"
       "requant=f32_half_even;u=int8:0.01179269:127;u_round=half_to_even;y=int8:0.015459798:-67;"
       "y_round=half_to_even;zp_order=before_rounding;fused=lut;"
       "mix=knee:2/saturation:4/quant_boundary:2/bulk:1;pattern=conv2d+add+act;add=onnx_spec;"
       "r=int8:0.007845008:122;s=int8:0.050516333:-51;mutant=residual-output-scale;"
       "shape=1:1:1:1:1:1:1:1:1:1:1:0:0:0:0;xq=int8:0.0029915615:-39;ws=0.011189613;w=66;b=-13948;x=-58;"
       "element=0;res=36",
       -15202, 84, -120, -128},
      // a second layer folded (fws=, fw=, fb=)
      {"fusediff-replay/2;name=mutant.fc-fold-first-layer-scale.0;source=conv;act=hard_swish;alpha=0;"
       "requant=f32_half_even;u=int8:0.07796529:-48;u_round=half_to_even;y=int8:0.014946075:-94;"
       "y_round=half_up;zp_order=after_rounding;fused=lut;mix=knee:2/saturation:4/quant_boundary:2/bulk:1;"
       "pattern=fc+fc;mult=double_product;fc_out=int8:0.10585479:-57;fc_n=1;fc_ref=declared_fold;"
       "fusion=fold;mutant=fc-fold-first-layer-scale;shape=1:1:1:1:7:1:1:1:1:1:1:0:0:0:0;"
       "xq=uint8:0.008560852:132;"
       "ws=0.020029511:0.028232865:0.027680492:0.021520378:0.02708602:0.023225429:0.018045105;"
       "w=-77:-112:-89:-112:-110:-16:22;b=-4850:-2106:65839:26388:-2695:-3219:86068;x=223;element=0;"
       "fws=0.0056875804;fw=83:34:-7:114:61:86:-113;fb=7071",
       -25090, -125, -125, -113},
      // BatchNorm operands (bng=, bnb=, bnm=, bnv=)
      {"fusediff-replay/2;name=mutant.bn-drop-eps.0;source=conv;act=tanh;alpha=0;requant=f32_half_even;"
       "u=uint8:0.029047973:145;u_round=half_to_even;y=int8:0.004202115:99;y_round=half_to_even;"
       "zp_order=after_rounding;fused=lut;mix=knee:2/saturation:4/quant_boundary:2/bulk:1;"
       "pattern=conv2d+batchnorm+act;bn_eps=1e-05;bn_regime=tiny_variance;"
       "bn_fold=f32/ort/per_channel/half_to_even/saturate/rne/saturate;bn_ref=declared_fold;fusion=fold;"
       "mutant=bn-drop-eps;shape=1:1:1:1:1:1:1:1:1:1:1:0:0:0:0;xq=uint8:0.002518495:128;ws=0.00013248622;"
       "w=-88;b=-15966;x=224;element=0;bng=1.3651562;bnb=3.591127;bnm=0.008575241;bnv=8.840379e-06",
       -24414, 145, -122, -128},
      // a second layer after an activation
      {"fusediff-replay/2;name=mutant.fold-across-activation.0;source=conv;act=softplus;alpha=0;"
       "requant=double_rounding;u=int8:0.064358965:-7;u_round=half_away_from_zero;y=int8:0.025376966:-128;"
       "y_round=half_to_even;zp_order=after_rounding;fused=lut;"
       "mix=knee:2/saturation:4/quant_boundary:2/bulk:1;pattern=fc+act+fc;mult=double_product;"
       "fc_out=int8:0.022518111:52;fc_n=1;mutant=fold-across-activation;"
       "shape=1:1:1:1:16:1:1:1:1:1:1:0:0:0:0;xq=uint8:0.3927535:0;"
       "ws=0.00051157235:0.00042740876:0.000347761:0.00051898847:0.0002767216:0.00038826276:0.00037635898:0."
       "00038217957:0.0003381231:0.00043888445:0.0004889441:0.00039930196:0.00030453855:0.00032890384:0.00033410848:0."
       "00046376316;"
       "w=-70:89:-98:-127:109:-100:-74:-6:85:-107:36:12:-77:-127:-117:85;"
       "b=53:4918:-35203:-16866:10640:64440:-79354:19882:-52551:10074:57418:-100585:17489:95585:47271:28398;"
       "x=225;element=0;fws=0.0012734687;fw=-43:39:26:56:-80:76:31:5:-90:113:-111:80:-58:19:-38:-120;"
       "fb=-7761",
       -53366, -25, -25, -128},
  };
  for (const ReplayLine& line : lines) {
    const ReplayKey key = parse_replay(line.text);
    EXPECT_EQ(format_replay(key), line.text);
    EXPECT_EQ(key.explicit_conv.has_value(), line.text.starts_with("fusediff-replay/2;")) << line.text;
    const ReplayTrace trace = driver::Replay(key);
    EXPECT_EQ(trace.acc_reference, line.acc_reference) << line.text;
    EXPECT_EQ(trace.u, line.u) << line.text;
    EXPECT_EQ(trace.y_reference, line.y_reference) << line.text;
    EXPECT_EQ(trace.y_fused, line.y_fused) << line.text;
  }
}

}  // namespace
}  // namespace fusediff
