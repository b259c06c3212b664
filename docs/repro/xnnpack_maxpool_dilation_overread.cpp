// Standalone reproduction: XNNPACK's max pooling with dilation > 1 reads past its input buffer (Debian
// libxnnpack-dev 0.0~git20220216.ae108ef, upstream commit ae108ef49aa5623b896fc93d4298c49d1750d9ba). Plain C++ against
// xnnpack.h; no fusediff code (docs/xnnpack.md, "Max pooling with dilation reads past its input").
//
// Cause (src/indirection.c:274-311, xnn_indirection_init_maxpool2d): with any dilation the indirection buffer
// replaces an out-of-range tap row input_y (>= input_height, unsigned; :288-291) by
//   safe_input_y = output_y * stride_height - (padding_top % dilation_height)        (:278, :282-286; + dilation_height
//                                                                                    when that would be negative)
// and likewise a column by output_x * stride_width - (padding_left % dilation_width) (:279, :295-304), assuming that row
// lies inside the input. It is the window's tap ky = padding_top / dilation_height, which is past the input when the
// window starts low enough: output_y * stride_height - (padding_top % dilation_height) >= input_height. That happens
// whenever the padding reaches the dilated window (padding_top + padding_bottom >= (pooling_height - 1) *
// dilation_height + 1 + padding_top % dilation_height), also on windows that have in-bounds taps. The pointer
// (input_y * input_width + input_x) * pixel_stride (:307) then lies past the image: past the buffer on the last
// image. The kernels (u8_maxpool_9p8x__sse2_c16 here) read every pointer and take the maximum. Without dilation the
// taps are clamped to the border instead (:313-322), which stays inside. src/operators/max-pooling-nhwc.c
// (create_max_pooling2d_nhwc, :47-191) puts no bound on the padding; setup calls the indirection at :285.
//
// The minimal case: u8, one image 4 x 4 x 16 channels, a 2 x 1 window with dilation 2 x 1, stride 1, padding top 2,
// bottom 1. Output row 4 has taps at input rows 2 (in bounds) and 4 (past the last row 3): XNNPACK replaces row 4 by
// safe_input_y = 4 * 1 - 2 % 2 = 4, one row past the image, 0-63 bytes past the 256-byte buffer; it should output
// row 2 (its one in-bounds tap; a padding tap never wins a max pool).
//
// Two runs of the same operator:
//   poison: the buffer is followed by 256 bytes of 0xFF (the inputs are all below 100): output row 4 is 255 where the
//           library reads past the end, row 2's maximum where it does not.
//   guard:  the buffer (plus the 16 bytes XNNPACK may read past any input, XNN_EXTRA_BYTES, xnnpack.h:22-25) ends
//           where a PROT_NONE page begins; run in a forked child: SIGSEGV where the library reads past the slack.
//
// Build and run (Debian libxnnpack-dev; xnnpack.h includes <pthreadpool.h>, which Debian does not ship: the
// one-line typedef in fused/xnnpack/private/ is enough):
//   g++ -std=c++17 -O1 -ffp-contract=off -Ifused/xnnpack/private
//       docs/repro/xnnpack_maxpool_dilation_overread.cpp -lXNNPACK -o maxpool_overread && ./maxpool_overread
// Expected output (exit 0 while XNNPACK has the defect, 1 once it reads inside the buffer, 2 on an XNNPACK error):
//   poison: output row 4 = 255 in 64 of 64 elements, row 2's value in 0 (expected: row 2's value, at most 98)
//   guard: the child died with SIGSEGV reading past the input's slack
//   defect: max pooling with dilation reads input row 4 of a 4-row image, past the buffer
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xnnpack.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kH = 4, kW = 4, kC = 16, kOutH = 5, kOutW = 4;
constexpr size_t kBytes = kH * kW * kC;  // 256

// Runs the pool on `input` (kBytes codes) into `output` (kOutH * kOutW * kC); false on an XNNPACK error.
bool RunPool(const uint8_t* input, uint8_t* output) {
  xnn_operator_t op = nullptr;
  // padding top 2, right 0, bottom 1, left 0; window 2 x 1; stride 1 x 1; dilation 2 x 1.
  if (xnn_create_max_pooling2d_nhwc_u8(2, 0, 1, 0, 2, 1, 1, 1, 2, 1, kC, kC, kC, 0, 255, 0, &op) != xnn_status_success)
    return false;
  const bool ok = xnn_setup_max_pooling2d_nhwc_u8(op, 1, kH, kW, input, output, nullptr) == xnn_status_success &&
                  xnn_run_operator(op, nullptr) == xnn_status_success;
  xnn_delete_operator(op);
  return ok;
}

uint8_t Code(size_t i) { return static_cast<uint8_t>((i * 37) % 100); }  // every input code below 100

// Output row 4 against the maximum of its one in-bounds tap, input row 2. True when every element reads 0xFF.
bool PoisonShows() {
  std::vector<uint8_t> buffer(kBytes + 256, 0xFF);
  for (size_t i = 0; i < kBytes; ++i) buffer[i] = Code(i);
  std::vector<uint8_t> output(kOutH * kOutW * kC + XNN_EXTRA_BYTES, 0);
  if (!RunPool(buffer.data(), output.data())) {
    std::printf("XNNPACK error\n");
    std::exit(2);
  }
  size_t poisoned = 0, expected = 0;
  uint8_t row2_max = 0;
  for (size_t x = 0; x < kOutW; ++x) {
    for (size_t c = 0; c < kC; ++c) {
      const uint8_t want = buffer[(2 * kW + x) * kC + c];
      const uint8_t got = output[(4 * kOutW + x) * kC + c];
      row2_max = std::max(row2_max, want);
      poisoned += got == 0xFF;
      expected += got == want;
    }
  }
  std::printf("poison: output row 4 = 255 in %zu of %zu elements, row 2's value in %zu (expected: row 2's value, "
              "at most %u)\n",
              poisoned, kOutW * kC, expected, row2_max);
  return poisoned == kOutW * kC;
}

// The buffer and its 16 slack bytes end at a PROT_NONE page; the pool runs in a child. True on SIGSEGV.
bool GuardShows() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* base = static_cast<uint8_t*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (base == MAP_FAILED || mprotect(base + page, page, PROT_NONE) != 0) {
    std::printf("mmap/mprotect failed\n");
    std::exit(2);
  }
  uint8_t* input = base + page - XNN_EXTRA_BYTES - kBytes;
  for (size_t i = 0; i < kBytes; ++i) input[i] = Code(i);
  const pid_t child = fork();
  if (child == 0) {
    std::vector<uint8_t> output(kOutH * kOutW * kC + XNN_EXTRA_BYTES, 0);
    _exit(RunPool(input, output.data()) ? 0 : 2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const bool segv = WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
  if (segv) {
    std::printf("guard: the child died with SIGSEGV reading past the input's slack\n");
  } else {
    std::printf("guard: the child exited with status %d (no read past the slack)\n",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return segv;
}

}  // namespace

int main() {
  if (xnn_initialize(nullptr) != xnn_status_success) {
    std::printf("XNNPACK error: xnn_initialize\n");
    return 2;
  }
  const bool poison = PoisonShows();
  const bool guard = GuardShows();
  if (poison && guard) {
    std::printf("defect: max pooling with dilation reads input row 4 of a 4-row image, past the buffer\n");
    return 0;
  }
  std::printf("correct: the defect is absent here (poison %s, guard %s)\n", poison ? "shown" : "not shown",
              guard ? "shown" : "not shown");
  return 1;
}
