// symjax's side of the benchmarks: one JSON line per result (run by bench/run next to the peers).
//
//   symjax_bench elementwise_chain [--n N] [--case fwd|fwd_bwd] [--profile 1]
//   symjax_bench mlp_train [--batch B] [--profile 1]          symjax_bench call_overhead
//   symjax_bench mvn_logpdf [--n N] [--d D]     symjax_bench compile_time --phase cold|disk
//   symjax_bench cnn_train --arch brief|symjax --batch B [--case train|infer|all] [--profile 1]
//   [--flush_denormals 0|1] (default 1: the step repeats one batch, whose gradients fall below
//   the normal range as it is learnt; docs/performance.md, "Denormals") [--static_batch 1]
//   (placeholders of the batch's size instead of -1; docs/performance.md, "A static batch")
//   (mlp_train and cnn_train take --relu maximum: the activations before Note [Relu masks])
//   symjax_bench reduce_rows [--case bn_stats|bias_grad|bias_grad_wide|tokens_wide|channel_sum|all]
//   symjax_bench compile_scaling [--kind elementwise|shared_recurrence|gelu|mlp_step|all]
//                                [--max_steps N | --steps N,N,...] [--width W] [--first_call 0]
//   symjax_bench lstm [--batch 128] [--seq 28] [--input 28] [--hidden 128] [--case train|infer|all]
//   symjax_bench per_example_grads [--batch 128] [--hidden 512] [--model mlp|cnn]
//   symjax_bench conv_stack_infer [--channels 256] [--layers 8] [--size 8] [--batch 1]
//                                 (inference of a stack of 3x3 convs with large weights: Note
//                                 [Folded weights cache]; PyTorch's peer:
//                                 bench/peers/torch_conv_stack.py)
//   symjax_bench scan_checkpoint
//   symjax_bench parallel_threshold   (run twice: SJ_PARALLEL_WORK=0, then unset; see bench/run)
//   symjax_bench random [--n N]   (Philox bits, uniform and bernoulli draws)
//   symjax_bench window_reduce   (2x2 windows: reshape + mean / max, and the pooling ops)
//   symjax_bench sort [--rows R --n N --k K]   (sort, argsort and top_k of f32 along the last axis)
//   symjax_bench rows [--profile 1]   (pad, concat, argmax, one_hot, dynamic_slice and
//                                      dynamic_update_slice of a 1024 x 1024 f32)
//   symjax_bench search [--n N] [--profile 1]   (searchsorted, unique, bincount and histogram of N
//   elements) symjax_bench matmul_update   (Note [Tasks stay on their thread]: an SGD update alone,
//   its
//                                 weight-gradient matmul alone, and both in one function)
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <sys/resource.h>
#include <thread>

using namespace sj;
using Clock = std::chrono::steady_clock;

namespace {

std::map<std::string, std::string> g_opt;
std::string opt(const std::string& k, const std::string& def) {
    auto it = g_opt.find(k);
    return it == g_opt.end() ? def : it->second;
}
int threads() {
    const char* t = std::getenv("SJ_NUM_THREADS");
    return t ? std::atoi(t) : int(std::thread::hardware_concurrency());
}
double peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;
}

