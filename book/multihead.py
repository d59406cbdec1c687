"""Chapter 5's helpers: the bridge to `nn.MultiheadAttention`, and a job for two heads.

The neighbour task: every position must output the token on its left and the token on
its right. One attention head has one softmax per query: it returns one weighted average,
from which a linear read-out recovers only one of the two neighbours. Two heads look left
and right at the same time; one head with a small MLP read-out also solves the task.
"""
import torch
from torch import nn

from .attention import MultiHeadAttention
from .device import one_cpu_thread


# -- The same layer in PyTorch -----------------------------------------------------

def key_padding_mask(valid_lens, num_keys):
    """valid_lens (batch,) -> nn.MultiheadAttention's mask, in which True = IGNORE."""
    positions = torch.arange(num_keys, device=valid_lens.device)  # (num_keys,)
    return positions >= valid_lens[:, None]                       # (batch, num_keys)


def to_torch_mha(mha):
    """An nn.MultiheadAttention that computes the same function as our layer `mha`."""
    num_hiddens, bias = mha.W_q.in_features, mha.W_q.bias is not None
    torch_mha = nn.MultiheadAttention(num_hiddens, mha.num_heads, bias=bias,
                                      dropout=mha.attention.dropout.p, batch_first=True)
    with torch.no_grad():  # PyTorch stacks W_q, W_k, W_v into one (3d, d) matrix
        torch_mha.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight,
                                                  mha.W_v.weight]))        # (3d, d)
        torch_mha.out_proj.weight.copy_(mha.W_o.weight)                     # (d, d)
        if bias:
            torch_mha.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias,
                                                    mha.W_v.bias]))          # (3d,)
            torch_mha.out_proj.bias.copy_(mha.W_o.bias)
    return torch_mha.to(mha.W_q.weight.device)


def head_weights(mha, batch_size):
    """The attention weights of `mha`'s last (readable-path) call, one map per head."""
    weights = mha.attention.attention_weights  # (batch*heads, queries, keys)
    return weights.reshape(batch_size, mha.num_heads, *weights.shape[1:])  # (b,h,q,k)


# -- A task that needs more than one head -----------------------------------------

VOCAB_SIZE, SEQ_LEN = 10, 8


def neighbour_batch(batch_size, generator=None, device=None):
    """Random digit sequences X; their neighbours Y[:, t] = (X[:, t-1], X[:, t+1])."""
    X = torch.randint(VOCAB_SIZE, (batch_size, SEQ_LEN), generator=generator)  # (b, n)
    Y = torch.stack([X.roll(1, dims=1), X.roll(-1, dims=1)], dim=-1)       # (b, n, 2)
    return X.to(device), Y.to(device)


class NeighbourModel(nn.Module):
    """One-hot digit and position, Linear, multi-head self-attention, two read-outs.

    The read-out is linear, or, with `mlp_hiddens`, a small MLP (Linear, ReLU, Linear).
    """

    def __init__(self, num_heads, num_hiddens=32, mlp_hiddens=None):
        super().__init__()
        self.embed = nn.Linear(VOCAB_SIZE + SEQ_LEN, num_hiddens)
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout=0.0)
        if mlp_hiddens is None:  # left and right neighbour: 2 x 10 scores
            self.classify = nn.Linear(num_hiddens, 2 * VOCAB_SIZE)
        else:
            self.classify = nn.Sequential(nn.Linear(num_hiddens, mlp_hiddens), nn.ReLU(),
                                          nn.Linear(mlp_hiddens, 2 * VOCAB_SIZE))

    def forward(self, X):
        tokens = nn.functional.one_hot(X, VOCAB_SIZE).float()            # (b, n, V)
        positions = torch.eye(SEQ_LEN, device=X.device).expand(len(X), -1, -1)  # b,n,n
        H = self.embed(torch.cat([tokens, positions], dim=-1))          # (b, n, d)
        H = self.attention(H, H, H, None)                               # (b, n, d)
        return self.classify(H).reshape(len(X), SEQ_LEN, 2, VOCAB_SIZE)  # (b, n, 2, V)


@torch.no_grad()
def neighbour_accuracy(model, num_examples=500, seed=99):
    """Accuracy on fresh sequences, separately for the left and the right neighbour."""
    device = next(model.parameters()).device
    X, Y = neighbour_batch(num_examples, torch.Generator().manual_seed(seed), device)
    correct = model(X).argmax(dim=-1) == Y                 # (batch, n, 2)
    return correct.float().mean(dim=(0, 1)).cpu()           # (2,): left, right


@torch.no_grad()
def weight_on_neighbours(model, num_examples=500, seed=99):
    """How much weight each head puts on the left and on the right neighbour, on average
    over the queries of fresh sequences: (heads, 2). 1.0 = all of it, a clean head."""
    device = next(model.parameters()).device
    X, _ = neighbour_batch(num_examples, torch.Generator().manual_seed(seed), device)
    model(X)                                                # keeps the heads' weights
    weights = head_weights(model.attention, num_examples)   # (batch, heads, n, n)
    query = torch.arange(SEQ_LEN, device=device)
    left = weights[:, :, query, (query - 1) % SEQ_LEN]       # (batch, heads, n)
    right = weights[:, :, query, (query + 1) % SEQ_LEN]      # (batch, heads, n)
    return torch.stack([left.mean(dim=(0, 2)), right.mean(dim=(0, 2))], dim=-1).cpu()


@torch.no_grad()
def accuracy_without_head(model, head, **kwargs):
    """neighbour_accuracy with one head switched off: the columns of W_o that read
    that head's output are set to 0 for the measurement, then restored."""
    W_o = model.attention.W_o.weight                        # (d, heads * d/heads)
    width = W_o.shape[1] // model.attention.num_heads
    columns = slice(head * width, (head + 1) * width)       # where head `head` lands
    saved = W_o[:, columns].clone()
    W_o[:, columns] = 0
    try:
        return neighbour_accuracy(model, **kwargs)
    finally:
        W_o[:, columns] = saved


def train_neighbour_model(num_heads, num_steps=150, snapshot_at=(), probe=None, seed=0,
                          device=None, num_hiddens=32, mlp_hiddens=None):
    """Train a NeighbourModel with Adam; return it, its losses, and snapshots.

    At every step listed in `snapshot_at` (0 = before training) a snapshot stores the
    heads' weights on the one sequence `probe` (shape (n,)) and the accuracy then.
    """
    torch.manual_seed(seed)
    model = NeighbourModel(num_heads, num_hiddens, mlp_hiddens).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    data = torch.Generator().manual_seed(seed + 1)
    losses, snapshots = [], {}

    def snapshot(step):
        with torch.no_grad():
            model(probe.reshape(1, -1).to(device))
        weights = head_weights(model.attention, 1)[0].cpu()                # (h, n, n)
        snapshots[step] = {"weights": weights, "accuracy": neighbour_accuracy(model)}

    with one_cpu_thread(device):
        for step in range(num_steps + 1):
            if step in snapshot_at:
                snapshot(step)
            if step == num_steps:
                break
            X, Y = neighbour_batch(128, data, device)
            loss = nn.functional.cross_entropy(model(X).reshape(-1, VOCAB_SIZE),
                                               Y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return model, losses, snapshots
