#include "hymoe/kernels/fp8_gemm.h"

#include <gtest/gtest.h>

#include "hymoe/common/error.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

std::vector<GemmImpl> runnable_impls() {
  std::vector<GemmImpl> v;
  for (GemmImpl i : {GemmImpl::kAvx512Bf16, GemmImpl::kAmxBf16})
    if (gemm_impl_supported(i)) v.push_back(i);
  return v;
}

class PerGemmImpl : public ::testing::TestWithParam<GemmImpl> {};

struct Case {
  int64_t m, n, k, n_begin, n_end;
};

TEST_P(PerGemmImpl, MatchesReferenceOnRandomInputs) {
  std::mt19937_64 rng = test::make_rng();
  const Case cases[] = {
      {1, 64, 128, 0, 64},       {7, 96, 256, 32, 96},      {33, 256, 384, 0, 256},
      {70, 200, 1000, 0, 200},   {300, 160, 512, 64, 160},  {64, 576, 7168, 0, 576},
      {45, 130, 96, 96, 130},    {9, 64, 40, 0, 64},        {13, 96, 192, 0, 96},
      // More rows than the AMX kernel's 1024-row chunk and more columns than its 128-column one
      // (chunk tails in both), with a K tail.
      {1100, 330, 200, 32, 330},
  };
  for (const Case& c : cases) {
    test::RandomFp8Matrix w(c.n, c.k, rng);
    const int64_t xs = c.k + 32, cs = c.n + 5;
    auto x = test::random_bf16(static_cast<size_t>(c.m * xs), rng);
    auto out = test::nan_vector(static_cast<size_t>(c.m * cs));
    auto ref = test::nan_vector(out.size());
    Fp8GemmParams p{w.view, x.data(), xs, c.m, out.data(), cs, c.n_begin, c.n_end};
    validate(p);
    fp8_gemm(GetParam(), p);
    p.c = ref.data();
    fp8_gemm(GemmImpl::kReference, p);
    double worst = 0.0;
    for (int64_t m = 0; m < c.m; ++m) {
      for (int64_t n = 0; n < cs; ++n) {
        const bool inside = n >= c.n_begin && n < c.n_end;
        if (!inside) {
          EXPECT_TRUE(std::isnan(out[m * cs + n])) << "wrote column " << n;
        }
      }
      worst = std::max(worst, test::normalised_error(out.data() + m * cs + c.n_begin,
                                                     ref.data() + m * cs + c.n_begin,
                                                     static_cast<size_t>(c.n_end - c.n_begin)));
    }
    EXPECT_LT(worst, 1e-5) << c.m << "x" << c.n << "x" << c.k;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, PerGemmImpl, ::testing::ValuesIn(runnable_impls()),
                         [](const ::testing::TestParamInfo<GemmImpl>& i) {
                           return std::string(gemm_impl_name(i.param)) == "amx-bf16"
                                      ? std::string("amx")
                                      : std::string(gemm_impl_name(i.param));
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PerGemmImpl);

TEST(Fp8Gemm, ValidateRejectsUnalignedColumns) {
  std::mt19937_64 rng(3);
  test::RandomFp8Matrix w(128, 128, rng);
  auto x = test::random_bf16(128, rng);
  auto c = test::nan_vector(128);
  Fp8GemmParams p{w.view, x.data(), 128, 1, c.data(), 128, 16, 128};
  EXPECT_THROW(validate(p), Error);
  p.n_begin = 0;
  EXPECT_NO_THROW(validate(p));
}

}  // namespace
}  // namespace hymoe::kernels
