"""The math of a Transformer as pure forward/backward pairs, in the style of CS231n:

    out, cache = op(inputs...)
    grads      = op_backward(dout, cache)      # its float inputs' gradients, in order

Integer ids, constant masks and fixed tables get none: embedding_backward returns dW alone,
attention_backward no gradient of its mask, cross_entropy_backward dlogits alone, rope_backward
dx alone (cos θ and sin θ are fixed angles, not learned).

No state and no parameters: each pair can be read, tested and checked by finite differences on
its own. The elementwise ops, linear, layer norm, softmax, the losses and attention accept any
leading batch shape; split_heads, patches and the recurrent ops take the shapes their
docstrings give, and the position tables and masks none.
"""
from minitf.functional.activation import (dropout, dropout_backward, gelu, gelu_backward, relu,
                                          relu_backward)
from minitf.functional.attention import (CAUSAL_BLOCK, AttentionCache, CausalAttentionCache,
                                         RelativeAttentionCache, attention, attention_backward,
                                         causal_attention, causal_attention_backward,
                                         relative_attention, relative_attention_backward)
from minitf.functional.heads import merge_heads, split_heads
from minitf.functional.layer_norm import layer_norm, layer_norm_backward
from minitf.functional.linear import (embedding, embedding_backward, linear, linear_backward,
                                      patches, patches_backward)
from minitf.functional.loss import mse_loss, mse_loss_backward
from minitf.functional.masks import (as_additive_mask, causal_mask, combine_masks,
                                     padding_mask, padding_mask_from_ids)
from minitf.functional.positional import (alibi_bias, alibi_slopes, clipped_relative_positions,
                                          fourier_features, fourier_features_backward,
                                          relative_bias, relative_bias_backward,
                                          relative_position_buckets, rope, rope_angles,
                                          rope_backward, sinusoidal_table)
from minitf.functional.recurrent import lstm, lstm_backward, rnn, rnn_backward
from minitf.functional.softmax import (cross_entropy, cross_entropy_backward, log_softmax,
                                       log_softmax_backward, softmax, softmax_backward)

__all__ = [
    "linear", "linear_backward", "embedding", "embedding_backward", "patches", "patches_backward",
    "relu", "relu_backward", "gelu", "gelu_backward", "dropout", "dropout_backward",
    "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
    "cross_entropy", "cross_entropy_backward", "layer_norm", "layer_norm_backward",
    "attention", "attention_backward", "AttentionCache", "split_heads", "merge_heads",
    "causal_attention", "causal_attention_backward", "CausalAttentionCache", "CAUSAL_BLOCK",
    "as_additive_mask", "causal_mask", "padding_mask", "padding_mask_from_ids", "combine_masks",
    "sinusoidal_table", "rope_angles", "rope", "rope_backward", "alibi_slopes", "alibi_bias",
    "relative_position_buckets", "relative_bias", "relative_bias_backward",
    "relative_attention", "relative_attention_backward", "RelativeAttentionCache",
    "clipped_relative_positions", "fourier_features", "fourier_features_backward",
    "mse_loss", "mse_loss_backward", "rnn", "rnn_backward", "lstm", "lstm_backward",
]
