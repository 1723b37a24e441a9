"""The cost model of every family agrees with the model itself: parameter counts with
num_parameters(), attention scores with the shapes of the probabilities the layers kept,
sequential steps and the carried state with what the recurrent model does."""
import re

import pytest

from minitf import backend, cli
from minitf.cost import lm_cost
from minitf.cost_families import (describe_cost, encoder_cost, layer_comparison, rnn_cost,
                                  seq2seq_cost, seq2seq_cost_of)
from minitf.models import RNNLM, EncoderClassifier, Transformer, VisionTransformer

from test_bad_input import raises


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_the_recurrent_count_is_the_models(cell):
    model = RNNLM(23, 8, 11, cell=cell, max_len=9)
    cost = rnn_cost(23, 8, 11, cell, context=9, batch_size=3)
    assert cost["parameters"] == model.num_parameters()
    cache = model.new_cache()
    model(backend.randint(0, 23, (3, 9)), cache=cache)
    carried = cache[0].h.size + (cache[0].c.size if cell == "lstm" else 0)
    assert cost["state_numbers"] == carried                  # b·d_h (and c): not growing with n
    assert cost["sequential_steps"] == 9 and cost["path_length"] == 8


def test_the_lectures_layer_table():
    n, d = 512, 64
    rows = layer_comparison(n, d)
    attention, recurrent = rows["self-attention"], rows["recurrent"]
    assert attention["flops"] == 4 * n * n * d and recurrent["flops"] == 4 * n * d * d
    assert attention["flops"] == (n // d) * recurrent["flops"]            # O(n²d) vs O(nd²)
    assert (attention["sequential_steps"], recurrent["sequential_steps"]) == (1, n)
    assert (attention["path_length"], recurrent["path_length"]) == (1, n - 1)


@pytest.mark.parametrize("pre_ln, shared", [(False, False), (True, True)])
def test_the_encoder_decoder_count_and_its_three_attention_terms(pre_ln, shared):
    b, N, M, L, h = 2, 7, 4, 2, 2
    model = Transformer(9, 9, d_model=8, n_heads=h, n_layers=L, d_ff=12, pre_ln=pre_ln,
                        share_embeddings=shared)
    cost = seq2seq_cost(N, M, 9, 9, 8, h, L, 12, pre_ln, shared, batch_size=b)
    assert seq2seq_cost_of(model.config, N, M, b) == cost
    assert cost["parameters"] == model.num_parameters()
    model(backend.randint(1, 9, (b, N)), backend.randint(1, 9, (b, M)))
    probs = {"encoder self-attention": [blk.self_attn.layer.probs for blk in model.encoder.blocks],
             "decoder self-attention": [blk.self_attn.layer.probs for blk in model.decoder.blocks],
             "cross-attention": [blk.cross_attn.layer.probs for blk in model.decoder.blocks]}
    for kind, kept in probs.items():
        assert cost["attention_scores"][kind] == sum(p.size for p in kept), kind
    # q kᵀ and P v: 2 · 2 · d FLOPs per score and head width, summed over the heads
    assert all(cost["attention_flops"][k] == 4 * 8 * cost["attention_scores"][k] // h
               for k in probs)
    assert cost["attention_scores"]["cross-attention"] ** 2 == \
        cost["attention_scores"]["encoder self-attention"] \
        * cost["attention_scores"]["decoder self-attention"]                 # (MN)² = N²·M²


def test_the_cls_encoders_counts_are_the_models():
    text = EncoderClassifier(13, 3, d_model=8, n_heads=2, n_layers=2, d_ff=12, max_len=6)
    image = VisionTransformer(8, 4, 5, channels=3, d_model=8, n_heads=2, n_layers=1, d_ff=12)
    assert encoder_cost(6, 8, 2, 2, 12, 3, 13 * 8)["parameters"] == text.num_parameters()
    assert encoder_cost(4, 8, 2, 1, 12, 5, (4 * 4 * 3 + 1) * 8)["parameters"] \
        == image.num_parameters()
    text(backend.randint(1, 13, (2, 6)))
    scores = sum(blk.self_attn.layer.probs.size for blk in text.encoder.blocks)
    assert encoder_cost(6, 8, 2, 2, 12, 3, 13 * 8, batch_size=2)["attention_scores"] == scores


@pytest.mark.parametrize("model", [
    RNNLM(11, 8, cell="lstm", max_len=16), Transformer(9, 7, d_model=8, n_heads=2, n_layers=1),
    EncoderClassifier(9, 2, d_model=8, n_heads=2, n_layers=1),
    VisionTransformer(8, 4, 3, d_model=8, n_heads=2, n_layers=1)], ids=lambda m: m.kind)
def test_info_reads_a_checkpoint_of_every_family(model, tmp_path, capsys):
    from minitf import checkpoint
    checkpoint.save(tmp_path, model)
    assert cli.main(["info", "--checkpoint", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(type(model).__name__) and f"{model.num_parameters():,}" in out, out
    assert describe_cost(model.kind, model.config).splitlines()[0] in out


def test_bad_input_is_one_line():
    with pytest.raises(ValueError, match="rnn_cost: cell must be one of"):
        rnn_cost(10, 8, cell="gru")
    with pytest.raises(ValueError, match="seq2seq_cost: tgt_len must be a positive integer"):
        seq2seq_cost(5, 0, 9, 9)
    with pytest.raises(ValueError, match="describe_cost: unknown model kind 'cnn'"):
        describe_cost("cnn", {})


@pytest.mark.parametrize("call, message", [
    (lambda: lm_cost(100, 64, -2), "lm_cost: n_layers must be an integer ≥ 0"),
    (lambda: lm_cost(100, 64, 2, context=-1), "lm_cost: context must be an integer ≥ 0"),
    (lambda: lm_cost(100, 64, 2, bytes_per_number="4"), "lm_cost: bytes_per_number must be a positive integer; got '4'"),
    (lambda: rnn_cost(100, -32), "rnn_cost: d_model must be a positive integer; got -32"),
    (lambda: seq2seq_cost(4, 4, 20, 30, share_embeddings=True), "seq2seq_cost: share_embeddings needs one vocabulary"),
    (lambda: encoder_cost(4, -32, 4, 2, 64, 2, 100), "encoder_cost: d_model must be a positive integer"),
])
def test_a_cost_of_a_model_that_cannot_exist_is_refused(call, message):
    """Each gave a negative count of parameters or bytes (or '4' repeated 262,144 times)."""
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        call()


# -- bad input: one line naming the function, the argument, what it got and what it wanted ---------

SEQ2SEQ = Transformer(9, 9, d_model=8, n_heads=2, n_layers=1).config
VIT = VisionTransformer(8, 4, 3, d_model=8, n_heads=2, n_layers=1).config
LM_CONFIG = dict(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                 positional="learned", tie_weights=True, pre_ln=True)


@pytest.mark.parametrize("call, error, fragments", [
    (lambda: describe_cost("lm", {}), ValueError,
     ["describe_cost: config lacks 'vocab_size'", "'tie_weights'", "a DecoderLM"]),
    (lambda: describe_cost("seq2seq", LM_CONFIG), ValueError,
     ["describe_cost: config lacks 'src_vocab_size', 'tgt_vocab_size'", "a Transformer"]),
    (lambda: describe_cost("rnn", "rnn.json"), TypeError, ["describe_cost: config is a str"]),
    (lambda: describe_cost("lm", dict(LM_CONFIG, dropuot=0.1)), ValueError,
     ["describe_cost: config has 'dropuot', which DecoderLM does not take"]),
    (lambda: describe_cost(["lm"], LM_CONFIG), ValueError,
     ["describe_cost: unknown model kind ['lm']; wanted one of ('lm', 'rnn'"]),
    (lambda: describe_cost("seq2seq", SEQ2SEQ, context=0), ValueError,
     ["describe_cost: context must be a positive integer; got 0"]),
    (lambda: describe_cost("lm", LM_CONFIG, bytes_per_number=-2), ValueError,
     ["describe_cost: bytes_per_number must be a positive integer; got -2"]),
    (lambda: describe_cost("vit", dict(VIT, patch_size=0)), ValueError,
     ["describe_cost: config['patch_size'] must be a positive integer; got 0"]),
    (lambda: describe_cost("vit", dict(VIT, image_size=10)), ValueError,
     ["describe_cost: config['image_size']=10 is not a multiple of config['patch_size']=4"]),
    (lambda: seq2seq_cost_of({}, 4, 4), ValueError,
     ["seq2seq_cost_of: config lacks 'src_vocab_size'"]),
    (lambda: seq2seq_cost_of(SEQ2SEQ, 0, 4), ValueError,
     ["seq2seq_cost_of: src_len must be a positive integer; got 0"]),
    (lambda: seq2seq_cost(4, 4, 9, 9, pre_ln="no"), ValueError,
     ["seq2seq_cost: pre_ln must be True or False; got 'no'"]),
    (lambda: seq2seq_cost(4, 4, 9, 9, d_model=64, n_heads=3), ValueError,
     ["seq2seq_cost: d_model=64 is not divisible by n_heads=3"]),
    (lambda: encoder_cost(16, 32, 4, 2, 64, 10, None), ValueError,
     ["encoder_cost: embedding_parameters must be an integer ≥ 0", "got None"]),
    (lambda: encoder_cost(16, 32, 4, 2, 64, 10, -1000), ValueError,
     ["encoder_cost: embedding_parameters must be an integer ≥ 0", "got -1000"]),
    (lambda: encoder_cost(16, 32, 3, 2, 64, 10, 1000), ValueError,
     ["encoder_cost: d_model=32 is not divisible by n_heads=3"]),
])
def test_bad_input_to_the_family_costs_is_one_line(call, error, fragments):
    """Each was a bare KeyError, TypeError or ZeroDivisionError, a message naming an argument the
    caller never passed (src_len for describe_cost's context), or a cost of a model that cannot be
    built (a negative parameter count)."""
    with raises(error, *fragments):
        call()


def test_a_classifier_with_segments_counts_its_segment_table():
    model = EncoderClassifier(13, 3, d_model=8, n_heads=2, n_layers=1, max_len=6, n_segments=2)
    assert f"{model.num_parameters():,}" in describe_cost("classifier", model.config)


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("lstm", 4)])
def test_the_recurrent_flops_are_two_per_multiply_add_of_each_product(cell, gates):
    """Halved, or with the batch left out, no test saw it, and minitf info printed it."""
    V, d, d_h, n, b = 23, 8, 11, 9, 3
    cost = rnn_cost(V, d, d_h, cell, context=n, batch_size=b)
    # a token: x_t W_x (d × g·d_h), h_{t−1} W_h (d_h × g·d_h), the head h_t W (d_h × V)
    per_token = 2 * d * gates * d_h + 2 * d_h * gates * d_h + 2 * d_h * V
    assert cost["forward_flops_per_token"] == per_token
    assert cost["training_flops_per_step"] == 3 * per_token * b * n    # the backward: twice
    assert cost["decode_flops"] == b * per_token                        # one token a sequence
    one = rnn_cost(V, d, d_h, cell, context=n, batch_size=1)
    assert cost["training_flops_per_step"] == b * one["training_flops_per_step"]


def test_the_encoder_decoder_forward_flops_count_every_product_once():
    """Cross-attention's k and v of the memory (N·2d² per layer) were left out unseen."""
    b, N, M, d, L, d_ff, V = 2, 7, 4, 8, 2, 12, 9
    cost = seq2seq_cost(N, M, 9, V, d, 2, L, d_ff, batch_size=b)
    encoder = N * (2 * 4 * d * d + 2 * 2 * d * d_ff + 4 * N * d)     # q k v o, the FFN, scores
    decoder = M * (2 * 4 * d * d + 2 * 2 * d * d + 2 * 2 * d * d_ff   # self q k v o, cross q o
                   + 4 * M * d + 4 * N * d)                           # self and cross scores
    memory = N * 2 * 2 * d * d                                        # cross k, v of N tokens
    assert cost["forward_flops"] == b * (L * (encoder + decoder + memory) + M * 2 * d * V)
