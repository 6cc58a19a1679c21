#include "hymoe/kernels/fp8_special_codes.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

TEST(Fp8SpecialCodes, ShiftDecodeIsTheValueTimes256ExceptForTheSpecialCodes) {
  int special = 0;
  for (int i = 0; i < 256; ++i) {
    const auto c = static_cast<uint8_t>(i);
    const bool exp0 = (c & 0x78) == 0, nan = (c & 0x7F) == 0x7F;
    EXPECT_EQ(is_fp8_shift_special(c), exp0 || nan) << i;
    special += is_fp8_shift_special(c);
    const float shifted = bf16_to_float(fp8_shift_decode_bits(c));
    if (!is_fp8_shift_special(c)) {
      // Exact: every normal FP8 value times 2^8 is a BF16 value.
      EXPECT_EQ(shifted, fp8_e4m3_to_float(c) * 256.0f) << "code " << i;
      EXPECT_EQ(fp8_shift_correction(c), 0.0f) << i;
    } else if (nan) {
      EXPECT_TRUE(std::isnan(fp8_shift_correction(c))) << i;
    } else {
      // The correction restores the exact value (subnormals and zeros, both signs).
      EXPECT_EQ(shifted / 256.0f + fp8_shift_correction(c), fp8_e4m3_to_float(c)) << i;
      EXPECT_FALSE(std::isnan(shifted)) << i;
    }
  }
  EXPECT_EQ(special, 2 * 8 + 2);  // 8 exponent-0 codes per sign, 2 NaNs
}

TEST(Fp8SpecialCodes, FinderMatchesTheByteByByteReference) {
  std::mt19937_64 rng = test::make_rng();
  // Ragged widths (tails of 1..7 bytes past whole words), rows of every kind.
  for (const int64_t cols : {1, 7, 8, 9, 100, 1000, 2051}) {
    test::RandomFp8Matrix w(13, cols, rng);
    // A few rows with no special code at all, and one made only of them.
    for (int64_t j = 0; j < cols; ++j) {
      for (const int64_t i : {2, 3}) w.data[i * cols + j] = static_cast<uint8_t>(0x40 | (j & 0x87));
      w.data[7 * cols + j] = static_cast<uint8_t>(j % 3 == 0 ? 0x7F : j % 3 == 1 ? 0x80 : 0x05);
    }
    const Fp8SpecialCodes got = find_fp8_special_codes(w.view);
    const Fp8SpecialCodes want = find_fp8_special_codes_reference(w.view);
    EXPECT_EQ(got.row_start, want.row_start) << cols;
    EXPECT_EQ(got.col, want.col) << cols;
    EXPECT_EQ(got.code, want.code) << cols;
    ASSERT_EQ(want.row_start.size(), 14u);
    EXPECT_EQ(want.row_start[3] - want.row_start[2], 0u);
    EXPECT_EQ(int64_t{want.row_start[8] - want.row_start[7]}, cols);
    for (size_t k = 0; k < want.count(); ++k) EXPECT_TRUE(is_fp8_shift_special(want.code[k]));
  }
}

}  // namespace
}  // namespace hymoe::kernels
