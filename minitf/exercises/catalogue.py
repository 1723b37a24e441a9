"""The exercises: minitf's own backward passes, easiest first, each one to be written by a learner.

An exercise names the function (or method) whose body the learner writes, and says what its
forward computes, what the arguments hold, what it teaches and the mistake learners make most.
Which gradient checks grade it is not written here: it is traced from the registry
(minitf.exercises.tracing), so a new case that checks a backward pass grades its exercise at once.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

from minitf.exercises.time_limit import seconds_for


@dataclass(frozen=True)
class Exercise:
    name: str            # what a learner types: "softmax_backward", "MultiHeadAttention.backward"
    module: str          # where minitf defines it: "minitf.functional.softmax"
    level: int           # 1 (a line) … 5 (a whole model's chain)
    forwards: tuple      # the forward function(s) or method(s) it differentiates, in its module
    equation: str        # the forward as an equation (never the derivation)
    arguments: str       # what comes in (shapes, what the cache holds) and what must come out
    teaches: str         # one line
    mistake: str         # the classic mistake, one line; also the hint of last resort
    hint: str            # a nudge for the starter file, not the answer

    @property
    def owner(self):
        """The module, or for a method the class, that holds the reference."""
        owner = importlib.import_module(self.module)
        return getattr(owner, self.name.split(".")[0]) if self.is_method else owner

    @property
    def is_method(self) -> bool:
        return "." in self.name

    @property
    def attribute(self) -> str:
        """The name the function has in the learner's file: "softmax_backward", "backward"."""
        return self.name.rsplit(".", 1)[-1]

    @property
    def reference(self):
        """minitf's own function (for a method, the plain function in the class, without the
        shape check that minitf.nn.Module wraps around every backward)."""
        return inspect.unwrap(vars(self.owner)[self.attribute])

    @property
    def helpers(self) -> dict:
        """The module's other functions whose bodies are part of this exercise's answer (they
        hold a solution region of its name, as attention_backward's two steps do), by name. A
        homework blanks them with the exercise; the starter never imports them (they would
        answer it); grading a submitted file puts its own in place of minitf's."""
        from minitf.homework.regions import find_regions   # (the homework imports this module)
        if self.is_method:
            return {}
        home = importlib.import_module(self.module)
        return {r.function: vars(home)[r.function]
                for r in find_regions(inspect.getsource(home), self.module)
                if r.name == self.name and r.function in vars(home)
                and r.function != self.attribute}

    @property
    def upstream(self) -> str:
        """The name of the backward's upstream gradient, its first argument: dy, dp, dout, …"""
        names = [n for n in inspect.signature(self.reference).parameters if n != "self"]
        return names[0] if names else "the upstream gradient"

    @property
    def seconds(self) -> float:
        """How long its grading may run before it is stopped as a loop that never ends."""
        return seconds_for(self.level)

    @property
    def filename(self) -> str:
        return self.name.replace(".", "_") + ".py"


LEVELS = {1: "warm-up", 2: "easy", 3: "medium", 4: "hard", 5: "composite"}

