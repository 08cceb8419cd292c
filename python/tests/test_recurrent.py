"""symjax.nn's recurrent layers (SimpleRNN/RNN, GRU, LSTM) against PyTorch's: torch's weights are
loaded into ours by name, then outputs, final states and gradients are compared in float64
(to 1e-9: they agree to about 1e-11)."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T
from symjax import nn

torch = pytest.importorskip("torch")

TORCH = {"SimpleRNN": torch.nn.RNN, "GRU": torch.nn.GRU, "LSTM": torch.nn.LSTM}


def pair(kind, input_size, hidden, **options):
    """Our layer and torch's with the same options and torch's weights loaded into ours."""
    torch.manual_seed(0)
    ours = {"SimpleRNN": nn.SimpleRNN, "GRU": nn.GRU, "LSTM": nn.LSTM}[kind](
        input_size, hidden, dtype="float64", **options)
    theirs = TORCH[kind](input_size, hidden, **options).double()
    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in theirs.named_parameters()]
    for name, p in theirs.named_parameters():
        # torch initialises the same way (uniform +-1/sqrt(hidden)); draw fresh values anyway
        with torch.no_grad():
            p.copy_(torch.randn_like(p) * 0.5)
        ours.parameter(name).update(p.detach().numpy())
    return ours, theirs


CASES = [
    ("SimpleRNN", dict()),
    ("SimpleRNN", dict(nonlinearity="relu", num_layers=2)),
    ("GRU", dict()),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(batch_first=True, bias=False)),
    ("LSTM", dict()),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
]


@pytest.mark.parametrize("kind,options", CASES)
def test_outputs_states_and_gradients_match_torch(kind, options):
    Tn, N, I, H = 5, 3, 4, 6
    ours, theirs = pair(kind, I, H, **options)
    dirs = 2 if options.get("bidirectional") else 1
    layers = options.get("num_layers", 1)
    shape = (N, Tn, I) if options.get("batch_first") else (Tn, N, I)
    x0 = np.random.randn(*shape)
    h00 = np.random.randn(layers * dirs, N, H)
    c00 = np.random.randn(layers * dirs, N, H)
    lstm = kind == "LSTM"

    # torch: outputs, states, and the gradients of a random linear functional of them
    xt = torch.tensor(x0, requires_grad=True)
    h0t = torch.tensor(h00, requires_grad=True)
    c0t = torch.tensor(c00, requires_grad=True)
    out_t, state_t = theirs(xt, (h0t, c0t) if lstm else h0t)
    h_t, c_t = state_t if lstm else (state_t, None)
    r_out, r_h, r_c = (np.random.randn(*out_t.shape), np.random.randn(*h_t.shape),
                       np.random.randn(*h_t.shape))
    loss_t = (out_t * torch.tensor(r_out)).sum() + (h_t * torch.tensor(r_h)).sum()
    if lstm:
        loss_t = loss_t + (c_t * torch.tensor(r_c)).sum()
    params_t = [p for _, p in theirs.named_parameters()]
    wrt_t = [xt, h0t] + ([c0t] if lstm else []) + params_t
    grads_t = torch.autograd.grad(loss_t, wrt_t)

    # ours
    x = T.Placeholder(shape, "float64", name="x")
    h0 = T.Placeholder(h00.shape, "float64", name="h0")
    c0 = T.Placeholder(c00.shape, "float64", name="c0")
    if lstm:
        out, (h, c) = ours.run(x, h0=h0, c0=c0)
    else:
        out, h = ours.run(x, h0=h0)
    loss = (out * r_out).sum() + (h * r_h).sum()
    if lstm:
        loss = loss + (c * r_c).sum()
    params = [v for _, v in ours.named_parameters()]
    wrt = [x, h0] + ([c0] if lstm else []) + params
    grads = sj.gradients(loss, wrt)
    outs = [out, h] + ([c] if lstm else [])
    f = sj.function(x, h0, c0, outputs=outs + grads)
    got = f(x0, h00, c00)

    want = [out_t, h_t] + ([c_t] if lstm else []) + list(grads_t)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-9, atol=1e-12)
    # layer(x) is run(x)'s output, from zero states
    zero_state = theirs(xt)[0].detach().numpy()
    np.testing.assert_allclose(sj.function(x, outputs=ours(x))(x0), zero_state, rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_lengths_match_torch_packed_sequences(kind):
    Tn, N, I, H = 6, 4, 3, 5
    ours, theirs = pair(kind, I, H, bidirectional=True)
    x0 = np.random.randn(Tn, N, I)
    lengths = np.array([6, 2, 4, 1])
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x0), torch.tensor(lengths),
                                                     enforce_sorted=False)
    out_p, state = theirs(packed)
    out_t, _ = torch.nn.utils.rnn.pad_packed_sequence(out_p, total_length=Tn)
    h_t = state[0] if kind == "LSTM" else state

    x = T.Placeholder((Tn, None, I), "float64")
    n = T.Placeholder((None,), "int64")
    out, st = ours.run(x, lengths=n)
    h = st[0] if kind == "LSTM" else st
    got_out, got_h = sj.function(x, n, outputs=[out, h])(x0, lengths)
    np.testing.assert_allclose(got_out, out_t.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got_h, h_t.detach().numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["SimpleRNN", "GRU", "LSTM"])
def test_a_batch_of_one_through_an_unknown_batch_size(kind):
    # batch-1 inference: the final states of a batch declared None and bound to 1 per call
    Tn, I, H = 4, 3, 5
    ours, theirs = pair(kind, I, H, num_layers=2)
    x0 = np.random.randn(Tn, 1, I)
    out_t, state = theirs(torch.tensor(x0))
    h_t = state[0] if kind == "LSTM" else state
    x = T.Placeholder((Tn, None, I), "float64")
    out, st = ours.run(x)
    h = st[0] if kind == "LSTM" else st
    got_out, got_h = sj.function(x, outputs=[out, h])(x0)
    assert got_h.shape == (2, 1, H)
    np.testing.assert_allclose(got_out, out_t.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got_h, h_t.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_options_names_and_aliases():
    with sj.Scope("seq"):
        lstm = nn.LSTM(3, 4, 2, bidirectional=True, batch_first=True)
    assert (lstm.input_size, lstm.hidden_size, lstm.num_layers) == (3, 4, 2)
    assert lstm.bidirectional and lstm.batch_first and lstm.bias
    assert lstm.dtype == np.float32
    assert lstm.parameter("weight_hh_l1_reverse").shape == (16, 4)
    assert lstm.parameter("weight_ih_l1").shape == (16, 8)
    assert len(lstm.variables()) == 16
    assert lstm.parameter("bias_ih_l0").full_name.startswith("seq/lstm")
    assert nn.RNN is nn.SimpleRNN
    assert nn.RNN(2, 3, nonlinearity="relu").nonlinearity == "relu"
    assert [n for n, _ in nn.GRU(2, 3, bias=False).named_parameters()] == ["weight_ih_l0",
                                                                          "weight_hh_l0"]
    # batch_first shapes, and an unknown batch size bound per call
    x = T.Placeholder((None, 7, 3), "float32")
    out, (h, c) = lstm.run(x)
    assert out.shape == (None, 7, 8) and h.shape == (4, None, 4)
    o, hv = sj.function(x, outputs=[out, h])(np.random.randn(5, 7, 3).astype(np.float32))
    assert o.shape == (5, 7, 8) and hv.shape == (4, 5, 4)


def test_training_a_gru_reduces_the_loss():
    # a GRU learns to output the running mean of its input
    sj.manual_seed(1)
    gru = nn.GRU(1, 8)
    head = nn.Dense(8, 1)
    x = T.Placeholder((10, None, 1), "float32")
    y = T.Placeholder((10, None, 1), "float32")
    out = gru(x)
    pred = T.reshape(head(T.reshape(out, (-1, 8))), (10, -1, 1))
    loss = ((pred - y) ** 2.0).mean()
    opt = nn.optimizers.Adam(0.02)
    train = sj.function(x, y, outputs=loss, updates=opt.minimize(loss))
    xs = np.random.randn(10, 16, 1).astype(np.float32)
    ys = (np.cumsum(xs, 0) / np.arange(1, 11)[:, None, None]).astype(np.float32)
    first = train(xs, ys)
    for _ in range(60):
        last = train(xs, ys)
    assert last < 0.5 * first


def test_recurrent_errors():
    with pytest.raises(sj.InputError, match="nonlinearity"):
        nn.SimpleRNN(2, 3, nonlinearity="sigmoid")
    with pytest.raises(sj.TypeError, match="f32 or f64"):
        nn.GRU(2, 3, dtype="int32")
    with pytest.raises(sj.ShapeError, match="positive"):
        nn.LSTM(0, 3)
    gru = nn.GRU(2, 3)
    with pytest.raises(sj.ShapeError, match="must be \\[T, N, 2\\]"):
        gru(T.ones((4, 2)))
    with pytest.raises(sj.ShapeError, match="features"):
        gru(T.ones((4, 1, 5)))
    with pytest.raises(sj.Error, match="c0 is only for LSTM"):
        gru.run(T.ones((4, 1, 2)), h0=T.zeros((1, 1, 3)), c0=T.zeros((1, 1, 3)))
    with pytest.raises(sj.ShapeError, match="h0"):
        gru.run(T.ones((4, 1, 2)), h0=T.zeros((2, 1, 3)))
    with pytest.raises(sj.TypeError, match="lengths"):
        gru.run(T.ones((4, 1, 2)), lengths=T.ones(1))
    with pytest.raises(sj.Error, match="has no parameter 'weight_hh_l1'.*weight_ih_l0"):
        gru.parameter("weight_hh_l1")
