"""The analytic cost model agrees with the lecture's formulas and with the real model."""
import pytest

from minitf import backend
from minitf.cost import (attention_table, block_parameters, format_cost, format_rows, format_table,
                         lm_cost, lm_cost_of, matmul_cost)
from minitf.models import DecoderLM
from minitf.nn import MultiHeadAttention
from minitf.models.lm import POSITIONAL

from test_bad_input import raises


@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("tie_weights", [True, False])
@pytest.mark.parametrize("pre_ln", [True, False])
def test_the_exact_count_is_the_models(positional, tie_weights, pre_ln):
    model = DecoderLM(50, 16, 2, 3, d_ff=40, max_len=12, positional=positional,
                      tie_weights=tie_weights, pre_ln=pre_ln)
    cost = lm_cost(50, 16, 3, 40, context=12, positional=positional, tie_weights=tie_weights,
                   n_heads=2, pre_ln=pre_ln)
    assert cost["parameters"] == model.num_parameters()
    assert lm_cost_of(model.config, batch_size=1) == cost


def test_the_lecture_formulas():
    d, d_ff, L, n, b = 512, 2048, 6, 1024, 8
    assert block_parameters(d, d_ff)["formula"] == 4 * d * d + 2 * d * d_ff
    cost = lm_cost(1000, d, L, d_ff, context=n, batch_size=b)
    assert cost["parameters_formula"] == L * (4 * d * d + 2 * d * d_ff)
    assert cost["kv_cache_numbers"] == 2 * L * b * n * d
    assert cost["kv_cache_bytes"] == 4 * cost["kv_cache_numbers"]
    # forward FLOPs per token: 2·(matmul weights) + attention 4·n·d per block, + the head
    assert cost["forward_flops_per_token"] == L * (2 * (4 * d * d + 2 * d * d_ff) + 4 * n * d) \
        + 2 * d * 1000
    # decoding: with the cache one token's forward; without it, the whole context again
    assert cost["decode_flops_uncached"] == n * cost["decode_flops_cached"]


def test_attention_cost_grows_with_n_squared_per_sequence():
    def attention_part(n):
        return lm_cost(10, 64, 1, 256, context=n)["forward_flops_per_token"] * n \
            - lm_cost(10, 64, 1, 256, context=0)["forward_flops_per_token"] * n
    assert attention_part(200) == 4 * attention_part(100)


# -- the per-operation table: FLOPs, IO, arithmetic intensity ---------------------------------------


def test_a_matmul_moves_its_inputs_and_its_output():
    # A (n×m) B (m×k): the output AB is n×k (one slide writes n×m)
    assert matmul_cost(3, 5, 7) == {"flops": 2 * 3 * 5 * 7, "io": 3 * 5 + 5 * 7 + 3 * 7}


def block_flops_per_token(n, d, h, d_ff):
    """lm_cost's forward FLOPs per token for one block, without the output head."""
    return lm_cost(10, d, 1, d_ff, context=n, n_heads=h)["forward_flops_per_token"] - 2 * d * 10


@pytest.mark.parametrize("decoding", [False, True])
def test_the_tables_matmuls_add_up_to_lm_cost(decoding):
    b, n, d, h, d_ff = 3, 40, 24, 4, 56
    table = attention_table(b, n, d, h, d_ff, decoding=decoding)
    matmuls = sum(r["flops"] for r in table["rows"] if r["matmul"])
    tokens = b if decoding else b * n
    assert matmuls == tokens * block_flops_per_token(n, d, h, d_ff)
    assert table["flops"] == sum(r["flops"] for r in table["rows"])
    assert table["intensity"] == table["flops"] / table["io"]


def test_the_lectures_rows_and_totals():
    b, n, d, h = 2, 64, 32, 4
    rows = {r["operation"]: r for r in attention_table(b, n, d, h)["rows"]}   # d_ff = 4d
    assert rows["x W_q, x W_k, x W_v"]["flops"] == 6 * b * n * d * d
    assert rows["x W_q, x W_k, x W_v"]["io"] == 3 * (2 * b * n * d + d * d)
    assert rows["scores Q Kᵀ"]["flops"] == rows["heads P V"]["flops"] == 2 * b * n * n * d
    assert rows["scores Q Kᵀ"]["io"] == 2 * b * n * d + b * h * n * n
    assert rows["FFN Y W_1"]["flops"] + rows["FFN φ(·) W_2"]["flops"] == 16 * b * n * d * d
    # softmax moves as many numbers as it computes with: far below the matmuls' intensity
    assert rows["softmax(S / √(d/h))"]["intensity"] < 4 < rows["FFN Y W_1"]["intensity"]
    # decoding: "one less n" -- the matmul FLOPs of a whole sequence are n times one token's
    full, one = attention_table(b, n, d, h), attention_table(b, n, d, h, decoding=True)
    assert sum(r["flops"] for r in full["rows"] if r["matmul"]) == n * sum(
        r["flops"] for r in one["rows"] if r["matmul"])
    assert full["attention_numbers"] == n * one["attention_numbers"] == b * h * n * n


