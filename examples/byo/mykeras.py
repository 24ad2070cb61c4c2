"""A user's single-device Keras model (Keras 2: tf_keras, or tf.keras in TensorFlow <= 2.15).

    honestscale run --framework tensorflow --workers 2 --model examples/byo/mykeras.py:build --dataset digits \\
        --epochs 3 --out runs/
"""

from __future__ import annotations

from typing import Any


def build(input_shape: tuple[int, ...], num_classes: int) -> Any:
    import tensorflow as tf

    keras: Any = tf.keras
    if int(tf.__version__.split(".")[1]) >= 16:  # Keras 3 is tf.keras there; honestscale trains Keras 2
        import tf_keras

        keras = tf_keras
    channels, height, width = input_shape  # honestscale gives shapes channels first; Keras wants them last
    inputs = keras.Input((height, width, channels))
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
