"""The gradient checks of recurrence: rnn and lstm (inputs, initial states, weights), the RNN and
LSTM layers, and the recurrent language model whole. Part of the one registry in
minitf.gradcheck_cases, which imports this module; see there for how the cases are built and run.

Sizes differ on every axis (b=2, n=4, d_in=3, d_h=5), so a backward that swaps two of them
raises; n=4 steps let a gradient travel back through three products with W_hᵀ.
"""
from __future__ import annotations

import minitf.functional as F
import minitf.models as models
import minitf.nn as nn
from minitf.backend import randint, randn
from minitf.gradcheck import FunctionCase, ModuleCase
from minitf.gradcheck_cases import case


@case("rnn (backpropagation through time)")
def _():
    inputs = {"x": randn(2, 4, 3), "h0": randn(2, 5), "W_x": randn(3, 5, std=0.6),
              "W_h": randn(5, 5, std=0.5), "b": randn(5)}
    return FunctionCase(F.rnn, F.rnn_backward, inputs, tuple(inputs))


@case("lstm (backpropagation through time)")
def _():
    inputs = {"x": randn(2, 4, 3), "h0": randn(2, 5), "c0": randn(2, 5),
              "W_x": randn(3, 20, std=0.6), "W_h": randn(5, 20, std=0.5), "b": randn(20)}
    return FunctionCase(F.lstm, F.lstm_backward, inputs, tuple(inputs))


@case("RNN, given h0")
def _():
    return ModuleCase(nn.RNN(3, 5), {"x": randn(2, 4, 3), "h0": randn(2, 5)})


@case("LSTM, given h0 and c0")
def _():
    return ModuleCase(nn.LSTM(3, 5), {"x": randn(2, 4, 3), "h0": randn(2, 5), "c0": randn(2, 5)})


@case("RNNLM, vanilla RNN")
def _():
    return ModuleCase(models.RNNLM(7, d_model=4, d_hidden=6), {"ids": randint(0, 7, (2, 5))})


@case("RNNLM, LSTM")
def _():
    return ModuleCase(models.RNNLM(7, d_model=4, d_hidden=6, cell="lstm"),
                      {"ids": randint(0, 7, (2, 5))})
