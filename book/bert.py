"""BERT (chapter 8): text, tokens, masking, the model with its two heads, and fine-tuning.

The text is the documentation bundled with Python (`pydoc_data.topics`, what `help("if")`
prints), so nothing is downloaded. Calls follow d2l's where d2l has the piece
(`get_tokens_and_segments`, `BERTEncoder`, `MaskLM`, `NextSentencePred`, `BERTModel`).
The encoder blocks are chapter 7's `TransformerEncoderBlock`.
"""
import collections
import pathlib
import random
import re

import torch
from torch import nn
from torch.nn import functional as F

from .device import one_cpu_thread
from .transformer import TransformerEncoderBlock

# -- Tokens and the vocabulary -------------------------------------------------------------

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
IGNORE = -100  # label of a position the MLM loss skips (cross_entropy's ignore_index)
_TOKEN = re.compile(r"\[(?:PAD|UNK|CLS|SEP|MASK)\]|[a-z0-9_]+|[^\sa-z0-9_]", re.IGNORECASE)


def tokenize(text):
    """Lower-cased words (letters, digits, `_`) and single punctuation marks, split as
    BERT's basic tokenizer splits them; `[MASK]` and the other special tokens stay whole."""
    return [t.upper() if t.upper() in SPECIALS else t.lower() for t in _TOKEN.findall(text)]


class Vocab:
    """Tokens <-> indices. The five special tokens come first: [PAD] = 0, ..., [MASK] = 4;
    ordinary tokens follow, most frequent first; rarer ones than `min_freq` become [UNK]."""

    def __init__(self, token_lists, min_freq=3):
        counts = collections.Counter(t for tokens in token_lists for t in tokens)
        ordinary = [t for t, c in counts.items() if c >= min_freq and t not in SPECIALS]
        ordinary.sort(key=lambda t: (-counts[t], t))  # most frequent first, then a-z
        self.idx_to_token = SPECIALS + ordinary
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.pad, self.unk, self.cls, self.sep, self.mask = range(len(SPECIALS))
        self.num_specials = len(SPECIALS)  # ids below this are special, never predicted

    @classmethod
    def from_tokens(cls, idx_to_token):
        """The vocabulary with exactly these tokens in this order (one stored with a model)."""
        if list(idx_to_token[:len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with the special tokens {SPECIALS}, "
                             f"got {list(idx_to_token[:len(SPECIALS)])}")
        vocab = cls([], min_freq=1)
        vocab.idx_to_token = list(idx_to_token)
        vocab.token_to_idx = {t: i for i, t in enumerate(vocab.idx_to_token)}
        return vocab

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """A token or a list of tokens -> index or indices (d2l's `vocab[tokens]`)."""
        if isinstance(tokens, str):
            return self.token_to_idx.get(tokens, self.unk)
        return [self[t] for t in tokens]

    def to_tokens(self, indices):
        if torch.is_tensor(indices):
            indices = indices.tolist()
        if isinstance(indices, int):
            return self.idx_to_token[indices]
        return [self.idx_to_token[i] for i in indices]


# -- The corpus: Python's own documentation ------------------------------------------------

# Each pydoc topic comes from one part of the Python documentation; we group them in four
# families, the labels of the downstream task.
FAMILIES = {
    "statements": "assert assignment async augassign break class compound continue del "
                  "else for function global if import nonlocal pass raise return try while "
                  "with yield",
    "expressions": "atom-identifiers atom-literals attribute-references await binary "
                   "bitwise booleans calls comparisons conversions dict exprlists floating "
                   "id-classes identifiers imaginary in integers lambda lists numbers "
                   "operator-summary power shifting slicings strings subscriptions unary",
    "data model": "attribute-access callable-types context-managers customization "
                  "dynamic-features exceptions execmodel naming numeric-types objects "
                  "sequence-types specialnames types",
    "library": "bltin-code-objects bltin-ellipsis-object bltin-null-object "
               "bltin-type-objects debugger formatstrings specialattrs string-methods "
               "truth typesfunctions typesmapping typesmethods typesmodules typesseq "
               "typesseq-mutable",
}
FAMILY_OF = {topic: name for name, topics in FAMILIES.items() for topic in topics.split()}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"*(])")


