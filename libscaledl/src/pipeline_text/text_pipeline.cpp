// Text input pipeline (text_pipeline.hpp): SentencePiece tokenisation and packing,
// the trainer, and the text benchmark. Only in processes without LibTorch
// (text_pipeline.hpp says why).
#include <sentencepiece_processor.h>  // Debian libsentencepiece-dev
#include <sentencepiece_trainer.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "pipeline/worker_pool.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/pipeline/text_pipeline.hpp"

namespace scaledl {

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

Tokenizer::Tokenizer(const std::string& model_path, const std::string& key)
    : impl_(std::make_unique<Impl>()) {
  std::ifstream f(model_path, std::ios::binary);
  SCALEDL_CHECK(f.good() && std::filesystem::is_regular_file(model_path),
                "{}={}: cannot open the SentencePiece model", key, model_path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto st = impl_->sp.LoadFromSerializedProto(bytes);
  SCALEDL_CHECK(st.ok(), "{}={}: not a SentencePiece model ({})", key, model_path, st.ToString());
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::encode(std::string_view text, std::vector<int>& ids) const {
  std::vector<int> piece;
  const auto st = impl_->sp.Encode(absl::string_view(text.data(), text.size()), &piece);
  SCALEDL_CHECK(st.ok(), "SentencePiece encode failed: {}", st.ToString());
  ids.insert(ids.end(), piece.begin(), piece.end());
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  encode(text, ids);
  return ids;
}

int Tokenizer::vocab_size() const {
  return impl_->sp.GetPieceSize();
}
int Tokenizer::eos_id() const {
  return impl_->sp.eos_id();
}

void train_tokenizer(const TokenizerTrainOptions& o) {
  SCALEDL_CHECK(std::filesystem::is_regular_file(o.corpus) && std::ifstream(o.corpus).good(),
                "--corpus={}: cannot open", o.corpus);
  SCALEDL_CHECK(std::filesystem::file_size(o.corpus) > 0, "--corpus={}: the file is empty", o.corpus);
  SCALEDL_CHECK(!o.out_prefix.empty(), "--out is required (writes <out>.model and <out>.vocab)");
  SCALEDL_CHECK(o.vocab >= 100 && o.vocab <= 1000000, "--vocab={} must be in [100, 1000000]", o.vocab);
  SCALEDL_CHECK(o.type == "bpe" || o.type == "unigram" || o.type == "char" || o.type == "word",
                "--type={} is not a SentencePiece model type (bpe, unigram, char, word)", o.type);
  SCALEDL_CHECK(o.threads >= 1 && o.threads <= 256, "--threads={} must be in [1, 256]", o.threads);
  const auto parent = std::filesystem::path(o.out_prefix).parent_path();
  SCALEDL_CHECK(parent.empty() || std::filesystem::is_directory(parent), "--out={}: folder {} does not exist",
                o.out_prefix, parent.string());
  // Whole corpus (no sentence sampling), no shuffling: the same input gives the same model.
  const std::string args = fmt::format(
      "--input={} --model_prefix={} --vocab_size={} --model_type={} --character_coverage=1.0 "
      "--num_threads={} --input_sentence_size=0 --shuffle_input_sentence=false --minloglevel=2",
      o.corpus, o.out_prefix, o.vocab, o.type, o.threads);
  const auto st = sentencepiece::SentencePieceTrainer::Train(args);
  SCALEDL_CHECK(st.ok(), "SentencePiece training on --corpus={} failed: {}", o.corpus, st.ToString());
}

TextPacker::TextPacker(const Tokenizer& tok, std::vector<std::string_view> lines, int64_t tokens_per_sample)
    : tok_(tok), lines_(std::move(lines)), seq_(tokens_per_sample) {
  SCALEDL_CHECK(!lines_.empty(), "a text worker got no lines (more workers than lines of the corpus?)");
  SCALEDL_CHECK(seq_ >= 1, "--tokens={} must be >= 1", seq_);
}

void TextPacker::next(std::vector<int32_t>& out, double* tokenize_s, int64_t* bytes) {
  using Clock = std::chrono::steady_clock;
  const int eos = tok_.eos_id();
  size_t empty_run = 0;  // lines in a row that gave no id (a corpus of blank lines must not spin forever)
  while (static_cast<int64_t>(buf_.size() - off_) < seq_) {
    const std::string_view line = lines_[cursor_];
    cursor_ = (cursor_ + 1) % lines_.size();
    const size_t before = buf_.size();
    const auto t0 = Clock::now();
    tok_.encode(line, buf_);
    if (tokenize_s) *tokenize_s += std::chrono::duration<double>(Clock::now() - t0).count();
    if (bytes) *bytes += static_cast<int64_t>(line.size());
    if (eos >= 0) buf_.push_back(eos);
    empty_run = buf_.size() == before ? empty_run + 1 : 0;
    SCALEDL_CHECK(empty_run <= lines_.size(), "the corpus gives no tokens (every line is empty)");
  }
  out.assign(buf_.begin() + static_cast<std::ptrdiff_t>(off_),
             buf_.begin() + static_cast<std::ptrdiff_t>(off_ + seq_));
  off_ += static_cast<size_t>(seq_);
  if (off_ > buf_.size() / 2) {  // keep the carried remainder only
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(off_));
    off_ = 0;
  }
}

// ---- the benchmark ---------------------------------------------------------------

namespace {

using namespace pipeline_detail;

struct TextWorker : Worker {
  Tokenizer tok;
  TextPacker packer;
  std::vector<int32_t> out;
  TextWorker(const std::string& model, std::vector<std::string_view> lines, int64_t seq)
      : tok(model), packer(tok, std::move(lines), seq) {}
  void sample() override {
    const auto t0 = Clock::now();
    double tok_s = 0;
    packer.next(out, &tok_s, &bytes);
    decode_s += tok_s;
    transform_s += seconds_since(t0) - tok_s;  // packing: the copy into the sample
  }
};

}  // namespace

PipelineMeasurement bench_text_pipeline(const PipelineBenchOptions& o) {
  check_options(o);
  SCALEDL_CHECK(o.tokens_per_sample >= 1 && o.tokens_per_sample <= (1 << 20),
                "--tokens={} must be in [1, 1048576]", o.tokens_per_sample);
  const std::string corpus = read_file(o.corpus, "--corpus");
  { Tokenizer probe(o.tokenizer); }  // a bad model is named before any thread starts
  std::vector<std::string_view> lines;
  for (size_t a = 0; a < corpus.size();) {
    size_t b = corpus.find('\n', a);
    if (b == std::string::npos) b = corpus.size();
    if (b > a) lines.emplace_back(corpus.data() + a, b - a);
    a = b + 1;
  }
  SCALEDL_CHECK(!lines.empty(), "--corpus={}: no text (every line is empty)", o.corpus);
  SCALEDL_CHECK(static_cast<int64_t>(lines.size()) >= o.max_workers,
                "--corpus={}: {} lines cannot give --workers={} workers a shard each", o.corpus, lines.size(),
                o.max_workers);
  PipelineMeasurement m;
  m.kind = InputKind::Text;
  m.sample_size = o.tokens_per_sample;
  m.items = static_cast<int64_t>(lines.size());
  m.data = o.corpus;
  measure_workers(o, m, [&](int W) {
    // Contiguous shards, as a sharded text dataset is read.
    std::vector<std::unique_ptr<Worker>> ws;
    for (int w = 0; w < W; ++w) {
      const size_t a = lines.size() * static_cast<size_t>(w) / W,
                   b = lines.size() * static_cast<size_t>(w + 1) / W;
      ws.push_back(std::make_unique<TextWorker>(
          o.tokenizer, std::vector<std::string_view>(lines.begin() + a, lines.begin() + b),
          o.tokens_per_sample));
    }
    return ws;
  });
  return m;
}

}  // namespace scaledl
