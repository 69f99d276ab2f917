// Text input pipeline (pipeline.hpp): SentencePiece tokenisation and packing.
#include <sentencepiece_processor.h>  // Debian libsentencepiece-dev
#include <sentencepiece_trainer.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "scaledl/error.hpp"
#include "scaledl/pipeline.hpp"

namespace scaledl {

const char* to_string(InputKind k) { return k == InputKind::Text ? "text" : "image"; }

InputKind parse_input_kind(const std::string& s, const std::string& key) {
  if (s == "text") return InputKind::Text;
  if (s == "image") return InputKind::Image;
  fail("{}={} is not an input kind (text or image)", key, s);
}

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

Tokenizer::Tokenizer(const std::string& model_path, const std::string& key) : impl_(std::make_unique<Impl>()) {
  std::ifstream f(model_path, std::ios::binary);
  SCALEDL_CHECK(f.good() && std::filesystem::is_regular_file(model_path), "{}={}: cannot open the SentencePiece model",
                key, model_path);
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

int Tokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }
int Tokenizer::eos_id() const { return impl_->sp.eos_id(); }

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
  out.assign(buf_.begin() + static_cast<std::ptrdiff_t>(off_), buf_.begin() + static_cast<std::ptrdiff_t>(off_ + seq_));
  off_ += static_cast<size_t>(seq_);
  if (off_ > buf_.size() / 2) {  // keep the carried remainder only
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(off_));
    off_ = 0;
  }
}

}  // namespace scaledl
