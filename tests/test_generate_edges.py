"""Beam search on a scripted translator whose next-token probabilities are fixed by hand: the
length penalty's length (the output's tokens and its EOS), and the early stop."""
import math

import numpy as np

from minitf.data import BOS, EOS
from minitf.generate import beam_search

V = 5                                   # PAD, BOS, EOS and the symbols 3 and 4


class ScriptedTranslator:
    """A translator whose next token depends on the last token alone: ``table[last]`` holds the
    probabilities of the V tokens; decode counts its calls."""

    def __init__(self, table):
        self.table = {last: np.log(np.array(p, dtype=np.float64)) for last, p in table.items()}
        self.calls = 0

    def encode(self, src):
        return np.zeros((1, 1, 1)), np.ones((1, 1, 1, 1), dtype=bool)

    def eval(self):
        return self

    def new_cache(self):
        return []

    def decode(self, last, memory, memory_mask, cache):
        self.calls += 1
        return np.stack([self.table[int(t)] for t in last[:, -1]])[:, None, :]   # (k, 1, V)


def _probs(**by_token):
    """A distribution over the V tokens: the named ones, the rest shared by PAD and BOS."""
    p = np.zeros(V)
    for name, value in by_token.items():
        p[{"eos": EOS, "a": 3, "b": 4}[name]] = value
    p[[0, BOS]] = (1 - p.sum()) / 2
    return p


def _translator():
    """From BOS: EOS 0.50, symbol 3 0.45, symbol 4 0.03; after 3, EOS 0.70. log p of [] + EOS is
    −0.693, of [3] + EOS −1.155: a ratio of 0.600, which the penalty ((5 + length) / 6)^3 ranks as
    [] when length counts the EOS ((6/7)^3 = 0.630 > 0.600), as [3] when not ((5/6)^3 = 0.579)."""
    return ScriptedTranslator({BOS: _probs(eos=0.50, a=0.45, b=0.03),
                               3: _probs(eos=0.70, a=0.10, b=0.10),
                               4: _probs(eos=0.10, a=0.40, b=0.40)})


def test_the_length_penalty_counts_the_eos_in_the_length():
    """A finished output of m tokens is divided by ((5 + m + 1) / 6)^α, its EOS counted: at α = 3
    the empty output (log p −0.693) beats [3] (log p −1.155), which wins if the EOS is left out."""
    model = _translator()
    empty, one = math.log(0.50), math.log(0.45) + math.log(0.70)
    assert empty / ((5 + 1) / 6) ** 3 > one / ((5 + 2) / 6) ** 3
    assert empty / (5 / 6) ** 3 < one / 1.0                    # the other count ranks them so
    assert beam_search(model, np.array([[3]]), beam_size=2, max_len=2, alpha=3.0) == [[]]
    assert beam_search(model, np.array([[3]]), beam_size=2, max_len=2, alpha=0.0) == [[]]


def test_a_longer_finished_output_wins_under_a_strong_enough_penalty():
    """With α = 8 the penalty ((5 + 2) / 6)^8 = 3.43 lifts [3] (−1.155 / 3.43 = −0.34) above the
    empty output (−0.693 / 1): the beam returns the longer one."""
    model = _translator()
    assert beam_search(model, np.array([[3]]), beam_size=2, max_len=2, alpha=8.0) == [[3]]


def test_beam_search_stops_once_beam_size_outputs_finished_and_none_live_can_win():
    """beam_size = 1 and EOS at 0.9 from BOS: after the first step one output has finished
    (log p −0.105) and the live [3] (log p −2.996, divided by ((5 + 6) / 6)^0.6 at most) can no
    longer beat it, so decode is called once, not max_len = 6 times."""
    model = ScriptedTranslator({BOS: _probs(eos=0.90, a=0.05, b=0.03),
                                3: _probs(eos=0.10, a=0.44, b=0.44),
                                4: _probs(eos=0.10, a=0.44, b=0.44)})
    assert beam_search(model, np.array([[3]]), beam_size=1, max_len=6) == [[]]
    assert model.calls == 1
