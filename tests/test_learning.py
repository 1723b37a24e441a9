"""Each model family learns its task in seconds on a CPU (the lectures' three families + ViT).
Marked slow: they train for a few hundred steps. Deselect with ``-m "not slow"``."""
import numpy as np
import pytest

from minitf import backend, data
from minitf.generate import beam_search, greedy_decode
from minitf.models import EncoderClassifier, Transformer, VisionTransformer
from minitf.optim import AdamW, WarmupCosine
from minitf.train import Trainer

pytestmark = pytest.mark.slow


def _fit(model, arrays, steps, lr, batch_size=64):
    """Train on random mini-batches of ``arrays`` (inputs…, targets), all on the host."""
    def batches():
        rows = backend.to_numpy(backend.randint(0, len(arrays[-1]), (batch_size,)))
        return tuple(backend.to_device(a[rows]) for a in arrays)
    trainer = Trainer(model, AdamW(model, lr, weight_decay=0.01), batches,
                      schedule=WarmupCosine(lr, 20, steps, lr / 10))
    trainer.fit(steps, progress=False)
    model.eval()
    return trainer


def test_the_encoder_decoder_learns_to_reverse():
    backend.seed(0)
    src, tgt_in, tgt_out = data.seq2seq_task("reverse", 3000, n_symbols=8, min_len=3, max_len=6)
    model = Transformer(11, 11, d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.0)
    _fit(model, (src[:2800], tgt_in[:2800], tgt_out[:2800]), 300, 5e-3)
    held_out = src[2800:2900]
    wanted = [list(s[s != data.PAD][::-1]) for s in held_out]
    greedy = greedy_decode(model, held_out, max_len=8)
    assert np.mean([g == w for g, w in zip(greedy, wanted)]) > 0.9
    beams = beam_search(model, held_out[:20], beam_size=3, max_len=8)
    assert np.mean([b == w for b, w in zip(beams, wanted[:20])]) > 0.9


def test_the_classifier_reads_negation_that_a_bag_of_words_cannot():
    backend.seed(0)
    sentences, labels = data.sentiment(3000)
    vocab = data.WordVocabulary(sentences)
    ids, _ = vocab.encode(sentences)
    model = EncoderClassifier(vocab.vocab_size, 2, d_model=32, n_heads=2, n_layers=2, d_ff=64,
                              max_len=ids.shape[1])
    _fit(model, (ids[:2500], labels[:2500]), 200, 3e-3)
    predicted = backend.to_numpy(model(backend.to_device(ids[2500:])).argmax(axis=-1))
    assert (predicted == labels[2500:]).mean() > 0.95     # a bag of words: < 75 % (test_data)


def test_the_vision_transformer_reads_digits():
    pytest.importorskip("sklearn")
    backend.seed(0)
    images, labels = data.digits()
    model = VisionTransformer(8, 4, 10, d_model=32, n_heads=2, n_layers=2, d_ff=64)
    _fit(model, (images[:1500], labels[:1500]), 200, 3e-3)
    predicted = backend.to_numpy(model(backend.to_device(images[1500:])).argmax(axis=-1))
    assert (predicted == labels[1500:]).mean() > 0.85
