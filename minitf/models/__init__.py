"""Whole models built from minitf.nn: a decoder-only language model, the encoder–decoder
Transformer, an encoder classifier with a CLS token, a Vision Transformer, BERT's masked
language model, an encoder over sets of vectors, and a recurrent language model (the baseline).
Each has a hand-written backward through the whole model."""
import inspect

from minitf.models.base import Model
from minitf.models.classifier import EncoderClassifier, SetEncoder, VisionTransformer
from minitf.models.encoder import EncoderLM
from minitf.models.lm import DecoderLM
from minitf.models.rnn import RNNLM
from minitf.models.transformer import Transformer

MODELS = {cls.kind: cls for cls in (DecoderLM, Transformer, EncoderClassifier, VisionTransformer,
                                    EncoderLM, SetEncoder, RNNLM)}


def build(kind: str, config: dict) -> Model:
    """The model of family ``kind`` ("lm", "seq2seq", "classifier", "vit", "mlm", "set", "rnn")
    built from ``config``."""
    if not isinstance(kind, str) or kind not in MODELS:      # (a list is no key: unhashable)
        raise ValueError(f"build: unknown model kind {kind!r}; wanted one of {tuple(MODELS)}")
    if not isinstance(config, dict):
        raise TypeError(f"build: config is a {type(config).__name__}; wanted a dict of the "
                        f"model's settings")
    check_settings(MODELS[kind], config, "build")
    return MODELS[kind](**config)


def check_settings(model: type, config: dict, where: str, complete: bool = True) -> None:
    """ValueError naming a key of ``config`` that ``model`` (a class) does not take, or, with
    ``complete``, a setting it needs that config lacks: Python's "__init__() got an unexpected
    keyword argument" names no family, and a typo read by the cost model alone would be ignored."""
    takes = inspect.signature(model).parameters
    unknown = [key for key in config if key not in takes]
    missing = [name for name, p in takes.items() if complete
               and p.default is inspect.Parameter.empty and name not in config]
    if unknown or missing:
        keys = unknown or missing
        named = ", ".join(map(repr, keys[:3])) + (f" and {len(keys) - 3} more" if len(keys) > 3
                                                  else "")
        got = (f"has {named}, which {model.__name__} does not take" if unknown else
               f"lacks {named}, which {model.__name__} needs")
        raise ValueError(f"{where}: config {got}; wanted {model.__name__}'s settings (the "
                         f"model.config of one, or a checkpoint's)")


__all__ = ["Model", "DecoderLM", "Transformer", "EncoderClassifier", "VisionTransformer",
           "EncoderLM", "SetEncoder", "RNNLM", "MODELS", "build", "check_settings"]
