"""book.bert: tokens, the corpus, masking (statistically), NSP pairs, the model and its sizes."""
import collections
import random
import re

import pytest
import torch

from book import bert
from book.bert import IGNORE


@pytest.fixture(scope="module")
def corpus():
    return bert.PydocCorpus()


def test_tokenize_lowercases_splits_punctuation_and_keeps_special_tokens():
    assert bert.tokenize('The "if" statement, [MASK] here.') == [
        "the", '"', "if", '"', "statement", ",", "[MASK]", "here", "."]
    assert bert.tokenize("[cls] x_1 = 2") == ["[CLS]", "x_1", "=", "2"]


def test_vocab_puts_the_special_tokens_first_and_maps_rare_words_to_unk():
    vocab = bert.Vocab([["b", "a", "b", "c"], ["b", "a"]], min_freq=2)
    assert vocab.idx_to_token == bert.SPECIALS + ["b", "a"]
    assert (vocab.pad, vocab.unk, vocab.cls, vocab.sep, vocab.mask) == (0, 1, 2, 3, 4)
    assert vocab[["a", "c", "[MASK]"]] == [6, vocab.unk, vocab.mask]
    assert vocab.to_tokens(torch.tensor([5, 6])) == ["b", "a"] and len(vocab) == 7


def test_corpus_is_prose_without_table_borders_and_without_shared_sentences(corpus):
    counts = collections.Counter(t for _, tokens in corpus.train for t in tokens)
    top = [t for t, _ in counts.most_common(10)]
    assert "-" not in top and "the" in top  # with table borders, "-" would lead by far
    assert len(corpus.train) > 1000 and len(corpus.test) > 150 and 800 < len(corpus.vocab) < 3000
    train = {tuple(t) for _, t in corpus.train}
    assert sum(tuple(t) in train for _, t in corpus.test) < 0.02 * len(corpus.test)
    assert set(bert.FAMILY_OF[topic] for topic, _ in corpus.test) == set(bert.FAMILIES)


def test_every_pydoc_topic_has_a_family():
    from pydoc_data.topics import topics
    assert set(topics) <= set(bert.FAMILY_OF)


def test_paragraphs_treat_table_borders_as_blank_lines():
    text = "A line of prose.\n+-----+-----+\nNext block here.\n\nThird one."
    assert bert._paragraphs(text) == ["A line of prose.", "Next block here.", "Third one."]


def test_get_tokens_and_segments_follows_d2l():
    tokens, segments = bert.get_tokens_and_segments(["a", "b"], ["c"])
    assert tokens == ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
    assert segments == [0, 0, 0, 0, 1, 1]
    assert bert.get_tokens_and_segments(["a"]) == (["[CLS]", "a", "[SEP]"], [0, 0, 0])


def test_encode_truncates_the_longer_sentence_and_pads(corpus):
    vocab = corpus.vocab
    a, b = ["the"] * 30, ["a"] * 5
    tokens, segments, valid_lens, labels = bert.encode([(a, b, 1), (["is"], None, 0)], vocab, 16)
    assert tokens.shape == segments.shape == (2, 16) and valid_lens.tolist() == [16, 3]
    assert bert.truncate_pair(a, b, 13) == (["the"] * 8, ["a"] * 5)
    assert tokens[1, 3:].eq(vocab.pad).all() and labels.tolist() == [1, 0]
    assert segments[0].tolist() == [0] * 10 + [1] * 6


def test_nsp_pairs_are_balanced_and_negatives_come_from_other_documents(corpus):
    docs = bert.PydocCorpus.documents(corpus.train)
    where = {id(s): d for d, doc in enumerate(docs) for s in doc}
    pairs = bert.nsp_pairs(docs, random.Random(0))
    share = sum(label for _, _, label in pairs) / len(pairs)
    assert abs(share - 0.5) < 0.035  # about 1900 pairs: 3 standard errors
    for a, b, label in pairs:
        assert (where[id(a)] == where[id(b)]) == bool(label)


@pytest.fixture(scope="module")
def big_sample(corpus):
    """About 300,000 positions of real BERT inputs, masked once."""
    docs = bert.PydocCorpus.documents(corpus.train)
    pairs = [p for seed in range(5) for p in bert.nsp_pairs(docs, random.Random(seed))]
    tokens = bert.encode(pairs, corpus.vocab, 48)[0]
    inputs, labels = bert.mask_tokens(tokens, corpus.vocab,
                                      generator=torch.Generator().manual_seed(0))
    return tokens, inputs, labels, corpus.vocab


