"""book.vit: the digits split, the patch embedding as a convolution and as a linear map, the
ViT's parts and parameter count, the baselines' sizes, training, and the inspection helpers."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import book
from book import vit


@pytest.fixture(scope="module")
def data():
    return vit.load_digits()


# -- data -------------------------------------------------------------------------------------

def test_digits_split_is_fixed_stratified_and_disjoint(data):
    assert data.X_train.shape == (1297, 1, 8, 8) and data.X_test.shape == (500, 1, 8, 8)
    assert data.X_train.dtype == torch.float32 and data.y_train.dtype == torch.long
    assert 0 <= data.X_train.min() and data.X_train.max() == 1
    assert torch.bincount(data.y_test).tolist() == [50] * 10
    again = vit.load_digits()
    assert torch.equal(again.X_train, data.X_train) and torch.equal(again.y_test, data.y_test)
    train = {tuple(x.flatten().tolist()) for x in data.X_train}
    test = [tuple(x.flatten().tolist()) for x in data.X_test]
    # scikit-learn's digits hold a few identical images; almost none may cross the split
    assert sum(t in train for t in test) <= 5
    other = vit.load_digits(seed=1)
    assert not torch.equal(other.y_train, data.y_train)


def test_subsets_are_stratified_and_nested(data):
    sizes = []
    for fraction in (0.25, 0.5, 1.0):
        X, y = data.subset(fraction)
        counts = torch.bincount(y, minlength=10)
        expected = (torch.bincount(data.y_train) * fraction).round()
        assert (counts - expected).abs().max() <= 1
        sizes.append(len(y))
        if fraction < 1:
            bigger = data.subset(min(1.0, 2 * fraction))[0]
            rows = {tuple(x.flatten().tolist()) for x in bigger}
            assert all(tuple(x.flatten().tolist()) in rows for x in X)
    assert sizes == [324, 649, 1297]
    with pytest.raises(ValueError, match="fraction"):
        data.subset(0)


# -- the model --------------------------------------------------------------------------------

def test_patch_embedding_is_unfold_then_linear():
    torch.manual_seed(0)
    embed = vit.PatchEmbedding(patch_size=2, num_hiddens=8, in_channels=3).double()
    X = torch.randn(2, 3, 6, 10, dtype=torch.float64)
    patches = F.unfold(X, 2, stride=2).transpose(1, 2)          # (2, 15, 12)
    linear = nn.Linear(12, 8).double()
    with torch.no_grad():
        linear.weight.copy_(embed.conv.weight.reshape(8, -1))
        linear.bias.copy_(embed.conv.bias)
    assert torch.allclose(embed(X), linear(patches), atol=1e-12)
    with pytest.raises(ValueError, match="9x8 pixels cannot be cut into 2x2"):
        embed(torch.zeros(1, 3, 9, 8, dtype=torch.float64))


def test_pre_norm_block_is_x_plus_sublayer_of_layernorm():
    torch.manual_seed(0)
    block = vit.PreNormEncoderBlock(16, 32, 4).eval()
    X = 3 + 2 * torch.randn(2, 5, 16)
    Z = block.ln1(X)
    Y = X + block.attention(Z, Z, Z)
    assert torch.allclose(block(X), Y + block.ffn(block.ln2(Y)), atol=1e-6)


def test_vit_shapes_and_parameter_count():
    book.set_seed(0)
    model = vit.ViT()
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    assert vit.num_parameters(model) == 19018
    assert model.pos_embedding.shape == (1, 17, 32)
    for baseline in (vit.small_cnn(), vit.mlp()):
        assert 0.9 < vit.num_parameters(baseline) / 19018 < 1.1
        assert baseline(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    bigger = vit.ViT(image_size=12, patch_size=3, in_channels=3, num_classes=5)
    assert bigger(torch.zeros(2, 3, 12, 12)).shape == (2, 5)


def test_without_position_embeddings_the_vit_ignores_the_patch_order():
    book.set_seed(0)
    model = vit.ViT().eval()
    X = torch.rand(4, 1, 8, 8)
    order = torch.randperm(16)
    shuffled = F.fold(F.unfold(X, 2, stride=2)[:, :, order], (8, 8), 2, stride=2)
    with torch.no_grad():
        assert not torch.allclose(model(shuffled), model(X), atol=1e-4)
        model.pos_embedding.zero_()
        assert torch.allclose(model(shuffled), model(X), atol=1e-5)


# -- training and inspection ------------------------------------------------------------------

def test_training_is_seeded_and_learns(data):
    X, y = data.subset(0.25)
    runs = []
    for _ in range(2):
        book.set_seed(0)
        model = vit.mlp()
        runs.append(vit.train_classifier(model, X, y, num_steps=60, seed=0))
    assert runs[0] == runs[1] and len(runs[0]) == 60
    assert sum(runs[0][-10:]) / 10 < 0.5 * runs[0][0]
    assert vit.accuracy(model, data.X_test, data.y_test) > 0.7


def test_attention_helpers():
    book.set_seed(0)
    model = vit.ViT()
    X = torch.rand(3, 1, 8, 8)
    maps = vit.attention_maps(model, X)
    assert maps.shape == (2, 3, 4, 17, 17)
    assert torch.allclose(maps.sum(-1), torch.ones(2, 3, 4, 17), atol=1e-5)
    cls_maps, probabilities = vit.cls_attention(model, X)
    assert cls_maps.shape == (2, 3, 4, 4, 4) and probabilities.shape == (3, 10)
    assert torch.allclose(cls_maps.flatten(-2), maps[..., 0, 1:])
    rollout = vit.attention_rollout(maps)
    assert rollout.shape == (3, 17, 17)
    assert torch.allclose(rollout.sum(-1), torch.ones(3, 17), atol=1e-5)
    one_layer = vit.attention_rollout(maps[:1])
    expected = 0.5 * maps[0].mean(1) + 0.5 * torch.eye(17)
    assert torch.allclose(one_layer, expected, atol=1e-6)


def test_grid_correlation_tells_a_grid_from_noise():
    distance = vit.grid_distance(4)
    assert distance.shape == (16, 16) and distance[0, 5] == 2 ** 0.5 and distance[0, 15] > 4
    assert vit.grid_correlation(-distance) < -0.99           # similarity falls with distance
    torch.manual_seed(0)
    P = torch.randn(16, 256)
    P = P / P.norm(dim=-1, keepdim=True)
    assert abs(vit.grid_correlation(P @ P.T)) < 0.2


def test_position_similarity_is_cosine():
    book.set_seed(0)
    model = vit.ViT()
    S = vit.position_similarity(model)
    assert S.shape == (16, 16)
    assert torch.allclose(S.diagonal(), torch.ones(16), atol=1e-6)
    assert torch.allclose(S, S.T, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_runs_on_the_gpu(data):
    device = book.try_gpu()
    book.set_seed(0)
    model = vit.ViT().to(device)
    X, y = data.subset(0.25)
    vit.train_classifier(model, X, y, num_steps=5)
    assert 0 <= vit.accuracy(model, data.X_test, data.y_test) <= 1
    cls_maps, probabilities = vit.cls_attention(model, data.X_test[:4].to(device))
    assert cls_maps.device.type == "cuda" and probabilities.shape == (4, 10)
