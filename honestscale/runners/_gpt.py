"""A small decoder-only transformer (GPT): pre-norm blocks, causal scaled-dot-product attention, a GELU MLP, an
untied output layer; and the FLOPs it costs per token under each named convention.

Built so that each parallel layout can cut it where the field cuts such models: the query/key/value and first MLP
projections split by columns and the output projections by rows (tensor parallel: the attention's heads are
the local ones, read from the projection's width), the blocks in a list a pipeline stage keeps a slice of (the
embeddings on the first stage, the norm and the output layer on the last), each block a unit for FSDP.

Standard library only at import time: torch is imported by :func:`build`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def record(self) -> dict[str, int]:
        """run_start's ``model_shape``."""
        out = asdict(self)
        out.pop("seq_len")
        return out


PRESETS: dict[str, dict[str, int]] = {
    # name: layers, hidden, heads (ffn 4x hidden): tiny for a 2-core CPU, small and medium as GPT-2's 124M/350M
    "gpt-tiny": {"layers": 2, "hidden": 64, "heads": 4},
    "gpt-mini": {"layers": 4, "hidden": 128, "heads": 4},
    "gpt2-small": {"layers": 12, "hidden": 768, "heads": 12},
    "gpt2-medium": {"layers": 24, "hidden": 1024, "heads": 16},
}


def shape(preset: str, seq_len: int, vocab: int) -> Shape:
    p = PRESETS[preset]
    return Shape(layers=p["layers"], hidden=p["hidden"], heads=p["heads"], ffn_hidden=4 * p["hidden"],
                 vocab=vocab, seq_len=seq_len)  # fmt: skip


@dataclass(frozen=True)
class Params:
    total: int
    embedding: int  # token and position embeddings: a lookup, no matrix multiply

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding


def params(s: Shape) -> Params:
    """Parameter counts of the whole model, from its shape (what every rank's shard adds up to)."""
    d, f = s.hidden, s.ffn_hidden
    block = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d  # q, k, v, o; fc1, fc2; two norms
    embedding = s.vocab * d + s.seq_len * d
    total = embedding + s.layers * block + 2 * d + d * s.vocab  # final norm, untied output layer
    return Params(total=total, embedding=embedding)


def flops_per_token(s: Shape) -> dict[str, int]:
    """Training FLOPs per token (forward and backward, 3x the forward's): 6 N for the weights' multiplies (N: the
    non-embedding parameters) plus attention's scores and weighted sum, 12 L d T over the full T x T matrix
    (PaLM, nanoGPT, torchtitan: ``palm``) or half of it for the causal mask (Megatron: ``megatron``)."""
    n = params(s).non_embedding
    attention = 12 * s.layers * s.hidden * s.seq_len
    return {"palm": 6 * n + attention, "megatron": 6 * n + attention // 2}


def build(s: Shape) -> Any:
    """The model, every parameter on the CPU in fp32 (a layout moves and cuts it)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq = nn.Linear(s.hidden, s.hidden)
            self.wk = nn.Linear(s.hidden, s.hidden)
            self.wv = nn.Linear(s.hidden, s.hidden)
            self.wo = nn.Linear(s.hidden, s.hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            # -1: the heads this rank holds (all of them, or hidden / tp of them under tensor parallelism)
            q, k, v = (m(x).view(b, t, -1, s.head_dim).transpose(1, 2) for m in (self.wq, self.wk, self.wv))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(out.transpose(1, 2).reshape(b, t, -1))  # type: ignore[no-any-return]

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(s.hidden, s.ffn_hidden)
            self.fc2 = nn.Linear(s.ffn_hidden, s.hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(F.gelu(self.fc1(x)))  # type: ignore[no-any-return]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(s.hidden)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(s.hidden)
            self.mlp = MLP()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))  # type: ignore[no-any-return]

    class GPT(nn.Module):
        """Token ids (B, T) in, logits (B, T, vocab) out; a pipeline stage keeps some of the parts (None: not
        here) and passes hidden states (B, T, hidden) between stages."""

        def __init__(self) -> None:
            super().__init__()
            self.tok: nn.Module | None = nn.Embedding(s.vocab, s.hidden)
            self.pos: nn.Module | None = nn.Embedding(s.seq_len, s.hidden)
            self.blocks = nn.ModuleDict({str(i): Block() for i in range(s.layers)})
            self.norm: nn.Module | None = nn.LayerNorm(s.hidden)
            self.head: nn.Module | None = nn.Linear(s.hidden, s.vocab, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.tok is not None and self.pos is not None:
                x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
            for block in self.blocks.values():
                x = block(x)
            if self.norm is not None and self.head is not None:
                x = self.head(self.norm(x))
            return x

    model = GPT()
    for (
        name,
        p,
    ) in model.named_parameters():  # GPT-2's initialisation: small normal weights, residual ones scaled
        if p.dim() >= 2:
            std = 0.02 / (2 * s.layers) ** 0.5 if name.endswith(("wo.weight", "fc2.weight")) else 0.02
            torch.nn.init.normal_(p, 0.0, std)
        elif name.endswith(".bias"):
            torch.nn.init.zeros_(p)
    return model


def loss(logits: Any, targets: Any) -> Any:
    """Mean cross-entropy per token, nats."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
