// The oneDNN bound of `symjax_bench cnn_train`: every layer of the same CNN as a standalone oneDNN
// primitive, created once and timed on its own; the sum is the step time a framework would reach
// if it added nothing between the library calls. One JSON line per case (impl "bound").
//
//   cnn_bound --arch brief|symjax --batch B [--case train|infer|all] [--min-s 0.05] [--repeats 5]
//
// Layouts: convolutions ask for format_tag::any on every argument (oneDNN picks its blocked
// layouts, nChw16c / OIhw16i16o on AVX-512); batch norm, eltwise and pooling run on the layout the
// convolution chose, as a framework that keeps activations blocked between layers would. Wherever
// two neighbouring primitives disagree on a layout (the network's plain NCHW input, a backward
// primitive choosing another layout than its forward), the reorder between them is timed and
// counted too, as an entry named reorder.*. value uses each primitive's median time
// (fastest_ms_per_step sums the fastest samples instead). Not counted: the loss (softmax
// cross-entropy on [B, 10]) and the Adam update (about 1e5 parameters: a few MB of memory traffic,
// tens of us). Threads: oneDNN's OpenMP runtime, OMP_NUM_THREADS. Each case is timed twice: with
// direct convolutions (impl "bound") and with Winograd ones wherever oneDNN has a kernel for the
// layer and symjax's rule gives it to (impl "bound_winograd"), since symjax runs Winograd there
// (Note [Winograd convolutions] in src/backend/cpu/Conv.cpp): in inference, outputs of 8x8 and
// larger; in training, the forward and backward-data convolutions of outputs of 16x16 and larger
// (weight gradients direct, as symjax's). (convolution_auto, tried for the inference row, picks
// the NHWC brgemm kernels when the layouts are format any.)
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <unordered_map>
#include <vector>

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using tag = memory::format_tag;
using dt = memory::data_type;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::string arch = "brief", cs = "all";
    int64_t batch = 32;
    double min_s = 0.05;
    int repeats = 5;
};

/// One timed library call of the step.
struct Entry {
    std::string name, impl;
    std::function<void()> run;
    double ms = 0;
};

/// The layers of torch_cnn.py's build(): conv (3x3, SAME, no bias), batch norm, activation
/// (slope 0: ReLU), 2x2 max pool, global average pool, dense.
struct Layer {
    enum Kind { Conv, BatchNorm, Act, MaxPool, GlobalAvgPool, Dense } kind;
    int64_t out = 0;
    float slope = 0;
};

std::vector<Layer> network(const std::string& arch) {
    std::vector<Layer> n;
    if (arch == "brief") {
        for (int64_t c : {32, 32, 0, 64, 64, 0}) {
            if (c == 0) {
                n.push_back({Layer::MaxPool});
                continue;
            }
            n.push_back({Layer::Conv, c});
            n.push_back({Layer::BatchNorm});
            n.push_back({Layer::Act});
        }
    } else if (arch == "symjax") {
        for (int l = 0; l < 8; ++l) {
            n.push_back({Layer::Conv, 32});
            n.push_back({Layer::BatchNorm});
            n.push_back({Layer::Act, 0, 0.01f});
            if (l % 3 == 0)
                n.push_back({Layer::MaxPool});
        }
        n.push_back({Layer::GlobalAvgPool});
    } else {
        throw std::runtime_error("cnn_bound: --arch must be brief or symjax, got '" + arch + "'");
    }
    n.push_back({Layer::Dense, 10});
    return n;
}

/// Builds the primitives of one training step (forward_training and the backward primitives) or
/// one inference forward (forward_inference) and returns them as timed entries.
class Builder {
public:
    /// conv_alg: winograd for Winograd wherever symjax's rule gives it (conv_layer), else direct
    Builder(dnnl::engine& eng, dnnl::stream& s, bool train, algorithm conv_alg)
        : eng_(eng), s_(s), train_(train), conv_alg_(conv_alg) {}

