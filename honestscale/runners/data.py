"""Datasets as NumPy arrays, shared by every framework's runner (NumPy and scikit-learn only)."""

from __future__ import annotations

from typing import Any


class DataError(ValueError):
    """The dataset cannot be used; the message names the path and the fix."""


def digits_arrays(seed: int = 0) -> dict[str, tuple[Any, Any]]:
    """scikit-learn's bundled 8x8 digits (1,797 images, offline): 1,257 train / 270 validation / 270 test.

    Images as float32 (N, 1, 8, 8) in [0, 1], labels int64. The split is fixed (stratified, seed 0)
    whatever the run's seed, so the test set never moves, and is the same in every framework.
    """
    try:
        import numpy as np
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        raise DataError("the digits dataset needs scikit-learn: pip install scikit-learn") from None
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = y.astype(np.int64)
    x_tr, x_rest, y_tr, y_rest = train_test_split(x, y, test_size=540, random_state=seed, stratify=y)
    x_va, x_te, y_va, y_te = train_test_split(
        x_rest, y_rest, test_size=270, random_state=seed, stratify=y_rest
    )
    return {"train": (x_tr, y_tr), "validation": (x_va, y_va), "test": (x_te, y_te)}


SPLITS = ("train", "validation", "test")


def memmap_arrays(folder: Any) -> dict[str, tuple[Any, Any]]:
    """``<folder>/{train,validation,test}_{x,y}.npy``: images read through memory maps (real file I/O per batch),
    labels loaded. Images (N, C, H, W) or (N, features), channels first as every runner records them."""
    from pathlib import Path

    import numpy as np

    folder = Path(folder)
    out = {}
    for split in SPLITS:
        files = [folder / f"{split}_{part}.npy" for part in ("x", "y")]
        for f in files:
            if not f.is_file():
                raise DataError(
                    f"{f} is missing: a memmap dataset needs {', '.join(f'{s}_x.npy and {s}_y.npy' for s in SPLITS)}"
                )
        out[split] = (np.load(files[0], mmap_mode="r"), np.load(files[1]).astype(np.int64))
    return out


def synthetic_arrays(
    size: int, shape: tuple[int, ...] = (1, 8, 8), classes: int = 10
) -> dict[str, tuple[Any, Any]]:
    """Random inputs and labels (recorded as ``synthetic``): throughput only, accuracy means nothing."""
    import numpy as np

    rng = np.random.default_rng(0)
    return {
        s: (rng.standard_normal((m, *shape)).astype("float32"), rng.integers(0, classes, m))
        for s, m in (("train", size), ("validation", size // 10), ("test", size // 10))
    }
