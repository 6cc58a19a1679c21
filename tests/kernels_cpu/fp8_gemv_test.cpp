#include "hymoe/kernels/fp8_gemv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/common/cpu_features.h"
#include "hymoe/common/error.h"
#include "hymoe/kernels/fp8_special_codes.h"
#include "gemv_variants.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

using test::RandomFp8Matrix;

class PerIsa : public ::testing::TestWithParam<Isa> {};

std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

using test::GemvVariant;
using test::gemv_variants;
class PerGemvVariant : public ::testing::TestWithParam<GemvVariant> {};
std::string gemv_variant_name(const ::testing::TestParamInfo<GemvVariant>& info) {
  return info.param.name();
}

TEST_P(PerIsa, DecodesEveryFp8CodeExactly) {
  // Every code, at every position of a vector (so every lane of every variant sees it), plus a
  // ragged length to exercise the tails.
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 3; ++rep)
    for (int c = 0; c < 256; ++c) codes.push_back(static_cast<uint8_t>((c * 37 + rep) & 0xFF));
  codes.resize(codes.size() - 5);
  std::vector<uint16_t> out(codes.size(), 0xFFFF);
  fp8_to_bf16(GetParam(), codes.data(), out.data(), codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    const float want = fp8_e4m3_to_float(codes[i]);
    const float got = bf16_to_float(out[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << int(codes[i]);
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << "code 0x" << std::hex << int(codes[i]) << " got " << got << " want " << want;
    }
  }
}

struct Shape {
  int64_t rows, cols;
};

TEST_P(PerGemvVariant, GemvMatchesReferenceOnRandomInputs) {
  std::mt19937_64 rng = test::make_rng();
  // 40 x 9000 at batch 8 is past the AVX512-BF16 variant's lane-order copy of x (8 x 9024 words >
  // kGemvLaneOrderWords), so its natural-order path runs too; batch <= 7 takes the copy.
  const Shape shapes[] = {{256, 512}, {300, 1000}, {128, 7168}, {7168 / 8, 2048}, {37, 96}, {5, 33}, {40, 9000}};
  for (const Shape& s : shapes) {
    RandomFp8Matrix w(s.rows, s.cols, rng);
    for (int batch = 1; batch <= kMaxGemvBatch; ++batch) {
      const int64_t xs = s.cols + 16, ys = s.rows + 8;
      auto x = test::random_bf16(static_cast<size_t>(batch * xs), rng);
      auto scale = test::random_f32(batch, rng, 0.1f, 1.0f);
      auto y = test::nan_vector(static_cast<size_t>(batch * ys));
      auto ref = test::nan_vector(y.size());
      auto p = Fp8GemvParams::strided(w.view, batch, x.data(), xs, y.data(), ys);
      if (batch % 2) std::copy(scale.begin(), scale.end(), p.out_scale);
      validate(p);
      GetParam().run(p);
      for (int b = 0; b < batch; ++b) p.y[b] = ref.data() + b * ys;
      fp8_gemv_reference(p);
      for (int b = 0; b < batch; ++b) {
        const double err = test::normalised_error(y.data() + b * ys, ref.data() + b * ys,
                                                  static_cast<size_t>(s.rows));
        EXPECT_LT(err, 1e-5) << s.rows << "x" << s.cols << " batch " << batch << " row " << b;
        // Padding between batch rows stays poisoned.
        EXPECT_TRUE(std::isnan(y[b * ys + s.rows]));
      }
    }
  }
}

TEST_P(PerGemvVariant, GemvComputesOnlyItsRowRange) {
  std::mt19937_64 rng = test::make_rng();
  RandomFp8Matrix w(512, 384, rng);
  auto x = test::random_bf16(2 * 384, rng);
  auto y = test::nan_vector(2 * 512);
  auto ref = test::nan_vector(2 * 512);
  auto p = Fp8GemvParams::strided(w.view, 2, x.data(), 384, y.data(), 512);
  p.row_begin = 131;
  p.row_end = 389;
  GetParam().run(p);
  p.y[0] = ref.data();
  p.y[1] = ref.data() + 512;
  fp8_gemv_reference(p);
  for (int b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 512; ++i) {
      if (i < 131 || i >= 389) {
        EXPECT_TRUE(std::isnan(y[b * 512 + i])) << i;
      }
    }
    EXPECT_LT(test::normalised_error(y.data() + b * 512 + 131, ref.data() + b * 512 + 131, 389 - 131), 1e-5);
  }
}

