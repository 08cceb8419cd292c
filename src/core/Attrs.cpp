// Equality, hashing and printing of attribute structs, derived from their SJ_FIELDS lists.
#include "AttrFields.h"
#include "Hash.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/VariableState.h>

#include <sstream>

namespace sj {

namespace {
using detail::Hasher;

void hash_field(Hasher& h, bool v) { h.add(v); }
void hash_field(Hasher& h, int64_t v) { h.add(static_cast<uint64_t>(v)); }
void hash_field(Hasher& h, uint64_t v) { h.add(v); }
void hash_field(Hasher& h, double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    h.add(b);
}
void hash_field(Hasher& h, DType v) { h.add(static_cast<uint64_t>(v) + 1000); }
void hash_field(Hasher& h, const std::vector<int64_t>& v) {
    h.add(v.size());
    for (int64_t x : v) h.add(static_cast<uint64_t>(x));
}
void hash_field(Hasher& h, const std::string& v) {
    h.add(v.size());
    h.add_bytes(v.data(), v.size());
}
void hash_field(Hasher& h, PoolKind v) { h.add(static_cast<uint64_t>(v) + 2000); }
void hash_field(Hasher& h, ScatterMode v) { h.add(static_cast<uint64_t>(v) + 3000); }
void hash_field(Hasher& h, dist::ReduceOp v) {
    h.add(static_cast<uint64_t>(v) + 4000);
}
void hash_field(Hasher&, const Array&) {} // covered by content_hash
void hash_field(Hasher& h, const std::shared_ptr<detail::VariableState>& p) {
    h.add(reinterpret_cast<uintptr_t>(p.get()));
}

void hash_field(Hasher& h, const std::shared_ptr<const detail::Region>& p) {
    h.add(reinterpret_cast<uintptr_t>(p.get()));
}

bool eq_field(const Array& a, const Array& b) { return a.equals(b); }
template <class T> bool eq_field(const T& a, const T& b) { return a == b; }

void put_field(std::ostream& os, bool v) { os << (v ? "true" : "false"); }
void put_field(std::ostream& os, int64_t v) { os << v; }
void put_field(std::ostream& os, uint64_t v) { os << v; }
void put_field(std::ostream& os, double v) { os << v; }
void put_field(std::ostream& os, DType v) { os << dtype_name(v); }
void put_field(std::ostream& os, const std::vector<int64_t>& v) { os << shape_str(v); }
void put_field(std::ostream& os, const std::string& v) {
    os << '"' << v << '"';
}
void put_field(std::ostream& os, PoolKind v) { os << (v == PoolKind::Max ? "max" : "avg"); }
void put_field(std::ostream& os, ScatterMode v) { os << scatter_mode_name(v); }
void put_field(std::ostream& os, dist::ReduceOp v) {
    os << dist::reduce_op_name(v);
}
void put_field(std::ostream& os, const Array& a) { os << a.str(8); }
void put_field(std::ostream& os, const std::shared_ptr<detail::VariableState>&) { os << "state"; }
void put_field(std::ostream& os, const std::shared_ptr<const detail::Region>& r) { os << r->name; }

template <class A> bool equal_impl(const A& a, const A& b) {
    return std::apply(
        [&](const auto&... xs) {
            return std::apply([&](const auto&... ys) { return (eq_field(xs, ys) && ...); },
                              b.tie());
        },
        a.tie());
}

} // namespace

const char* scatter_mode_name(ScatterMode m) {
    switch (m) {
    case ScatterMode::Set: return "set";
    case ScatterMode::Add: return "add";
    case ScatterMode::Mul: return "mul";
    case ScatterMode::Min: return "min";
    case ScatterMode::Max: return "max";
    }
    return "?";
}

std::vector<std::string> detail::split_field_names(const char* names) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* p = names; *p; ++p) {
        if (*p == ',') {
            out.push_back(cur);
            cur.clear();
        } else if (*p != ' ') {
            cur += *p;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

bool attrs_equal(const Attrs& a, const Attrs& b) {
    if (a.index() != b.index()) return false;
    return std::visit(
        [&](const auto& x) {
            using A = std::decay_t<decltype(x)>;
            return equal_impl(x, std::get<A>(b));
        },
        a);
}

uint64_t attrs_hash(const Attrs& a) {
    Hasher h;
    h.add(a.index());
    std::visit([&](const auto& x) { std::apply([&](const auto&... f) { (hash_field(h, f), ...); }, x.tie()); },
               a);
    return h.h;
}

std::string attrs_str(const Attrs& a) {
    std::ostringstream os;
    std::visit(
        [&](const auto& x) {
            using A = std::decay_t<decltype(x)>;
            auto names = detail::split_field_names(A::kFieldNames);
            size_t i = 0;
            std::apply(
                [&](const auto&... f) {
                    ((os << (i ? ", " : "") << names[i] << "=", put_field(os, f), ++i), ...);
                },
                x.tie());
        },
        a);
    return os.str();
}

} // namespace sj