def _paragraphs(text):
    """Blocks of lines separated by blank lines. Lines with no letter or digit (table
    borders such as `+-----+`) count as blank: kept, they make "-" the commonest token."""
    blocks, lines = [], []
    for line in text.splitlines() + [""]:
        if re.search(r"[A-Za-z0-9]", line):
            lines.append(line.strip())
        elif lines:
            blocks.append(" ".join(lines))
            lines = []
    return blocks


def _is_prose(block):
    """Keep sentences, drop code examples, grammar rules, tables and headings."""
    if ">>>" in block or "::=" in block or block.startswith("|") or block[-1] not in ".:":
        return False
    letters = sum(c.isalpha() or c == " " for c in block)
    return len(block.split()) >= 4 and letters / len(block) > 0.75


def load_pydoc_sentences(topics=None):
    """[(topic, paragraph number, sentence)] from Python's bundled documentation, in order.

    Sentences that appear in more than one topic (some topics contain others) are kept only
    the first time, so that no held-out sentence also appears in the training text.
    """
    if topics is None:
        from pydoc_data.topics import topics
    seen, out, paragraph = set(), [], 0
    for topic in sorted(topics):
        for block in _paragraphs(topics[topic]):
            if not _is_prose(block):
                continue
            for sentence in _SENTENCE_END.split(block):
                if sentence not in seen and len(tokenize(sentence)) >= 3:
                    seen.add(sentence)
                    out.append((topic, paragraph, sentence))
            paragraph += 1
    return out


class PydocCorpus:
    """Sentences of the Python documentation, split by paragraph into training and held-out
    text, with a vocabulary built from the training text only."""

    def __init__(self, held_out=0.15, min_freq=3, seed=0, topics=None):
        rows = load_pydoc_sentences(topics)
        paragraphs = sorted({p for _, p, _ in rows})
        rng = random.Random(seed)
        test_paragraphs = set(rng.sample(paragraphs, round(held_out * len(paragraphs))))
        self.train = [(t, tokenize(s)) for t, p, s in rows if p not in test_paragraphs]
        self.test = [(t, tokenize(s)) for t, p, s in rows if p in test_paragraphs]
        self.vocab = Vocab([tokens for _, tokens in self.train], min_freq)

    @staticmethod
    def documents(rows):
        """Group (topic, tokens) rows into documents: one list of sentences per topic."""
        docs = collections.defaultdict(list)
        for topic, tokens in rows:
            docs[topic].append(tokens)
        return list(docs.values())


# -- Input representation ------------------------------------------------------------------

def get_tokens_and_segments(tokens_a, tokens_b=None):
    """[CLS] a [SEP] (b [SEP]) and the segment of each token: 0 for a, 1 for b (d2l's)."""
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segments = [0] * (len(tokens_a) + 2)
    if tokens_b is not None:
        tokens += tokens_b + ["[SEP]"]
        segments += [1] * (len(tokens_b) + 1)
    return tokens, segments


