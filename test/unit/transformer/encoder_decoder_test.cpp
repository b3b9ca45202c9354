// Encoder-decoder models (workload.decoder; workloads/transformer/encoder_decoder.h): what the
// config accepts and refuses, the parameter count, memory and model FLOPs of the decoder stack,
// and the graph of one step (the cross-attention's shapes, counts and order).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/encoder_decoder.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/model_parameters.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

using test_configs::parse_workload;
using test_configs::workload_error;

/// Google's T5 v1.1 XL (google/t5-v1_1-xl config.json: d_model 2048, d_ff 5120, 24 encoder and
/// 24 decoder layers, 32 heads of d_kv 64, vocabulary 32128, gated-gelu, RMS norms without
/// biases, untied output layer; its relative position biases are not modelled: position none).
std::string t5_v1_1_xl(const std::string& extra = "", const std::string& parallelism = "",
                       int tensor = 2) {
  return R"(workload:
  model: transformer
  layers: 24
  decoder: {layers: 24, seq: 128}
  hidden: 2048
  heads: 32
  ffn: 5120
  activation: geglu
  norm: rms_norm
  bias: false
  position: none
  tied_embeddings: false
  vocab: 32128
  seq: 512
  micro_batch: 4
  global_batch: 32
  parallelism:
    tensor: )" +
         std::to_string(tensor) + "\n" + parallelism + extra;
}

/// The kernels of rank 0 whose op is `op` and kernel name `name`.
std::vector<KernelDesc> kernels_named(const TaskGraph& g, std::string_view op,
                                      std::string_view name) {
  std::vector<KernelDesc> found;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind != TaskKind::kKernel || task.rank != 0) continue;
    if (g.name(task.op_name) == op && g.name(task.name) == name) found.push_back(g.kernel(t));
  }
  return found;
}

/// The dense elements of the emitter's units (ModelParameters: the embedding, every layer,
/// the head) on one rank of `c`: what the gradient synchronisation and the optimizer walk.
int64_t emitter_unit_elements(const TransformerConfig& c) {
  const LayerSizes sizes = layer_sizes(c);
  const transformer_emit::ModelParameters params(c, sizes);
  int64_t total = params.embedding().elements[kDenseBuffer] + params.head().elements[kDenseBuffer];
  for (int64_t layer = 0; layer < c.layers + c.decoder_layers; ++layer)
    total += params.layer(layer).elements[kDenseBuffer];
  return total;
}

TEST(EncoderDecoder, ParsesTheDecoderAndTheEncoderIsBidirectional) {
  const TransformerConfig c = parse_workload(t5_v1_1_xl(), 8);
  EXPECT_TRUE(c.encoder_decoder());
  EXPECT_EQ(c.decoder_layers, 24);
  EXPECT_EQ(c.decoder_seq, 128);
  EXPECT_FALSE(c.causal);
  const TransformerConfig decoder = decoder_stack_config(c);
  EXPECT_TRUE(decoder.causal);
  EXPECT_FALSE(decoder.encoder_decoder());
  EXPECT_EQ(decoder.layers, 24);
  EXPECT_EQ(decoder.seq, 128);
  EXPECT_EQ(decoder.micro_batch_tokens(), 4 * 128);
}

TEST(EncoderDecoder, RefusesWhatItDoesNotModelAtTheKey) {
  EXPECT_NE(workload_error(t5_v1_1_xl("  causal: true\n"), 8).find("workload.causal"),
            std::string::npos);
  // Pipeline stages split where the encoder ends (24 + 24 layers: 2, 4, 8 stages), without
  // interleaving.
  EXPECT_EQ(workload_error(t5_v1_1_xl("", "    pipeline: 2\n"), 8), "");
  EXPECT_EQ(workload_error(t5_v1_1_xl("", "    pipeline: 4\n"), 8), "");
  const std::string split = workload_error(t5_v1_1_xl("", "    pipeline: 3\n", 1), 6);
  EXPECT_NE(split.find("workload.parallelism.pipeline"), std::string::npos) << split;
  EXPECT_NE(split.find("split rank"), std::string::npos) << split;
  const std::string interleaved =
      workload_error(t5_v1_1_xl("", "    pipeline: 2\n    virtual_stages: 2\n    data: 1\n", 2), 4);
  EXPECT_NE(interleaved.find("parallelism.virtual_stages"), std::string::npos) << interleaved;
  EXPECT_NE(workload_error(t5_v1_1_xl("", "    sequence: true\n"), 8).find("parallelism.sequence"),
            std::string::npos);
  EXPECT_NE(workload_error(t5_v1_1_xl("  recompute: selective\n"), 8).find("workload.recompute"),
            std::string::npos);
  EXPECT_NE(workload_error(t5_v1_1_xl("", "    fsdp: full_shard\n"), 8).find("parallelism.fsdp"),
            std::string::npos);
  EXPECT_EQ(workload_error(t5_v1_1_xl("  recompute: full\n", "    zero: 1\n"), 8), "");
  // A decoder too long to price: its scores over the encoder's keys pass 2^56 elements.
  std::string huge = t5_v1_1_xl();
  huge.replace(huge.find("seq: 128"), 8, "seq: 16777216");
  const std::string e = workload_error(huge, 8);
  EXPECT_NE(e.find("workload.decoder.seq"), std::string::npos) << e;
}

