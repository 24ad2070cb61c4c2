"""Datasets and models of the PyTorch runner (torchvision is not assumed: everything is defined here)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from honestscale.runners.data import DataError as DataError  # re-exported for the runner
from honestscale.runners.data import digits_arrays, memmap_arrays

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".webp"}


@dataclass
class Splits:
    train: Dataset[Any]
    validation: Dataset[Any]
    test: Dataset[Any]
    input_shape: tuple[int, ...]
    num_classes: int
    name: str
    source: str  # filesystem | in_memory | synthetic
    path: str | None = None

    def sizes(self) -> dict[str, int]:
        return {f"{k}_size": len(getattr(self, k)) for k in ("train", "validation", "test")}  # type: ignore[arg-type]


def from_arrays(arrays: dict[str, tuple[Any, Any]], name: str, source: str = "in_memory") -> Splits:
    """NumPy splits ``{"train": (x, y), ...}`` held in memory."""

    def ds(split: str) -> TensorDataset:
        x, y = arrays[split]
        return TensorDataset(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.asarray(y)))

    shape = tuple(int(d) for d in arrays["train"][0].shape[1:])
    classes = int(max(int(np.max(y)) for _x, y in arrays.values())) + 1
    return Splits(ds("train"), ds("validation"), ds("test"), shape, classes, name, source)


def digits(seed: int = 0) -> Splits:
    """scikit-learn's bundled 8x8 digits, split as every runner splits it (see ``honestscale.runners.data.digits_arrays``)."""
    return from_arrays(digits_arrays(seed), "digits")


class _Synthetic(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Random inputs made on the fly (deterministic per index): no I/O at all, which is why it is flagged."""

    def __init__(self, size: int, shape: tuple[int, ...], classes: int, salt: int) -> None:
        self.size, self.shape, self.classes, self.salt = size, shape, classes, salt

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.salt * 1_000_003 + i)
        return torch.randn(self.shape, generator=g), torch.randint(self.classes, (), generator=g)


def synthetic(shape: tuple[int, ...], classes: int, size: int) -> Splits:
    val = max(1, size // 10)
    return Splits(
        _Synthetic(size, shape, classes, 1), _Synthetic(val, shape, classes, 2), _Synthetic(val, shape, classes, 3),
        shape, classes, "synthetic", "synthetic",
    )  # fmt: skip


class _Memmap(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.array(self.x[i], dtype=np.float32)), torch.tensor(int(self.y[i]))


def memmap(path: Path) -> Splits:
    """``<path>/{train,validation,test}_{x,y}.npy`` read through memory maps (real I/O from the filesystem)."""
    arrays = memmap_arrays(path)
    shape = tuple(int(d) for d in arrays["train"][0].shape[1:])
    classes = int(max(int(np.max(y)) for _x, y in arrays.values())) + 1
    train, validation, test = (_Memmap(*arrays[s]) for s in ("train", "validation", "test"))
    return Splits(train, validation, test, shape, classes, path.name, "filesystem", str(path))


class _ImageFiles(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, files: list[tuple[Path, int]], size: int) -> None:
        self.files, self.size = files, size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        from PIL import Image

        path, label = self.files[i]
        with Image.open(path) as img:
            rgb = img.convert("RGB").resize((self.size, self.size))
            arr = np.asarray(rgb, dtype=np.float32) / 255.0
        return torch.from_numpy(arr.transpose(2, 0, 1).copy()), torch.tensor(label)


def image_folder(path: Path, size: int) -> Splits:
    """ImageNet/CIFAR folder layout: ``<path>/train/<class>/*.jpg``, ``val`` (or ``validation``), ``test``.

    Without a ``test`` folder the validation images are split in two halves (fixed order): one
    for selection, one held out as test.
    """
    train_dir = path / "train"
    if not train_dir.is_dir():
        raise DataError(f"{train_dir} does not exist: an image folder needs train/<class>/ images")
    classes = sorted(d.name for d in train_dir.iterdir() if d.is_dir())
    if not classes:
        raise DataError(f"{train_dir} has no class folders")
    index = {c: i for i, c in enumerate(classes)}

    def files(split_dir: Path) -> list[tuple[Path, int]]:
        out: list[tuple[Path, int]] = []
        for c in classes:
            folder = split_dir / c
            if folder.is_dir():
                out.extend(
                    (f, index[c]) for f in sorted(folder.iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES
                )
        return out

    val_dir = next((path / n for n in ("val", "validation") if (path / n).is_dir()), None)
    if val_dir is None:
        raise DataError(f"{path} has no val/ or validation/ folder")
    train, val = files(train_dir), files(val_dir)
    test = files(path / "test") if (path / "test").is_dir() else []
    if not test:
        val, test = val[::2], val[1::2]
    if not train or not val or not test:
        raise DataError(
            f"{path}: no images found (train {len(train)}, validation {len(val)}, test {len(test)})"
        )
    return Splits(
        _ImageFiles(train, size), _ImageFiles(val, size), _ImageFiles(test, size), (3, size, size), len(classes),
        path.name, "filesystem", str(path),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- models
class MLP(nn.Sequential):
    def __init__(self, input_shape: tuple[int, ...], classes: int, hidden: int = 128) -> None:
        super().__init__(
            nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(), nn.Linear(hidden, hidden),
            nn.ReLU(), nn.Linear(hidden, classes),
        )  # fmt: skip


class SmallCNN(nn.Sequential):
    def __init__(self, input_shape: tuple[int, ...], classes: int) -> None:
        c = input_shape[0]
        super().__init__(
            nn.Conv2d(c, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(), nn.Linear(128, classes),
        )  # fmt: skip


class _Basic(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.short = _shortcut(cin, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.short(x))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        out = planes * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, planes, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(),
            nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(),
            nn.Conv2d(planes, out, 1, bias=False), nn.BatchNorm2d(out),
        )  # fmt: skip
        self.short = _shortcut(cin, out, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """ResNet-18/50 (He et al. 2016); inputs under 64 px get the CIFAR stem (3x3 conv, no max-pool)."""

    def __init__(self, block: type[_Basic] | type[_Bottleneck], layers: list[int], input_shape: tuple[int, ...],
                 classes: int) -> None:  # fmt: skip
        super().__init__()
        c, h = input_shape[0], input_shape[-1]
        if h < 64:
            self.stem: nn.Module = nn.Sequential(
                nn.Conv2d(c, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(c, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
        cin, stages = 64, []
        for i, n in enumerate(layers):
            planes = 64 * 2**i
            for j in range(n):
                stages.append(block(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * block.expansion
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)))  # type: ignore[no-any-return]


MODELS = ("mlp", "cnn", "resnet18", "resnet50")


def build_model(name: str, input_shape: tuple[int, ...], classes: int) -> nn.Module:
    if name == "mlp":
        return MLP(input_shape, classes)
    if len(input_shape) != 3:
        raise DataError(f"model {name} needs image inputs (C, H, W), the dataset gives {input_shape}")
    if name == "cnn":
        return SmallCNN(input_shape, classes)
    if name == "resnet18":
        return ResNet(_Basic, [2, 2, 2, 2], input_shape, classes)
    if name == "resnet50":
        return ResNet(_Bottleneck, [3, 4, 6, 3], input_shape, classes)
    raise DataError(f"unknown model {name!r}: one of {', '.join(MODELS)}")
