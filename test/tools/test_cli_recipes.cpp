// `predict` with the training recipes: --framework, --attention, --dtype fp8, --lora-rank: what
// each prints, that each changes the prediction the way its kernels say, and one error line for
// each bad value.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

using namespace scaledl::test;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;

/// `predict` of a shipped model on the H100 sheet, in BF16 unless `extra` gives a --dtype.
std::string predict(const std::string& model, const std::string& extra) {
  const std::string dtype = extra.find("--dtype") == std::string::npos ? "--dtype bf16 " : "";
  return "predict " + kSrc + "/models/" + model + ".json --bundle " + kSrc +
         "/models/bundles/default --device-spec " + kSrc + "/models/devices/h100-sxm.json " + dtype + extra;
}

nlohmann::json predict_json(const std::string& model, const std::string& extra) {
  const CliResult r = run_cli(predict(model, extra + " --json"));
  EXPECT_EQ(r.rc, 0) << r.out;
  return r.rc == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}
}  // namespace

TEST(CliRecipes, FusedAttentionReplacesTheScoreKernelsAndIsFasterAtLongSequences) {
  const auto eager = predict_json("qwen2-0.5b", "--batch 4 --seq 2048");
  const auto sdpa = predict_json("qwen2-0.5b", "--batch 4 --seq 2048 --framework hf-sdpa");
  ASSERT_TRUE(eager.contains("by_type_ms") && sdpa.contains("by_type_ms"));
  EXPECT_EQ(eager["attention"], "eager");
  EXPECT_EQ(sdpa["attention"], "flash");
  EXPECT_EQ(sdpa["settings"]["attention"], "fused");
  EXPECT_TRUE(sdpa["by_type_ms"].contains("flash_attention.fwd"));
  EXPECT_FALSE(sdpa["by_type_ms"].contains("softmax.fwd"));
  EXPECT_TRUE(eager["by_type_ms"].contains("softmax.fwd"));
  // At 2,048 tokens the eager scores ([4, 14, 2048, 2048] per layer) dominate; fused is faster.
  EXPECT_LT(sdpa["t_iter_ms"].get<double>(), 0.8 * eager["t_iter_ms"].get<double>());
  // The backward has training rows (our H200's SDPA backward, import training-kinds): the report
  // does not name it as extrapolated.
  bool named = false;
  for (const auto& k : sdpa["extrapolated"])
    named = named || k.get<std::string>() == "flash_attention.bwd bf16";
  EXPECT_FALSE(named) << sdpa["extrapolated"].dump();
  // --attention overrides the framework: megatron with the eager core has a softmax again.
  const auto legacy =
      predict_json("qwen2-0.5b", "--batch 4 --seq 2048 --framework megatron --attention eager");
  EXPECT_EQ(legacy["attention"], "fused");
  EXPECT_TRUE(legacy["by_type_ms"].contains("softmax.fwd"));
}

TEST(CliRecipes, LoraTrainsAdaptersOnlyAndSaysSo) {
  const auto full = predict_json("qwen2-0.5b", "--batch 4 --seq 512");
  const auto lora = predict_json("qwen2-0.5b", "--batch 4 --seq 512 --lora-rank 16 --lora-targets q,v");
  ASSERT_TRUE(full.contains("t_iter_ms") && lora.contains("t_iter_ms"));
  EXPECT_EQ(lora["settings"]["lora_rank"], 16);
  EXPECT_EQ(lora["settings"]["lora_targets"], "q,v");
  EXPECT_LT(lora["t_iter_ms"].get<double>(), full["t_iter_ms"].get<double>());
  EXPECT_LT(lora["memory"]["peak_bytes"].get<double>(), full["memory"]["peak_bytes"].get<double>());
  EXPECT_LT(lora["by_type_ms"]["optimizer.update"].get<double>(),
            full["by_type_ms"]["optimizer.update"].get<double>());
  // A frozen linear's backward is its dX GEMM alone, half the work (and, measured on the H200, half
  // the time) of dX + dW: every linear of the LoRA run is frozen but the small adapters.
  const double bwd_full = full["by_type_ms"]["linear.bwd"].get<double>();
  const double bwd_lora = lora["by_type_ms"]["linear.bwd"].get<double>();
  EXPECT_LT(bwd_lora, 0.6 * bwd_full);
  EXPECT_GT(bwd_lora, 0.45 * bwd_full);
  const CliResult text = run_cli(predict("qwen2-0.5b", "--batch 4 --seq 512 --lora-rank 16"));
  EXPECT_NE(text.out.find("LoRA rank 16 on q,k,v,o,gate,up,down"), std::string::npos) << text.out;
}

