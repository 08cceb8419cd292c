// The optimizer base: learning rates, gradient clipping, step counter and per-parameter slots.
#include "NnUtil.h"

#include <symjax/Autodiff.h>
#include <symjax/Ops.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>
#include <symjax/nn/Optim.h>

#include <unordered_set>

namespace sj::nn::optim {

// ---- LearningRate -------------------------------------------------------------------------------
LearningRate::LearningRate(double v) : value_(v) {}

LearningRate::LearningRate(const Tensor& t) : tensor_(t) {
    SJ_CHECK(t.defined() && t.rank() == 0 && t.dtype() != DType::Bool, ShapeError)
        << "nn::optim::LearningRate: a learning-rate tensor must be a numeric 0-d tensor, got "
        << (t.defined() ? t.name() + " " + t.type_str() : std::string("undefined"));
}

LearningRate::LearningRate(std::function<Tensor(const Tensor&)> schedule)
    : schedule_(std::move(schedule)) {
    SJ_CHECK(static_cast<bool>(schedule_), Error) << "nn::optim::LearningRate: empty schedule";
}

Tensor LearningRate::at(const Tensor& step, DType dtype) const {
    Tensor r;
    if (schedule_) {
        r = schedule_(step);
        SJ_CHECK(r.defined() && r.rank() == 0, ShapeError)
            << "nn::optim::LearningRate: the schedule must return a 0-d tensor, got "
            << (r.defined() ? r.type_str() : std::string("undefined"));
    } else if (tensor_.defined()) {
        r = tensor_;
    } else {
        return scalar(value_, dtype);
    }
    return r.dtype() == dtype ? r : cast(r, dtype);
}

// ---- clipping -----------------------------------------------------------------------------------
Tensor global_norm(const std::vector<Tensor>& ts) {
    Tensor total = scalar(0.0, DType::F64);
    for (const auto& t : ts) {
        SJ_CHECK(t.defined(), Error) << "nn::optim::global_norm: undefined tensor";
        Tensor x = t.dtype() == DType::F64 ? t : cast(t, DType::F64);
        total = total + sum(x * x);
    }
    return sqrt(total);
}

std::vector<Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double max_norm) {
    SJ_CHECK(max_norm > 0, InputError)
        << "nn::optim::clip_by_global_norm: max_norm must be positive, got " << max_norm;
    Tensor scale = max_norm / maximum(global_norm(grads), max_norm);
    std::vector<Tensor> out;
    for (const auto& g : grads)
        out.push_back(g * (g.dtype() == DType::F64 ? scale : cast(scale, g.dtype())));
    return out;
}

std::vector<Tensor> clip_by_value(const std::vector<Tensor>& grads, double limit) {
    SJ_CHECK(limit > 0, InputError)
        << "nn::optim::clip_by_value: limit must be positive, got " << limit;
    std::vector<Tensor> out;
    for (const auto& g : grads)
        out.push_back(clip(g, -limit, limit));
    return out;
}

// ---- Optimizer ----------------------------------------------------------------------------------
Optimizer::Optimizer(LearningRate lr, const std::string& kind) : lr_(std::move(lr)) {
    scope_ = nn::detail::unique_scope(kind);
    step_ = nn::detail::make_variable(scope_ + "/step", Array::scalar<int64_t>(0), false);
}

Optimizer& Optimizer::clip_by_global_norm(double max_norm) {
    SJ_CHECK(max_norm >= 0, InputError) << "optim: clip_by_global_norm(" << max_norm << ") < 0";
    clip_norm_ = max_norm;
    return *this;
}

Optimizer& Optimizer::clip_by_value(double limit) {
    SJ_CHECK(limit >= 0, InputError) << "optim: clip_by_value(" << limit << ") < 0";
    clip_value_ = limit;
    return *this;
}

Tensor Optimizer::learning_rate(DType dtype) const {
    return lr_.at(step_, dtype);
}

std::vector<Variable> Optimizer::variables() const {
    std::vector<Variable> out{step_};
    out.insert(out.end(), slot_order_.begin(), slot_order_.end());
    return out;
}

Variable Optimizer::slot(const Variable& p, const std::string& name, double init) {
    std::string full = scope_ + "/" + p.full_name() + "/" + name;
    auto it = slots_.find(full);
    if (it != slots_.end())
        return it->second;
    Variable v =
        nn::detail::make_variable(full, Array::full(p.dtype(), p.state().shape, init), false);
    slots_.emplace(full, v);
    slot_order_.push_back(v);
    return v;
}

Updates Optimizer::minimize(const Tensor& loss, const std::vector<Variable>& params) {
    SJ_CHECK(loss.defined() && loss.rank() == 0 && is_float(loss.dtype()), TypeError)
        << "optim '" << scope_ << "': minimize needs a 0-d float loss, got "
        << (loss.defined() ? loss.name() + " " + loss.type_str() : std::string("undefined"));
    std::vector<Tensor> wrt(params.begin(), params.end());
    return apply(gradients(loss, wrt), params);
}

Updates Optimizer::minimize(const Tensor& loss) {
    SJ_CHECK(loss.defined(), TypeError)
        << "optim '" << scope_ << "': minimize of an undefined loss";
    std::vector<Variable> params;
    for (auto& v : variables_of({loss}, true))
        if (is_float(v.dtype()))
            params.push_back(std::move(v)); // integers have no gradient
    SJ_CHECK(!params.empty(), InputError)
        << "optim '" << scope_ << "': the loss " << loss.name()
        << " depends on no trainable float variable (pass the parameters explicitly, or mark them "
           "trainable)";
    return minimize(loss, params);
}

Updates Optimizer::apply(const std::vector<Tensor>& grads, const std::vector<Variable>& params) {
    SJ_CHECK(grads.size() == params.size(), InputError)
        << "optim '" << scope_ << "': " << grads.size() << " gradients for " << params.size()
        << " parameters";
    std::unordered_set<const Node*> seen;
    for (size_t i = 0; i < params.size(); ++i) {
        const Variable& p = params[i];
        SJ_CHECK(p.defined() && grads[i].defined(), Error)
            << "optim '" << scope_ << "': undefined parameter or gradient " << i;
        SJ_CHECK(seen.insert(p.node().get()).second, InputError)
            << "optim '" << scope_ << "': parameter '" << p.full_name() << "' is listed twice";
        SJ_CHECK(is_float(p.dtype()), TypeError)
            << "optim '" << scope_ << "': parameter '" << p.full_name() << "' has dtype "
            << dtype_name(p.dtype()) << "; only float parameters can be optimized";
    }
    std::vector<Tensor> gs = grads;
    for (size_t i = 0; i < gs.size(); ++i)
        if (gs[i].dtype() != params[i].dtype())
            gs[i] = cast(gs[i], params[i].dtype());
    if (clip_norm_ > 0)
        gs = nn::optim::clip_by_global_norm(gs, clip_norm_);
    if (clip_value_ > 0)
        gs = nn::optim::clip_by_value(gs, clip_value_);

    Updates params_upd, slot_upd;
    for (size_t i = 0; i < params.size(); ++i) {
        const Variable& p = params[i];
        DType dt = p.dtype();
        StepContext ctx{lr_.at(step_, dt), cast(step_ + 1.0, dt)};
        params_upd.add(p, update(p, gs[i], ctx, slot_upd));
    }
    params_upd += slot_upd;
    params_upd.add(step_, step_ + 1.0);
    return params_upd;
}

} // namespace sj::nn::optim