def test_the_attention_matrix_is_the_modules_probs():
    b, n, d, h = 2, 9, 12, 3
    backend.seed(0)
    attention = MultiHeadAttention(d, h)
    attention.forward(backend.randn(b, n, d))
    table = attention_table(b, n, d, h)
    assert attention.probs.size == table["attention_numbers"]
    assert table["attention_bytes"] == 4 * attention.probs.size


def test_format_table_and_bad_input():
    text = format_table(attention_table(1, 128, 64, 4, decoding=True))
    assert text.startswith("next token, KV cache") and "total" in text and "512 numbers" in text
    with pytest.raises(ValueError, match="d=10 is not divisible by h=4"):
        attention_table(1, 8, 10, 4)
    with pytest.raises(ValueError, match="matmul_cost: k must be a positive integer"):
        matmul_cost(2, 3, 0)


# -- bad input: one line naming the function, the argument, what it got and what it wanted ---------

LM = DecoderLM(50, 16, 2, 1, d_ff=40, max_len=12).config


@pytest.mark.parametrize("call, error, fragments", [
    (lambda: lm_cost_of({}), ValueError,
     ["lm_cost_of: config lacks 'vocab_size', 'd_model'", "'tie_weights'", "DecoderLM"]),
    (lambda: lm_cost_of({k: v for k, v in LM.items() if k != "max_len"}), ValueError,
     ["lm_cost_of: config lacks 'max_len'; wanted the settings of a DecoderLM (model.config)"]),
    (lambda: lm_cost_of([50, 16, 1]), TypeError, ["lm_cost_of: config is a list; wanted a dict"]),
    (lambda: lm_cost_of(dict(LM, d_modle=16)), ValueError,
     ["lm_cost_of: config has 'd_modle', which DecoderLM does not take"]),
    (lambda: lm_cost_of(dict(LM, max_len=-1)), ValueError,
     ["lm_cost_of: config['max_len'] must be a positive integer; got -1"]),
    (lambda: lm_cost_of(dict(LM, vocab_size="50")), ValueError,
     ["lm_cost_of: config['vocab_size'] must be a positive integer; got '50'"]),
    (lambda: lm_cost_of(LM, batch_size=0), ValueError,
     ["lm_cost_of: batch_size must be a positive integer; got 0"]),
    (lambda: lm_cost(100, 64, 2, positional="rotary"), ValueError,
     ["lm_cost: positional must be one of ('learned'", "got 'rotary'"]),
    (lambda: lm_cost(100, 64, 2, tie_weights="no"), ValueError,
     ["lm_cost: tie_weights must be True or False; got 'no'"]),
    (lambda: lm_cost(100, 64, 2, n_heads=3), ValueError,
     ["lm_cost: d_model=64 is not divisible by n_heads=3"]),
    (lambda: lm_cost(100, 64, 2, positional="relative", relative_buckets=-1), ValueError,
     ["lm_cost: relative_buckets must be a positive integer; got -1"]),
    (lambda: block_parameters(64, None), ValueError,
     ["block_parameters: d_ff must be a positive integer; got None"]),
    (lambda: format_cost({}), ValueError, ["format_cost: cost lacks 'parameters'", "lm_cost"]),
    (lambda: format_table(lm_cost(10, 8, 1)), ValueError,
     ["format_table: table lacks 'rows'", "attention_table"]),
    (lambda: format_rows([]), ValueError, ["format_rows: rows must be a non-empty list"]),
])
def test_bad_input_to_the_lm_cost_is_one_line(call, error, fragments):
    """Each was a bare KeyError or TypeError, or a cost of a model DecoderLM refuses to build."""
    with raises(error, *fragments):
        call()


@pytest.mark.parametrize("name, value", [
    ("bytes_per_number", None), ("bytes_per_number", "4"), ("bytes_per_number", -4),
    ("bytes_per_number", 0), ("decoding", "yes")])
def test_attention_table_checks_every_argument_first(name, value):
    """bytes_per_number=None was a raw TypeError, '4' gave '4' repeated; decoding='yes' a table."""
    wanted = "True or False" if name == "decoding" else "a positive integer"
    with raises(ValueError, f"attention_table: {name} must be {wanted}; got {value!r}"):
        attention_table(1, 8, 16, 4, **{name: value})


def test_a_config_may_leave_d_ff_to_the_model_but_not_misname_a_key():
    assert lm_cost_of(dict(LM, d_ff=None)) == lm_cost(50, 16, 1, None, context=12, n_heads=2)
    with raises(ValueError, "config has 'hidden'", "DecoderLM does not take"):
        lm_cost_of(dict(LM, hidden=40))


def test_training_is_three_forwards_and_an_untied_head_is_an_embedding_parameter():
    """2 × forward passed (minitf info's label says ≈ 3 ×), and an untied output layer left out
    of the embedding parameters too."""
    V, d, L, n, b = 50, 16, 2, 12, 4
    cost = lm_cost(V, d, L, 40, context=n, batch_size=b, positional="learned",
                   tie_weights=False, n_heads=2)
    assert cost["training_flops_per_step"] == 3 * cost["forward_flops_per_token"] * b * n
    assert cost["embedding_parameters"] == V * d + n * d + d * V       # E, P and the head
