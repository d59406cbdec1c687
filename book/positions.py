"""Positions that generalise (chapter 10): rotary position embeddings (RoPE) and attention
with linear biases (ALiBi), built for chapter 9's GPT through its hooks, and an experiment
that trains the same small GPT with five ways of encoding positions and tests it on
sequences longer than any it saw in training.
"""
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .device import one_cpu_thread
from .gpt import GPT
from .selfattention import frequencies, sinusoidal_table


# -- RoPE: rotate each pair of features by an angle proportional to the position -----------

def rope_angles(positions, head_size):
    """angles[t, j] = positions[t] * theta_j with chapter 6's frequencies
    theta_j = 1 / 10000^(2j / head_size): (n, head_size / 2), in float64."""
    if head_size % 2:
        raise ValueError(f"RoPE rotates pairs of features, so the feature size must be "
                         f"even; got {head_size}")
    theta = frequencies(head_size).to(positions.device)             # (hs/2,), float64
    return positions.to(torch.float64)[:, None] * theta             # (n, hs/2)


def rope_rotations(positions, head_size):
    """R_p for every position p: (n, hs, hs), block-diagonal, with the rotation
    [[cos, -sin], [sin, cos]] by the angle p * theta_j on features 2j and 2j + 1."""
    angles = rope_angles(positions, head_size)                      # (n, hs/2)
    cos = torch.diag_embed(angles.cos())                            # (n, hs/2, hs/2)
    sin = torch.diag_embed(angles.sin())                            # (n, hs/2, hs/2)
    R = torch.zeros(len(positions), head_size, head_size, dtype=torch.float64,
                    device=positions.device)                        # (n, hs, hs)
    R[:, 0::2, 0::2], R[:, 0::2, 1::2] = cos, -sin                  # rows 2j
    R[:, 1::2, 0::2], R[:, 1::2, 1::2] = sin, cos                   # rows 2j + 1
    return R


def apply_rope_rotation(X, positions):
    """RoPE with real rotations: the vector at position p times the matrix R_p.
    X (..., n, hs) at `positions` (n,) -> (..., n, hs)."""
    R = rope_rotations(positions, X.shape[-1]).to(X.dtype)          # (n, hs, hs)
    return (R @ X.unsqueeze(-1)).squeeze(-1)                        # (..., n, hs)


