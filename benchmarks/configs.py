"""The models the benchmarks time, and `minitf train`'s optimizer settings: one list for
vs_torch.py, vs_torch_gpu.py, step_profile.py and compare_revisions.py. Imports nothing heavy."""
from collections import namedtuple

Config = namedtuple("Config", "d_model n_layers n_heads n batch positional", defaults=("learned",))

CONFIGS = {
    "tiny": Config(64, 2, 4, 64, 8),
    "small": Config(128, 2, 4, 128, 16),
    "ref": Config(256, 4, 4, 128, 16),
    "long": Config(256, 4, 4, 512, 4),
    "default": Config(128, 2, 4, 64, 32, "rope"),     # `minitf train`'s model: RunConfig
}

LR, BETAS, WEIGHT_DECAY = 5e-3, (0.9, 0.95), 0.1     # `minitf train`'s AdamW