def truncate_pair(tokens_a, tokens_b, max_tokens):
    """Drop words from the end of the longer sentence until both fit in `max_tokens`."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > max_tokens:
        (tokens_a if len(tokens_a) >= len(tokens_b) else tokens_b).pop()
    return tokens_a, tokens_b


def nsp_pairs(documents, rng):
    """Next-sentence pairs: for each sentence with a successor, the true next sentence
    (label 1) or, with probability 1/2, a random sentence of another document (label 0)."""
    pairs = []
    for d, doc in enumerate(documents):
        for a, b in zip(doc, doc[1:]):
            if rng.random() < 0.5:
                pairs.append((a, b, 1))
            else:
                other = rng.choice([i for i in range(len(documents)) if i != d])
                pairs.append((a, rng.choice(documents[other]), 0))
    return pairs


def encode(examples, vocab, max_len):
    """Pad and stack (tokens_a, tokens_b or None, label) examples into tensors:
    tokens, segments (n, max_len), valid_lens and labels (n,)."""
    tokens, segments, valid_lens, labels = [], [], [], []
    for a, b, label in examples:
        if b is None:
            a = a[: max_len - 2]
        else:
            a, b = truncate_pair(a, b, max_len - 3)
        toks, segs = get_tokens_and_segments(a, b)
        pad = max_len - len(toks)
        tokens.append(vocab[toks] + [vocab.pad] * pad)
        segments.append(segs + [0] * pad)
        valid_lens.append(len(toks))
        labels.append(label)
    return (torch.tensor(tokens), torch.tensor(segments), torch.tensor(valid_lens),
            torch.tensor(labels))


# -- The masked language model's inputs --------------------------------------------------

def mask_tokens(tokens, vocab, p=0.15, generator=None):
    """Choose each ordinary (non-special) position with probability p; of the chosen,
    80% become [MASK], 10% a random ordinary token, 10% stay as they are.

    Returns (inputs, labels): labels hold the original token at chosen positions and
    IGNORE (-100) everywhere else. `tokens` is not changed.
    """
    def draw(sampler, *args):  # on the CPU (where the generator lives), then to the device
        return sampler(*args, tokens.shape, generator=generator).to(tokens.device)

    ordinary = tokens >= vocab.num_specials                  # never [CLS], [SEP], [PAD]...
    chosen = ordinary & (draw(torch.rand) < p)               # (batch, n)
    action = draw(torch.rand)                                # one draw decides the action
    to_mask = chosen & (action < 0.8)                        # 80%: [MASK]
    to_random = chosen & (action >= 0.8) & (action < 0.9)    # 10%: a random ordinary token
    random_tokens = draw(torch.randint, vocab.num_specials, len(vocab))
    inputs = torch.where(to_mask, vocab.mask, tokens)        # the other 10%: unchanged
    inputs = torch.where(to_random, random_tokens, inputs)
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def gather_predictions(labels):
    """Labels (batch, n) with IGNORE -> (pred_positions, mlm_labels), both (batch, k):
    the positions to predict, chosen ones first, padded to the longest row with IGNORE."""
    chosen = labels != IGNORE                                   # (batch, n)
    k = max(int(chosen.sum(dim=1).max()), 1)
    order = torch.argsort(chosen.int(), dim=1, descending=True, stable=True)
    pred_positions = order[:, :k]                               # (batch, k)
    return pred_positions, labels.gather(1, pred_positions)     # (batch, k), (batch, k)


# -- The model -----------------------------------------------------------------------------

class BERTEncoder(nn.Module):
    """Token + segment + learned position embeddings, then `num_blks` encoder blocks.
    Like the original BERT (unlike d2l's) it normalises the sum of the embeddings."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                 dropout, max_len=1000):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.pos_embedding = nn.Parameter(torch.empty(1, max_len, num_hiddens))  # learned
        for weight in (self.token_embedding.weight, self.segment_embedding.weight,
                       self.pos_embedding):
            nn.init.normal_(weight, std=0.02)  # BERT's init: small, so they learn fast
        self.ln = nn.LayerNorm(num_hiddens)
        self.dropout = nn.Dropout(dropout)
        self.blks = nn.Sequential(*[
            TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout,
                                    use_bias=True) for _ in range(num_blks)])

    def forward(self, tokens, segments, valid_lens):
        if tokens.shape[1] > self.pos_embedding.shape[1]:
            raise ValueError(f"input of {tokens.shape[1]} tokens is longer than max_len="
                             f"{self.pos_embedding.shape[1]}, the positions it has learned")
        X = self.token_embedding(tokens) + self.segment_embedding(segments)  # (batch, n, d)
        X = X + self.pos_embedding[:, :X.shape[1], :]                        # (batch, n, d)
        X = self.dropout(self.ln(X))
        for blk in self.blks:
            X = blk(X, valid_lens)  # every token attends to every unpadded token
        return X                    # (batch, n, d)


class MaskLM(nn.Module):
    """The masked-language-model head: predict the token at each of `pred_positions`."""

    def __init__(self, vocab_size, num_hiddens, num_inputs=None):
        super().__init__()
        num_inputs = num_inputs or num_hiddens
        self.mlp = nn.Sequential(nn.Linear(num_inputs, num_hiddens), nn.ReLU(),
                                 nn.LayerNorm(num_hiddens),
                                 nn.Linear(num_hiddens, vocab_size))

    def forward(self, X, pred_positions):
        rows = torch.arange(X.shape[0], device=X.device)[:, None]  # (batch, 1)
        masked_X = X[rows, pred_positions]      # (batch, k, d): the encoder's outputs there
        return self.mlp(masked_X)               # (batch, k, vocab_size)


class NextSentencePred(nn.Module):
    """The next-sentence-prediction head: does sentence B follow A? Two logits."""

    def __init__(self, num_inputs):
        super().__init__()
        self.output = nn.Linear(num_inputs, 2)

    def forward(self, X):
        return self.output(X)  # (batch, num_inputs) -> (batch, 2)


