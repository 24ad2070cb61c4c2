"""Write scikit-learn's digits as train/validation/test NumPy arrays (the plain loop's data): digits_npz.py OUT.npz"""

import sys

import numpy as np
from sklearn.datasets import load_digits

x, y = load_digits(return_X_y=True)
order = np.random.default_rng(0).permutation(len(y))
x, y = (x[order] / 16).astype(np.float32), y[order].astype(np.int64)
np.savez(sys.argv[1], x_train=x[:1400], y_train=y[:1400], x_validation=x[1400:1600], y_validation=y[1400:1600],
         x_test=x[1600:], y_test=y[1600:])  # fmt: skip
