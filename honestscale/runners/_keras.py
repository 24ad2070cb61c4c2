"""Keras 2 for whichever TensorFlow this environment has (imported inside functions: standard library at import).

honestscale trains Keras 2 models: TensorFlow <= 2.15 has it as ``tf.keras``; from 2.16 ``tf.keras`` is Keras 3
and Keras 2 is the separate ``tf_keras`` package (Keras 3's ``fit`` does not run under MultiWorkerMirroredStrategy,
and Horovod's Keras front end wraps Keras 2 optimizers).
"""

from __future__ import annotations

from typing import Any


def legacy_needed(tf: Any) -> bool:
    """Whether this TensorFlow's ``tf.keras`` is Keras 3 (>= 2.16), so Keras 2 is ``tf_keras``."""
    return int(tf.__version__.split(".")[1]) >= 16


def keras2() -> Any:
    """The Keras 2 module for this TensorFlow."""
    import tensorflow as tf

    if legacy_needed(tf):
        import tf_keras

        return tf_keras
    return tf.keras


def version(keras: Any) -> str:
    """tf_keras has __version__; the Keras 2 inside TensorFlow <= 2.15 is the ``keras`` package's."""
    if hasattr(keras, "__version__"):
        return str(keras.__version__)
    from importlib.metadata import version as installed

    return installed("keras")


def trainable_params(model: Any) -> int:
    """Trainable parameters, counted as PyTorch counts them (BatchNorm's moving statistics excluded)."""
    import numpy as np

    return int(sum(np.prod(w.shape) for w in model.trainable_weights))