/// Median seconds per call: warm-up, an inner loop of at least 0.3 s per sample, 7 samples.
double measure(const std::function<void()>& fn, int warmup = 3, int repeats = 7, double min_s = 0.3) {
    for (int i = 0; i < warmup; ++i) fn();
    auto t = Clock::now();
    fn();
    double one = std::max(std::chrono::duration<double>(Clock::now() - t).count(), 1e-7);
    int inner = std::max(1, int(std::ceil(min_s / one)));
    std::vector<double> s;
    for (int r = 0; r < repeats; ++r) {
        t = Clock::now();
        for (int i = 0; i < inner; ++i) fn();
        s.push_back(std::chrono::duration<double>(Clock::now() - t).count() / inner);
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

/// Milliseconds since t.
double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void emit(const std::string& bench, const std::string& cs, double value, const char* unit,
          const std::string& extra = "") {
    std::printf("{\"bench\": \"%s\", \"case\": \"%s\", \"impl\": \"symjax\", \"threads\": %d, "
                "\"value\": %.6g, \"unit\": \"%s\", \"peak_rss_mb\": %.1f%s%s}\n",
                bench.c_str(), cs.c_str(), threads(), value, unit, peak_rss_mb(), extra.empty() ? "" : ", ",
                extra.c_str());
    std::fflush(stdout);
}

Array randn(const Shape& s, uint64_t seed, double scale = 1.0) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> n(0.f, float(scale));
    Array a(f32, s);
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = n(g);
    return a;
}

void elementwise_chain() {
    int64_t n = std::stoll(opt("n", std::to_string(1 << 24)));
    std::string cs = opt("case", "all");
    Placeholder x({n}, f32, "x");
    Placeholder a({}, f32, "a"), b({}, f32, "b");
    Tensor y = sum(tanh(x * a + b) * sigmoid(x) + exp(-x * x));
    Array xv = randn({n}, 0);
    FunctionOptions fo; // --profile 1: each step timed to its end (on a GPU: kernel vs transfers)
    fo.profile = opt("profile", "0") != "0";
    if (cs == "fwd" || cs == "all") {
        Function f = function({x, a, b}, {y}, {}, fo);
        double s = measure([&] { f(xv, 0.7, -0.2); });
        emit("elementwise_chain", "fwd", s * 1e3, "ms",
             "\"n\": " + std::to_string(n) + ", \"kernels\": " + std::to_string(f.stats().kernels));
        if (fo.profile) // (the report itself is printed when f goes)
            std::fprintf(stderr, "# elementwise_chain fwd\n");
    }
    if (cs == "fwd_bwd" || cs == "all") {
        auto g = gradients(y, {x, a, b});
        Function f = function({x, a, b}, {y, g[0], g[1], g[2]}, {}, fo);
        double s = measure([&] { f(xv, 0.7, -0.2); });
        emit("elementwise_chain", "fwd_bwd", s * 1e3, "ms",
             "\"n\": " + std::to_string(n) + ", \"kernels\": " + std::to_string(f.stats().kernels));
        if (fo.profile) // (the report itself is printed when f goes)
            std::fprintf(stderr, "# elementwise_chain fwd_bwd\n");
    }
}

/// The activation modules, or with `--relu maximum` the forms before Note [Relu masks]
/// (maximum(x, 0), where(x >= 0, x, x * s): their backward reads the pre-activation), for A/B
/// runs of one binary.
bool old_relu() {
    return opt("relu", "select") == "maximum";
}
nn::Lambda relu_module(double slope) {
    return nn::Lambda([slope](const Tensor& x) {
        if (old_relu())
            return slope == 0 ? maximum(x, 0.0) : where(x >= 0.0, x, x * slope);
        return slope == 0 ? nn::relu(x) : nn::leaky_relu(x, slope);
    });
}

struct Mlp {
    Placeholder x{{-1, 784}, f32, "x"};
    Placeholder y{{-1}, i32, "y"};
    std::vector<Variable> params, vel;
    Tensor loss;
    Updates upd;
    explicit Mlp(int hidden) {
        int dims[] = {784, hidden, hidden, 10};
        for (int l = 0; l < 3; ++l) {
            double bound = 1.0 / std::sqrt(double(dims[l])); // PyTorch's nn.Linear default
            std::mt19937_64 g(l + 1);
            std::uniform_real_distribution<float> u(-float(bound), float(bound));
            Array W(f32, {dims[l], dims[l + 1]}), B(f32, {dims[l + 1]});
            for (int64_t i = 0; i < W.size(); ++i) W.data<float>()[i] = u(g);
            for (int64_t i = 0; i < B.size(); ++i) B.data<float>()[i] = u(g);
            params.emplace_back(W, "W" + std::to_string(l));
            params.emplace_back(B, "b" + std::to_string(l));
        }
        Tensor h = x;
        for (int l = 0; l < 3; ++l) {
            h = matmul(h, params[2 * l]) + params[2 * l + 1];
            if (l < 2)
                h = old_relu() ? maximum(h, 0.0) : nn::relu(h);
        }
        Tensor logp = log_softmax(h, 1);
        loss = -mean(sum(one_hot(y, 10) * logp, {1}));
        auto gs = gradients(loss, std::vector<Tensor>(params.begin(), params.end()));
        for (size_t i = 0; i < params.size(); ++i) {
            vel.emplace_back(Array(f32, params[i].shape()), "v" + std::to_string(i), false);
            Tensor v = vel[i] * 0.9 + gs[i]; // torch.optim.SGD(momentum=0.9, dampening=0)
            upd.add(vel[i], v);
            upd.add(params[i], params[i] - 0.01 * v);
        }
    }
};

void mlp_train() {
    int64_t batch = std::stoll(opt("batch", "128"));
    int hidden = std::stoi(opt("hidden", "512"));
    Mlp m(hidden);
    FunctionOptions fo;
    fo.profile = opt("profile", "0") != "0";
    Function step = function({m.x, m.y}, {m.loss}, m.upd, fo);
    Array xb = randn({batch, 784}, 7);
    Array yb(i32, {batch});
    for (int64_t i = 0; i < batch; ++i) yb.data<int32_t>()[i] = int32_t(i % 10);
    double s = measure([&] { step(xb, yb); });
    emit("mlp_train", "train", 1.0 / s, "steps/s",
         "\"batch\": " + std::to_string(batch) + ", \"samples_per_s\": " +
             std::to_string(batch / s) + ", \"kernels\": " + std::to_string(step.stats().kernels) +
             ", \"library_calls\": " + std::to_string(step.stats().library_calls) +
             ", \"post_ops\": " + std::to_string(step.stats().post_ops) +
             ", \"parallel_regions\": " + std::to_string(step.stats().parallel_regions) +
             ", \"packed_weights\": " + std::to_string(step.stats().packed_weights));
    if (fo.profile)
        std::fprintf(stderr, "# mlp_train train\n%s\n", step.profile_report().c_str());
    Tensor logits = [&] {
        Tensor h = m.x;
        for (int l = 0; l < 3; ++l) {
            h = matmul(h, m.params[2 * l]) + m.params[2 * l + 1];
            if (l < 2)
                h = old_relu() ? maximum(h, 0.0) : nn::relu(h);
        }
        return h;
    }();
    Function infer = function({m.x}, {logits});
    double si = measure([&] { infer(xb); });
    emit("mlp_train", "infer", 1.0 / si, "batches/s", "\"batch\": " + std::to_string(batch));
}

/// Per-example gradients of the 784-H-H-10 MLP's loss (vmap of gradients): every parameter's
/// gradient for each of the batch's examples, [B, ...] per parameter.
/// Inference through `layers` 3x3 convolutions of `channels` channels, each followed by a relu,
/// on `batch` images of size x size: small activations and many weights, so what a call costs
/// besides the convolutions shows (Note [Folded weights cache] in src/backend/cpu/Conv.cpp: the
/// kept weights are checked by their variables' stamps, not by comparing their bytes).
void conv_stack_infer() {
    const int64_t c = std::stoll(opt("channels", "256")), layers = std::stoll(opt("layers", "8"));
    const int64_t hw = std::stoll(opt("size", "8")), batch = std::stoll(opt("batch", "1"));
    Placeholder x({-1, c, hw, hw}, f32, "x");
    Tensor h = x;
    std::vector<Variable> ws;
    for (int64_t l = 0; l < layers; ++l) {
        ws.emplace_back(randn({c, c, 3, 3}, 100 + uint64_t(l), 1.0 / std::sqrt(9.0 * double(c))),
                        "conv_stack/w" + std::to_string(l));
        h = nn::relu(conv2d(h, ws.back(), {}, "SAME"));
    }
    Function f = function({x}, {h});
    Array xv = randn({batch, c, hw, hw}, 99);
    const double s = measure([&] { f(xv); });
    const double mb = double(layers * c * c * 9 * 4) / 1e6;
    emit("conv_stack_infer", "infer", s * 1e3, "ms",
         "\"channels\": " + std::to_string(c) + ", \"layers\": " + std::to_string(layers) +
             ", \"size\": " + std::to_string(hw) + ", \"batch\": " + std::to_string(batch) +
             ", \"weights_mb\": " + std::to_string(mb));
}

/// Per-example gradients of a small CNN's loss: [3, 32, 32] images through conv 3x3 (3 -> 16),
/// relu, conv 3x3 (16 -> 32), relu, the spatial mean and a dense layer to 10 classes. Under vmap
/// each convolution's weight gradient is one grouped conv_backward_filter with the examples in
/// its groups and a batch of one (Note [Weight gradients of a small batch] in
/// src/backend/cpu/Conv.cpp).
void per_example_grads_cnn(int64_t batch) {
    std::vector<Variable> params;
    auto uniform = [&](Shape s, int64_t fan_in, uint64_t seed) {
        const double bound = 1.0 / std::sqrt(double(fan_in)); // PyTorch's default init's bound
        std::mt19937_64 g(seed);
        std::uniform_real_distribution<float> u(-float(bound), float(bound));
        Array a(f32, std::move(s));
        for (int64_t i = 0; i < a.size(); ++i)
            a.data<float>()[i] = u(g);
        return a;
    };
    params.emplace_back(uniform({16, 3, 3, 3}, 27, 1), "pe_cnn/w0");
    params.emplace_back(uniform({32, 16, 3, 3}, 144, 2), "pe_cnn/w1");
    params.emplace_back(uniform({32, 10}, 32, 3), "pe_cnn/W");
    params.emplace_back(uniform({10}, 32, 4), "pe_cnn/b");
    std::vector<Tensor> ps(params.begin(), params.end());
    // --static_batch 1: placeholders of the batch's size (default -1; the examples go into the
    // convolutions' groups either way: Note [Groups that follow the batch] in src/ops/Conv.cpp)
    const int64_t b = opt("static_batch", "0") != "0" ? batch : -1;
    Placeholder x({b, 3, 32, 32}, f32, "x");
    Placeholder y({b}, i32, "y");
    auto example_grads = [&](const std::vector<Tensor>& a) {
        Tensor h = nn::relu(conv2d(expand_dims(a[0], 0), ps[0], {}, "SAME"));
        h = nn::relu(conv2d(h, ps[1], {}, "SAME"));
        Tensor logits = matmul(mean(h, {2, 3}), ps[2]) + ps[3];
        Tensor loss = -sum(one_hot(expand_dims(a[1], 0), 10) * log_softmax(logits, 1));
        return gradients(loss, ps);
    };
    auto t0 = Clock::now();
    std::vector<Tensor> g = vmap(example_grads)({x, y});
    FunctionOptions fo; // --profile 1: each step timed (the report is printed as f goes)
    fo.profile = opt("profile", "0") != "0";
    Function f = function({x, y}, g, {}, fo);
    double compile_ms = ms_since(t0);
    Array xb = randn({batch, 3, 32, 32}, 7);
    Array yb(i32, {batch});
    for (int64_t i = 0; i < batch; ++i)
        yb.data<int32_t>()[i] = int32_t(i % 10);
    double s = measure([&] { f(xb, yb); });
    emit("per_example_grads", "cnn", s * 1e3, "ms",
         "\"batch\": " + std::to_string(batch) + ", \"static_batch\": " + (b < 0 ? "0" : "1") +
             ", \"compile_ms\": " + std::to_string(compile_ms) +
             ", \"kernels\": " + std::to_string(f.stats().kernels) +
             ", \"library_calls\": " + std::to_string(f.stats().library_calls));
}

void per_example_grads() {
    int64_t batch = std::stoll(opt("batch", "128"));
    if (opt("model", "mlp") == "cnn")
        return per_example_grads_cnn(batch);
    int hidden = std::stoi(opt("hidden", "512"));
    Mlp m(hidden);
    std::vector<Tensor> params(m.params.begin(), m.params.end());
    auto example_grads = [&](const std::vector<Tensor>& a) {
        Tensor h = expand_dims(a[0], 0);
        for (int l = 0; l < 3; ++l) {
            h = matmul(h, params[2 * l]) + params[2 * l + 1];
            if (l < 2)
                h = maximum(h, 0.0);
        }
        Tensor loss = -sum(one_hot(expand_dims(a[1], 0), 10) * log_softmax(h, 1));
        return gradients(loss, params);
    };
    auto t0 = Clock::now();
    std::vector<Tensor> g = vmap(example_grads)({m.x, m.y});
    Function f = function({m.x, m.y}, g);
    double compile_ms = ms_since(t0);
    Array xb = randn({batch, 784}, 7);
    Array yb(i32, {batch});
    for (int64_t i = 0; i < batch; ++i)
        yb.data<int32_t>()[i] = int32_t(i % 10);
    double s = measure([&] { f(xb, yb); });
    emit("per_example_grads", "mlp", s * 1e3, "ms",
         "\"batch\": " + std::to_string(batch) + ", \"hidden\": " + std::to_string(hidden) +
             ", \"compile_ms\": " + std::to_string(compile_ms) + ", \"peak_rss_mb\": " +
             std::to_string(peak_rss_mb()) + ", \"kernels\": " + std::to_string(f.stats().kernels) +
             ", \"library_calls\": " + std::to_string(f.stats().library_calls));
}

void call_overhead() {
    Placeholder x({}, f32, "x");
    Function f = function({x}, {x * 2.0 + 1.0});
    Array v = Array::scalar(1.5f);
    double s = measure([&] { f(v); }, 100, 7, 0.3);
    emit("call_overhead", "scalar", s * 1e6, "us");
}

/// Loops (docs/control-flow.md): a scalar while_loop's time per iteration, and a scan cumulative
/// sum against the same sum as a hand-written C loop in this program (the bound).
/// The gradient of a long scan with and without checkpointing (ScanOptions::checkpoint_every):
/// the memory plan's arena and the time per call. A [1024] f32 carry driven by an [8] input.
void scan_checkpoint() {
    using Ts = std::vector<Tensor>;
    for (int64_t n : {int64_t(1024), int64_t(4096)})
        for (int64_t k : {int64_t(0), int64_t(16), int64_t(32), int64_t(64)}) {
            Placeholder xs({n, 8}, f32, "xs");
            auto r = scan(
                [](const Ts& c, const Ts& x) { return std::pair{Ts{sin(c[0]) + sum(x[0])}, Ts{}}; },
                {zeros({1024})}, {xs}, {}, {.checkpoint_every = k});
            Function f = function({xs}, {gradients(sum(r.carry[0]), Ts{xs})[0]});
            Array a(f32, {n, 8});
            double s = measure([&] { f(a); });
            emit("scan_checkpoint", "grad", s * 1e3, "ms",
                 "\"steps\": " + std::to_string(n) + ", \"checkpoint_every\": " + std::to_string(k) +
                     ", \"arena_bytes\": " + std::to_string(f.stats().peak_arena_bytes));
        }
}

void control_flow() {
    const int64_t iters = std::stoll(opt("iters", "100000"));
    {
        Placeholder n({}, DType::I64, "n");
        std::vector<Tensor> out = while_loop(
            [](const std::vector<Tensor>& v, const std::vector<Tensor>& ns) { return v[0] < ns[0]; },
            [](const std::vector<Tensor>& v, const std::vector<Tensor>&) {
                return std::vector<Tensor>{v[0] + 1.0, v[1] * 0.999 + 1.0};
            },
            {scalar(0.0, DType::I64), scalar(0.0)}, {n});
        Function f = function({n}, {out[1]});
        double s = measure([&] { f(iters); }, 1, 3, 0.2);
        emit("control_flow", "while_scalar", s / double(iters) * 1e6, "us/iteration",
             "\"iterations\": " + std::to_string(iters));
        // the same calls with an interrupt check installed, as Python installs one per call
        // (include/symjax/Interrupt.h): each poll then reads a clock
        double si = measure(
            [&] {
                InterruptScope scope([] { return false; });
                f(iters);
            },
            1, 3, 0.2);
        emit("control_flow", "while_scalar_interrupt_scope", si / double(iters) * 1e6,
             "us/iteration", "\"iterations\": " + std::to_string(iters));
        // one poll itself, without and with a check installed (the check is never due)
        auto polls = [] {
            int hits = 0;
            for (int i = 0; i < 1000000; ++i)
                hits += poll_interrupt();
            asm volatile("" : : "r"(hits));
        };
        double p0 = measure(polls, 1, 5, 0.2);
        InterruptScope scope([] { return false; }, std::chrono::hours(1));
        double p1 = measure(polls, 1, 5, 0.2);
        emit("control_flow", "interrupt_poll", p0 * 1e3, "ns/poll", "\"check\": false");
        emit("control_flow", "interrupt_poll", p1 * 1e3, "ns/poll", "\"check\": true");
    }
    {
        Placeholder xs({iters}, f32, "xs");
        auto r = scan([](const std::vector<Tensor>& c,
                         const std::vector<Tensor>& x) { return std::pair{std::vector<Tensor>{c[0] + x[0]}, std::vector<Tensor>{c[0] + x[0]}}; },
                      {scalar(0.0)}, {xs});
        Function f = function({xs}, {r.outputs[0]});
        Array xv = randn({iters}, 3);
        double s = measure([&] { f(xv); }, 1, 3, 0.2);
        Array out(f32, {iters});
        double c = measure(
            [&] {
                const float* x = xv.data<float>();
                float* y = out.data<float>();
                float acc = 0;
                for (int64_t i = 0; i < iters; ++i) y[i] = acc += x[i];
                asm volatile("" : : "r"(y) : "memory");
            },
            1, 3, 0.2);
        std::string extra = "\"steps\": " + std::to_string(iters);
        emit("control_flow", "scan_cumsum", s * 1e3, "ms", extra);
        std::printf("{\"bench\": \"control_flow\", \"case\": \"scan_cumsum\", \"impl\": \"c_loop\", "
                    "\"threads\": 1, \"value\": %.6g, \"unit\": \"ms\", %s}\n",
                    c * 1e3, extra.c_str());
    }
}

void compile_time() {
    std::string phase = opt("phase", "cold");
    auto t0 = Clock::now();
    Mlp m(512);
    double build_ms = ms_since(t0);
    auto t1 = Clock::now();
    Function step = function({m.x, m.y}, {m.loss}, m.upd);
    double function_ms = ms_since(t1);
    Array xb = randn({128, 784}, 7);
    Array yb(i32, {128});
    auto t2 = Clock::now();
    step(xb, yb); // kernels are specialised on the first call's shapes
    double first_call_ms = ms_since(t2);
    double ms = ms_since(t0);
    auto t3 = Clock::now();
    step(xb, yb);
    double second_call_ms = ms_since(t3);
    char extra[256];
    std::snprintf(extra, sizeof extra,
                  "\"graph_ms\": %.1f, \"function_ms\": %.1f, \"first_call_ms\": %.1f, \"second_call_ms\": %.1f",
                  build_ms, function_ms, first_call_ms, second_call_ms);
    emit("compile_time", "mlp_train_" + phase, ms, "ms", extra);
}

/// One graph of `steps` repeated steps for compile_scaling (Note [Compile scaling] in
/// src/compiler/Fusion.cpp): `inputs` are its placeholders, `outputs` what the function returns.
struct ChainGraph {
    std::vector<Tensor> inputs, outputs;
    Updates updates;
    size_t nodes = 0; // graph nodes reachable from the outputs and updates
};

ChainGraph make_chain(const std::string& kind, int64_t steps, int64_t width) {
    ChainGraph g;
    Placeholder x({width}, f32, "x");
    g.inputs = {x};
    Tensor h = x;
    if (kind == "elementwise") {
        // one value through the same ops: h = tanh(h * 0.9 + 0.1)
        for (int64_t i = 0; i < steps; ++i) h = tanh(h * 0.9 + 0.1);
        g.outputs = {sum(h)};
    } else if (kind == "shared_recurrence") {
        // an unrolled RNN cell: every step reads h twice and the shared inputs a and b
        Placeholder a({width}, f32, "a"), b({width}, f32, "b");
        g.inputs = {x, a, b};
        for (int64_t i = 0; i < steps; ++i) h = tanh(h * a + b) + h * 0.5;
        g.outputs = {sum(h)};
    } else if (kind == "gelu") {
        for (int64_t i = 0; i < steps; ++i) h = nn::gelu(h, true);
        g.outputs = {sum(h)};
    } else if (kind == "select_grad") {
        // a piecewise-linear step and its gradient: the backward reads every step's mask
        // (Note [Bounded recomputation] in src/compiler/Fusion.cpp)
        Placeholder c({width}, f32, "c");
        g.inputs = {x, c};
        for (int64_t i = 0; i < steps; ++i)
            h = where(h > c, h - c, h * 0.5);
        auto gs = gradients(sum(h * h), {x, c});
        g.outputs = {sum(h * h), gs[0], gs[1]};
    } else if (kind == "norm_grad") {
        // tanh, centring and scaling in turn (one reduction in two of three steps) and the
        // gradient: tens of thousands of kernels of one space (kSiblingCandidates)
        const int64_t rows = 4;
        Placeholder xm({rows, width / rows}, f32, "x"), c({rows, width / rows}, f32, "c");
        g.inputs = {xm, c};
        h = xm;
        for (int64_t i = 0; i < steps; ++i)
            h = i % 3 == 0   ? tanh(h) * c
                : i % 3 == 1 ? h - mean(h, {0}, true)
                             : h * rsqrt(var(h, {0}, true) + 1e-5);
        auto gs = gradients(sum(h * xm), {xm, c});
        g.outputs = {sum(h), gs[0], gs[1]};
    } else if (kind == "lse_grad") {
        // h - logsumexp(h) * 0.1 over rows, and the gradient: a running sum per step (Note
        // [Factoring reductions]) read through one broadcast per step (Note [Canonical chain
        // steps])
        const int64_t rows = 4;
        Placeholder xm({rows, width / rows}, f32, "x");
        g.inputs = {xm};
        h = xm;
        for (int64_t i = 0; i < steps; ++i)
            h = h - logsumexp(h, {1}, true) * 0.1;
        auto gs = gradients(sum(h * xm), {xm});
        g.outputs = {sum(h), gs[0]};
    } else if (kind == "mlp_step") {
        // a deep MLP of `steps` layers with its gradients and an SGD update per parameter
        Placeholder xb({-1, width}, f32, "xb");
        g.inputs = {xb};
        std::vector<Variable> params;
        Tensor a = xb;
        for (int64_t l = 0; l < steps; ++l) {
            Array W = randn({width, width}, uint64_t(l), 1.0 / std::sqrt(double(width)));
            params.emplace_back(W, "W" + std::to_string(l));
            params.emplace_back(Array(f32, {width}), "b" + std::to_string(l));
            a = maximum(matmul(a, params[size_t(2 * l)]) + params[size_t(2 * l + 1)], 0.0);
        }
        Tensor loss = mean(a * a);
        auto gs = gradients(loss, std::vector<Tensor>(params.begin(), params.end()));
        for (size_t i = 0; i < params.size(); ++i) g.updates.add(params[i], params[i] - 0.01 * gs[i]);
        g.outputs = {loss};
    } else {
        throw std::runtime_error("unknown chain kind " + kind);
    }
    std::vector<Tensor> all = g.outputs;
    for (const auto& [v, t] : g.updates.items()) all.push_back(t);
    g.nodes = graph_size(all);
    return g;
}

/// Compile time against graph size: chains of 10^2..10^5 steps of several kinds; the per-node
/// cost (function_ms / nodes) must stay flat as the graph grows.
void compile_scaling() {
    std::vector<std::string> kinds = {"elementwise", "shared_recurrence", "gelu",    "select_grad",
                                      "norm_grad",   "lse_grad",          "mlp_step"};
    if (opt("kind", "all") != "all") kinds = {opt("kind", "all")};
    int64_t max_steps = std::stoll(opt("max_steps", "100000"));
    for (const auto& kind : kinds) {
        // the MLP step has ~40 nodes and a library call per layer: 10^4 layers is its largest
        int64_t cap = kind == "mlp_step" ? std::min<int64_t>(max_steps, 10000) : max_steps;
        int64_t width = std::stoll(opt("width", kind == "mlp_step" ? "16" : "1024"));
        std::vector<int64_t> sizes;
        if (opt("steps", "") != "") {
            std::string list = opt("steps", "");
            for (size_t p = 0; p < list.size();) {
                size_t q = list.find(',', p);
                sizes.push_back(std::stoll(list.substr(p, q - p)));
                p = q == std::string::npos ? list.size() : q + 1;
            }
        } else {
            for (int64_t steps = 100; steps <= cap; steps *= 10) sizes.push_back(steps);
        }
        for (int64_t steps : sizes) {
            auto t0 = Clock::now();
            ChainGraph g = make_chain(kind, steps, width);
            double graph_ms = ms_since(t0);
            auto t1 = Clock::now();
            Function f = function(g.inputs, g.outputs, g.updates);
            double function_ms = ms_since(t1);
            std::vector<Function::Arg> args;
            for (const auto& in : g.inputs) {
                Shape s = in.shape();
                for (auto& d : s) d = d < 0 ? 8 : d;
                args.emplace_back(randn(s, 1, 0.1));
            }
            // --first_call 0 leaves the first call out, so that bench/run compile_cost counts
            // the instructions of function() alone under callgrind
            double first_call_ms = 0;
            if (opt("first_call", "1") != "0") {
                auto t2 = Clock::now();
                f.call(args);
                first_call_ms = ms_since(t2);
            }
            char extra[320];
            std::snprintf(extra, sizeof extra,
                          "\"steps\": %lld, \"width\": %lld, \"nodes\": %zu, \"graph_ms\": %.1f, \"first_call_ms\": %.1f, "
                          "\"us_per_node\": %.2f, \"kernels\": %zu",
                          (long long)steps, (long long)width, g.nodes, graph_ms, first_call_ms,
                          1e3 * (function_ms + first_call_ms) / double(g.nodes), f.stats().kernels);
            emit("compile_scaling", kind, function_ms, "ms", extra);
        }
    }
}

void mvn_logpdf() {
    int64_t n = std::stoll(opt("n", "100000")), d = std::stoll(opt("d", "16"));
    Placeholder x({n, d}, f32, "x");
    Placeholder mu({d}, f32, "mu");
    Placeholder L({d, d}, f32, "L");
    // log N(x; mu, L L^T) = -1/2 |L^-1 (x - mu)|^2 - sum log diag L - d/2 log 2 pi
    Tensor z = triangular_solve(L, transpose(x - mu), true, true);
    Tensor diag = sum(L * eye(d, d, 0, f32), {1});
    Tensor logp = -0.5 * sum(z * z, {0}) - sum(log(diag)) - 0.5 * double(d) * std::log(2 * M_PI);
    Tensor total = sum(logp);
    auto g = gradients(total, {mu, L});
    Array xv = randn({n, d}, 3), muv = randn({d}, 4, 0.1);
    Array Lv(f32, {d, d});
    std::mt19937_64 gen(5);
    std::normal_distribution<float> nd(0, 0.1f);
    for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j <= i; ++j) Lv.data<float>()[i * d + j] = i == j ? 1.0f + std::fabs(nd(gen)) : nd(gen);
    std::string cs = opt("case", "all");
    if (cs == "fwd" || cs == "all") {
        Function f = function({x, mu, L}, {logp});
        emit("mvn_logpdf", "fwd", measure([&] { f(xv, muv, Lv); }) * 1e3, "ms");
    }
    if (cs == "fwd_grad" || cs == "all") {
        Function f = function({x, mu, L}, {logp, g[0], g[1]});
        emit("mvn_logpdf", "fwd_grad", measure([&] { f(xv, muv, Lv); }) * 1e3, "ms");
    }
}