TEST(CliRecipes, BadRecipeValuesAreOneErrorLine) {
  expect_one_error(predict("gpt2", "--framework deepspeed"),
                   "--framework=\"deepspeed\" is not a framework recipe (hf-eager, hf-sdpa or megatron)");
  expect_one_error(predict("gpt2", "--attention flash2"),
                   "--attention=\"flash2\" is not an attention implementation");
  expect_one_error(predict("gpt2", "--lora-rank 8 --mode inference"), "LoRA is fine-tuning; mode inference");
  expect_one_error(predict("gpt2", "--lora-targets q"), "--lora-targets=q without --lora-rank");
  expect_one_error(predict("gpt2", "--lora-rank 8 --lora-targets q,lm_head"),
                   "\"lm_head\" is not a LoRA target (all, or a list of q, k, v, o, gate, up, down)");
}

TEST(CliRecipes, RecipesEnterTheParallelComposition) {
  // FP8 with Megatron's kernels on 8 H100s (the optimizer step stays on the FP32 masters), and
  // LoRA, whose gradient all-reduce carries the adapters alone.
  const std::string split = "--batch 8 --seq 1024 --gpus 8 --tp 2 --microbatches 4 ";
  const auto fp8 = predict_json("qwen2-0.5b", split + "--framework megatron --dtype fp8");
  const auto bf16 = predict_json("qwen2-0.5b", split + "--framework megatron");
  ASSERT_TRUE(fp8.contains("t_iter_ms") && bf16.contains("t_iter_ms"));
  EXPECT_TRUE(fp8["settings"]["fp8"].get<bool>());
  EXPECT_GT(fp8["t_iter_ms"].get<double>(), 0.0);
  const auto lora = predict_json("qwen2-0.5b", split + "--lora-rank 8");
  const auto full = predict_json("qwen2-0.5b", split);
  ASSERT_TRUE(lora.contains("plan") && full.contains("plan")) << lora.dump().substr(0, 400);
  EXPECT_LT(lora["plan"]["dp_grad_bytes"].get<double>(), 0.05 * full["plan"]["dp_grad_bytes"].get<double>());
  EXPECT_GT(lora["plan"]["dp_grad_bytes"].get<double>(), 0.0);
}

