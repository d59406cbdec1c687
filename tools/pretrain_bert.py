"""Pretrain chapter 8's small BERT longer than the chapter can, and store it with the package.

    python tools/pretrain_bert.py            # (make pretrain) writes book/checkpoints/bert_pydoc.pt
    python tools/pretrain_bert.py --check 20 # rerun the first 20 steps, compare with the stored losses

The recipe is the chapter's (`book.bert.pretrain_small_bert`: same model, data, seed, learning
rate and warm-up), only with more steps. The run is seeded and uses one CPU thread, so it
repeats on one machine; another CPU's float kernels give slightly different weights.
`book/checkpoints/bert_pydoc.json` records the command, the SHA-256 of the file, the time it
took (wall clock and CPU) and the held-out accuracy it reached.
"""
import argparse
import hashlib
import json
import platform
import random
import sys
import time
from pathlib import Path

import torch

from book import bert

RECIPE = {"num_steps": 6000, "lr": 6e-3, "warmup": 200, "batch_size": 64, "max_len": 32,
          "seed": 0}
ROOT = Path(__file__).resolve().parents[1]
RECORD = bert.CHECKPOINT.with_suffix(".json")


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def heldout_accuracy(model, corpus, max_len):
    docs = bert.PydocCorpus.documents(corpus.test)
    pairings = [bert.encode(bert.nsp_pairs(docs, random.Random(seed)), corpus.vocab, max_len)
                for seed in range(10)]
    held_out = [torch.cat(parts) for parts in zip(*pairings)]
    return bert.evaluate_pretraining(model, held_out, corpus.vocab, rounds=1)


def check(num_steps):
    """Rerun the first `num_steps` steps; their losses must equal the stored ones."""
    stored = bert.load_pretrained()[2]
    recipe = dict(RECIPE, num_steps=num_steps)
    if num_steps > RECIPE["warmup"]:
        sys.exit(f"--check compares steps of the warm-up only (at most {RECIPE['warmup']}), "
                 "where the learning rate does not depend on the total number of steps")
    history = bert.pretrain_small_bert(bert.PydocCorpus(), report_every=10**9, **recipe)[1]
    for name, losses in history.items():
        diff = max(abs(a - b) for a, b in zip(losses, stored[name]))
        print(f"{name}: largest difference over the first {num_steps} steps {diff:.2e}")
        if diff > 1e-3:
            sys.exit(f"{name} losses differ from the stored run by {diff:.2e}")
    return history


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", type=int, metavar="STEPS",
                        help="rerun the first STEPS steps and compare with the stored losses")
    parser.add_argument("--out", default=str(bert.CHECKPOINT))
    parser.add_argument("--steps", type=int, default=RECIPE["num_steps"])
    args = parser.parse_args()
    if args.check:
        check(args.check)
        return
    torch.set_num_threads(1)
    recipe = dict(RECIPE, num_steps=args.steps)
    corpus = bert.PydocCorpus()
    start, cpu_start = time.perf_counter(), time.process_time()
    model, history = bert.pretrain_small_bert(corpus, report_every=500, **recipe)
    seconds = {"wall": round(time.perf_counter() - start, 1),
               "cpu": round(time.process_time() - cpu_start, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    bert.save_pretrained(out, model, corpus.vocab, history, recipe)
    command = "python tools/pretrain_bert.py" + (
        f" --steps {args.steps}" if args.steps != RECIPE["num_steps"] else "")
    record = write_record(out, command, seconds, corpus)
    print(json.dumps(record, indent=1))


def write_record(path, command, seconds, corpus=None, note=None):
    """What made the file and what it reaches; written next to the stored checkpoint."""
    model, vocab, _, recipe = bert.load_pretrained(path)
    corpus = corpus or bert.PydocCorpus()
    result = heldout_accuracy(model, corpus, recipe["max_len"])
    record = {"command": command, "sha256": sha256(path), "bytes": Path(path).stat().st_size,
              "recipe": recipe, "seconds (one CPU thread)": seconds,
              "python": platform.python_version(), "torch": torch.__version__,
              "held_out": {k: round(v, 4) for k, v in result.items()}}
    if note:
        record["note"] = note
    if Path(path).resolve() == bert.CHECKPOINT.resolve():
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
    return record

if __name__ == "__main__":
    main()
