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


def warmup_schedule(warmup_steps):
    """Learning-rate factor: rises linearly from 1/warmup_steps to 1, then stays at 1."""
    return lambda step: min(1.0, (step + 1) / warmup_steps)


def train_seq2seq(model, data, num_steps, lr=1e-3, warmup_steps=100, clip=1.0,
                  batch_size=128, device=None, seed=0, progress=True):
    """Train with teacher forcing for `num_steps` optimiser steps; return each step's loss.

    Cross-entropy over the label tokens (padding ignored), Adam with a linear warm-up of the
    learning rate, gradients clipped to norm `clip`. A fixed number of steps (not a time
    limit) keeps the result the same on every machine.
    """
    device = device or next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_schedule(warmup_steps))
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
    """Training examples per second over `num_steps` steps (after one warm-up step)."""
    train_seq2seq(model, data, 1, batch_size=batch_size, device=device, progress=False)
    start = time.perf_counter()
    train_seq2seq(model, data, num_steps, batch_size=batch_size, device=device,
                  progress=False)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return num_steps * batch_size / (time.perf_counter() - start)


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
