"""A Vision Transformer (chapter 12): cut an image into patches, treat them as tokens.

The data are scikit-learn's bundled handwritten digits (8x8 pixels, nothing to download),
split once with a fixed seed so that every model sees the same images. The ViT is built
from the course's pieces (multi-head attention of chapter 5, the position-wise FFN of
chapter 7, in pre-LN blocks as in exercise 7.3); a small CNN and an MLP of about the same
size are the baselines of the inductive-bias experiment. Helpers read the [CLS] token's
attention and the learned position embeddings back out of a trained model.
"""
from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention
from .device import one_cpu_thread
from .transformer import PositionWiseFFN

# -- Data ---------------------------------------------------------------------------------


@dataclass
class Digits:
    """The digits as tensors: images (N, 1, 8, 8) with values in [0, 1], labels (N,)."""
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor

    def subset(self, fraction):
        """The first `fraction` of each class's training images: a stratified subset, the
        same for every model; a smaller fraction's subset is part of a larger one's."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        keep = torch.cat([(self.y_train == c).nonzero()[:, 0][
            :max(1, round(fraction * int((self.y_train == c).sum())))] for c in range(10)])
        keep = keep.sort().values                 # the images keep their (shuffled) order
        return self.X_train[keep], self.y_train[keep]


def load_digits(test_per_class=50, seed=0):
    """scikit-learn's 1,797 bundled digit images, split by a seeded shuffle of each class:
    `test_per_class` images of every digit for testing, the rest for training."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as error:  # pragma: no cover - scikit-learn is in requirements.txt
        raise ImportError("chapter 12 needs scikit-learn: pip install scikit-learn") \
            from error
    images, labels = sklearn_digits(return_X_y=True)             # (1797, 64) in 0..16
    X = torch.tensor(images, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16  # (N, 1, 8, 8)
    y = torch.tensor(labels, dtype=torch.long)                   # (N,)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(y), generator=g)                  # one shuffle of everything
    rank = torch.empty_like(order)
    for c in range(10):                                          # rank within each class
        members = order[y[order] == c]
        rank[members] = torch.arange(len(members))
    is_test = rank < test_per_class
    train, test = order[~is_test[order]], order[is_test[order]]  # both in shuffled order
    return Digits(X[train], y[train], X[test], y[test])


# -- The Vision Transformer ---------------------------------------------------------------

class PatchEmbedding(nn.Module):
    """Cut images into non-overlapping patch_size x patch_size patches and map each patch
    linearly to a num_hiddens-vector: a Conv2d whose stride equals its kernel size."""

    def __init__(self, patch_size, num_hiddens, in_channels=1):
        super().__init__()
        self.patch_size = patch_size
        self.conv = nn.Conv2d(in_channels, num_hiddens, kernel_size=patch_size,
                              stride=patch_size)

    def forward(self, X):
        height, width = X.shape[-2:]
        if height % self.patch_size or width % self.patch_size:
            p = self.patch_size
            raise ValueError(f"images of {height}x{width} pixels cannot be cut into "
                             f"{p}x{p} patches: both sides must be multiples of {p}")
        X = self.conv(X)                     # (batch, d, height/p, width/p): one per patch
        return X.flatten(2).transpose(1, 2)  # (batch, num_patches, d), patches row by row


class PreNormEncoderBlock(nn.Module):
    """Pre-LN encoder block (exercise 7.3): X + Sublayer(LayerNorm(X)), for self-attention
    and for the position-wise FFN; nothing normalises the sum."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(num_hiddens)
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.ln2 = nn.LayerNorm(num_hiddens)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, num_inputs=num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        Z = self.ln1(X)                                         # (batch, n, d)
        X = X + self.dropout(self.attention(Z, Z, Z))           # (batch, n, d)
        return X + self.dropout(self.ffn(self.ln2(X)))          # (batch, n, d)


class ViT(nn.Module):
    """Vision Transformer: patch embedding, a [CLS] token, learned position embeddings,
    pre-LN encoder blocks, and an MLP head that reads the [CLS] token's output."""

    def __init__(self, image_size=8, patch_size=2, in_channels=1, num_hiddens=32,
                 ffn_num_hiddens=64, num_heads=4, num_blks=2, num_classes=10, dropout=0.0,
                 pos_std=0.5):
        super().__init__()
        self.patch_embedding = PatchEmbedding(patch_size, num_hiddens, in_channels)
        num_patches = (image_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, num_hiddens))
        self.pos_embedding = nn.Parameter(  # std 0.5: about the size of a patch embedding
            pos_std * torch.randn(1, num_patches + 1, num_hiddens))
        self.dropout = nn.Dropout(dropout)
        self.blks = nn.ModuleList([
            PreNormEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout)
            for _ in range(num_blks)])
        self.head = nn.Sequential(nn.LayerNorm(num_hiddens),                # the MLP head
                                  nn.Linear(num_hiddens, num_hiddens), nn.GELU(),
                                  nn.Linear(num_hiddens, num_classes))

    def forward(self, X):
        X = self.patch_embedding(X)                          # (batch, num_patches, d)
        cls = self.cls_token.expand(X.shape[0], -1, -1)      # (batch, 1, d)
        X = torch.cat([cls, X], dim=1) + self.pos_embedding  # (batch, 1 + num_patches, d)
        X = self.dropout(X)
        for blk in self.blks:
            X = blk(X)                                       # (batch, 1 + num_patches, d)
        return self.head(X[:, 0])                            # (batch, num_classes): [CLS]


# -- The baselines ------------------------------------------------------------------------

