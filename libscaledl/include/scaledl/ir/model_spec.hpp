#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// A Transformer model read from a Hugging Face style config.json, plus the
// training settings of one iteration. No LibTorch: the IR builds without it.
//
// Families: BERT, GPT-2, T5 (encoder-decoder), ViT, DeiT, the decoder shapes of
// GPT-3/GPT-Neo, OPT and Llama (RMSNorm, SwiGLU, grouped-query attention; also
// Mistral, Qwen2, Qwen3(-MoE), Gemma 1-3, Mixtral, Phi-3, GPT-NeoX, DeepSeek-V2/V3, gpt-oss, Nemotron,
// SmolLM3, GLM-4 and GLM-4.5 (glm4_moe), OLMo 2/3, Granite 3, EXAONE 4, Llama 4, Seed-OSS, ERNIE 4.5
// (dense), and the text models of the multimodal gemma3, llama4 and mistral3 configs, read into the
// Llama family), and Switch
// Transformers (T5 with mixture-of-experts FFNs: top-1 routing, capacity).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "scaledl/ir/layer_types.hpp"

namespace scaledl {

// The model families, one row each: X(Enumerator, name). The family decides how the zoo builds
// the model (zoo_common.cpp's switch) and is stored (the name in ModelSpec::to_json, the id in
// saved specs and one-hot widths): append new families.
// clang-format off
#define SCALEDL_MODEL_FAMILIES(X) \
  X(Bert, bert) X(Gpt2, gpt2) X(T5, t5) X(ViT, vit) X(DeiT, deit) X(GptNeo, gpt_neo) X(Opt, opt) \
  X(Llama, llama) X(Switch, switch_transformers)
// clang-format on
#define SCALEDL_FAMILY_ENUMERATOR(E, name) E,
enum class Family : int { SCALEDL_MODEL_FAMILIES(SCALEDL_FAMILY_ENUMERATOR) };
#undef SCALEDL_FAMILY_ENUMERATOR
#define SCALEDL_FAMILY_ONE(E, name) +1
/// Number of Family values (one-hot widths).
inline constexpr int kFamilyCount = 0 SCALEDL_MODEL_FAMILIES(SCALEDL_FAMILY_ONE);
#undef SCALEDL_FAMILY_ONE

// The model types ScaleDL reads: the "model_type" of a Hugging Face config.json, one row each:
// X(Enumerator, model_type, Family). parse_model_config() switches over ModelType (no `default:`)
// to the type's reader in model_spec.cpp, which fills the ModelSpec; the row's Family is set
// before it runs. The order is that of the list in messages (supported_model_types()).
// clang-format off
#define SCALEDL_MODEL_TYPES(X)                                                                     \
  X(Bert, bert, Bert) X(Gpt2, gpt2, Gpt2) X(T5, t5, T5) X(ViT, vit, ViT) X(DeiT, deit, DeiT)        \
  X(GptNeo, gpt_neo, GptNeo) X(GptNeoX, gpt_neox, Llama) X(Opt, opt, Opt) X(Llama, llama, Llama)   \
  X(Mistral, mistral, Llama) X(Qwen2, qwen2, Llama) X(Qwen2Moe, qwen2_moe, Llama)                  \
  X(Qwen3, qwen3, Llama) X(Qwen3Moe, qwen3_moe, Llama) X(Gemma, gemma, Llama)                      \
  X(Gemma2, gemma2, Llama) X(Gemma3Text, gemma3_text, Llama) X(Mixtral, mixtral, Llama)            \
  X(Phi3, phi3, Llama) X(DeepseekV2, deepseek_v2, Llama) X(DeepseekV3, deepseek_v3, Llama)         \
  X(GptOss, gpt_oss, Llama) X(Nemotron, nemotron, Llama) X(SmolLM3, smollm3, Llama)             \
  X(Glm4, glm4, Llama) X(Glm4Moe, glm4_moe, Llama) X(SwitchTransformers, switch_transformers, Switch)  \
  X(Olmo2, olmo2, Llama) X(Olmo3, olmo3, Llama) X(Granite, granite, Llama) X(Exaone4, exaone4, Llama) \
  X(Llama4Text, llama4_text, Llama) X(Llama4, llama4, Llama) X(Gemma3, gemma3, Llama)                \
  X(Mistral3, mistral3, Llama) X(SeedOss, seed_oss, Llama) X(Ernie45, ernie4_5, Llama)
// clang-format on
#define SCALEDL_MODEL_TYPE_ENUMERATOR(E, name, family) E,
enum class ModelType : int { SCALEDL_MODEL_TYPES(SCALEDL_MODEL_TYPE_ENUMERATOR) };
#undef SCALEDL_MODEL_TYPE_ENUMERATOR
#define SCALEDL_MODEL_TYPE_ONE(E, name, family) +1
inline constexpr int kModelTypeCount = 0 SCALEDL_MODEL_TYPES(SCALEDL_MODEL_TYPE_ONE);
#undef SCALEDL_MODEL_TYPE_ONE

enum class Arch : int { EncoderOnly = 0, DecoderOnly, EncoderDecoder, VisionEncoder };
/// GELUNew is Hugging Face's NewGELUActivation ("gelu_new": GPT-2, GPT-3, T5 v1.1): the tanh form
/// written out in eager PyTorch, eight kernels; GELUTanh is the fused one (gelu_pytorch_tanh).
/// ReLU2 is the squared ReLU ("relu2", Nemotron): relu then square, two kernels in eager PyTorch.
/// Append new values: the name is stored (ModelSpec::to_json) and the count read back (stored_spec.cpp).
enum class Activation : int { GELU = 0, GELUTanh, ReLU, SiLU, GELUNew, ReLU2 };
/// Number of Activation values.
inline constexpr int kActivationCount = 6;
enum class NormKind : int { LayerNorm = 0, RMSNorm };

const char* to_string(Family f);
/// The model_type string of t ("gpt2", "qwen3_moe", ...).
const char* to_string(ModelType t);
/// The family a model type is read into (its row in SCALEDL_MODEL_TYPES).
Family model_type_family(ModelType t);
/// Parses a config's model_type; throws "<key>=\"<s>\" is not supported (one of ...)" otherwise.
ModelType parse_model_type(const std::string& s, const std::string& key = "config.model_type");
const char* to_string(Arch a);
const char* to_string(Activation a);
const char* to_string(NormKind n);

/// Architecture of one model. All sizes are element counts, > 0 unless noted.
struct ModelSpec {
  std::string name;  ///< e.g. "bert-base" (file stem or _name_or_path)
  Family family = Family::Bert;
  Arch arch = Arch::EncoderOnly;
  int64_t hidden = 0;              ///< d_model
  int64_t num_layers = 0;          ///< encoder layers; decoder layers for decoder-only models
  int64_t num_decoder_layers = 0;  ///< T5 decoder layers; 0 otherwise
  int64_t num_heads = 0;           ///< attention heads (query heads)
  int64_t num_kv_heads = 0;        ///< key/value heads (== num_heads unless GQA/MQA)
  int64_t head_dim = 0;            ///< per-head size (hidden/num_heads, or T5 d_kv)
  int64_t ffn_dim = 0;             ///< FFN inner size (intermediate_size, d_ff, ffn_dim)
  int64_t vocab_size = 0;          ///< 0 for vision models
  int64_t max_positions = 0;       ///< rows of a learned position table; 0 if none (T5 relative, RoPE)
  int64_t position_offset = 0;     ///< extra learned position rows (OPT: 2)
  int64_t type_vocab_size = 0;     ///< BERT token-type rows; 0 otherwise
  int64_t rel_attn_buckets = 0;    ///< T5 relative-attention buckets; 0 otherwise
  int64_t image_size = 0;          ///< vision: input height = width (pixels)
  int64_t patch_size = 0;          ///< vision: patch edge (pixels)
  int64_t num_channels = 0;        ///< vision: input channels
  int64_t num_labels = 0;          ///< classifier outputs (vision: 1000 for ImageNet); 0 = no classifier
  int64_t num_special_tokens = 0;  ///< vision: CLS (1) + DeiT distillation token (2 in total)
  Activation activation = Activation::GELU;
  NormKind norm = NormKind::LayerNorm;
  bool gated_ffn = false;           ///< SwiGLU / gated-GELU: up, gate and down projections
  bool linear_bias = true;          ///< biases on attention and FFN linears
  bool tie_word_embeddings = true;  ///< LM head shares the token embedding
  bool pooler = false;              ///< BERT pooler (dense + tanh on [CLS])
  bool pre_norm = true;             ///< norm before attention/FFN (GPT-2, ViT, Llama, T5)
  bool final_norm = true;           ///< norm after the last block
  bool lm_head = false;             ///< language-model head producing vocab logits
  double dropout = 0.1;             ///< hidden dropout probability, [0, 1)
  double attn_dropout = 0.1;        ///< attention-probability dropout, [0, 1)
  // ---- added by the IR engineer (fields above are unchanged) ----
  double embed_dropout = 0.1;  ///< dropout after the embeddings, [0, 1)
  double act_dropout = 0;      ///< dropout inside the FFN after the activation (T5, OPT), [0, 1)
  bool qkv_bias = true;        ///< biases on the q/k/v projections (false: GPT-Neo, T5, Llama)
  bool out_bias = true;        ///< bias on the attention output projection (false: T5, Llama)
  int64_t context_len = 0;     ///< longest trained sequence (RoPE/learned positions); 0 = unbounded (T5)
  int64_t embed_dim = 0;       ///< token-embedding width (OPT word_embed_proj_dim); == hidden otherwise
  bool dist_head = false;      ///< DeiT with teacher: second classifier on the distillation token
  std::string hf_class;        ///< architectures[0] of the config, "" when absent; a multimodal config read
                               ///< as its text model (gemma3, llama4, mistral3) adds " (text model only ...)"
  // ---- mixture of experts (Switch Transformers); num_experts == 0: a dense model ----
  int64_t num_experts = 0;          ///< experts of each sparse FFN (top-1 routing)
  int64_t encoder_sparse_step = 0;  ///< encoder FFN i is sparse when i % step == 1 (or step == 1); 0 = none
  int64_t decoder_sparse_step = 0;  ///< the same for the decoder stack
  int64_t expert_capacity =
      0;  ///< tokens one expert takes per sample (HF expert_capacity); 0 = capacity_factor
  double capacity_factor = 1.0;   ///< when expert_capacity == 0: capacity = ceil(factor * seq / experts)
  bool router_bias = false;       ///< bias on the router's classifier
  int64_t moe_top_k = 1;          ///< experts each token goes to (Switch 1, Mixtral num_experts_per_tok)
  int64_t shared_expert_ffn = 0;  ///< Qwen2-MoE: a gated FFN every token takes, x sigmoid(gate(x)); 0 = none
  // ---- Gemma ----
  bool embed_scale = false;  ///< embeddings multiplied by sqrt(hidden) (a Mul node "embed.scale")
  // ---- Qwen3 ----
  bool qk_norm = false;  ///< RMSNorm over each head of q and k (nodes "attn.q_norm", "attn.k_norm")
  // ---- Phi-3 (GPT-2's c_attn is fused too, by its family) ----
  bool fused_qkv = false;      ///< q, k and v as one projection (node "attn.qkv")
  bool fused_gate_up = false;  ///< gate and up as one projection [h, 2f] (node "ffn.gate_up"); gated FFNs
  // ---- GPT-NeoX ----
  bool parallel_residual = false;  ///< attention and FFN both read the block input (ffn.norm of x)
  // ---- Gemma 2 / 3 ----
  bool sandwich_norm =
      false;  ///< a norm after attention and after the FFN too ("attn.post_norm", "ffn.post_norm")
  double attn_softcap = 0;   ///< scores = cap x tanh(scores / cap) (three nodes "attn.softcap_*"); 0 = none
  double final_softcap = 0;  ///< the same on the LM head's logits ("head.softcap_*"); 0 = none
  // ---- DeepSeek-V2 / V3: multi-head latent attention (MLA), dense first FFNs, plain shared experts ----
  int64_t kv_lora_rank =
      0;  ///< MLA: k and v from a rank-r latent (kv_a, kv_a_norm, kv_b); 0 = plain attention
  int64_t q_lora_rank = 0;  ///< MLA: q through a rank-r latent (q_a, q_a_norm, q_b); 0 = one q projection
  int64_t qk_rope_dim = 0;  ///< MLA: rotary part of each q/k head (head_dim = qk_nope + qk_rope)
  // ---- rotary position embeddings (the llama family; rotary_dims() says how much of each head) ----
  /// The rotated elements of each q/k head when only part of it turns (partial_rotary_factor,
  /// GPT-NeoX's rotary_pct: int(factor x head_dim)); 0 = the whole head. Stored only when > 0.
  int64_t rotary_dim = 0;
  /// Layers without the rotation (NoPE: SmolLM3's and Llama 4's no_rope_layers): layer i (from 0)
  /// skips it when (i + 1) % nope_interval == 0; 0 = every layer turns q and k. Stored only when > 0.
  int64_t nope_interval = 0;
  int64_t v_head_dim = 0;          ///< per-head size of v (MLA's v_head_dim); 0 = head_dim
  int64_t first_dense_layers = 0;  ///< the first k FFNs of an MoE stack are dense (first_k_dense_replace)
  int64_t dense_ffn_dim = 0;       ///< their width (intermediate_size; ffn_dim is the experts'); 0 = ffn_dim
  bool plain_shared_expert =
      false;  ///< the shared expert is added as it is (DeepSeek), not x sigmoid(gate(x))
  // ---- gpt-oss ----
  bool attn_sinks = false;   ///< a learned sink logit per head joins each softmax ("attn.sinks_*")
  bool clamped_glu = false;  ///< experts: (clamp(up) + 1) x g sigmoid(1.702 g), g = clamp(gate); biased
                             ///< fused gate_up and down, their bias adds as nodes of their own
  bool dense_expert_inference = false;  ///< inference runs every expert on every token (HF's eval-mode path)
  // ---- one GPU's shard under expert parallelism (predict --ep; parallel.cpp) ----
  int64_t expert_shards = 1;  ///< the experts of each sparse FFN are spread over this many GPUs: this one
                              ///< holds num_experts / expert_shards, each taking the tokens of that many GPUs
  // ---- OLMo 2 / EXAONE 4, Granite, Llama 4 (model_spec.cpp's readers; stored only when set) ----
  bool post_norm_only =
      false;  ///< the block's two norms sit after attention and after the FFN, inside the
              ///< residual ("attn.post_norm", "ffn.post_norm"), none before (OLMo 2, EXAONE 4)
  bool qk_norm_whole = false;  ///< qk_norm over the whole q and k projections (OLMo 2: RMSNorm of
                               ///< num_heads x head_dim and of num_kv_heads x head_dim) instead of each head
  bool qk_norm_weightless = false;  ///< qk_norm without a weight (Llama 4's L2 norm): no parameters
  bool residual_scale =
      false;  ///< each block's attention and FFN output x a constant before its residual add
              ///< (Granite's residual_multiplier: "attn.residual_scale", "ffn.residual_scale")
  bool logits_scale =
      false;  ///< the LM head's logits / a constant (Granite's logits_scaling: "head.logits_scale")
  /// True when q, k and v are one projection (GPT-2's c_attn, Phi-3's qkv_proj).
  bool qkv_fused() const { return fused_qkv || family == Family::Gpt2; }
  /// True for DeepSeek's multi-head latent attention.
  bool mla() const { return kv_lora_rank > 0; }
  /// Per-head size of v (MLA: v_head_dim; otherwise head_dim).
  int64_t value_head_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  /// The rotated elements of each q/k head (rotary position embeddings): the llama family's
  /// rotary_dim (0 = the whole head_dim), MLA's qk_rope_dim; 0 for the families with learnt or
  /// relative positions (BERT, GPT-2, OPT, T5, ViT, ...).
  int64_t rotary_dims() const;
  /// Whether decoder layer i (from 0) turns q and k (not a NoPE layer; rotary_dims() > 0).
  bool rotates_layer(int64_t i) const;
  /// FFN width of a dense layer (DeepSeek's first layers: intermediate_size; otherwise ffn_dim).
  int64_t dense_ffn() const { return dense_ffn_dim > 0 ? dense_ffn_dim : ffn_dim; }

