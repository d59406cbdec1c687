"""Multi-head attention (chapter 5): equal to PyTorch's and d2l's, fused equal to readable."""
import pytest
import torch
from torch import nn

from book import multihead
from book.attention import MultiHeadAttention, transpose_output, transpose_qkv

ATOL = 1e-6  # float32: on a CPU they agree exactly (fused path: 1.2e-7); room for GPUs


def make(num_hiddens=16, num_heads=4, bias=False, seed=0):
    torch.manual_seed(seed)
    return MultiHeadAttention(num_hiddens, num_heads, dropout=0.0, bias=bias).eval()


def inputs(batch=3, num_queries=5, num_keys=7, num_hiddens=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, num_queries, num_hiddens, generator=g),
            torch.randn(batch, num_keys, num_hiddens, generator=g),
            torch.randn(batch, num_keys, num_hiddens, generator=g))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("valid_lens", [None, torch.tensor([7, 3, 1])])
def test_equals_torch_multihead_attention_outputs_and_per_head_weights(bias, valid_lens):
    mha = make(bias=bias)
    queries, keys, values = inputs()
    ours = mha(queries, keys, values, valid_lens)
    ours_weights = multihead.head_weights(mha, batch_size=3)                  # (3, 4, 5, 7)
    torch_mha = multihead.to_torch_mha(mha).eval()
    mask = None if valid_lens is None else multihead.key_padding_mask(valid_lens, 7)
    theirs, theirs_weights = torch_mha(queries, keys, values, key_padding_mask=mask,
                                       average_attn_weights=False)
    assert ours_weights.shape == theirs_weights.shape == (3, 4, 5, 7)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours_weights, theirs_weights, atol=ATOL, rtol=0)
    # By default PyTorch returns the weights averaged over the heads.
    _, averaged = torch_mha(queries, keys, values, key_padding_mask=mask)
    torch.testing.assert_close(averaged, ours_weights.mean(dim=1), atol=ATOL, rtol=0)
    if valid_lens is not None:  # the padded keys really get no weight
        assert ours_weights[2, :, :, 1:].abs().max() == 0


def test_per_query_valid_lens_equal_torch_attn_mask():
    mha = make()
    queries, keys, values = inputs()
    valid_lens = torch.randint(1, 8, (3, 5), generator=torch.Generator().manual_seed(2))
    ours = mha(queries, keys, values, valid_lens)
    ignore = torch.arange(7) >= valid_lens[..., None]                  # (3, 5, 7), True = ignore
    attn_mask = ignore.repeat_interleave(4, dim=0)                    # (3 * 4, 5, 7)
    theirs, _ = multihead.to_torch_mha(mha).eval()(queries, keys, values, attn_mask=attn_mask)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_key_padding_mask_means_ignore():
    mask = multihead.key_padding_mask(torch.tensor([2, 0, 3]), 3)
    assert mask.tolist() == [[False, False, True], [True, True, True], [False, False, False]]


@pytest.mark.parametrize("valid_lens", [None, torch.tensor([7, 3, 1]),
                                        torch.tensor([[1, 2, 3, 4, 5]] * 3)])
def test_equals_d2l_with_shared_weights(valid_lens):
    d2l = pytest.importorskip("d2l.torch")
    mha = make()
    queries, keys, values = inputs()
    theirs = d2l.MultiHeadAttention(16, 4, 0.0).eval()
    theirs(queries, keys, values, valid_lens)           # LazyLinear: sized on the first call
    theirs.load_state_dict(mha.state_dict())            # same names: W_q, W_k, W_v, W_o
    torch.testing.assert_close(mha(queries, keys, values, valid_lens),
                               theirs(queries, keys, values, valid_lens), atol=ATOL, rtol=0)
    torch.testing.assert_close(mha.attention.attention_weights,
                               theirs.attention.attention_weights, atol=ATOL, rtol=0)


@pytest.mark.parametrize("valid_lens", [None, torch.tensor([0, 3, 7]),
                                        torch.tensor([[0, 1, 2, 7, 7], [3] * 5, [7, 0, 7, 0, 7]])])
def test_fused_path_equals_readable_path_forward_and_backward(valid_lens):
    queries, keys, values = [x.requires_grad_() for x in inputs()]
    results = []
    for fused in (False, True):
        mha = make(bias=True)
        mha.fused = fused
        out = mha(queries, keys, values, valid_lens)
        grads = torch.autograd.grad(out.square().sum(), [queries, keys, values]
                                    + list(mha.parameters()))
        results.append((out, grads))
    (readable, g1), (fused, g2) = results
    assert torch.isfinite(fused).all() and torch.isfinite(torch.cat([g.flatten() for g in g2])).all()
    torch.testing.assert_close(fused, readable, atol=1e-5, rtol=0)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    if valid_lens is not None and valid_lens.dim() == 1:  # a sequence with no valid key:
        bias = mha.W_o.bias.expand(5, -1)                 # zero heads, so W_o's bias alone
        assert torch.equal(readable[0], bias) and torch.equal(fused[0], bias)