/// The CNNs of ../shared/bench/torch_cnn.py's build(), layer for layer (3x3 convs without bias,
/// SAME padding; batch norm; 2x2 max pools):
///   brief   [conv(32)-BN-ReLU] x2, pool, [conv(64)-BN-ReLU] x2, pool, dense(4096 -> 10)
///   symjax  8 x [conv(32)-BN-leaky_relu(0.01)], pool after blocks 0, 3, 6, global average pool,
///           dense(32 -> 10)
nn::Sequential cnn(const std::string& arch) {
    const nn::ConvOptions conv{.padding = "SAME", .bias = false};
    nn::Sequential net;
    if (arch == "brief") {
        int64_t cin = 3;
        for (int64_t cout : {32, 32, 0, 64, 64, 0}) {
            if (cout == 0) {
                net.add(nn::MaxPool2D({2, 2}));
                continue;
            }
            net.add(nn::Conv2D(cin, cout, 3, conv)).add(nn::BatchNorm(cout)).add(relu_module(0));
            cin = cout;
        }
        net.add(nn::Flatten()).add(nn::Dense(64 * 8 * 8, 10));
        return net;
    }
    SJ_CHECK(arch == "symjax", InputError) << "cnn_train: --arch must be brief or symjax, got '" << arch << "'";
    for (int l = 0; l < 8; ++l) {
        net.add(nn::Conv2D(l == 0 ? 3 : 32, 32, 3, conv))
            .add(nn::BatchNorm(32))
            .add(relu_module(0.01));
        if (l % 3 == 0) net.add(nn::MaxPool2D({2, 2}));
    }
    net.add(nn::GlobalAvgPool()).add(nn::Dense(32, 10));
    return net;
}

