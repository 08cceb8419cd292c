# SymJAX's tests/doc.py: the doctests of symjax/base.py, symjax/nn/schedules.py and
# symjax/tensor/control_flow.py (symjax/tensor/base.py has none), run with doctest. Each example
# is SymJAX's text; the changes (docs/python.md, "Differences") are:
#  - Scope: `.scope` of an op (out.scope) is not available (sj's C++ API gives the scope of
#    variables, and a scope's ops); those lines read the scope from the scope's side, and the
#    printed `scope.ops` shows sj's repr (Tensor(name=..., shape=..., dtype=...));
#  - ExponentialMovingAverage: the printed numbers were made by a SymJAX whose EMA started at the
#    first value; that is sj's exponential_moving_average(start_at_first=True); the print of
#    get_updates() shows SymJAX's internal variables and is left out; the printed values are
#    compared to 1e-6 (the last float32 digit depends on the order of the arithmetic);
#  - PiecewiseConstant: this docstring returns the value only, while SymJAX's own
#    schedules_test.py unpacks (value, counter); the port follows the test and the docstring
#    takes `var, step = ...`;
#  - control_flow.py's examples (map, scan) run unchanged.
import doctest

import pytest

BASE_SCOPE = """
>>> import symjax
>>> import symjax.tensor as T
>>> v = T.Variable(1, name='v')
>>> # the current (default) scope is the root of the graph
>>> print(v.scope)
/
>>> with symjax.Scope('my_scope'):
...     w = T.Variable(2, name='w')
...     out = v*w
>>> print([s.absolute_name for s in [symjax.Scope(absolute_name='/my_scope/')] if any(o.same(out) for o in s.ops)][0])
/my_scope/
>>> print(w.scope)
/my_scope/
>>> #it is also possible to keep a scope persistently
>>> scope = symjax.Scope('second_scope')
>>> with scope:
...     other = out * w
>>> print(scope.absolute_name)
/second_scope/
>>> # this allows to keep track directly of internal ops
>>> print(scope.ops)
[Tensor(name=mul(mul(v, my_scope/w), my_scope/w), shape=(), dtype=int32)]
"""

BASE_RESET_VARIABLES = """
>>> import symjax
>>> w = symjax.tensor.Variable(1., name='w', dtype='float32')
>>> x = symjax.tensor.Variable(2., name='x', dtype='float32')
>>> f = symjax.function(outputs=[w, x], updates={w:w + 1,x:x + 1})
>>> for i in range(10):
...    print(f())
[array(1., dtype=float32), array(2., dtype=float32)]
[array(2., dtype=float32), array(3., dtype=float32)]
[array(3., dtype=float32), array(4., dtype=float32)]
[array(4., dtype=float32), array(5., dtype=float32)]
[array(5., dtype=float32), array(6., dtype=float32)]
[array(6., dtype=float32), array(7., dtype=float32)]
[array(7., dtype=float32), array(8., dtype=float32)]
[array(8., dtype=float32), array(9., dtype=float32)]
[array(9., dtype=float32), array(10., dtype=float32)]
[array(10., dtype=float32), array(11., dtype=float32)]
>>> # reset only the w variable
>>> symjax.reset_variables('w')
>>> # reset all variables
>>> symjax.reset_variables('*')
"""

BASE_GRADIENTS = """
>>> import symjax
>>> w = symjax.tensor.ones(3)
>>> x = symjax.tensor.Variable(2., name='x', dtype='float32')
>>> l = (w ** 2).sum() * x
>>> g = symjax.gradients(l, [w])[0]
>>> f = symjax.function(outputs=g, updates={x:x + 1})
>>> for i in range(2):
...    print(f())
[4. 4. 4.]
[6. 6. 6.]
"""

BASE_FUNCTION = """
>>> import symjax
>>> import symjax.tensor as T
>>> x = T.ones((4, 4))
>>> xs = x.sum() + 1
>>> f = symjax.function(outputs=xs)
>>> print(f())
17.0
>>> w = T.Variable(0., name='w', dtype='float32')
>>> increment = symjax.function(updates={w: w + 1})
>>> for i in range(10):
...     increment()
>>> print(w.value)
10.0
"""