    std::vector<Entry> build(const std::vector<Layer>& net, int64_t batch) {
        int64_t c = 3, h = 32, w = 32;
        memory::desc cur({batch, c, h, w}, dt::f32, tag::nchw); // the input batch, plain
        int conv = 0, bn = 0, act = 0, pool = 0;
        for (const Layer& l : net) {
            switch (l.kind) {
            case Layer::Conv:
                cur =
                    conv_layer("conv" + std::to_string(conv), cur, {batch, l.out, h, w}, conv == 0);
                ++conv, c = l.out;
                break;
            case Layer::BatchNorm:
                batch_norm("bn" + std::to_string(bn++), cur);
                break;
            case Layer::Act:
                activation("act" + std::to_string(act++), cur, l.slope);
                break;
            case Layer::MaxPool:
                h /= 2, w /= 2;
                cur = pooling("pool" + std::to_string(pool++), algorithm::pooling_max, cur,
                              {batch, c, h, w}, 2);
                break;
            case Layer::GlobalAvgPool:
                cur = pooling("gap", algorithm::pooling_avg_exclude_padding, cur, {batch, c, 1, 1},
                              h);
                h = w = 1;
                break;
            case Layer::Dense:
                dense("dense", cur, batch, l.out);
                break;
            }
        }
        return std::move(entries_);
    }

private:
    dnnl::engine& eng_;
    dnnl::stream& s_;
    bool train_;
    algorithm conv_alg_;
    std::vector<Entry> entries_;
    std::mt19937 gen_{1};

    prop_kind fwd() const {
        return train_ ? prop_kind::forward_training : prop_kind::forward_inference;
    }

    /// A buffer of `d`, filled with values in [lo, hi] (no denormals, no NaN in batch norm).
    memory mem(const memory::desc& d, float lo = -1, float hi = 1) {
        memory m(d, eng_);
        std::uniform_real_distribution<float> u(lo, hi);
        auto* p = static_cast<float*>(m.get_data_handle());
        for (size_t i = 0; i < d.get_size() / sizeof(float); ++i)
            p[i] = u(gen_);
        return m;
    }

    template <class P, class PD>
    void add(const std::string& name, const PD& pd, std::unordered_map<int, memory> args) {
        P prim(pd);
        entries_.push_back(
            {name, pd.impl_info_str(), [this, prim, args]() mutable { prim.execute(s_, args); }});
    }

