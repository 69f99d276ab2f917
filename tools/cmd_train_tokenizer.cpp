// scaledl train tokenizer: a SentencePiece model from a text corpus with
// SentencePiece's C++ trainer (issue #15: the tokenizer of `bench pipeline`,
// datasets/pipeline/kjv-bpe4k.model; datasets/pipeline/make_pipeline_data.sh). Built into
// scaledl-pipeline, which `scaledl train tokenizer` runs (pipeline_forward.cpp).
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/pipeline/text_pipeline.hpp"

namespace {

scaledl::cli::Registrar reg(
    {"train", "tokenizer"}, "Train a SentencePiece tokenizer (BPE or unigram) on a text corpus",
    [](CLI::App& app) {
      auto o = std::make_shared<scaledl::TokenizerTrainOptions>();
      app.add_option("--corpus", o->corpus, "UTF-8 text, one sentence a line")->required();
      app.add_option("--out", o->out_prefix, "output prefix: writes PREFIX.model and PREFIX.vocab")
          ->required();
      app.add_option("--vocab", o->vocab, "vocabulary size")->capture_default_str();
      app.add_option("--type", o->type, "bpe, unigram, char or word")->capture_default_str();
      app.add_option("--threads", o->threads, "trainer threads")->capture_default_str();
      return [o] {
        for (const char* ext : {".model", ".vocab"})
          scaledl::check_output_is_not_input(o->out_prefix + ext, "--out", {{"--corpus", o->corpus}});
        scaledl::train_tokenizer(*o);
        scaledl::Tokenizer t(o->out_prefix + ".model", "--out");
        std::printf("wrote %s.model and %s.vocab: %s, %d pieces\n", o->out_prefix.c_str(),
                    o->out_prefix.c_str(), o->type.c_str(), t.vocab_size());
        return 0;
      };
    });

}  // namespace