@pytest.mark.parametrize("num_hiddens, num_heads", [(16, 1), (16, 4), (64, 8), (768, 12)])
@pytest.mark.parametrize("bias", [False, True])
def test_parameter_count_is_4d2_whatever_the_number_of_heads(num_hiddens, num_heads, bias):
    mha = MultiHeadAttention(num_hiddens, num_heads, 0.0, bias=bias)
    count = sum(p.numel() for p in mha.parameters())
    d = num_hiddens
    assert count == 4 * d * d + (4 * d if bias else 0)
    torch_mha = nn.MultiheadAttention(d, num_heads, bias=bias, batch_first=True)
    assert count == sum(p.numel() for p in torch_mha.parameters())


def test_heads_must_divide_num_hiddens():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 4, 0.0)


def test_transpose_output_undoes_transpose_qkv_and_heads_are_feature_slices():
    X = torch.randn(2, 3, 12)
    heads = transpose_qkv(X, 3)                           # (6, 3, 4)
    assert heads.shape == (6, 3, 4)
    assert torch.equal(heads[1 * 3 + 2], X[1, :, 8:12])   # example 1, head 2
    assert torch.equal(transpose_output(heads, 3), X)


def test_neighbour_task_targets():
    X, Y = multihead.neighbour_batch(4, torch.Generator().manual_seed(0))
    assert X.shape == (4, multihead.SEQ_LEN) and Y.shape == (4, multihead.SEQ_LEN, 2)
    assert torch.equal(Y[:, 3, 0], X[:, 2]) and torch.equal(Y[:, 3, 1], X[:, 4])
    assert torch.equal(Y[:, 0, 0], X[:, -1]) and torch.equal(Y[:, -1, 1], X[:, 0])  # wraps


def test_two_heads_learn_both_neighbours_one_head_cannot():
    """The chapter's claim, on the chapter's settings (about 10 s)."""
    probe = torch.arange(multihead.SEQ_LEN)
    accuracy = {}
    for h in (1, 2):
        model, losses, snaps = multihead.train_neighbour_model(h, snapshot_at=(0, 150),
                                                               probe=probe)
        accuracy[h] = snaps[150]["accuracy"]
        weights = snaps[150]["weights"]                           # (h, n, n)
        assert weights.shape == (h, multihead.SEQ_LEN, multihead.SEQ_LEN)
        torch.testing.assert_close(weights.sum(-1), torch.ones(h, multihead.SEQ_LEN))
        assert len(losses) == 150
    assert accuracy[2].min() >= 0.95
    assert accuracy[1].min() < 0.5


def test_fused_function_is_what_the_fused_layer_calls():
    from book.attention import fused_multihead_attention

    mha = make(bias=True)
    queries, keys, values = inputs()
    valid_lens = torch.tensor([7, 0, 3])
    expected = fused_multihead_attention(mha, queries, keys, values, valid_lens)
    assert mha.attention.attention_weights is None          # the fused path keeps none
    mha.fused = True
    assert torch.equal(mha(queries, keys, values, valid_lens), expected)


def test_neighbour_model_read_outs_and_parameter_counts():
    linear = multihead.NeighbourModel(1)
    mlp = multihead.NeighbourModel(1, mlp_hiddens=64)
    assert isinstance(linear.classify, nn.Linear) and isinstance(mlp.classify, nn.Sequential)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(linear) == 5364 and count(mlp) == 8116      # the numbers chapter 5 prints
    X, _ = multihead.neighbour_batch(3, torch.Generator().manual_seed(0))
    assert mlp(X).shape == linear(X).shape == (3, multihead.SEQ_LEN, 2, multihead.VOCAB_SIZE)


def test_weight_on_neighbours_reads_the_maps_and_switching_a_head_off_restores_it():
    model = multihead.NeighbourModel(2)
    with torch.no_grad():  # make the attention uniform: every key gets 1/n
        model.attention.W_q.weight.zero_()
    share = multihead.weight_on_neighbours(model, num_examples=20)
    assert share.shape == (2, 2)
    torch.testing.assert_close(share, torch.full((2, 2), 1 / multihead.SEQ_LEN))
    before = model.attention.W_o.weight.clone()
    multihead.accuracy_without_head(model, 1, num_examples=20)
    assert torch.equal(model.attention.W_o.weight, before)   # restored afterwards


def test_switching_off_a_head_zeroes_its_slice_of_the_concatenation():
    model = multihead.NeighbourModel(2)
    X, _ = multihead.neighbour_batch(4, torch.Generator().manual_seed(1))
    seen = {}
    model.attention.W_o.register_forward_hook(
        lambda module, args, out: seen.update(out=out, weight=module.weight.clone()))
    multihead.accuracy_without_head(model, 0, num_examples=4)
    assert (seen["weight"][:, :16] == 0).all() and (seen["weight"][:, 16:] != 0).any()


def test_one_head_with_an_mlp_read_out_learns_both_neighbours():
    """Chapter 5's qualification of the one-head lesson, on seed 0 (about 2 s)."""
    model, _, snaps = multihead.train_neighbour_model(1, snapshot_at=(150,), mlp_hiddens=64,
                                                      probe=torch.arange(multihead.SEQ_LEN))
    assert snaps[150]["accuracy"].min() > 0.99
    small, large = sorted(multihead.weight_on_neighbours(model)[0].tolist())
    assert 0.25 < small < 0.4 and 0.6 < large < 0.75   # an uneven split