    /// Times a reorder from -> to when the layouts differ (a framework would have to run it).
    void reorder_if(const std::string& name, const memory::desc& from, const memory::desc& to) {
        if (from == to)
            return;
        memory a = mem(from), b = mem(to);
        dnnl::reorder::primitive_desc pd(eng_, from, eng_, to);
        add<dnnl::reorder>("reorder." + name, pd, {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}});
    }

    memory::desc conv_layer(const std::string& n, const memory::desc& src_in,
                            const memory::dims& dst_dims, bool first) {
        const memory::dims& sd = src_in.dims();
        memory::desc src_any(sd, dt::f32, tag::any), dst_any(dst_dims, dt::f32, tag::any);
        memory::desc w_any({dst_dims[1], sd[1], 3, 3}, dt::f32, tag::any);
        const memory::dims strides{1, 1}, pad{1, 1};
        auto make = [&](algorithm alg) {
            return dnnl::convolution_forward::primitive_desc(
                {fwd(), alg, src_any, w_any, dst_any, strides, pad, pad}, eng_);
        };
        // Winograd on the layers symjax gives it (Note [Winograd convolutions]): 16-channel
        // blocks and at least 32 channels on both sides, and an output of at least 8x8 in
        // inference, 16x16 in training (the forward and the backward data; weight gradients stay
        // direct there too)
        const int64_t min_side = train_ ? 16 : 8;
        bool wino = conv_alg_ == algorithm::convolution_winograd && sd[1] % 16 == 0 &&
                    dst_dims[1] % 16 == 0 && sd[1] >= 32 && dst_dims[1] >= 32 &&
                    dst_dims[2] >= min_side && dst_dims[3] >= min_side;
        dnnl::convolution_forward::primitive_desc f;
        try {
            f = make(wino ? algorithm::convolution_winograd : algorithm::convolution_direct);
        } catch (const dnnl::error&) { // no Winograd kernel on this CPU
            f = make(algorithm::convolution_direct);
            wino = false;
        }
        reorder_if(n + ".src", src_in, f.src_desc());
        memory x = mem(f.src_desc()), wt = mem(f.weights_desc(), -0.1f, 0.1f),
               y = mem(f.dst_desc());
        add<dnnl::convolution_forward>(
            n + ".fwd", f, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, y}});
        if (!train_)
            return f.dst_desc();
        if (!first) { // the input images need no gradient
            auto make_bd = [&](algorithm alg) {
                return dnnl::convolution_backward_data::primitive_desc(
                    {alg, src_any, w_any, dst_any, strides, pad, pad}, eng_, f);
            };
            dnnl::convolution_backward_data::primitive_desc bd;
            try {
                bd = make_bd(wino ? algorithm::convolution_winograd : algorithm::convolution_direct);
            } catch (const dnnl::error&) { // oneDNN declined the Winograd backward data
                bd = make_bd(algorithm::convolution_direct);
            }
            reorder_if(n + ".bwd_data.diff_dst", f.dst_desc(), bd.diff_dst_desc());
            reorder_if(n + ".bwd_data.weights", f.weights_desc(), bd.weights_desc());
            reorder_if(n + ".bwd_data.diff_src", bd.diff_src_desc(), f.src_desc());
            add<dnnl::convolution_backward_data>(
                n + ".bwd_data", bd,
                {{DNNL_ARG_DIFF_DST, mem(bd.diff_dst_desc())},
                 {DNNL_ARG_WEIGHTS, mem(bd.weights_desc(), -0.1f, 0.1f)},
                 {DNNL_ARG_DIFF_SRC, mem(bd.diff_src_desc())}});
        }
        dnnl::convolution_backward_weights::primitive_desc bw(
            {algorithm::convolution_direct, src_any, w_any, dst_any, strides, pad, pad}, eng_, f);
        reorder_if(n + ".bwd_weights.src", f.src_desc(), bw.src_desc());
        reorder_if(n + ".bwd_weights.diff_dst", f.dst_desc(), bw.diff_dst_desc());
        reorder_if(n + ".bwd_weights.diff_weights", bw.diff_weights_desc(), f.weights_desc());
        add<dnnl::convolution_backward_weights>(
            n + ".bwd_weights", bw,
            {{DNNL_ARG_SRC, mem(bw.src_desc())},
             {DNNL_ARG_DIFF_DST, mem(bw.diff_dst_desc())},
             {DNNL_ARG_DIFF_WEIGHTS, mem(bw.diff_weights_desc())}});
        return f.dst_desc();
    }

    void batch_norm(const std::string& n, const memory::desc& d) {
        using nf = dnnl::normalization_flags;
        const float eps = 1e-5f;
        const memory::desc cd({d.dims()[1]}, dt::f32, tag::a);
        memory x = mem(d), y = mem(d), scale = mem(cd, 0.5f, 1.5f), shift = mem(cd);
        memory mean = mem(cd), var = mem(cd, 0.5f, 1.5f);
        if (!train_) {
            dnnl::batch_normalization_forward::primitive_desc f(
                {prop_kind::forward_inference, d, eps,
                 nf::use_global_stats | nf::use_scale | nf::use_shift},
                eng_);
            add<dnnl::batch_normalization_forward>(n + ".fwd", f,
                                                   {{DNNL_ARG_SRC, x},
                                                    {DNNL_ARG_MEAN, mean},
                                                    {DNNL_ARG_VARIANCE, var},
                                                    {DNNL_ARG_SCALE, scale},
                                                    {DNNL_ARG_SHIFT, shift},
                                                    {DNNL_ARG_DST, y}});
            return;
        }
        const nf flags = nf::use_scale | nf::use_shift;
        dnnl::batch_normalization_forward::primitive_desc f(
            {prop_kind::forward_training, d, eps, flags}, eng_);
        add<dnnl::batch_normalization_forward>(n + ".fwd", f,
                                               {{DNNL_ARG_SRC, x},
                                                {DNNL_ARG_SCALE, scale},
                                                {DNNL_ARG_SHIFT, shift},
                                                {DNNL_ARG_DST, y},
                                                {DNNL_ARG_MEAN, mean},
                                                {DNNL_ARG_VARIANCE, var}});
        dnnl::batch_normalization_backward::primitive_desc b(
            {prop_kind::backward, d, d, eps, flags}, eng_, f);
        add<dnnl::batch_normalization_backward>(n + ".bwd", b,
                                                {{DNNL_ARG_SRC, x},
                                                 {DNNL_ARG_MEAN, mean},
                                                 {DNNL_ARG_VARIANCE, var},
                                                 {DNNL_ARG_SCALE, scale},
                                                 {DNNL_ARG_SHIFT, shift},
                                                 {DNNL_ARG_DIFF_DST, mem(d)},
                                                 {DNNL_ARG_DIFF_SRC, mem(d)},
                                                 {DNNL_ARG_DIFF_SCALE, mem(cd)},
                                                 {DNNL_ARG_DIFF_SHIFT, mem(cd)}});
    }

    void activation(const std::string& n, const memory::desc& d, float slope) {
        memory x = mem(d), y = mem(d);
        dnnl::eltwise_forward::primitive_desc f({fwd(), algorithm::eltwise_relu, d, slope, 0.f},
                                                eng_);
        add<dnnl::eltwise_forward>(n + ".fwd", f, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}});
        if (!train_)
            return;
        dnnl::eltwise_backward::primitive_desc b({algorithm::eltwise_relu, d, d, slope, 0.f}, eng_,
                                                 f);
        add<dnnl::eltwise_backward>(
            n + ".bwd", b,
            {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, mem(d)}, {DNNL_ARG_DIFF_SRC, mem(d)}});
    }

    memory::desc pooling(const std::string& n, algorithm a, const memory::desc& src,
                         const memory::dims& dst_dims, int64_t k) {
        const memory::desc dst_any(dst_dims, dt::f32, tag::any);
        const memory::dims kernel{k, k}, pad{0, 0};
        dnnl::pooling_forward::primitive_desc f({fwd(), a, src, dst_any, kernel, kernel, pad, pad},
                                                eng_);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(src)},
                                             {DNNL_ARG_DST, mem(f.dst_desc())}};
        memory ws;
        if (f.workspace_desc().get_size() > 0)
            args[DNNL_ARG_WORKSPACE] = ws = memory(f.workspace_desc(), eng_);
        add<dnnl::pooling_forward>(n + ".fwd", f, args);
        if (!train_)
            return f.dst_desc();
        dnnl::pooling_backward::primitive_desc b({a, src, f.dst_desc(), kernel, kernel, pad, pad},
                                                 eng_, f);
        std::unordered_map<int, memory> bargs{{DNNL_ARG_DIFF_DST, mem(f.dst_desc())},
                                              {DNNL_ARG_DIFF_SRC, mem(src)}};
        if (ws)
            bargs[DNNL_ARG_WORKSPACE] = ws;
        add<dnnl::pooling_backward>(n + ".bwd", b, bargs);
        return f.dst_desc();
    }

    void dense(const std::string& n, const memory::desc& src, int64_t batch, int64_t out) {
        memory::dims wd = src.dims();
        wd[0] = out;
        const memory::desc w_any(wd, dt::f32, tag::any), b_d({out}, dt::f32, tag::a),
            dst_any({batch, out}, dt::f32, tag::any);
        dnnl::inner_product_forward::primitive_desc f({fwd(), src, w_any, b_d, dst_any}, eng_);
        add<dnnl::inner_product_forward>(n + ".fwd", f,
                                         {{DNNL_ARG_SRC, mem(src)},
                                          {DNNL_ARG_WEIGHTS, mem(f.weights_desc(), -0.1f, 0.1f)},
                                          {DNNL_ARG_BIAS, mem(b_d)},
                                          {DNNL_ARG_DST, mem(f.dst_desc())}});
        if (!train_)
            return;
        dnnl::inner_product_backward_data::primitive_desc bd({src, w_any, f.dst_desc()}, eng_, f);
        reorder_if(n + ".bwd_data.weights", f.weights_desc(), bd.weights_desc());
        add<dnnl::inner_product_backward_data>(
            n + ".bwd_data", bd,
            {{DNNL_ARG_DIFF_DST, mem(f.dst_desc())},
             {DNNL_ARG_WEIGHTS, mem(bd.weights_desc(), -0.1f, 0.1f)},
             {DNNL_ARG_DIFF_SRC, mem(bd.diff_src_desc())}});
        dnnl::inner_product_backward_weights::primitive_desc bw({src, w_any, b_d, f.dst_desc()},
                                                                eng_, f);
        reorder_if(n + ".bwd_weights.diff_weights", bw.diff_weights_desc(), f.weights_desc());
        add<dnnl::inner_product_backward_weights>(
            n + ".bwd_weights", bw,
            {{DNNL_ARG_SRC, mem(bw.src_desc())},
             {DNNL_ARG_DIFF_DST, mem(bw.diff_dst_desc())},
             {DNNL_ARG_DIFF_WEIGHTS, mem(bw.diff_weights_desc())},
             {DNNL_ARG_DIFF_BIAS, mem(b_d)}});
    }
};

