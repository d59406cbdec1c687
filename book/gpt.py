"""A GPT (chapter 9): a decoder-only Transformer that writes text one token at a time.

Pre-LN blocks of causal self-attention and a position-wise FFN, token embeddings tied to the
output layer, learned absolute position embeddings, a key-value cache per layer, and the
sampling rules: greedy, temperature, top-k and top-p. Chapter 10 changes how positions
enter (the attention's `qk_transform` and `score_bias` hooks, `GPT.position_embedding`),
chapter 11 uses fewer key-value heads (`GPTConfig.num_kv_heads`) and `kv_cache_bytes`.
"""
import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .device import one_cpu_thread
from .transformer import PositionWiseFFN


# -- The model ----------------------------------------------------------------------------

@dataclass
class GPTConfig:
    """The sizes of a GPT; the defaults are those of chapter 9's character model."""
    vocab_size: int = 128           # V: how many different tokens there are
    block_size: int = 64            # the longest sequence: positions 0, ..., block_size - 1
    num_layers: int = 2             # L: decoder blocks, stacked
    num_heads: int = 4              # h: query heads per attention layer
    num_hiddens: int = 64           # d: the width of every token's vector
    ffn_num_hiddens: int = 256      # the hidden width of the FFN, usually 4d
    dropout: float = 0.0            # on the embeddings, attention weights, sublayer outputs
    num_kv_heads: int | None = None  # key-value heads, None = num_heads (chapter 11: fewer)
    fused: bool = False             # attention by torch's scaled_dot_product_attention

    def __post_init__(self):
        kv = self.num_kv_heads or self.num_heads
        if self.num_hiddens % self.num_heads or self.num_heads % kv:
            raise ValueError(f"num_hiddens={self.num_hiddens} must be divisible by "
                             f"num_heads={self.num_heads}, and num_heads by "
                             f"num_kv_heads={kv}")

    @property
    def head_size(self):
        return self.num_hiddens // self.num_heads


class KVCache:
    """One layer's keys and values of every position so far, filled from position 0: a new
    token's step then computes only its own key and value, not the whole prefix's again."""

    def __init__(self):
        self.keys = self.values = None  # (batch, kv_heads, positions, head_size) each

    def __len__(self):
        return 0 if self.keys is None else self.keys.shape[2]

    def append(self, keys, values):
        """Add the new positions' keys and values; return those of all positions so far."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)        # (batch, kv, t + n, hs)
            self.values = torch.cat([self.values, values], dim=2)  # (batch, kv, t + n, hs)
        return self.keys, self.values


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which the token at position i sees positions 0, ..., i.

    `forward` takes the tokens' absolute positions, so a cached step knows where it is. Two
    hooks, both off by default, let chapter 10 change how positions enter:
    `qk_transform(X, positions)` transforms queries and keys (RoPE rotates them), and
    `score_bias(query_positions, key_positions)` is added to the scores (ALiBi).
    """

    def __init__(self, config, qk_transform=None, score_bias=None):
        super().__init__()
        d, hs = config.num_hiddens, config.head_size
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads or config.num_heads
        self.head_size, self.fused = hs, config.fused
        self.W_q = nn.Linear(d, self.num_heads * hs, bias=False)
        self.W_k = nn.Linear(d, self.num_kv_heads * hs, bias=False)
        self.W_v = nn.Linear(d, self.num_kv_heads * hs, bias=False)
        self.W_o = nn.Linear(self.num_heads * hs, d, bias=False)
        self.dropout = nn.Dropout(config.dropout)
        self.qk_transform, self.score_bias = qk_transform, score_bias

    def split_heads(self, X):
        """(batch, n, heads * head_size) -> (batch, heads, n, head_size)."""
        return X.reshape(X.shape[0], X.shape[1], -1, self.head_size).transpose(1, 2)

    def forward(self, X, positions, cache=None):
        """X (batch, n, d) holds the tokens at `positions` (n,); returns (batch, n, d)."""
        Q = self.split_heads(self.W_q(X))            # (batch, h, n, hs)
        K = self.split_heads(self.W_k(X))            # (batch, kv, n, hs)
        V = self.split_heads(self.W_v(X))            # (batch, kv, n, hs)
        if self.qk_transform is not None:  # keys are transformed once, at their positions
            Q, K = self.qk_transform(Q, positions), self.qk_transform(K, positions)
        key_positions = positions
        if cache is not None:              # the keys and values of every position so far
            K, V = cache.append(K, V)                                  # (batch, kv, t, hs)
            key_positions = torch.arange(K.shape[2], device=X.device)  # (t,)
        group = self.num_heads // self.num_kv_heads  # query heads per key-value head
        if group > 1:                                # (chapter 11)
            K = K.repeat_interleave(group, dim=1)    # (batch, h, t, hs)
            V = V.repeat_interleave(group, dim=1)    # (batch, h, t, hs)
        causal = key_positions <= positions[:, None]     # (n, t): True = may attend
        bias = None
        if self.score_bias is not None:
            bias = self.score_bias(positions, key_positions)  # broadcasts to (.., n, t)
        if self.fused:
            out = self._fused(Q, K, V, causal, bias)                  # (b, h, n, hs)
        else:
            scores = Q @ K.transpose(2, 3) / math.sqrt(self.head_size)  # (b, h, n, t)
            if bias is not None:
                scores = scores + bias
            scores = scores.masked_fill(~causal, float("-inf"))  # every row keeps key 0
            self.attention_weights = torch.softmax(scores, dim=-1)      # (b, h, n, t)
            out = self.dropout(self.attention_weights) @ V              # (b, h, n, hs)
        out = out.transpose(1, 2).reshape(X.shape[0], X.shape[1], -1)   # (b, n, h * hs)
        return self.W_o(out)                                            # (b, n, d)

    def _fused(self, Q, K, V, causal, bias):
        """The same attention by PyTorch's fused kernel (no weights are kept)."""
        dropout = self.dropout.p if self.training else 0.0
        self.attention_weights = None
        if bias is None and K.shape[2] == Q.shape[2]:  # a whole sequence: the kernel's mask
            return F.scaled_dot_product_attention(Q, K, V, dropout_p=dropout,
                                                  is_causal=True)
        mask = causal if bias is None else bias.masked_fill(~causal, float("-inf"))
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, dropout_p=dropout)


