"""Bring your own model: ``--model path/to/file.py:build`` (and ``--dataset path/to/file.py:dataset``).

The file is the user's single-device code: ``build`` returns a plain model (a PyTorch ``nn.Module`` or a Keras
``Model``), which the runner then distributes with the framework's standard wrapper (DDP, Horovod's
DistributedOptimizer, MultiWorkerMirroredStrategy). The factory may take ``input_shape`` (channels first, as
honestscale records shapes) and ``num_classes`` keyword arguments; a ``dataset`` factory returns
``{"train": (x, y), "validation": (x, y), "test": (x, y)}`` NumPy arrays (images channels first).

``python -m honestscale.runners.usermodel --framework torch --model file.py:build [--dataset ...]`` checks all
of it in the framework's environment before any worker starts: the file imports, the function is there, it
returns the right type, and the model's output fits the dataset's labels. Standard library only at import time.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any


class UserModelError(ValueError):
    """The user's model or dataset file cannot be used; the message names the file, the function and the fix."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.args[0]}; fix: {self.fix}"


class WrongFamily(UserModelError):
    """The model is written for another framework family (a Keras model for torch, a file importing torch in
    TensorFlow's environment): not a broken file, a framework that cannot run it."""


FRAMEWORK_MODULES = ("torch", "tensorflow", "keras", "tf_keras", "mxnet")


def is_spec(value: str | None) -> bool:
    """Whether a --model/--dataset value names a user file (``file.py:function``) rather than a built-in."""
    return bool(value) and ".py:" in str(value)


def split_spec(spec: str) -> tuple[Path, str]:
    path, _, func = spec.rpartition(":")
    if not path.endswith(".py") or not func.isidentifier():
        raise UserModelError(f"{spec!r} is not FILE.py:FUNCTION", "write e.g. --model models/mycnn.py:build")
    return Path(path), func


