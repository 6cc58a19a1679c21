// End to end on the tiny preset: a checkpoint written to disk by the model module, opened with
// WeightStore::open and bound with ModelWeights::bind, runs through the reference; the forms
// agree, prefill + decode equals recompute, and the dummy store of the same seed gives the same
// logits as the files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "hymoe/model/model_weights.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "reference_model.h"
#include "test_util.h"

namespace hymoe::reference {
namespace {

using testing::rel_error;

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("hymoe-reference-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

std::span<const float> row(const std::vector<float>& logits, size_t i, int64_t vocab) {
  return std::span<const float>(logits).subspan(i * static_cast<size_t>(vocab),
                                                static_cast<size_t>(vocab));
}

TEST(ReferenceCheckpoint, TinyCheckpointEndToEnd) {
  TempDir dir;
  ModelWriteOptions wo;
  wo.seed = 20261129;
  wo.threads = 2;
  const ModelConfig written = write_random_checkpoint(preset_config("tiny"), dir.path(), wo);
  LoadOptions lo;
  lo.mode = LoadMode::kMmap;
  const std::unique_ptr<WeightStore> store = WeightStore::open(dir.path(), lo);
  const ModelWeights weights = ModelWeights::bind(*store);
  const ReferenceModel model(weights);
  const int64_t V = model.config().vocab_size;
  ASSERT_EQ(V, written.vocab_size);

  const std::vector<int64_t> tokens = {0, 17, 4242, V - 1, 5, 100000};
  const auto absorbed = model.forward(tokens, MlaForm::kAbsorbed);
  const auto naive = model.forward(tokens, MlaForm::kNaive);
  double spread = 0.0;
  for (float v : absorbed) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(double{v}));
  }
  EXPECT_GT(spread, 0.1);  // logits that carry information, not a collapsed output
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_LT(rel_error(row(absorbed, i, V), row(naive, i, V)), 1e-5) << "position " << i;
  }

  LatentKvCache cache = model.new_cache();
  const auto first = model.forward(std::span(tokens).first(4), 0, cache, MlaForm::kAbsorbed);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LT(rel_error(row(first, i, V), row(absorbed, i, V)), 1e-6);
  }
  for (size_t i = 4; i < tokens.size(); ++i) {
    const auto step = model.forward(std::span(tokens).subspan(i, 1), static_cast<int64_t>(i),
                                     cache, MlaForm::kAbsorbed);
    EXPECT_LT(rel_error(row(step, 0, V), row(absorbed, i, V)), 1e-6) << "decode position " << i;
  }

  // The in-memory dummy store of the same preset and seed holds the same values.
  const std::unique_ptr<WeightStore> dummy = WeightStore::dummy(preset_config("tiny"), wo.seed);
  const ModelWeights dummy_weights = ModelWeights::bind(*dummy);
  const ReferenceModel dummy_model(dummy_weights);
  EXPECT_EQ(dummy_model.forward(tokens, MlaForm::kAbsorbed), absorbed);
}

}  // namespace
}  // namespace hymoe::reference