/// One training step (forward in training mode, softmax cross-entropy, backward, Adam lr 1e-3 and
/// the batch-norm running statistics) and eval-mode inference on one fixed random batch.
void cnn_train() {
    const std::string arch = opt("arch", "brief"), cs = opt("case", "all");
    const int64_t batch = std::stoll(opt("batch", "32"));
    const bool profile = opt("profile", "0") != "0";
    Scope scope("cnn_" + arch);
    nn::Sequential net = cnn(arch);
    const int64_t nb = opt("static_batch", "0") != "0" ? batch : -1;
    Placeholder x({nb, 3, 32, 32}, f32, "images");
    Placeholder y({nb}, i32, "labels");
    Array xb = randn({batch, 3, 32, 32}, 11);
    Array yb(i32, {batch});
    std::mt19937_64 g(12);
    for (int64_t i = 0; i < batch; ++i) yb.data<int32_t>()[i] = int32_t(g() % 10);
    FunctionOptions fo;
    fo.profile = profile;
    fo.flush_denormals = opt("flush_denormals", "1") != "0";
    auto report = [&](const Function& f, const std::string& c, double s) {
        emit("cnn_train", c, batch / s, "images/s",
             "\"arch\": \"" + arch + "\", \"batch\": " + std::to_string(batch) +
                 ", \"flush_denormals\": " + std::to_string(int(fo.flush_denormals)) +
                 ", \"ms_per_step\": " + std::to_string(s * 1e3) +
                 ", \"kernels\": " + std::to_string(f.stats().kernels) +
                 ", \"library_calls\": " + std::to_string(f.stats().library_calls) +
                 ", \"post_ops\": " + std::to_string(f.stats().post_ops) +
                 ", \"parallel_regions\": " + std::to_string(f.stats().parallel_regions) +
                 ", \"intermediate_mb\": " +
                 std::to_string(double(f.stats().intermediate_bytes) / 1048576.0) +
                 ", \"peak_live_mb\": " +
                 std::to_string(double(f.stats().peak_arena_bytes) / 1048576.0) +
                 ", \"buffer_mb\": " + std::to_string(double(f.stats().buffer_bytes) / 1048576.0));
        if (profile)
            std::fprintf(stderr, "# cnn_train %s %s batch %lld\n%s\n", arch.c_str(), c.c_str(),
                         static_cast<long long>(batch), f.profile_report().c_str());
    };
    if (cs == "train" || cs == "all") {
        nn::optim::Adam adam(1e-3);
        Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, net(x, nn::Mode::Train)));
        Function step = function({x, y}, {loss}, adam.minimize(loss, net.trainable_variables()) + state_updates(loss), fo);
        report(step, "train", measure([&] { step(xb, yb); }));
    }
    if (cs == "infer" || cs == "all") {
        Function infer = function({x}, {net(x, nn::Mode::Eval)}, {}, fo);
        report(infer, "infer", measure([&] { infer(xb); }));
    }
}

