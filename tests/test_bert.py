"""BERT's pieces: masked tokens (exact properties and the 15 % / 80-10-10 rates), the
bidirectional EncoderLM (every token sees every token, padding changes nothing, only masked
positions are scored), segment ids for sentence pairs, and a masked LM that learns."""
import math

import numpy as np

import minitf.functional as F
from minitf import backend, data
from minitf.models import DecoderLM, EncoderClassifier, EncoderLM
from minitf.optim import AdamW

PAD, MASK, CLS, SEP = 0, 1, 2, 3
SPECIAL = (PAD, CLS, SEP)                   # MASK is always special


def _batch(b=4, n=12, vocab=20):
    ids = backend.to_numpy(backend.randint(4, vocab, (b, n)))
    ids[:, 0], ids[:, -1], ids[1, 8:] = CLS, SEP, PAD
    return ids


def test_mask_tokens_exact_properties(backend_name):
    ids = backend.to_device(_batch())
    inputs, targets = data.mask_tokens(ids, MASK, 20, p=0.5, special_ids=SPECIAL, seed=1)
    ids, inputs, targets = (backend.to_numpy(a) for a in (ids, inputs, targets))
    chosen = targets != -100
    assert inputs.shape == targets.shape == ids.shape and chosen.any()
    assert (targets[chosen] == ids[chosen]).all()            # the original token is the target
    assert not np.isin(ids[chosen], SPECIAL + (MASK,)).any()    # specials are never chosen
    assert (inputs[~chosen] == ids[~chosen]).all()           # unchosen inputs are unchanged
    again = data.mask_tokens(backend.to_device(ids), MASK, 20, p=0.5, special_ids=SPECIAL, seed=1)
    assert (backend.to_numpy(again[0]) == inputs).all()      # a seed gives the same draws


def test_mask_tokens_rates_are_15_percent_and_80_10_10():
    backend.seed(0)
    vocab = 50
    ids = _batch(400, 250, vocab)                            # ~ 90,000 ordinary positions
    inputs, targets = data.mask_tokens(ids, MASK, vocab, special_ids=SPECIAL)
    ordinary = ~np.isin(ids, SPECIAL)
    chosen = targets != -100
    k = chosen.sum()
    assert abs(k / ordinary.sum() - 0.15) < 0.005            # ± 4 standard deviations
    masked = (inputs == MASK) & chosen
    kept = (inputs == ids) & chosen
    changed = chosen & ~masked & ~kept                        # a random token, not the original
    # a random token equals the original 1 time in 46 (46 ordinary ids): those count as kept
    assert abs(masked.sum() / k - 0.80) < 0.015
    assert abs(changed.sum() / k - 0.10 * 45 / 46) < 0.012
    assert abs(kept.sum() / k - (0.10 + 0.10 / 46)) < 0.012
    assert not np.isin(inputs[changed], SPECIAL + (MASK,)).any()   # random tokens are words


def test_the_encoder_lm_is_bidirectional_and_the_decoder_is_not(float64):
    ids = backend.randint(1, 11, (1, 6))
    later = ids.copy()
    later[0, 5] = 1 + ids[0, 5] % 10                          # change the last token only
    for model, first_changes in ((EncoderLM(11, 8, 2, 2, max_len=6), True),
                                 (DecoderLM(11, 8, 2, 2, max_len=6), False)):
        moved = np.abs(backend.to_numpy(model(ids) - model(later)))[0, 0].max()
        assert (moved > 1e-6) == first_changes, type(model).__name__


def test_padding_changes_nothing_at_the_real_tokens(float64):
    model = EncoderLM(11, 8, 2, 2, max_len=8, n_segments=2)
    ids = backend.to_device(np.array([[4, 5, 6, 7, 0, 0]]))
    segments = backend.to_device(np.array([[0, 0, 1, 1, 0, 0]]))
    short = model(ids[:, :4], segments[:, :4])
    padded = model(ids, segments)
    assert np.abs(backend.to_numpy(short - padded[:, :4])).max() < 1e-12


def test_only_the_chosen_positions_are_scored(float64):
    model = EncoderLM(11, 8, 2, 1, max_len=6)
    ids = backend.randint(1, 11, (2, 6))
    targets = backend.to_numpy(ids).copy()
    targets[:, ::2] = -100
    loss, backward = model.loss(ids, backend.to_device(targets))
    model.zero_grad()
    backward()                           # before the forward below, which replaces its caches
    assert np.abs(backend.to_numpy(model.tok_emb.W.grad)).max() > 0
    logits = backend.to_numpy(model(ids))[:, 1::2]            # the scored positions only
    by_hand, _ = F.cross_entropy(logits, targets[:, 1::2])
    assert abs(loss - float(by_hand)) < 1e-12


