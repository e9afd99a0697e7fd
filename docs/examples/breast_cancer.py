"""Train a classifier on scikit-learn's breast-cancer data with lambdad's gradients.

The model and its loss are the lambdad program breast_cancer.lam (arrays: one matrix
product for the whole data set); this script only loads the data, splits it, and runs
gradient descent with the gradients lambdad computes.  Needs scikit-learn (the `data`
extra: pip install -e '.[data]'):

    python docs/examples/breast_cancer.py
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer

import lambdad

program = lambdad.load(Path(__file__).with_name("breast_cancer.lam"))

data = load_breast_cancer()
x, y = data.data, data.target.astype(float)
# A fixed split: every fourth tumour is kept for testing.
test = np.arange(len(y)) % 4 == 0
mean, spread = x[~test].mean(axis=0), x[~test].std(axis=0)
x = (x - mean) / spread  # standardised with the training rows' statistics
x_train, y_train, x_test, y_test = x[~test], y[~test], x[test], y[test]

w, b = np.zeros(x.shape[1]), 0.0
for step in range(300):
    # the gradient with respect to w and b only (the data are constants)
    value, (gw, gb) = program.value_and_grad("loss", (w, b, x_train, y_train), wrt=["w", "b"])
    w, b = w - 0.5 * gw, b - 0.5 * gb
    if step % 100 == 0:
        print(f"step {step:3d}: loss {value:.4f}")

print(f"final loss {program.call('loss', (w, b, x_train, y_train)):.4f}")
print(f"training accuracy {program.call('accuracy', (w, b, x_train, y_train)):.3f}")
print(f"test accuracy {program.call('accuracy', (w, b, x_test, y_test)):.3f}")