/// Reductions whose innermost kept dim is contiguous: the per-channel sum and sum of squares of
/// a channel-blocked (oneDNN nChw16c) activation over (N, H, W), and a bias gradient (a sum over
/// the batch). GB/s of the tensor read (each element is read once by the fused kernel).
void reduce_rows() {
    std::string cs = opt("case", "all");
    auto run = [&](const char* name, const Shape& s, const Axes& axes, bool squares) {
        Placeholder x(s, f32, "x");
        std::vector<Tensor> outs{sum(x, axes)};
        if (squares) outs.push_back(sum(x * x, axes));
        Function f = function({x}, outs);
        Array xv = randn(s, 0);
        double sec = measure([&] { f(xv); });
        std::string shape;
        for (int64_t d : s) shape += (shape.empty() ? "" : "x") + std::to_string(d);
        emit("reduce_rows", name, double(xv.size()) * 4 / sec / 1e9, "GB/s",
             "\"shape\": \"" + shape + "\", \"us\": " + std::to_string(sec * 1e6) +
                 ", \"kernels\": " + std::to_string(f.stats().kernels));
    };
    if (cs == "bn_stats" || cs == "all") run("bn_stats", {32, 2, 32, 32, 16}, {0, 2, 3}, true);
    if (cs == "bias_grad" || cs == "all") run("bias_grad", {128, 512}, {0}, false);
    // rows longer than 1024 (Note [Long rows split]): a wide layer's bias gradient, a layer
    // norm's gamma gradient over 2048 tokens, a sum over 16 channels of 64 x 64 maps
    if (cs == "bias_grad_wide" || cs == "all")
        run("bias_grad_wide", {128, 4096}, {0}, false);
    if (cs == "tokens_wide" || cs == "all")
        run("tokens_wide", {2048, 4096}, {0}, false);
    if (cs == "channel_sum" || cs == "all")
        run("channel_sum", {32, 16, 4096}, {1}, false);
}