class GPTBlock(nn.Module):
    """A pre-LN decoder-only block: X + attention(LN(X)), then X + FFN(LN(X)).
    Exercise 7.3's pre-LN block with a causal mask; no cross-attention, no encoder."""

    def __init__(self, config, qk_transform=None, score_bias=None):
        super().__init__()
        d = config.num_hiddens
        self.ln1 = nn.LayerNorm(d)
        self.attention = CausalSelfAttention(config, qk_transform, score_bias)
        self.ln2 = nn.LayerNorm(d)
        self.ffn = PositionWiseFFN(config.ffn_num_hiddens, d, num_inputs=d)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, X, positions, cache=None):
        X = X + self.dropout(self.attention(self.ln1(X), positions, cache))  # (b, n, d)
        return X + self.dropout(self.ffn(self.ln2(X)))                       # (b, n, d)


class GPT(nn.Module):
    """A decoder-only Transformer language model: tokens in, next-token scores out.

    `position_embedding` maps positions (n,) to vectors (n, d) added to the input: learned
    absolute positions here; chapter 10 replaces it (or sets it to None)."""

    def __init__(self, config, qk_transform=None, score_bias=None):
        super().__init__()
        self.config = config
        d = config.num_hiddens
        self.token_embedding = nn.Embedding(config.vocab_size, d)
        self.position_embedding = nn.Embedding(config.block_size, d)
        for embedding in (self.token_embedding, self.position_embedding):
            nn.init.normal_(embedding.weight, std=0.02)   # small, as in GPT-2
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([GPTBlock(config, qk_transform, score_bias)
                                     for _ in range(config.num_layers)])
        self.ln_f = nn.LayerNorm(d)  # pre-LN: the blocks' sum is normalised once, here

    def forward(self, tokens, caches=None):
        """tokens (batch, n) -> logits (batch, n, V). With `caches` (one KVCache per block,
        from `new_caches()`) the tokens continue the sequence the caches hold."""
        start = 0 if caches is None else len(caches[0])
        end = start + tokens.shape[1]
        if end > self.config.block_size:
            raise ValueError(f"positions {start}..{end - 1} do not fit in block_size="
                             f"{self.config.block_size}: shorten the input or build the "
                             "model with a larger block_size")
        positions = torch.arange(start, end, device=tokens.device)  # (n,)
        X = self.token_embedding(tokens)                        # (batch, n, d)
        if self.position_embedding is not None:
            X = X + self.position_embedding(positions)          # + (n, d): every sequence
        X = self.dropout(X)
        for i, block in enumerate(self.blocks):
            X = block(X, positions, None if caches is None else caches[i])  # (batch, n, d)
        # Tied embeddings: the output layer is the token embedding matrix, transposed.
        return self.ln_f(X) @ self.token_embedding.weight.T     # (batch, n, V)

    def new_caches(self):
        """One empty KVCache per block."""
        return [KVCache() for _ in self.blocks]


