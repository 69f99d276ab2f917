// The text input pipeline (issue #15, text_pipeline.hpp): the committed
// SentencePiece model's ids, packing, and the text benchmark on the committed
// corpus. Its own test binary: SentencePiece never shares a process with LibTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/pipeline/text_pipeline.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;

namespace {

const std::string kData = std::string(SCALEDL_SOURCE_DIR) + "/datasets/pipeline";

PipelineBenchOptions quick() {
  PipelineBenchOptions o;
  o.corpus = kData + "/kjv-genesis-leviticus.txt";
  o.tokenizer = kData + "/kjv-bpe4k.model";
  o.max_workers = 2;
  o.warmup_s = 0.01;
  o.repeats = 2;
  o.repeat_s = 0.03;
  o.tokens_per_sample = 128;
  return o;
}

}  // namespace

// ---- text ---------------------------------------------------------------------------

TEST(Tokenizer, CommittedModelGivesTheExpectedIds) {
  Tokenizer t(kData + "/kjv-bpe4k.model");
  EXPECT_EQ(t.vocab_size(), 4000);
  EXPECT_EQ(t.eos_id(), 2);
  // Fixed ids of the committed BPE model (datasets/pipeline/make_pipeline_data.sh); a
  // retrained or edited model changes them.
  const std::vector<int> expect = {1062, 5, 2831, 157, 1992, 5, 780, 11, 5, 342, 3954};
  EXPECT_EQ(t.encode("In the beginning God created the heaven and the earth."), expect);
  EXPECT_TRUE(t.encode("").empty());
  EXPECT_NE(
      error_of([] { Tokenizer bad(kData + "/kjv-genesis-leviticus.txt"); }).find("not a SentencePiece model"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              Tokenizer bad("/nonexistent.model");
            }).find("--tokenizer=/nonexistent.model: cannot open"),
            std::string::npos);
}

TEST(TextPacker, SamplesAreExactlySeqIdsOfTheTokenStream) {
  Tokenizer t(kData + "/kjv-bpe4k.model");
  const std::vector<std::string_view> lines = {"In the beginning God created the heaven and the earth.",
                                               "And the earth was without form, and void."};
  std::vector<int> stream;
  for (int rep = 0; rep < 8; ++rep)
    for (auto l : lines) {
      t.encode(l, stream);
      stream.push_back(t.eos_id());
    }
  TextPacker p(t, lines, 7);
  std::vector<int32_t> got, s;
  int64_t bytes = 0;
  double tok_s = 0;
  for (int i = 0; i < 10; ++i) {
    p.next(s, &tok_s, &bytes);
    ASSERT_EQ(s.size(), 7u);
    got.insert(got.end(), s.begin(), s.end());
  }
  EXPECT_TRUE(std::equal(got.begin(), got.end(), stream.begin()));  // packed in order, remainder carried
  EXPECT_GT(bytes, 0);
  EXPECT_GE(tok_s, 0.0);
}

TEST(TextBench, MeasuresEveryWorkerCountOnTheCommittedCorpus) {
  const PipelineMeasurement t = bench_text_pipeline(quick());
  ASSERT_EQ(t.points.size(), 2u);
  for (const auto& p : t.points) {
    EXPECT_GT(p.samples_per_s, 0);
    EXPECT_EQ(p.repeats, 2);
    EXPECT_GT(p.samples, 0);
  }
  EXPECT_EQ(t.kind, InputKind::Text);
  EXPECT_EQ(t.items, 3605);            // verses of Genesis-Leviticus
  EXPECT_GT(t.bytes_per_sample, 128);  // more than 1 byte of text per token
  EXPECT_GT(t.decode_ms, 0);
  EXPECT_EQ(t.read_ms, 0);  // the corpus is in memory
}

TEST(TextBench, BadOptionsNameTheirKey) {
  PipelineBenchOptions o = quick();
  o.max_workers = 0;
  EXPECT_NE(error_of([&] { bench_text_pipeline(o); }).find("--workers=0 must be in [1, 256]"),
            std::string::npos);
  o = quick();
  o.corpus = "/nonexistent/corpus.txt";
  EXPECT_NE(error_of([&] { bench_text_pipeline(o); }).find("--corpus=/nonexistent/corpus.txt: no such file"),
            std::string::npos);
  o = quick();
  o.tokenizer = kData + "/images/rocket-448.jpg";
  EXPECT_NE(error_of([&] { bench_text_pipeline(o); }).find("not a SentencePiece model"), std::string::npos);
  o = quick();
  o.tokens_per_sample = 0;
  EXPECT_NE(error_of([&] { bench_text_pipeline(o); }).find("--tokens=0"), std::string::npos);
  TokenizerTrainOptions to;
  to.corpus = kData + "/kjv-genesis-leviticus.txt";
  to.out_prefix = testing::TempDir() + "/tok";
  to.vocab = 10;
  EXPECT_NE(error_of([&] { train_tokenizer(to); }).find("--vocab=10 must be in [100, 1000000]"),
            std::string::npos);
  to.vocab = 4000;
  to.type = "wordpiece";
  EXPECT_NE(error_of([&] { train_tokenizer(to); }).find("--type=wordpiece"), std::string::npos);
}