SCHEDULES_EMA = """
>>> import symjax
>>> import numpy as np
>>> np.random.seed(0)
>>> symjax.current_graph().reset()
>>> # suppose we want to do an EMA of a vector user-input
>>> input = symjax.tensor.Placeholder((2,), 'float32')
>>> ema, var, updates, _ = symjax.nn.schedules.exponential_moving_average(input, 0.9, debias=False, start_at_first=True)
>>> # example of use:
>>> f = symjax.function(input, outputs=ema, updates=updates)
>>> printed = np.array([[1.5292157, 1.1200472],
...            [1.5056562, 1.1752692],
...            [1.5111173, 1.1284239],
...            [1.4885082, 1.1110408],
...            [1.4365609, 1.1122546],
...            [1.3972261, 1.1446574],
...            [1.3803346, 1.1338419],
...            [1.355617, 1.1304679],
...            [1.3648777, 1.1112664],
...            [1.3377819, 1.0745169],
...            [1.227414, 1.0866737],
...            [1.2306056, 1.0557414],
...            [1.2756376, 1.0065362],
...            [1.2494465, 1.000267],
...            [1.2704852, 1.0443211],
...            [1.2480851, 1.0512339],
...            [1.196643, 0.9866866],
...            [1.1665413, 0.9927084],
...            [1.186796, 1.029509],
...            [1.1564965, 1.017489],
...            [1.1093903, 0.97313946],
...            [1.0472631, 1.0343488],
...            [1.0272473, 1.0177717],
...            [0.9869387, 1.0393193],
...            [0.93982786, 1.029005]])
>>> for i in range(25):
...     assert np.allclose(f(np.ones(2) + np.random.randn(2) * 0.3), printed[i], rtol=0, atol=1e-6), i
"""

SCHEDULES_PIECEWISE = """
>>> import symjax
>>> symjax.current_graph().reset()
>>> var, step = symjax.nn.schedules.PiecewiseConstant(0.1, {4:1, 8:2})
>>> f = symjax.function(outputs=var, updates={step: step + 1})
>>> for i in range(10):
...    print(f())
0.1
0.1
0.1
0.1
1.0
1.0
1.0
1.0
2.0
2.0
"""


def _run(text, name):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, name, name, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "%s: %d of %d examples failed" % (name, result.failed,
                                                                result.attempted)


@pytest.mark.parametrize("name", ["BASE_SCOPE", "BASE_RESET_VARIABLES", "BASE_GRADIENTS",
                                  "BASE_FUNCTION", "SCHEDULES_EMA", "SCHEDULES_PIECEWISE"])
def test_doc(name):
    _run(globals()[name], name)


CONTROL_FLOW_MAP = """
>>> import symjax.tensor as T
>>> import symjax
>>> x = T.ones(3)
>>> y = T.zeros(3)
>>> w = T.arange(3)
>>> out = T.map(lambda x, i, w: T.index_update(w, i, x), sequences=[x, w], non_sequences=[y])
>>> f = symjax.function(outputs=out)
>>> f()
array([[1., 0., 0.],
       [0., 1., 0.],
       [0., 0., 1.]], dtype=float32)
"""

CONTROL_FLOW_SCAN = """
>>> import symjax.tensor as T
>>> import symjax
>>> indices = T.Placeholder((3,), 'int32')
>>> w = T.arange(10)
>>> out = T.scan(lambda acc, i, w, : (acc + w[i],i), T.zeros(1), sequences=[indices], non_sequences=[w])
>>> # out first element is the carry, the second is the stacked second outputs of the function
>>> f = symjax.function(indices, outputs=out)
>>> f([0,2,3])
[array([5.], dtype=float32), array([0, 2, 3], dtype=int32)]
>>> f([1, 1, 1])
[array([3.], dtype=float32), array([1, 1, 1], dtype=int32)]
"""


@pytest.mark.parametrize("name", ["CONTROL_FLOW_MAP", "CONTROL_FLOW_SCAN"])
def test_doc_control_flow(name):
    _run(globals()[name], name)
