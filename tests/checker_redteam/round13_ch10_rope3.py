"""Round 13 red team (writer E, issue 12), ch10_rope3: check_apply_rope; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch10_rope3.py (writer's note: leading dimensions.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_27 (x unpacked as 2-D to
4-D): check_apply_rope now has a 5-D x, (2, 2, 3, 5, 8); the ValueError of the unpacking
now gets a hint about leading axes.
"""
# flake8: noqa
import torch
CHECK = "check_apply_rope"


def _rope3(x, positions):
    d = x.shape[-1]
    m = torch.arange(d // 2, dtype=torch.float64)
    a = positions.double()[:, None] * 10000.0 ** (-2 * m / d)
    w = torch.promote_types(x.dtype, torch.float32)
    c, s = a.cos().to(w), a.sin().to(w)
    x0, x1 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2).to(x.dtype)


def C_01_reference(x, positions):
    if x.shape[-1] % 2:
        raise ValueError(f"odd feature size {x.shape[-1]}: the last feature has no partner")
    return _rope3(x, positions)


def W_27_up_to_4d(x, positions):
    """Unpacks the shape explicitly for 2-, 3- and 4-D x ('(n, d), (b, n, d) or
    (b, h, n, d)'): a 5-D x (..., n, d), e.g. (batch, groups, heads, n, d) in GQA, raises
    a bare ValueError 'too many values to unpack'."""
    if x.dim() == 2:
        n, d = x.shape
    elif x.dim() == 3:
        b, n, d = x.shape
    else:
        b, h, n, d = x.shape
    if d % 2:
        raise ValueError(f"odd feature size {d}: the last feature has no partner")
    return _rope3(x, positions)
