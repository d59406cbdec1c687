"""The Transformer (chapter 7): blocks, encoder, decoder, encoder-decoder, greedy decoding.

Calls follow d2l's where d2l has the piece (PositionWiseFFN, AddNorm,
TransformerEncoderBlock, TransformerEncoder). d2l 1.0.3 has no Transformer decoder class;
ours is stateless: the decoder always sees the whole target prefix, and a causal mask hides
the future.
"""
import math

import torch
from torch import nn

from .attention import MultiHeadAttention, PositionalEncoding, _linear


class PositionWiseFFN(nn.Module):
    """The same two-layer MLP applied at every position: Linear -> ReLU -> Linear."""

    def __init__(self, ffn_num_hiddens, ffn_num_outputs, num_inputs=None):
        super().__init__()
        self.dense1 = _linear(num_inputs, ffn_num_hiddens, bias=True)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))  # (batch, n, d) -> (batch, n, out)


class AddNorm(nn.Module):
    """Residual connection followed by layer normalisation: LayerNorm(X + Dropout(Y))."""

    def __init__(self, norm_shape, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(norm_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class TransformerEncoderBlock(nn.Module):
    """Self-attention then a position-wise FFN, each wrapped in AddNorm."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False,
                 fused=False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias,
                                            fused)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, num_inputs=num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))  # (batch, n, d)
        return self.addnorm2(Y, self.ffn(Y))                       # (batch, n, d)


def _embedding(vocab_size, num_hiddens):
    """Token embeddings with std 1/sqrt(d), so that scaling them by sqrt(d) gives std 1,
    the size of the positional encoding. (PyTorch's default std 1 would make them sqrt(d)
    times larger than the encoding, which slows a small Transformer down: see chapter 7.)"""
    embedding = nn.Embedding(vocab_size, num_hiddens)
    nn.init.normal_(embedding.weight, std=num_hiddens ** -0.5)
    return embedding


class TransformerEncoder(nn.Module):
    """Embedding * sqrt(d) + positional encoding, then `num_blks` encoder blocks."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                 dropout, use_bias=False, max_len=1000, fused=False):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = _embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.blks = nn.Sequential(*[
            TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout,
                                    use_bias, fused) for _ in range(num_blks)])

    def forward(self, X, valid_lens):
        X = self.embedding(X) * math.sqrt(self.num_hiddens)  # (batch, n, d)
        X = self.pos_encoding(X)
        self.attention_weights = []
        for blk in self.blks:
            X = blk(X, valid_lens)
            self.attention_weights.append(blk.attention.attention.attention_weights)
        return X


def causal_valid_lens(batch_size, num_steps, device=None):
    """Query t may see keys 0..t: per-query valid lengths 1, 2, ..., num_steps."""
    return torch.arange(1, num_steps + 1, device=device).repeat(batch_size, 1)  # (batch, n)


class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder, an FFN; each in AddNorm."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False,
                 fused=False):
        super().__init__()
        heads = (num_hiddens, num_heads, dropout, use_bias, fused)
        self.attention1 = MultiHeadAttention(*heads)  # masked self-attention
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention2 = MultiHeadAttention(*heads)  # cross-attention
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, num_inputs=num_hiddens)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, enc_outputs, enc_valid_lens):
        causal = causal_valid_lens(X.shape[0], X.shape[1], X.device)  # (batch, n)
        Y = self.addnorm1(X, self.attention1(X, X, X, causal))       # sees only the past
        # Cross-attention: queries from the decoder, keys and values from the encoder.
        Z = self.addnorm2(Y, self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z))                          # (batch, n, d)


class TransformerDecoder(nn.Module):
    """Embedding + positional encoding, `num_blks` decoder blocks, a linear output layer."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                 dropout, use_bias=False, max_len=1000, fused=False):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = _embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.blks = nn.Sequential(*[
            TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout,
                                    use_bias, fused) for _ in range(num_blks)])
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def forward(self, X, enc_outputs, enc_valid_lens):
        X = self.embedding(X) * math.sqrt(self.num_hiddens)  # (batch, n, d)
        X = self.pos_encoding(X)
        self.attention_weights = {"self": [], "cross": []}
        for blk in self.blks:
            X = blk(X, enc_outputs, enc_valid_lens)
            self_attention, cross = blk.attention1.attention, blk.attention2.attention
            self.attention_weights["self"].append(self_attention.attention_weights)
            self.attention_weights["cross"].append(cross.attention_weights)
        return self.dense(X)  # (batch, n, vocab_size)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of Vaswani et al. (2017), post-LayerNorm."""

    def __init__(self, src_vocab_size, tgt_vocab_size, num_hiddens=64, ffn_num_hiddens=256,
                 num_heads=4, num_blks=2, dropout=0.1, use_bias=False, max_len=1000,
                 fused=False):
        super().__init__()
        sizes = (num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
                 max_len, fused)
        self.encoder = TransformerEncoder(src_vocab_size, *sizes)
        self.decoder = TransformerDecoder(tgt_vocab_size, *sizes)

    def forward(self, src, dec_input, src_valid_lens):
        enc_outputs = self.encoder(src, src_valid_lens)                # (batch, n_src, d)
        return self.decoder(dec_input, enc_outputs, src_valid_lens)  # (batch, n_tgt, vocab)


