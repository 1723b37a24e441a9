"""The analytic cost model agrees with the lecture's formulas and with the real model."""
import pytest

from minitf.cost import block_parameters, lm_cost, lm_cost_of
from minitf.models import DecoderLM
from minitf.models.lm import POSITIONAL


@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("tie_weights", [True, False])
def test_the_exact_count_is_the_models(positional, tie_weights):
    model = DecoderLM(50, 16, 2, 3, d_ff=40, max_len=12, positional=positional,
                      tie_weights=tie_weights)
    cost = lm_cost(50, 16, 3, 40, context=12, positional=positional, tie_weights=tie_weights,
                   n_heads=2)
    assert cost["parameters"] == model.num_parameters()
    assert lm_cost_of(model.config, batch_size=1) == lm_cost(
        50, 16, 3, 40, context=12, positional=positional, tie_weights=tie_weights, n_heads=2)


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
