"""``minitf.nn.no_grad()``: a forward that keeps nothing for a backward gives the same outputs to
the last bit, leaves no layer holding a cache, refuses a backward in one line, and ends where it
is left, even by an error; generation and validation run under it."""
import threading

import numpy as np
import pytest

import minitf.models as models
import minitf.nn as nn
from minitf import backend
from minitf.generate import generate
from minitf.nn.module import _KEPT_NOTHING, _NO_CACHE


def _families():
    """(a model, its inputs) for a model of each kind a forward differs in."""
    ids = backend.randint(1, 12, (2, 6))
    yield models.DecoderLM(12, 16, 2, 2, max_len=8, positional="rope", activation="gelu"), (ids,)
    yield models.DecoderLM(12, 16, 2, 1, max_len=8, positional="relative"), (ids,)
    yield models.Transformer(12, 12, 16, 2, 1, dropout=0.0), (ids, ids)
    yield models.EncoderClassifier(12, 3, 16, 2, 1, max_len=6), (ids,)
    yield models.RNNLM(12, 16, cell="lstm"), (ids,)


@pytest.mark.parametrize("index", range(5))
def test_a_forward_under_no_grad_is_the_same_and_keeps_nothing(backend_name, index):
    model, inputs = list(_families())[index]
    model.eval()
    kept = backend.to_numpy(model(*inputs)).copy()
    with nn.no_grad():
        assert not nn.grad_enabled()
        free = backend.to_numpy(model(*inputs))
    assert nn.grad_enabled()
    np.testing.assert_array_equal(free, kept)
    holding = [type(m).__name__ for m in model.modules()
               if m._cache is not _NO_CACHE and m._cache is not _KEPT_NOTHING]
    assert holding == [], f"caches kept under no_grad: {holding}"
    with pytest.raises(RuntimeError, match=rf"^{type(model).__name__}\.backward\(\): the last "
                                           r"forward ran under minitf\.nn\.no_grad\(\), which "
                                           r"keeps nothing for a backward"):
        model.backward(backend.randn(*free.shape))


def test_a_layer_run_under_no_grad_refuses_its_backward_and_trains_after_it(backend_name):
    layer = nn.Linear(3, 2)
    x, dy = backend.randn(4, 3), backend.randn(4, 2)
    with nn.no_grad():
        layer(x)
    with pytest.raises(RuntimeError, match=r"^Linear\.backward\(\): the last forward ran under"):
        layer.backward(dy)
    layer(x)                                           # outside it: kept, and trained as ever
    dx = layer.backward(dy)
    np.testing.assert_allclose(backend.to_numpy(dx), backend.to_numpy(dy @ layer.W.data.T),
                               rtol=1e-6)


def test_no_grad_ends_where_it_is_left_nested_on_an_error_and_per_thread():
    with nn.no_grad():
        with nn.no_grad():
            pass
        assert not nn.grad_enabled()                    # the inner one gave back what it found
        seen = []
        other = threading.Thread(target=lambda: seen.append(nn.grad_enabled()))
        other.start()
        other.join()
        assert seen == [True]                           # another thread trains on
    with pytest.raises(ValueError):
        with nn.no_grad():
            raise ValueError("a forward that failed")
    assert nn.grad_enabled()


def test_generation_and_validation_keep_nothing_and_leave_training_on(backend_name):
    from minitf import data
    from minitf.optim import AdamW
    from minitf.train import Trainer
    lm = models.DecoderLM(12, 16, 2, 2, max_len=8)
    ids = np.arange(120) % 12
    seen = []

    def evaluate():
        seen.append(nn.grad_enabled())
        return 1.0
    trainer = Trainer(lm, AdamW(lm), lambda: data.random_windows(ids, 2, 8), evaluate=evaluate,
                      eval_every=1)
    trainer.fit(2, progress=False)
    assert seen == [False, False] and nn.grad_enabled()
    generate(lm, backend.to_device(np.array([[1, 2]])), 3, greedy=True,
             on_token=lambda _: seen.append(nn.grad_enabled()))
    assert seen[2:] == [False] * 3 and nn.grad_enabled()
    assert all(m._cache is _NO_CACHE or m._cache is _KEPT_NOTHING for m in lm.modules())
