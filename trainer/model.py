"""Models: an MLP for any flat features, a small CNN for square images (digits is 8x8), and a GPT-style
causal language model (``transformer``) on byte tokens (trainer.text)."""

import torch
from torch import nn
from torch.nn import functional as F

# --model-size of the transformer: width, layers, heads (the feed-forward is 4x the width). base is
# BERT-base's shape (768 wide, 12 layers, 12 heads; about 85M parameters with a 256-token vocabulary).
TRANSFORMER_SIZES = {
    "tiny": {"width": 128, "layers": 2, "heads": 4},
    "small": {"width": 512, "layers": 6, "heads": 8},
    "base": {"width": 768, "layers": 12, "heads": 12},
}


class MLP(nn.Module):
    """Linear + ReLU stack."""

    def __init__(self, in_features, hidden, num_classes):
        super().__init__()
        layers = []
        width = in_features
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return self.net(x)


class SmallCNN(nn.Module):
    """Two 3x3 convolutions, a pooled 4x4 map, then one hidden dense layer."""

    def __init__(self, side, hidden, num_classes):
        super().__init__()
        self.side = side
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d((4, 4)),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, hidden[0]), nn.ReLU(), nn.Linear(hidden[0], num_classes))

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return self.head(self.features(x.view(-1, 1, self.side, self.side)))


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention (scaled_dot_product_attention, which picks a fused
    kernel where the device has one) and a GELU feed-forward."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):  # pylint: disable=missing-function-docstring
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.ff(self.norm2(x))


class CausalLM(nn.Module):
    """GPT-style language model: token and learned position embeddings, blocks, a final norm and an output
    layer tied to the token embedding. Input (batch, seq) token ids; output (batch, seq, vocab) logits."""

    def __init__(self, vocab, seq_len, width, layers, heads):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _layer in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, idx):  # pylint: disable=missing-function-docstring
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def transformer_flops_per_sample(spec):
    """Training FLOPs of one sequence (forward + backward = 3x forward): 6 per parameter and token in the
    matrix products, plus attention's two (seq x seq) products per layer."""
    size = TRANSFORMER_SIZES[spec["size"]]
    width, layers, seq, vocab = size["width"], size["layers"], spec["in_features"], spec["num_classes"]
    matmul_params = layers * 12 * width * width + vocab * width
    return 6 * seq * matmul_params + 3 * layers * 4 * seq * seq * width


def model_spec(name, in_features, num_classes, hidden, image_side=None, size=None):
    """What build_model needs; stored with the weights in model.pt so the model can be rebuilt.

    For the transformer, in_features is the sequence length, num_classes the vocabulary and size a
    TRANSFORMER_SIZES key."""
    spec = {"name": name, "in_features": int(in_features), "num_classes": int(num_classes),
            "hidden": [int(h) for h in hidden], "image_side": image_side}
    if name == "transformer":
        spec["size"] = size
    return spec


def build_model(spec):
    """An nn.Module from a model_spec dict."""
    if spec["name"] == "mlp":
        return MLP(spec["in_features"], spec["hidden"], spec["num_classes"])
    if spec["name"] == "cnn":
        if not spec.get("image_side"):
            raise ValueError(f"cnn needs square images, the data has {spec['in_features']} features")
        return SmallCNN(spec["image_side"], spec["hidden"], spec["num_classes"])
    if spec["name"] == "transformer":
        size = TRANSFORMER_SIZES[spec["size"]]
        return CausalLM(spec["num_classes"], spec["in_features"], size["width"], size["layers"], size["heads"])
    raise ValueError(f"unknown model {spec['name']!r}")
