"""Round 13 red team (writer E, issue 12), ch09_top_p3: check_top_p_filter; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch09_top_p3.py (writer's note: a nucleus searched in the top 1024.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_28 (the nucleus looked for among the top
2,048 tokens): check_top_p_filter now has 3 flat rows of 4,099 logits (0.1 * randn, p = 0.9,
about 3,613 tokens kept); a kept set that is the top 1,024 / 2,048 tokens is told so
("you keep the 2,048 most probable tokens and stop there"). W_26 was rejected before, with
the float16 hint; it now gets the cap's.
"""
# flake8: noqa
import torch
CHECK = "check_top_p_filter"
_NEG = float("-inf")


def C_01_reference(logits, p):
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    return logits.masked_fill(probs < ranked.gather(-1, n - 1), _NEG)


def W_26_nucleus_in_top_1024(logits, p):
    """Looks for the nucleus among the 1024 most probable tokens only (topk instead of a
    full sort, 'the nucleus is small'): a flat row whose nucleus needs more than 1024 tokens
    (V = 4096 of logits 0.1 * randn, p = 0.9: about 3600 tokens) is cut at 1024."""
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    k = min(1024, probs.shape[-1])
    ranked = probs.topk(k, dim=-1).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    return logits.masked_fill(probs < ranked.gather(-1, n - 1), _NEG)


def W_28_nucleus_in_top_2048(logits, p):
    """As W_26 with 2048: a flat row of 4096 tokens (0.1 * randn logits, p = 0.9) needs about
    3,600 tokens and gets 2048."""
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    k = min(2048, probs.shape[-1])
    ranked = probs.topk(k, dim=-1).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    return logits.masked_fill(probs < ranked.gather(-1, n - 1), _NEG)
