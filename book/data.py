"""Offline sequence-to-sequence data: date normalisation, generated on the fly from a seed.

"tuesday, 3 march 2021" -> "2021-03-03". Several input formats put the day, month and year
in different orders, so the alignment between input and output characters is not monotonic.
Nothing is downloaded. Tokens are characters.
"""
import collections
import datetime
import hashlib
import random
import urllib.request
import zipfile
from pathlib import Path

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


def make_date_lists(num_examples, seed=0, max_dates=3, formats=None, separator="; "):
    """Pairs whose source lists 1 to `max_dates` dates, each in a random format.

    ("3 mar 2021; 12/01/1950", "2021-03-03 1950-01-12"): the target lists the same dates,
    in the same order, in ISO form separated by spaces. The more dates, the longer the input
    and the more the model must carry from the input to the output.
    """
    formats = list(formats or FORMATS)
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown date formats {sorted(unknown)}; choose from {list(FORMATS)}")
    if max_dates < 1:
        raise ValueError(f"max_dates must be at least 1, got {max_dates}")
    rng, pairs, seen = random.Random(seed), [], set()
    while len(pairs) < num_examples:
        dates = [random_date(rng) for _ in range(rng.randint(1, max_dates))]
        source = separator.join(FORMATS[rng.choice(formats)](d) for d in dates)
        if source not in seen:
            seen.add(source)
            pairs.append((source, " ".join(d.isoformat() for d in dates)))
    return pairs


class Vocab:
    """Tokens <-> indices, with <pad> = 0, <bos>, <eos> and <unk>.

    Tokens are characters by default; `sep=" "` makes them words (split on spaces), and
    `min_freq` maps tokens seen fewer times to <unk> (useful for words, not characters).
    """

    SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]

    def __init__(self, texts, sep="", min_freq=1):
        self.sep = sep
        counts = collections.Counter(t for text in texts for t in self.tokenize(text))
        tokens = sorted(t for t, n in counts.items() if n >= min_freq and t not in self.SPECIALS)
        self.idx_to_token = self.SPECIALS + tokens
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.pad, self.bos, self.eos, self.unk = (self.token_to_idx[t] for t in self.SPECIALS)

    def __len__(self):
        return len(self.idx_to_token)

    def tokenize(self, text):
        """A text as a list of tokens: its characters, or its words when `sep` is set."""
        return list(text) if self.sep == "" else [t for t in text.split(self.sep) if t]

    def encode(self, text):
        return [self.token_to_idx.get(t, self.unk) for t in self.tokenize(text)]

    def decode(self, indices):
        """Indices -> text, stopping at <eos> and skipping <pad> and <bos>."""
        out = []
        for i in (indices.tolist() if torch.is_tensor(indices) else indices):
            if i == self.eos:
                break
            if i not in (self.pad, self.bos):
                out.append(self.idx_to_token[i])
        return self.sep.join(out)


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

    def __init__(self, num_train=20000, num_test=2000, seed=0, formats=None, max_dates=1):
        if max_dates == 1:
            pairs = make_dates(num_train + num_test, seed=seed, formats=formats)
        else:  # the longer task of chapter 4: lists of 1 to max_dates dates
            pairs = make_date_lists(num_train + num_test, seed, max_dates, formats)
        self.train_pairs, self.test_pairs = pairs[:num_train], pairs[num_train:]
        every_format = [f(datetime.date(2000, 9, 30)) for f in FORMATS.values()]
        self.src_vocab = Vocab([s for s, _ in pairs] + every_format + MONTHS + WEEKDAYS)
        self.tgt_vocab = Vocab("0123456789-" + (" " if max_dates > 1 else ""))
        self.num_steps_src = max(len(s) for s, _ in pairs) + 1        # + <eos>
        self.num_steps_tgt = (len("2021-03-03") + 1) * max_dates      # + <bos> / <eos>
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


# -- Optional: the English-French corpus of d2l (needs the network once, never by default) --

FRA_ENG_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
FRA_ENG_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"  # the hash d2l checks


def sha1_of(path):
    """The SHA-1 hex digest of a file, read in 1 MB chunks."""
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_fra_eng(folder="../data", download=False, url=FRA_ENG_URL, sha1=FRA_ENG_SHA1):
    """The text of d2l's English-French corpus: lines "english<TAB>french".

    Reads `folder/fra-eng.zip`. Only with `download=True`, and only when that file is missing,
    is it downloaded from `url`. Either way its SHA-1 must equal `sha1`, or nothing is used.
    """
    path = Path(folder) / "fra-eng.zip"
    if not path.exists():
        if not download:
            raise FileNotFoundError(
                f"{path} is not there. Call load_fra_eng(download=True) to fetch it "
                f"(about 3 MB, needs the network), or put the file there yourself.")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        with urllib.request.urlopen(url, timeout=60) as response:
            partial.write_bytes(response.read())
        partial.replace(path)
    found = sha1_of(path)
    if found != sha1:
        raise ValueError(f"{path} has SHA-1 {found}, expected {sha1}: the file is damaged or "
                         "not the expected one; delete it and download it again.")
    with zipfile.ZipFile(path) as archive:
        return archive.read("fra-eng/fra.txt").decode("utf-8")


def preprocess_nmt(text):
    """d2l's cleaning: lower case, plain spaces, a space before , . ! ?"""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    return "".join(" " + c if i > 0 and c in ",.!?" and text[i - 1] != " " else c
                   for i, c in enumerate(text))


def translation_pairs(text, max_examples=None, max_tokens=None):
    """(english, french) pairs of space-separated words, optionally only the short ones."""
    pairs = []
    for line in preprocess_nmt(text).split("\n"):
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        src, tgt = " ".join(parts[0].split()), " ".join(parts[1].split())
        if max_tokens and max(len(src.split()), len(tgt.split())) > max_tokens:
            continue
        pairs.append((src, tgt))
        if max_examples and len(pairs) == max_examples:
            break
    return pairs


class TranslationData(DateData):
    """English -> French at the word level, with DateData's interface (vocabularies, tensors,
    splits, loaders). Built from `load_fra_eng()`'s text or any text in its format."""

    def __init__(self, text, num_train=8000, num_test=1000, max_tokens=8, min_freq=2):
        pairs = translation_pairs(text, num_train + num_test, max_tokens)
        self.train_pairs, self.test_pairs = pairs[:num_train], pairs[num_train:]
        self.src_vocab = Vocab([s for s, _ in self.train_pairs], sep=" ", min_freq=min_freq)
        self.tgt_vocab = Vocab([t for _, t in self.train_pairs], sep=" ", min_freq=min_freq)
        self.num_steps_src = max(len(s.split()) for s, _ in pairs) + 1  # + <eos>
        self.num_steps_tgt = max(len(t.split()) for _, t in pairs) + 1  # + <bos> / <eos>
        self.train = self.tensors(self.train_pairs)
        self.test = self.tensors(self.test_pairs)
