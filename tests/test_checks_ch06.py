"""Chapter 6's checker accepts learned positional encodings that work and rejects ones that do not.

The training test takes about 5 s per model on a laptop CPU; the baseline is trained once.
"""
import pytest
import torch
from torch import nn

from book import checks
from book.attention import PositionalEncoding
from book.checks import ch06


class Learned(nn.Module):
    """The reference solution: a table of max_len vectors, initialised like nn.Embedding."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class WithEmbedding(nn.Module):
    """Another right design: an nn.Embedding looked up at positions 0..n-1."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.table = nn.Embedding(max_len, num_hiddens)

    def forward(self, X):
        return self.dropout(X + self.table(torch.arange(X.shape[1], device=X.device)))


def learned_with(init, shape=None, forward=None):
    """A table initialised with `init`, of `shape`, with an optional other forward(m, X)."""
    def make_table(self, num_hiddens, dropout, max_len=1000):
        Learned.__init__(self, num_hiddens, dropout, max_len)
        self.P = nn.Parameter(init(torch.empty(shape or (1, max_len, num_hiddens))))

    methods = {"__init__": make_table}
    if forward is not None:
        methods["forward"] = forward
    return type("Wrong", (Learned,), methods)


class PlainTensor(Learned):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        del self.P
        self.P = torch.randn(1, max_len, num_hiddens)  # not a Parameter: never trained


class Buffer(Learned):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        del self.P
        self.register_buffer("P", torch.randn(1, max_len, num_hiddens))


class Stub(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()

    def forward(self, X):
        raise NotImplementedError("write your solution here")


WRONG_FAST = {  # rejected before any training
    "the fixed sinusoidal encoding (nothing to learn)": (PositionalEncoding, "trainable"),
    "a plain tensor attribute": (PlainTensor, "trainable"),
    "a registered buffer": (Buffer, "trainable"),
    "detaches the table": (learned_with(nn.init.normal_,
                                        forward=lambda m, X: X + m.P[:, : X.shape[1]].detach()),
                           "no gradient"),
    "one vector for every position": (learned_with(nn.init.normal_, shape=(1, 1, 16)),
                                      "not position-dependent"),
    "zero initialisation (all positions equal at the start)":
        (learned_with(nn.init.zeros_), "(?s)not position-dependent.*standard deviation 0.000"),
    "forgets to slice the table to the sequence length":
        (learned_with(nn.init.normal_, forward=lambda m, X: X + m.P), "RuntimeError"),
    "concatenates instead of adding":
        (learned_with(nn.init.normal_, forward=lambda m, X: torch.cat(
            [X, m.P[:, : X.shape[1]].expand(X.shape[0], -1, -1)], -1)), "shape"),
    "adds in place": (learned_with(nn.init.normal_, forward=lambda m, X: X.add_(
        m.P[:, : X.shape[1]].detach()) + 0 * m.P.sum()), "in place"),
    "unimplemented stub": (Stub, "not implemented yet"),
}

WRONG_TRAINED = {  # pass the quick checks, fail the reversal test
    "initialised far smaller than the embeddings (std 0.02)":
        (learned_with(lambda t: nn.init.normal_(t, std=0.02)), "standard deviation 0.0"),
    "forgets the input (returns only the positions)":
        (learned_with(nn.init.normal_, forward=lambda m, X: m.P[:, : X.shape[1]].expand_as(X)
                      + 0 * X), "points better"),
}


@pytest.mark.parametrize("cls", [Learned, WithEmbedding])
def test_accepts_learned_encodings_that_work(cls, capsys):
    assert "passed" in checks.check_learned_positional_encoding(cls)
    printed = capsys.readouterr().out
    assert "with your encoding" in printed


def test_the_stated_margin_holds_for_the_reference_and_the_sinusoidal_encoding():
    """The checker's comment: reference 100%, sinusoidal about 90%, no encoding about 34%."""
    baseline = ch06.baseline_accuracy()
    assert 0.2 < baseline < 0.45
    assert ch06._order_model(Learned) >= baseline + 0.5
    assert ch06._order_model(PositionalEncoding) >= baseline + ch06.MARGIN


@pytest.mark.parametrize("name", WRONG_FAST)
def test_rejects_wrong_encodings_before_training(name):
    cls, message = WRONG_FAST[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_learned_positional_encoding(cls)


@pytest.mark.parametrize("name", WRONG_TRAINED)
def test_rejects_encodings_that_do_not_help_on_reversal(name):
    cls, message = WRONG_TRAINED[name]
    assert "passed" in checks.check_learned_positional_encoding(cls, train=False)
    with pytest.raises(AssertionError, match=message):
        checks.check_learned_positional_encoding(cls)


@pytest.mark.parametrize("bad", [None, 42])
def test_rejects_non_classes(bad):
    with pytest.raises(AssertionError, match="None|function"):
        checks.check_learned_positional_encoding(bad)


def test_training_leaves_the_learners_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    ch06.baseline_accuracy.cache_clear()  # make it train now
    ch06.baseline_accuracy()
    assert torch.equal(torch.rand(3), expected)