def _load(path: Path) -> ModuleType:
    if not path.is_file():
        raise UserModelError(
            f"{path}: no such file", "check the path (relative to where you run honestscale)"
        )
    spec = importlib.util.spec_from_file_location(f"honestscale_user_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UserModelError(f"{path}: cannot be imported as a Python module", "name it *.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # its own helper modules beside it
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise _other_framework(path, exc) or _import_error(path, exc) from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module


def _other_framework(path: Path, exc: Exception) -> WrongFamily | None:
    """A file written for another framework, run in this framework's environment: it cannot import that one."""
    if not isinstance(exc, ModuleNotFoundError) or (exc.name or "").split(".")[0] not in FRAMEWORK_MODULES:
        return None
    return WrongFamily(f"{path} imports {exc.name}, which this framework's environment does not have",
                       "train it with the framework it is written for")  # fmt: skip


def _import_error(path: Path, exc: Exception) -> UserModelError:
    tb = traceback.extract_tb(exc.__traceback__)
    line = next((f.lineno for f in reversed(tb) if Path(f.filename).resolve() == path.resolve()), None)
    where = f"{path}, line {line}" if line else str(path)
    return UserModelError(
        f"{where}: importing it raised {type(exc).__name__}: {exc}",
        "fix the file so that `python " + str(path) + "` runs without error",
    )


def factory(spec: str) -> tuple[Path, str, Any]:
    """The user's function named by ``spec``."""
    path, func = split_spec(spec)
    module = _load(path)
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        found = sorted(
            n for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == module.__name__
        )
        raise UserModelError(
            f"{path}: no function {func!r}",
            f"define def {func}(input_shape, num_classes) returning the model"
            + (f"; functions there: {', '.join(found)}" if found else ""),
        )
    return path, func, fn


def call(fn: Any, path: Path, func: str, **available: Any) -> Any:
    """Call the factory with the keyword arguments it names among ``available``."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    unknown = [
        n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                        p.KEYWORD_ONLY) and n not in available
    ]  # fmt: skip
    if unknown:
        raise UserModelError(
            f"{path}: {func}() needs {', '.join(unknown)}, which honestscale does not know",
            f"give them defaults; honestscale passes only {', '.join(available)}",
        )
    kwargs = {k: v for k, v in available.items() if k in params}
    try:
        return fn(**kwargs)
    except Exception as exc:
        raise _other_framework(path, exc) or UserModelError(
            f"{path}: {func}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) raised {type(exc).__name__}: {exc}",
            f"fix {func}() so that it builds the model for these arguments",
        ) from None


def label(value: str) -> str:
    """A built-in model's name, or ``<stem>-<function>`` for a user file: safe in run ids and folder names."""
    return name(value).replace(":", "-") if is_spec(value) else value


def resolved(spec: str) -> str:
    """The same ``FILE.py:FUNCTION`` with the file's absolute path (for a spec run from another folder)."""
    path, func = split_spec(spec)
    return f"{path.resolve()}:{func}"


def name(spec: str) -> str:
    """The model name recorded for a user model: ``<file stem>:<function>``."""
    path, func = split_spec(spec)
    return f"{path.stem}:{func}"


def dataset(spec: str) -> dict[str, tuple[Any, Any]]:
    """The user's dataset factory's splits, checked."""
    import numpy as np

    path, func, fn = factory(spec)
    splits = call(fn, path, func)
    if not isinstance(splits, dict) or not all(s in splits for s in ("train", "validation", "test")):
        raise UserModelError(
            f"{path}: {func}() returned {type(splits).__name__}, not a dict with train, validation and test",
            'return {"train": (x, y), "validation": (x, y), "test": (x, y)} of NumPy arrays',
        )
    out = {}
    for s in ("train", "validation", "test"):
        try:
            x, y = splits[s]
            x, y = np.asarray(x, dtype=np.float32), np.asarray(y).astype(np.int64)
        except (TypeError, ValueError) as exc:
            raise UserModelError(f"{path}: {func}()[{s!r}] is not an (x, y) pair of arrays ({exc})",
                                 "return NumPy arrays: x (N, ...) float, y (N,) integer class labels") from None  # fmt: skip
        if len(x) != len(y) or len(x) == 0:
            raise UserModelError(f"{path}: {func}()[{s!r}] has {len(x)} inputs and {len(y)} labels",
                                 "give each split as many labels as inputs, at least one")  # fmt: skip
        out[s] = (x, y)
    return out


def _torch_family(framework: str) -> bool:
    return framework in ("torch", "horovod-torch")


def build(spec: str, framework: str, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """The user's plain model from ``spec``, checked to be what ``framework``'s runner distributes."""
    path, func, fn = factory(spec)
    model = call(fn, path, func, input_shape=input_shape, num_classes=num_classes)
    if _torch_family(framework):
        import torch

        if not isinstance(model, torch.nn.Module):
            raise WrongFamily(
                f"{path}: {func}() returned {type(model).__name__}, not a torch.nn.Module",
                "return the plain single-device model (e.g. nn.Sequential(...)); honestscale wraps it in DDP",
            )
    else:
        from honestscale.runners import _keras

        if not isinstance(model, _keras.keras2().Model):
            raise WrongFamily(
                f"{path}: {func}() returned {type(model).__name__}, not a Keras Model (tf_keras / tf.keras)",
                "return an uncompiled keras.Model; honestscale compiles and distributes it",
            )
    return model


def check(framework: str, model_spec: str, data: dict[str, tuple[Any, Any]]) -> dict[str, object]:
    """Build the user's model as the runner will and run one batch through it; return its name and size."""
    import numpy as np

    x = data["train"][0]
    shape = tuple(int(d) for d in x.shape[1:])
    classes = int(max(int(np.max(v[1])) for v in data.values())) + 1
    path, func = split_spec(model_spec)
    model = build(model_spec, framework, shape, classes)
    batch = np.asarray(x[:2], dtype=np.float32)
    if _torch_family(framework):
        import torch

        try:
            with torch.no_grad():
                out = model(torch.from_numpy(batch))
        except Exception as exc:
            raise UserModelError(
                f"{path}: the model from {func}() fails on a batch of shape {tuple(batch.shape)}: {type(exc).__name__}: {exc}",
                f"make its input layer accept (batch, {', '.join(map(str, shape))}) (input_shape is passed to {func})",
            ) from None
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    else:
        from honestscale.runners import _keras

        keras_batch = np.transpose(batch, (0, 2, 3, 1)) if batch.ndim == 4 else batch
        try:
            out = model(keras_batch, training=False)
        except Exception as exc:
            raise UserModelError(
                f"{path}: the model from {func}() fails on a batch of shape {tuple(keras_batch.shape)} "
                f"(channels last): {type(exc).__name__}: {exc}",
                "make its Input accept (height, width, channels)",
            ) from None
        params = _keras.trainable_params(model)
    out_shape = tuple(int(d) for d in out.shape)
    if out_shape != (len(batch), classes):
        raise UserModelError(
            f"{path}: the model from {func}() outputs shape {out_shape} for {len(batch)} samples, "
            f"but the dataset has {classes} classes",
            f"end the model with {classes} outputs (logits, one per class), e.g. use num_classes",
        )
    return {"model": name(model_spec), "params": params, "input_shape": list(shape), "classes": classes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m honestscale.runners.usermodel", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--framework", required=True)
    p.add_argument("--model", required=True)
    p.add_argument(
        "--dataset", default="digits", help="digits, synthetic, memmap (with --data-path) or FILE.py:FUNC"
    )
    p.add_argument("--data-path")
    args = p.parse_args(argv)
    from honestscale.runners import data as datasets

    try:
        if is_spec(args.dataset):
            data = dataset(args.dataset)
        elif args.dataset == "memmap" and args.data_path:
            data = datasets.memmap_arrays(args.data_path)
        elif args.dataset == "synthetic":
            data = datasets.synthetic_arrays(100)
        else:
            data = datasets.digits_arrays()
        print(json.dumps(check(args.framework, args.model, data)))
    except (UserModelError, datasets.DataError) as exc:
        print(json.dumps({"error": str(exc), "wrong_family": isinstance(exc, WrongFamily)}))
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