def test_mask_tokens_rates_on_a_large_sample(big_sample):
    """Tolerances are about 6 standard errors: 1 point for the 15% rate (n ~ 150,000 ordinary
    positions), 1.5 points for 80% and 1 point for each 10% (n ~ 20,000 chosen positions)."""
    tokens, inputs, labels, vocab = big_sample
    ordinary = tokens >= vocab.num_specials
    chosen = labels != IGNORE
    assert ordinary.sum() > 100_000
    assert abs(chosen[ordinary].float().mean().item() - 0.15) < 0.01
    masked = (inputs[chosen] == vocab.mask).float().mean().item()
    swapped = ((inputs != tokens) & (inputs != vocab.mask))[chosen].float().mean().item()
    same = (inputs == tokens)[chosen].float().mean().item()
    assert abs(masked - 0.8) < 0.015 and abs(swapped - 0.1) < 0.01 and abs(same - 0.1) < 0.01


def test_mask_tokens_never_touches_special_tokens_and_labels_only_chosen(big_sample):
    tokens, inputs, labels, vocab = big_sample
    special = tokens < vocab.num_specials
    assert torch.equal(inputs[special], tokens[special]) and (labels[special] == IGNORE).all()
    chosen = labels != IGNORE
    assert torch.equal(labels[chosen], tokens[chosen])
    assert torch.equal(inputs[~chosen], tokens[~chosen])
    swapped = chosen & (inputs != tokens) & (inputs != vocab.mask)
    assert (inputs[swapped] >= vocab.num_specials).all()


def test_mask_tokens_is_reproducible_with_a_generator_and_leaves_its_input(corpus):
    tokens = torch.randint(5, len(corpus.vocab), (4, 20))
    before = tokens.clone()
    one = bert.mask_tokens(tokens, corpus.vocab, generator=torch.Generator().manual_seed(3))
    two = bert.mask_tokens(tokens, corpus.vocab, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(one, two)) and torch.equal(tokens, before)


def test_gather_predictions_puts_chosen_positions_first():
    labels = torch.tensor([[IGNORE, 7, IGNORE, 9], [5, IGNORE, IGNORE, IGNORE]])
    positions, mlm_labels = bert.gather_predictions(labels)
    assert positions.tolist() == [[1, 3], [0, 1]]
    assert mlm_labels.tolist() == [[7, 9], [5, IGNORE]]


def tiny_model(vocab_size=50, **kwargs):
    torch.manual_seed(0)
    return bert.BERTModel(vocab_size, num_hiddens=16, ffn_num_hiddens=32, num_heads=2,
                          num_blks=2, dropout=0.0, max_len=12, **kwargs).eval()


def test_bert_model_shapes():
    model = tiny_model()
    tokens = torch.randint(5, 50, (3, 10))
    segments = torch.zeros(3, 10, dtype=torch.long)
    positions = torch.tensor([[1, 2], [3, 4], [5, 5]])
    encoded, mlm, nsp = model(tokens, segments, torch.tensor([10, 8, 6]), positions)
    assert encoded.shape == (3, 10, 16) and mlm.shape == (3, 2, 50) and nsp.shape == (3, 2)
    assert model(tokens, segments)[1] is None


def test_bert_is_bidirectional_and_ignores_padding():
    """Changing the last real token changes the first output; changing padding changes none."""
    model = tiny_model()
    tokens = torch.randint(5, 50, (1, 10))
    segments, valid = torch.zeros(1, 10, dtype=torch.long), torch.tensor([7])
    base = model(tokens, segments, valid)[0]
    later = tokens.clone()
    later[0, 6] = (later[0, 6] - 5 + 1) % 45 + 5
    assert not torch.allclose(model(later, segments, valid)[0][0, 0], base[0, 0])
    padded = tokens.clone()
    padded[0, 8] = (padded[0, 8] - 5 + 1) % 45 + 5
    assert torch.allclose(model(padded, segments, valid)[0][0, :7], base[0, :7], atol=1e-6)


def test_segment_and_position_embeddings_change_the_encoding():
    model = tiny_model()
    tokens = torch.full((1, 6), 7)
    zeros = torch.zeros(1, 6, dtype=torch.long)
    encoded = model(tokens, zeros)[0][0]
    assert not torch.allclose(encoded[1], encoded[2])  # same token, different position
    ones = torch.ones(1, 6, dtype=torch.long)
    assert not torch.allclose(model(tokens, ones)[0], encoded)


