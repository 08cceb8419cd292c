// Exponential moving averages of variables in shadow variables.
#include "NnUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/Optim.h>

namespace sj::nn::optim {

ExponentialMovingAverage::ExponentialMovingAverage(double decay, bool use_num_updates,
                                                   const std::string &name)
    : decay_(decay), use_num_updates_(use_num_updates) {
    SJ_CHECK(decay >= 0 && decay <= 1, InputError)
        << "nn::optim::ExponentialMovingAverage: decay must lie in [0, 1], got " << decay;
    scope_ = nn::detail::unique_scope(name);
    num_updates_ =
        nn::detail::make_variable(scope_ + "/num_updates", Array::scalar<int64_t>(0), false);
}

Updates ExponentialMovingAverage::apply(const std::vector<Variable> &vars, const Updates &after) {
    Tensor decay = scalar(decay_, DType::F64);
    if (use_num_updates_) {
        Tensor n = cast(num_updates_, DType::F64);
        decay = minimum(decay, (1.0 + n) / (10.0 + n));
    }
    Updates out;
    for (const auto &v : vars) {
        SJ_CHECK(v.defined() && is_float(v.dtype()), TypeError)
            << "nn::optim::ExponentialMovingAverage: only float variables can be averaged";
        auto it = shadows_.find(v.full_name());
        if (it == shadows_.end()) {
            Variable s = nn::detail::make_variable(scope_ + "/" + v.full_name(), v.value(), false);
            it = shadows_.emplace(v.full_name(), s).first;
            order_.push_back(s);
        }
        const Variable &s = it->second;
        Tensor next = after.get(v);
        Tensor x = next.defined() ? next : Tensor(v);
        Tensor d = v.dtype() == DType::F64 ? decay : cast(decay, v.dtype());
        out.add(s, d * s + (1.0 - d) * x);
    }
    out.add(num_updates_, num_updates_ + 1.0);
    return out;
}

Variable ExponentialMovingAverage::average(const Variable &v) const {
    auto it = shadows_.find(v.full_name());
    SJ_CHECK(it != shadows_.end(), InputError)
        << "nn::optim::ExponentialMovingAverage '" << scope_ << "': no average of '" << v.full_name()
        << "' (pass it to apply first)";
    return it->second;
}

std::vector<Variable> ExponentialMovingAverage::variables() const {
    std::vector<Variable> out{num_updates_};
    out.insert(out.end(), order_.begin(), order_.end());
    return out;
}

} // namespace sj::nn::optim
