"""Checker for chapter 6's exercise: a learned positional encoding.

The learner writes a class with the call of `PositionalEncoding`:
`cls(num_hiddens, dropout, max_len=1000)`, whose `forward(X)` takes (batch, n, num_hiddens)
and returns the same shape with position information in it.
"""
import functools

import torch

from ..selfattention import (REVERSAL, NoPositionalEncoding, reversal_accuracy,
                             train_order_model)
from ._core import call, expect_tensor, fail, passed

# The training test: reverse sequences of 4 to 8 symbols (vocabulary 12, token 0 = padding)
# with a 2-block Transformer encoder (d = 32), 400 Adam steps with warm-up and clipping. With
# these settings the course's reference solution reaches 100% of the positions, the
# sinusoidal encoding about 90%, and the same model without positional encoding about 34%.
TASK = REVERSAL
MARGIN = 0.30  # the learned encoding must be right on at least 30 points more positions


def _order_model(pos_encoding_class, seed=0):
    with torch.random.fork_rng(devices=[]):  # leave the learner's random state alone
        model, _ = train_order_model(pos_encoding_class, seed=seed, **TASK)
    return reversal_accuracy(model, TASK["min_len"], TASK["max_len"],
                             vocab_size=TASK["vocab_size"])


@functools.lru_cache(maxsize=1)
def baseline_accuracy():
    """The same model and training without any positional encoding (computed once)."""
    return _order_model(NoPositionalEncoding)


def _make(cls, case, **kwargs):
    module = call(cls, name="your class", case=case, **kwargs)
    if not isinstance(module, torch.nn.Module):
        fail(f"your class should build an nn.Module (subclass nn.Module), got a "
             f"{type(module).__name__} from {case}.")
    return module


def _start_std(module, num_hiddens):
    """Standard deviation of what the encoding adds to zeros, as constructed (untrained)."""
    with torch.no_grad():
        return module.eval()(torch.zeros(1, 8, num_hiddens)).std().item()


def _scale_hint(std):
    return (f"at the start your encoding's values have standard deviation {std:.3f}, while the "
            "token embeddings they are added to have standard deviation 1 (in the checker's "
            "model, as with nn.Embedding's default). An encoding much smaller than the "
            "embeddings is drowned out and learns slowly: initialise it with std about 1, "
            "e.g. nn.init.normal_(P), or use an nn.Embedding(max_len, num_hiddens).")


def check_learned_positional_encoding(cls, train=True):
    """Check a learned positional encoding class: shape, trainable and position-dependent,
    and (with `train=True`, about 10 s on a laptop CPU) that it helps on a task where order
    matters: reversing a sequence."""
    num_hiddens = 16
    case = "cls(num_hiddens=16, dropout=0.0, max_len=50)"
    module = _make(cls, case, num_hiddens=num_hiddens, dropout=0.0, max_len=50)
    _make(cls, "cls(16, 0.0) (max_len left at its default)", num_hiddens=16, dropout=0.0)
    g = torch.Generator().manual_seed(6)
    X = torch.randn(3, 7, num_hiddens, generator=g)
    before = X.clone()
    out = call(module, X, name="forward", case=f"X of shape (3, 7, 16) with {case}")
    expect_tensor(out, (3, 7, num_hiddens), what="forward(X)", case="X of shape (3, 7, 16)")
    if not torch.equal(X, before):
        fail("forward(X) changed X in place; return a new tensor (X + P, not X += P).")
    out2 = call(module, torch.randn(2, 50, num_hiddens, generator=g), name="forward",
                case="X of shape (2, 50, 16), as long as max_len")
    expect_tensor(out2, (2, 50, num_hiddens), what="forward(X)", case="X of shape (2, 50, 16)")

    trainable = [p for p in module.parameters() if p.requires_grad]
    if not trainable:
        fail("your encoding has no trainable parameters, so nothing about it can be learned.",
             "store the table as nn.Parameter(...) (or use an nn.Embedding); a plain tensor "
             "attribute or a registered buffer is never trained.")
    module.train()
    weights = torch.randn(2, 7, num_hiddens, generator=g)
    out = call(module, torch.randn(2, 7, num_hiddens, generator=g), name="forward")
    if out.requires_grad:
        (out * weights).sum().backward()
    grads = [p.grad for p in trainable if p.grad is not None and p.grad.abs().sum() > 0]
    if not grads:
        fail("no gradient reaches your encoding's parameters: training would never change them.",
             "use the parameter itself in forward (X + self.P[:, :n]), not self.P.detach(), "
             "self.P.data or a copy made in __init__.")

    module.eval()
    with torch.no_grad():
        added = module(torch.zeros(1, 8, num_hiddens))[0]  # (8, d): what each position gets
    distinct = torch.cdist(added, added) + torch.eye(8) > 1e-6
    if not distinct.all():
        i, j = [int(k) for k in (~distinct).nonzero()[0]]
        std = _start_std(module, num_hiddens)
        fail(f"your encoding is not position-dependent: positions {i} and {j} get the same "
             "vector, so the model cannot tell them apart.",
             _scale_hint(std) if std < 1e-6 else
             "give every position its own vector: a table of shape (1, max_len, num_hiddens), "
             "sliced to the sequence length, not one vector broadcast over all positions.")
    if not train:
        return passed("learned positional encoding (without the training test)")

    accuracy = _order_model(cls)
    baseline = baseline_accuracy()
    if accuracy < baseline + MARGIN:
        std = _start_std(module, num_hiddens)
        fail(f"trained to reverse sequences of {TASK['min_len']} to {TASK['max_len']} symbols, "
             f"the model with your encoding gets {accuracy:.0%} of the positions right; the "
             f"same model without positional encoding gets {baseline:.0%}. Yours must be at "
             f"least {MARGIN:.0%} points better.",
             _scale_hint(std) if std < 0.3 else
             "forward must return X plus the encoding: the token embeddings X carry the "
             "symbols, the encoding only says where they are.")
    print(f"Reversal: {accuracy:.0%} of positions right with your encoding, {baseline:.0%} "
          f"without positional encoding.")
    return passed("learned positional encoding")
