"""Bad input to the cost model's functions: one line naming the function, the argument, what it
got and what was wanted -- not a silently wrong count (a GRU priced as a plain RNN, a memory floor
of -4 bytes), a raw TypeError from deep in the arithmetic, or a price for a model that cannot be
built."""
import numpy as np
import pytest

from minitf.cost import (decoder_window_numbers, format_cost, format_rows, lm_cost,
                         recurrent_window_numbers, training_memory_floor)
from minitf.models import DecoderLM

from test_bad_input import refused_in_one_line

# (the call, the error, fragments its one line must hold)
CASES = {
    # "gru" and "LSTM" were counted as a plain RNN: one state a step, where an LSTM keeps six
    "a recurrent window of a GRU": (
        lambda: recurrent_window_numbers(100, 16, 32, "gru", 8), ValueError,
        ["recurrent_window_numbers: cell must be one of ('rnn', 'lstm'); got 'gru'"]),
    "a recurrent window of an LSTM in capitals": (
        lambda: recurrent_window_numbers(100, 16, 32, "LSTM", 8), ValueError,
        ["recurrent_window_numbers: cell must be one of", "got 'LSTM'"]),
    "a recurrent window of no hidden width": (
        lambda: recurrent_window_numbers(100, 16, None, "rnn", 8), ValueError,
        ["recurrent_window_numbers: d_hidden must be a positive integer; got None"]),
    "a recurrent window of a fractional context": (
        lambda: recurrent_window_numbers(100, 16, 32, "rnn", 8.0), ValueError,
        ["recurrent_window_numbers: context must be a positive integer; got 8.0"]),
    # each was a number of the wrong kind, or a raw TypeError
    "a decoder window of no vocabulary": (
        lambda: decoder_window_numbers(None, 16, 1, 64, 4, 8), ValueError,
        ["decoder_window_numbers: vocab_size must be a positive integer; got None"]),
    "a decoder window of a fractional d_ff": (
        lambda: decoder_window_numbers(100, 16, 1, 64.0, 4, 8), ValueError,
        ["decoder_window_numbers: d_ff must be a positive integer; got 64.0"]),
    "a decoder window of negative blocks": (
        lambda: decoder_window_numbers(100, 16, -1, 64, 4, 8), ValueError,
        ["decoder_window_numbers: n_layers must be an integer ≥ 0", "got -1"]),
    "a decoder window of heads that do not split the width": (
        lambda: decoder_window_numbers(100, 10, 1, 64, 4, 8), ValueError,
        ["decoder_window_numbers: d_model=10 is not divisible by n_heads=4"]),
    "a memory floor of a negative window": (        # was -4 bytes
        lambda: training_memory_floor(-5, 1, 1), ValueError,
        ["training_memory_floor: window_numbers must be a positive integer", "got -5"]),
    "a memory floor of no window": (
        lambda: training_memory_floor(None, 1, 1), ValueError,
        ["training_memory_floor: window_numbers must be a positive integer", "got None"]),
    "a memory floor of a fractional batch": (      # was a float of bytes
        lambda: training_memory_floor(100, 1.5, 1), ValueError,
        ["training_memory_floor: batch_size must be an integer ≥ 0", "got 1.5"]),
    "a memory floor of negative parameters": (
        lambda: training_memory_floor(100, 1, -10), ValueError,
        ["training_memory_floor: parameters must be an integer ≥ 0", "got -10"]),
    "a memory floor of no bytes a number": (
        lambda: training_memory_floor(100, 1, 1, bytes_per_number=0), ValueError,
        ["training_memory_floor: bytes_per_number must be a positive integer; got 0"]),
    # d_head = 12 / 4 = 3: DecoderLM refuses it, lm_cost priced it
    "lm_cost of RoPE on an odd head": (
        lambda: lm_cost(100, 12, 1, n_heads=4, positional="rope"), ValueError,
        ["lm_cost: positional='rope' needs an even d_head", "got d_head=3"]),
    # both were "bad operand type for abs(): 'NoneType'"
    "format_cost of no numbers": (
        lambda: format_cost({key: None for key in lm_cost(10, 8, 1)}), TypeError,
        ["format_cost: cost['parameters'] is None; wanted a number, as lm_cost returns"]),
    "format_rows of no value": (
        lambda: format_rows([("a", None, "")]), TypeError,
        ["format_rows: rows[0]'s value is None; wanted a number or a str"]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_cost_function_refuses_bad_input_in_one_line(case):
    refused_in_one_line(*CASES[case])


def test_what_the_checks_let_through_is_priced_as_before():
    """The calls minitf train and the lessons make: a floor of the weights alone (no window), of
    one window and no weights; RoPE on an even head, as DecoderLM builds it; NumPy numbers."""
    window = recurrent_window_numbers(100, 16, 32, "lstm", 8)
    assert window == 8 * (16 + 6 * 32 + 100)
    assert training_memory_floor(window, 0, 7) == 4 * 4 * 7
    assert training_memory_floor(window, 1, 0) == 4 * window
    assert decoder_window_numbers(100, 16, 0, 64, 4, 8) == 8 * 16 + 8 * 100
    with pytest.raises(ValueError, match="rope"):           # what lm_cost now refuses
        DecoderLM(100, 12, 4, 1, positional="rope")
    model = DecoderLM(100, 16, 4, 1, max_len=8, positional="rope")
    assert lm_cost(100, 16, 1, context=8, positional="rope")["parameters"] == \
        model.num_parameters()
    # context 0, no model but a price tests/test_cost.py reads: the FLOPs no attention does
    assert lm_cost(100, 16, 1, context=0)["forward_flops_per_token"] == \
        2 * (4 * 16 * 16 + 2 * 16 * 64) + 2 * 16 * 100
    cost = lm_cost(10, 8, 1)
    numpy_cost = {key: np.int64(value) for key, value in cost.items()}
    assert format_cost(numpy_cost) == format_cost(cost)
    assert format_rows([("a", np.float64(1500.0), ""), ("b", "x", "")]).split() == \
        ["a", "1.50k", "b", "x"]
