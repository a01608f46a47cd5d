#pragma once
// A small decoder-only transformer over bytes, written with torch::nn: token and position
// embeddings, pre-norm blocks of causal self-attention and a GELU feed-forward layer, and a
// linear head to the 256 byte values. Example code.
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

namespace lm {

/// The sizes of the network.
struct Shape {
  std::int64_t vocabulary = 256;  // bytes
  std::int64_t context = 32;      // tokens a sample sees
  std::int64_t width = 64;        // the model's dimension
  std::int64_t layers = 2;
  std::int64_t heads = 4;
  std::int64_t hidden = 512;      // the feed-forward layer's width
};

/// Multi-head self-attention in which each position sees itself and the positions before it.
struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(std::int64_t width, std::int64_t heads)
      : heads(heads),
        qkv(register_module("qkv", torch::nn::Linear(width, 3 * width))),
        out(register_module("out", torch::nn::Linear(width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) {  // [batch, time, width]
    const std::int64_t B = x.size(0), T = x.size(1), W = x.size(2), d = W / heads;
    const auto parts = qkv(x).chunk(3, -1);
    auto split = [&](const torch::Tensor& t) { return t.view({B, T, heads, d}).transpose(1, 2); };  // [B, heads, T, d]
    const torch::Tensor q = split(parts[0]), k = split(parts[1]), v = split(parts[2]);
    torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    const torch::Tensor future = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const torch::Tensor y = torch::matmul(torch::softmax(scores, -1), v);
    return out(y.transpose(1, 2).contiguous().view({B, T, W}));
  }
  std::int64_t heads;
  torch::nn::Linear qkv, out;
};
TORCH_MODULE(CausalSelfAttention);

/// x + attention(norm(x)), then x + feed_forward(norm(x)).
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Shape& s)
      : norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.width})))),
        attention(register_module("attention", CausalSelfAttention(s.width, s.heads))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.width})))),
        up(register_module("up", torch::nn::Linear(s.width, s.hidden))),
        down(register_module("down", torch::nn::Linear(s.hidden, s.width))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = x + attention(norm1(x));
    return x + down(torch::gelu(up(norm2(x))));
  }
  torch::nn::LayerNorm norm1;
  CausalSelfAttention attention;
  torch::nn::LayerNorm norm2;
  torch::nn::Linear up, down;
};
TORCH_MODULE(Block);

/// Bytes [batch, time] (int64) -> logits [batch, time, 256].
struct TinyLMImpl : torch::nn::Module {
  explicit TinyLMImpl(const Shape& s)
      : tokens(register_module("tokens", torch::nn::Embedding(s.vocabulary, s.width))),
        positions(register_module("positions", torch::nn::Embedding(s.context, s.width))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.width})))),
        head(register_module("head", torch::nn::Linear(s.width, s.vocabulary))) {
    for (std::int64_t i = 0; i < s.layers; ++i) blocks->push_back(Block(s));
    torch::NoGradGuard no_grad;  // small embeddings, as GPT-2 starts
    torch::nn::init::normal_(tokens->weight, 0.0, 0.02);
    torch::nn::init::normal_(positions->weight, 0.0, 0.02);
  }
  torch::Tensor forward(const torch::Tensor& bytes) {
    const torch::Tensor where = torch::arange(bytes.size(1), torch::TensorOptions().dtype(torch::kLong));
    torch::Tensor x = tokens(bytes) + positions(where);
    for (const auto& block : *blocks) x = block->as<BlockImpl>()->forward(x);
    return head(norm(x));
  }
  torch::nn::Embedding tokens, positions;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
};
TORCH_MODULE(TinyLM);

/// The network with libtorch's initialisation from `seed`. libtorch draws from one generator per
/// process, so workers that build theirs at once (threads) take turns.
inline TinyLM make(const Shape& s, std::uint64_t seed) {
  static std::mutex generator;
  std::lock_guard lock(generator);
  torch::manual_seed(seed);
  return TinyLM(s);
}

/// The mean cross-entropy of the next byte, over every position of every sample.
inline torch::Tensor next_byte_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

}  // namespace lm