class BERTModel(nn.Module):
    """The BERT encoder with its two pretraining heads (d2l's call)."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                 dropout, max_len=1000):
        super().__init__()
        self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                   num_blks, dropout, max_len)
        self.hidden = nn.Sequential(nn.Linear(num_hiddens, num_hiddens),  # the pooler
                                    nn.Tanh())
        self.mlm = MaskLM(vocab_size, num_hiddens)
        self.nsp = NextSentencePred(num_hiddens)

    def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
        encoded_X = self.encoder(tokens, segments, valid_lens)   # (batch, n, d)
        mlm_Y_hat = None
        if pred_positions is not None:
            mlm_Y_hat = self.mlm(encoded_X, pred_positions)      # (batch, k, vocab)
        nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))    # [CLS]: (batch, 2)
        return encoded_X, mlm_Y_hat, nsp_Y_hat


class BERTClassifier(nn.Module):
    """Fine-tuning: the pretrained encoder and pooler, a new linear layer on [CLS]."""

    def __init__(self, bert, num_classes):
        super().__init__()
        self.encoder, self.hidden = bert.encoder, bert.hidden
        self.output = nn.Linear(bert.hidden[0].out_features, num_classes)

    def forward(self, tokens, segments, valid_lens):
        encoded_X = self.encoder(tokens, segments, valid_lens)   # (batch, n, d)
        return self.output(self.hidden(encoded_X[:, 0, :]))     # (batch, num_classes)


def num_params(module):
    """The number of parameters (works on the `meta` device, where no weights exist)."""
    return sum(p.numel() for p in module.parameters())


def bert_num_params(num_blks, num_hiddens, num_heads, vocab_size=30522, max_len=512):
    """Build our BERTModel at a published size on the `meta` device and count, by part."""
    with torch.device("meta"):  # shapes only: no memory is allocated for the weights
        model = BERTModel(vocab_size, num_hiddens, 4 * num_hiddens, num_heads, num_blks,
                          dropout=0.1, max_len=max_len)
    return {"embeddings": num_params(model.encoder) - num_params(model.encoder.blks),
            "encoder blocks": num_params(model.encoder.blks),
            "pooler": num_params(model.hidden),
            "MLM head": num_params(model.mlm), "NSP head": num_params(model.nsp),
            "total": num_params(model)}


# -- Pretraining, evaluation, fine-tuning --------------------------------------------------

def pretrain_batches(documents, vocab, batch_size, max_len, seed=0):
    """Endless batches of next-sentence pairs, freshly paired and shuffled on every pass."""
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    while True:
        data = encode(nsp_pairs(documents, rng), vocab, max_len)  # 4 tensors (pairs, ...)
        order = torch.randperm(len(data[0]), generator=g)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield [x[order[i:i + batch_size]] for x in data]


def bert_losses(model, batch, vocab, generator=None):
    """The two pretraining losses on one batch; the masking is drawn anew every time."""
    tokens, segments, valid_lens, is_next = batch
    inputs, labels = mask_tokens(tokens, vocab, generator=generator)
    pred_positions, mlm_labels = gather_predictions(labels)          # (batch, k) each
    _, mlm_Y_hat, nsp_Y_hat = model(inputs, segments, valid_lens, pred_positions)
    mlm_loss = F.cross_entropy(mlm_Y_hat.reshape(-1, mlm_Y_hat.shape[-1]),
                               mlm_labels.reshape(-1), ignore_index=IGNORE)
    return mlm_loss, F.cross_entropy(nsp_Y_hat, is_next)


def warmup_linear(optimizer, warmup, num_steps):
    """Learning rate: linear warm-up over `warmup` steps, then linear decay to 0."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(
        (step + 1) / warmup, max(0.0, (num_steps - step) / max(1, num_steps - warmup))))


