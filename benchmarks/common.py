"""What every benchmark records beside its numbers: where it ran, and where results go."""
import datetime
import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SCHEMA_VERSION = 1


def device_name(device):
    """A readable name for a torch device: 'cpu (2 cores)' or 'cuda: NVIDIA H100 ...'."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"cpu ({os.cpu_count()} cores)"


def environment(device="cpu"):
    """The machine and software a result was measured on."""
    import torch

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device_name(device),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in load] if load else None,
    }


def write_json(result, name, results_dir=RESULTS):
    """Write `result` to results_dir/name.json and a time-stamped copy; return the path."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    (results_dir / f"{name}-{stamp}.json").write_text(text)
    path = results_dir / f"{name}.json"
    path.write_text(text)
    return path


def table(rows, columns):
    """A plain-text table: `columns` is a list of (header, key, format) with format like '{:.1f}'."""
    cells = [[h for h, _, _ in columns]]
    for row in rows:
        cells.append([("-" if row.get(k) is None else fmt.format(row[k])) for _, k, fmt in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
