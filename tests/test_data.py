"""The offline date tasks and the optional English-French loader (tested on a tiny fixture)."""
import datetime
import hashlib
import io
import zipfile

import pytest
import torch

from book import data
from book.data import DateData, Vocab


def test_make_dates_is_seeded_distinct_and_correct():
    pairs = data.make_dates(300, seed=3)
    assert pairs == data.make_dates(300, seed=3)
    assert pairs != data.make_dates(300, seed=4)
    assert len({s for s, _ in pairs}) == 300
    for source, target in pairs:
        date = datetime.date.fromisoformat(target)
        assert str(date.year) in source and (str(date.day) in source or f"{date.day:02d}" in source)


def test_every_format_writes_the_date_it_is_given():
    date = datetime.date(2021, 3, 3)
    written = {name: f(date) for name, f in data.FORMATS.items()}
    assert written["weekday, day month year"] == "wednesday, 3 march 2021"
    assert written["dd/mm/yyyy"] == "03/03/2021"
    assert written["the ordinal of month, year"] == "the 3rd of march, 2021"
    assert data._ordinal(11) == "11th" and data._ordinal(22) == "22nd" and data._ordinal(31) == "31st"


def test_unknown_format_and_bad_max_dates_are_refused():
    with pytest.raises(ValueError, match="unknown date formats"):
        data.make_dates(5, formats=["yyyy.mm.dd"])
    with pytest.raises(ValueError, match="max_dates"):
        data.make_date_lists(5, max_dates=0)


def test_date_lists_have_one_to_max_dates_dates_in_order():
    pairs = data.make_date_lists(400, seed=1, max_dates=3)
    counts = {len(t.split()) for _, t in pairs}
    assert counts == {1, 2, 3}
    for source, target in pairs:
        parts = source.split("; ")
        assert len(parts) == len(target.split())
        for part, iso in zip(parts, target.split()):  # each part is its own date
            assert str(datetime.date.fromisoformat(iso).year) in part


def test_vocab_round_trip_and_specials():
    vocab = Vocab(["abc", "cab"])
    assert (vocab.pad, vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert len(vocab) == 7
    ids = vocab.encode("cabz")
    assert ids[-1] == vocab.unk
    assert vocab.decode(vocab.encode("cab") + [vocab.eos] + vocab.encode("a")) == "cab"
    assert vocab.decode(torch.tensor([vocab.bos] + vocab.encode("ab") + [vocab.pad])) == "ab"


def test_word_vocab_splits_on_spaces_and_drops_rare_words():
    vocab = Vocab(["go now !", "go away !"], sep=" ", min_freq=2)
    assert vocab.idx_to_token[4:] == ["!", "go"]
    assert vocab.encode("go now !") == [vocab.token_to_idx["go"], vocab.unk, vocab.token_to_idx["!"]]
    assert vocab.decode(vocab.encode("go !")) == "go !"


def test_single_date_data_keeps_its_layout():
    """Chapter 7 relies on this layout: (src, dec_input, src_valid_len, label)."""
    d = DateData(200, 50, seed=0)
    src, dec_input, src_valid_len, label = d.train
    assert src.shape == (200, d.num_steps_src) and d.num_steps_tgt == 11
    assert dec_input.shape == label.shape == (200, 11)
    assert (dec_input[:, 0] == d.tgt_vocab.bos).all()
    assert torch.equal(dec_input[:, 1:], label[:, :-1])      # label = input shifted by one
    assert (label[:, -1] == d.tgt_vocab.eos).all()           # every ISO date has 10 characters
    assert src[torch.arange(200), src_valid_len - 1].eq(d.src_vocab.eos).all()
    assert d.tgt_vocab.idx_to_token[4:] == list("-0123456789")
    for (s, t), row, lab in zip(d.train_pairs[:20], src, label):
        assert d.src_vocab.decode(row) == s and d.tgt_vocab.decode(lab) == t
    assert d.test[0].shape == (50, d.num_steps_src)


def test_date_list_data_pads_targets_of_different_lengths():
    d = DateData(300, 30, seed=0, max_dates=3)
    src, dec_input, src_valid_len, label = d.train
    assert d.num_steps_tgt == 33 and label.shape == (300, 33)
    lengths = (label != d.tgt_vocab.pad).sum(dim=1)          # tokens + <eos>
    assert set(lengths.tolist()) == {11, 22, 33}
    for (s, t), lab in zip(d.train_pairs[:30], label):
        assert d.tgt_vocab.decode(lab) == t


def test_train_loader_is_seeded_and_covers_the_training_set():
    d = DateData(100, 10, seed=0)
    first = [b[0] for b in d.train_loader(batch_size=32, seed=5)]
    again = [b[0] for b in d.train_loader(batch_size=32, seed=5)]
    other = [b[0] for b in d.train_loader(batch_size=32, seed=6)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])
    assert sum(len(b) for b in first) == 100
    assert sum(len(b[0]) for b in d.test_loader(batch_size=4)) == 10


