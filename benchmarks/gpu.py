"""One command for a maintainer with a CUDA GPU: every notebook on the GPU, then the layers.

    python -m benchmarks.gpu              # or `make bench-gpu`; about 10 minutes at most
    python -m benchmarks.gpu --allow-cpu --quick chapters/01_attention_cues.ipynb
                                          # the same code paths on a CPU (to test this script)

The notebooks pick the GPU themselves (`device = book.try_gpu()`). Writes
benchmarks/results/gpu.json: {"notebooks": ..., "layers": ...}, each part in the same form as
`benchmarks.notebooks` and `benchmarks.layers` write on the CPU. Budgets are the CPU budgets;
this run never fails on them (print-only), but it does exit 1 if a notebook raised.
"""
import argparse
import os
import sys
import time
from pathlib import Path

import torch

from benchmarks import layers, notebooks
from benchmarks.common import ROOT, RESULTS, SCHEMA_VERSION, environment, write_json

LAYER_MINUTES = 4  # the layer benchmarks stop starting new lengths after this long


def main(argv=None, run_notebooks=None, run_layers=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", help="notebooks (default: all in _toc.yml)")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run on the CPU when there is no GPU (to check the script)")
    parser.add_argument("--quick", action="store_true", help="fewer lengths and repetitions")
    parser.add_argument("--lengths", type=int, nargs="*", help="sequence lengths (layers)")
    parser.add_argument("--batch", type=int, default=layers.BATCH, help="batch size (layers)")
    parser.add_argument("--results-dir", default=str(RESULTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    run_notebooks = run_notebooks or notebooks.run
    run_layers = run_layers or layers.run
    if torch.cuda.is_available():
        device = "cuda"
    elif args.allow_cpu:
        device = "cpu"
        print("no CUDA GPU: running on the CPU because of --allow-cpu", flush=True)
    else:
        print("benchmarks.gpu: torch sees no CUDA GPU (torch.cuda.is_available() is False). "
              "Install a CUDA build of torch, or pass --allow-cpu to test this script.")
        return 2
    start = time.perf_counter()
    paths = [Path(p).resolve() for p in args.paths] or notebooks.toc_notebooks()
    nb_result = run_notebooks(paths)
    nb_result["environment"] = environment(device)
    print(notebooks.report(nb_result), flush=True)
    lengths = args.lengths or (layers.QUICK_LENGTHS if args.quick else layers.LENGTHS)
    layer_result = run_layers(device, lengths, repeat=3 if args.quick else 5, batch=args.batch,
                              deadline=time.perf_counter() + 60 * LAYER_MINUTES)
    print(layers.report(layer_result), flush=True)
    result = {"schema": SCHEMA_VERSION, "kind": "gpu", "environment": environment(device),
              "seconds": time.perf_counter() - start,
              "notebooks": nb_result, "layers": layer_result}
    path = write_json(result, "gpu" if device == "cuda" else "gpu-on-cpu", args.results_dir)
    print(f"all done in {result['seconds'] / 60:.1f} minutes; results: {path}")
    errors = [r for r in nb_result["notebooks"] if r["status"] == "error"]
    return 1 if errors else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
