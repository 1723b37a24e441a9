"""Parity with PyTorch for the language-model loss as the lectures write it: the position losses
summed (reduction="sum") rather than averaged, and a decoder-only LM with the causal mask switched
off (the leakage demonstration). Same tolerances as test_parity_torch."""
import pytest

torch = pytest.importorskip("torch")

import minitf.functional as F  # noqa: E402
import minitf.models as models  # noqa: E402
from minitf import backend  # noqa: E402
from test_parity_torch import (TorchLM, assert_close, compare_gradients, copy_weights,  # noqa: E402
                               dtype, encoder_map, norm_map, torch_module, torch_tensor)  # noqa: F401


def torch_targets(targets):
    return torch.from_numpy(backend.to_numpy(targets)).reshape(-1)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_summed(dtype, label_smoothing):
    logits = backend.randn(3, 5, 9)
    targets = backend.randint(0, 9, (3, 5))
    targets[0, :2] = targets[2, 4] = -100
    loss, cache = F.cross_entropy(logits, targets, label_smoothing=label_smoothing,
                                  reduction="sum")
    t = torch_tensor(logits, requires_grad=True)
    loss_torch = torch.nn.functional.cross_entropy(
        t.reshape(-1, 9), torch_targets(targets), ignore_index=-100,
        label_smoothing=label_smoothing, reduction="sum")
    assert_close(loss, loss_torch, dtype, "summed loss")
    loss_torch.backward(torch.tensor(0.7, dtype=t.dtype))
    assert_close(F.cross_entropy_backward(0.7, cache), t.grad, dtype, "gradient of logits")


class TorchLeakyLM(TorchLM):
    """TorchLM with no mask at all: every position attends to every other one."""

    def forward(self, ids):
        x = self.tok(ids) + self.pos[:ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.tok.weight.T


def test_a_decoder_lm_without_the_causal_mask_and_a_summed_loss(dtype):
    theirs = torch_module(TorchLeakyLM(11, 8, 2, 2, 16, 7), dtype)
    ours = models.DecoderLM(11, 8, 2, 2, 16, max_len=7, causal=False)
    mapping = {"tok_emb.W": (theirs.tok.weight, None), "pos_emb.W": (theirs.pos, None),
               **norm_map("norm.", theirs.norm)}
    for i, block in enumerate(theirs.blocks):
        mapping.update({f"blocks.blocks.{i}.{k}": v for k, v in encoder_map(block).items()})
    copy_weights(ours, mapping)

    ids = backend.randint(0, 11, (3, 7))
    x, y = ids[:, :-1], ids[:, 1:]
    loss, cache = F.cross_entropy(ours(x), y, reduction="sum")
    ours.backward(F.cross_entropy_backward(1.0, cache))
    loss_torch = torch.nn.functional.cross_entropy(
        theirs(torch.from_numpy(backend.to_numpy(x))).reshape(-1, 11), torch_targets(y),
        reduction="sum")
    loss_torch.backward()
    assert_close(loss, loss_torch, dtype, "summed loss")
    compare_gradients(ours, mapping, dtype)
