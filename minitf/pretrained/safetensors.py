"""Read a ``.safetensors`` file with NumPy alone: no pickle, so no code from the file is run.

The format is three parts, one after the other::

    8 bytes      N, the length of the header, a little-endian unsigned 64-bit integer
    N bytes      a JSON object: {name: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}}
                 (and an optional "__metadata__" entry of strings)
    the rest     every tensor's raw little-endian bytes, at [b, e) counted from here

So reading it is: parse the JSON, then view each byte range as an array of the stated dtype and
shape. That is the whole reader (a dozen lines, and the checks that name a damaged file), which
is why minitf does not depend on the ``safetensors`` package for it. The arrays stay on the host;
the model moves them to the device.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from minitf.validate import check_path

# The dtype names of the format -> NumPy dtypes, little-endian ("<").  BF16 has no NumPy dtype and
# is widened to float32 below (bfloat16 is the top half of a float32).
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U8": "u1", "BOOL": "?"}
MAX_HEADER_BYTES = 100_000_000          # the format's own limit on the header


def read_safetensors(path) -> dict:
    """{name: NumPy array} for every tensor in the file at ``path`` (a fresh copy of each)."""
    check_path(path, "path", "read_safetensors")
    if Path(path).is_dir():                    # Python's IsADirectoryError named no function
        raise ValueError(f"read_safetensors: {path} is a folder; wanted a .safetensors file (a "
                         f"model directory's model.safetensors)")
    try:
        data = Path(path).read_bytes()
    except OSError as err:                     # pathlib's own words named no function
        raise type(err)(f"read_safetensors: {path}: {err.strerror}; wanted a "
                        f"readable .safetensors file") from None
    if len(data) < 8:
        raise ValueError(f"read_safetensors: {path} has {len(data)} bytes; wanted a safetensors "
                         f"file (an 8-byte header length, a JSON header, the tensors)")
    n = int.from_bytes(data[:8], "little")
    if n > min(MAX_HEADER_BYTES, len(data) - 8):
        raise ValueError(f"read_safetensors: {path} announces a header of {n} bytes in a file of "
                         f"{len(data)}; not a safetensors file")
    try:
        header = json.loads(data[8:8 + n])
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"read_safetensors: {path}: the header is not JSON ({err})") from None
    if not isinstance(header, dict):
        raise ValueError(f"read_safetensors: {path}: the header is a {type(header).__name__}; "
                         f"wanted a JSON object of tensors")
    header.pop("__metadata__", None)
    body = memoryview(data)[8 + n:]
    return {name: _tensor(name, entry, body, path) for name, entry in header.items()}


def _tensor(name: str, entry, body, path):
    """One tensor of the file, a fresh copy, after checking that its entry describes bytes that
    are there: a truncated or altered file is named, not reshaped into an error from NumPy."""
    where = f"read_safetensors: {path}: tensor {name!r}"
    try:
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        shape = tuple(int(size) for size in shape)
    except (TypeError, KeyError, ValueError):
        raise ValueError(f"{where}: wanted an entry with dtype, shape and data_offsets "
                         f"[begin, end]; got {str(entry)[:60]}") from None
    if dtype != "BF16" and dtype not in DTYPES:
        raise ValueError(f"{where} has dtype {dtype!r}; wanted one of {tuple(DTYPES) + ('BF16',)}")
    itemsize = 2 if dtype == "BF16" else np.dtype(DTYPES[dtype]).itemsize
    wanted = itemsize * int(np.prod(shape, dtype=np.int64))
    if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= len(body)
            and end - begin == wanted):
        raise ValueError(f"{where}: data_offsets [{begin}, {end}] in a body of {len(body)} bytes; "
                         f"wanted {wanted} bytes for shape {shape} of {dtype} (a truncated or "
                         f"altered file?)")
    raw = body[begin:end]
    if dtype == "BF16":                                # the upper 16 bits of a float32
        array = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        array = np.frombuffer(raw, DTYPES[dtype])
    return array.reshape(shape).copy()
