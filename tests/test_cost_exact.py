"""The cost model's exact figures: decoder_window_numbers against its docstring's formula worked
by hand, the short numbers minitf info prints (T up to 10^15, a power of ten past it), and a
model of no blocks, priced as its embeddings and head alone, while -1 blocks is refused."""
import pytest

from minitf.cost import (_human, decoder_window_numbers, format_cost, format_rows, lm_cost,
                         lm_cost_of)
from minitf.models import DecoderLM

# -- decoder_window_numbers ------------------------------------------------------------------------


@pytest.mark.parametrize("V, d, L, d_ff, h, n, expected", [
    # per block 6·64·128 + 64·512 + 4·64·65/2 = 49152 + 32768 + 8320 = 90240, two of them;
    # the top 64·128 + 64·103 = 8192 + 6592
    (103, 128, 2, 512, 4, 64, 2 * 90240 + 14784),
    # n even, so h·n(n+1)/2 is not h·n·((n+1)//2): 6·6·6 + 6·10 + 3·6·7/2 = 216 + 60 + 63
    (5, 6, 3, 10, 3, 6, 3 * 339 + (36 + 30)),
    # n odd: 6·5·4 + 5·3 + 2·5·6/2 = 120 + 15 + 30, and the top 5·4 + 5·7
    (7, 4, 1, 3, 2, 5, (6 * 5 * 4 + 5 * 3 + 30) + (5 * 4 + 5 * 7)),
])
def test_decoder_window_numbers_is_its_docstring_formula(V, d, L, d_ff, h, n, expected):
    """Each term of the docstring's formula, worked by hand: a dropped or changed one is seen."""
    by_formula = L * (2 * n * d + 3 * n * d + n * d + n * d_ff + h * n * (n + 1) // 2) \
        + n * d + n * V
    assert by_formula == expected
    assert decoder_window_numbers(V, d, L, d_ff, h, n) == expected


def test_the_window_numbers_of_minitf_train_s_default_model():
    """minitf train's default model (vocabulary 103) holds 195,264 numbers a window."""
    assert decoder_window_numbers(103, 128, 2, 512, 4, 64) == 195_264


# -- _human, the short numbers of format_cost ------------------------------------------------------

@pytest.mark.parametrize("x, short", [
    (1e12, "1.00T"), (1_000_000_000_000, "1.00T"), (1.5e12, "1.50T"), (123.456e12, "123.46T"),
    (9.99e14, "999.00T"), (-2e12, "-2.00T"), (1e15, "1e+15"), (1_234_567_890_123_456, "1.23e+15"),
    (-1e15, "-1e+15"), (2.5e18, "2.5e+18"), (1e9, "1.00G"), (123_456_789, "123.46M"),
    (1000, "1.00k"), (999, "999"), (0, "0"), (12.5, "12.5"),
    # just below a unit, rounded up to it: the unit above, not "1000.00G" or "1000.00T"
    (999_999_999_999, "1.00T"), (-999_996_000, "-1.00G"), (9.99999e14, "1e+15"),
    (999_995, "1.00M")])
def test_a_number_is_written_short_with_its_unit(x, short):
    """10^12 up to 10^15 in T with two decimals, then a power of ten; below 1000 as it is."""
    assert _human(x) == short
    assert format_rows([("x", x, "")]).split() == ["x", short]


def test_format_cost_writes_a_large_model_s_training_flops_in_t():
    """A 32-block, 4096-wide model at batch 8 × 2048: ≈ 7.06·10^14 FLOPs a step, 706.23T."""
    d, d_ff, n, L, V, b = 4096, 4 * 4096, 2048, 32, 50_000, 8
    per_token = L * (2 * (4 * d * d + 2 * d * d_ff) + 2 * 2 * n * d) + 2 * d * V
    cost = lm_cost(V, d, L, context=n, batch_size=b)
    assert cost["forward_flops_per_token"] == per_token == 14_368_243_712
    assert cost["training_flops_per_step"] == 3 * per_token * b * n
    lines = format_cost(cost).splitlines()
    assert lines[3].startswith("forward FLOPs per token") and "14.37G  at full context" in lines[3]
    assert "706.23T" in lines[4] and lines[4].startswith("training FLOPs per step")
    assert "235.41T FLOPs" in lines[7]


# -- no blocks, and -1 blocks ----------------------------------------------------------------------

@pytest.mark.parametrize("positional", ["learned", "rope", "relative"])
@pytest.mark.parametrize("tie_weights", [True, False])
def test_a_model_of_no_blocks_costs_its_embeddings_and_head_alone(positional, tie_weights):
    """n_layers=0 costs the embeddings, final norm and head alone, as DecoderLM counts them."""
    V, d, h, n = 50, 16, 4, 12
    cost = lm_cost(V, d, 0, context=n, positional=positional, tie_weights=tie_weights,
                   n_heads=h)
    embedding = V * d + (n * d if positional == "learned" else 0)
    head = 0 if tie_weights else d * V
    assert cost == {
        "parameters": embedding + 2 * d + head, "parameters_formula": 0,
        "embedding_parameters": embedding + head, "forward_flops_per_token": 2 * d * V,
        "training_flops_per_step": 3 * 2 * d * V * n, "kv_cache_numbers": 0,
        "kv_cache_bytes": 0, "decode_flops_cached": 2 * d * V,
        "decode_flops_uncached": n * 2 * d * V}
    model = DecoderLM(V, d, h, 0, max_len=n, positional=positional, tie_weights=tie_weights)
    assert cost["parameters"] == model.num_parameters()
    assert lm_cost_of(model.config) == cost


def test_minus_one_blocks_is_refused_in_one_line():
    """n_layers=-1, a model of negative parameters, is refused in one line naming the argument."""
    with pytest.raises(ValueError) as refused:
        lm_cost(50, 16, -1)
    assert str(refused.value) == ("lm_cost: n_layers must be an integer ≥ 0, the number of "
                                  "blocks; got -1")
    config = dict(DecoderLM(50, 16, 4, 1, max_len=12).config, n_layers=-1)
    with pytest.raises(ValueError) as refused:
        lm_cost_of(config)
    assert str(refused.value) == "lm_cost_of: config['n_layers'] must be an integer ≥ 0; got -1"