// The sum of google/t5-v1_1-xl's tensors is 2,849,757,184: per encoder layer 4 x 2048^2
// (attention) + 3 x 2048 x 5120 (gated MLP) + 2 x 2048 (norms) = 48,238,592; per decoder layer
// that plus a cross-attention's 4 x 2048^2 and its norm = 65,017,856; two final norms; the shared
// embedding and the untied output layer, 32128 x 2048 each; and the two relative-position bias
// tables of 32 buckets x 32 heads, which upsim does not model (2,048). One tensor rank: the
// vocabulary is a multiple of 128 already, so Megatron's padding adds no row.
TEST(EncoderDecoder, CountsT5V11XlParameters) {
  const TransformerConfig c = parse_workload(t5_v1_1_xl("", "", 1), 8);
  EXPECT_EQ(transformer_parameters(c), int64_t{2'849'757'184} - 2'048);
}

/// t5_v1_1_xl with T5's relative attention bias (position relative) and `extra`.
std::string t5_relative(const std::string& extra = "", const std::string& parallelism = "",
                        int tensor = 2) {
  std::string yaml = t5_v1_1_xl(extra, parallelism, tensor);
  yaml.replace(yaml.find("position: none"), 14, "position: relative");
  return yaml;
}

// With T5's relative attention bias (position relative, unfused attention) the count is
// google/t5-v1_1-xl's exactly: its two 32-bucket x 32-head tables are the 2,048 above.
TEST(EncoderDecoder, RelativeBiasCompletesT5V11XlsParameters) {
  const TransformerConfig c = parse_workload(t5_relative("  attention: unfused\n", "", 1), 8);
  EXPECT_EQ(transformer_parameters(c), int64_t{2'849'757'184});
  EXPECT_EQ(transformer_stage_parameters(c, 0).total(), transformer_parameters(c));
  EXPECT_EQ(emitter_unit_elements(c), transformer_parameters(c));
}

// The bias needs the materialised scores (unfused attention) and one stage.
TEST(EncoderDecoder, RelativeBiasNeedsTheUnfusedAttentionOnOneStage) {
  const std::string flash = workload_error(t5_relative(), 8);
  EXPECT_NE(flash.find("workload.attention"), std::string::npos) << flash;
  const std::string pipeline =
      workload_error(t5_relative("  attention: unfused\n", "    pipeline: 2\n"), 8);
  EXPECT_NE(pipeline.find("parallelism.pipeline"), std::string::npos) << pipeline;
}

// Per step of one micro-batch: each stack gathers its bias once and scatters its gradient once;
// each self-attention (24 encoder, 24 decoder layers; not the cross-attentions) adds it to its
// scores [4 samples, 16 heads on a rank, q, k] and sums its gradient over the samples.
TEST(EncoderDecoder, RelativeBiasIsAddedToEverySelfAttentionsScores) {
  TransformerConfig c = parse_workload(t5_relative("  attention: unfused\n"), 8);
  c.global_batch = c.micro_batch * c.parallelism.data;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  EXPECT_EQ(kernels_named(g, "aten::embedding", "relative_bias_gather").size(), 2u);
  EXPECT_EQ(kernels_named(g, "EmbeddingBackward0", "relative_bias_scatter").size(), 2u);
  const std::vector<KernelDesc> adds = kernels_named(g, "aten::add", "relative_bias_add");
  ASSERT_EQ(adds.size(), 48u);
  EXPECT_EQ(kernels_named(g, "AddBackward0", "relative_bias_grad_sum").size(), 48u);
  // The encoder's first: 4 x 16 x 512 x 512 scores, 2 bytes each, written once.
  EXPECT_DOUBLE_EQ(adds.front().bytes_written, 4.0 * 16 * 512 * 512 * 2);
}

// The tensors the gradient synchronisation and the optimizer step walk (the embedding, the
// encoder's and then the decoder's layers, the head) are the model's parameters.
TEST(EncoderDecoder, TheEmittersTensorsAreTheModelsParameters) {
  const TransformerConfig c = parse_workload(t5_v1_1_xl("", "", 1), 8);
  EXPECT_EQ(emitter_unit_elements(c), transformer_parameters(c));
}

// With one pipeline stage and one tensor rank the memory model's parameters are the model's, and
// the decoder stack adds its activations and the encoder's output.
TEST(EncoderDecoder, MemoryCountsTheDecoderStack) {
  TransformerConfig c = parse_workload(t5_v1_1_xl(), 8);
  c.parallelism.tensor = 1;
  c.parallelism.data = 8;
  EXPECT_EQ(transformer_stage_parameters(c, 0).total(), transformer_parameters(c));
  TransformerConfig encoder_only = c;
  encoder_only.decoder_layers = 0;
  encoder_only.decoder_seq = 0;
  const auto activations = [](const MemoryFootprint& f) {
    for (const MemoryFootprint::Part& p : f.parts)
      if (p.name == "activations") return p.bytes;
    return int64_t{0};
  };
  const TransformerConfig decoder = decoder_stack_config(c);
  const int64_t stored_decoder =
      c.decoder_layers *
      (transformer_layer_activation_bytes(decoder, false) + cross_attention_activation_bytes(c));
  // The encoder-only model's last-stage extras run on seq tokens, the encoder-decoder's on the
  // decoder's: the difference is the decoder stack, the encoder's output and the decoder
  // embedding's dropout mask (1 byte per element; dropout 0.1, the gpt default), less the
  // extras' difference (final norm and output-layer inputs, 2 + 2 bytes per element, over
  // 512 - 128 tokens per sample).
  const int64_t decoder_mask = c.micro_batch * c.decoder_seq * c.hidden;
  const int64_t extras = 4 * c.micro_batch * (c.seq - c.decoder_seq) * c.hidden;
  EXPECT_EQ(
      activations(transformer_memory(c, 0)) - activations(transformer_memory(encoder_only, 0)),
      stored_decoder + encoder_output_bytes(c) + decoder_mask - extras);
  EXPECT_GT(cross_attention_activation_bytes(c), 0);
  c.recompute = Recompute::kFull;
  EXPECT_EQ(cross_attention_activation_bytes(c), 0);
}

// Model FLOPs restated from the parameters: 6 per matmul parameter and token through it, plus the
// attention's scores and values, 12 x seq_kv x q per query token and layer (Megatron's count).
TEST(EncoderDecoder, ModelFlopsAreSixPerParameterAndTokenPlusTheScores) {
  const TransformerConfig c = parse_workload(t5_v1_1_xl(), 8);
  const double h = 2048, f = 5120, q = 2048;
  const double v = 32256;  // 32128 padded to a multiple of 128 x TP 2 (padded_vocab)
  const double micro_batches = 32.0 / 4.0;
  const double encoder_tokens = 4 * 512, decoder_tokens = 4 * 128;
  const double layers = 24;
  const double encoder_layer = 4 * h * h + 3 * h * f;
  const double decoder_layer = encoder_layer + 2 * h * h;  // + the cross query and output
  const double cross_kv = 2 * h * h;                       // on the encoder's tokens
  const double expected =
      micro_batches *
      (6 * layers *
           (encoder_layer * encoder_tokens + decoder_layer * decoder_tokens +
            cross_kv * encoder_tokens) +
       6 * h * v * decoder_tokens +
       12 * q * layers * (512 * encoder_tokens + 128 * decoder_tokens + 512 * decoder_tokens));
  EXPECT_NEAR(transformer_model_flops(c) / expected, 1.0, 1e-12);
}

TEST(EncoderDecoder, EachDecoderLayerAttendsOverTheEncodersTokens) {
  TransformerConfig c = parse_workload(t5_v1_1_xl("  attention: flash\n"), 8);
  c.global_batch = c.micro_batch * c.parallelism.data;  // one micro-batch
  TaskGraph g;
  generate_transformer(c, {1}, g);
  // The key/value projection runs on the encoder's tokens once per decoder layer, the query
  // projection on the decoder's.
  const std::vector<KernelDesc> kv = kernels_named(g, "aten::linear", "bf16gemm/kv");
  const std::vector<KernelDesc> q = kernels_named(g, "aten::linear", "bf16gemm/q");
  ASSERT_EQ(kv.size(), 24u);
  ASSERT_EQ(q.size(), 24u);
  EXPECT_EQ(kv.front().m, 4 * 512);
  EXPECT_EQ(kv.front().n, 2 * 2048 / 2);
  EXPECT_EQ(q.front().m, 4 * 128);
  // Attention forward: 24 bidirectional encoder layers over 512 keys, 24 causal decoder
  // self-attentions over 128, 24 unmasked cross-attentions of 128 queries over 512 keys.
  int encoder = 0, decoder_self = 0, cross = 0;
  for (const KernelDesc& k :
       kernels_named(g, "aten::_scaled_dot_product_flash_attention", "flash_fwd_kernel")) {
    const AttentionShape& a = k.attention;
    if (a.seq_q == 512 && a.seq_kv == 512 && !a.causal) ++encoder;
    if (a.seq_q == 128 && a.seq_kv == 128 && a.causal) ++decoder_self;
    if (a.seq_q == 128 && a.seq_kv == 512 && !a.causal) ++cross;
  }
  EXPECT_EQ(encoder, 24);
  EXPECT_EQ(decoder_self, 24);
  EXPECT_EQ(cross, 24);
  // The output layer runs on the decoder's tokens; the encoder output's gradient is summed over
  // the 24 decoder layers: 23 adds.
  const std::vector<KernelDesc> logits = kernels_named(g, "aten::linear", "bf16gemm/logits");
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(logits.front().m, 4 * 128);
  EXPECT_EQ(kernels_named(g, "aten::add", "encoder_grad_add").size(), 23u);
}

/// The T5 v1.1 XL config of t5_v1_1_xl on `pipeline` stages of one tensor rank, one data
/// replica, micro-batches of 4 over a global batch of 16.
TransformerConfig t5_pipeline(int64_t pipeline) {
  TransformerConfig c =
      parse_workload(t5_v1_1_xl("  attention: flash\n",
                                "    pipeline: " + std::to_string(pipeline) + "\n    data: 1\n", 1),
                     static_cast<uint32_t>(pipeline));
  c.global_batch = 16;
  return c;
}

// Over 4 stages the encoder holds stages 0 and 1, the decoder 2 and 3: every stage's parameters
// add up to the model's plus the decoder's copy of the word embedding on stage 2 and the output
// layer's on stage 3 (untied here, so only stage 2's is a copy); only the decoder stages hold
// the encoder's output per micro-batch in flight.
TEST(EncoderDecoder, PipelineStagesSplitWhereTheEncoderEnds) {
  const TransformerConfig c = t5_pipeline(4);
  EXPECT_EQ(first_decoder_stage(c), 2);
  int64_t total = 0;
  for (int64_t stage = 0; stage < 4; ++stage)
    total += transformer_stage_parameters(c, stage).total();
  const int64_t word_embedding = c.padded_vocab() * c.hidden;
  EXPECT_EQ(total, transformer_parameters(c) + word_embedding);
  // The emitter's units sum to the same: its embedding unit on stage 0, the decoder's copy in
  // the first decoder layer's unit, the head on stage 3.
  EXPECT_EQ(emitter_unit_elements(c), total);
  // Under 1F1B stage s holds min(4, 4 - s) micro-batches: stage 1 (encoder) 3 of 12 encoder
  // layers; stage 2 (decoder) 2 of 12 decoder layers with their cross-attention, the encoder's
  // output, and the decoder embedding's dropout mask (1 byte an element; dropout 0.1).
  const auto activations = [](const MemoryFootprint& f) {
    for (const MemoryFootprint::Part& p : f.parts)
      if (p.name == "activations") return p.bytes;
    return int64_t{0};
  };
  EXPECT_EQ(activations(transformer_memory(c, 1)),
            3 * 12 * transformer_layer_activation_bytes(c, false));
  const int64_t decoder_layer = transformer_layer_activation_bytes(decoder_stack_config(c), false) +
                                cross_attention_activation_bytes(c);
  EXPECT_EQ(activations(transformer_memory(c, 2)),
            2 * (12 * decoder_layer + encoder_output_bytes(c)) + 2 * 4 * 128 * 2048);
}

/// Bytes of the pipeline messages (send_recv) from rank `from` to rank `to` in one step of `c`.
std::vector<int64_t> p2p_message_bytes(const TransformerConfig& c, RankId from, RankId to) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  std::vector<int64_t> bytes;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    const CollectiveDesc& d = g.collective(id);
    if (d.kind != CollectiveKind::kSendRecv || d.members != std::vector<RankId>{from, to}) {
      continue;
    }
    bytes.push_back(d.bytes);
  }
  return bytes;
}

// A message into an encoder stage or the first decoder stage carries the encoder's hidden state
// (4 x 512 tokens x 2048 x 2 bytes); between decoder stages the decoder's (4 x 128 tokens) too.
// Each micro-batch's forward message has a gradient of the same size coming back.
TEST(EncoderDecoder, DecoderStagesExchangeTheEncodersOutputToo) {
  const TransformerConfig c = t5_pipeline(4);
  const int64_t encoder = 4 * 512 * 2048 * 2;
  const int64_t decoder = 4 * 128 * 2048 * 2;
  // Rank r sends its 4 micro-batches' activations to r + 1, which sends their gradients back.
  for (const auto& [rank, bytes] : std::vector<std::pair<RankId, int64_t>>{
           {0, encoder}, {1, encoder}, {2, encoder + decoder}}) {
    EXPECT_EQ(p2p_message_bytes(c, rank, rank + 1), std::vector<int64_t>(4, bytes))
        << "rank " << rank;
    EXPECT_EQ(p2p_message_bytes(c, rank + 1, rank), std::vector<int64_t>(4, bytes))
        << "rank " << rank + 1;
  }
  // The embedding group: stages 0, 2 (the decoder's copy) and 3 all-reduce the word
  // embedding's gradient (tied here).
  TransformerConfig tied = c;
  tied.tied_embeddings = true;
  TaskGraph g;
  generate_transformer(tied, {1}, g);
  bool found = false;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    if (g.collective_name(id) != "pp:all_reduce") continue;
    EXPECT_EQ(g.collective(id).members, (std::vector<RankId>{0, 2, 3}));
    found = true;
  }
  EXPECT_TRUE(found);
}

