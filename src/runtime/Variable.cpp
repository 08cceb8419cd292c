// Placeholders, variables and the variable name table.
#include <symjax/Scope.h>
#include <symjax/Variable.h>

#include <atomic>
#include <unordered_map>

namespace sj {

namespace {
std::atomic<uint64_t> g_next_placeholder{1};

/// Live variables by full name, plus creation order (weak: the table never keeps one alive).
struct VariableTable {
    std::mutex mu;
    std::unordered_map<std::string, std::weak_ptr<detail::VariableState>> by_name;
    std::vector<std::weak_ptr<detail::VariableState>> order;
    std::unordered_map<std::string, int> next_suffix;

    static VariableTable& get() {
        static auto* t = new VariableTable;
        return *t;
    }
    /// Reserves a unique name: `name`, else name_1, name_2, ...
    std::string add(const std::shared_ptr<detail::VariableState>& s, const std::string& name) {
        std::lock_guard<std::mutex> lock(mu);
        std::string n = name;
        int& k = next_suffix[name]; // continue where the last clash left off: linear, not quadratic
        for (;;) {
            auto it = by_name.find(n);
            if (it == by_name.end() || it->second.expired()) break;
            n = name + "_" + std::to_string(++k);
        }
        by_name[n] = s;
        order.push_back(s);
        if (order.size() > 64 && order.size() > 2 * by_name.size()) compact();
        return n;
    }
    void compact() {
        std::vector<std::weak_ptr<detail::VariableState>> keep;
        for (auto& w : order)
            if (!w.expired()) keep.push_back(w);
        order.swap(keep);
        for (auto it = by_name.begin(); it != by_name.end();)
            it = it->second.expired() ? by_name.erase(it) : std::next(it);
    }
};

void check_name(const std::string& name, const char* what) {
    SJ_CHECK(!name.empty(), Error) << what << ": a name is required";
}
} // namespace

Placeholder::Placeholder(const Shape& shape, DType dtype, const std::string& name) {
    check_name(name, "Placeholder");
    for (int64_t d : shape)
        SJ_CHECK(d >= -1, ShapeError) << "Placeholder '" << name << "': shape " << shape_str(shape)
                                      << " has a dim < -1";
    try {
        byte_size(shape, dtype_size(dtype));
    } catch (const ShapeError& e) {
        throw ShapeError("Placeholder '" + name + "' " + dtype_name(dtype) + ": " + e.what());
    }
    NodePtr n = Node::make(Op::Placeholder, PlaceholderAttrs{g_next_placeholder++, dtype, shape}, {});
    n->set_name(Scope::qualify(name));
    static_cast<Tensor&>(*this) = Tensor(n);
}

Placeholder::Placeholder(const Tensor& t) : Tensor(t) {
    SJ_CHECK(t.defined() && t.node()->is(Op::Placeholder), Error)
        << "Placeholder(Tensor): " << t.name() << " is not a placeholder";
}

namespace {
NodePtr make_variable(const std::shared_ptr<detail::VariableState>& s, const std::string& name) {
    s->name = VariableTable::get().add(s, Scope::qualify(name));
    NodePtr n = Node::make(Op::Variable, VariableAttrs{s}, {});
    n->set_name(s->name);
    return n;
}
} // namespace

Variable::Variable(const Array& init, const std::string& name, bool trainable)
    : Variable(init.defined() ? init.clone() : Array(), name, trainable) {}

Variable::Variable(Array&& init, const std::string& name, bool trainable) {
    check_name(name, "Variable");
    SJ_CHECK(init.defined(), InputError) << "Variable '" << name << "': undefined initial value";
    auto s = std::make_shared<detail::VariableState>();
    s->dtype = init.dtype();
    s->shape = init.shape();
    s->trainable = trainable;
    // a temporary nobody else holds is adopted, anything else copied (the caller may write it)
    s->initial = init.unique() ? std::move(init) : init.clone();
    // one copy: the value shares the initial buffer until the first update replaces it (a
    // kernel writes a variable in place only when no other array holds its buffer)
    s->value = s->initial;
    static_cast<Tensor&>(*this) = Tensor(make_variable(s, name));
}

Variable::Variable(const Tensor& init, const std::string& name, bool trainable) {
    check_name(name, "Variable");
    SJ_CHECK(init.defined(), InputError) << "Variable '" << name << "': undefined initialiser";
    SJ_CHECK(is_static(init.shape()), ShapeError)
        << "Variable '" << name << "': initialiser " << init.type_str() << " has unknown dims";
    Array v = init.eval();
    auto s = std::make_shared<detail::VariableState>();
    s->dtype = v.dtype();
    s->shape = v.shape();
    s->trainable = trainable;
    s->initial = v.clone();
    s->init_expr = init;
    s->value = std::move(v);
    static_cast<Tensor&>(*this) = Tensor(make_variable(s, name));
}

Variable::Variable(const Tensor& t) : Tensor(t) {
    SJ_CHECK(t.defined() && t.node()->is(Op::Variable), Error)
        << "Variable(Tensor): " << t.name() << " is not a variable";
}

detail::VariableState& Variable::state() const {
    SJ_CHECK(defined(), Error) << "use of an empty Variable handle";
    return *node()->attr<VariableAttrs>().state;
}

Array Variable::value() const {
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.value.clone();
}

void Variable::assign(const Array& v, bool allow_cast) const {
    auto& s = state();
    SJ_CHECK(v.defined(), InputError) << "assign to '" << s.name << "': undefined array";
    SJ_CHECK(v.shape() == s.shape, ShapeError)
        << "assign to '" << s.name << "': value " << v.type_str() << " does not match the variable's "
        << dtype_name(s.dtype) << shape_str(s.shape);
    SJ_CHECK(v.dtype() == s.dtype || allow_cast, TypeError)
        << "assign to '" << s.name << "': value " << v.type_str() << " is not "
        << dtype_name(s.dtype) << " (pass allow_cast = true to convert)";
    Array nv = v.dtype() == s.dtype ? v.clone() : v.astype(s.dtype);
    std::lock_guard<std::mutex> lock(s.mu);
    s.value = std::move(nv);
}

void Variable::reset() const {
    auto& s = state();
    Array v = s.init_expr.defined() ? s.init_expr.eval() : s.initial.clone();
    std::lock_guard<std::mutex> lock(s.mu);
    s.value = std::move(v);
}

bool Variable::trainable() const { return state().trainable; }
const std::string& Variable::full_name() const { return state().name; }

bool glob_match(const std::string& glob, const std::string& name) {
    // iterative wildcard matching with backtracking on the last '*'
    size_t g = 0, n = 0, star = std::string::npos, mark = 0;
    while (n < name.size()) {
        if (g < glob.size() && (glob[g] == '?' || glob[g] == name[n])) {
            ++g;
            ++n;
        } else if (g < glob.size() && glob[g] == '*') {
            star = g++;
            mark = n;
        } else if (star != std::string::npos) {
            g = star + 1;
            n = ++mark;
        } else {
            return false;
        }
    }
    while (g < glob.size() && glob[g] == '*') ++g;
    return g == glob.size();
}

std::vector<Variable> get_variables(const std::string& glob, std::optional<bool> trainable) {
    auto& t = VariableTable::get();
    std::vector<std::shared_ptr<detail::VariableState>> live;
    {
        std::lock_guard<std::mutex> lock(t.mu);
        for (auto& w : t.order)
            if (auto s = w.lock()) live.push_back(std::move(s));
    }
    std::vector<Variable> out;
    for (auto& s : live) {
        if (!glob_match(glob, s->name)) continue;
        if (trainable && s->trainable != *trainable) continue;
        NodePtr n = Node::make(Op::Variable, VariableAttrs{s}, {});
        out.emplace_back(Tensor(n));
    }
    return out;
}

void reset_variables(const std::string& glob) {
    for (auto& v : get_variables(glob)) v.reset();
}

} // namespace sj
