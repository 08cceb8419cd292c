// Module, Sequential, the nn naming helpers and the state updates attached to nodes.
#include "NnUtil.h"

#include <symjax/Graph.h>
#include <symjax/Random.h>
#include <symjax/Scope.h>
#include <symjax/ir/Node.h>
#include <symjax/nn/Module.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace sj::nn {

// ---- naming helpers -----------------------------------------------------------------------------
namespace detail {

std::string unique_scope(const std::string &kind) {
    const std::string base = Scope::qualify(kind);
    std::string path = base;
    for (int k = 1; !get_variables(path + "/*").empty(); ++k)
        path = base + "_" + std::to_string(k);
    return path;
}

namespace {
std::string relative_name(const std::string &full_name) {
    const std::string &cur = Scope::current();
    if (!cur.empty() && full_name.size() > cur.size() + 1 &&
        full_name.compare(0, cur.size(), cur) == 0 && full_name[cur.size()] == '/')
        return full_name.substr(cur.size() + 1);
    return full_name;
}
} // namespace

Variable make_variable(const std::string &full_name, const Array &init, bool trainable) {
    return Variable(init, relative_name(full_name), trainable);
}
Variable make_variable(const std::string &full_name, const Tensor &init, bool trainable) {
    return Variable(init, relative_name(full_name), trainable);
}

uint64_t mix_seed(uint64_t seed, uint64_t index) {
    uint64_t x = seed ^ (index * 0xD1B54A32D192ED03ull);
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t next_call_seed(const std::optional<uint64_t> &seed, std::atomic<uint64_t> &calls) {
    const uint64_t k = calls.fetch_add(1);
    return seed ? mix_seed(*seed, k) : random::next_seed();
}

} // namespace detail

// ---- Module -------------------------------------------------------------------------------------
void Module::open_scope(const std::string &kind) {
    scope_ = detail::unique_scope(kind);
}

Variable Module::add_variable(const std::string &name, const Tensor &init, bool trainable) {
    SJ_CHECK(!scope_.empty(), Error)
        << "Module::add_variable('" << name << "'): open_scope must be called first";
    Variable v = detail::make_variable(scope_ + "/" + name, init, trainable);
    vars_.push_back(v);
    return v;
}

Variable Module::add_variable(const std::string &name, const Array &init, bool trainable) {
    SJ_CHECK(!scope_.empty(), Error)
        << "Module::add_variable('" << name << "'): open_scope must be called first";
    Variable v = detail::make_variable(scope_ + "/" + name, init, trainable);
    vars_.push_back(v);
    return v;
}

void Module::add_child(std::shared_ptr<const Module> child) {
    SJ_CHECK(child != nullptr, Error) << "Module::add_child: null module";
    children_.push_back(std::move(child));
}

std::vector<Variable> Module::variables() const {
    std::vector<Variable> out;
    std::unordered_set<const Node *> seen;
    // iterative walk: this module, then its children depth-first, in order
    std::vector<const Module *> stack{this};
    while (!stack.empty()) {
        const Module *m = stack.back();
        stack.pop_back();
        for (const auto &v : m->vars_)
            if (seen.insert(v.node().get()).second)
                out.push_back(v);
        for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it)
            stack.push_back(it->get());
    }
    return out;
}

std::vector<Variable> Module::trainable_variables() const {
    std::vector<Variable> out;
    for (auto &v : variables())
        if (v.trainable())
            out.push_back(v);
    return out;
}

// ---- Sequential ---------------------------------------------------------------------------------
Sequential::Sequential(std::initializer_list<AnyModule> layers) {
    for (const auto &l : layers)
        add(l);
}

Sequential::Sequential(const std::vector<AnyModule> &layers) {
    for (const auto &l : layers)
        add(l);
}

Sequential &Sequential::add(AnyModule layer) {
    add_child(layer.ptr());
    return *this;
}

const Module &Sequential::operator[](size_t i) const {
    SJ_CHECK(i < size(), InputError) << "Sequential: layer " << i << " of " << size();
    return *children()[i];
}

Tensor Sequential::forward(const Tensor &x, Mode mode) const {
    Tensor h = x;
    for (const auto &m : children())
        h = (*m)(h, mode);
    return h;
}

// ---- state updates ----------------------------------------------------------------------------
namespace {

/// The updates attached to one node (Note [State updates]): kept by the node itself (Note [Node
/// attachments] in src/core/Node.cpp), so they live exactly as long as it does.
struct Entry {
    std::vector<std::pair<Variable, Tensor>> items;
};
const char kStateUpdatesTag = 0; // the attachment slot's tag: its address
std::mutex g_state_mu;           // an entry's items, and making an entry

} // namespace

void attach_state_updates(const Tensor &t, const Updates &updates) {
    SJ_CHECK(t.defined(), Error) << "attach_state_updates: undefined tensor";
    if (updates.empty())
        return;
    const Node &key = *t.node();
    std::lock_guard<std::mutex> lock(g_state_mu);
    auto e = std::static_pointer_cast<Entry>(key.attachment(&kStateUpdatesTag));
    if (!e) {
        e = std::make_shared<Entry>();
        key.attach(&kStateUpdatesTag, e);
    }
    for (const auto &[var, value] : updates.items()) {
        bool dup = false;
        for (const auto &[v, x] : e->items)
            dup = dup || (v.same(var) && x.same(value));
        if (!dup)
            e->items.emplace_back(var, value);
    }
}

Updates state_updates(const std::vector<Tensor> &ts) {
    std::vector<const Node *> roots;
    for (const auto &t : ts) {
        SJ_CHECK(t.defined(), Error) << "state_updates: undefined tensor";
        roots.push_back(t.node().get());
    }
    std::vector<const Node *> order = topo_order(roots);
    std::vector<std::pair<Variable, Tensor>> found;
    for (const Node *n : order) {
        auto e = std::static_pointer_cast<Entry>(n->attachment(&kStateUpdatesTag));
        if (!e)
            continue;
        std::lock_guard<std::mutex> lock(g_state_mu);
        found.insert(found.end(), e->items.begin(), e->items.end());
    }
    // compose repeated updates of one variable in graph order (see Note [State updates])
    std::vector<std::pair<Variable, Tensor>> merged;
    for (const auto &item : found) {
        const Variable &var = item.first;
        const Tensor &value = item.second;
        auto it = std::find_if(merged.begin(), merged.end(),
                               [&](const auto &p) { return p.first.same(var); });
        if (it == merged.end())
            merged.emplace_back(var, value);
        else if (!it->second.same(value))
            it->second = clone(value, {{var, it->second}});
    }
    Updates out;
    for (const auto &[var, value] : merged)
        out.add(var, value);
    return out;
}

Updates state_updates(const Tensor &t) {
    return state_updates(std::vector<Tensor>{t});
}

} // namespace sj::nn