/// One elementwise kernel at sizes from 1K to 1M points, two kinds: "copy" (x + 1: 1 op, 8
/// bytes per point) and "arith" (16 multiply-adds per point), with its work figure
/// (compiler::BoundStep::work). bench/run parallel_threshold runs it with every kernel split
/// over the threads (SJ_PARALLEL_WORK=0) and with none split: where the times cross is the
/// threshold (Note [Parallel work threshold]).
void parallel_threshold() {
    const char* mode = std::getenv("SJ_PARALLEL_WORK");
    const std::string impl = mode && std::string(mode) == "0" ? "split" : "whole";
    for (const char* kind : {"copy", "arith"}) {
        for (int64_t n = 1024; n <= (int64_t(1) << 20); n *= 2) {
            Placeholder x({n}, f32, "x");
            Tensor y = x + 1.0;
            int ops = 1;
            if (std::string(kind) == "arith") {
                y = x;
                for (int i = 0; i < 8; ++i) y = y * 0.999 + x;
                ops = 16;
            }
            Function f = function({x}, {y});
            Array xv = randn({n}, 1);
            double sec = measure([&] { f(xv); }, 3, 7, 0.05);
            int64_t work = 8 * n + ops * n; // bytes + kWorkPerOp * ops * points
            std::printf("{\"bench\": \"parallel_threshold\", \"case\": \"%s\", \"impl\": \"%s\", "
                        "\"threads\": %d, \"points\": %lld, \"work\": %lld, \"value\": %.4g, "
                        "\"unit\": \"us\"}\n",
                        kind, impl.c_str(), threads(), (long long)n, (long long)work, sec * 1e6);
            std::fflush(stdout);
        }
    }
}

/// One LSTM (or, --cell gru, GRU) layer (inputs [seq, batch, input]) and a dense 10 on its final
/// hidden state, as bench/peers/torch_lstm.py: a training step (softmax cross-entropy, backward
/// through the scan, Adam lr 1e-3) and inference (the logits), on one fixed random batch. Run one
/// case per process for a meaningful peak RSS.
void lstm() {
    const int64_t batch = std::stoll(opt("batch", "128")), seq = std::stoll(opt("seq", "28"));
    const int64_t in = std::stoll(opt("input", "28")), hidden = std::stoll(opt("hidden", "128"));
    const std::string cs = opt("case", "all");
    const bool profile = opt("profile", "0") != "0";
    const std::string cell = opt("cell", "lstm");
    if (cell != "lstm" && cell != "gru")
        throw std::runtime_error("lstm: --cell is lstm or gru, got " + cell);
    const int gates = cell == "lstm" ? 4 : 3;
    Scope scope("lstm_bench");
    std::unique_ptr<nn::Recurrent> rnn_ptr;
    if (cell == "lstm")
        rnn_ptr = std::make_unique<nn::LSTM>(in, hidden);
    else
        rnn_ptr = std::make_unique<nn::GRU>(in, hidden);
    nn::Recurrent& rnn = *rnn_ptr;
    nn::Dense dense(hidden, 10);
    Placeholder x({seq, -1, in}, f32, "x");
    Placeholder y({-1}, i32, "y");
    Tensor logits = dense(rnn.run(x).h[0]);
    Array xb = randn({seq, batch, in}, 21);
    Array yb(i32, {batch});
    std::mt19937_64 g(22);
    for (int64_t i = 0; i < batch; ++i)
        yb.data<int32_t>()[i] = int32_t(g() % 10);
    // per step, forward: x W_ih^T and h W_hh^T for the gates (torch_lstm.py counts the same)
    const double fwd_flop =
        2.0 * seq * batch * gates * hidden * (in + hidden) + 2.0 * batch * hidden * 10;
    FunctionOptions fo;
    fo.profile = profile;
    auto report = [&](const Function& f, const std::string& c, double s, double flop) {
        emit("lstm", c, 1.0 / s, c == "train" ? "steps/s" : "batches/s",
             "\"cell\": \"" + cell + "\", \"batch\": " + std::to_string(batch) +
                 ", \"seq\": " + std::to_string(seq) + ", \"input\": " + std::to_string(in) +
                 ", \"hidden\": " + std::to_string(hidden) +
                 ", \"ms_per_step\": " + std::to_string(s * 1e3) +
                 ", \"achieved_gflops\": " + std::to_string(flop / s / 1e9) +
                 ", \"kernels\": " + std::to_string(f.stats().kernels) +
                 ", \"library_calls\": " + std::to_string(f.stats().library_calls));
        if (profile)
            std::fprintf(stderr, "# lstm %s\n%s\n", c.c_str(), f.profile_report().c_str());
    };
    if (cs == "train" || cs == "all") {
        nn::optim::Adam adam(1e-3);
        std::vector<Variable> params = rnn.trainable_variables();
        for (const Variable& v : dense.trainable_variables())
            params.push_back(v);
        Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, logits));
        Function step = function({x, y}, {loss}, adam.minimize(loss, params), fo);
        report(step, "train", measure([&] { step(xb, yb); }), 3 * fwd_flop);
    }
    if (cs == "infer" || cs == "all") {
        Function infer = function({x}, {logits}, {}, fo);
        report(infer, "infer", measure([&] { infer(xb); }), fwd_flop);
    }
}

/// Note [Tasks stay on their thread]: the MLP's first weight gradient (x^T g, 784x128x512) with
/// its momentum folded in, the SGD update that follows it, and both in one function, where the
/// update reads what the matmul's threads just wrote. Microseconds per call.
void matmul_update() {
    const int64_t rows = 784, cols = 512, batch = 128;
    Variable W(randn({rows, cols}, 1), "W"), v(randn({rows, cols}, 2), "v");
    Placeholder x({batch, rows}, f32, "x"), g({batch, cols}, f32, "g");
    Array xv = randn({batch, rows}, 3), gv = randn({batch, cols}, 4);
    Tensor v_new = 0.9 * v + matmul(transpose(x), g);
    Updates update, grad, both;
    update.add(W, W - 0.01 * v);
    grad.add(v, v_new);
    both.add(v, v_new);
    both.add(W, W - 0.01 * v_new);
    Function fu = function({}, {}, update), fg = function({x, g}, {}, grad),
             fb = function({x, g}, {}, both);
    emit("matmul_update", "update", measure([&] { fu(); }) * 1e6, "us");
    emit("matmul_update", "matmul", measure([&] { fg(xv, gv); }) * 1e6, "us");
    emit("matmul_update", "matmul_then_update", measure([&] { fb(xv, gv); }) * 1e6, "us");
}

/// Adam's update alone (lr 1e-3, the defaults' betas and eps; bench/peers/torch_optimizer.py is
/// PyTorch's): the parameters of the SymJAX paper's network (8 3x3 convolutions of 32 channels,
/// the first from 3, 8 batch norms, a dense 32 -> 10), or --tensors K of --size N elements
/// each, their gradients given as inputs. Microseconds per step. Note [Math libraries] in
/// src/backend/llvm/KernelExpr.cpp: the bias corrections' powf once per kernel, not per element.
void optimizer_step() {
    std::vector<Shape> shapes;
    if (const int64_t k = std::stoll(opt("tensors", "0")); k > 0) {
        const int64_t n = std::stoll(opt("size", "9216"));
        for (int64_t i = 0; i < k; ++i)
            shapes.push_back({n});
    } else {
        for (int l = 0; l < 8; ++l) {
            shapes.push_back({32, l == 0 ? 3 : 32, 3, 3});
            shapes.push_back({32}); // batch norm's scale and shift
            shapes.push_back({32});
        }
        shapes.push_back({32, 10});
        shapes.push_back({10});
    }
    std::vector<Variable> params;
    std::vector<Tensor> grads;
    std::vector<Array> gv;
    int64_t total = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
        params.emplace_back(randn(shapes[i], 100 + i, 0.1), "p" + std::to_string(i));
        grads.push_back(Placeholder(shapes[i], f32, "g" + std::to_string(i)));
        gv.push_back(randn(shapes[i], 200 + i, 0.01));
        total += numel(shapes[i]);
    }
    nn::optim::Adam adam(1e-3);
    Function f = function(grads, {}, adam.apply(grads, params));
    const std::vector<Function::Arg> args(gv.begin(), gv.end());
    emit("optimizer_step", "adam", measure([&] { f.call(args); }) * 1e6, "us",
         "\"tensors\": " + std::to_string(shapes.size()) + ", \"parameters\": " +
             std::to_string(total) + ", \"kernels\": " + std::to_string(f.stats().kernels));
}

