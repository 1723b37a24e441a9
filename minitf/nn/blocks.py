"""The Transformer's building blocks: the feed-forward network, the residual + LayerNorm wrapper
(post-LN or pre-LN), and the encoder and decoder blocks made of them."""
from minitf.nn.attention import MultiHeadAttention
from minitf.nn.layers import GELU, Dropout, LayerNorm, Linear, ReLU
from minitf.nn.module import Module, as_tuple, grad_enabled
from minitf.validate import check_flags, check_int

ACTIVATIONS = {"relu": lambda: ReLU(), "gelu": lambda: GELU("tanh"), "gelu_exact": lambda: GELU("none")}


def check_activation(activation, where: str) -> None:
    """ValueError unless ``activation`` names one of ACTIVATIONS. A model checks it itself: with
    n_layers=0 no FeedForward would, and its config would keep a name no block can build."""
    if not isinstance(activation, str) or activation not in ACTIVATIONS:     # a list: unhashable
        raise ValueError(f"{where}: activation must be one of {tuple(ACTIVATIONS)}; "
                         f"got {activation!r}")


class FeedForward(Module):
    """The position-wise MLP: y = act(x W_1 + b_1) W_2 + b_2, with d_ff usually 2-8 × d_model.

    Attention mixes information between positions; this layer then transforms each position on
    its own. activation: "relu" (Vaswani), "gelu" (tanh approximation, GPT-2) or "gelu_exact".
    bias=False drops b_1 and b_2 (PaLM, LLaMA).
    x: (..., d_model)  ->  y: (..., d_model)
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True):
        check_activation(activation, "FeedForward")
        check_int(d_ff, "d_ff", "FeedForward", what="the hidden layer's width")
        self.W_1 = Linear(d_model, d_ff, bias)
        self.act = ACTIVATIONS[activation]()
        self.drop = Dropout(dropout)
        self.W_2 = Linear(d_ff, d_model, bias)

    def forward(self, x):
        activated = self.act(self.W_1(x))                       # (..., d_ff)
        hidden = self.drop(activated)                           # the same array if no dropout
        y = self.W_2(hidden)
        # The hidden layer is the widest array of a block. A GELU keeps x and Φ(x) for its own
        # backward, and hidden = x Φ(x) is one multiply away, so W_2 need not keep a third
        # (..., d_ff) array (a dropout that ran made a new, masked array: kept then).
        if grad_enabled() and isinstance(self.act, GELU) and hidden is activated:
            self.W_2.rebuild_input_with(self.act.output_rebuilder())
        return y

    def backward(self, dy):
        dhidden = self.W_2.backward(dy)          # the hidden layer, rebuilt, lives only for this
        return self.W_1.backward(self.act.backward(self.drop.backward(dhidden)))


class Residual(Module):
    """A sublayer f (attention or feed-forward) wrapped in a residual connection and a LayerNorm:

        post-LN (Vaswani et al., 2017):  y = LayerNorm(x + Dropout(f(x)))
        pre-LN  (GPT-2 and most since):  y = x + Dropout(f(LayerNorm(x)))

    Pre-LN leaves a clean identity path from the output back to x -- dy reaches x unchanged plus
    the sublayer's contribution -- which is why deep pre-LN stacks train without careful warm-up.
    Extra arguments (the memory of cross-attention, a mask) are passed on to f, and their
    gradients, if f returns any, are passed back after dx. eps: the LayerNorm's ε.
    """

    def __init__(self, layer: Module, d_model: int, pre_ln: bool = False, dropout: float = 0.0,
                 eps: float = 1e-5):
        check_flags("Residual", pre_ln=pre_ln)
        if not isinstance(layer, Module):
            raise TypeError(f"Residual: layer is a {type(layer).__name__}; wanted a minitf "
                            f"module, whose output is added to its input")
        self.layer = layer
        self.norm = LayerNorm(d_model, eps)
        self.drop = Dropout(dropout)
        self.pre_ln = pre_ln

    def forward(self, x, *context, **options):
        f_in = self.norm(x) if self.pre_ln else x
        f_out = self.layer(f_in, *context, **options)       # f(LN(x)) or f(x)
        del f_in                                            # LN(x) need not outlive f
        if f_out.shape != x.shape:                  # it is added to x: a shape compare, no more
            raise ValueError(f"Residual: its {type(self.layer).__name__} maps x {tuple(x.shape)} "
                             f"to {tuple(f_out.shape)}; wanted x's shape, to add the output to x")
        if self.pre_ln:
            return x + self.drop(f_out)
        return self.norm(x + self.drop(f_out))

    def backward(self, dy):
        # BEGIN SOLUTION Residual.backward
        if self.pre_ln:
            # y = x + f(LN(x)):  dx = dy + LN'ᵀ f'ᵀ dy
            d_layer, *d_context = as_tuple(self.layer.backward(self.drop.backward(dy)))
            dx = dy + self.norm.backward(d_layer)
        else:
            # y = LN(h), h = x + f(x):  dh = LN'ᵀ dy,  dx = dh + f'ᵀ dh
            dh = self.norm.backward(dy)
            d_layer, *d_context = as_tuple(self.layer.backward(self.drop.backward(dh)))
            dx = dh + d_layer
        return (dx, *d_context) if d_context else dx
        # END SOLUTION


class EncoderBlock(Module):
    """Self-attention, then feed-forward, each inside a Residual.

    With causal=True this is also the block of a decoder-only (GPT-style) language model.
    d_head, d_v: the attention's head sizes (see MultiHeadAttention; default d_model / n_heads).
    eps: every LayerNorm's ε (default 1e-5, PyTorch's; BERT-family weights were trained with
    1e-12, and loading them needs it). bias=False: no biases in the attention and feed-forward
    projections (the LayerNorms keep their β). attn_dropout: dropout on the attention weights
    (see MultiHeadAttention), apart from ``dropout`` on each sublayer's output and in the FFN.
    forward(x, mask=None, cache=None): x (b, n, d_model) -> (b, n, d_model);  backward(dy) -> dx
    (cache: a KVCache for the self-attention, during generation)
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.0,
                 pre_ln: bool = False, activation: str = "relu", causal: bool = False,
                 positional: str | None = None, d_head: int | None = None,
                 d_v: int | None = None, eps: float = 1e-5, bias: bool = True,
                 attn_dropout: float = 0.0):
        check_flags("EncoderBlock", pre_ln=pre_ln, causal=causal, bias=bias)
        attention = MultiHeadAttention(d_model, n_heads, d_head=d_head, d_v=d_v, causal=causal,
                                       positional=positional, bias=bias,
                                       attn_dropout=attn_dropout)
        sublayer = dict(pre_ln=pre_ln, dropout=dropout, eps=eps)
        self.d_model = d_model
        self.self_attn = Residual(attention, d_model, **sublayer)
        self.ffn = Residual(FeedForward(d_model, d_ff, activation, dropout, bias), d_model,
                            **sublayer)

    def forward(self, x, mask=None, cache=None):
        # checked here too, so that a bad x is named in the words of the block it was given to
        self._check_input(x, "x", ("b", "n", ("d_model", self.d_model)))
        return self.ffn(self.self_attn(x, mask=mask, cache=cache))

    def backward(self, dy):
        return self.self_attn.backward(self.ffn.backward(dy))


