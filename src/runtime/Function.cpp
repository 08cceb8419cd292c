// Function: validation of inputs, execution through a backend, and the atomic commit of updates.
#include "../backend/Backend.h"

#include <symjax/Function.h>
#include <symjax/Graph.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

namespace sj {

// ---- Updates ------------------------------------------------------------------------------------
Updates::Updates(std::initializer_list<std::pair<Variable, Tensor>> items) {
    for (const auto& [v, t] : items)
        add(v, t);
}

Updates& Updates::add(const Variable& var, const Tensor& value) {
    SJ_CHECK(var.defined() && value.defined(), Error) << "Updates: undefined variable or value";
    const auto& s = var.state();
    SJ_CHECK(!index_.count(var.node().get()), Error)
        << "Updates: variable '" << s.name << "' is updated twice";
    SJ_CHECK(value.dtype() == s.dtype, TypeError)
        << "Updates: new value " << value.name() << " " << value.type_str() << " for variable '"
        << s.name << "' " << dtype_name(s.dtype) << shape_str(s.shape) << " has another dtype";
    const Shape& vs = value.shape();
    bool ok = vs.size() == s.shape.size();
    for (size_t i = 0; ok && i < vs.size(); ++i)
        ok = vs[i] == s.shape[i] || vs[i] == -1;
    SJ_CHECK(ok, ShapeError) << "Updates: new value " << value.name() << " " << value.type_str()
                             << " does not fit variable '" << s.name << "' " << dtype_name(s.dtype)
                             << shape_str(s.shape);
    index_.emplace(var.node().get(), items_.size());
    items_.emplace_back(var, value);
    return *this;
}

Updates& Updates::operator+=(const Updates& o) {
    for (const auto& [v, t] : o.items_)
        add(v, t);
    return *this;
}

Tensor Updates::get(const Variable& var) const {
    auto it = index_.find(var.node().get());
    return it == index_.end() ? Tensor() : items_[it->second].second;
}

namespace detail {

class FunctionImpl {
public:
    Program program;
    FunctionOptions options;
    std::unique_ptr<Executable> exe;
    FunctionStats stats;
    std::mutex mu; // one call at a time per function (the counter and commit are sequential)
    uint64_t calls = 0;
    /// The locks a call takes: Program::variables' states, exclusive for those it updates.
    VariableLocks::Order var_locks;
};

} // namespace detail

std::vector<std::string> available_backends() {
    return detail::backend_names();
}

// ---- function() ---------------------------------------------------------------------------------
// Note [Inputs that are not placeholders]
// As Theano's givens at call time and SymJAX's function(*inputs): any tensor may be an input (a
// variable, an intermediate, a constant). Each one that is not a placeholder is replaced, in the
// outputs and the update values, by a fresh placeholder of its type named like it (clone()), so
// the compiled program sees only placeholders: the argument overrides the tensor for that call,
// nothing upstream of it runs unless something else still needs it, and both backends compile
// it as any other program. A variable given as an input keeps its stored value; an update of it
// (keyed by the variable) still writes the variable, with the value computed from the argument.
namespace {
struct Substituted {
    std::vector<Tensor> inputs, outputs;
    Updates updates;
};

Substituted substitute_inputs(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                              const Updates& updates) {
    Substituted s{inputs, outputs, updates};
    Givens givens;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        SJ_CHECK(t.defined(), Error) << "function: input " << i << " is an undefined Tensor";
        for (size_t j = 0; j < i; ++j)
            SJ_CHECK(!inputs[j].same(t), Error)
                << "function: input '" << t.name() << "' is listed twice (inputs " << j << " and "
                << i << ")";
        if (t.node()->is(Op::Placeholder))
            continue;
        Placeholder ph(t.shape(), t.dtype(), "input");
        ph.node()->set_name(t.name()); // messages name the user's tensor
        givens.emplace_back(t, ph);
        s.inputs[i] = ph;
    }
    if (givens.empty())
        return s;
    std::vector<Tensor> all = outputs;
    for (const auto& [v, t] : updates.items())
        all.push_back(t);
    all = clone(all, givens);
    s.outputs.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(outputs.size()));
    s.updates = Updates();
    size_t k = outputs.size();
    for (const auto& [v, t] : updates.items())
        s.updates.add(v, all[k++]);
    return s;
}
} // namespace