TEST_P(PerGemvVariant, GemvHandlesSubnormalWeights) {
  // A BF16 dot product that flushed the subnormal FP8 codes would give zeros here.
  std::mt19937_64 rng = test::make_rng();
  RandomFp8Matrix w(128, 1024, rng, /*subnormal_only=*/true);
  auto x = test::random_bf16(1024, rng);
  auto y = test::nan_vector(128), ref = test::nan_vector(128);
  auto p = Fp8GemvParams::strided(w.view, 1, x.data(), 1024, y.data(), 128);
  GetParam().run(p);
  p.y[0] = ref.data();
  fp8_gemv_reference(p);
  EXPECT_LT(test::normalised_error(y.data(), ref.data(), 128), 1e-5);
}

// NaN codes (0x7F, 0xFF) give NaN rows in every variant (the shift decode by its correction),
// and only those rows.
TEST_P(PerGemvVariant, GemvPropagatesNanCodes) {
  std::mt19937_64 rng = test::make_rng();
  RandomFp8Matrix w(64, 700, rng);
  w.data[5 * 700 + 3] = 0x7F;
  w.data[40 * 700 + 699] = 0xFF;
  auto x = test::random_bf16(700, rng);
  auto y = test::nan_vector(64);
  auto p = Fp8GemvParams::strided(w.view, 1, x.data(), 700, y.data(), 64);
  GetParam().run(p);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(std::isnan(y[i]), i == 5 || i == 40) << "row " << i;
}

INSTANTIATE_TEST_SUITE_P(Cpu, PerIsa, ::testing::ValuesIn(supported_isas().begin(), supported_isas().end()),
                         isa_param_name);
INSTANTIATE_TEST_SUITE_P(Cpu, PerGemvVariant, ::testing::ValuesIn(gemv_variants()), gemv_variant_name);

TEST(Fp8Gemv, ValidateNamesTheBadField) {
  std::mt19937_64 rng(1);
  RandomFp8Matrix w(128, 128, rng);
  auto x = test::random_bf16(128 * 9, rng);
  auto y = test::nan_vector(128 * 9);
  auto p = Fp8GemvParams::strided(w.view, 8, x.data(), 128, y.data(), 128);
  p.batch = 9;
  try {
    validate(p);
    FAIL() << "batch 9 accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("batch 9"), std::string::npos) << e.message();
  }
  p.batch = 1;
  p.row_end = 129;
  EXPECT_THROW(validate(p), Error);
  // Special codes of another shape (a caller pairing the wrong index with a weight).
  p.row_end = 128;
  RandomFp8Matrix other(64, 128, rng);
  const Fp8SpecialCodes wrong = find_fp8_special_codes(other.view);
  p.w.specials = &wrong;
  try {
    validate(p);
    FAIL() << "special codes of 64 rows accepted for 128";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("special codes of 64 rows"), std::string::npos) << e.message();
  }
  const Fp8SpecialCodes right = find_fp8_special_codes(w.view);
  p.w.specials = &right;
  EXPECT_NO_THROW(validate(p));
}

TEST(Fp8Gemv, EveryVariantThisMachineHasIsTested) {
  // The issue asks for every variant where the CPU can run it; on AVX512-BF16 machines that is all.
  if (isa_supported(Isa::kAvx512Bf16)) {
    EXPECT_EQ(supported_isas().size(), 4u);
  }
  EXPECT_EQ(supported_isas().front(), Isa::kScalar);
}

TEST(Isa, Avx512Bf16VariantNeedsVbmiFromCpuFeatures) {
  // The BF16 decode is byte permutes: the variant follows cpu_features(), so the debug mask can
  // take it away (ctest runs this binary once more with HYMOE_CPU_FEATURES_MASK=avx512_vbmi).
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(isa_supported(Isa::kAvx512Bf16), f.avx512() && f.avx512_bf16 && f.avx512_vbmi);
  const char* mask = std::getenv("HYMOE_CPU_FEATURES_MASK");
  if (mask && std::string_view(mask).find("avx512_vbmi") != std::string_view::npos) {
    EXPECT_FALSE(f.avx512_vbmi);
    EXPECT_FALSE(isa_supported(Isa::kAvx512Bf16));
    EXPECT_NE(best_isa(), Isa::kAvx512Bf16);
  }
}

}  // namespace
}  // namespace hymoe::kernels