def pretrain(model, batches, vocab, num_steps, lr, device, warmup=100, seed=0,
             report_every=200):
    """Pretrain on MLM + NSP for `num_steps` batches; returns the per-step losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear(optimizer, warmup, num_steps)
    generator = torch.Generator().manual_seed(seed)  # the masking's random draws
    history = {"MLM": [], "NSP": []}
    model.train()
    with one_cpu_thread(device):  # a model this small trains fastest on one CPU thread
        for step in range(1, num_steps + 1):
            batch = [x.to(device) for x in next(batches)]
            mlm_loss, nsp_loss = bert_losses(model, batch, vocab, generator)
            optimizer.zero_grad()
            (mlm_loss + nsp_loss).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            history["MLM"].append(mlm_loss.item())
            history["NSP"].append(nsp_loss.item())
            if step % report_every == 0:  # progress: mean losses since the last report
                mlm, nsp = (sum(h[-report_every:]) / report_every for h in history.values())
                print(f"step {step:>4}/{num_steps}: MLM loss {mlm:.2f}, NSP loss {nsp:.2f}")
    return history


# -- The chapter's small BERT, and its longer pretraining run stored with the package -------

CHECKPOINT = pathlib.Path(__file__).parent / "checkpoints" / "bert_pydoc.pt"


def small_bert(vocab_size, max_len=32):
    """The chapter's BERT: H = 64, two blocks of four heads, an FFN of 128, no dropout."""
    return BERTModel(vocab_size, num_hiddens=64, ffn_num_hiddens=128, num_heads=4,
                     num_blks=2, dropout=0.0, max_len=max_len)


def pretrain_small_bert(corpus, num_steps, lr, warmup, batch_size=64, max_len=32, seed=0,
                        device=None, report_every=200):
    """The chapter's recipe, seeded: returns (model, history). `make pretrain` runs it
    longer than the chapter can and stores the result (see `load_pretrained`)."""
    torch.manual_seed(seed)
    model = small_bert(len(corpus.vocab), max_len).to(device)
    batches = pretrain_batches(PydocCorpus.documents(corpus.train), corpus.vocab, batch_size,
                               max_len, seed)
    history = pretrain(model, batches, corpus.vocab, num_steps, lr, device, warmup, seed,
                       report_every)
    return model, history


def save_pretrained(path, model, vocab, history, recipe):
    """Weights, vocabulary, per-step losses and recipe in one file (about 1 MB)."""
    torch.save({"model": model.state_dict(), "tokens": vocab.idx_to_token,
                "history": {name: torch.tensor(v) for name, v in history.items()},
                "recipe": dict(recipe)}, path)


def load_pretrained(path=CHECKPOINT, device=None):
    """The stored run: (model, vocab, history, recipe). The vocabulary is the one it was
    trained with (Python's documentation, hence the vocabulary, changes between versions)."""
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no pretrained BERT at {path}: run `make pretrain` (about "
                                "5 minutes on one CPU thread) to make it")
    state = torch.load(path, map_location="cpu", weights_only=True)
    vocab = Vocab.from_tokens(state["tokens"])
    recipe = state["recipe"]
    model = small_bert(len(vocab), recipe["max_len"])
    model.load_state_dict(state["model"])
    history = {name: v.tolist() for name, v in state["history"].items()}
    return model.to(device), vocab, history, recipe


@torch.no_grad()
def evaluate_pretraining(model, data, vocab, rounds=5, seed=0, k=5):
    """Held-out accuracies: MLM top-1 and top-k with every chosen position shown as [MASK]
    (over `rounds` maskings), the same for always answering the most frequent training
    tokens (vocab order), and NSP; also the mean probability of the top-1 prediction, over
    all positions and over the right and the wrong ones (how sure the model is)."""
    model.eval()
    device = next(model.parameters()).device
    tokens, segments, valid_lens, is_next = data
    g = torch.Generator().manual_seed(seed)
    most_frequent = torch.arange(vocab.num_specials, vocab.num_specials + k, device=device)
    hits = torch.zeros(k)  # hits[j]: the label is among the top j + 1 predictions
    baseline = torch.zeros(k)
    sure = {True: 0.0, False: 0.0}  # summed top-1 probabilities of right and wrong top-1s
    total = 0
    with one_cpu_thread(device):
        for _ in range(rounds):
            _, labels = mask_tokens(tokens, vocab, generator=g)
            inputs = torch.where(labels != IGNORE, vocab.mask, tokens)  # all chosen: [MASK]
            pred_positions, mlm_labels = gather_predictions(labels)
            _, mlm_Y_hat, _ = model(inputs, segments, valid_lens, pred_positions)
            keep = mlm_labels != IGNORE
            top = mlm_Y_hat.topk(k, dim=-1).indices[keep]         # (predictions, k)
            label = mlm_labels[keep][:, None]                      # (predictions, 1)
            hits += (top == label).cumsum(dim=1).sum(dim=0).cpu()
            top1 = mlm_Y_hat.softmax(dim=-1).max(dim=-1).values[keep]  # (predictions,)
            right = top[:, 0] == label[:, 0]
            sure[True] += top1[right].sum().item()
            sure[False] += top1[~right].sum().item()
            baseline += (most_frequent == label).cumsum(dim=1).sum(dim=0).cpu()
            total += int(keep.sum())
        nsp_Y_hat = model(tokens, segments, valid_lens)[2]
    nsp = (nsp_Y_hat.argmax(dim=-1) == is_next).float().mean().item()
    model.train()
    return {"mlm": hits[0].item() / total, f"mlm top-{k}": hits[-1].item() / total,
            "baseline": baseline[0].item() / total,
            f"baseline top-{k}": baseline[-1].item() / total, "nsp": nsp,
            "predictions": total, "sure": (sure[True] + sure[False]) / total,
            "sure when right": sure[True] / max(hits[0].item(), 1),
            "sure when wrong": sure[False] / max(total - hits[0].item(), 1)}