class DecoderBlock(Module):
    """Masked self-attention, cross-attention to the encoder's output, feed-forward; each in a
    Residual. d_head, d_v: the head sizes of both attentions (see MultiHeadAttention); eps, bias
    and attn_dropout as for EncoderBlock.

    forward(x, memory, mask=None, memory_mask=None, cache=None):
        x: (b, n, d_model) target side;  memory: (b, m, d_model) encoder output
        mask: extra self-attention mask (e.g. target padding; the causal mask is built in)
        memory_mask: cross-attention mask (e.g. source padding (b, 1, 1, m))
        cache: None, or a pair of KVCache (self-attention, cross-attention) for generation
    backward(dy) -> (dx, dmemory)
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.0,
                 pre_ln: bool = False, activation: str = "relu", positional: str | None = None,
                 d_head: int | None = None, d_v: int | None = None, eps: float = 1e-5,
                 bias: bool = True, attn_dropout: float = 0.0):
        check_flags("DecoderBlock", pre_ln=pre_ln, bias=bias)
        heads = {"d_head": d_head, "d_v": d_v, "bias": bias, "attn_dropout": attn_dropout}
        self_attention = MultiHeadAttention(d_model, n_heads, causal=True, positional=positional,
                                            **heads)
        sublayer = dict(pre_ln=pre_ln, dropout=dropout, eps=eps)
        self.d_model = d_model
        self.self_attn = Residual(self_attention, d_model, **sublayer)
        self.cross_attn = Residual(MultiHeadAttention(d_model, n_heads, cross=True, **heads),
                                   d_model, **sublayer)
        self.ffn = Residual(FeedForward(d_model, d_ff, activation, dropout, bias), d_model,
                            **sublayer)

    def forward(self, x, memory, mask=None, memory_mask=None, cache=None):
        self._check_input(x, "x", ("b", "n", ("d_model", self.d_model)))     # as EncoderBlock's
        self._check_input(memory, "memory", (("b", x.shape[0]), "m", ("d_model", self.d_model)))
        self_cache, cross_cache = (None, None) if cache is None else cache
        x = self.self_attn(x, mask=mask, cache=self_cache)
        x = self.cross_attn(x, memory, mask=memory_mask, cache=cross_cache)
        return self.ffn(x)

    def backward(self, dy):
        # BEGIN SOLUTION DecoderBlock.backward
        dy = self.ffn.backward(dy)
        dy, dmemory = self.cross_attn.backward(dy)
        return self.self_attn.backward(dy), dmemory
        # END SOLUTION


class Stack(Module):
    """N blocks applied in turn, x -> block_N(… block_1(x)): the "N×" of the Transformer figure.

    Extra arguments (the encoder memory, masks) go to every block. A memory read by all N decoder
    blocks gets the sum of their N gradients.
    forward(x, *context, cache=None, **options): cache is a list with one entry per block
    backward(dy) -> dx, or (dx, dmemory) when the blocks return context gradients
    """

    def __init__(self, blocks):
        try:
            blocks = list(blocks)
        except TypeError:                       # None, one module on its own
            blocks = None
        if blocks is None or not all(isinstance(b, Module) for b in blocks):
            raise TypeError("Stack: blocks must be a list (or generator) of minitf modules, "
                            "e.g. Stack(EncoderBlock(...) for _ in range(n_layers))")
        self.blocks = blocks

    def forward(self, x, *context, cache=None, **options):
        for i, block in enumerate(self.blocks):
            if cache is not None:
                options["cache"] = cache[i]
            x = block(x, *context, **options)
        return x

    def backward(self, dy):
        # BEGIN SOLUTION Stack.backward
        d_context = None
        for block in reversed(self.blocks):
            dy, *d_block_context = as_tuple(block.backward(dy))
            d_context = d_block_context if d_context is None else \
                [total + d for total, d in zip(d_context, d_block_context)]
        return (dy, *d_context) if d_context else dy
        # END SOLUTION
