"""Our attention layers against PyTorch's and d2l's: time and peak memory, as ratios.

    python -m benchmarks.layers                    # CPU: 64 tokens, then 128 ... 4096 where memory allows
    python -m benchmarks.layers --quick            # fewer lengths and repetitions
    python -m benchmarks.layers --device cuda      # on a GPU (benchmarks/gpu.py does this)

Multi-head attention at the course's size (batch 32, 128 hidden units, 8 heads, dropout 0,
a padding mask with lengths drawn in [n/2, n]), self-attention, timed forward and
forward+backward. All layers run back to back in one process, in rotation, so a busy machine
slows them alike; each time is the median of `--repeat` calls. Ratios are to
`torch.nn.MultiheadAttention` called as most code calls it (`need_weights=True`, the default:
it computes the weights matrix and returns it averaged over the heads, as our readable path
computes and keeps it); `need_weights=False` lets it call the fused kernel, and the table
shows that ratio too.

Then our Transformer's training step (forward, loss, backward, Adam) against the same model
built around `torch.nn.Transformer` (same sizes: d=64, FFN 256, 4 heads, 2+2 layers).
"""
import argparse
import os
import statistics
import sys
import time

import torch
from torch import nn

from benchmarks.common import RESULTS, SCHEMA_VERSION, environment, table, write_json
from book.attention import MultiHeadAttention
from book.cost import peak_memory, time_call

BATCH, NUM_HIDDENS, NUM_HEADS = 32, 128, 8
COURSE_LENGTH = 64
LENGTHS = [64, 128, 256, 512, 1024, 2048, 4096]
QUICK_LENGTHS = [64, 256, 1024]
REFERENCE = "nn.MHA"
GOALS = {64: 1.3, 1024: 2.0}  # the readable path's goal, as a ratio to REFERENCE
MiB = 2 ** 20


# -- The layers, each called as f(X, valid_lens) on X of shape (batch, n, d) ---------------

def _key_padding_mask(valid_lens, num_keys):
    return torch.arange(num_keys, device=valid_lens.device) >= valid_lens[:, None]  # True = ignore