// parallelism.encoder_stages splits the stacks unevenly (Megatron-LM's split rank): the
// encoder's 24 layers over the first 3 of 4 stages (8 each), the decoder's 24 on the last; the
// message into the first decoder stage (the last) is the encoder's output alone. A split the
// stacks' layers do not divide, one outside 1 .. pipeline - 1, or one without an
// encoder-decoder model over stages is refused at the key.
TEST(EncoderDecoder, EncoderStagesSplitTheStacksUnevenly) {
  TransformerConfig c = t5_pipeline(4);
  EXPECT_EQ(c.parallelism.encoder_stages, 2);  // the even split's default
  c.parallelism.encoder_stages = 3;
  EXPECT_EQ(first_decoder_stage(c), 3);
  for (int64_t stage = 0; stage < 3; ++stage) {
    EXPECT_EQ(c.chunk_layers(stage).first, 8 * stage);
    EXPECT_EQ(c.chunk_layers(stage).count, 8);
  }
  EXPECT_EQ(c.chunk_layers(3).first, 24);
  EXPECT_EQ(c.chunk_layers(3).count, 24);
  int64_t total = 0;
  for (int64_t stage = 0; stage < 4; ++stage)
    total += transformer_stage_parameters(c, stage).total();
  // The last stage's copy of the word embedding (untied output layer here) is the decoder's.
  EXPECT_EQ(total, transformer_parameters(c));
  const int64_t encoder = 4 * 512 * 2048 * 2;
  EXPECT_EQ(p2p_message_bytes(c, 2, 3), std::vector<int64_t>(4, encoder));
  const std::string pipe = "    pipeline: 4\n    data: 1\n";
  EXPECT_EQ(workload_error(t5_v1_1_xl("", pipe + "    encoder_stages: 3\n", 1), 4), "");
  for (const char* bad : {"5", "4"}) {
    const std::string e =
        workload_error(t5_v1_1_xl("", pipe + "    encoder_stages: " + bad + "\n", 1), 4);
    EXPECT_NE(e.find("parallelism.encoder_stages"), std::string::npos) << bad << ": " << e;
  }
  const std::string one_stage = workload_error(t5_v1_1_xl("", "    encoder_stages: 1\n", 1), 8);
  EXPECT_NE(one_stage.find("parallelism.encoder_stages"), std::string::npos) << one_stage;
}

// One stage and two: the same model FLOPs per step; two stages run it (a T5 3B-shaped step
// completes with its bubble).
TEST(EncoderDecoder, TwoStagesRunTheSameModelFlops) {
  EXPECT_DOUBLE_EQ(transformer_model_flops(t5_pipeline(2)),
                   transformer_model_flops(t5_pipeline(1)));
  TaskGraph g;
  generate_transformer(t5_pipeline(2), {1}, g);
  EXPECT_EQ(g.rank_count(), 2u);
}

}  // namespace
}  // namespace upsim
