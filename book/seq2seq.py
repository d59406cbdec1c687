"""RNN encoder-decoder (seq2seq) with and without Bahdanau attention (chapter 4).

The calls follow d2l's (`Seq2SeqEncoder`, `Seq2SeqDecoder`, `Seq2SeqAttentionDecoder`,
`init_state`), with batch-first tensors throughout: (batch, steps, features). Training uses
`book.train.train_seq2seq` (teacher forcing, the same loop as chapter 7's Transformer).
"""
import re

import torch
from torch import nn

from .attention import AdditiveAttention
from .device import one_cpu_thread


class Seq2SeqEncoder(nn.Module):
    """Embedding + GRU. Returns every step's state (the keys and values) and the final one.

    With `bidirectional=True` (Bahdanau's choice) a second GRU reads the input backwards;
    each direction has num_hiddens // 2 units and their states are concatenated, so the
    outputs have num_hiddens features either way. The final state is then [forward state
    after the last real token; backward state after the first token], not outputs[:, -1].
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers=1, dropout=0.0,
                 bidirectional=False):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens // 2 if bidirectional else num_hiddens,
                          num_layers, dropout=dropout, batch_first=True,
                          bidirectional=bidirectional)

    def forward(self, X, valid_lens):
        embs = self.embedding(X)  # (batch, num_steps, embed_size)
        # Packing makes the GRU stop at each sequence's last real token, so the final state
        # summarises the input, not the padding after it.
        packed = nn.utils.rnn.pack_padded_sequence(embs, valid_lens.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        outputs, state = self.rnn(packed)  # state: (num_layers * directions, batch, units)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True,
                                                      total_length=X.shape[1])
        if self.rnn.bidirectional:  # each layer: [forward h_T; backward h_1]
            state = state.unflatten(0, (-1, 2))                 # (layers, 2, batch, units)
            state = torch.cat([state[:, 0], state[:, 1]], -1)  # (layers, batch, hiddens)
        return outputs, state  # outputs: (batch, num_steps, num_hiddens), zero on padding


class Seq2SeqDecoder(nn.Module):
    """The plain decoder: the encoder's final state is its only view of the input."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers=1, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout, batch_first=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_all_outputs, enc_valid_lens):
        _, enc_state = enc_all_outputs
        return enc_state, enc_state[-1]  # start from it; the top layer is the context

    def forward(self, X, state):
        hidden_state, context = state            # context: (batch, num_hiddens)
        embs = self.embedding(X)                 # (batch, num_steps, embed_size)
        context = context.unsqueeze(1).expand(-1, embs.shape[1], -1)  # same at every step
        outputs, hidden_state = self.rnn(torch.cat([embs, context], dim=-1), hidden_state)
        return self.dense(outputs), (hidden_state, state[1])  # (batch, num_steps, vocab)


