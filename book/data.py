"""Offline sequence-to-sequence data: date normalisation, generated on the fly from a seed.

"tuesday, 3 march 2021" -> "2021-03-03". Several input formats put the day, month and year
in different orders, so the alignment between input and output characters is not monotonic.
Nothing is downloaded. Tokens are characters.
"""
import datetime
import random

import torch
from torch.utils.data import DataLoader, TensorDataset

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _ordinal(day):
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


FORMATS = {  # name -> how to write a date
    "weekday, day month year": lambda d: f"{WEEKDAYS[d.weekday()]}, {d.day} {MONTHS[d.month - 1]} {d.year}",
    "day mon year": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",
    "month day, year": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "dd/mm/yyyy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    "the ordinal of month, year": lambda d: f"the {_ordinal(d.day)} of {MONTHS[d.month - 1]}, {d.year}",
    "mon day year weekday": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day} {d.year}, a {WEEKDAYS[d.weekday()]}",
}


def random_date(rng, first=datetime.date(1900, 1, 1), last=datetime.date(2099, 12, 31)):
    return first + datetime.timedelta(days=rng.randrange((last - first).days + 1))


def make_dates(num_examples, seed=0, formats=None):
    """`num_examples` distinct (source, target) pairs, e.g. ("3 mar 2021", "2021-03-03")."""
    formats = list(formats or FORMATS)
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown date formats {sorted(unknown)}; choose from {list(FORMATS)}")
    rng, pairs, seen = random.Random(seed), [], set()
    while len(pairs) < num_examples:
        date = random_date(rng)
        source = FORMATS[rng.choice(formats)](date)
        if source not in seen:
            seen.add(source)
            pairs.append((source, date.isoformat()))
    return pairs


class Vocab:
    """Characters <-> indices, with <pad> = 0, <bos>, <eos> and <unk>."""

    SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]

    def __init__(self, texts):
        chars = sorted({c for text in texts for c in text})
        self.idx_to_token = self.SPECIALS + chars
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.pad, self.bos, self.eos, self.unk = (self.token_to_idx[t] for t in self.SPECIALS)

    def __len__(self):
        return len(self.idx_to_token)

    def encode(self, text):
        return [self.token_to_idx.get(c, self.unk) for c in text]

    def decode(self, indices):
        """Indices -> text, stopping at <eos> and skipping <pad> and <bos>."""
        out = []
        for i in (indices.tolist() if torch.is_tensor(indices) else indices):
            if i == self.eos:
                break
            if i not in (self.pad, self.bos):
                out.append(self.idx_to_token[i])
        return "".join(out)


def encode_pairs(pairs, src_vocab, tgt_vocab, num_steps_src, num_steps_tgt):
    """Pad and stack: returns (src, dec_input, src_valid_len, label), d2l's batch layout.

    src (n, num_steps_src) ends with <eos>; dec_input = <bos> + target; label = target + <eos>.
    """
    def pad(ids, length):
        if len(ids) > length:
            raise ValueError(f"a sequence of {len(ids)} tokens does not fit num_steps={length}")
        return ids + [src_vocab.pad] * (length - len(ids))

    src = [src_vocab.encode(s) + [src_vocab.eos] for s, _ in pairs]
    tgt = [tgt_vocab.encode(t) for _, t in pairs]
    src_valid_len = torch.tensor([len(s) for s in src])
    src = torch.tensor([pad(s, num_steps_src) for s in src])
    dec_input = torch.tensor([pad([tgt_vocab.bos] + t, num_steps_tgt) for t in tgt])
    label = torch.tensor([pad(t + [tgt_vocab.eos], num_steps_tgt) for t in tgt])
    return src, dec_input, src_valid_len, label


class DateData:
    """The date task, ready to train: vocabularies, padded tensors, splits and loaders."""

    def __init__(self, num_train=20000, num_test=2000, seed=0, formats=None):
        pairs = make_dates(num_train + num_test, seed=seed, formats=formats)
        self.train_pairs, self.test_pairs = pairs[:num_train], pairs[num_train:]
        every_format = [f(datetime.date(2000, 9, 30)) for f in FORMATS.values()]
        self.src_vocab = Vocab([s for s, _ in pairs] + every_format + MONTHS + WEEKDAYS)
        self.tgt_vocab = Vocab("0123456789-")
        self.num_steps_src = max(len(s) for s, _ in pairs) + 1  # + <eos>
        self.num_steps_tgt = len("2021-03-03") + 1             # + <bos> / <eos>
        self.train = self.tensors(self.train_pairs)
        self.test = self.tensors(self.test_pairs)

    def tensors(self, pairs):
        return encode_pairs(pairs, self.src_vocab, self.tgt_vocab, self.num_steps_src,
                            self.num_steps_tgt)

    def train_loader(self, batch_size=128, seed=0):
        generator = torch.Generator().manual_seed(seed)
        return DataLoader(TensorDataset(*self.train), batch_size=batch_size, shuffle=True,
                          generator=generator)

    def test_loader(self, batch_size=512):
        return DataLoader(TensorDataset(*self.test), batch_size=batch_size, shuffle=False)