/// Median seconds of fn over `repeats` samples of at least min_s each (after warm-up); the fastest
/// sample in *fastest.
double measure(const std::function<void()>& fn, const Options& o, double* fastest = nullptr) {
    for (int i = 0; i < 2; ++i)
        fn();
    auto t = Clock::now();
    fn();
    const double one = std::max(std::chrono::duration<double>(Clock::now() - t).count(), 1e-7);
    const int inner = std::max(1, int(o.min_s / one));
    std::vector<double> s;
    for (int r = 0; r < o.repeats; ++r) {
        t = Clock::now();
        for (int i = 0; i < inner; ++i)
            fn();
        s.push_back(std::chrono::duration<double>(Clock::now() - t).count() / inner);
    }
    std::sort(s.begin(), s.end());
    if (fastest)
        *fastest = s.front();
    return s[s.size() / 2];
}

double peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;
}

/// impl "bound": direct convolutions; "bound_winograd": Winograd on the layers and passes symjax
/// runs it on, else direct: the bound of symjax's own choice of algorithm
/// (Note [Winograd convolutions] in src/backend/cpu/Conv.cpp).
void run_case(const Options& o, bool train, algorithm conv_alg = algorithm::convolution_direct) {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    std::vector<Entry> es = Builder(eng, s, train, conv_alg).build(network(o.arch), o.batch);
    double sum_s = 0, sum_fastest_s = 0;
    for (Entry& e : es) {
        try {
            e.run();
        } catch (const dnnl::error& err) {
            throw std::runtime_error(e.name + " (" + e.impl + "): " + err.what());
        }
        double fastest = 0;
        const double t = measure(
            [&] {
                e.run();
                s.wait();
            },
            o, &fastest);
        e.ms = t * 1e3;
        sum_s += t, sum_fastest_s += fastest;
    }
    // The same calls back to back, as one step: caches shared between neighbours (for reference).
    const double seq_s = measure(
        [&] {
            for (Entry& e : es)
                e.run();
            s.wait();
        },
        o);
    std::string ms = "{", impls = "{";
    for (size_t i = 0; i < es.size(); ++i) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.4f", es[i].ms);
        ms += (i ? ", \"" : "\"") + es[i].name + "\": " + buf;
        impls += (i ? ", \"" : "\"") + es[i].name + "\": \"" + es[i].impl + "\"";
    }
    std::printf(
        "{\"bench\": \"cnn_train\", \"case\": \"%s\", \"impl\": \"%s\", \"threads\": %d, "
        "\"arch\": \"%s\", \"batch\": %lld, \"value\": %.6g, \"unit\": \"images/s\", "
        "\"ms_per_step\": %.4f, \"fastest_ms_per_step\": %.4f, \"sequence_ms\": %.4f, "
        "\"sequence_images_per_s\": %.6g, "
        "\"primitives\": %zu, \"peak_rss_mb\": %.1f, \"primitive_ms\": %s}, \"primitive_impl\": "
        "%s}}\n",
        train ? "train" : "infer",
        conv_alg == algorithm::convolution_winograd ? "bound_winograd" : "bound",
        omp_get_max_threads(), o.arch.c_str(), static_cast<long long>(o.batch), o.batch / sum_s,
        sum_s * 1e3, sum_fastest_s * 1e3, seq_s * 1e3, o.batch / seq_s, es.size(), peak_rss_mb(),
        ms.c_str(), impls.c_str());
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--arch")
            o.arch = v;
        else if (k == "--batch")
            o.batch = std::stoll(v);
        else if (k == "--case")
            o.cs = v;
        else if (k == "--min-s")
            o.min_s = std::stod(v);
        else if (k == "--repeats")
            o.repeats = std::stoi(v);
        else {
            std::fprintf(stderr,
                         "usage: %s --arch brief|symjax --batch B [--case train|infer|all] "
                         "[--min-s S] [--repeats R]\n",
                         argv[0]);
            return 2;
        }
    }
    try {
        if (o.cs == "train" || o.cs == "all") {
            run_case(o, true);
            run_case(o, true, algorithm::convolution_winograd);
        }
        if (o.cs == "infer" || o.cs == "all") {
            run_case(o, false);
            run_case(o, false, algorithm::convolution_winograd);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cnn_bound: %s\n", e.what());
        return 1;
    }
}