  nlohmann::json to_json() const;
};

/// True when FFN `i` of the encoder (decoder = false) or decoder stack is a
/// mixture of experts (Hugging Face SwitchTransformersStack's rule). The num_layers
/// stack of a decoder-only model (Mixtral) is decoder = false: encoder_sparse_step;
/// its first first_dense_layers FFNs are dense (DeepSeek).
bool is_sparse_layer(const ModelSpec& m, bool decoder, int64_t i);
/// Sparse FFNs of a stack.
int64_t sparse_layer_count(const ModelSpec& m, bool decoder);
/// Token slots of one expert per sample: min(expert_capacity, seq), or
/// ceil(capacity_factor * moe_top_k * seq / num_experts) when expert_capacity is 0. Tokens
/// routed beyond it skip the expert (they pass through scaled by the router probability).
int64_t expert_capacity_per_sample(const ModelSpec& m, int64_t seq);
/// True when every expert runs on every token: a model with dense_expert_inference (gpt-oss) in
/// inference, as Hugging Face's eval mode runs it.
bool every_expert_runs(const ModelSpec& m, bool inference);
/// Token slots of one expert per sample: seq when every expert runs, else expert_capacity_per_sample.
int64_t expert_slots_per_sample(const ModelSpec& m, int64_t seq, bool inference);

/// Settings of one training iteration.
/// How the attention core runs. Eager: Hugging Face's eager path, QK^T, the score kernels
/// (scale, mask, softmax, dropout) and AV each their own kernel over [b, H, s, s] scores. Fused:
/// one FlashAttention / SDPA kernel (flash_attention nodes), the scores never in memory, as
/// Hugging Face's "sdpa" / "flash_attention_2" and Megatron-Core with Transformer Engine run it.
/// Blocks whose scores take an additive position bias (T5), soft-capping (Gemma 2) or sink columns
/// (gpt-oss) stay eager: layer_graph.cpp. Append new values: the id is stored.
enum class AttentionImpl : int { Eager = 0, Fused };
const char* to_string(AttentionImpl a);
/// "eager" or "fused"; anything else is an Error naming `ctx` and the value.
AttentionImpl parse_attention_impl(const std::string& v, const std::string& ctx = "attention");

/// A framework's kernel recipe (`--framework`): what it fuses and how its attention runs.
///   hf-eager: Hugging Face with attn_implementation="eager": every kernel its own (the default).
///   hf-sdpa:  Hugging Face with "sdpa" / "flash_attention_2": the attention core one fused kernel,
///             the rest eager.
///   megatron: Megatron-LM / NeMo with Transformer Engine: fused attention, the scale and mask inside
///             the softmax kernel, GELU one kernel (fused bias-GELU).
/// Append new values: the names are accepted on the command line and in sweeps.
enum class Framework : int { HfEager = 0, HfSdpa, Megatron };
const char* to_string(Framework f);
/// "hf-eager", "hf-sdpa" or "megatron"; anything else is an Error naming `ctx` and the value.
Framework parse_framework(const std::string& v, const std::string& ctx = "framework");

struct TrainSettings {
  int64_t batch = 8;       ///< samples per iteration (per device), >= 1
  int64_t seq_len = 128;   ///< tokens per sample (text models), >= 1
  int64_t image_size = 0;  ///< vision input size; 0 = the config's image_size
  DType dtype = DType::FP32;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  bool optimizer_step = true;  ///< iteration includes the optimizer step
  bool backward = true;        ///< false: inference, forward only under no-grad (no optimizer step either)
  int64_t num_devices = 1;     ///< data-parallel replicas (all-reduce of gradients)
  int64_t tgt_len = 0;         ///< T5 decoder tokens per sample; 0 = seq_len
  /// The framework fuses the elementwise kernels around the attention softmax (scale, mask)
  /// and runs gelu_new as one kernel, as Megatron-LM does (fused scale-mask-softmax, fused
  /// bias-GELU); false = eager PyTorch / Hugging Face, each its own kernel (layer_graph.cpp).
  /// Stored only when true, so the keys of earlier runs are unchanged.
  bool fused_kernels = false;
  /// The attention core's kernels (AttentionImpl); stored only when fused.
  AttentionImpl attention = AttentionImpl::Eager;
  /// FP8 training as Transformer Engine runs it: the GEMMs of the linear layers inside the
  /// Transformer blocks in FP8 (E4M3 per-tensor scales, forward and both backward GEMMs, the
  /// quantisation of their inputs included), every other kernel in `dtype` (BF16), FP32 master
  /// weights and optimizer state. `--dtype fp8` sets dtype = BF16 and this; stored only when true.
  bool fp8 = false;
  /// Automatic mixed precision as PyTorch's autocast runs it (Hugging Face's Trainer with
  /// bf16=True / fp16=True): FP32 weights, gradients and optimizer state; the matrix products in
  /// `dtype` (BF16 or FP16) on casts of their FP32 inputs and weights (a cast node before each,
  /// layer_graph.cpp); norms, softmax and the loss in FP32; elementwise ops in the widest dtype of
  /// their inputs (autocast_class). `--dtype amp-bf16|amp-fp16` sets dtype and this; stored only
  /// when true. false = every kernel in `dtype` (weights loaded in it).
  bool amp = false;
  /// The optimizer step is one fused multi-tensor kernel chain (PyTorch's fused AdamW, the default
  /// of transformers 5's Trainer; Megatron's FusedAdam), costed on a GPU as its bytes at the
  /// bandwidth a fused step reaches (layer_predictor.cpp, kFusedStepBandwidthShare) instead of by
  /// the optimizer's layer model, which learnt LibTorch's unfused C++ AdamW. Set by every
  /// `--framework`; false without one (our LibTorch zoo's step). Stored only when true.
  bool fused_optimizer = false;
  /// The rotary embedding of q and k as the framework's own kernels (layer_graph.cpp): Hugging
  /// Face's apply_rotary_pos_emb (eager: neg, cat, two multiplies by cos and sin and their sum, on
  /// q and on k), or with fused_kernels one fused RoPE kernel per tensor (Megatron-LM's and
  /// Transformer Engine's). Set by every `--framework`; false without one: our LibTorch zoo, whose
  /// q and k nodes turn their own outputs (zoo_common.cpp), so its graphs have no rotary node.
  /// Stored only when true.
  bool rotary_kernels = false;
  /// The vocabulary padded to a multiple of this many rows (embedding and LM head), as Megatron-LM
  /// pads it (--make-vocab-size-divisible-by 128, times the tensor-parallel degree: parallel.cpp),
  /// so that its GEMMs run on aligned kernels (GPT-2's 50,257 becomes 50,304); 0 = as the config
  /// has it (Hugging Face). Set by `--framework megatron`; stored only when > 0.
  int64_t vocab_multiple = 0;
  /// LoRA fine-tuning (PEFT): rank of the adapters, 0 = full training. Every weight of the model
  /// is frozen (no weight gradient, no optimizer state); each targeted linear layer of the blocks
  /// gains x A (d_in x r) B (r x d_out) added to its output. Stored only when > 0.
  int64_t lora_rank = 0;
  /// Which linear layers get adapters: a bit per lora_target_names() entry (q, k, v, o, gate,
  /// up, down); 0 with lora_rank > 0 = all of them (PEFT's "all-linear" without the LM head).
  uint32_t lora_targets = 0;
  /// Megatron's sequence parallelism inside a tensor-parallel group of this many GPUs: the
  /// kernels outside the tensor-parallel regions (the blocks' norms, their residual adds and
  /// dropouts, the final norm and the embedding's dropout, all of hidden width) run on 1/this
  /// of the tokens (layer_graph.cpp). Set by the parallel plan (ParallelConfig::
  /// sequence_parallel); 1 = off. Stored only when > 1.
  int64_t sequence_shards = 1;

