"""Small real PyTorch decoders built from HF-style config dicts, for checking the analytical
model on the CPU: GPT-2 style (fused QKV with biases, LayerNorm, GeLU, learned positions,
dropout, tied head) and Llama style (separate q/k/v, RoPE, RMSNorm, SwiGLU, GQA).

`attention="eager"` computes Q K^T, softmax and P V as explicit matmuls (what the FLOP
counter sees; K/V repeated to every head for GQA). `attention="sdpa"` calls
`scaled_dot_product_attention` (CPU flash kernel: saves q, k, v, output, log-sum-exp) in
the [batch, seq, heads, dim] layout, so its output is the out-projection's input.
`fused=True` uses the two fused kernels production stacks use: an RMSNorm that saves its
input and rstd (Apex/Transformer Engine), and a SwiGLU on one gate|up GEMM that saves only
that GEMM's output (Megatron-LM's bias_swiglu).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class FusedRMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd * weight

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        xhat = x * rstd
        grad_weight = (grad * xhat).reshape(-1, x.shape[-1]).sum(0)
        gxhat = grad * weight
        grad_x = rstd * (gxhat - xhat * (gxhat * xhat).mean(-1, keepdim=True))
        return grad_x, grad_weight, None


class FusedSwiGLUFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate_up):
        ctx.save_for_backward(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):
        (gate_up,) = ctx.saved_tensors
        gate, up = gate_up.chunk(2, dim=-1)
        sig = torch.sigmoid(gate)
        silu = gate * sig
        d_gate = grad * up * sig * (1 + gate * (1 - sig))
        return torch.cat([d_gate, grad * silu], dim=-1)


def dropout(x, p, training):
    """The op CUDA's F.dropout runs (bool mask); CPU's F.dropout keeps a float mask."""
    return torch.native_dropout(x, p, True)[0] if training and p > 0 else x


class FusedCrossEntropyFn(torch.autograd.Function):
    """Cross-entropy that keeps only the logits (in their own dtype) and the targets, and
    builds the softmax again in backward: what fused CE kernels save (Megatron-Core,
    Transformer Engine, Liger)."""

    @staticmethod
    def forward(ctx, logits, targets):
        ctx.save_for_backward(logits, targets)
        return F.cross_entropy(logits.float(), targets)

    @staticmethod
    def backward(ctx, grad):
        logits, targets = ctx.saved_tensors
        probs = torch.softmax(logits.float(), dim=-1)
        probs[torch.arange(len(targets)), targets] -= 1
        return (probs * grad / len(targets)).to(logits.dtype), None


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(width)), eps

    def forward(self, x):
        return FusedRMSNormFn.apply(x, self.weight, self.eps)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg, style, attention, dropout):
        super().__init__()
        h = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.d = h // self.heads
        self.style, self.attention, self.dropout = style, attention, dropout
        if style == "mla":
            self._init_mla(cfg)
        elif style == "gpt2":
            self.qkv = nn.Linear(h, 3 * h)
            self.o = nn.Linear(h, h)
        else:
            self.q = nn.Linear(h, self.heads * self.d, bias=False)
            self.k = nn.Linear(h, self.kv_heads * self.d, bias=False)
            self.v = nn.Linear(h, self.kv_heads * self.d, bias=False)
            self.o = nn.Linear(self.heads * self.d, h, bias=False)
        self.selective = False

    def _init_mla(self, cfg):
        """DeepSeek-V2/V3 multi-head latent attention (low-rank q, shared kv latent, a
        decoupled RoPE key shared by all heads)."""
        h, a = cfg["hidden_size"], self.heads
        self.nope, self.rope_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
        self.dv, self.kv_rank = cfg["v_head_dim"], cfg["kv_lora_rank"]
        self.d = self.nope + self.rope_dim
        self.q_down = nn.Linear(h, cfg["q_lora_rank"], bias=False)
        self.q_norm = RMSNorm(cfg["q_lora_rank"])
        self.q_up = nn.Linear(cfg["q_lora_rank"], a * self.d, bias=False)
        self.kv_down = nn.Linear(h, self.kv_rank + self.rope_dim, bias=False)
        self.kv_norm = RMSNorm(self.kv_rank)
        self.kv_up = nn.Linear(self.kv_rank, a * (self.nope + self.dv), bias=False)
        self.o = nn.Linear(a * self.dv, h, bias=False)

    def _mla_qkv(self, x, rope):
        b, s, _ = x.shape
        cos, sin = (t[..., : self.rope_dim] for t in rope)
        q = self.q_up(self.q_norm(self.q_down(x))).view(b, s, self.heads, self.d)
        latent, k_rope = self.kv_down(x).split([self.kv_rank, self.rope_dim], dim=-1)
        kv = self.kv_up(self.kv_norm(latent)).view(b, s, self.heads, self.nope + self.dv)
        k_nope, v = kv.split([self.nope, self.dv], dim=-1)
        k_rope = k_rope.view(b, s, 1, self.rope_dim)
        k_rope = k_rope * cos + rotate_half(k_rope) * sin
        q_nope, q_rope = q.split([self.nope, self.rope_dim], dim=-1)
        q = torch.cat([q_nope, q_rope * cos + rotate_half(q_rope) * sin], dim=-1)
        k = torch.cat([k_nope, k_rope.expand(-1, -1, self.heads, -1)], dim=-1)
        return q, k, v.contiguous()  # as Megatron-Core's MLA does before the kernel

    def core(self, q, k, v):
        """q: [b, s, a, d], k and v: [b, s, kv, d] -> [b, s, a * d]."""
        b, s = q.shape[:2]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.attention == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                 enable_gqa=self.kv_heads != self.heads)
        else:
            rep = self.heads // self.kv_heads
            if rep > 1:
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
            mask = torch.ones(s, s, dtype=torch.bool).triu(1)
            probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            probs = dropout(probs, self.dropout, self.training)
            out = probs @ v
        return out.transpose(1, 2).reshape(b, s, -1)

    def forward(self, x, rope):
        b, s, _ = x.shape
        if self.style == "mla":
            q, k, v = self._mla_qkv(x, rope)
        elif self.style == "gpt2":
            q, k, v = self.qkv(x).split(self.heads * self.d, dim=-1)
            q = q.view(b, s, self.heads, self.d)
            k = k.view(b, s, self.heads, self.d)
            v = v.view(b, s, self.heads, self.d)
        else:
            cos, sin = rope
            q = self.q(x).view(b, s, self.heads, self.d)
            k = self.k(x).view(b, s, self.kv_heads, self.d)
            v = self.v(x).view(b, s, self.kv_heads, self.d)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        if self.selective:
            out = checkpoint(self.core, q, k, v, use_reentrant=True)
        else:
            out = self.core(q, k, v)
        return self.o(out)


class Mlp(nn.Module):
    def __init__(self, cfg, style, fused):
        super().__init__()
        h = cfg["hidden_size"]
        f = cfg["intermediate_size"]
        self.style, self.fused = style, fused
        if style == "gpt2":
            self.up, self.down = nn.Linear(h, f), nn.Linear(f, h)
        elif fused:
            self.gate_up, self.down = nn.Linear(h, 2 * f, bias=False), nn.Linear(f, h,
                                                                              bias=False)
        else:
            self.gate = nn.Linear(h, f, bias=False)
            self.up = nn.Linear(h, f, bias=False)
            self.down = nn.Linear(f, h, bias=False)

    def forward(self, x):
        if self.style == "gpt2":
            return self.down(F.gelu(self.up(x), approximate="tanh"))
        if self.fused:
            return self.down(FusedSwiGLUFn.apply(self.gate_up(x)))
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Token-choice top-k MoE as Megatron-Core's dropless path runs it: fp32 softmax router,
    tokens permuted by expert, one SwiGLU per expert, weighted un-permute (Mixtral)."""

    def __init__(self, cfg, fused):
        super().__init__()
        self.k = cfg["num_experts_per_tok"]
        self.router = nn.Linear(cfg["hidden_size"], cfg["num_local_experts"], bias=False)
        self.experts = nn.ModuleList(Mlp(cfg, "llama", fused)
                                     for _ in range(cfg["num_local_experts"]))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = torch.softmax(self.router(x).float(), dim=-1)
        weights, chosen = probs.topk(self.k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        order = chosen.reshape(-1).argsort()
        token = order // self.k  # the token each permuted row came from
        permuted = x[token]
        counts = torch.bincount(chosen.reshape(-1), minlength=len(self.experts)).tolist()
        outputs = torch.cat([expert(part) for expert, part in
                             zip(self.experts, permuted.split(counts), strict=True)])
        weighted = outputs * weights.reshape(-1)[order, None]
        index = token[:, None].expand(-1, x.shape[-1])
        return torch.zeros_like(x).scatter_add(0, index, weighted).reshape(shape)


class Block(nn.Module):
    def __init__(self, cfg, style, attention, fused, dropout):
        super().__init__()
        h = cfg["hidden_size"]
        norm = (lambda: nn.LayerNorm(h)) if style == "gpt2" else (lambda: RMSNorm(h))
        self.norm1, self.norm2 = norm(), norm()
        self.attn = Attention(cfg, style, attention, dropout)
        mlp_style = "gpt2" if style == "gpt2" else "llama"
        self.mlp = MoE(cfg, fused) if "num_local_experts" in cfg else Mlp(cfg, mlp_style, fused)
        self.dropout = dropout

    def forward(self, x, rope=None):
        x = x + dropout(self.attn(self.norm1(x), rope), self.dropout, self.training)
        return x + dropout(self.mlp(self.norm2(x)), self.dropout, self.training)


class Decoder(nn.Module):
    """recompute: "none", "selective" (attention core) or "full" (every block)."""

    def __init__(self, cfg, *, attention="eager", fused=False, dropout=0.0, recompute="none",
                 fused_loss=False):
        super().__init__()
        self.style = {"gpt2": "gpt2", "deepseek_v3": "mla"}.get(cfg["model_type"], "llama")
        cfg = _normalise(cfg)
        h, self.vocab = cfg["hidden_size"], cfg["vocab_size"]
        self.embed = nn.Embedding(self.vocab, h)
        self.pos = nn.Embedding(cfg["max_position_embeddings"], h) if self.style == "gpt2" \
            else None
        self.blocks = nn.ModuleList(Block(cfg, self.style, attention, fused, dropout)
                                    for _ in range(cfg["num_hidden_layers"]))
        self.norm = nn.LayerNorm(h) if self.style == "gpt2" else RMSNorm(h)
        self.head = None if cfg.get("tie_word_embeddings", self.style == "gpt2") else \
            nn.Linear(h, self.vocab, bias=False)
        self.dropout, self.recompute, self.fused_loss = dropout, recompute, fused_loss
        self.d = cfg.get("qk_rope_head_dim") or h // cfg["num_attention_heads"]
        for block in self.blocks:
            block.attn.selective = recompute == "selective"

    def rope(self, s):
        inv = 1.0 / (10000 ** (torch.arange(0, self.d, 2, dtype=torch.float32) / self.d))
        angles = torch.outer(torch.arange(s, dtype=torch.float32), inv)
        angles = torch.cat([angles, angles], dim=-1)[None, :, None, :]
        dtype = self.embed.weight.dtype
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def forward(self, ids, targets):
        s = ids.shape[1]
        x = self.embed(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(s))
        x = dropout(x, self.dropout, self.training)
        rope = self.rope(s) if self.style != "gpt2" else None
        for block in self.blocks:
            if self.recompute == "full":
                x = checkpoint(lambda t, blk=block: blk(t, rope), x, use_reentrant=True)
            else:
                x = block(x, rope)
        weight = self.embed.weight if self.head is None else self.head.weight
        logits = F.linear(self.norm(x), weight).view(-1, self.vocab)
        if self.fused_loss:
            return FusedCrossEntropyFn.apply(logits, targets.view(-1))
        return F.cross_entropy(logits.float(), targets.view(-1))


def _normalise(cfg):
    """GPT-2 key names to the Llama ones the modules read."""
    if cfg["model_type"] != "gpt2":
        return cfg
    return dict(cfg, hidden_size=cfg["n_embd"], num_attention_heads=cfg["n_head"],
                num_hidden_layers=cfg["n_layer"], intermediate_size=cfg.get(
                    "n_inner", 4 * cfg["n_embd"]), max_position_embeddings=cfg["n_positions"])


class LoRALinear(nn.Module):
    """base(x) + B(A(x)) with the base frozen (Hu et al. 2021; PEFT without dropout)."""

    def __init__(self, base: nn.Linear, rank: int):
        super().__init__()
        self.base = base
        self.A = nn.Linear(base.in_features, rank, bias=False)
        self.B = nn.Linear(rank, base.out_features, bias=False)

    def forward(self, x):
        return self.base(x) + self.B(self.A(x))


LORA_MODULES = {"attention": ("q", "k", "v", "o"), "q_proj": ("q",), "v_proj": ("v",),
                "all-linear": ("q", "k", "v", "o", "gate_up", "down")}


def add_lora(model, targets, rank):
    """Freeze every weight and adapt the named modules of a fused Llama-style Decoder. The
    embedding output requires grad, as PEFT's enable_input_require_grads() arranges."""
    for p in model.parameters():
        p.requires_grad_(False)
    names = {n for t in targets for n in LORA_MODULES[t]}
    for block in model.blocks:
        for parent in (block.attn, block.mlp):
            for name in names:
                if isinstance(getattr(parent, name, None), nn.Linear):
                    setattr(parent, name, LoRALinear(getattr(parent, name), rank))
    model.embed.register_forward_hook(lambda module, args, out: out.requires_grad_(True))
    return model


def saved_activation_bytes(model, ids, targets) -> int:
    """Bytes saved for backward by one forward, de-duplicated by storage, without the
    parameters (a parameter saved by a GEMM is a weight, not an activation)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(ids, targets)
    return sum(storages.values()), loss


class _Held:
    """A saved tensor while autograd holds it: counts its storage in `live` until freed."""

    def __init__(self, tensor, live):
        self.tensor, self.live = tensor, live
        storage = tensor.untyped_storage()
        self.key = storage.data_ptr()
        live.hold(self.key, storage.nbytes())

    def __del__(self):
        self.live.release(self.key)


class _Live:
    def __init__(self, params):
        self.params, self.count, self.nbytes = params, {}, {}
        self.now = self.peak = 0

    def hold(self, key, nbytes):
        if key in self.params:
            return
        if not self.count.get(key):
            self.nbytes[key] = nbytes
            self.now += nbytes
            self.peak = max(self.peak, self.now)
        self.count[key] = self.count.get(key, 0) + 1

    def release(self, key):
        if key in self.params:
            return
        self.count[key] -= 1
        if not self.count[key]:
            self.now -= self.nbytes.pop(key)
            del self.count[key]


def peak_saved_activation_bytes(model, ids, targets) -> int:
    """The most bytes autograd holds for backward at any moment of one forward and
    backward, de-duplicated by storage, without the parameters: with recompute, the saved
    inputs plus what a checkpointed segment's backward rebuilds (the hooks also see the
    recomputation, which runs inside backward)."""
    live = _Live({p.untyped_storage().data_ptr() for p in model.parameters()})
    with torch.autograd.graph.saved_tensors_hooks(lambda t: _Held(t, live),
                                                  lambda held: held.tensor):
        model(ids, targets).backward()
    return live.peak