def test_classifier_reuses_the_pretrained_encoder():
    model = tiny_model()
    classifier = bert.BERTClassifier(model, num_classes=4)
    assert classifier.encoder is model.encoder and classifier.hidden is model.hidden
    out = classifier(torch.randint(5, 50, (2, 6)), torch.zeros(2, 6, dtype=torch.long),
                     torch.tensor([6, 4]))
    assert out.shape == (2, 4)


def test_meta_device_counts_match_the_published_sizes():
    """Encoder + pooler equal the exact counts of the released checkpoints (109,482,240 and
    335,141,888 with WordPiece's 30,522 tokens); the untied MLM head and NSP come on top."""
    base = bert.bert_num_params(num_blks=12, num_hiddens=768, num_heads=12)
    large = bert.bert_num_params(num_blks=24, num_hiddens=1024, num_heads=16)
    for counts in (base, large):
        assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
    assert base["embeddings"] + base["encoder blocks"] + base["pooler"] == 109_482_240
    assert large["embeddings"] + large["encoder blocks"] + large["pooler"] == 335_141_888
    assert base["MLM head"] == 768 * 768 + 768 + 2 * 768 + 768 * 30522 + 30522
    assert abs(base["total"] / 110e6 - 1) < 0.25 and abs(large["total"] / 340e6 - 1) < 0.1


def test_meta_device_count_equals_a_real_model():
    with torch.device("meta"):
        meta = bert.BERTModel(300, 32, 64, 4, 3, 0.1, max_len=40)
    assert all(p.is_meta for p in meta.parameters())
    assert bert.num_params(meta) == bert.num_params(bert.BERTModel(300, 32, 64, 4, 3, 0.1, 40))


# -- Evaluation, probes and fine-tuning ------------------------------------------------------

class Copier(torch.nn.Module):
    """A stand-in for BERTModel that predicts, at every position, the token it is shown."""

    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
        mlm = None
        if pred_positions is not None:
            shown = tokens.gather(1, pred_positions)                       # (batch, k)
            mlm = 20.0 * torch.nn.functional.one_hot(shown, self.vocab_size).float()
        return None, mlm, torch.zeros(len(tokens), 2)


def test_heldout_mlm_loss_splits_mask_random_and_kept_positions(corpus):
    docs = bert.PydocCorpus.documents(corpus.test)
    data = bert.encode(bert.nsp_pairs(docs, random.Random(0)), corpus.vocab, 32)
    losses = bert.heldout_mlm_loss(Copier(len(corpus.vocab)), data, corpus.vocab, rounds=1)
    assert list(losses) == ["[MASK]", "random", "kept"]
    assert losses["kept"] < 1e-6 < 19 < losses["random"] and losses["[MASK]"] > 19


def test_evaluate_pretraining_counts_top1_top5_and_the_frequency_baseline(corpus):
    docs = bert.PydocCorpus.documents(corpus.test)
    data = bert.encode(bert.nsp_pairs(docs, random.Random(0)), corpus.vocab, 32)
    result = bert.evaluate_pretraining(Copier(len(corpus.vocab)), data, corpus.vocab, rounds=1)
    assert result["mlm"] == 0.0  # it is shown [MASK] everywhere it must predict
    assert 0.03 < result["baseline"] < result["baseline top-5"] < 0.5
    short = bert.encode(bert.nsp_pairs(docs, random.Random(0)), corpus.vocab, 12)
    result = bert.evaluate_pretraining(tiny_model(len(corpus.vocab)), short, corpus.vocab)
    assert result["mlm"] <= result["mlm top-5"] and result["predictions"] > 1000
    with pytest.raises(ValueError, match="max_len=12"):
        bert.evaluate_pretraining(tiny_model(len(corpus.vocab)), data, corpus.vocab)


def test_sentence_features_average_only_the_sentence_tokens():
    class Echo(torch.nn.Module):  # the "encoder output" of a token is its id
        def forward(self, tokens, segments, valid_lens):
            return tokens.float()[..., None]
    data = (torch.tensor([[2, 10, 20, 3, 0], [2, 7, 3, 0, 0]]), torch.zeros(2, 5, dtype=int),
            torch.tensor([4, 3]))
    cls, mean = bert.sentence_features(Echo(), data, "cpu")
    assert cls.flatten().tolist() == [2, 2] and mean.flatten().tolist() == [15, 7]


