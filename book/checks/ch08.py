"""Checkers for chapter 8's exercises: BERT's 80/10/10 masking, and its parameter count."""
import torch

from ._core import call, expect_tensor, fail

IGNORE = -100


def _masking_vocab():
    from ..bert import Vocab

    words = [f"w{i}" for i in range(60)]
    return Vocab([words], min_freq=1)  # 5 special tokens + 60 ordinary ones


def _masking_batch(vocab, num_rows=4000, max_len=32, seed=0):
    """BERT-shaped rows: [CLS] a [SEP] b [SEP] [PAD]..., with a few [UNK] inside."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(vocab.num_specials, len(vocab), (num_rows, max_len), generator=g)
    tokens[torch.rand(tokens.shape, generator=g) < 0.03] = vocab.unk
    lengths = torch.randint(12, max_len + 1, (num_rows,), generator=g)  # valid lengths
    split = torch.randint(4, 10, (num_rows,), generator=g)              # where b starts
    rows = torch.arange(num_rows)
    tokens[:, 0] = vocab.cls
    tokens[rows, split - 1] = vocab.sep
    tokens[rows, lengths - 1] = vocab.sep
    tokens[torch.arange(max_len) >= lengths[:, None]] = vocab.pad
    return tokens


def _share(mask, within):
    return mask[within].float().mean().item() if within.any() else 0.0


def check_mlm_masking(fn):
    """Check `fn(tokens, vocab)` -> (inputs, labels), BERT's masking, on 128,000 positions.

    Statistical: the rates must be within tolerances about 8 standard errors wide, so a right
    solution fails with probability far below one in a million, whatever its random draws.
    """
    vocab = _masking_vocab()
    tokens = _masking_batch(vocab)
    case = f"a batch of {tokens.shape[0]} BERT inputs of length {tokens.shape[1]}"
    given = tokens.clone()
    with torch.random.fork_rng():  # reproducible for the learner, and their RNG is untouched
        torch.manual_seed(0)
        result = call(fn, given, vocab, name="mask_tokens", case=case)
    if not isinstance(result, tuple) or len(result) != 2:
        fail(f"mask_tokens should return a pair (inputs, labels), got {type(result).__name__}.")
    inputs, labels = result
    expect_tensor(inputs, tokens.shape, torch.long, what="inputs", case=case)
    expect_tensor(labels, tokens.shape, torch.long, what="labels", case=case)
    if not torch.equal(given, tokens):
        fail("mask_tokens changed the `tokens` tensor it was given.",
             "build new tensors (torch.where, or tokens.clone() first): the caller may "
             "need the original tokens, and they are the labels.")

    most_common = labels.flatten().mode().values.item()
    if most_common != IGNORE:
        fail(f"most labels are {most_common}; positions that were not chosen must have label "
             "-100 (book.bert.IGNORE), the value cross_entropy(..., ignore_index=-100) skips.")
    special = tokens < vocab.num_specials
    ordinary = ~special
    labelled = labels != IGNORE
    changed = inputs != tokens
    touched = (changed | labelled) & special
    if touched.any():
        i, j = touched.nonzero()[0].tolist()
        name = vocab.idx_to_token[tokens[i, j].item()]
        fail(f"a special token was chosen: position [{i}, {j}] holds {name}, and mask_tokens "
             f"changed it or gave it a label. [CLS], [SEP], [PAD] and [UNK] are never "
             "predicted; choose only ordinary tokens.",
             "ordinary tokens are those with id >= vocab.num_specials.")
    if (changed & ~labelled).any():
        fail("some positions were changed but have label -100: every position you change "
             "must be predicted, so its label is the original token.")
    wrong_label = labelled & (labels != tokens)
    if wrong_label.any():
        i, j = wrong_label.nonzero()[0].tolist()
        fail(f"labels[{i}, {j}] is {labels[i, j].item()}, but the original token there is "
             f"{tokens[i, j].item()}: the label of a chosen position is the token it had "
             "before masking; positions that were not chosen get -100.")

    rate = _share(labelled, ordinary)
    changed_rate = _share(changed, ordinary)
    if rate > 0.17 and abs(changed_rate - 0.135) < 0.015:
        fail(f"{rate:.0%} of the ordinary positions have a label, but only {changed_rate:.1%} "
             "were changed: you put labels on positions that were not chosen.",
             "only the chosen 15% get a label; all other positions get -100 (IGNORE), "
             "which the loss skips.")
    if abs(rate - 0.15) > 0.01:
        fail(f"{rate:.1%} of the ordinary positions were chosen (labelled); expected 15% "
             "(tolerance 1 point).", "choose each ordinary position with probability 0.15.")
    column_rates = labelled.float().sum(0) / ordinary.float().sum(0).clamp_min(1)
    busy = ordinary.float().sum(0) > 1000   # positions with enough ordinary tokens
    if ((column_rates[busy] - 0.15).abs() > 0.05).any():
        fail("the chosen share differs a lot between positions in the sequence "
             f"(from {column_rates[busy].min():.0%} to {column_rates[busy].max():.0%}): "
             "choose the positions at random, not by a fixed pattern.")

    to_mask = labelled & (inputs == vocab.mask)
    to_random = labelled & changed & (inputs != vocab.mask)
    same = labelled & ~changed
    shares = [_share(m, labelled) for m in (to_mask, to_random, same)]
    seen = f"[MASK] {shares[0]:.1%}, random {shares[1]:.1%}, unchanged {shares[2]:.1%}"
    if abs(shares[0] - 0.8) > 0.03 or abs(shares[1] - 0.1) > 0.02 or abs(shares[2] - 0.1) > 0.02:
        fail(f"of the chosen positions, expected 80% [MASK], 10% a random token, 10% "
             f"unchanged (tolerances 3, 2, 2 points); got {seen}.",
             "draw one uniform number per chosen position: < 0.8 -> [MASK], "
             "0.8 to 0.9 -> random token, otherwise keep the token.")
    replacements = inputs[to_random]
    if (replacements < vocab.num_specials).any():
        fail("a random replacement was a special token; draw replacements from the ordinary "
             "tokens, ids vocab.num_specials to len(vocab) - 1.")
    if replacements.unique().numel() < 0.8 * (len(vocab) - vocab.num_specials):
        fail(f"the random replacements used only {replacements.unique().numel()} different "
             f"tokens of the {len(vocab) - vocab.num_specials} ordinary ones; draw them "
             "uniformly from the whole vocabulary of ordinary tokens.")
    return f"mask_tokens: all checks passed ({seen} of the chosen positions)."


def _reference_param_count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    from ..bert import BERTModel, num_params

    heads = 1  # the number of heads does not change the count
    with torch.device("meta"):
        model = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, heads, num_blks, 0.0,
                          max_len)
    return num_params(model)


def _parts(V, H, F, L, P):
    """What a wrong count is often missing (or counting twice): name -> number."""
    block = 4 * (H * H + H) + (H * F + F) + (F * H + H) + 2 * 2 * H
    return {
        "the position embeddings (max_len x num_hiddens)": P * H,
        "the segment embeddings (2 x num_hiddens)": 2 * H,
        "the LayerNorm after the embeddings (2 x num_hiddens)": 2 * H,
        "the two LayerNorms of every block (4 x num_hiddens per block)": 4 * H * L,
        "the biases of the four attention projections (4 x num_hiddens per block)":
            4 * H * L,
        "the biases of the FFN (ffn_num_hiddens + num_hiddens per block)": (F + H) * L,
        "the pooler (a num_hiddens x num_hiddens layer with bias)": H * H + H,
        "the MLM head's output layer (num_hiddens x vocab_size, plus bias)": H * V + V,
        "the MLM head's hidden layer and LayerNorm": H * H + H + 2 * H,
        "the NSP head (num_hiddens x 2, plus bias)": 2 * H + 2,
        "one encoder block": block,
        "the token embeddings (vocab_size x num_hiddens)": V * H,
    }


def check_bert_param_count(fn):
    """Check `fn(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)` -> int, the
    number of parameters of book.bert.BERTModel, against the model itself (meta device)."""
    cases = [(100, 16, 40, 1, 20), (500, 32, 64, 3, 64), (1293, 128, 256, 2, 64),
             (30522, 768, 3072, 12, 512), (30522, 1024, 4096, 24, 512)]
    for V, H, F, L, P in cases:
        case = (f"vocab_size={V}, num_hiddens={H}, ffn_num_hiddens={F}, num_blks={L}, "
                f"max_len={P}")
        got = call(fn, V, H, F, L, P, name="bert_param_count", case=case)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if not isinstance(got, int):
            fail(f"bert_param_count should return an int, got {type(got).__name__} on {case}.")
        expected = _reference_param_count(V, H, F, L, P)
        if got != expected:
            diff = expected - got
            hints = [name for name, n in _parts(V, H, F, L, P).items() if n == abs(diff)]
            what = "missing" if diff > 0 else "counted too many"
            hint = (f"{abs(diff):,} parameters {what}: exactly the size of "
                    + " or ".join(hints) + ".") if hints else (
                "count part by part: embeddings (token, segment, position, LayerNorm), "
                "num_blks x (attention 4(H^2+H), FFN, two LayerNorms), pooler, MLM, NSP.")
            fail(f"bert_param_count gives {got:,} on {case}; the model has {expected:,} "
                 f"(off by {diff:+,}).", hint)
    return "bert_param_count: all checks passed."
