"""symjax.nn: layers (modules), activations, optimizers, losses, schedules, initializers.

    net = nn.Sequential([nn.Dense(784, 128), nn.ReLU(), nn.Dropout(0.1), nn.Dense(128, 10)])
    logits = net(x, mode="train")          # or deterministic=False, SymJAX's flag
    loss = nn.losses.sparse_softmax_crossentropy_logits(y, logits).mean()
    opt = nn.optimizers.Adam(1e-3)
    train = sj.function(x, y, outputs=loss, updates={**opt.minimize(loss), **sj.state_updates(loss)})
"""
from . import activations, initializers, layers, losses, metrics, optimizers, schedules
from .activations import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403
from .._core.nn import Module
from .parallel import DataParallel, average_gradients, broadcast_variables

init = initializers
optim = optimizers