def make_layers(device, names=None):
    """name -> (module, call); every module has the same sizes and dropout 0."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(NUM_HIDDENS, NUM_HEADS, 0.0).to(device)
    fused = MultiHeadAttention(NUM_HIDDENS, NUM_HEADS, 0.0, fused=True).to(device)
    torch_mha = nn.MultiheadAttention(NUM_HIDDENS, NUM_HEADS, bias=False,
                                      batch_first=True).to(device)
    layers = {
        "ours readable": (ours, lambda X, vl: ours(X, X, X, vl)),
        "ours fused": (fused, lambda X, vl: fused(X, X, X, vl)),
        "nn.MHA": (torch_mha, lambda X, vl: torch_mha(
            X, X, X, key_padding_mask=_key_padding_mask(vl, X.shape[1]))[0]),
        "nn.MHA need_weights=False": (torch_mha, lambda X, vl: torch_mha(
            X, X, X, key_padding_mask=_key_padding_mask(vl, X.shape[1]), need_weights=False)[0]),
    }
    sdpa = _SDPACore(NUM_HEADS)
    layers["SDPA core (no projections)"] = (sdpa, lambda X, vl: sdpa(X, vl))
    try:
        import d2l.torch as d2l
    except ImportError:  # d2l is optional for the benchmark
        d2l = None
    if d2l is not None:
        theirs = d2l.MultiHeadAttention(NUM_HIDDENS, NUM_HEADS, 0.0).to(device)
        X = torch.zeros(1, 2, NUM_HIDDENS, device=device)
        theirs(X, X, X, None)  # LazyLinear layers get their sizes on the first call
        layers["d2l"] = (theirs, lambda X, vl: theirs(X, X, X, vl))
    for module, _ in layers.values():
        module.train()
    return {k: v for k, v in layers.items() if names is None or k in names}


class _SDPACore(nn.Module):
    """`scaled_dot_product_attention` alone: heads split from X, no projections. A lower
    bound for any multi-head layer (it skips the four linear maps)."""

    def __init__(self, num_heads):
        super().__init__()
        self.num_heads = num_heads

    def forward(self, X, valid_lens):
        b, n, d = X.shape
        heads = X.reshape(b, n, self.num_heads, -1).transpose(1, 2)      # (b, h, n, d/h)
        mask = torch.arange(n, device=X.device) < valid_lens[:, None]    # (b, n): True = attend
        out = nn.functional.scaled_dot_product_attention(
            heads, heads, heads, attn_mask=mask[:, None, None, :])       # (b, h, n, d/h)
        return out.transpose(1, 2).reshape(b, n, d)


def inputs(num_steps, device, batch=BATCH, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(batch, num_steps, NUM_HIDDENS, generator=g).to(device).requires_grad_()
    valid_lens = torch.randint(num_steps // 2, num_steps + 1, (batch,), generator=g).to(device)
    return X, valid_lens


def step_fn(module, call, X, valid_lens, backward):
    def forward():
        with torch.no_grad():
            call(X, valid_lens)

    def forward_backward():
        module.zero_grad(set_to_none=True)
        X.grad = None
        call(X, valid_lens).sum().backward()
    return forward_backward if backward else forward


def fits(num_steps, device, batch=BATCH, factor=8):
    """Whether about `factor` (batch, heads, n, n) float32 tensors fit in free memory."""
    need = factor * batch * NUM_HEADS * num_steps ** 2 * 4
    if torch.device(device).type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
    else:
        import psutil
        free = psutil.virtual_memory().available
    return need < 0.7 * free


def measure_lengths(lengths, device, repeat, modes=("forward", "forward+backward"),
                    names=None, log=print, memory=True, batch=BATCH, clock=time.perf_counter,
                    deadline=None):
    """Time (and peak memory) of every layer at every length; one row per (mode, n, layer).

    Lengths that would not fit in free memory, or that start after `deadline` (a
    time.perf_counter() value), are recorded as skipped."""
    layers = make_layers(device, names)
    rows = []
    for n in lengths:
        skip = None
        if not fits(n, device, batch):
            skip = "memory"
        elif deadline is not None and time.perf_counter() > deadline:
            skip = "time"
        if skip:
            log(f"n={n}: skipped ({'not enough free memory' if skip == 'memory' else 'out of time'})")
            rows += [{"mode": m, "seq_len": n, "layer": k, "skipped": skip}
                     for m in modes for k in layers]
            continue
        X, valid_lens = inputs(n, device, batch)
        for mode in modes:
            steps = {k: step_fn(mod, call, X, valid_lens, mode != "forward")
                     for k, (mod, call) in layers.items()}
            for f in steps.values():  # warm-up, untimed
                f()
            times = {k: [] for k in steps}
            for _ in range(repeat):  # in rotation: a busy moment slows every layer alike
                for k, f in steps.items():
                    times[k] += time_call(f, repeat=1, warmup=0, device=device, clock=clock)
            peaks = {k: peak_memory(f, device) if memory else None for k, f in steps.items()}
            for k in steps:
                rows.append({"mode": mode, "seq_len": n, "layer": k,
                             "median_ms": 1e3 * statistics.median(times[k]),
                             "min_ms": 1e3 * min(times[k]),
                             "times_ms": [round(1e3 * t, 3) for t in times[k]],
                             "peak_mb": None if peaks[k] is None else peaks[k] / MiB})
            log(f"n={n} {mode}: " + ", ".join(
                f"{k} {1e3 * statistics.median(v):.1f} ms" for k, v in times.items()))
    add_ratios(rows)
    return rows


def add_ratios(rows, reference=REFERENCE):
    """Ratios of time and memory to the reference layer at the same mode and length."""
    ref = {(r["mode"], r["seq_len"]): r for r in rows if r["layer"] == reference and "median_ms" in r}
    nw = {(r["mode"], r["seq_len"]): r for r in rows
          if r["layer"] == reference + " need_weights=False" and "median_ms" in r}
    for r in rows:
        base, fast = ref.get((r["mode"], r["seq_len"])), nw.get((r["mode"], r["seq_len"]))
        if "median_ms" not in r or base is None:
            continue
        r["time_ratio"] = r["median_ms"] / base["median_ms"]
        if fast is not None:
            r["time_ratio_no_weights"] = r["median_ms"] / fast["median_ms"]
        if r.get("peak_mb") and base.get("peak_mb"):
            r["memory_ratio"] = r["peak_mb"] / base["peak_mb"]
    return rows


def goals(rows):
    """The issue's goals, checked on forward+backward: readable <= 1.3x at 64 tokens and
    <= 2.0x at 1024; fused <= 1.0x at every length (both against REFERENCE)."""
    out = []
    for r in rows:
        if r["mode"] != "forward+backward" or "time_ratio" not in r:
            continue
        if r["layer"] == "ours readable" and r["seq_len"] in GOALS:
            limit = GOALS[r["seq_len"]]
        elif r["layer"] == "ours fused":
            limit = 1.0
        else:
            continue
        out.append({"layer": r["layer"], "seq_len": r["seq_len"], "limit": limit,
                    "ratio": r["time_ratio"], "met": r["time_ratio"] <= limit})
    return out


# -- A training step: our Transformer against torch.nn.Transformer ---------------------------

def _torch_transformer(src_vocab, tgt_vocab, **sizes):
    from book import transformer
    if hasattr(transformer, "TorchTransformer"):
        return transformer.TorchTransformer(src_vocab, tgt_vocab, **sizes)
    raise RuntimeError("book.transformer.TorchTransformer is missing")


def measure_transformer(device, repeat, batch=128, src_len=32, tgt_len=12, vocab=40, log=print,
                        clock=time.perf_counter):
    """Median seconds per training step; ratios to the model around nn.Transformer."""
    from book.transformer import Transformer

    sizes = dict(num_hiddens=64, ffn_num_hiddens=256, num_heads=4, num_blks=2, dropout=0.1)
    torch.manual_seed(0)
    models = {"ours readable": Transformer(vocab, vocab, **sizes),
              "ours fused": Transformer(vocab, vocab, fused=True, **sizes)}
    try:
        models["nn.Transformer"] = _torch_transformer(vocab, vocab, **sizes)
    except (RuntimeError, TypeError) as error:
        log(f"nn.Transformer model skipped: {error}")
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (batch, src_len), generator=g).to(device)
    dec_input = torch.randint(4, vocab, (batch, tgt_len), generator=g).to(device)
    label = torch.randint(4, vocab, (batch, tgt_len), generator=g).to(device)
    src_valid_lens = torch.randint(src_len // 2, src_len + 1, (batch,), generator=g).to(device)
    steps = {}
    for name, model in models.items():
        model.to(device).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model=model, optimizer=optimizer):
            optimizer.zero_grad(set_to_none=True)
            logits = model(src, dec_input, src_valid_lens)                  # (batch, n, vocab)
            loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), label.reshape(-1))
            loss.backward()
            optimizer.step()
        steps[name] = step
    for f in steps.values():
        time_call(f, repeat=0, warmup=2, device=device)
    times = {k: [] for k in steps}
    for _ in range(repeat):
        for k, f in steps.items():
            times[k] += time_call(f, repeat=3, warmup=0, device=device, clock=clock)
    rows = [{"model": k, "median_ms": 1e3 * statistics.median(v), "min_ms": 1e3 * min(v),
             "parameters": sum(p.numel() for p in models[k].parameters())}
            for k, v in times.items()]
    ref = next((r for r in rows if r["model"] == "nn.Transformer"), None)
    for r in rows:
        r["time_ratio"] = r["median_ms"] / ref["median_ms"] if ref else None
    log("training step: " + ", ".join(f"{r['model']} {r['median_ms']:.1f} ms" for r in rows))
    return {"batch": batch, "src_len": src_len, "tgt_len": tgt_len, "vocab": vocab, **sizes,
            "rows": rows}


# -- Report --------------------------------------------------------------------------------

def report(result):
    lines = []
    for mode in ("forward", "forward+backward"):
        rows = [r for r in result["layers"] if r["mode"] == mode]
        if not rows:
            continue
        lengths = sorted({r["seq_len"] for r in rows})
        names = list(dict.fromkeys(r["layer"] for r in rows))
        lines.append(f"\n{mode}: time ratio to {REFERENCE} (need_weights=True) "
                     f"[to need_weights=False]; median ms of {REFERENCE} in the last row")
        grid = []
        for name in names:
            cells = {"layer": name}
            for n in lengths:
                r = next(x for x in rows if x["layer"] == name and x["seq_len"] == n)
                if "time_ratio" in r:
                    cells[n] = f"{r['time_ratio']:.2f} [{r.get('time_ratio_no_weights', 0):.2f}]"
                else:
                    cells[n] = r.get("skipped", "-")
            grid.append(cells)
        grid.append({"layer": f"{REFERENCE} ms", **{
            n: next((f"{x['median_ms']:.1f}" for x in rows if x["layer"] == REFERENCE
                     and x["seq_len"] == n and "median_ms" in x), "-") for n in lengths}})
        lines.append(table(grid, [("layer", "layer", "{}")] + [(f"n={n}", n, "{}") for n in lengths]))
        mem = [{"layer": name, **{n: next((f"{x['memory_ratio']:.2f}" for x in rows
                                           if x["layer"] == name and x["seq_len"] == n
                                           and x.get("memory_ratio")), "-") for n in lengths}}
               for name in names]
        if any(v != "-" for row in mem for k, v in row.items() if k != "layer"):
            lines.append(f"\n{mode}: peak memory ratio to {REFERENCE}")
            lines.append(table(mem, [("layer", "layer", "{}")] + [(f"n={n}", n, "{}") for n in lengths]))
    if result.get("goals"):
        lines.append("\ngoals (forward+backward, ratio to nn.MHA):")
        lines += [f"  {g['layer']:<14} n={g['seq_len']:<5} {g['ratio']:.2f} <= {g['limit']}: "
                  f"{'met' if g['met'] else 'MISSED'}" for g in result["goals"]]
    if result.get("transformer"):
        t = result["transformer"]
        lines.append(f"\ntraining step (batch {t['batch']}, source {t['src_len']}, target "
                     f"{t['tgt_len']} tokens, d={t['num_hiddens']}):")
        lines.append(table(t["rows"], [("model", "model", "{}"), ("median ms", "median_ms", "{:.1f}"),
                                       ("ratio", "time_ratio", "{:.2f}"),
                                       ("parameters", "parameters", "{:,}")]))
    env = result["environment"]
    lines.append(f"\ndevice {env['device']}, torch {env['torch']}, {env['torch_threads']} threads, "
                 f"load average at start {env['load_average']}, at end {result.get('load_average_end')}")
    return "\n".join(lines)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def run(device="cpu", lengths=LENGTHS, repeat=5, transformer=True, memory=True, log=print,
        batch=BATCH, clock="wall", deadline=None):
    """Measure everything; return the result dictionary that is written as JSON."""
    env = environment(device)
    rows = measure_lengths(lengths, device, repeat, log=log, memory=memory, batch=batch,
                           clock=CLOCKS[clock], deadline=deadline)
    result = {"schema": SCHEMA_VERSION, "kind": "layers", "environment": env,
              "config": {"batch": batch, "num_hiddens": NUM_HIDDENS, "num_heads": NUM_HEADS,
                         "dropout": 0.0, "mask": "key padding, lengths in [n/2, n]",
                         "repeat": repeat, "reference": REFERENCE, "clock": clock},
              "layers": rows, "goals": goals(rows)}
    if transformer:
        result["transformer"] = measure_transformer(device, max(1, repeat // 2), log=log,
                                                    clock=CLOCKS[clock])
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--quick", action="store_true", help=f"lengths {QUICK_LENGTHS}, 3 repeats")
    parser.add_argument("--lengths", type=int, nargs="*", help="sequence lengths to measure")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per layer (median)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory pass")
    parser.add_argument("--no-transformer", action="store_true", help="skip the training step")
    parser.add_argument("--batch", type=int, default=BATCH, help="batch size (default 32)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (on a shared CPU, 1 avoids oversubscription)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (steadier on a busy "
                             "machine with --threads 1; meaningless on a GPU)")
    parser.add_argument("--name", default=None, help="results file name (default layers-<device>)")
    parser.add_argument("--results-dir", default=str(RESULTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA GPU")
    if args.threads:
        torch.set_num_threads(args.threads)
    lengths = args.lengths or (QUICK_LENGTHS if args.quick else LENGTHS)
    repeat = args.repeat or (3 if args.quick else 5)
    result = run(args.device, lengths, repeat, not args.no_transformer, not args.no_memory,
                 batch=args.batch, clock=args.clock)
    path = write_json(result, args.name or f"layers-{torch.device(args.device).type}",
                      args.results_dir)
    print(report(result))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