class Seq2SeqAttentionDecoder(nn.Module):
    """Bahdanau's decoder: at every step the previous state queries the encoder states."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers=1, dropout=0.0,
                 attention_size=None):
        super().__init__()
        # Additive attention's own hidden size: smaller than num_hiddens is cheaper.
        self.attention = AdditiveAttention(attention_size or num_hiddens, dropout,
                                           query_size=num_hiddens, key_size=num_hiddens)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout, batch_first=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_all_outputs, enc_valid_lens):
        enc_outputs, enc_state = enc_all_outputs
        return enc_outputs, enc_state, enc_valid_lens

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state  # keys = values = enc_outputs
        embs = self.embedding(X)                           # (batch, num_steps, embed_size)
        outputs, weights = [], []
        for emb in embs.unbind(dim=1):                     # one target step at a time
            query = hidden_state[-1].unsqueeze(1)          # (batch, 1, num_hiddens)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat([context, emb.unsqueeze(1)], dim=-1)  # (batch, 1, hiddens+embed)
            out, hidden_state = self.rnn(x, hidden_state)  # out: (batch, 1, num_hiddens)
            outputs.append(out)
            weights.append(self.attention.attention_weights)  # (batch, 1, enc_steps)
        self.attention_weights = torch.cat(weights, dim=1)  # (batch, num_steps, enc_steps)
        outputs = torch.cat(outputs, dim=1)                    # (batch, num_steps, hiddens)
        return self.dense(outputs), (enc_outputs, hidden_state, enc_valid_lens)


class EncoderDecoder(nn.Module):
    """Encode the source once, then decode the (teacher-forced) target."""

    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, src, dec_input, src_valid_len):
        state = self.decoder.init_state(self.encoder(src, src_valid_len), src_valid_len)
        return self.decoder(dec_input, state)[0]  # logits: (batch, tgt_steps, vocab)


def make_model(src_vocab, tgt_vocab, attention, embed_size=32, num_hiddens=64,
               attention_size=None, bidirectional=True):
    """A one-layer GRU encoder-decoder, with Bahdanau attention or without."""
    encoder = Seq2SeqEncoder(len(src_vocab), embed_size, num_hiddens,
                             bidirectional=bidirectional)
    if attention:
        decoder = Seq2SeqAttentionDecoder(len(tgt_vocab), embed_size, num_hiddens,
                                          attention_size=attention_size)
    else:
        decoder = Seq2SeqDecoder(len(tgt_vocab), embed_size, num_hiddens)
    return EncoderDecoder(encoder, decoder)


@torch.no_grad()
def greedy_decode(model, src, src_valid_len, num_steps, bos, eos):
    """Decode a batch greedily, feeding each predicted token back in.

    Returns the tokens (batch, num_steps), with <eos> after the end, and for an attention
    decoder the weights (batch, num_steps, src_steps), else None.
    """
    was_training = model.training
    model.eval()
    state = model.decoder.init_state(model.encoder(src, src_valid_len), src_valid_len)
    token = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    tokens, weights = [], []
    for _ in range(num_steps):
        logits, state = model.decoder(token, state)  # (batch, 1, vocab)
        token = logits.argmax(dim=-1)                # (batch, 1)
        tokens.append(token)
        weights.append(getattr(model.decoder, "attention_weights", None))
    model.train(was_training)
    tokens = torch.cat(tokens, dim=1)                # (batch, num_steps)
    ended = (tokens == eos).cumsum(dim=1) > 0        # at or after the first <eos>
    tokens = tokens.masked_fill(ended, eos)
    if weights[0] is None:
        return tokens, None
    return tokens, torch.cat(weights, dim=1)         # (batch, num_steps, src_steps)


def predict_seq2seq(model, data, pairs, device=None, batch_size=500):
    """Greedy-decode the sources of `pairs`; return the predicted texts and, for an
    attention model, each prediction's weights (num_steps_tgt, src_steps), else None."""
    device = device or next(model.parameters()).device
    texts, weights = [], []
    with one_cpu_thread(device):  # small matrices: one CPU thread is fastest
        for start in range(0, len(pairs), batch_size):
            src, _, src_valid_len, _ = data.tensors(pairs[start:start + batch_size])
            tokens, w = greedy_decode(model, src.to(device), src_valid_len.to(device),
                                      data.num_steps_tgt, data.tgt_vocab.bos,
                                      data.tgt_vocab.eos)
            texts += [data.tgt_vocab.decode(t) for t in tokens.cpu()]
            if w is not None:
                weights += list(w.cpu())
    return texts, (weights or None)


def accuracy_by_length(sources, predictions, targets, bins):
    """Exact match per bin of source length (in characters): [(low, high, count, accuracy)].

    `bins` are the edges: a source of length n falls in [bins[i], bins[i + 1]).
    """
    rows = []
    for low, high in zip(bins[:-1], bins[1:]):
        hits = [p == t for s, p, t in zip(sources, predictions, targets)
                if low <= len(s) < high]
        rows.append((low, high, len(hits), sum(hits) / len(hits) if hits else float("nan")))
    return rows


def translate(model, data, source, device=None):
    """Decode one source text; return the prediction and, for an attention model, its
    weights trimmed to (output tokens + <eos>, source characters + <eos>), else None."""
    texts, weights = predict_seq2seq(model, data, [(source, "")], device)
    if weights is None:
        return texts[0], None
    num_out = len(data.tgt_vocab.encode(texts[0])) + 1  # + <eos>
    num_in = len(data.src_vocab.encode(source)) + 1     # + <eos>
    return texts[0], weights[0][:num_out, :num_in]


def year_positions(source, target, separator="; "):
    """Where each date's year stands: [(target positions, source positions)], one per date.

    The target lists ISO dates "yyyy-mm-dd" separated by spaces, so date i's year is at
    11 i .. 11 i + 3; in the source, every format writes the year as the only 4-digit
    number of its date.
    """
    pairs, offset = [], 0
    for i, part in enumerate(source.split(separator)):
        start = offset + re.search(r"\d{4}", part).start()
        pairs.append((list(range(11 * i, 11 * i + 4)), list(range(start, start + 4))))
        offset += len(part) + len(separator)
    return pairs


def attention_share(weights, pairs):
    """The mean, over the target positions of `pairs`, of the attention weight each puts
    on its source positions. weights: (target steps, source steps); pairs: as returned by
    year_positions."""
    shares = [weights[t, cols].sum().item() for rows, cols in pairs for t in rows]
    return sum(shares) / len(shares)
