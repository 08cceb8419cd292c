// Placeholders, variables and the variable name table.
#include <symjax/Scope.h>
#include <symjax/Variable.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <unordered_map>

namespace sj {

namespace {
std::atomic<uint64_t> g_next_placeholder{1};
std::atomic<uint64_t> g_next_version{1};

/// Live variables by full name, plus creation order (weak: the table never keeps one alive). A
/// dying variable gives its name back, so a program that makes and drops variables in a loop
/// keeps a table of its live ones and names them "v", "v_1", ... as if they were the only ones.
struct VariableTable {
    std::mutex mu;
    std::unordered_map<std::string, std::weak_ptr<detail::VariableState>> by_name;
    std::vector<std::weak_ptr<detail::VariableState>> order;
    /// Per requested name: the next unused suffix, the suffixes given back, how many live.
    struct Base {
        int next = 0;
        std::set<int> free;
        size_t live = 0;
    };
    std::unordered_map<std::string, Base> bases;

    static VariableTable& get() {
        static auto* t = new VariableTable; // never destroyed: variables die in static teardown
        return *t;
    }
    /// Reserves a unique name: `name`, else name_1, name_2, ... (the smallest given back first;
    /// linear in the number of variables, never a scan from _1).
    std::string add(const std::shared_ptr<detail::VariableState>& s, const std::string& name) {
        std::lock_guard<std::mutex> lock(mu);
        Base& b = bases[name];
        for (;;) {
            int k = b.next;
            if (!b.free.empty()) {
                k = *b.free.begin();
                b.free.erase(b.free.begin());
            } else {
                ++b.next;
            }
            std::string n = k == 0 ? name : name + "_" + std::to_string(k);
            auto it = by_name.find(n);
            if (it != by_name.end() && !it->second.expired())
                continue; // a live one of another base
            by_name[n] = s;
            order.push_back(s);
            ++b.live;
            s->base = name;
            s->suffix = k;
            compact_if_sparse();
            return n;
        }
    }
    void release(const detail::VariableState& s) {
        if (s.base.empty())
            return; // never named (construction threw before add)
        std::lock_guard<std::mutex> lock(mu);
        auto it = by_name.find(s.name);
        if (it != by_name.end() && it->second.expired())
            by_name.erase(it);
        auto b = bases.find(s.base);
        if (b != bases.end()) {
            if (--b->second.live == 0)
                bases.erase(b);
            else
                b->second.free.insert(s.suffix);
        }
        compact_if_sparse();
    }
    void compact_if_sparse() {
        if (order.size() <= 64 || order.size() <= 2 * by_name.size())
            return;
        std::vector<std::weak_ptr<detail::VariableState>> keep;
        for (auto& w : order)
            if (!w.expired())
                keep.push_back(w);
        order.swap(keep);
    }
};

void check_name(const std::string& name, const char* what) {
    SJ_CHECK(!name.empty(), Error) << what << ": a name is required";
}
} // namespace

Placeholder::Placeholder(const Shape& shape, DType dtype, const std::string& name) {
    check_name(name, "Placeholder");
    for (int64_t d : shape)
        SJ_CHECK(d >= -1, ShapeError)
            << "Placeholder '" << name << "': shape " << shape_str(shape) << " has a dim < -1";
    try {
        byte_size(shape, dtype_size(dtype));
    } catch (const ShapeError& e) {
        throw ShapeError("Placeholder '" + name + "' " + dtype_name(dtype) + ": " + e.what());
    }
    NodePtr n =
        Node::make(Op::Placeholder, PlaceholderAttrs{g_next_placeholder++, dtype, shape}, {});
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
    s->set_value(s->initial);
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
    s->set_value(std::move(v));
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
    std::shared_lock<std::shared_mutex> step(s.rw); // no call writes it in place meanwhile
    std::lock_guard<std::mutex> lock(s.mu);
    return s.value.clone();
}

void Variable::assign(const Array& v, bool allow_cast) const {
    auto& s = state();
    SJ_CHECK(v.defined(), InputError) << "assign to '" << s.name << "': undefined array";
    SJ_CHECK(v.shape() == s.shape, ShapeError)
        << "assign to '" << s.name << "': value " << v.type_str()
        << " does not match the variable's " << dtype_name(s.dtype) << shape_str(s.shape);
    SJ_CHECK(v.dtype() == s.dtype || allow_cast, TypeError)
        << "assign to '" << s.name << "': value " << v.type_str() << " is not "
        << dtype_name(s.dtype) << " (pass allow_cast = true to convert)";
    Array nv = v.dtype() == s.dtype ? v.clone() : v.astype(s.dtype);
    std::unique_lock<std::shared_mutex> step(s.rw);
    std::lock_guard<std::mutex> lock(s.mu);
    s.set_value(std::move(nv));
}

void Variable::reset() const {
    auto& s = state();
    Array v = s.init_expr.defined() ? s.init_expr.eval() : s.initial.clone();
    std::unique_lock<std::shared_mutex> step(s.rw);
    std::lock_guard<std::mutex> lock(s.mu);
    s.set_value(std::move(v));
}

bool Variable::trainable() const {
    return state().trainable;
}

// Note [Consistent snapshots]
// A training step may write a variable's buffer in place (CpuExecutable decides so when no
// other array holds the buffer), so a reader that copied the value while the step ran saw
// elements of two steps: 1,766 of 31,569 concurrent value() copies and 9 of 17 checkpoints
// saved during training were torn. Each variable has a reader-writer lock: a call holds it
// exclusively for the variables it updates and shared for those it only reads, from before it
// takes their values until its commit; value(), save_variables and other calls take it shared.
// Sets of locks are always taken in one order (by address), so two calls, or a call and a
// snapshot, over overlapping variables never deadlock. A snapshot of many variables holds all
// their locks at once, so no step commits between two of its copies. Calls that share no
// variable still run concurrently.

namespace detail {

VariableState::~VariableState() {
    VariableTable::get().release(*this);
}

// Note [Variable versions]
// Every write of a variable's value (construction, assign, reset, load_variables, a Function's
// commit) goes through set_value, which gives the value a stamp from one global counter. So two
// reads that see the same stamp saw the same contents: nobody wrote the variable between them,
// whichever function, thread or API wrote it otherwise (a per-variable count would do too; a
// global one also tells apart a variable that died and one made at its address). A function that
// keeps a copy of a weight in another layout between calls (Note [Packed weights] in
// src/backend/cpu/CpuExecutable.cpp) compares stamps instead of contents. Writes in place happen
// only inside a call that then commits, so they get a stamp too.
void VariableState::set_value(Array v) {
    value = std::move(v);
    version = g_next_version.fetch_add(1, std::memory_order_relaxed);
}

uint64_t VariableState::current_version() {
    std::lock_guard<std::mutex> lock(mu);
    return version;
}

VariableLocks::Order VariableLocks::order(const std::vector<VariableState*>& vars,
                                          const std::vector<bool>& exclusive) {
    Order all;
    for (size_t i = 0; i < vars.size(); ++i)
        all.emplace_back(vars[i], exclusive[i]);
    std::sort(all.begin(), all.end());
    Order one;
    for (const auto& [v, ex] : all) {
        if (!one.empty() && one.back().first == v)
            one.back().second = one.back().second || ex;
        else
            one.emplace_back(v, ex);
    }
    return one;
}

VariableLocks::VariableLocks(const Order& ordered) : held_(ordered) {
    for (const auto& [v, ex] : held_) {
        if (ex)
            v->rw.lock();
        else
            v->rw.lock_shared();
    }
}

VariableLocks::~VariableLocks() {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
        if (it->second)
            it->first->rw.unlock();
        else
            it->first->rw.unlock_shared();
    }
}

std::vector<Array> snapshot_values(const std::vector<const VariableState*>& vars) {
    std::vector<VariableState*> vs;
    for (const VariableState* v : vars)
        vs.push_back(const_cast<VariableState*>(v));
    const VariableLocks::Order order =
        VariableLocks::order(vs, std::vector<bool>(vs.size(), false));
    VariableLocks locks(order);
    std::vector<Array> out;
    out.reserve(vs.size());
    for (VariableState* v : vs) {
        std::lock_guard<std::mutex> lock(v->mu);
        out.push_back(v->value.clone());
    }
    return out;
}

void assign_values(const std::vector<VariableState*>& vars, std::vector<Array> values) {
    SJ_ASSERT(vars.size() == values.size())
        << "assign_values: " << vars.size() << " variables, " << values.size() << " values";
    const VariableLocks::Order order =
        VariableLocks::order(vars, std::vector<bool>(vars.size(), true));
    VariableLocks locks(order);
    for (size_t i = 0; i < vars.size(); ++i) {
        std::lock_guard<std::mutex> lock(vars[i]->mu);
        vars[i]->set_value(std::move(values[i]));
    }
}

} // namespace detail
const std::string& Variable::full_name() const {
    return state().name;
}

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
    while (g < glob.size() && glob[g] == '*')
        ++g;
    return g == glob.size();
}