def test_standardise_uses_the_reference_statistics():
    reference = torch.randn(500, 3) * torch.tensor([1.0, 10.0, 0.01]) + 5
    Z = bert.standardise(reference, reference)
    assert torch.allclose(Z.mean(0), torch.zeros(3), atol=1e-4)
    assert torch.allclose(Z.std(0), torch.ones(3), atol=1e-4)
    assert torch.allclose(bert.standardise(reference[:2], reference), Z[:2])


def test_bag_of_words_marks_ordinary_tokens_only(corpus):
    vocab = corpus.vocab
    data = bert.encode([(["the", "the", "if"], None, 0)], vocab, 8)
    X = bert.bag_of_words(data, vocab)
    assert X.shape == (1, len(vocab)) and X.sum() == 2
    assert X[0, vocab["the"]] == 1 and X[0, vocab["if"]] == 1


def test_logistic_regression_fits_separable_data_and_matches_its_optimality_condition():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[3.0, 0], [0, 3], [-3, -3]])
    y = torch.arange(3).repeat(40)
    X = centres[y] + torch.randn(120, 2, generator=g)
    assert bert.probe_accuracy(X, y, X, y, num_classes=3) > 0.95
    assert bert.probe_accuracy(X[:60], y[:60], X[60:], y[60:], num_classes=3) > 0.9


def test_labelled_subsets_are_nested_and_without_repeats():
    small, large = bert.labelled_subset(100, 10, seed=3), bert.labelled_subset(100, 40, seed=3)
    assert small.tolist() == large[:10].tolist() and len(set(large.tolist())) == 40
    assert bert.labelled_subset(100, 10, seed=4).tolist() != small.tolist()


def test_trimming_padding_changes_no_output():
    model = tiny_model()
    classifier = bert.BERTClassifier(model, num_classes=3).eval()
    tokens = torch.randint(5, 50, (2, 12))
    tokens[:, 7:] = 0
    segments, valid_lens = torch.zeros(2, 12, dtype=torch.long), torch.tensor([7, 5])
    full = classifier(tokens, segments, valid_lens)
    trimmed = classifier(*bert.trim_padding(tokens, segments, valid_lens))
    assert trimmed.shape == full.shape and torch.allclose(trimmed, full, atol=1e-6)


def test_finetune_runs_the_given_number_of_steps_and_learns():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(5, 50, (40, 6), generator=g)
    y = (tokens[:, 1] >= 27).long()                    # the class is read off one token
    data = (tokens, torch.zeros_like(tokens), torch.full((40,), 6), y)
    classifier = bert.BERTClassifier(tiny_model(), num_classes=2)
    losses = bert.finetune(classifier, data, num_steps=60, lr=3e-3, device="cpu",
                           batch_size=16)
    assert len(losses) == 60 and sum(losses[-10:]) < sum(losses[:10])


# -- Chapter 8's prose ---------------------------------------------------------------------

def quoted_examples(markdown):
    """The examples a text quotes in double quotes ("the [MASK] statement", "return"),
    with `[MASK]` written as code; quotes of the quotation mark itself (`"`) are skipped."""
    text = re.sub(r"`(\[MASK\])`", r"\1", markdown)
    text = re.sub(r"`[^`\n]*`", " ", text)                 # other inline code is not prose
    return re.findall(r'"([^"\n]{1,80})"', text)


def test_quoted_examples_skip_code_and_keep_mask():
    text = 'always `"`; in "the `[MASK]` statement" the word "for" and `x = "y"`'
    assert quoted_examples(text) == ["the [MASK] statement", "for"]


def test_every_example_word_in_chapter_8s_prose_is_in_the_vocabulary(corpus):
    """A word the model does not know would be [UNK]: the text must not build on one.
    Excepted: WordPiece's example ("tokenizer" -> "token", "##izer"), the names of the
    masking shares ("random", "unchanged") and the paper's sizes."""
    from conftest import ROOT, read_notebook, source
    nb = read_notebook(ROOT / "chapters" / "08_bert.ipynb")
    markdown = "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    examples = [e for e in quoted_examples(markdown)
                if e not in {"tokenizer", "token", "##izer", "random", "unchanged"}
                and not re.search(r"\d", e)]
    assert len(examples) > 10
    unknown = {t for e in examples for t in bert.tokenize(e)
               if corpus.vocab[t] == corpus.vocab.unk}
    assert not unknown, f"chapter 8 quotes words the vocabulary does not have: {unknown}"
