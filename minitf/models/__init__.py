"""Whole models built from minitf.nn: a decoder-only language model, the encoder–decoder
Transformer, an encoder classifier with a CLS token, a Vision Transformer, BERT's masked
language model, an encoder over sets of vectors, and a recurrent language model (the baseline).
Each has a hand-written backward through the whole model."""
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
    return MODELS[kind](**config)


__all__ = ["Model", "DecoderLM", "Transformer", "EncoderClassifier", "VisionTransformer",
           "EncoderLM", "SetEncoder", "RNNLM", "MODELS", "build"]
