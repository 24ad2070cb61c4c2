"""A Keras MLP on digits, recorded by honestscale's callback: keras_digits.py DATA.npz HISTORY.json [--legacy]

DATA.npz: examples/record/digits_npz.py writes it; HISTORY.json: fit's own History, for comparison. --legacy: the
model and the callback are tf-keras's (Keras 2), else Keras 3's.
"""

import json
import sys
from pathlib import Path

import numpy as np

legacy = "--legacy" in sys.argv
if legacy:
    import tf_keras as keras

    from honestscale.record.keras import LegacyHonestscaleCallback as HonestscaleCallback
else:
    import keras

    from honestscale.record.keras import HonestscaleCallback

keras.utils.set_random_seed(0)
d = np.load(sys.argv[1])
model = keras.Sequential(
    [keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)]
)
model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
callback = HonestscaleCallback(batch_size=64, train_size=len(d["y_train"]), test=True, campaign="keras-digits",
                               dataset="digits", data_source="in_memory")  # fmt: skip
history = model.fit(d["x_train"], d["y_train"], batch_size=64, epochs=2, verbose=0, callbacks=[callback],
                    validation_data=(d["x_validation"], d["y_validation"]))  # fmt: skip
test = model.evaluate(d["x_test"], d["y_test"], verbose=0, callbacks=[callback], return_dict=True)
with Path(sys.argv[2]).open("w") as f:
    json.dump({"history": history.history, "test": test, "keras": keras.__version__}, f)
