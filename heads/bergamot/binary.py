"""Marian's binary model format (``model.*.bin``), as the Bergamot student models store it.

Layout: a u64 version and a u64 tensor count; per tensor four u64 (name length with its NUL, type, shape length,
data length); the NUL-terminated names; the int32 shapes; a u64 padding count and that many bytes; then each
tensor's data in order, each block ``data length`` bytes long (padded to 256 bytes). Types: ``0x404`` float32,
``0x101`` bytes (the ``special:model.yml`` config), ``0x4101`` int8 ("intgemm8") whose ``rows x cols`` bytes are
followed by one float32 multiplier, so ``W = q / multiplier``. An int8 matrix is stored transposed (its bytes run
as ``[cols, rows]``), except the embedding ``Wemb``; :func:`read` undoes that and returns every matrix in the
shape its header names. ``*_QuantMultA`` tensors (activation scales of the int8 engine) are left out.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import torch

from heads.io import InputError

FLOAT32, BYTES, INT8 = 0x404, 0x101, 0x4101
CONFIG = "special:model.yml"
ALIGN = 256
UNTRANSPOSED = ("Wemb",)  # stored as [rows, cols]; every other int8 matrix as [cols, rows]
ACTIVATION_SCALE = "_QuantMultA"


class BinaryModelError(InputError):
    """A file that is not a Marian binary model, or one cut short."""


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def read(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], str]:
    """The float32 tensors of a Marian binary model (int8 ones dequantised) and its ``model.yml`` text."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise BinaryModelError(f"{path}: cannot read the model ({exc})") from None

    def need(end: int, what: str) -> None:
        if end > len(blob):
            raise BinaryModelError(f"{path}: cut short while reading {what} ({len(blob)} bytes); not a complete "
                                   "Marian binary model")

    need(16, "the header")
    version, count = struct.unpack_from("<QQ", blob, 0)
    if version != 1 or not 0 < count < 100_000:
        raise BinaryModelError(f"{path}: not a Marian binary model (version {version}, {count} tensors)")
    offset = 16
    need(offset + 32 * count, "the tensor headers")
    headers = [struct.unpack_from("<QQQQ", blob, offset + 32 * i) for i in range(count)]
    offset += 32 * count
    names = []
    for name_len, *_ in headers:
        need(offset + name_len, "the names")
        names.append(blob[offset : offset + name_len].rstrip(b"\0").decode())
        offset += name_len
    shapes = []
    for _, _, shape_len, _ in headers:
        need(offset + 4 * shape_len, "the shapes")
        shapes.append(struct.unpack_from(f"<{shape_len}i", blob, offset))
        offset += 4 * shape_len
    need(offset + 8, "the padding")
    (padding,) = struct.unpack_from("<Q", blob, offset)
    offset += 8 + padding
    tensors: dict[str, torch.Tensor] = {}
    config = ""
    for name, (_, kind, _, data_len), shape in zip(names, headers, shapes, strict=True):
        need(offset + data_len, name)
        data = blob[offset : offset + data_len]
        offset += data_len
        if name.endswith(ACTIVATION_SCALE):
            continue
        numel = int(np.prod(shape))
        if kind == BYTES:
            if name == CONFIG:
                config = data[:numel].rstrip(b"\0").decode()
            continue
        if kind == FLOAT32:
            values = np.frombuffer(data, dtype="<f4", count=numel).reshape(shape)
        elif kind == INT8:
            q = np.frombuffer(data, dtype=np.int8, count=numel).astype(np.float32)
            (multiplier,) = struct.unpack_from("<f", data, numel)
            if not np.isfinite(multiplier) or multiplier == 0:
                raise BinaryModelError(f"{path}: {name} has an unusable quantisation multiplier {multiplier}")
            q = q / multiplier
            rows, cols = shape
            values = q.reshape(rows, cols) if name in UNTRANSPOSED else q.reshape(cols, rows).T
        else:
            raise BinaryModelError(f"{path}: {name} has tensor type {kind:#x}; this reader knows float32 "
                                   f"({FLOAT32:#x}) and int8 ({INT8:#x})")
        tensors[name] = torch.from_numpy(np.array(values, dtype=np.float32, copy=True))
    if not config:
        raise BinaryModelError(f"{path}: no {CONFIG}: not a Marian model file")
    return tensors, config


def quantise(matrix: torch.Tensor) -> tuple[np.ndarray, float]:
    """int8 values and the multiplier that Marian's int8 format stores for ``matrix`` (``W ~ q / m``)."""
    values = matrix.detach().double().numpy()
    peak = float(np.abs(values).max()) or 1.0
    multiplier = 127.0 / peak
    return np.clip(np.rint(values * multiplier), -127, 127).astype(np.int8), float(np.float32(multiplier))


def write(path: str | os.PathLike, tensors: dict[str, torch.Tensor], config: str) -> None:
    """A Marian binary model of ``tensors``: 2-D weight matrices (``W*`` names) as int8, the rest float32.

    What :func:`read` reads back (the int8 ones to within their quantisation step): how the tests make a tiny
    model in the shipped format without the package that ships one."""
    entries: list[tuple[str, int, tuple[int, ...], bytes]] = []
    for name, tensor in tensors.items():
        shape = tuple(int(s) for s in tensor.shape)
        leaf = name.rsplit("_", 1)[-1]
        if len(shape) == 2 and leaf.startswith("W") and min(shape) > 1:
            q, multiplier = quantise(tensor)
            stored = q if name in UNTRANSPOSED else np.ascontiguousarray(q.T)
            data = stored.tobytes() + struct.pack("<f", multiplier)
            entries.append((name, INT8, shape, data))
        else:
            entries.append((name, FLOAT32, shape, tensor.detach().numpy().astype("<f4").tobytes()))
    text = config.encode() + b"\0"
    entries.append((CONFIG, BYTES, (len(text),), text))
    head = struct.pack("<QQ", 1, len(entries))
    head += b"".join(struct.pack("<QQQQ", len(n) + 1, kind, len(s), _aligned(len(d))) for n, kind, s, d in entries)
    head += b"".join(n.encode() + b"\0" for n, *_ in entries)
    head += b"".join(struct.pack(f"<{len(s)}i", *s) for _, _, s, _ in entries)
    padding = (-(len(head) + 8)) % ALIGN
    head += struct.pack("<Q", padding) + b"\0" * padding
    body = b"".join(d + b"\0" * (_aligned(len(d)) - len(d)) for *_, d in entries)
    Path(path).write_bytes(head + body)
