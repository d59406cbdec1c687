"""Chapter 3: the measurements behind the scoring functions, and the widgets' functions.

Why scaled dot-product attention divides by sqrt(d) (`dot_product_variance`,
`softmax_saturation`, and a short training run, `train_retrieval`), and what masking does
to a row of weights (`masked_example`).
"""
import math

import torch
from matplotlib.ticker import MaxNLocator
from torch.nn import functional as F

from .attention import entropy, masked_softmax
from .plot import show_heatmaps


def random_vectors(num, d, seed=0):
    """`num` vectors with independent N(0, 1) entries, from their own random stream."""
    return torch.randn(num, d, generator=torch.Generator().manual_seed(seed))  # (num, d)


def dot_product_variance(d, num_samples=10_000, seed=0):
    """Sample variance of q.k for random q, k with unit-variance entries (it is about d)."""
    q = random_vectors(num_samples, d, seed)        # (num_samples, d)
    k = random_vectors(num_samples, d, seed + 1)    # (num_samples, d)
    return (q * k).sum(dim=-1).var().item()         # one dot product per pair


def softmax_saturation(d, scale=True, num_queries=500, num_keys=16, seed=0):
    """Weights softmax(c q.k), c = 1/sqrt(d) or 1, for random queries and keys.

    Returns (weights (num_queries, num_keys), mean entropy, mean largest weight, and the
    gradient that reaches each query, the norm of d alpha / d q, (num_queries,)).
    d alpha / d q = J c K, with the softmax's Jacobian J = diag(alpha) - alpha alpha^T
    (0 for a one-hot row); its row i is c alpha_i (k_i - sum_j alpha_j k_j).
    """
    queries = random_vectors(num_queries, d, seed)  # (num_queries, d)
    keys = random_vectors(num_keys, d, seed + 1)    # (num_keys, d)
    c = 1 / math.sqrt(d) if scale else 1.0
    weights = torch.softmax(c * queries @ keys.T, dim=-1)   # (num_queries, num_keys)
    mean_key = weights @ keys                                # (num_queries, d)
    grad = c * weights[:, :, None] * (keys - mean_key[:, None, :])  # (queries, keys, d)
    top = weights.max(dim=-1).values.mean().item()          # mean largest weight
    return weights, entropy(weights).mean().item(), top, grad.norm(dim=(1, 2))


def retrieval_batch(batch_size, num_keys, d, generator):
    """The retrieval task: `num_keys` random keys per example, and a query that is a noisy
    copy of one of them. Returns keys (batch, num_keys, d), queries (batch, d), and the
    index of the copied key, targets (batch,)."""
    keys = torch.randn(batch_size, num_keys, d, generator=generator)
    targets = torch.randint(num_keys, (batch_size,), generator=generator)
    noise = 0.5 * torch.randn(batch_size, d, generator=generator)
    return keys, keys[torch.arange(batch_size), targets] + noise, targets


def train_retrieval(scale, lr, seed=0, d=64, num_keys=16, num_steps=150, batch_size=64,
                    optimizer="sgd"):
    """Learn W_q and W_k so that softmax(c (W_q q) . (W_k k_i)) finds the key q copies.

    c = 1/sqrt(d) if `scale`, else 1. W_q and W_k start with N(0, 1/d) entries, so the
    projected queries and keys have entries of variance about 1, as in the chapter's
    measurements. The loss is the squared error of the pooled one-hot values,
    ||alpha - e_target||^2, so its gradient passes through the softmax. Runs on the CPU,
    from its own random stream. Returns the accuracy on 512 held-out queries: how often the
    largest weight falls on the copied key (1/num_keys by chance).
    """
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    g = torch.Generator().manual_seed(seed)
    W_q = (torch.randn(d, d, generator=g) / math.sqrt(d)).requires_grad_()
    W_k = (torch.randn(d, d, generator=g) / math.sqrt(d)).requires_grad_()
    make_optimizer = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    trainer = make_optimizer([W_q, W_k], lr=lr)
    c = 1 / math.sqrt(d) if scale else 1.0

    def weights(keys, queries):
        scores = torch.bmm(keys @ W_k.T, (queries @ W_q.T)[:, :, None])  # (batch, keys, 1)
        return torch.softmax(c * scores[..., 0], dim=-1)                  # (batch, keys)

    for _ in range(num_steps):
        keys, queries, targets = retrieval_batch(batch_size, num_keys, d, g)
        pooled_error = weights(keys, queries) - F.one_hot(targets, num_keys)
        loss = (pooled_error ** 2).sum(dim=-1).mean()
        trainer.zero_grad()
        loss.backward()
        trainer.step()
    held_out = retrieval_batch(512, num_keys, d, torch.Generator().manual_seed(12345))
    with torch.no_grad():
        hits = weights(*held_out[:2]).argmax(dim=-1) == held_out[2]
    return hits.float().mean().item()