/// One elementwise function of 4M f32 (--op sin|cos|tan|log2|exp|atan2|pow|hypot, --n N; the
/// binary ones of x and x - 1): milliseconds per call (bench/peers/torch_unary.py is PyTorch's).
/// All but exp are vectorised in double precision (Note [Inline sin and cos] in
/// src/backend/llvm/LlvmMath.cpp); exp in f32.
void unary() {
    const std::string op = opt("op", "sin");
    const int64_t n = std::stoll(opt("n", "4194304"));
    Placeholder x({n}, f32, "x");
    Array xv(f32, {n});
    for (int64_t i = 0; i < n; ++i) // (the peer's values: 0.5 .. 1.499)
        xv.data<float>()[i] = 0.5f + float(i % 1000) * 0.001f;
    SJ_CHECK(op == "sin" || op == "cos" || op == "tan" || op == "log2" || op == "exp" ||
                 op == "atan2" || op == "pow" || op == "hypot",
             InputError)
        << "unary: --op must be sin, cos, tan, log2, exp, atan2, pow or hypot, got '" << op << "'";
    Tensor y = op == "sin"     ? sin(x)
               : op == "cos"   ? cos(x)
               : op == "tan"   ? tan(x)
               : op == "log2"  ? log2(x)
               : op == "exp"   ? exp(x)
               : op == "atan2" ? atan2(x, x - 1.0) // (as the peer's)
               : op == "pow"   ? pow(x, x - 1.0)
                               : hypot(x, x - 1.0);
    Function f = function({x}, {y});
    emit("unary", op, measure([&] { f(xv); }) * 1e3, "ms", "\"n\": " + std::to_string(n));
}

/// 2x2 windows of a [32, 32, 32, 32] f32 image batch reduced the way JAX code pools:
/// mean / max of reshape(x, [32, 32, 16, 2, 16, 2]) over axes 3 and 5 (Note [Small reductions
/// unrolled] in src/compiler/Specialize.cpp), and avg_pool2d / max_pool2d (oneDNN's pooling) for
/// comparison. Milliseconds per call (bench/peers/torch_window_reduce.py: PyTorch's view + mean /
/// amax and F.avg_pool2d / max_pool2d).
void window_reduce() {
    Placeholder x({32, 32, 32, 32}, f32, "x");
    Array xv = randn({32, 32, 32, 32}, 21);
    Tensor x6 = reshape(x, {32, 32, 16, 2, 16, 2});
    const std::vector<std::pair<const char*, Tensor>> cases = {
        {"reshape_mean", mean(x6, {3, 5})},
        {"reshape_max", max(x6, {3, 5})},
        {"avg_pool2d", avg_pool2d(x, {2, 2})},
        {"max_pool2d", max_pool2d(x, {2, 2})}};
    for (const auto& [name, y] : cases) {
        Function f = function({x}, {y});
        emit("window_reduce", name, measure([&] { f(xv); }) * 1e3, "ms",
             "\"kernels\": " + std::to_string(f.stats().kernels) +
                 ", \"library_calls\": " + std::to_string(f.stats().library_calls));
    }
}

/// Random draws of --n elements (default 64K: one of sj-train's MLP dropout masks, 128 x 512):
/// the Philox bits on the cpu target and on the reference interpreter (the draw the cpu target
/// ran before Note [Philox draws on the team] in src/backend/cpu/Random.cpp), uniform floats,
/// and a dropout keep-mask (bernoulli 0.8) as f32; then (unless --conv 0) a convolution's
/// forward with and without a dropout after it, whose mask is drawn channel-blocked.
/// Microseconds per call (bench/peers/torch_random.py is PyTorch's torch.rand and bernoulli_).
void random_draws() {
    const int64_t n = std::stoll(opt("n", "65536"));
    const std::string extra = "\"n\": " + std::to_string(n);
    FunctionOptions ref;
    ref.backend = "reference";
    Tensor bits = random::bits({n}, 7);
    Function fb = function({}, {bits}), fr = function({}, {bits}, {}, ref);
    Function fu = function({}, {random::uniform({n}, 0, 1, f32, 8)});
    Function fm = function({}, {cast(random::bernoulli({n}, 0.8, 9), f32)});
    emit("random", "bits", measure([&] { fb(); }) * 1e6, "us", extra);
    emit("random", "bits_reference", measure([&] { fr(); }) * 1e6, "us", extra);
    emit("random", "uniform", measure([&] { fu(); }) * 1e6, "us", extra);
    emit("random", "bernoulli", measure([&] { fm(); }) * 1e6, "us", extra);
    if (opt("conv", "1") == "0")
        return;
    // a dropout after a convolution draws its mask channel-blocked (the layout pass): the
    // forward of conv (32 x 32 x 32 x 32, 3x3) with and without dropout(0.25)
    Scope scope("random_bench");
    nn::Conv2D conv(32, 32, 3, {.padding = "SAME", .bias = false});
    nn::Dropout drop(0.25);
    Placeholder x({32, 32, 32, 32}, f32, "x");
    Tensor y = conv(x, nn::Mode::Train);
    Array xv = randn({32, 32, 32, 32}, 10);
    Function fc = function({x}, {y}), fd = function({x}, {drop(y, nn::Mode::Train)});
    emit("random", "conv_fwd", measure([&] { fc(xv); }) * 1e6, "us", "\"n\": 1048576");
    emit("random", "conv_dropout_fwd", measure([&] { fd(xv); }) * 1e6, "us", "\"n\": 1048576");
}

/// Sorting f32 along the last axis of --rows x --n (default one line of 1M): sort (the values),
/// argsort, and top_k(--k) (values and indices: one function), on the cpu target, and the sort
/// on the reference interpreter once. Milliseconds per call (bench/peers/torch_sort.py is
/// PyTorch's torch.sort, torch.argsort and torch.topk).
void sort_bench() {
    const int64_t rows = std::stoll(opt("rows", "1")), n = std::stoll(opt("n", "1048576")),
                  k = std::stoll(opt("k", "5"));
    const std::string extra = "\"rows\": " + std::to_string(rows) +
                              ", \"n\": " + std::to_string(n) + ", \"k\": " + std::to_string(k);
    Placeholder x({rows, n}, f32, "x");
    Array xv = randn({rows, n}, 11);
    FunctionOptions ref;
    ref.backend = "reference";
    auto [tv, ti] = top_k(x, k);
    Function fs = function({x}, {sort(x)}), fa = function({x}, {argsort(x)}),
             ft = function({x}, {tv, ti}), fr = function({x}, {sort(x)}, {}, ref);
    emit("sort", "sort", measure([&] { fs(xv); }) * 1e3, "ms", extra);
    emit("sort", "argsort", measure([&] { fa(xv); }) * 1e3, "ms", extra);
    emit("sort", "top_k", measure([&] { ft(xv); }) * 1e3, "ms", extra);
    emit("sort", "sort_reference", measure([&] { fr(xv); }) * 1e3, "ms", extra);
}