_F = "minitf.functional."
EXERCISES = (
    Exercise(
        "relu_backward", _F + "activation", 1, ("relu",), "y = max(x, 0)",
        "dy: (...) the gradient of y;  cache: the boolean array x > 0 that relu returned\n"
        "->  dx: (...)",
        "a kink's slope: 1 where the input was positive, 0 elsewhere",
        "the mask taken from dy (or from y >= 0) instead of from x > 0",
        "The cache already says where x was positive."),
    Exercise(
        "dropout_backward", _F + "activation", 1, ("dropout",),
        "y = x ⊙ m / (1 − p),   m_i ~ Bernoulli(1 − p), drawn once per forward",
        "dy: (...);  cache: the array m / (1 − p) the forward multiplied by, or None when dropout\n"
        "was off (evaluation, or p = 0)\n->  dx: (...)",
        "the backward reuses the forward's random mask and its 1/(1 − p) scale",
        "a new mask drawn in the backward, or the 1/(1 − p) scale left out",
        "The check runs every forward under one seed, so the mask is the same each time."),
    Exercise(
        "linear_backward", _F + "linear", 2, ("linear",), "y = x W + b, at every position",
        "dy: (..., d_out);  cache: (x (..., d_in), W (d_in, d_out), has_bias)\n"
        "->  dx (..., d_in), dW (d_in, d_out), db (d_out,) or None when has_bias is False",
        "a weight shared by every position gets the sum of their gradients",
        "dW or db not summed over every leading axis (batch and position), or db forgotten",
        "Flatten the leading axes into one: x.reshape(-1, d_in) is a (positions, d_in) matrix."),
    Exercise(
        "embedding_backward", _F + "linear", 2, ("embedding",), "y = W[ids]",
        "dy: (..., d);  cache: (ids (...) integers, the shape (vocab, d) of W)\n"
        "->  dW: (vocab, d)   (ids are integers: they have no gradient)",
        "a lookup's gradient is a scatter-add back into the table",
        "dW[ids] = dy assigns: a token that occurs twice keeps only one of its gradients",
        "minitf.array_ops.scatter_add(target, indices, values) adds at repeated indices too."),
    Exercise(
        "LearnedPositionalEmbedding.backward", "minitf.nn.positional", 2, ("forward",),
        "y = x + P[offset : offset + n],   P the learned table self.W",
        "self: the layer, whose forward saved (offset, n);  dy: (..., n, d_model)\n"
        "->  dx: (..., n, d_model); add P's gradient into self.W.grad (+=)",
        "a table row added to every sequence of the batch gets the sum of their gradients",
        "P's gradient not summed over the batch, or assigned to self.W.grad instead of added",
        "Take the cache with self._pop_cache(); sum_to_shape sums over broadcast axes."),
    Exercise(
        "ClassToken.backward", "minitf.nn.layers", 2, ("forward",),
        "y = concat([cls, x], axis=1): one learned vector in front of every sequence",
        "self: the layer (its vector is self.cls);  dy: (b, 1 + n, d)\n"
        "->  dx: (b, n, d); add the vector's gradient (d,) into self.cls.grad",
        "a parameter broadcast over the batch sums its gradient over the batch",
        "the vector's gradient not summed over the batch, or the CLS row left in dx",
        "Call self._pop_cache() first (the forward saved None); then split dy along axis 1."),
    Exercise(
        "patches_backward", _F + "linear", 2, ("patches",),
        "tokens = the images cut into p×p patches, each flattened: a reshape, a transpose, a reshape",
        "dy: (b, N, p·p·C);  cache: (the images' shape (b, C, H, W), p)\n->  dimages: (b, C, H, W)",
        "the gradient of a rearrangement is the inverse rearrangement",
        "undoing the reshape but not the transpose: the right shape, the wrong pixels",
        "Run the forward's three steps in reverse; a transpose is undone by its inverse permutation."),
    Exercise(
        "rope_backward", _F + "positional", 2, ("rope",),
        "y_2i = x_2i cos θ − x_2i+1 sin θ,   y_2i+1 = x_2i sin θ + x_2i+1 cos θ",
        "dy: (..., n, d_head);  cache: (cos θ, sin θ), each (n, d_head/2)\n->  dx: (..., n, d_head)",
        "a rotation's gradient is the inverse rotation: R(θ)ᵀ = R(−θ)",
        "rotating dy by +θ again instead of back by −θ",
        "_rotate(x, cos, sin) is the forward's rotation; what does the inverse rotation need?"),
    Exercise(
        "gelu_backward", _F + "activation", 3, ("gelu",),
        "y = x Φ(x);  exact: Φ(x) = ½ (1 + erf(x/√2));  "
        "tanh: Φ(x) ≈ ½ (1 + tanh(√(2/π) (x + 0.044715 x³)))",
        "dy: (...);  cache: (x, cdf, approximate): cdf is Φ(x), exact or the tanh form "
        "(for 'tanh', Φ'(u) = ½ (1 − tanh² u) = 2 Φ (1 − Φ))\n->  dx: (...)",
        "the product rule, and the chain rule through Φ (or through tanh)",
        "only Φ(x) kept (the x Φ'(x) term of the product rule dropped), or the chain through x³ missed",
        "Both variants are graded: write the exact one and the tanh one."),
    Exercise(
        "softmax_backward", _F + "softmax", 3, ("softmax",),
        "p_i = exp(x_i) / Σ_j exp(x_j), along ``axis`` (each row sums to 1)",
        "dp: (...) the gradient of p;  cache: (p, axis)\n->  dx: (...)",
        "every p_i depends on every x_j of its row: a Jacobian-vector product, no n×n matrix",
        "dx = p ⊙ dp: the term through the normalising sum Σ_j (dp_j p_j) left out",
        "Reduce along ``axis`` with keepdims=True. A fully masked row has p = 0: its dx must be 0."),
    Exercise(
        "log_softmax_backward", _F + "softmax", 3, ("log_softmax",),
        "out_i = x_i − log Σ_j exp(x_j), along ``axis``",
        "dout: (...);  cache: (out, axis)\n->  dx: (...)",
        "the log-sum-exp couples every entry of a row",
        "dx = dout: the log-sum-exp treated as a constant",
        "exp(out) is softmax(x)."),
    Exercise(
        "cross_entropy_backward", _F + "softmax", 3, ("cross_entropy",),
        "loss = (1/D) Σ_kept −Σ_c q_c log p_c,   p = softmax(logits),  "
        "q = (1 − ε) onehot(y) + ε/V,  D = N_kept (mean) or 1 (sum)",
        "dloss: a scalar;  cache: (logp (N, V), y (N,), kept (N,) booleans, D, ε, the shape\n"
        "of logits (..., V));  ignored positions have kept False\n->  dlogits: (..., V)",
        "softmax and cross-entropy fused: their gradient together is simply p − q",
        "dividing by all N positions instead of N_kept, or a gradient at ignored positions",
        "Work in the flattened (N, V) rows; reshape to the logits' shape at the end."),
    Exercise(
        "relative_bias_backward", _F + "positional", 3, ("relative_bias",),
        "bias[h, i, j] = table[bucket[i, j], h]: an embedding lookup, then transpose(2, 0, 1)",
        "dbias: (h, n_q, n_k);  cache: what embedding(buckets, table) returned\n"
        "->  dtable: (num_buckets, h)",
        "a composition is differentiated last step first",
        "the transpose not undone before the scatter-add into the table",
        "embedding_backward is imported for you."),
    Exercise(
        "layer_norm_backward", _F + "layer_norm", 4, ("layer_norm",),
        "y = γ ⊙ x̂ + β,   x̂ = (x − μ) / √(σ² + ε),   μ, σ² the mean and variance of each row",
        "dy: (..., d);  cache: (x̂ (..., d), 1/√(σ² + ε) (..., 1), γ (d,))\n"
        "->  dx (..., d), dγ (d,), dβ (d,)",
        "μ and σ depend on every x_i of the row: three paths into dx",
        "μ or σ treated as constants: the mean path or the variance path missing from dx",
        "Write dx̂ = dy ⊙ γ first; then follow x̂ back through x − μ and through σ."),
    Exercise(
        "attention_backward", _F + "attention", 4, ("attention",),
        "scores = q kᵀ · scale + mask + bias,   probs = softmax(scores),   out = (probs ⊙ D) v",
        "dout: (..., n_q, d_v);  cache: AttentionCache (q, k, v, probs, scale, bias_shape,\n"
        "dropout), dropout the mask D (0 or 1/(1 − p)) or None when there was no dropout\n"
        "->  dq (..., n_q, d_k), dk (..., n_k, d_k), dv (..., n_k, d_v), and dbias (the\n"
        "bias's shape) or None when there was no bias;  the masks are constants",
        "the chain through a matmul, a softmax and a matmul; a broadcast bias sums its gradient",
        "the scale left out of dq and dk, or a transpose in the wrong place",
        "Go backwards one line of the forward at a time; softmax_backward and dropout_backward "
        "are imported for you."),
    Exercise(
        "Residual.backward", "minitf.nn.blocks", 4, ("forward",),
        "post-LN: y = LN(x + Dropout(f(x)));   pre-LN: y = x + Dropout(f(LN(x)))",
        "self: the wrapper: self.layer (f), self.norm (LN), self.drop, self.pre_ln;  dy (b, n, d)\n"
        "->  dx, followed by any extra gradients f's backward returned (cross-attention memory)",
        "a residual connection adds an identity path to the gradient; the order of LN and f",
        "the identity path dropped (dx without + dy), or LN and f undone in the forward's order",
        "as_tuple(f.backward(...)) always gives a tuple (dx, *others)."),
    Exercise(
        "MultiHeadAttention.backward", "minitf.nn.attention", 5, ("_project", "forward"),
        "q, k, v = split_heads(x W_qkv);   heads = attention(q, k, v);   y = merge_heads(heads) W_o",
        "self: the layer (W_qkv or W_q and W_kv, W_o, rope or a relative bias);  dy: (b, n, d_model)\n"
        "->  dx (b, n, d_model), or (dx, dmemory) for cross-attention (self.cross)",
        "heads are a reshape and a transpose; fused projections split and stack their gradients",
        "the heads split or merged along the wrong axes, or the memory's gradient lost",
        "merge_heads undoes split_heads: the backward of one is the other. F.attention_backward\n"
        "takes causal_attention's cache as well as attention's."),
    Exercise(
        "DecoderBlock.backward", "minitf.nn.blocks", 5, ("forward",),
        "x = self_attn(x);   x = cross_attn(x, memory);   y = ffn(x)",
        "self: the block (self.self_attn, self.cross_attn, self.ffn);  dy: (b, n, d_model)\n"
        "->  (dx (b, n, d_model), dmemory (b, m, d_model))",
        "a block is its sublayers' backward passes in reverse order",
        "the memory's gradient passed on as dx, or lost",
        "The cross-attention's backward returns two gradients."),
    Exercise(
        "Stack.backward", "minitf.nn.blocks", 5, ("forward",),
        "x = block_N(… block_2(block_1(x, *context)) …, *context)",
        "self: the stack (self.blocks);  dy: (b, n, d_model)\n"
        "->  dx, followed by the context's gradients (the memory) when the blocks return them",
        "one memory read by N blocks gets the sum of the N gradients",
        "only the last block's memory gradient kept instead of the sum over all blocks",
        "as_tuple(block.backward(dy)) gives (dx, *context gradients) for any block."),
    Exercise(
        "DecoderLM.backward", "minitf.models.lm", 5, ("_logits", "forward"),
        "x = E[ids] (+ P);   x = blocks(dropout(x));   logits = LN(x) W_head,   W_head = Eᵀ when tied",
        "self: the model;  dlogits: (b, n, vocab)\n"
        "->  None (ids have no gradient); every parameter's gradient added into its .grad",
        "a tied embedding is used twice and gets the sum of both gradients",
        "the head's gradient assigned to the tied table instead of added to the lookup's",
        "The forward saved the head's linear cache (self._pop_cache() gives it back, for\n"
        "F.linear_backward); every layer has its own backward. A post-LN model (pre_ln=False)\n"
        "has no final norm, and one of RoPE, ALiBi or relative positions no position table:\n"
        "self.norm or self.pos_emb is None."),
    Exercise(
        "Transformer.backward", "minitf.models.transformer", 5, ("encode", "decode", "forward"),
        "memory = Enc(√d E_src[src] + PE);   y = Dec(√d E_tgt[tgt] + PE, memory);   "
        "logits = y W_out + b_out",
        "self: the model;  dlogits: (b, n, tgt_vocab)\n"
        "->  None; every parameter's gradient added into its .grad",
        "two streams: the decoder's gradient into the memory flows on into the encoder",
        "the √d_model on the embeddings forgotten, or the memory's gradient not sent to the encoder",
        "The decoder stack returns (dy, dmemory)."),
)

BY_NAME = {e.name.lower(): e for e in EXERCISES}


def find(name: str) -> Exercise:
    """The exercise called ``name`` (any case; "MultiHeadAttention_backward" works as well)."""
    if not isinstance(name, str):
        raise TypeError(f"exercises.find: name must be an exercise's name, a str; got {name!r}")
    key = name.strip().lower().removesuffix(".py")
    exercise = BY_NAME.get(key) or {e.filename[:-3].lower(): e for e in EXERCISES}.get(key)
    if exercise is None:
        import difflib
        near = difflib.get_close_matches(key, BY_NAME, n=1)
        guess = f"did you mean {BY_NAME[near[0]].name!r}? " if near else ""
        raise ValueError(f"no exercise named {name!r}; {guess}see the names with 'minitf "
                         f"exercise list'")
    return exercise
