"""Chapter 8's checkers pass the reference solutions and reject known-wrong ones with useful messages."""
import pytest
import torch

from book import checks
from book.bert import IGNORE, mask_tokens


def reference_masking(tokens, vocab):
    return mask_tokens(tokens, vocab)


def exact_count_masking(tokens, vocab):
    """d2l's variant: exactly round(15%) of each row's ordinary positions. Also right."""
    inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE)
    for i, row in enumerate(tokens):
        candidates = (row >= vocab.num_specials).nonzero().flatten()
        chosen = candidates[torch.randperm(len(candidates))[: max(1, round(0.15 * len(candidates)))]]
        for j in chosen.tolist():
            labels[i, j] = row[j]
            u = torch.rand(()).item()
            if u < 0.8:
                inputs[i, j] = vocab.mask
            elif u < 0.9:
                inputs[i, j] = torch.randint(vocab.num_specials, len(vocab), ()).item()
    return inputs, labels


def masking(p=0.15, shares=(0.8, 0.1), specials_too=False, random_from=None, label_all=False,
            unchosen_label=IGNORE):
    """A masking function with one thing changed from the reference."""
    def fn(tokens, vocab):
        candidates = torch.ones_like(tokens, dtype=torch.bool) if specials_too else tokens >= vocab.num_specials
        chosen = candidates & (torch.rand(tokens.shape) < p)
        action = torch.rand(tokens.shape)
        low = vocab.num_specials if random_from is None else random_from
        random_tokens = torch.randint(low, len(vocab), tokens.shape)
        inputs = torch.where(chosen & (action < shares[0]), vocab.mask, tokens)
        to_random = chosen & (action >= shares[0]) & (action < shares[0] + shares[1])
        inputs = torch.where(to_random, random_tokens, inputs)
        labelled = (tokens >= vocab.num_specials) if label_all else chosen
        return inputs, torch.where(labelled, tokens, unchosen_label)
    return fn


def in_place(tokens, vocab):
    inputs, labels = mask_tokens(tokens, vocab)
    tokens.copy_(inputs)
    return tokens, labels


def every_seventh(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.arange(tokens.shape[1]) % 7 == 3)
    return torch.where(chosen, vocab.mask, tokens), torch.where(chosen, tokens, IGNORE)


def one_random_token(tokens, vocab):
    inputs, labels = mask_tokens(tokens, vocab)
    swapped = (labels != IGNORE) & (inputs != tokens) & (inputs != vocab.mask)
    return torch.where(swapped, vocab.num_specials, inputs), labels


def stub(*args):
    raise NotImplementedError("write your solution here")


WRONG_MASKINGS = {
    "wrong rate: 10%": (masking(p=0.10), "15%"),
    "wrong rate: 30%": (masking(p=0.30), "15%"),
    "no 80/10/10 split: all [MASK]": (masking(shares=(1.0, 0.0)), "80%"),
    "split swapped: 10% [MASK], 80% unchanged": (masking(shares=(0.1, 0.1)), "80%"),
    "no random tokens: 90% [MASK]": (masking(shares=(0.9, 0.0)), "80%"),
    "special tokens masked": (masking(specials_too=True), "special token"),
    "labels on unmasked positions": (masking(label_all=True), "not chosen"),
    "label 0 instead of -100": (masking(unchosen_label=0), "-100"),
    "random token may be special": (masking(random_from=0), "special token"),
    "always the same random token": (one_random_token, "different"),
    "a fixed pattern": (every_seventh, "at random|15%"),
    "changes its input": (in_place, "changed the `tokens`"),
    "returns only the inputs": (lambda t, v: mask_tokens(t, v)[0], "pair"),
    "returns floats": (lambda t, v: tuple(x.float() for x in mask_tokens(t, v)), "dtype"),
    "unimplemented stub": (stub, "not implemented yet"),
}


def test_check_mlm_masking_accepts_the_reference():
    assert "passed" in checks.check_mlm_masking(reference_masking)


def test_check_mlm_masking_accepts_the_exact_count_variant():
    assert "passed" in checks.check_mlm_masking(exact_count_masking)


@pytest.mark.parametrize("seed", range(5))
def test_check_mlm_masking_accepts_the_reference_whatever_the_random_draws(seed):
    def seeded(tokens, vocab):
        return mask_tokens(tokens, vocab, generator=torch.Generator().manual_seed(seed))
    assert "passed" in checks.check_mlm_masking(seeded)


@pytest.mark.parametrize("name", WRONG_MASKINGS)
def test_check_mlm_masking_rejects_wrong_solutions(name):
    fn, message = WRONG_MASKINGS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_mlm_masking(fn)


def test_check_mlm_masking_leaves_the_learners_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_mlm_masking(reference_masking)
    assert torch.equal(torch.rand(3), expected)


# -- the parameter count by formula ----------------------------------------------------------

def count(V, H, F, L, P, attention_bias=True, layernorms=True, positions=True, pooler=True,
          mlm_output=True, blocks=None):
    ln = 2 * H if layernorms else 0
    attention = 4 * (H * H + (H if attention_bias else 0))
    block = attention + ln + (H * F + F) + (F * H + H) + ln
    embeddings = V * H + 2 * H + (P * H if positions else 0) + ln
    heads = (H * H + H if pooler else 0) + (H * H + H + 2 * H) + (H * V + V if mlm_output else 0)
    return embeddings + (L if blocks is None else blocks) * block + heads + 2 * H + 2


WRONG_COUNTS = {
    "no attention biases": (lambda *a: count(*a, attention_bias=False), "biases of the four"),
    "no LayerNorms": (lambda *a: count(*a, layernorms=False), "off by"),
    "no position embeddings": (lambda *a: count(*a, positions=False), "position embeddings"),
    "no pooler": (lambda *a: count(*a, pooler=False), "pooler"),
    "MLM output tied to the embeddings": (lambda *a: count(*a, mlm_output=False), "MLM head"),
    "one block only": (lambda *a: count(*a, blocks=1), "off by"),
    "returns a string": (lambda *a: str(count(*a)), "int"),
    "unimplemented stub": (stub, "not implemented yet"),
}


def test_check_bert_param_count_accepts_the_formula():
    assert "passed" in checks.check_bert_param_count(count)


@pytest.mark.parametrize("name", WRONG_COUNTS)
def test_check_bert_param_count_rejects_wrong_counts(name):
    fn, message = WRONG_COUNTS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_bert_param_count(fn)


def test_masking_failure_message_names_what_was_seen_and_expected():
    with pytest.raises(AssertionError) as info:
        checks.check_mlm_masking(masking(shares=(1.0, 0.0)))
    text = str(info.value)
    assert "expected 80% [MASK]" in text and "got [MASK] 100" in text and "Hint:" in text