def apply_rope(X, positions, pairing="interleaved"):
    """RoPE as complex multiplication: a pair of features is a complex number z, rotating it
    by the angle a is z * e^(ia). `pairing` says which features form a pair: "interleaved"
    (2j, 2j + 1), as in the RoFormer paper, or "half" (j, j + hs/2), as in GPT-NeoX.
    X (..., n, hs) at `positions` (n,) -> (..., n, hs). The angles are computed in float64
    and the product in at least float32, whatever X's dtype."""
    hs = X.shape[-1]
    angles = rope_angles(positions, hs)                             # (n, hs/2)
    dtype = torch.promote_types(X.dtype, torch.float32)             # float16 -> float32
    Y = X.to(dtype)
    if pairing == "interleaved":
        Z = torch.view_as_complex(Y.reshape(*X.shape[:-1], hs // 2, 2).contiguous())
    elif pairing == "half":
        Z = torch.complex(Y[..., :hs // 2], Y[..., hs // 2:])       # (..., n, hs/2)
    else:
        raise ValueError(f"pairing must be 'interleaved' or 'half', got {pairing!r}")
    rotation = torch.polar(torch.ones_like(angles), angles).to(Z.dtype)  # e^(i angle)
    Z = Z * rotation                                                # (..., n, hs/2)
    if pairing == "interleaved":
        Y = torch.view_as_real(Z).flatten(-2)                       # (..., n, hs)
    else:
        Y = torch.cat([Z.real, Z.imag], dim=-1)                     # (..., n, hs)
    return Y.to(X.dtype)


class RoPE(nn.Module):
    """RoPE as the GPT's `qk_transform`: queries (b, h, n, hs) and keys (b, kv, n, hs) are
    rotated at their absolute positions; no parameters."""

    def __init__(self, pairing="interleaved"):
        super().__init__()
        self.pairing = pairing

    def forward(self, X, positions):
        return apply_rope(X, positions, self.pairing)


# -- ALiBi: a penalty on the scores, linear in the distance --------------------------------

def alibi_slopes(num_heads):
    """The ALiBi paper's slope of each head. For h heads, h a power of 2, the geometric
    sequence 2^(-8/h), 2^(-16/h), ..., 2^(-8); otherwise the slopes of the largest power
    of 2 below h, c, followed by every other slope for 2c (the first h - c of them)."""
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
    c = 1 << (num_heads.bit_length() - 1)              # the largest power of 2 <= h
    slopes = [2 ** (-8 * k / c) for k in range(1, c + 1)]
    if c < num_heads:
        slopes += alibi_slopes(2 * c)[0::2][:num_heads - c]
    return slopes


class ALiBi(nn.Module):
    """ALiBi as the GPT's `score_bias`: head k adds -m_k (i - j) to the score of query i
    and key j, the distance back times the head's slope; no parameters."""

    def __init__(self, num_heads):
        super().__init__()
        slopes = torch.tensor(alibi_slopes(num_heads), dtype=torch.float32)
        self.register_buffer("slopes", slopes, persistent=False)    # (h,), moves with .to()

    def forward(self, query_positions, key_positions):
        offset = key_positions[None, :] - query_positions[:, None]     # (n, t): j - i
        return self.slopes[:, None, None] * offset                     # (h, n, t)


def alibi_bias(num_heads, n):
    """The bias ALiBi adds to a causal model's scores, (num_heads, n, n): -m_k (i - j).
    (Above the diagonal, where j > i, the causal mask hides it.)"""
    positions = torch.arange(n)
    return ALiBi(num_heads)(positions, positions)


# -- Absolute positions for the GPT, and a model per encoding ------------------------------

class SinusoidalPositions(nn.Module):
    """Chapter 6's sinusoidal encoding as the GPT's `position_embedding`: positions (n,) ->
    rows of P (n, d), times `scale` (P's entries are about 1 in size)."""

    def __init__(self, num_hiddens, max_len, scale=1.0):
        super().__init__()
        P = sinusoidal_table(max_len, num_hiddens) * scale
        self.register_buffer("P", P, persistent=False)              # (max_len, d)

    def forward(self, positions):
        return self.P[positions]                                    # (n, d)


ENCODINGS = ("none", "sinusoidal", "learned", "RoPE", "ALiBi")


def make_gpt(encoding, config, sinusoidal_scale=0.02 * math.sqrt(2)):
    """Chapter 9's GPT with one of ENCODINGS: absolute positions added to the input
    (sinusoidal, learned), relative ones inside attention (RoPE, ALiBi), or none at all.
    Everything else, the initial weights included (same seed), is the same. The sinusoidal
    table is scaled to the size of the learned one at initialisation (entries of standard
    deviation 0.02; sines and cosines have 1 / sqrt(2)), so that only the kind of table
    differs."""
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    hooks = {"RoPE": dict(qk_transform=RoPE()),
             "ALiBi": dict(score_bias=ALiBi(config.num_heads))}.get(encoding, {})
    model = GPT(config, **hooks)
    if encoding == "sinusoidal":
        model.position_embedding = SinusoidalPositions(config.num_hiddens,
                                                       config.block_size, sinusoidal_scale)
    elif encoding != "learned":
        model.position_embedding = None
    return model


# -- The experiment: repeat a pattern, at lengths never seen in training -------------------

def repeating_batch(batch_size, length, vocab_size, min_period, max_period, generator):
    """Sequences that repeat a pattern: each row draws a period k in [min_period,
    max_period] and k distinct tokens, and repeats them to length + 1 tokens. Returns
    tokens (batch, length + 1) and which next tokens can be known, (batch, length): the
    one after position t can once t >= k, when the token at t is the first repeated one
    (before, a new token could still follow)."""
    k = torch.randint(min_period, max_period + 1, (batch_size,), generator=generator)
    pattern = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=-1)
    t = torch.arange(length + 1)
    tokens = pattern.gather(1, t % k[:, None])                     # (batch, length + 1)
    known = t[None, :-1] >= k[:, None]                             # (batch, length)
    return tokens, known


@dataclass
class RepeatTask:
    """The experiment's task and training recipe."""
    vocab_size: int = 16
    min_period: int = 3
    max_period: int = 8
    train_length: int = 16
    num_steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3

    def batch(self, batch_size, length, generator):
        return repeating_batch(batch_size, length, self.vocab_size, self.min_period,
                               self.max_period, generator)


@torch.no_grad()
def repeat_accuracy(model, task, length, num_sequences=256, seed=1234):
    """The share of knowable next tokens that `model` predicts right (greedy), on
    `num_sequences` fresh sequences of `length` tokens (the same ones for every model)."""
    device = next(model.parameters()).device
    tokens, known = task.batch(num_sequences, length, torch.Generator().manual_seed(seed))
    tokens, known = tokens.to(device), known.to(device)
    training = model.training
    model.eval()
    right = (model(tokens[:, :-1]).argmax(dim=-1) == tokens[:, 1:]) & known
    model.train(training)
    return right.sum().item() / known.sum().item()


def train_repeat(model, task, seed=0):
    """Train on sequences of task.train_length tokens: cross-entropy on the knowable next
    tokens, AdamW, a warm-up of 30 steps then a linear decay to zero, gradients clipped
    to norm 1. Returns the loss of every step."""
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=task.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 30) * (1 - step / task.num_steps))
    generator = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    with one_cpu_thread(device):
        for _ in range(task.num_steps):
            tokens, known = task.batch(task.batch_size, task.train_length, generator)
            tokens, known = tokens.to(device), known.to(device)
            logits = model(tokens[:, :-1])                          # (batch, length, V)
            loss = F.cross_entropy(logits[known], tokens[:, 1:][known])
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    return losses


# -- The widget: the score of one fixed token against itself at every pair of positions ----

SCHEMES = ("sinusoidal", "RoPE", "ALiBi", "none")


def score_map(scheme, head, n=24, num_hiddens=64, num_heads=4, seed=0):
    """Scores (n, n), float64, of one fixed token vector x placed at every position, for one
    head of random projections W_q, W_k (the same for every scheme): entry [i, j] is the
    score of the query at position i with the key at position j (j > i, masked in a causal
    model, is NaN). Content is the same everywhere, so any variation comes from positions:
    "sinusoidal" adds chapter 6's p_i to x before projecting, "RoPE" rotates the projected
    q and k, "ALiBi" adds -m (i - j) to q.k / sqrt(head size)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if not 0 <= head < num_heads:
        raise ValueError(f"head must be in 0..{num_heads - 1}, got {head}")
    g = torch.Generator().manual_seed(seed)
    hs = num_hiddens // num_heads
    x = torch.randn(num_hiddens, generator=g, dtype=torch.float64)          # (d,)
    W_q, W_k = torch.randn(2, num_heads, hs, num_hiddens, generator=g,
                           dtype=torch.float64) / math.sqrt(num_hiddens)  # (h, hs, d) each
    X = x.expand(n, num_hiddens)                                            # (n, d)
    if scheme == "sinusoidal":
        X = X + sinusoidal_table(n, num_hiddens).double()
    Q, K = X @ W_q[head].T, X @ W_k[head].T                                 # (n, hs) each
    positions = torch.arange(n)
    if scheme == "RoPE":
        Q, K = apply_rope(Q, positions), apply_rope(K, positions)
    scores = Q @ K.T / math.sqrt(hs)                                        # (n, n)
    if scheme == "ALiBi":
        scores = scores + ALiBi(num_heads)(positions, positions)[head].double()
    return scores.masked_fill(positions[None, :] > positions[:, None], float("nan"))


def diagonal_spread(scores):
    """How much a score still depends on where the pair is, once the distance i - j is
    fixed: the standard deviation along each diagonal (j <= i, at least 2 entries),
    averaged over the diagonals."""
    n = scores.shape[0]
    spreads = [scores.diagonal(-k).std().item() for k in range(n - 1)]
    return sum(spreads) / len(spreads)
