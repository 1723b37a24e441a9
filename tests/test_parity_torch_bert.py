"""Parity with PyTorch for BERT's masked language model: EncoderLM (token, segment and learned
position embeddings, pre-LN encoder blocks without a causal mask, padding masked as keys, a final
LayerNorm and an output head tied to the token embedding) against the same model assembled from
torch.nn.TransformerEncoderLayer, with the masked-LM loss. Same tolerances as test_parity_torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minitf import backend  # noqa: E402
from minitf.models import EncoderLM  # noqa: E402
from test_parity_torch import (assert_close, compare_gradients, copy_weights,  # noqa: E402
                               dtype, encoder_map, norm_map, torch_module,  # noqa: F401
                               torch_tensor)


def test_encoder_lm_masked_loss_and_every_gradient_match_torch(dtype):
    V, d, n_segments, max_len = 11, 8, 2, 6
    ours = EncoderLM(V, d_model=d, n_heads=2, n_layers=2, d_ff=16, max_len=max_len,
                     n_segments=n_segments, activation="gelu_exact")
    layers = [torch_module(torch.nn.TransformerEncoderLayer(
        d, 2, 16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True), dtype)
        for _ in range(2)]
    final_norm = torch_module(torch.nn.LayerNorm(d), dtype)
    tables = {name: torch_tensor(backend.randn(*shape), requires_grad=True) for name, shape in
              (("tok_emb.W", (V, d)), ("tok_emb.segment.W", (n_segments, d)),
               ("pos_emb.W", (max_len, d)))}
    mapping = {name: (t, None) for name, t in tables.items()}
    for i, layer in enumerate(layers):
        mapping.update({f"blocks.blocks.{i}.{k}": v for k, v in encoder_map(layer).items()})
    mapping.update(norm_map("norm.", final_norm))
    copy_weights(ours, mapping)

    ids = np.array([[2, 5, 7, 3, 9], [4, 8, 6, 0, 0]])         # the second row padded
    segments = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
    targets = np.array([[-100, 5, -100, -100, 9], [4, -100, 6, -100, -100]])
    loss, backward = ours.loss(*(backend.to_device(a) for a in (ids, targets, segments)))
    ours.zero_grad()
    backward()

    t_ids, t_segments = torch.from_numpy(ids), torch.from_numpy(segments)
    x = (tables["tok_emb.W"][t_ids] + tables["tok_emb.segment.W"][t_segments]
         + tables["pos_emb.W"][:ids.shape[1]])
    for layer in layers:
        x = layer(x, src_key_padding_mask=t_ids == 0)
    logits = final_norm(x) @ tables["tok_emb.W"].T                # the tied head
    theirs = torch.nn.functional.cross_entropy(logits.reshape(-1, V),
                                               torch.from_numpy(targets).reshape(-1))
    theirs.backward()
    assert_close(np.array(loss), theirs, dtype, "masked-LM loss")
    compare_gradients(ours, mapping, dtype)