@torch.no_grad()
def heldout_mlm_loss(model, data, vocab, rounds=5, seed=0):
    """Held-out MLM loss with BERT's own 80/10/10 inputs, split by what the chosen position
    showed the model: [MASK], a random token, or the original token (which it can copy)."""
    model.eval()
    device = next(model.parameters()).device
    tokens, segments, valid_lens, _ = data
    g = torch.Generator().manual_seed(seed)
    sums, counts = collections.Counter(), collections.Counter()
    with one_cpu_thread(device):
        for _ in range(rounds):
            inputs, labels = mask_tokens(tokens, vocab, generator=g)
            pred_positions, mlm_labels = gather_predictions(labels)     # (batch, k)
            _, mlm_Y_hat, _ = model(inputs, segments, valid_lens, pred_positions)
            losses = F.cross_entropy(mlm_Y_hat.transpose(1, 2), mlm_labels,
                                     ignore_index=IGNORE, reduction="none")  # (batch, k)
            shown = inputs.gather(1, pred_positions)                    # (batch, k)
            chosen = mlm_labels != IGNORE
            kinds = {"[MASK]": shown == vocab.mask, "kept": shown == mlm_labels}
            kinds["random"] = ~kinds["[MASK]"] & ~kinds["kept"]
            for name, where in kinds.items():
                sums[name] += losses[where & chosen].sum().item()
                counts[name] += int((where & chosen).sum())
    model.train()
    return {name: sums[name] / counts[name] for name in ["[MASK]", "random", "kept"]}


@torch.no_grad()
def predict_masked(model, vocab, text, k=5):
    """Top-k tokens and their probabilities at every [MASK] of `text` (one sentence)."""
    model.eval()
    device = next(model.parameters()).device
    tokens, segments = get_tokens_and_segments(tokenize(text))
    X = torch.tensor([vocab[tokens]], device=device)                 # (1, n)
    positions = (X[0] == vocab.mask).nonzero().flatten()             # (num_masks,)
    if len(positions) == 0:
        return []
    _, mlm_Y_hat, _ = model(X, torch.tensor([segments], device=device), None,
                            positions[None])                         # (1, num_masks, vocab)
    probs = torch.softmax(mlm_Y_hat[0], dim=-1)                      # (num_masks, vocab)
    top = probs.topk(k, dim=-1)
    return [[(vocab.to_tokens(i), p) for i, p in zip(idx.tolist(), ps.tolist())]
            for idx, ps in zip(top.indices, top.values)]


def family_data(rows, vocab, max_len):
    """(topic, tokens) rows -> single-sentence inputs labelled with the topic's family:
    tokens, segments, valid_lens, labels (0 .. len(FAMILIES) - 1)."""
    names = list(FAMILIES)
    examples = [(tokens, None, names.index(FAMILY_OF[topic])) for topic, tokens in rows
                if topic in FAMILY_OF]  # a newer Python may have topics we have not grouped
    return encode(examples, vocab, max_len)


def trim_padding(tokens, segments, valid_lens):
    """Cut the padding columns that no input of the batch uses (outputs do not change)."""
    n = int(valid_lens.max())
    return tokens[:, :n], segments[:, :n], valid_lens


