"""What every model shares: a config that rebuilds it, and a loss with its backward."""
import functools
import inspect
import math

import minitf.functional as F
from minitf.nn import Module
from minitf.validate import at_the_boundary


@functools.cache
def _required_inputs(cls) -> list[str]:
    """The names of the inputs ``cls.forward`` cannot do without (once per class: a loss is called
    at every step, and at every difference of a gradient check)."""
    parameters = list(inspect.signature(cls.forward).parameters.values())[1:]       # not self
    return [p.name for p in parameters if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


class Model(Module):
    """A whole model: ``forward(*inputs) -> logits`` and ``backward(dlogits)``, plus

    config   the constructor's arguments, a JSON-able dict: ``type(model)(**model.config)``
             builds the same architecture (checkpoints store it)
    kind     a short name for the model family ("lm", "seq2seq", "classifier", "vit", "mlm",
             "set", "rnn"; minitf.models.MODELS maps each to its class)
    chance_loss   log V, the loss of a uniform guess among the V classes, once loss() has run:
             where training starts, and what a diverging run ends far above (see minitf.train)
    """

    kind = ""
    ignore_index = -100       # targets equal to this are not scored (padding)
    is_model = True           # checks its inputs in forward; its layers skip theirs (validate)

    def loss(self, *inputs_and_targets):
        """Mean softmax cross-entropy of the logits against the targets (the last argument).

        Returns (loss as a Python float, backward), where ``backward()`` runs the whole backward
        pass and adds every parameter's gradient into its .grad (call zero_grad() first).
        """
        # too few: one array alone would be read as the targets, and Transformer.loss(src,
        # targets) failed inside forward, naming a missing tgt but not what loss wants
        required = _required_inputs(type(self))
        if len(inputs_and_targets) < max(2, len(required) + 1):
            raise TypeError(f"{type(self).__name__}.loss: wanted forward's inputs "
                            f"({', '.join(required)}), then the targets; got "
                            f"{len(inputs_and_targets)} argument(s)")
        *inputs, targets = inputs_and_targets
        logits = self.forward(*inputs)
        self.chance_loss = math.log(logits.shape[-1])
        loss, cache = F.cross_entropy(logits, targets, ignore_index=self.ignore_index)
        # Each layer's cache, by id (holding the caches would keep every activation alive
        # until the next step): a forward since -- of the model, encode, one of its blocks --
        # replaces some, and the backward would take them for this loss's, silently.
        caches = [(module, id(module._cache)) for module in self.modules()]

        def backward():
            if self._output is not None and any(id(module._cache) != kept
                                                for module, kept in caches):
                raise RuntimeError(f"{type(self).__name__}.loss: its backward() was called after "
                                   f"another forward of the model or of its layers, whose caches "
                                   f"replaced this loss's (its gradients would be that input's); "
                                   f"wanted backward() before they run again, or the loss "
                                   f"computed again")
            return self.backward(F.cross_entropy_backward(1.0, cache))
        return float(loss), backward

    @at_the_boundary        # skipped for generate's steps: the cache is one generate made
    def _check_cache(self, cache, where: str) -> None:
        """None, or a cache as new_cache() makes it: a list with one entry per block. Anything
        else (a string, an array, a list of another length) would be indexed like one, and fail
        deep inside a layer -- or, as an extra argument to loss, be taken for the cache."""
        if cache is None:
            return
        fresh = self.new_cache()
        if not (isinstance(cache, list) and len(cache) == len(fresh)
                and all(type(c) is type(f) for c, f in zip(cache, fresh))):
            got = f"a list of {len(cache)}" if isinstance(cache, list) else type(cache).__name__
            raise TypeError(f"{where}: cache must be None or the list new_cache() makes, one "
                            f"entry per block ({len(fresh)} here); got {got}")
