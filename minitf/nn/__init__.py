"""Layers with parameters: each keeps what its forward computed and writes its own backward."""
from minitf.nn.attention import KVCache, MultiHeadAttention
from minitf.nn.blocks import DecoderBlock, EncoderBlock, FeedForward, Residual, Stack
from minitf.nn.init import INITS, initialize, xavier_uniform
from minitf.nn.layers import (GELU, ClassToken, Dropout, Embedding, LayerNorm, Linear, MeanPool,
                              ReLU, TokenEmbedding)
from minitf.nn.module import Module, grad_enabled, no_grad
from minitf.nn.parameter import Parameter
from minitf.nn.recurrent import LSTM, RNN
from minitf.nn.positional import (LearnedPositionalEmbedding, RelativePositionBias,
                                  SinusoidalPositionalEncoding)

__all__ = [
    "Parameter", "Module", "Linear", "Embedding", "TokenEmbedding", "LayerNorm", "Dropout", "ReLU", "GELU",
    "ClassToken", "MultiHeadAttention", "KVCache", "FeedForward", "Residual", "EncoderBlock",
    "DecoderBlock", "Stack",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RelativePositionBias",
    "MeanPool", "INITS", "initialize", "xavier_uniform", "RNN", "LSTM", "no_grad", "grad_enabled",
]