# -- Sampling and generation --------------------------------------------------------------

def top_k_filter(logits, k):
    """Keep the k largest logits of each row, and any tied with the k-th; the rest -inf.
    With k at least the vocabulary size, every token is kept."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got k={k}")
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]         # (..., 1): the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits, p):
    """Keep the most probable tokens until their probabilities add up to p: the token that
    crosses p is kept, and any tied with it; the rest -inf (exercise 9.1)."""
    if not 0 < p <= 1:
        raise ValueError(f"top-p needs 0 < p <= 1, got p={p}")
    if p == 1:  # every token: a rounded running sum can reach 1 before the last tokens
        return logits.clone()
    wide = torch.promote_types(logits.dtype, torch.float32)  # float64 stays float64
    probs = torch.softmax(logits.to(wide), dim=-1)                 # (..., V)
    ranked = probs.sort(dim=-1, descending=True).values            # (..., V)
    before = ranked.cumsum(dim=-1) - ranked       # the mass of the tokens ranked above each
    num_kept = (before < p).sum(dim=-1, keepdim=True)  # (..., 1): up to the one crossing p
    threshold = ranked.gather(-1, num_kept - 1)        # (..., 1): its probability
    return logits.masked_fill(probs < threshold, float("-inf"))


def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution sample_next draws from, (batch, V): softmax(logits / temperature)
    over the top-k and then the top-p tokens; all on the largest logit at temperature 0."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).float()  # (batch, V)
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.softmax(logits.float(), dim=-1)                    # (batch, V)


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One token per row of `logits` (batch, V): the largest logit at temperature 0
    (greedy), otherwise a draw from sampling_probs. The draw is made on the CPU, where
    `generator` lives, so that a seed means the same on every device."""
    if temperature == 0:
        return logits.argmax(dim=-1)                                # (batch,)
    probs = sampling_probs(logits, temperature, top_k, top_p).cpu()  # (batch, V)
    token = torch.multinomial(probs, 1, generator=generator)        # (batch, 1)
    return token.squeeze(-1).to(logits.device)                      # (batch,)


@torch.no_grad()
def generate(model, prompt, max_new_tokens, use_cache=True, temperature=1.0, top_k=None,
             top_p=None, generator=None):
    """Continue `prompt` (batch, n) by `max_new_tokens` tokens: (batch, n + max_new_tokens).

    With the cache, each step feeds the model only the tokens it has not seen yet (the
    prompt, then one token at a time); without it, every step recomputes the whole sequence.
    """
    if prompt.shape[1] + max_new_tokens > model.config.block_size:
        raise ValueError(f"a prompt of {prompt.shape[1]} tokens plus {max_new_tokens} new "
                         f"ones does not fit in block_size={model.config.block_size}")
    training = model.training
    model.eval()
    tokens, caches = prompt, (model.new_caches() if use_cache else None)
    for _ in range(max_new_tokens):
        if use_cache:
            logits = model(tokens[:, len(caches[0]):], caches)[:, -1]  # (batch, V)
        else:
            logits = model(tokens)[:, -1]                              # (batch, V)
        next_token = sample_next(logits, temperature, top_k, top_p, generator)  # (batch,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)       # (batch, n + 1)
    model.train(training)
    return tokens


