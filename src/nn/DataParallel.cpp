// Data-parallel training: bucketed gradient averaging and the parameter broadcast.
#include <symjax/Autodiff.h>
#include <symjax/Dist.h>
#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/nn/DataParallel.h>

#include <algorithm>

namespace sj::nn {

std::vector<Tensor> average_gradients(const std::vector<Tensor>& grads, int64_t bucket_bytes) {
    SJ_CHECK(bucket_bytes > 0, InputError)
        << "nn::average_gradients: bucket_bytes must be positive, got " << bucket_bytes;
    std::vector<Tensor> out(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
        const Tensor& g = grads[i];
        SJ_CHECK(g.defined(), InputError)
            << "nn::average_gradients: gradient " << i << " is undefined";
        SJ_CHECK(is_float(g.dtype()), TypeError)
            << "nn::average_gradients: gradient " << i << " (" << g.name() << ") is "
            << g.type_str() << "; only float gradients are averaged";
        for (int64_t d : g.shape())
            SJ_CHECK(d >= 0, ShapeError)
                << "nn::average_gradients: gradient " << i << " (" << g.name() << ") has shape "
                << shape_str(g.shape()) << "; a bucket needs static shapes";
    }
    if (dist::size() == 1)
        return grads;
    // the last gradients first: backward computes them first (Note [Gradient buckets] in
    // docs/distributed.md)
    std::vector<size_t> bucket;
    int64_t bytes = 0;
    auto flush = [&] {
        if (bucket.empty())
            return;
        std::vector<Tensor> flat;
        for (size_t i : bucket)
            flat.push_back(reshape(grads[i], Shape{numel(grads[i].shape())}));
        Tensor sum =
            dist::all_reduce(flat.size() == 1 ? flat[0] : concat(flat, 0), dist::ReduceOp::Mean);
        int64_t at = 0;
        for (size_t i : bucket) {
            int64_t n = numel(grads[i].shape());
            out[i] = reshape(slice_axis(sum, 0, at, at + n), grads[i].shape());
            at += n;
        }
        bucket.clear();
        bytes = 0;
    };
    for (size_t k = grads.size(); k-- > 0;) {
        const Tensor& g = grads[k];
        int64_t b = numel(g.shape()) * int64_t(dtype_size(g.dtype()));
        if (!bucket.empty() &&
            (grads[bucket.front()].dtype() != g.dtype() || bytes + b > bucket_bytes))
            flush();
        bucket.push_back(k);
        bytes += b;
    }
    flush();
    return out;
}

data::Batch shard_batch(const data::Batch& global, int rank, int size) {
    SJ_CHECK(size >= 1 && rank >= 0 && rank < size, InputError)
        << "nn::shard_batch: rank " << rank << " of a world of " << size;
    int64_t big = global.y.shape().empty() ? 0 : global.y.shape()[0];
    SJ_CHECK(big % size == 0, ShapeError)
        << "nn::shard_batch: the global batch of " << big << " samples does not split into " << size
        << " equal shares (make the batch size a multiple of the number of ranks, or "
        << "drop_last)";
    int64_t b = big / size, at = int64_t(rank) * b;
    auto rows = [&](const Array& a) {
        Shape s = a.shape();
        int64_t row = s.empty() ? 0 : a.nbytes() / std::max<int64_t>(s[0], 1);
        s[0] = b;
        return Array::from_buffer(a.dtype(), s, static_cast<const char*>(a.raw()) + at * row);
    };
    data::Batch out;
    out.x = rows(global.x);
    out.y = rows(global.y);
    if (int64_t(global.indices.size()) == big)
        out.indices.assign(global.indices.begin() + at, global.indices.begin() + at + b);
    out.index = global.index;
    out.epoch = global.epoch;
    return out;
}

void broadcast_variables(const std::vector<Variable>& vars, int root) {
    for (const Variable& v : vars) {
        SJ_CHECK(v.defined(), InputError) << "nn::broadcast_variables: an undefined variable";
        v.assign(dist::broadcast(v.value(), root));
    }
}

DataParallel::DataParallel(optim::Optimizer& optimizer, DataParallelOptions options)
    : optimizer_(&optimizer), options_(options) {
    SJ_CHECK(options_.bucket_bytes > 0, InputError)
        << "nn::DataParallel: bucket_bytes must be positive, got " << options_.bucket_bytes;
}

Updates DataParallel::minimize(const Tensor& loss, const std::vector<Variable>& params) {
    SJ_CHECK(loss.defined() && loss.rank() == 0 && is_float(loss.dtype()), TypeError)
        << "nn::DataParallel: minimize needs a 0-d float loss, got "
        << (loss.defined() ? loss.name() + " " + loss.type_str() : std::string("undefined"));
    std::vector<Tensor> wrt(params.begin(), params.end());
    return apply(gradients(loss, wrt), params);
}

Updates DataParallel::minimize(const Tensor& loss) {
    SJ_CHECK(loss.defined(), TypeError) << "nn::DataParallel: minimize of an undefined loss";
    std::vector<Variable> params;
    for (auto& v : variables_of({loss}, true))
        if (is_float(v.dtype()))
            params.push_back(std::move(v));
    SJ_CHECK(!params.empty(), InputError)
        << "nn::DataParallel: the loss " << loss.name()
        << " depends on no trainable float variable (pass the parameters explicitly)";
    return minimize(loss, params);
}

Updates DataParallel::apply(const std::vector<Tensor>& grads, const std::vector<Variable>& params) {
    SJ_CHECK(grads.size() == params.size(), InputError)
        << "nn::DataParallel: " << grads.size() << " gradients for " << params.size()
        << " parameters";
    if (options_.broadcast_parameters)
        broadcast_variables(params, 0);
    return optimizer_->apply(average_gradients(grads, options_.bucket_bytes), params);
}

} // namespace sj::nn