TEST(CliRecipes, ASweepComparesTheFrameworksRowByRow) {
  // Each row is the framework's own prediction; the label says which.
  const CliResult r =
      run_cli(predict("qwen2-0.5b", "--batch 4 --seq 2048 --sweep framework=hf-eager,hf-sdpa --json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["model"], "qwen2-0.5b framework=hf-eager");
  EXPECT_EQ(rows[1]["model"], "qwen2-0.5b framework=hf-sdpa");
  EXPECT_DOUBLE_EQ(
      rows[1]["t_iter_ms"].get<double>(),
      predict_json("qwen2-0.5b", "--batch 4 --seq 2048 --framework hf-sdpa")["t_iter_ms"].get<double>());
  EXPECT_EQ(rows[1]["attention"], "flash");
  expect_one_error(predict("qwen2-0.5b", "--sweep framework=hf-eager,jax"), "framework=\"jax\"");
  expect_one_error(predict("qwen2-0.5b", "--attention fused --sweep framework=megatron"),
                   "--attention=fused with framework=megatron");
}

TEST(CliRecipes, AmpCostsCastsAndFp32WeightsOverBf16) {
  // Autocast over FP32 weights (the Trainer's bf16=True) against a model loaded in BF16: the same
  // products plus the casts and the FP32 kernels around them; 16 bytes per parameter.
  const auto bf16 = predict_json("qwen2-0.5b", "--batch 4 --seq 1024 --framework hf-sdpa");
  const auto amp = predict_json("qwen2-0.5b", "--batch 4 --seq 1024 --framework hf-sdpa --dtype amp-bf16");
  ASSERT_TRUE(bf16.contains("t_iter_ms") && amp.contains("t_iter_ms"));
  EXPECT_TRUE(amp["settings"]["amp"].get<bool>());
  EXPECT_FALSE(bf16["settings"].contains("amp"));
  EXPECT_GT(amp["t_iter_ms"].get<double>(), bf16["t_iter_ms"].get<double>());
  EXPECT_GT(amp["memory"]["analytic"]["weights_bytes"].get<double>(),
            1.99 * bf16["memory"]["analytic"]["weights_bytes"].get<double>());
  EXPECT_GT(amp["by_type_ms"]["pointwise.fwd"].get<double>(), bf16["by_type_ms"].value("pointwise.fwd", 0.0));
  const CliResult text = run_cli(predict("qwen2-0.5b", "--batch 4 --seq 1024 --dtype amp-bf16"));
  EXPECT_NE(text.out.find(", amp-bf16, mode train"), std::string::npos) << text.out;
  // With --gpus: the data-parallel all-reduce carries FP32 gradients.
  const std::string split = "--batch 8 --seq 1024 --gpus 4 ";
  const auto pamp = predict_json("qwen2-0.5b", split + "--dtype amp-bf16");
  const auto pbf = predict_json("qwen2-0.5b", split);
  ASSERT_TRUE(pamp.contains("plan") && pbf.contains("plan"));
  EXPECT_DOUBLE_EQ(pamp["plan"]["dp_grad_bytes"].get<double>(),
                   2 * pbf["plan"]["dp_grad_bytes"].get<double>());
  expect_one_error(predict("gpt2", "--dtype amp-fp32"), "--dtype=amp-fp32: autocast runs bf16 or fp16");
  expect_one_error(predict("gpt2", "--dtype amp"), "--dtype=amp: autocast runs bf16 or fp16");
}

TEST(CliRecipes, AMisalignedGemmDimensionIsCostedAtItsKernelsRateAndSaid) {
  // GPT-2's vocabulary (50,257) is odd: its LM head's BF16 GEMMs run on cuBLAS's align1 kernels,
  // costed at their measured rate (misaligned_gemm_ms), and a line says so.
  const auto gpt2 = predict_json("gpt2", "--batch 4 --seq 512");
  ASSERT_TRUE(gpt2.contains("gemm_warning")) << gpt2.dump().substr(0, 300);
  const std::string w = gpt2["gemm_warning"].get<std::string>();
  EXPECT_NE(w.find("head.lm (d_out 50257)"), std::string::npos) << w;
  EXPECT_NE(w.find("costed at their measured rate"), std::string::npos) << w;
  const CliResult text = run_cli(predict("gpt2", "--batch 4 --seq 512"));
  EXPECT_NE(text.out.find("warning      head.lm (d_out 50257): "), std::string::npos) << text.out;
  // BERT's 30,522 is even but no multiple of 8: the narrower kernels' other rate.
  const auto bert = predict_json("bert-base", "--batch 4 --seq 512");
  ASSERT_TRUE(bert.contains("gemm_warning")) << bert.dump().substr(0, 300);
  EXPECT_NE(bert["gemm_warning"].get<std::string>().find("(d_out 30522)"), std::string::npos)
      << bert["gemm_warning"];
  // Megatron pads the vocabulary (to 50,304; with tp 4 to 50,688, 12,672 a shard): none.
  EXPECT_FALSE(predict_json("gpt2", "--batch 4 --seq 512 --framework megatron").contains("gemm_warning"));
  // Not in FP32 (SIMT kernels need no alignment), nor for an aligned vocabulary (Qwen2's 151,936).
  EXPECT_FALSE(predict_json("gpt2", "--batch 4 --seq 512 --dtype fp32").contains("gemm_warning"));
  EXPECT_FALSE(predict_json("qwen2-0.5b", "--batch 4 --seq 512").contains("gemm_warning"));
  // The time: the odd head makes GPT-2 slower than the same model with a padded vocabulary.
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(kSrc + "/models/gpt2.json"));
  cfg["vocab_size"] = 50304;
  const std::string padded_cfg = std::string(SCALEDL_BINARY_DIR) + "/gpt2-vocab-50304.json";
  std::ofstream(padded_cfg) << cfg.dump();
  const std::string layers = " --layers " + kSrc + "/models/bundles/default/layers --device-spec " + kSrc +
                             "/models/devices/h100-sxm.json --dtype bf16 --batch 4 --seq 512 --json";
  const CliResult odd = run_cli("predict " + kSrc + "/models/gpt2.json" + layers);
  const CliResult pad = run_cli("predict " + padded_cfg + layers);
  ASSERT_EQ(odd.rc, 0) << odd.out;
  ASSERT_EQ(pad.rc, 0) << pad.out;
  EXPECT_GT(nlohmann::json::parse(odd.out)["t_sum_ms"].get<double>(),
            1.1 * nlohmann::json::parse(pad.out)["t_sum_ms"].get<double>());
}

TEST(CliRecipes, AFrameworkCostsTheOptimizerStepAsOneFusedStep) {
  // Without --framework: the optimizer's layer model (LibTorch's unfused AdamW). With one: the
  // fused step, its bytes (7 per parameter and byte of the dtype with Adam) at 0.774 of the
  // sustained bandwidth.
  const auto zoo = predict_json("qwen2-0.5b", "--batch 4 --seq 512");
  const auto hf = predict_json("qwen2-0.5b", "--batch 4 --seq 512 --framework hf-eager");
  ASSERT_TRUE(zoo.contains("by_type_ms") && hf.contains("by_type_ms"));
  EXPECT_FALSE(zoo["settings"].contains("fused_optimizer"));
  EXPECT_TRUE(hf["settings"]["fused_optimizer"].get<bool>());
  const double params = hf["memory"]["analytic"]["weights_bytes"].get<double>() / 2;  // BF16
  const double bw = hf["sustained_bw_gbs"].get<double>();
  const double expect_ms = params * 2 * 7 / (3288.0 / 4248.0 * bw * 1e9) * 1e3;
  EXPECT_NEAR(hf["by_type_ms"]["optimizer.update"].get<double>(), expect_ms, 1e-6 * expect_ms);
  EXPECT_LT(hf["by_type_ms"]["optimizer.update"].get<double>(),
            zoo["by_type_ms"]["optimizer.update"].get<double>());
  // The same kernels otherwise: hf-eager is the default's kernel recipe.
  EXPECT_DOUBLE_EQ(hf["by_type_ms"]["linear.fwd"].get<double>(),
                   zoo["by_type_ms"]["linear.fwd"].get<double>());
}