def test_segment_ids_change_the_output_and_default_to_segment_zero(float64):
    model = EncoderClassifier(11, 2, 8, 2, 1, n_segments=2)
    ids = backend.randint(1, 11, (1, 5))
    zeros = backend.to_device(np.zeros((1, 5), dtype=np.int64))
    ones = backend.to_device(np.ones((1, 5), dtype=np.int64))
    assert np.abs(backend.to_numpy(model(ids) - model(ids, zeros))).max() == 0
    assert np.abs(backend.to_numpy(model(ids) - model(ids, ones))).max() > 1e-6


def test_a_classifier_without_segments_keeps_its_config_and_parameter_names():
    model = EncoderClassifier(11, 2, 8, 2, 1)
    assert "n_segments" not in model.config
    assert [n for n, _ in model.named_parameters()][0] == "tok_emb.W"
    assert not any("segment" in n for n, _ in model.named_parameters())


def test_sentence_pairs_are_a_sep_b_sep_with_segments():
    backend.seed(0)
    pairs, labels = data.sentence_pairs(50)
    vocab = data.WordVocabulary([s for pair in pairs for s in pair], specials=("[SEP]",))
    ids, segments = vocab.encode_pairs(pairs)
    sep = vocab.index["[SEP]"]
    assert vocab.words[:2] == ["<pad>", "[SEP]"] and set(labels.tolist()) == {0, 1}
    for (a, b), row, seg in zip(pairs, ids, segments):
        n_a, n_b = len(a.split()), len(b.split())
        assert row[n_a] == sep and row[n_a + n_b + 1] == sep and (row[n_a + n_b + 2:] == 0).all()
        assert (seg[:n_a + 1] == 0).all() and (seg[n_a + 1:n_a + n_b + 2] == 1).all()
        assert (seg[n_a + n_b + 2:] == 0).all()


def test_masked_lm_pretraining_learns_more_than_word_frequencies():
    """A short run on the sentiment sentences: at [MASK]ed positions the model must beat the best
    guess that ignores the context (the words' unigram entropy), itself far below log V."""
    backend.seed(0)
    sentences, _ = data.sentiment(1200)
    vocab = data.WordVocabulary(sentences, specials=("[MASK]",))
    mask_id, V = vocab.index["[MASK]"], vocab.vocab_size
    ids, _ = vocab.encode(sentences)
    train, held_out = ids[:1000], ids[1000:]
    counts = np.bincount(train[train > mask_id], minlength=V)[mask_id + 1:]
    unigram = float(-(counts / counts.sum() * np.log(counts / counts.sum())).sum())
    model = EncoderLM(V, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=ids.shape[1])
    optimizer = AdamW(model, 1e-2)
    for _ in range(150):
        rows = backend.to_numpy(backend.randint(0, len(train), (32,)))
        inputs, targets = data.mask_tokens(train[rows], mask_id, V, special_ids=(0,))
        model.zero_grad()
        _, backward = model.loss(backend.to_device(inputs), backend.to_device(targets))
        backward()
        optimizer.step()
    _, targets = data.mask_tokens(held_out, mask_id, V, p=0.3, special_ids=(0,), seed=1)
    inputs = np.where(targets != -100, mask_id, held_out)    # every chosen word hidden
    loss, _ = model.loss(backend.to_device(inputs), backend.to_device(targets))
    print(f"held-out masked loss {loss:.3f}, unigram {unigram:.3f}, log V {math.log(V):.3f}")
    assert unigram < math.log(V) - 0.3
    assert loss < unigram - 1.0                              # 1.65 against 3.46 nats


def test_random_replacements_are_drawn_from_every_ordinary_id():
    """The 10 % random tokens are drawn from the non-special ids: all of them came out as one
    and the same id (the first ordinary one), and the rate tests passed."""
    backend.seed(0)
    ids = _batch(100, 100, 20)                               # ordinary ids 4 … 19
    inputs, targets = data.mask_tokens(ids, MASK, 20, p=0.9, special_ids=SPECIAL)
    chosen = targets != -100
    changed = chosen & (inputs != MASK) & (inputs != ids)    # ~ 800 random tokens, 16 ids
    assert changed.sum() > 500
    assert set(inputs[changed].tolist()) == set(range(4, 20)), "every ordinary id, no special"


def test_a_sentence_pair_is_labelled_1_when_both_sentences_agree():
    """label 1 = both positive or both negative, 0 = one of each: the labels were the other
    way round. Seed 0's first pairs, read by hand, and the sentiment of each sentence."""
    with backend.seed(0):
        pairs, labels = data.sentence_pairs(200)
    with backend.seed(0):
        sentences, sentiment = data.sentiment(400)          # the sentences the pairs are made of
    assert pairs[:2] == [("nobody loves this movie",                          # both negative
                          "the critic really does avoid this long book"),
                         ("no one i know enjoys this long book",              # one of each
                          "my kid enjoys this book")]
    assert labels[:4].tolist() == [1, 0, 0, 1]
    assert pairs == list(zip(sentences[0::2], sentences[1::2]))
    assert (labels == (sentiment[0::2] == sentiment[1::2])).all()
    assert labels.dtype == np.int64 and 0.3 < labels.mean() < 0.7