# -- The English-French loader, on a tiny fixture: no network --------------------------------

FIXTURE = ("Go.\tVa !\nHi.\tSalut !\nRun!\tCours\u202f!\nI won!\tJ'ai gagné !\n"
           "We try.\tOn essaye.\nGo now.\tVa maintenant.\nThis sentence is far too long for us."
           "\tCette phrase est bien trop longue pour nous.\n")


def fixture_zip(text=FIXTURE):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("fra-eng/fra.txt", text)
    return buffer.getvalue()


@pytest.fixture
def corpus(tmp_path):
    payload = fixture_zip()
    (tmp_path / "fra-eng.zip").write_bytes(payload)
    return tmp_path, hashlib.sha1(payload).hexdigest()


def test_fra_eng_reads_a_local_file_with_the_right_checksum(corpus):
    folder, sha1 = corpus
    assert data.load_fra_eng(folder, sha1=sha1) == FIXTURE


def test_fra_eng_refuses_a_file_with_the_wrong_checksum(corpus):
    folder, _ = corpus
    with pytest.raises(ValueError, match="SHA-1"):
        data.load_fra_eng(folder)  # the real corpus's hash: the fixture does not match it


def test_fra_eng_never_downloads_unless_asked(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("load_fra_eng tried to download without download=True")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    with pytest.raises(FileNotFoundError, match="download=True"):
        data.load_fra_eng(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_fra_eng_download_is_verified(tmp_path, monkeypatch):
    payload = fixture_zip()
    urls = []
    monkeypatch.setattr(data.urllib.request, "urlopen",
                        lambda url, timeout: urls.append(url) or FakeResponse(payload))
    sha1 = hashlib.sha1(payload).hexdigest()
    assert data.load_fra_eng(tmp_path, download=True, sha1=sha1) == FIXTURE
    assert urls == [data.FRA_ENG_URL]
    assert data.load_fra_eng(tmp_path, download=True, sha1=sha1) == FIXTURE  # cached
    assert len(urls) == 1
    with pytest.raises(ValueError, match="SHA-1"):      # a corrupted download is refused
        data.load_fra_eng(tmp_path / "other", download=True, sha1="0" * 40)


def test_translation_pairs_are_cleaned_like_d2l():
    assert data.preprocess_nmt("Go.\tVa !") == "go .\tva !"
    pairs = data.translation_pairs(FIXTURE, max_tokens=4)
    assert pairs[:3] == [("go .", "va !"), ("hi .", "salut !"), ("run !", "cours !")]
    assert all(max(len(s.split()), len(t.split())) <= 4 for s, t in pairs)
    assert len(data.translation_pairs(FIXTURE)) == 7
    assert len(data.translation_pairs(FIXTURE, max_examples=2)) == 2


def test_translation_data_has_the_date_data_interface():
    d = data.TranslationData(FIXTURE, num_train=4, num_test=2, max_tokens=4, min_freq=1)
    src, dec_input, src_valid_len, label = d.train
    assert src.shape == (4, d.num_steps_src) and label.shape == (4, d.num_steps_tgt)
    assert d.src_vocab.decode(src[0]) == "go ."
    assert d.tgt_vocab.decode(label[1]) == "salut !"
    assert len(d.test_pairs) == 2 and d.test[0].shape[0] == 2
    assert sum(len(b[0]) for b in d.train_loader(batch_size=3)) == 4
