"""Round 13 red team (writer E, issue 12), ch10_rope2: check_apply_rope; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch10_rope2.py (writer's note: Round 13, writer E, check_apply_rope (second batch).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_23 (float64 x detached): check_apply_rope now runs
backward() for float64 x too. A_24 (a float32 cumsum angle table) left accepted by the
writer (accurate on the CPU).
"""
# flake8: noqa
import torch
CHECK = "check_apply_rope"


def C_01_reference(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: the last feature has no partner")
    m = torch.arange(d // 2, dtype=torch.float64)
    a = positions.double()[:, None] * 10000.0 ** (-2 * m / d)
    w = torch.promote_types(x.dtype, torch.float32)
    c, s = a.cos().to(w), a.sin().to(w)
    x0, x1 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2).to(x.dtype)


def W_23_float64_detached(x, positions):
    """float64 'is for checking': float64 x is detached, so no gradient reaches it."""
    if x.dtype == torch.float64:
        return C_01_reference(x.detach(), positions)
    return C_01_reference(x, positions)


def A_24_cumsum_angle_table(x, positions):
    """float64 x: angles from positions.float() * theta with theta in float32 but
    accumulated as angle = t * theta computed by repeated addition? no: a float32 angle table
    indexed by position up to the max position (values fine) -- but built with cumsum of
    theta in float32. A_: on the CPU torch accumulates a float32 cumsum in float64, so the
    table is accurate here (it would drift on CUDA, where the accumulator is float32)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: the last feature has no partner")
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    mx = int(positions.max()) + 1 if positions.numel() else 1
    table = torch.cat([torch.zeros(1, d // 2), theta.expand(mx - 1, d // 2).cumsum(0)], 0) \
        if mx > 1 else torch.zeros(1, d // 2)
    a = table[positions]
    w = torch.promote_types(x.dtype, torch.float32)
    c, s = a.cos().to(w), a.sin().to(w)
    x0, x1 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2).to(x.dtype)