Function function(const std::vector<Tensor>& inputs_given, const std::vector<Tensor>& outputs_given,
                  const Updates& updates_given, const FunctionOptions& options) {
    for (const auto& o : outputs_given)
        SJ_CHECK(o.defined(), Error) << "function: undefined output tensor";
    const Substituted sub = substitute_inputs(inputs_given, outputs_given, updates_given);
    const std::vector<Tensor>& inputs = sub.inputs;
    const std::vector<Tensor>& outputs = sub.outputs;
    const Updates& updates = sub.updates;
    auto impl = std::make_shared<detail::FunctionImpl>();
    detail::Program& p = impl->program;
    for (const auto& t : inputs)
        p.inputs.push_back(t.node());
    for (const auto& o : outputs)
        p.outputs.push_back(o.node());
    std::vector<const Node*> roots;
    for (const auto& o : outputs)
        roots.push_back(o.node().get());
    for (const auto& [v, t] : updates.items())
        roots.push_back(t.node().get());

    std::unordered_map<const Node*, size_t> var_index;
    auto add_var = [&](const NodePtr& n) {
        auto [it, fresh] = var_index.emplace(n.get(), p.variables.size());
        if (fresh)
            p.variables.push_back(n);
        return it->second;
    };
    for (const Node* n : topo_order(roots)) {
        if (n->is(Op::Variable))
            add_var(n->shared_from_this());
        if (n->is(Op::Placeholder)) {
            bool given = std::any_of(p.inputs.begin(), p.inputs.end(),
                                     [&](const NodePtr& i) { return i.get() == n; });
            SJ_CHECK(given, InputError)
                << "function: the outputs depend on placeholder '" << n->name() << "' "
                << type_str(n->type()) << ", which is not among the inputs";
        }
    }
    for (const auto& [v, t] : updates.items())
        p.updates.emplace_back(add_var(v.node()), t.node());

    std::vector<detail::VariableState*> states;
    std::vector<bool> updated(p.variables.size(), false);
    for (const auto& v : p.variables)
        states.push_back(v->attr<VariableAttrs>().state.get());
    for (const auto& [k, t] : p.updates)
        updated[k] = true;
    impl->var_locks = detail::VariableLocks::order(states, updated);
    impl->options = options;
    impl->exe = detail::find_backend(options.backend)(p, options);
    impl->stats = impl->exe->stats();
    Function f;
    f.impl_ = std::move(impl);
    return f;
}

namespace {
/// A C++ number as a 0-d array of dtype `t`, refusing conversions that would change its value
/// (Array::full saturates and maps NaN to 0: right for a fill value, silent for an input).
Array number_input(const Function::Arg& arg, DType t, size_t i, const std::string& name) {
    if (is_float(t))
        return Array::full(t, {}, arg.is_integer ? double(arg.integer) : arg.number);
    auto where = [&] { return "input " + std::to_string(i) + " ('" + name + "'): "; };
    auto given = [&] { // the shortest text that reads back as the value given
        if (arg.is_integer)
            return std::to_string(arg.integer);
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, arg.number);
        return std::string(buf, r.ptr);
    };
    if (t == DType::Bool) {
        bool ok = arg.is_integer ? (arg.integer == 0 || arg.integer == 1)
                                 : (arg.number == 0 || arg.number == 1);
        SJ_CHECK(ok, InputError) << where() << "a bool input takes true, false, 0 or 1, got "
                                 << given();
        return Array::full(t, {}, arg.is_integer ? double(arg.integer) : arg.number);
    }
    return dispatch(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using L = std::numeric_limits<T>;
        auto range = [&] {
            return std::string(dtype_name(t)) + " [" + std::to_string(+L::lowest()) + ", " +
                   std::to_string(+L::max()) + "]";
        };
        if (arg.is_integer) {
            int64_t x = arg.integer;
            bool fits = x >= int64_t(L::lowest()) && (x < 0 || uint64_t(x) <= uint64_t(L::max()));
            SJ_CHECK(fits, InputError)
                << where() << given() << " is out of the range of " << range();
            return Array::scalar<T>(static_cast<T>(arg.integer));
        }
        double v = arg.number;
        SJ_CHECK(std::isfinite(v), InputError)
            << where() << given() << " cannot be converted to the integer type " << dtype_name(t);
        SJ_CHECK(std::trunc(v) == v, InputError)
            << where() << given() << " is not an integer (the input is " << dtype_name(t) << ")";
        // 2^bits bounds are exact doubles, where max() itself may not be (2^63 - 1)
        SJ_CHECK(v >= double(L::lowest()) && v < 2.0 * double(L::max() / 2 + 1), InputError)
            << where() << given() << " is out of the range of " << range();
        return Array::scalar<T>(static_cast<T>(v));
    });
}

/// Checks one argument against its placeholder, binding -1 dims. Numbers become 0-d arrays of
/// the placeholder's dtype.
Array check_input(const Node& ph, const Function::Arg& arg, size_t i) {
    const auto& a = ph.attr<PlaceholderAttrs>();
    const std::string& name = ph.name();
    if (arg.is_number) {
        SJ_CHECK(a.shape.empty(), InputError)
            << "input " << i << " ('" << name << "'): a number was given for a tensor of type "
            << type_str(ph.type());
        return number_input(arg, a.dtype, i, name);
    }
    const Array& v = arg.array;
    SJ_CHECK(v.defined(), InputError) << "input " << i << " ('" << name << "'): undefined Array";
    SJ_CHECK(v.dtype() == a.dtype, InputError)
        << "input " << i << " ('" << name << "'): expected dtype " << dtype_name(a.dtype)
        << ", got " << v.type_str();
    bool ok = v.rank() == static_cast<int>(a.shape.size());
    for (size_t d = 0; ok && d < a.shape.size(); ++d)
        ok = a.shape[d] == -1 || a.shape[d] == v.shape()[d];
    SJ_CHECK(ok, InputError) << "input " << i << " ('" << name << "'): expected shape "
                             << shape_str(a.shape) << ", got " << shape_str(v.shape());
    return v;
}
} // namespace