def finetune(classifier, data, num_steps, lr, device, batch_size=32, seed=0):
    """Train a classifier on (tokens, segments, valid_lens, labels) for `num_steps` batches
    (shuffled passes over the data); linear warm-up over the first 10%, then linear decay.
    Returns the losses."""
    optimizer = torch.optim.AdamW(classifier.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear(optimizer, max(1, num_steps // 10), num_steps)
    g = torch.Generator().manual_seed(seed)
    batch_size = min(batch_size, len(data[0]))
    losses, order = [], []
    classifier.train()
    with one_cpu_thread(device):
        for _ in range(num_steps):
            if len(order) < batch_size:  # a new pass over the data, freshly shuffled
                order = torch.randperm(len(data[0]), generator=g)
            batch, order = order[:batch_size], order[batch_size:]
            tokens, segments, valid_lens, y = [x[batch].to(device) for x in data]
            logits = classifier(*trim_padding(tokens, segments, valid_lens))
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    return losses


@torch.no_grad()
def accuracy(classifier, data, device):
    """The share of examples whose predicted class is the label."""
    classifier.eval()
    tokens, segments, valid_lens, y = [x.to(device) for x in data]
    with one_cpu_thread(device):
        predictions = classifier(tokens, segments, valid_lens).argmax(dim=-1)  # (n,)
    return (predictions == y).float().mean().item()


# -- Frozen features, linear probes and a bag-of-words baseline ----------------------------

@torch.no_grad()
def sentence_features(encoder, data, device):
    """A frozen encoder's view of single-sentence inputs: the output at [CLS] and the mean
    of the outputs over the sentence's own tokens (without [CLS] and [SEP]); (n, d) each."""
    encoder.eval()
    tokens, segments, valid_lens = [x.to(device) for x in data[:3]]
    with one_cpu_thread(device):
        X = encoder(tokens, segments, valid_lens)                 # (n, max_len, d)
    positions = torch.arange(X.shape[1], device=device)           # (max_len,)
    inside = (positions >= 1) & (positions < valid_lens[:, None] - 1)  # (n, max_len)
    mean = (X * inside[..., None]).sum(dim=1) / inside.sum(dim=1, keepdim=True)
    return X[:, 0].cpu(), mean.cpu()                              # (n, d), (n, d)


def standardise(X, reference):
    """Each feature minus its mean, over its standard deviation, both from `reference`."""
    return (X - reference.mean(dim=0)) / (reference.std(dim=0) + 1e-8)


def bag_of_words(data, vocab):
    """Which ordinary tokens each input contains: (n, len(vocab)) of 0/1 (order is lost)."""
    tokens = data[0]
    X = torch.zeros(len(tokens), len(vocab))
    X.scatter_(1, tokens, 1.0)
    X[:, :vocab.num_specials] = 0
    return X


def fit_logistic_regression(X, y, num_classes, l2=1.0, max_iter=100):
    """Multinomial logistic regression as scikit-learn fits it by default: minimise the
    summed cross-entropy plus l2 / 2 * ||W||^2 (C = 1) with L-BFGS, at most 100 iterations.
    Returns predict(X). A mostly-zero X (a bag of words) is multiplied as a sparse matrix."""
    X, y = X.double(), y.long()
    if (X == 0).double().mean() > 0.9:
        X = X.to_sparse()                   # 10-50x fewer operations per iteration
    W = torch.zeros(X.shape[1], num_classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([W, b], max_iter=max_iter, tolerance_grad=1e-4,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(X @ W + b, y, reduction="sum") + l2 / 2 * (W ** 2).sum()
        loss.backward()
        return loss

    with one_cpu_thread():
        optimizer.step(closure)
    W, b = W.detach(), b.detach()
    return lambda X_new: (X_new.double() @ W + b).argmax(dim=-1)


def probe_accuracy(train_X, train_y, test_X, test_y, num_classes, l2=1.0):
    """Fit logistic regression on (train_X, train_y); accuracy on (test_X, test_y)."""
    predict = fit_logistic_regression(train_X, train_y, num_classes, l2)
    return (predict(test_X) == test_y).double().mean().item()


def labelled_subset(num_examples, size, seed):
    """The indices of `size` labelled examples drawn at random (without replacement);
    with the same seed a smaller subset is part of a larger one."""
    order = torch.randperm(num_examples, generator=torch.Generator().manual_seed(seed))
    return order[:size]
