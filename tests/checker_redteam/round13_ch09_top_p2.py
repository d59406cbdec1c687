"""Round 13 red team (writer E, issue 12), ch09_top_p2: check_top_p_filter; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch09_top_p2.py (writer's note: bfloat16-specific faults.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: none (both wrong entries were rejected on the snapshot).
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


def W_24_bf16_softmax_native(logits, p):
    """float16 upcast as the text says, but bfloat16 probabilities computed in bfloat16
    (8-bit mantissa: probabilities of different tokens merge into false ties, and the
    running sum of 4096 bfloat16 probabilities is off by ~1e-2)."""
    if logits.dtype == torch.bfloat16:
        probs = torch.softmax(logits, -1)
    else:
        probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    return logits.masked_fill(probs < ranked.gather(-1, n - 1), _NEG)


def W_25_bf16_before_in_bf16(logits, p):
    """Mass above each token computed in float32 and then stored in the input dtype for
    bfloat16 ('keep the dtype'): before rounded to 8 bits, the boundary moves by up to
    2e-3 of the mass (p=0.95 over 4096 tokens keeps ~20 tokens too many)."""
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    if logits.dtype == torch.bfloat16:
        before = before.to(torch.bfloat16)
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    return logits.masked_fill(probs < ranked.gather(-1, n - 1), _NEG)
