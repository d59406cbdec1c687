"""Round 13 red team (writer E, issue 12), ch09_attention_step2: check_attention_step; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch09_attention_step2.py (writer's note: Round 13, writer E, check_attention_step (second batch, run separately for time).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_05 (values more than 512 back
detached) and W_04 (a key equal to the last one overwrites the last value): rejected by the
prompt of 4,099 positions with backward() and by the repeated-token sequence.
"""
# flake8: noqa
import math
import torch
CHECK = "check_attention_step"


def _attend(q, keys, values):
    w = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype)


def C_01_reference(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    return _attend(q, keys, values), keys, values


def W_02_zero_kv_is_padding(q, k, v, past_keys, past_values):
    """A position whose key AND value are both all zeros is treated as padding and not
    attended (masked out): wrong whenever k = v = 0 at some position."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    pad = (keys == 0).all(-1) & (values == 0).all(-1)
    allpad = pad.all(-1, keepdim=True)
    s = s.masked_fill((pad & ~allpad).unsqueeze(-2), float("-inf"))
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_03_float64_no_grad(q, k, v, past_keys, past_values):
    """float64 is 'for checking only': computed under no_grad, so float64 inputs get no
    gradient at all (the text asks for a backward through every step)."""
    if q.dtype == torch.float64:
        with torch.no_grad():
            return C_01_reference(q, k, v, past_keys, past_values)
    return C_01_reference(q, k, v, past_keys, past_values)


def W_04_dedup_key_only(q, k, v, past_keys, past_values):
    """Overwrites the last cached value instead of appending when the key repeats the last
    key (same token at the same... no, any position): the cache does not grow."""
    t = past_keys.shape[-2]
    if t and torch.equal(past_keys[..., -1:, :], k):
        keys = past_keys.clone()
        values = torch.cat([past_values[..., :-1, :], v], dim=-2)
    else:
        keys = torch.cat([past_keys, k], dim=-2)
        values = torch.cat([past_values, v], dim=-2)
    return _attend(q, keys, values), keys, values


def W_05_grad_window_on_values_only_512(q, k, v, past_keys, past_values):
    """Values older than 512 positions are detached (keys keep their gradient)."""
    t = past_values.shape[-2]
    cut = max(t - 512, 0)
    pv = torch.cat([past_values[..., :cut, :].detach(), past_values[..., cut:, :]], -2)
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([pv, v], dim=-2)
    return _attend(q, keys, values), keys, values