def small_cnn(channels=(16, 32, 40), num_classes=10):
    """A convolution at full resolution, a 2x2 max-pooling, two more convolutions, another
    pooling, and a linear classifier: locality and translation equivariance built in."""
    c1, c2, c3 = channels
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1), nn.ReLU(),           # (batch, c1, 8, 8)
        nn.MaxPool2d(2),                                     # (batch, c1, 4, 4)
        nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(),          # (batch, c2, 4, 4)
        nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(),          # (batch, c3, 4, 4)
        nn.MaxPool2d(2),                                     # (batch, c3, 2, 2)
        nn.Flatten(), nn.Linear(4 * c3, num_classes))        # (batch, num_classes)


def mlp(num_hiddens=104, num_pixels=64, num_classes=10):
    """Two hidden layers on the flattened pixels: no idea which pixels are neighbours."""
    return nn.Sequential(
        nn.Flatten(),                                        # (batch, 64)
        nn.Linear(num_pixels, num_hiddens), nn.ReLU(),
        nn.Linear(num_hiddens, num_hiddens), nn.ReLU(),
        nn.Linear(num_hiddens, num_classes))                 # (batch, num_classes)


def num_parameters(model):
    """How many numbers training adjusts."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# -- Training and evaluation --------------------------------------------------------------

def train_classifier(model, X, y, num_steps=300, batch_size=64, lr=3e-3, seed=0,
                     device=None):
    """Adam on the cross-entropy for `num_steps` minibatches, drawn pass after pass from a
    seeded shuffle of (X, y); the learning rate rises over the first 10% of the steps, then
    falls linearly to 0. The same number of updates for every model and training-set size.
    Returns each step's loss."""
    device = device or next(model.parameters()).device
    X, y = X.to(device), y.to(device)
    warmup = max(1, num_steps // 10)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, 1 - step / num_steps))
    g = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    losses, order = [], torch.empty(0, dtype=torch.long)
    model.train()
    with one_cpu_thread(device):  # tiny models train fastest on one CPU thread
        for _ in range(num_steps):
            if len(order) < batch_size:                     # a new pass over the data
                order = torch.cat([order, torch.randperm(len(y), generator=g)])
            batch, order = order[:batch_size].to(device), order[batch_size:]
            loss = loss_fn(model(X[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    return losses


@torch.no_grad()
def accuracy(model, X, y):
    """Fraction of the images whose most likely class is the label."""
    model.eval()
    device = next(model.parameters()).device
    return (model(X.to(device)).argmax(-1) == y.to(device)).float().mean().item()


# -- Looking inside -----------------------------------------------------------------------

@torch.no_grad()
def attention_maps(model, X):
    """Run the ViT once (eval mode) and return every layer's attention weights, split into
    heads: (layers, batch, heads, 1 + num_patches queries, 1 + num_patches keys)."""
    model.eval()
    model(X)
    weights = [blk.attention.attention.attention_weights for blk in model.blks]
    heads = model.blks[0].attention.num_heads
    return torch.stack([w.reshape(X.shape[0], heads, *w.shape[1:]) for w in weights])


@torch.no_grad()
def cls_attention(model, X):
    """What the [CLS] token looks at: its attention weight on every patch, laid out as the
    image's grid of patches, (layers, batch, heads, grid, grid); and the predicted
    probabilities, (batch, classes)."""
    probabilities = torch.softmax(model.eval()(X), dim=-1)       # (batch, classes)
    weights = attention_maps(model, X)[..., 0, 1:]               # (layers, batch, heads, N)
    grid = round(weights.shape[-1] ** 0.5)
    return weights.reshape(*weights.shape[:-1], grid, grid), probabilities


def attention_rollout(weights):
    """Attention rollout (Abnar and Zuidema, 2020): average the heads, add the residual
    connection as an identity, renormalise, and multiply the layers. `weights` is
    (layers, batch, heads, n, n); returns (batch, n, n), how much each output token draws
    on each input token through all layers."""
    A = weights.mean(dim=2)                                  # (layers, batch, n, n)
    A = 0.5 * A + 0.5 * torch.eye(A.shape[-1], device=A.device)
    A = A / A.sum(dim=-1, keepdim=True)
    rollout = A[0]
    for layer in A[1:]:
        rollout = layer @ rollout                            # (batch, n, n)
    return rollout


def grid_distance(grid_size):
    """Euclidean distance between the patches of a grid_size x grid_size grid, numbered row
    by row: (grid_size**2, grid_size**2)."""
    rows, cols = torch.meshgrid(torch.arange(grid_size), torch.arange(grid_size),
                                indexing="ij")
    where = torch.stack([rows.flatten(), cols.flatten()], dim=1).float()  # (patches, 2)
    return torch.cdist(where, where)


def position_similarity(model):
    """Cosine similarity between the learned position embeddings of the patches ([CLS]'s
    excluded): (num_patches, num_patches)."""
    P = model.pos_embedding[0, 1:].detach()                          # (num_patches, d)
    P = P / P.norm(dim=-1, keepdim=True)
    return P @ P.T


def grid_correlation(similarity):
    """Pearson correlation, over all pairs of distinct patches, between the similarity of
    their position embeddings and their distance on the grid: about -1 if nearer patches
    always have more similar embeddings, about 0 if the embeddings ignore the grid."""
    n = similarity.shape[0]
    distance = grid_distance(round(n ** 0.5)).to(similarity.device)
    pairs = torch.triu(torch.ones(n, n, dtype=torch.bool, device=similarity.device), 1)
    a, b = similarity[pairs], distance[pairs]
    a, b = a - a.mean(), b - b.mean()
    return (a @ b / (a.norm() * b.norm())).item()