std::vector<Variable> get_variables(const std::string& glob, std::optional<bool> trainable) {
    auto& t = VariableTable::get();
    std::vector<std::shared_ptr<detail::VariableState>> live;
    {
        std::lock_guard<std::mutex> lock(t.mu);
        for (auto& w : t.order)
            if (auto s = w.lock())
                live.push_back(std::move(s));
    }
    std::vector<Variable> out;
    for (auto& s : live) {
        if (!glob_match(glob, s->name))
            continue;
        if (trainable && s->trainable != *trainable)
            continue;
        NodePtr n = Node::make(Op::Variable, VariableAttrs{s}, {});
        out.emplace_back(Tensor(n));
    }
    return out;
}

namespace {
/// An op node's full name: its scope path, then its name or, unnamed, its op's name.
std::string op_full_name(const Node& n) {
    const std::string& leaf = n.name().empty() ? std::string(op_name(n.op())) : n.name();
    return n.scope().empty() ? leaf : n.scope() + "/" + leaf;
}
} // namespace

std::vector<Tensor> get_ops(const std::string& glob) {
    std::vector<Tensor> out;
    for (NodePtr& n : live_nodes())
        if (!has_trait(n->op(), kLeaf) && glob_match(glob, op_full_name(*n)))
            out.emplace_back(std::move(n));
    return out;
}