def draw_entropy(fig, d, scale):
    """Widget frame: weights of 8 random queries over 16 keys; the entropy of 500 rows."""
    weights, mean_entropy, top, _ = softmax_saturation(d, scale == "1/sqrt(d)")
    left, right = fig.subfigures(1, 2, width_ratios=[1.2, 1])
    show_heatmaps(weights[:8].reshape(1, 1, 8, -1), xlabel="keys", ylabel="queries",
                  titles=[f"d = {d}, scale {scale}"], fig=left)
    heatmap = left.axes[0]  # whole numbers on its axes: keys and queries are counted
    heatmap.xaxis.set_major_locator(MaxNLocator(integer=True))
    heatmap.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax = right.subplots()
    H = entropy(weights).numpy()                    # (500,): one entropy per query
    ax.hist(H, bins=20, range=(0, math.log(16)), weights=[1 / len(H)] * len(H),
            color="C3")
    ax.axvline(math.log(16), color="gray", linestyle=":", label="uniform (log 16)")
    ax.set(xlim=(0, 1.05 * math.log(16)), ylim=(0, 1), xlabel="entropy of a row (nats)",
           ylabel="fraction of queries", title="Entropy of 500 rows")
    ax.legend(fontsize=8, loc="upper left")
    caption = (f"d = {d}, scale {scale}: mean entropy {mean_entropy:.2f} nats "
               f"(uniform {math.log(16):.2f}), mean largest weight {top:.2f}")
    if d == 1:
        caption += ("\nat d = 1 the scale 1/sqrt(d) is 1: both settings give the same "
                    "weights")
    return caption


MASK_KINDS = ["1-D: one length per sequence", "2-D: per query, also causal"]


def masked_example(valid_len, kind=MASK_KINDS[0], num_queries=8, num_keys=8):
    """Masked-softmax weights of one example, (num_queries, num_keys), and its valid_lens.

    1-D: every query sees the first `valid_len` keys. 2-D: query i sees the first
    min(valid_len, i + 1) keys (padding and a causal mask together).
    """
    scores = random_vectors(num_queries, num_keys, seed=3)[None]  # (1, queries, keys)
    if kind == MASK_KINDS[0]:
        valid_lens = torch.tensor([valid_len])                       # (1,)
    else:
        valid_lens = torch.arange(1, num_queries + 1).clamp(max=valid_len)[None]  # (1, m)
    return masked_softmax(scores, valid_lens)[0], valid_lens


def draw_masked(fig, valid_len, kind):
    """Widget frame: the masked weights as a heatmap, with the row sums in the caption."""
    weights, valid_lens = masked_example(valid_len, kind)
    show_heatmaps(weights.reshape(1, 1, *weights.shape), xlabel="keys", ylabel="queries",
                  titles=[f"valid_lens = {valid_lens.tolist()}"], fig=fig)
    sums = [round(s, 2) for s in weights.sum(dim=-1).tolist()]
    empty = sum(s == 0 for s in sums)
    caption = f"row sums {sums}; rows with no valid key (all-zero weights): {empty}"
    if valid_len <= 1:  # query i may see i + 1 >= 1 keys: the causal limit does not bind
        caption += "\nwith valid_len <= 1 the causal limit never binds: 1-D and 2-D agree"
    return caption
