#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The text input pipeline (issue #15, pipeline.hpp, docs/pipeline.md): SentencePiece
// tokenisation and packing, the tokenizer's trainer, and the text benchmark.
//
// Library scaledl_pipeline_text (libscaledl/src/pipeline_text/), apart from
// scaledl_pipeline because Debian's libsentencepiece0 carries its own copy of
// protobuf-lite 3.14 with exported symbols, and LibTorch loads libprotobuf 3.21:
// in one process the two copies bind to each other and the program crashes as it
// starts. So it is linked only into processes without LibTorch: the
// `scaledl-pipeline` tool (which `scaledl bench pipeline` and `scaledl train
// tokenizer` run) and test_pipeline_text.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "scaledl/pipeline/pipeline.hpp"

namespace scaledl {

// ---- text: SentencePiece ------------------------------------------------------

/// A loaded SentencePiece model (Debian's libsentencepiece). Not shared between
/// threads: every worker loads its own, as every DataLoader worker process does.
class Tokenizer {
 public:
  /// Throws Error("<key>=<path>: ...") when the file is missing or not a model.
  explicit Tokenizer(const std::string& model_path, const std::string& key = "--tokenizer");
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  /// Token ids of `text` (appended to `ids`).
  void encode(std::string_view text, std::vector<int>& ids) const;
  std::vector<int> encode(std::string_view text) const;
  int vocab_size() const;
  int eos_id() const;  ///< -1 when the model has none

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TokenizerTrainOptions {
  std::string corpus;        ///< UTF-8 text, one sentence a line
  std::string out_prefix;    ///< writes <prefix>.model and <prefix>.vocab
  int vocab = 4000;          ///< vocabulary size, in [100, 1000000]
  std::string type = "bpe";  ///< bpe | unigram | char | word
  int threads = 1;           ///< trainer threads (1: the same model byte for byte on every machine we tried)
};
/// Trains with SentencePiece's C++ trainer (sentencepiece_trainer.h). Throws
/// Error naming the option on a bad value or a trainer failure.
void train_tokenizer(const TokenizerTrainOptions& o);

/// One worker's text pipeline: tokenises its lines in order (cycling) and packs
/// the ids, with the model's end-of-sentence id between lines, into samples of
/// exactly `tokens_per_sample` ids (the remainder carries over to the next
/// sample, as Hugging Face's group_texts does).
class TextPacker {
 public:
  TextPacker(const Tokenizer& tok, std::vector<std::string_view> lines, int64_t tokens_per_sample);
  /// The next sample into `out` ([tokens_per_sample] ids). `tokenize_s` gains
  /// the seconds spent in SentencePiece, `bytes` the text bytes tokenised.
  void next(std::vector<int32_t>& out, double* tokenize_s = nullptr, int64_t* bytes = nullptr);

 private:
  const Tokenizer& tok_;
  std::vector<std::string_view> lines_;
  int64_t seq_;
  size_t cursor_ = 0;
  std::vector<int> buf_;
  size_t off_ = 0;
};

/// The text pipeline for W = 1..max_workers: every worker loads its own
/// Tokenizer and packs its contiguous shard of the corpus lines. Throws Error
/// naming --corpus / --tokenizer when unreadable.
PipelineMeasurement bench_text_pipeline(const PipelineBenchOptions& o);

}  // namespace scaledl