std::vector<Placeholder> get_placeholders(const std::string& glob) {
    std::vector<Placeholder> out;
    for (NodePtr& n : live_nodes())
        if (n->is(Op::Placeholder) && glob_match(glob, n->name()))
            out.emplace_back(Tensor(std::move(n)));
    return out;
}

std::vector<Variable> Scope::variables(std::optional<bool> trainable) const {
    std::vector<Variable> out;
    for (auto& v : get_variables("*", trainable)) {
        const std::string& name = v.full_name();
        size_t slash = name.rfind('/');
        if (contains(path_, slash == std::string::npos ? "" : name.substr(0, slash)))
            out.push_back(std::move(v));
    }
    return out;
}

std::vector<Tensor> Scope::ops() const {
    std::vector<Tensor> out;
    for (NodePtr& n : live_nodes())
        if (!has_trait(n->op(), kLeaf) && contains(path_, n->scope()))
            out.emplace_back(std::move(n));
    return out;
}

std::vector<Placeholder> Scope::placeholders() const {
    std::vector<Placeholder> out;
    for (NodePtr& n : live_nodes())
        if (n->is(Op::Placeholder) && contains(path_, n->scope()))
            out.emplace_back(Tensor(std::move(n)));
    return out;
}

std::vector<Variable> variables_of(const std::vector<Tensor>& outputs,
                                   std::optional<bool> trainable) {
    std::vector<const Node*> roots;
    for (const auto& t : outputs) {
        SJ_CHECK(t.defined(), Error) << "variables_of: undefined tensor";
        roots.push_back(t.node().get());
    }
    std::vector<Variable> out;
    std::set<const detail::VariableState*> seen; // two nodes may hold one variable's state
    for (const Node* n : topo_order(roots)) {
        if (!n->is(Op::Variable))
            continue;
        const auto& s = n->attr<VariableAttrs>().state;
        if (trainable && s->trainable != *trainable)
            continue;
        if (seen.insert(s.get()).second)
            out.emplace_back(Tensor(n->shared_from_this()));
    }
    return out;
}

void reset_variables(const std::string& glob) {
    for (auto& v : get_variables(glob))
        v.reset();
}

} // namespace sj