std::vector<Array> Function::call(const std::vector<Arg>& args) const {
    SJ_CHECK(impl_, Error) << "call of an empty Function (use sj::function to make one)";
    auto& im = *impl_;
    const auto& p = im.program;
    SJ_CHECK(args.size() == p.inputs.size(), InputError)
        << "function called with " << args.size() << " inputs, expected " << p.inputs.size()
        << [&] {
               std::string s = " (";
               for (size_t i = 0; i < p.inputs.size(); ++i)
                   s += (i ? ", " : "") + p.inputs[i]->name() + " " + type_str(p.inputs[i]->type());
               return s + ")";
           }();
    std::vector<Array> in;
    in.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i)
        in.push_back(check_input(*p.inputs[i], args[i], i));

    std::lock_guard<std::mutex> lock(im.mu);
    // The variables it updates exclusively, the others shared, until the commit (Note
    // [Consistent snapshots] in Variable.cpp).
    detail::VariableLocks step(im.var_locks);
    // Snapshot variable values (buffers are shared, never written while a call reads them: a
    // commit swaps in new buffers).
    std::vector<Array> vals;
    vals.reserve(p.variables.size());
    for (const auto& v : p.variables) {
        auto& s = *v->attr<VariableAttrs>().state;
        std::lock_guard<std::mutex> vl(s.mu);
        vals.push_back(s.value);
    }
    uint64_t counter = im.options.rng_counter + (im.options.freeze_rng ? 0 : im.calls);
    detail::ExecResult r = im.exe->run(in, vals, counter);
    SJ_ASSERT(r.new_values.size() == p.updates.size()) << "backend returned a wrong update count";
    // Commit: all updates at once, from values computed before any of them.
    for (size_t k = 0; k < p.updates.size(); ++k) {
        auto& s = *p.variables[p.updates[k].first]->attr<VariableAttrs>().state;
        SJ_CHECK(r.new_values[k].shape() == s.shape && r.new_values[k].dtype() == s.dtype,
                 InputError)
            << "the update of variable '" << s.name << "' " << dtype_name(s.dtype)
            << shape_str(s.shape) << " produced a value of shape " << r.new_values[k].type_str()
            << " with these inputs; no variable was changed";
    }
    // An output that is a leaf's value or shares a buffer with an input or a variable is copied,
    // so the caller's writes cannot reach the graph's state (constants are shared by all graphs).
    for (size_t k = 0; k < r.outputs.size(); ++k) {
        bool shared = has_trait(p.outputs[k]->op(), kLeaf);
        for (const auto& a : in)
            shared |= r.outputs[k].shares_buffer(a);
        for (const auto& a : vals)
            shared |= r.outputs[k].shares_buffer(a);
        if (shared)
            r.outputs[k] = r.outputs[k].clone();
    }
    // A new value that is also one of the caller's arrays (an input or a returned output) is
    // copied, so later writes on either side cannot reach the other.
    for (auto& nv : r.new_values) {
        bool shared = false;
        for (const auto& a : in)
            shared |= nv.shares_buffer(a);
        for (const auto& a : r.outputs)
            shared |= nv.shares_buffer(a);
        if (shared)
            nv = nv.clone();
    }
    for (size_t k = 0; k < p.updates.size(); ++k) {
        auto& s = *p.variables[p.updates[k].first]->attr<VariableAttrs>().state;
        std::lock_guard<std::mutex> vl(s.mu);
        s.set_value(std::move(r.new_values[k]));
    }
    im.exe->committed(); // (still under the variables' locks)
    ++im.calls;
    return std::move(r.outputs);
}

size_t Function::num_inputs() const {
    return impl_ ? impl_->program.inputs.size() : 0;
}
size_t Function::num_outputs() const {
    return impl_ ? impl_->program.outputs.size() : 0;
}
const FunctionStats& Function::stats() const {
    SJ_CHECK(impl_, Error) << "stats() of an empty Function";
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stats = impl_->exe->stats();
    return impl_->stats;
}
std::string Function::profile_report() const {
    return impl_ ? impl_->exe->profile_report() : "";
}
std::string Function::dump() const {
    return impl_ ? impl_->exe->dump() : "";
}

std::string FunctionOptions::default_backend() {
    if (const char* b = std::getenv("SJ_BACKEND"); b && *b)
        return b;
    return "cpu";
}
namespace {
/// An on/off switch in the environment: set, not empty and not "0".
bool env_flag(const char* name) {
    const char* g = std::getenv(name);
    return g && *g && std::string_view(g) != "0";
}
} // namespace
bool FunctionOptions::default_nan_guard() {
    return env_flag("SJ_NAN_GUARD");
}
bool FunctionOptions::default_flush_denormals() {
    return env_flag("SJ_FLUSH_DENORMALS");
}
uint64_t Function::calls() const {
    return impl_ ? impl_->calls : 0;
}

} // namespace sj
