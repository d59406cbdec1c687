"""Round 13 red team (writer E, issue 12), ch09_attention_step3: check_attention_step; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch09_attention_step3.py (writer's note: Round 13, writer E, check_attention_step (third batch).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: none (its one wrong entry was rejected on the snapshot).
"""
# flake8: noqa
import math
import torch
CHECK = "check_attention_step"


def _attend(q, keys, values):
    w = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype)


def W_06_grad_window_values_only_32(q, k, v, past_keys, past_values):
    """Values older than 32 positions are detached (keys keep their gradient): the gradient
    of the values of a 300-position prompt stops 32 back."""
    t = past_values.shape[-2]
    cut = max(t - 32, 0)
    pv = torch.cat([past_values[..., :cut, :].detach(), past_values[..., cut:, :]], -2)
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([pv, v], dim=-2)
    return _attend(q, keys, values), keys, values