  nlohmann::json to_json() const;
};

/// The short names LoRA targets, in bit order: q, k, v, o, gate, up, down (a fused qkv linear is
/// targeted by any of q, k, v; a fused gate_up by gate or up).
const std::vector<std::string>& lora_target_names();
/// "q,v" -> its bits; "all" -> every bit. An unknown name is an Error naming `ctx` and the value.
uint32_t parse_lora_targets(const std::string& v, const std::string& ctx);
/// The targets of s as "q,k,v" (all of them when s.lora_targets is 0).
std::string lora_targets_string(const TrainSettings& s);
/// Whether a linear node named `name` ("decoder.3.attn.q") carries an adapter under s.
bool lora_targets_node(const TrainSettings& s, const std::string& name);

/// Sets the kernel recipe of `f` (fused_kernels, attention) on s.
void apply_framework(TrainSettings& s, Framework f);
/// Megatron-LM's --make-vocab-size-divisible-by default: the vocabulary is padded to a multiple of
/// this times the tensor-parallel degree.
constexpr int64_t kMegatronVocabMultiple = 128;
/// Sets s.dtype from a `--dtype` value: fp32, tf32, bf16, fp16, fp8 = the FP8 recipe (dtype
/// bf16, fp8 = true), or amp-bf16 / amp-fp16 = autocast over FP32 weights (dtype bf16 / fp16,
/// amp = true). Errors name `ctx`.
void set_dtype_recipe(TrainSettings& s, const std::string& v, const std::string& ctx);
/// The dtype of the weights, their gradients and the optimizer state (and so of the gradient
/// all-reduce): FP32 under autocast (s.amp), else s.dtype.
DType weight_dtype(const TrainSettings& s);
/// Whether the optimizer steps FP32 master copies of the model's half-precision weights:
/// Megatron-LM's mixed precision (its Float16Optimizer; fused_kernels with BF16 or FP16, the FP8
/// recipe's BF16 weights included; not autocast, whose weights are FP32 already): the memory
/// holds the FP32 master and moments (12 bytes per Adam parameter) beside the half-precision
/// weights. A model loaded in BF16 or FP16 under Hugging Face's recipes steps its own weights
/// (no masters). The step's time is costed on FP32 in the parallel composition (parallel.cpp)
/// without the masters' copies (docs/parallel.md, "mixed precision").
bool fp32_master_weights(const TrainSettings& s);
/// "fp8" for the FP8 recipe, "amp-bf16" / "amp-fp16" for autocast, else the dtype's name.
std::string dtype_recipe(const TrainSettings& s);

/// What one iteration runs (`--mode`): train = forward + backward + optimizer step,
/// fwd-bwd = without the optimizer step, inference = forward only under no-grad
/// (no backward nodes, no saved activations). Stored as TrainSettings::backward and
/// ::optimizer_step; settings JSON carries "backward" only when it is false, so the
/// keys of runs stored before modes existed are unchanged.
enum class RunMode : int { Train = 0, FwdBwd, Inference };
const char* to_string(RunMode m);
/// "train", "fwd-bwd" or "inference"; anything else is an Error naming `ctx` and the value.
RunMode parse_run_mode(const std::string& v, const std::string& ctx = "mode");
RunMode run_mode(const struct TrainSettings& s);
void set_run_mode(struct TrainSettings& s, RunMode m);

/// Reads a config.json object; `ctx` names the source in messages (e.g. the path).
/// Validates everything and throws Error naming the key and value on any problem.
ModelSpec parse_model_config(const nlohmann::json& config, const std::string& ctx = "config");

/// Checks that `key` of `config` (an override such as --sweep config.<key>=...) is one the model
/// uses: a different value of it changes the model parse_model_config reads, or is refused by it.
/// Otherwise throws Error naming the key, the model_type and, where one of its synonyms is what
/// the model reads (num_hidden_layers vs GPT-2's n_layer), that key.
void check_config_key_used(const nlohmann::json& config, const std::string& key, const std::string& ctx);
/// Reads and parses a config.json file (name defaults to the file stem).
ModelSpec load_model_config(const std::string& path);
/// Settings from JSON ({"batch":..,"seq_len":..,"dtype":"fp32",...}); validated.
TrainSettings parse_train_settings(const nlohmann::json& j, const std::string& ctx = "settings");
/// Checks settings against a model (seq_len within max_positions, image divisible by patch...).
void validate_settings(const ModelSpec& m, const TrainSettings& s);

/// Inverse of ModelSpec::to_json() (the form stored in ModelMeasurement::model):
/// every field present in to_json() is read back; throws naming ctx.key on a
/// missing or ill-typed field or an unknown enum name. ("params" is ignored.)
/// Source: src/ir/stored_spec.cpp.
ModelSpec model_spec_from_json(const nlohmann::json& j, const std::string& ctx = "model");

/// Trainable parameter count of the model as Hugging Face builds it.
int64_t parameter_count(const ModelSpec& m);

/// Parameters one token passes through: parameter_count less the experts a token is
/// not routed to (num_experts - moe_top_k of each sparse FFN); parameter_count for
/// dense models. Mixtral-8x7B: 12.9 G of 46.7 G. (Of the whole model: expert_shards is ignored.)
int64_t active_parameter_count(const ModelSpec& m);
/// Parameters of the routed experts (not the router or a shared expert) that this model,
/// or under expert parallelism this GPU's shard (num_experts / expert_shards per sparse FFN),
/// holds; 0 for dense models.
int64_t expert_parameter_count(const ModelSpec& m);
/// Estimated training memory of one iteration, bytes: parameter_count * (2 e +
/// optimizer state: 8 B for Adam/AdamW, 0 for SGD) + activations of Korthikanti
/// et al. 2022 (eq. 2): s b h (34 + 5 a s / h) bytes per layer at a 2-byte dtype,
/// scaled by e / 2, + logits 2 b s V e (e = bytes per element of the dtype).
/// What `plan` checks memory constraints with and `bench models` refuses to
/// allocate beyond the device's memory.
double training_memory_bytes(const ModelSpec& m, const TrainSettings& s);

/// Checks a ModelSpec built by hand (parse_model_config already calls it): sizes
/// in range, heads dividing hidden where required, kv heads dividing heads.
void validate_model_spec(const ModelSpec& m, const std::string& ctx = "config");
/// The optional "scaledl" object beside a config ({"scaledl": {"batch": 8, ...}})
/// parsed with parse_train_settings; defaults when absent.
TrainSettings settings_from_config(const nlohmann::json& config, const std::string& ctx = "config");
/// Sequence length of the decoder (T5: tgt_len or seq_len) and of the input
/// tokens per sample (vision: patches + special tokens; text: seq_len).
int64_t tokens_per_sample(const ModelSpec& m, const TrainSettings& s);
int64_t decoder_tokens_per_sample(const ModelSpec& m, const TrainSettings& s);
/// Supported model_type names, comma separated (for messages and docs).
const char* supported_model_types();

}  // namespace scaledl
