// `scaledl bench pipeline` and `scaledl train tokenizer` (issue #15) run the
// scaledl-pipeline tool built beside this binary, with the same arguments: they
// need SentencePiece, which cannot share a process with LibTorch
// (scaledl/text_pipeline.hpp). The commands themselves are
// cmd_bench_pipeline.cpp and cmd_train_tokenizer.cpp; exec keeps their output,
// their one `scaledl: error:` line and their exit status as they are.
#include "command.hpp"
#include "sibling.hpp"

namespace {

/// Every argument, --help included, goes to scaledl-pipeline.
scaledl::cli::Runner forward(CLI::App& app) {
  app.prefix_command();
  app.set_help_flag();
  return []() -> int { scaledl::cli::exec_sibling("scaledl-pipeline", scaledl::cli::this_process_args()); };
}

scaledl::cli::Registrar bench_reg({"bench", "pipeline"},
                                  "Samples/s of real input pipelines (tokenise; JPEG decode + crop + flip + "
                                  "normalise) per worker thread, and a "
                                  "file's read rate (runs scaledl-pipeline)",
                                  forward);
scaledl::cli::Registrar train_reg({"train", "tokenizer"},
                                  "Train a SentencePiece tokenizer on a text corpus (runs scaledl-pipeline)",
                                  forward);

}  // namespace