/// Searching and counting (include/symjax/Search.h) over --n elements (default 1M):
/// searchsorted of n f32 queries into n sorted f32, unique of n i32 in [0, n / 10) with
/// size n / 10 (values and counts), bincount of n i64 in [0, 1000), and a 100-bin histogram of n
/// f32. Milliseconds per call (bench/peers/torch_search.py: torch.searchsorted, torch.unique,
/// torch.bincount and torch.histc).
void search_bench() {
    const int64_t n = std::stoll(opt("n", "1048576")), distinct = std::max<int64_t>(n / 10, 1);
    const std::string extra = "\"n\": " + std::to_string(n);
    std::mt19937_64 gen(13);
    std::vector<float> sorted_v = randn({n}, 14).to_vector<float>();
    std::sort(sorted_v.begin(), sorted_v.end());
    std::vector<int32_t> ints(static_cast<size_t>(n));
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        ints[size_t(i)] = int32_t(gen() % uint64_t(distinct));
        labels[size_t(i)] = int64_t(gen() % 1000);
    }
    Array av(sorted_v, {n}), qv = randn({n}, 15), iv(ints, {n}), lv(labels, {n});
    Placeholder a({n}, f32, "a"), q({n}, f32, "q"), xi({n}, i32, "xi"), xl({n}, i64, "labels");
    Unique u = unique_all(xi, distinct);
    auto [h, e] = histogram(q, 100);
    FunctionOptions
        fo; // --profile 1: each step timed (the reports are printed as the functions go)
    fo.profile = opt("profile", "0") != "0";
    Function fs = function({a, q}, {searchsorted(a, q)}, {}, fo),
             fu = function({xi}, {u.values, u.counts}, {}, fo),
             fb = function({xl}, {bincount(xl, 1000)}, {}, fo), fh = function({q}, {h, e}, {}, fo);
    emit("search", "searchsorted", measure([&] { fs(av, qv); }) * 1e3, "ms", extra);
    emit("search", "unique", measure([&] { fu(iv); }) * 1e3, "ms", extra);
    emit("search", "bincount", measure([&] { fb(lv); }) * 1e3, "ms", extra);
    emit("search", "histogram", measure([&] { fh(qv); }) * 1e3, "ms", extra);
}

/// The ops the cpu target runs as row kernels (Note [Row kernels] in src/backend/cpu/Movement.cpp)
/// on a 1024 x 1024 f32 x: pad by one on each side, concat of two along the last axis, argmax
/// along the last axis, and one_hot of 4096 labels to 1000 classes. Milliseconds per call
/// (bench/peers/torch_rows.py: F.pad, torch.cat, torch.argmax, F.one_hot).
void rows_bench() {
    const int64_t n = 1024, m = 4096, depth = 1000;
    FunctionOptions
        fo; // --profile 1: each step timed (the reports are printed as the functions go)
    fo.profile = opt("profile", "0") != "0";
    Placeholder x({n, n}, f32, "x"), labels({m}, i64, "labels");
    Array xv = randn({n, n}, 16);
    std::vector<int64_t> lv(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i)
        lv[size_t(i)] = (i * 7919) % depth;
    Array la(lv, {m});
    Function fp = function({x}, {pad(x, {1, 1}, {1, 1})}, {}, fo),
             fc = function({x}, {concat({x, x}, 1)}, {}, fo),
             fa = function({x}, {argmax(x, 1)}, {}, fo),
             fo1 = function({labels}, {one_hot(labels, depth)}, {}, fo);
    // a window of half the rows at a start given when the function runs, read and written
    Placeholder starts({2}, i64, "starts"), u({n / 2, n}, f32, "u");
    Function fds = function({x, starts}, {dynamic_slice(x, starts, {n / 2, n})}, {}, fo),
             fdu = function({x, u, starts}, {dynamic_update_slice(x, u, starts)}, {}, fo);
    Array sv(std::vector<int64_t>{300, 0}, {2}), uv = randn({n / 2, n}, 17);
    const std::string extra = "\"n\": " + std::to_string(n);
    emit("rows", "pad", measure([&] { fp(xv); }) * 1e3, "ms", extra);
    emit("rows", "concat", measure([&] { fc(xv); }) * 1e3, "ms", extra);
    emit("rows", "argmax", measure([&] { fa(xv); }) * 1e3, "ms", extra);
    emit("rows", "one_hot", measure([&] { fo1(la); }) * 1e3, "ms", extra);
    emit("rows", "dynamic_slice", measure([&] { fds(xv, sv); }) * 1e3, "ms", extra);
    emit("rows", "dynamic_update_slice", measure([&] { fdu(xv, uv, sv); }) * 1e3, "ms", extra);
}

/// Small f32 products with a bias (the dense layers of the benchmarks' networks: Note [Tiny
/// matmuls in a loop]) and f64 products (Note [f64 matmuls]), microseconds per call. Cases
/// "DTYPE BATCHxMxKxN", batch 1 a plain matmul.
void matmul_bench() {
    struct Case {
        DType dt;
        int64_t batch, m, k, n;
        bool bias;
    };
    const Case cases[] = {{f32, 1, 32, 32, 10, true},    {f32, 1, 1, 784, 512, true},
                          {f32, 1, 1, 4096, 10, true},   {f32, 1, 128, 16, 16, true},
                          {f64, 1, 64, 64, 64, false},   {f64, 1, 512, 512, 512, false},
                          {f64, 256, 16, 16, 16, false}, {f64, 1, 1, 1000, 1000, false}};
    for (const Case& c : cases) {
        const bool batched = c.batch > 1;
        Shape sa = batched ? Shape{c.batch, c.m, c.k} : Shape{c.m, c.k};
        Shape sb = batched ? Shape{c.batch, c.k, c.n} : Shape{c.k, c.n};
        Placeholder a(sa, c.dt, "a"), w(sb, c.dt, "w"), b({c.n}, c.dt, "b");
        Tensor y = matmul(a, w);
        if (c.bias)
            y = y + b;
        Function f = function({a, w, b}, {y});
        Array av = randn(sa, 21).astype(c.dt), wv = randn(sb, 22).astype(c.dt),
              bv = randn({c.n}, 23).astype(c.dt);
        const std::string name = std::string(c.dt == f32 ? "f32 " : "f64 ") +
                                 std::to_string(c.batch) + "x" + std::to_string(c.m) + "x" +
                                 std::to_string(c.k) + "x" + std::to_string(c.n) +
                                 (c.bias ? " + bias" : "");
        const double s = measure([&] { f(av, wv, bv); });
        const double flops = 2.0 * double(c.batch * c.m * c.k * c.n);
        emit("matmul", name, s * 1e6, "us", "\"gflops\": " + std::to_string(flops / s * 1e-9));
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: %s elementwise_chain|mlp_train|call_overhead|compile_time|mvn_logpdf|"
                     "cnn_train|reduce_rows|compile_scaling|control_flow|lstm|per_example_grads|"
                     "scan_checkpoint|"
                     "parallel_threshold|matmul_update|optimizer_step|unary|random|matmul "
                     "[--key value]...\n",
                     argv[0]);
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2)
        if (std::strncmp(argv[i], "--", 2) == 0) g_opt[argv[i] + 2] = argv[i + 1];
    std::string b = argv[1];
    try {
        if (b == "elementwise_chain") elementwise_chain();
        else if (b == "mlp_train") mlp_train();
        else if (b == "call_overhead") call_overhead();
        else if (b == "compile_time") compile_time();
        else if (b == "compile_scaling") compile_scaling();
        else if (b == "mvn_logpdf") mvn_logpdf();
        else if (b == "cnn_train") cnn_train();
        else if (b == "reduce_rows") reduce_rows();
        else if (b == "control_flow") control_flow();
        else if (b == "lstm")
            lstm();
        else if (b == "conv_stack_infer")
            conv_stack_infer();
        else if (b == "per_example_grads")
            per_example_grads();
        else if (b == "scan_checkpoint")
            scan_checkpoint();
        else if (b == "parallel_threshold")
            parallel_threshold();
        else if (b == "matmul_update")
            matmul_update();
        else if (b == "optimizer_step")
            optimizer_step();
        else if (b == "window_reduce")
            window_reduce();
        else if (b == "random")
            random_draws();
        else if (b == "unary")
            unary();
        else if (b == "sort")
            sort_bench();
        else if (b == "search")
            search_bench();
        else if (b == "rows")
            rows_bench();
        else if (b == "matmul")
            matmul_bench();
        else {
            std::fprintf(stderr, "unknown benchmark %s\n", b.c_str());
            return 2;
        }
    } catch (const sj::Error& e) {
        std::fprintf(stderr, "%s: %s\n", b.c_str(), e.what());
        return 1;
    }
}
