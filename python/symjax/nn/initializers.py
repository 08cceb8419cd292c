"""Parameter initializers (Glorot, He, LeCun, orthogonal...): each returns an Initializer, whose
call init(shape, dtype) is a graph without placeholders (a Variable initialiser) and whose
init.array(shape, dtype) is a NumPy array."""
from .._core.nn import Initializer
from .._core.nn.init import (
    compute_fans, constant, glorot_normal, glorot_uniform, he_normal, he_uniform, lecun_normal,
    lecun_uniform, normal, ones, orthogonal, truncated_normal, uniform, zeros,
)

# SymJAX's and Keras's other names
xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal

__all__ = [
    "Initializer", "compute_fans", "constant", "zeros", "ones", "uniform", "normal",
    "truncated_normal", "glorot_uniform", "glorot_normal", "he_uniform", "he_normal",
    "lecun_normal", "lecun_uniform", "orthogonal", "xavier_uniform", "xavier_normal",
    "kaiming_uniform", "kaiming_normal",
]