# -- Memory, timing and agreement with PyTorch --------------------------------------------

def kv_cache_bytes(num_layers, num_positions, num_kv_heads, head_size, bytes_per_number,
                   batch_size=1):
    """Bytes a KV cache holds: a key and a value (2) of num_kv_heads x head_size numbers
    for every layer, position and sequence."""
    return (2 * num_layers * num_positions * num_kv_heads * head_size * bytes_per_number
            * batch_size)


def cache_nbytes(caches):
    """Bytes actually held by a model's caches (keys and values of every layer)."""
    return sum(t.numel() * t.element_size() for c in caches for t in (c.keys, c.values))


@torch.no_grad()
def time_per_token(model, position, use_cache, repeats=5):
    """Seconds to produce the next token at `position` >= 1, for one sequence of random
    tokens: with the cache, one step after `position` cached positions; without, a forward
    pass over all `position + 1` tokens. Each run follows an untimed one of the same shapes;
    the fastest of `repeats` runs counts (the machine can only slow a run down). On a CPU
    the clock is this process's CPU time on one thread, so other programs do not count."""
    device = next(model.parameters()).device
    on_gpu = device.type == "cuda"
    clock = time.perf_counter if on_gpu else time.process_time
    model.eval()
    tokens = torch.randint(model.config.vocab_size, (1, position + 1),
                           generator=torch.Generator().manual_seed(position)).to(device)
    times = []
    with one_cpu_thread(device):
        for _ in range(repeats):
            if use_cache:  # fill position - 1 positions, then one untimed step
                caches = model.new_caches()
                if position > 1:
                    model(tokens[:, :position - 1], caches)
                model(tokens[:, position - 1:position], caches)
                inputs = tokens[:, position:]                 # one token, `position` cached
            else:
                caches, inputs = None, tokens                 # the whole sequence
                model(inputs)                                 # untimed
            if on_gpu:
                torch.cuda.synchronize(device)
            start = clock()
            model(inputs, caches)[:, -1].argmax(-1).tolist()  # .tolist() waits for it
            times.append(clock() - start)
    return min(times)


@torch.no_grad()
def to_torch_layer(block):
    """A `nn.TransformerEncoderLayer(norm_first=True)` holding `block`'s weights (its
    attention biases zero, as ours has none); with a causal mask it computes the block."""
    attention, d = block.attention, block.ln1.normalized_shape[0]
    if attention.num_kv_heads != attention.num_heads:
        raise ValueError("nn.TransformerEncoderLayer has one key-value head per query head")
    layer = nn.TransformerEncoderLayer(d, attention.num_heads,
                                       block.ffn.dense1.out_features, dropout=0.0,
                                       batch_first=True, norm_first=True)
    layer.self_attn.in_proj_weight.copy_(torch.cat([attention.W_q.weight,
                                                    attention.W_k.weight,
                                                    attention.W_v.weight]))  # (3d, d)
    layer.self_attn.in_proj_bias.zero_()
    layer.self_attn.out_proj.weight.copy_(attention.W_o.weight)
    layer.self_attn.out_proj.bias.zero_()
    layer.norm1.load_state_dict(block.ln1.state_dict())
    layer.norm2.load_state_dict(block.ln2.state_dict())
    layer.linear1.load_state_dict(block.ffn.dense1.state_dict())
    layer.linear2.load_state_dict(block.ffn.dense2.state_dict())
    return layer.to(block.ln1.weight.device).eval()


# -- Characters of the Python documentation, baselines and training ------------------------