@torch.no_grad()
def greedy_decode(model, src, src_valid_lens, num_steps, bos, eos):
    """Decode a batch greedily: at each step append the most likely next token.

    Returns (batch, num_steps) token indices; positions after <eos> are <eos>.
    """
    model.eval()
    enc_outputs = model.encoder(src, src_valid_lens)                   # computed once
    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(num_steps):
        logits = model.decoder(out, enc_outputs, src_valid_lens)       # (batch, t, vocab)
        next_token = logits[:, -1].argmax(dim=-1)                      # (batch,)
        next_token = next_token.masked_fill(done, eos)
        out = torch.cat([out, next_token[:, None]], dim=1)
        done |= next_token == eos
        if done.all():
            break
    tokens = out[:, 1:]
    if tokens.shape[1] < num_steps:  # every sequence ended early: pad with <eos>
        pad = torch.full((src.shape[0], num_steps - tokens.shape[1]), eos,
                         device=src.device)                            # (batch, rest)
        tokens = torch.cat([tokens, pad], dim=1)                       # (batch, num_steps)
    return tokens


@torch.no_grad()
def attention_maps(model, src, src_valid_lens, dec_input):
    """Run `model` once (eval mode) and return its attention weights, split into heads.

    Returns a dict with "encoder self-attention", "decoder self-attention" and
    "cross-attention", each a tensor of shape (layers, batch, heads, queries, keys).
    """
    model.eval()
    model(src, dec_input, src_valid_lens)
    heads = model.encoder.blks[0].attention.num_heads

    def stack(weights):  # per layer (batch*heads, q, k) -> (layers, batch, heads, q, k)
        return torch.stack([w.reshape(-1, heads, *w.shape[1:]) for w in weights])

    return {"encoder self-attention": stack(model.encoder.attention_weights),
            "decoder self-attention": stack(model.decoder.attention_weights["self"]),
            "cross-attention": stack(model.decoder.attention_weights["cross"])}


class TorchTransformer(nn.Module):
    """The same model around `torch.nn.Transformer`: our embeddings, positional encoding and
    output layer, PyTorch's encoder and decoder stacks. Called like `Transformer`."""

    def __init__(self, src_vocab_size, tgt_vocab_size, num_hiddens=64, ffn_num_hiddens=256,
                 num_heads=4, num_blks=2, dropout=0.1, max_len=1000):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.src_embedding = _embedding(src_vocab_size, num_hiddens)
        self.tgt_embedding = _embedding(tgt_vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.transformer = nn.Transformer(num_hiddens, num_heads, num_blks, num_blks,
                                          ffn_num_hiddens, dropout, batch_first=True)
        self.dense = nn.Linear(num_hiddens, tgt_vocab_size)

    def forward(self, src, dec_input, src_valid_lens):
        scale = math.sqrt(self.num_hiddens)
        X = self.pos_encoding(self.src_embedding(src) * scale)        # (batch, n_src, d)
        Y = self.pos_encoding(self.tgt_embedding(dec_input) * scale)  # (batch, n_tgt, d)
        # PyTorch's convention: True (or -inf) means "ignore this key".
        positions = torch.arange(src.shape[1], device=src.device)     # (n_src,)
        padding = positions >= src_valid_lens[:, None]                # (batch, n_src)
        causal = nn.Transformer.generate_square_subsequent_mask(
            dec_input.shape[1], device=src.device)                    # (n_tgt, n_tgt)
        Y = self.transformer(X, Y, tgt_mask=causal, src_key_padding_mask=padding,
                             memory_key_padding_mask=padding, tgt_is_causal=True)
        return self.dense(Y)                                        # (batch, n_tgt, vocab)


@torch.no_grad()
def copy_to_torch_layer(block, layer):
    """Copy our encoder (decoder) block's weights into an nn.TransformerEncoderLayer
    (nn.TransformerDecoderLayer) built with batch_first=True; missing biases become 0."""

    def attention(ours, theirs):
        zeros = torch.zeros_like(ours.W_o.weight[:, 0])                 # (d,)
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight,
                                               ours.W_v.weight]))       # (3d, d)
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        biases = [zeros if w.bias is None else w.bias
                  for w in (ours.W_q, ours.W_k, ours.W_v, ours.W_o)]
        theirs.in_proj_bias.copy_(torch.cat(biases[:3]))
        theirs.out_proj.bias.copy_(biases[3])

    if hasattr(block, "attention1"):  # a decoder block: self- and cross-attention
        attention(block.attention1, layer.self_attn)
        attention(block.attention2, layer.multihead_attn)
        norms = [block.addnorm1, block.addnorm2, block.addnorm3]
    else:                             # an encoder block
        attention(block.attention, layer.self_attn)
        norms = [block.addnorm1, block.addnorm2]
    for i, ours in enumerate(norms, start=1):
        getattr(layer, f"norm{i}").load_state_dict(ours.ln.state_dict())
    layer.linear1.load_state_dict(block.ffn.dense1.state_dict())
    layer.linear2.load_state_dict(block.ffn.dense2.state_dict())
    return layer
