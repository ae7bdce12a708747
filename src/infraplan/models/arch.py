"""A transformer decoder described by the few numbers the planner needs.

`ModelArch` is family-neutral: `families.py` turns a Hugging Face `config.json` of any
supported family into one. Symbols used in comments and papers: h = hidden size,
L = layers, a = attention heads, k = key/value heads, d = head dim, f = FFN width,
V = vocabulary, E = routed experts, t = experts per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infraplan.errors import InputError
from infraplan.models.stored import StoredWeights

# Per-layer work (parameter counts, MoE layer lists, pipeline stages) is linear in the layer
# count; the deepest published transformers have a few hundred layers (Megatron-LM's 1T
# model: 128). A config far past that is a typo, and it would hang the planner.
MAX_LAYERS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionSpec:
    num_heads: int
    num_kv_heads: int
    head_dim: int  # query/key width per head (MLA: nope + rope parts)
    v_head_dim: int  # value width per head (equal to head_dim except in MLA)
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False  # a norm on q and k: per head (Qwen3, Gemma 3) ...
    qk_norm_full_width: bool = False  # ... or over the whole projection (OLMo 2, Cohere)
    sinks: bool = False  # a learned sink logit per head (gpt-oss)
    # Multi-head latent attention (DeepSeek-V2/V3): low-rank q and a shared kv latent.
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    sliding_window: int | None = None
    # layers that attend within the window (None: all); Gemma 2, gpt-oss alternate local
    # and global layers, so only some layers' keys and cache are capped
    windowed_layers: int | None = None

    @property
    def kind(self) -> Literal["mha", "gqa", "mqa", "mla"]:
        if self.kv_lora_rank is not None:
            return "mla"
        if self.num_kv_heads == self.num_heads:
            return "mha"
        return "mqa" if self.num_kv_heads == 1 else "gqa"

    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def out_width(self) -> int:
        return self.num_heads * self.v_head_dim


@dataclass(frozen=True, slots=True, kw_only=True)
class MlpSpec:
    intermediate_size: int
    gated: bool  # SwiGLU-style: gate and up projections, then down
    activation: str  # silu | gelu | gelu_tanh | relu2 | relu
    bias: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeSpec:
    num_experts: int
    experts_per_token: int
    expert: MlpSpec  # one routed expert
    shared: MlpSpec | None = None  # the shared experts fused into one MLP (width = sum)
    shared_gate: bool = False  # Qwen2-MoE: sigmoid gate Linear(h, 1) on the shared expert
    # Group-limited routing (DeepSeek-V2/V3 n_group, topk_group): the experts form
    # `expert_groups` equal groups and a token routes only into `groups_per_token` of them
    expert_groups: int = 1
    groups_per_token: int = 1
    router_bias: bool = False  # gpt-oss's router Linear has a bias


@dataclass(frozen=True, slots=True, kw_only=True)
class Tower:
    """An encoder beside the language model in a multimodal checkpoint (its vision_config or
    audio_config): reported with an estimate of its size, not planned."""
    kind: str  # vision | audio: the config key without "_config"
    model_type: str
    layers: int | None
    hidden_size: int | None
    params_estimate: int | None  # None when the config gives no layer shapes


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelArch:
    name: str
    family: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    norm: Literal["layernorm", "rmsnorm"]
    norm_bias: bool  # LayerNorm with a bias vector
    norm_weight: bool = True  # False: non-parametric LayerNorm (OLMo 1)
    learned_positions: bool  # GPT-2 style absolute position table (else RoPE/ALiBi)
    position_offset: int = 0  # extra rows of that table (OPT reserves 2 for padding)
    norms_per_layer: int = 2  # pre-attention and pre-MLP (GPT-J, Falcon-7B share one)
    embedding_norm: bool = False  # a norm right after the token embedding (BLOOM)
    lm_head_bias: bool = False  # a bias on the output projection (GPT-J)
    # Attention and MLP read the same input and their outputs are summed (GPT-J, GPT-NeoX,
    # Falcon; PaLM Sec. 2): tensor parallelism reduces the sum once per layer, not twice
    parallel_residual: bool = False
    attention: AttentionSpec
    mlp: MlpSpec  # the dense FFN (every layer of a dense model, the dense layers of an MoE)
    moe: MoeSpec | None = None
    moe_layers: tuple[int, ...] = ()  # indices of the layers whose FFN is the MoE block
    mtp_layers: int = 0  # DeepSeek-V3 multi-token-prediction modules: reported, not counted
    towers: tuple[Tower, ...] = ()  # a multimodal checkpoint's encoders: reported, not counted
    hidden_dropout: float = 0.0  # dropout on embeddings and after attention / MLP (GPT-2: 0.1)
    attention_dropout: float = 0.0  # dropout on the attention probabilities
    dtype: str = "bf16"  # the checkpoint's dtype from config.json
    # a quantized checkpoint's weight format (its quantization_config); None: 16-bit
    stored: StoredWeights | None = None
    # a quantization_config that `stored` could not map ('gptq, 3 bits'): planned 16-bit
    unmodelled_quantization: str = ""

    def __post_init__(self):
        if self.num_layers > MAX_LAYERS:
            raise InputError(f"{self.name}: {self.num_layers:,} layers is more than the "
                             f"{MAX_LAYERS:,} infraplan handles",
                             fix="check num_hidden_layers (n_layer) in the config.json")

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and len(self.moe_layers) > 0

    @property
    def num_moe_layers(self) -> int:
        return len(self.moe_layers)

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    def layer_is_moe(self, index: int) -> bool:
        return index in self.moe_layers

    @property
    def num_windowed_layers(self) -> int:
        """Layers whose attention keys and cache a sliding window caps."""
        at = self.attention
        if not at.sliding_window:
            return 0
        return self.num_layers if at.windowed_layers is None else at.windowed_layers