class CharData:
    """The text of `pydoc_data.topics` (the documentation behind `help()`), one token per
    character. The last `held_out` fraction of every topic is the validation text."""

    def __init__(self, held_out=0.1):
        from pydoc_data.topics import topics

        texts = [topics[name] for name in sorted(topics)]
        cuts = [round(len(t) * (1 - held_out)) for t in texts]
        self.train_text = "".join(t[:c] for t, c in zip(texts, cuts))
        self.val_text = "".join(t[c:] for t, c in zip(texts, cuts))
        self.chars = sorted(set(self.train_text + self.val_text))  # the alphabet
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.train = self.encode(self.train_text)                   # (num_train,)
        self.val = self.encode(self.val_text)                       # (num_val,)

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        try:
            return torch.tensor([self.index[c] for c in text], dtype=torch.long)
        except KeyError as error:
            raise ValueError(f"character {error.args[0]!r} is not in the vocabulary"
                             ) from None

    def decode(self, tokens):
        return "".join(self.chars[int(i)] for i in tokens)

    def batch(self, batch_size, block_size, generator):
        """Random windows of the training text: inputs X, targets Y = X shifted by one."""
        starts = torch.randint(len(self.train) - block_size, (batch_size,),
                               generator=generator)                     # (batch,)
        offsets = torch.arange(block_size + 1)                         # (block_size + 1,)
        windows = self.train[starts[:, None] + offsets]                 # (batch, block + 1)
        return windows[:, :-1], windows[:, 1:]                    # (batch, block) each


def ngram_loss(train, val, vocab_size, order, smoothing):
    """Validation cross-entropy (nats per token) of a unigram (order 1) or bigram (order 2)
    model counted on `train`, with `smoothing` added to every count."""
    if order == 1:
        counts = torch.bincount(train, minlength=vocab_size).double() + smoothing  # (V,)
        return -torch.log(counts[val] / counts.sum()).mean().item()
    if order != 2:
        raise ValueError(f"order must be 1 (unigram) or 2 (bigram), got {order}")
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)   # (previous, next)
    ones = torch.ones(len(train) - 1, dtype=torch.float64)
    counts.index_put_((train[:-1], train[1:]), ones, accumulate=True)   # count each pair
    probs = (counts + smoothing) / (counts + smoothing).sum(dim=1, keepdim=True)
    return -torch.log(probs[val[:-1], val[1:]]).mean().item()


@torch.no_grad()
def evaluate(model, tokens, block_size, max_windows=None):
    """Mean cross-entropy (nats per token) of `model` on `tokens`, cut into consecutive
    windows of block_size + 1 (each predicts its last block_size tokens); with
    `max_windows`, only that many, evenly spread over the text."""
    device = next(model.parameters()).device
    count = (len(tokens) - 1) // block_size
    starts = torch.arange(count) * block_size                              # (windows,)
    if max_windows is not None and max_windows < count:
        starts = starts[torch.linspace(0, count - 1, max_windows).long()]
    windows = tokens[starts[:, None] + torch.arange(block_size + 1)]     # (windows, T + 1)
    X, Y = windows[:, :-1].to(device), windows[:, 1:].to(device)         # (windows, T)
    training = model.training
    model.eval()
    total = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
                for x, y in zip(X.split(64), Y.split(64)))
    model.train(training)
    return total / Y.numel()


def train_gpt(model, data, num_steps, batch_size=32, lr=2e-3, clip=1.0, seed=0,
              eval_every=100, eval_windows=64, on_eval=None):
    """Train on random windows of the training text for `num_steps` steps with AdamW, the
    learning rate falling along a cosine to a tenth, gradients clipped to norm `clip`; no
    warm-up (a model of two blocks trains without one: exercise 7.4). Returns the training
    loss of every step and {step: validation loss on `eval_windows` windows spread over the
    validation text}; `on_eval(step)` is called after each evaluation (for samples)."""
    device = next(model.parameters()).device
    block_size = model.config.block_size
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(  # from lr down to lr / 10 along a cosine
        optimizer, lambda step: 0.1 + 0.45 * (1 + math.cos(math.pi * step / num_steps)))
    generator = torch.Generator().manual_seed(seed)
    losses, val_losses = [], {}
    model.train()
    with one_cpu_thread(device):  # a model this small trains fastest on one CPU thread
        for step in range(num_steps + 1):
            if step % eval_every == 0 or step == num_steps:
                val_losses[step] = evaluate(model, data.val, block_size, eval_windows)
                if on_eval is not None:
                    on_eval(step)
            if step == num_steps:
                break
            X, Y = (t.to(device) for t in data.batch(batch_size, block_size, generator))
            loss = F.cross_entropy(model(X).flatten(0, 1), Y.flatten())
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    return losses, val_losses
