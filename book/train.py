"""Training and evaluating a sequence-to-sequence model on `book.data.DateData` (chapter 7).

The model is any module called as `model(src, dec_input, src_valid_len)` that returns logits
of shape (batch, num_steps_tgt, vocab_size): teacher forcing, d2l's batch layout.
"""
import sys
import time

import torch
from torch import nn
from tqdm import tqdm

from .device import one_cpu_thread


def warmup_schedule(warmup_steps, total_steps=None):
    """Learning-rate factor: rises linearly from 1/warmup_steps to 1, then stays at 1 or,
    given `total_steps`, falls linearly to almost 0 at the last step."""
    if total_steps is not None and total_steps <= warmup_steps:
        raise ValueError(f"total_steps ({total_steps}) must exceed warmup_steps "
                         f"({warmup_steps}): the learning rate decays after the warm-up")

    def factor(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps                        # warm-up
        if total_steps is None:
            return 1.0                                              # constant
        return max(0.0, (total_steps - step) / (total_steps - warmup_steps))  # decay
    return factor


def train_seq2seq(model, data, num_steps, lr=1e-3, warmup_steps=100, clip=1.0,
                  batch_size=128, device=None, seed=0, progress=True, decay=False):
    """Train with teacher forcing for `num_steps` optimiser steps; return each step's loss.

    Cross-entropy over the label tokens (padding ignored), Adam with a linear warm-up of the
    learning rate (then constant, or with `decay=True` falling linearly to almost 0 at the
    last step), gradients clipped to norm `clip`. A fixed number of steps (not a time limit)
    keeps the computation the same on every machine.
    """
    device = device or next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    factor = warmup_schedule(warmup_steps, num_steps if decay else None)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    loss_fn = nn.CrossEntropyLoss(ignore_index=data.tgt_vocab.pad)
    bar = tqdm(total=num_steps, disable=not progress, file=sys.stdout, ascii=True, ncols=80,
               desc="training", mininterval=0, maxinterval=float("inf"),
               miniters=max(1, num_steps // 10))  # ten plain-text updates, at fixed steps
    losses, epoch = [], 0
    model.train()
    with one_cpu_thread(device):  # a model this small trains fastest on one CPU thread
        while len(losses) < num_steps:
            for batch in data.train_loader(batch_size, seed=seed + epoch):
                src, dec_input, src_valid_len, label = (t.to(device) for t in batch)
                logits = model(src, dec_input, src_valid_len)  # (batch, n_tgt, vocab)
                loss = loss_fn(logits.reshape(-1, logits.shape[-1]), label.reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
                if len(losses) == num_steps:
                    break
            epoch += 1
    bar.close()
    return losses


def training_throughput(model, data, num_steps=20, batch_size=128, device=None):
    """Training examples per second over `num_steps` steps (after one warm-up step).

    On a CPU the clock is the process's CPU time: training runs on one thread, so the time
    other programs take on a busy machine does not count. On a GPU it is wall-clock time,
    with the GPU's queue emptied before reading the clock.
    """
    device = torch.device(device or next(model.parameters()).device)
    on_gpu = device.type == "cuda"
    clock = time.perf_counter if on_gpu else time.process_time
    train_seq2seq(model, data, 1, batch_size=batch_size, device=device, progress=False)
    if on_gpu:
        torch.cuda.synchronize(device)
    start = clock()
    train_seq2seq(model, data, num_steps, batch_size=batch_size, device=device,
                  progress=False)
    if on_gpu:
        torch.cuda.synchronize(device)
    return num_steps * batch_size / (clock() - start)


def training_step_flops(model, data, batch_size=128, device=None, by_operator=False):
    """Floating-point operations of one training step (forward and backward) on the first
    batch of `data`, as counted by `torch.utils.flop_counter` (the matrix products). The
    count depends only on the shapes, so it is the same on every machine. With
    `by_operator=True`, a dict such as {"mm": ..., "bmm": ..., "addmm": ...}."""
    from torch.utils.flop_counter import FlopCounterMode

    device = device or next(model.parameters()).device
    src, dec_input, src_valid_len, label = (
        t.to(device) for t in next(iter(data.train_loader(batch_size, seed=0))))
    loss_fn = nn.CrossEntropyLoss(ignore_index=data.tgt_vocab.pad)
    model.train()
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(src, dec_input, src_valid_len)  # (batch, n_tgt, vocab)
        loss_fn(logits.reshape(-1, logits.shape[-1]), label.reshape(-1)).backward()
    model.zero_grad()
    if by_operator:
        return {str(op).split(".")[-1]: count
                for op, count in counter.get_flop_counts()["Global"].items()}
    return counter.get_total_flops()


@torch.no_grad()
def predict(model, data, pairs, device=None, batch_size=500):
    """Greedy-decode the sources of `pairs`; return the predicted target strings."""
    from .transformer import greedy_decode

    device = device or next(model.parameters()).device
    src, _, src_valid_len, _ = data.tensors(pairs)
    predictions = []
    with one_cpu_thread(device):
        for i in range(0, len(pairs), batch_size):
            tokens = greedy_decode(model, src[i:i + batch_size].to(device),
                                   src_valid_len[i:i + batch_size].to(device),
                                   data.num_steps_tgt, bos=data.tgt_vocab.bos,
                                   eos=data.tgt_vocab.eos)                   # (batch, n)
            predictions += [data.tgt_vocab.decode(t) for t in tokens.cpu()]  # until <eos>
    return predictions


def exact_match(predictions, pairs):
    """Fraction of predictions equal to the target string, character for character."""
    return sum(p == t for p, (_, t) in zip(predictions, pairs)) / len(pairs)
