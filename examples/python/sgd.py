"""Example: the SymJAX paper's SGD toy, a compiled function that updates a variable in place.

We minimise cost(mu) = exp(-(mu - 1)^2) by gradient descent:
    mu <- mu - 0.2 * d cost / d mu.
The gradient is symbolic (more graph, built once), and the update is applied by the compiled
function after each call, Theano style. The script repeats the iteration in plain Python double
precision with the hand-derived gradient -2 (mu - 1) exp(-(mu - 1)^2), prints the same table as
examples/sgd.cpp and "sgd: OK" when the two agree.

    PYTHONPATH=build/python python3 examples/python/sgd.py
"""
import math
import sys

import numpy as np

import symjax
import symjax.tensor as T

# The variable to optimise (the paper starts from a random draw; a fixed start makes the printed
# numbers reproducible).
mu = T.Variable(np.float32(0.0), name="mu")

# The cost and its gradient, both symbolic tensors.
cost = T.exp(-((mu - 1.0) ** 2.0))
grad = symjax.gradients(cost, mu)

# A function with no inputs, one output, and one update: the output is computed from the value of
# mu before the call; the update is applied afterwards.
step = symjax.function(outputs=cost, updates={mu: mu - 0.2 * grad})

mu_ref = 0.0  # the same iteration by hand, in double
failures = 0
print("%4s %12s %12s %14s" % ("step", "cost", "mu", "closed form"))
for t in range(10):
    mu_before = float(mu.value)
    c = float(step())
    c_ref = math.exp(-(mu_ref - 1.0) ** 2)
    print("%4d %12.6f %12.6f %14.6f" % (t, c, mu_before, c_ref))
    if abs(c - c_ref) > 1e-5 * c_ref or abs(mu_before - mu_ref) > 1e-5:
        print("FAILED at step %d: cost %.9g mu %.9g, expected cost %.9g mu %.9g"
              % (t, c, mu_before, c_ref, mu_ref))
        failures += 1
    g_ref = -2.0 * (mu_ref - 1.0) * c_ref
    mu_ref -= 0.2 * g_ref
mu_final = float(mu.value)
print("final mu %.6f (closed form %.6f)" % (mu_final, mu_ref))
if abs(mu_final - mu_ref) > 1e-5 * abs(mu_ref):
    print("FAILED: final mu %.9g, expected %.9g" % (mu_final, mu_ref))
    failures += 1
if failures:
    print("sgd: %d check(s) FAILED" % failures)
    sys.exit(1)
print("sgd: OK")
