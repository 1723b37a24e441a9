"""Layers with parameters: each keeps what its forward computed and writes its own backward."""
from minitf.nn.attention import MultiHeadAttention
from minitf.nn.blocks import DecoderBlock, EncoderBlock, FeedForward, Residual
from minitf.nn.layers import GELU, Dropout, Embedding, LayerNorm, Linear, ReLU
from minitf.nn.module import Module, Parameter
from minitf.nn.positional import (LearnedPositionalEmbedding, RelativePositionBias,
                                  SinusoidalPositionalEncoding)

__all__ = [
    "Parameter", "Module", "Linear", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU",
    "MultiHeadAttention", "FeedForward", "Residual", "EncoderBlock", "DecoderBlock",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RelativePositionBias",
]
