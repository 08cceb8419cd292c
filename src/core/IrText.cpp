// The text IR (Note [Text IR]): printing a graph and parsing the text back into one.
#include "IrText.h"

#include "AttrFields.h"

#include "../ops/ChannelBlocking.h"
#include "../ops/OpDef.h"
#include "../ops/OpSignature.h"

#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/VariableState.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

namespace sj::detail {

namespace {

// ---- values as text -------------------------------------------------------------------------

/// The bits of the NaN that std::numeric_limits<F>::quiet_NaN() gives: printed as plain "nan".
template <class F> auto nan_bits() {
    using U = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
    F q = std::numeric_limits<F>::quiet_NaN();
    U u;
    std::memcpy(&u, &q, sizeof u);
    return u;
}

/// The shortest text that reads back to the same bits: "0.1", "-0", "1e-45", "inf", "nan",
/// "nan(0xffc00000)" (any NaN but the default one carries its bits).
template <class F> void put_float(std::string& out, F v) {
    if (std::isnan(v)) {
        auto bits = nan_bits<F>();
        std::memcpy(&bits, &v, sizeof bits);
        if (bits == nan_bits<F>()) {
            out += "nan";
            return;
        }
        char buf[32];
        std::snprintf(buf, sizeof buf, "nan(0x%llx)", static_cast<unsigned long long>(bits));
        out += buf;
        return;
    }
    if (std::isinf(v)) {
        out += v < 0 ? "-inf" : "inf";
        return;
    }
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

template <class I> void put_int(std::string& out, I v) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void put_string(std::string& out, const std::string& s) {
    static const char* kHex = "0123456789abcdef";
    out += '"';
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c >= 0x7f) {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        } else {
            out += char(c);
        }
    }
    out += '"';
}

void put_dims(std::string& out, const std::vector<int64_t>& v) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        put_int(out, v[i]);
    }
    out += ']';
}

/// Element i of a as text.
void put_element(std::string& out, const Array& a, int64_t i) {
    dispatch(a.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T v = static_cast<const T*>(a.raw())[i];
        if constexpr (decltype(tag)::dtype == DType::Bool)
            out += v ? "true" : "false";
        else if constexpr (std::is_floating_point_v<T>)
            put_float(out, v);
        else
            put_int(out, v);
    });
}

/// A constant's values: one value (one element), splat(v) (all elements the same bits), or the
/// flat row-major list.
void put_constant(std::string& out, const Array& a) {
    const int64_t n = a.size();
    if (n == 1 && a.rank() == 0) return put_element(out, a, 0);
    const size_t w = static_cast<size_t>(dtype_size(a.dtype()));
    const auto* p = static_cast<const unsigned char*>(a.raw());
    bool splat = n > 1;
    for (int64_t i = 1; i < n && splat; ++i) splat = std::memcmp(p, p + i * w, w) == 0;
    if (splat) {
        out += "splat(";
        put_element(out, a, 0);
        out += ')';
        return;
    }
    out += '[';
    for (int64_t i = 0; i < n; ++i) {
        if (i) out += ", ";
        put_element(out, a, i);
    }
    out += ']';
}

// ---- attribute fields (SJ_FIELDS reflection) ---------------------------------------------------

void put_field(std::string& out, bool v) {
    out += v ? "true" : "false";
}
void put_field(std::string& out, int64_t v) {
    put_int(out, v);
}
void put_field(std::string& out, uint64_t v) {
    put_int(out, v);
}
void put_field(std::string& out, double v) {
    put_float(out, v);
}
void put_field(std::string& out, DType v) {
    out += dtype_name(v);
}
void put_field(std::string& out, const std::vector<int64_t>& v) {
    put_dims(out, v);
}
void put_field(std::string& out, const std::string& v) {
    put_string(out, v);
}
void put_field(std::string& out, PoolKind v) {
    out += v == PoolKind::Max ? "max" : "avg";
}
void put_field(std::string& out, ScatterMode v) {
    out += scatter_mode_name(v);
}
/// The numbers of the regions being printed (Note [Regions as text]): set by print_ir.
thread_local const std::unordered_map<const detail::Region*, size_t>* t_region_ids = nullptr;

/// A region operand: "@k", the region block printed before the node.
void put_field(std::string& out, const std::shared_ptr<const detail::Region>& r) {
    SJ_ASSERT(t_region_ids && r && t_region_ids->count(r.get()))
        << "print_ir: a region not collected";
    out += '@';
    put_int(out, t_region_ids->at(r.get()));
}
void put_field(std::string& out, dist::ReduceOp v) {
    out += dist::reduce_op_name(v);
}

/// Leaves carry their attributes in their own syntax; every other struct goes through SJ_FIELDS.
template <class A>
inline constexpr bool kLeafAttrs =
    std::is_same_v<A, PlaceholderAttrs> || std::is_same_v<A, VariableAttrs> ||
    std::is_same_v<A, ConstantAttrs>;

/// "{axes=[1], keepdims=true}": the fields that differ from the struct's default ("" if none).
template <class A> void put_attrs(std::string& out, const A& a) {
    static const A kDefault{};
    static const std::vector<std::string> kNames = split_field_names(A::kFieldNames);
    std::string body;
    size_t i = 0;
    std::apply(
        [&](const auto&... f) {
            std::apply(
                [&](const auto&... d) {
                    auto one = [&](const auto& x, const auto& y) {
                        if (!(x == y)) {
                            body += body.empty() ? "" : ", ";
                            body += kNames[i];
                            body += '=';
                            put_field(body, x);
                        }
                        ++i;
                    };
                    (one(f, d), ...);
                    (void)one; // NoAttrs has no fields
                },
                kDefault.tie());
        },
        a.tie());
    if (!body.empty()) out += " {" + body + "}";
}

// ---- the printer -------------------------------------------------------------------------------

void put_node(std::string& out, const Node& n, const std::unordered_map<const Node*, size_t>& num) {
    out += op_name(n.op());
    std::string identity; // a leaf's own name, printed in its payload
    if (n.is(Op::Placeholder)) {
        identity = n.name();
        out += ' ';
        put_string(out, identity);
    } else if (n.is(Op::Variable)) {
        const auto& s = *n.attr<VariableAttrs>().state;
        identity = s.name;
        out += ' ';
        put_string(out, identity);
        if (!s.trainable) out += " {trainable=false}";
    } else if (n.is(Op::Constant)) {
        out += ' ';
        put_constant(out, n.attr<ConstantAttrs>().value);
    } else { // every other op: operands, then attributes
        if (!has_trait(n.op(), kLeaf)) {
            out += '(';
            for (size_t i = 0; i < n.num_inputs(); ++i) {
                if (i) out += ", ";
                out += '%';
                put_int(out, num.at(n.input(i).get()));
            }
            out += ')';
        }
        std::visit(
            [&](const auto& a) {
                using A = std::decay_t<decltype(a)>;
                if constexpr (!kLeafAttrs<A>) put_attrs(out, a);
            },
            n.attrs());
        if (n.layout() != 0) { // Note [Target layouts] in Node.cpp
            out += " layout ";
            put_int(out, n.layout());
        }
    }
    out += " : ";
    out += type_str(n.type());
    if (n.name() != identity) {
        out += " named ";
        put_string(out, n.name());
    }
}

// Note [Regions as text]
// A loop or conditional's region (its bodies and counts, include/symjax/ir/ControlFlow.h) is
// printed once, before the first node that uses it, as a block numbered @k; its nodes name it
// in their attributes:
//
//   region @0 = scan "cumsum" {carries=1, sequences=1, outputs=1} {
//     %0 = placeholder "carry0" : f32[]
//     %1 = placeholder "slice0" : f32[]
//     %2 = add(%0, %1) : f32[]
//     return %2, %2
//   }
//   %0 = placeholder "xs" : f32[5]
//   %1 = constant 0 : f32[]
//   %2 = scan(%1, %0) {region=@0, output=1} : f32[5]
//
// A body has its own value names. Its parameters come first, in order, as placeholder lines
// (every placeholder of a body is a parameter: a body reads nothing else but constants), then
// its nodes, then `return` with its results. A while_loop has a second block, its condition,
// and a cond two, its branches. Regions used inside a body are printed before it. The parser
// checks the counts against the blocks (a scan's body takes carries + sequences + captured
// parameters and returns carries + outputs results, and so on) and each node's operands against
// its region before the op's type rule sees them. What the text leaves out: Region::base (a
// copy of a loop with residuals, Note [Scan residuals], parses as an ordinary loop; both run,
// with the same values).

/// A region's counts as text attributes (the fields equal to these defaults are left out).
struct RegionHeader {
    int64_t carries = 0, sequences = 0, outputs = 0, captured = 0, captured2 = 0, length = -1;
    bool reverse = false;
    int64_t max_iterations = -1;
    SJ_FIELDS(carries, sequences, outputs, captured, captured2, length, reverse, max_iterations);
};

const char* region_kind_name(detail::RegionKind k) {
    switch (k) {
    case detail::RegionKind::Scan:
        return "scan";
    case detail::RegionKind::While:
        return "while_loop";
    case detail::RegionKind::Cond:
        return "cond";
    }
    return "?";
}

/// The regions under `roots`, each after those its bodies use.
void collect_regions(const std::vector<const Node*>& roots,
                     std::unordered_map<const detail::Region*, size_t>& ids,
                     std::vector<const detail::Region*>& order) {
    for (const Node* n : topo_order(roots)) {
        if (!has_trait(n->op(), kRegion))
            continue;
        const detail::Region* r = n->attr<RegionAttrs>().region.get();
        if (!r || ids.count(r))
            continue;
        for (const detail::Body* b : {&r->body, &r->body2}) {
            std::vector<const Node*> rs;
            for (const auto& x : b->results)
                rs.push_back(x.get());
            collect_regions(rs, ids, order);
        }
        ids.emplace(r, ids.size());
        order.push_back(r);
    }
}

/// "%k = ..." for n, numbered next, unless it has its number already.
void put_line(std::string& out, const Node& n, std::unordered_map<const Node*, size_t>& num,
              const char* indent) {
    if (num.count(&n))
        return;
    size_t k = num.size();
    num[&n] = k;
    out += indent;
    out += '%';
    put_int(out, k);
    out += " = ";
    put_node(out, n, num);
    out += '\n';
}

/// Nodes as "%k = ..." lines (numbering those not numbered yet), then "return ...".
void put_lines(std::string& out, const std::vector<NodePtr>& roots,
               std::unordered_map<const Node*, size_t>& num, const char* indent) {
    std::vector<const Node*> rs;
    for (const auto& r : roots)
        rs.push_back(r.get());
    for (const Node* n : topo_order(rs))
        put_line(out, *n, num, indent);
    out += indent;
    out += "return";
    for (size_t i = 0; i < roots.size(); ++i) {
        out += i ? ", %" : " %";
        put_int(out, num.at(roots[i].get()));
    }
    out += '\n';
}

/// " {\n  <the body's lines>\n}": parameters first, in order.
void put_body(std::string& out, const detail::Body& b) {
    out += " {\n";
    std::unordered_map<const Node*, size_t> num;
    for (const auto& p : b.params)
        put_line(out, *p, num, "  ");
    put_lines(out, b.results, num, "  ");
    out += '}';
}

void put_region(std::string& out, size_t id, const detail::Region& r) {
    out += "region @";
    put_int(out, id);
    out += " = ";
    out += region_kind_name(r.kind);
    out += ' ';
    put_string(out, r.name);
    RegionHeader h;
    h.carries = r.carries, h.sequences = r.sequences, h.outputs = r.outputs;
    h.captured = r.captured, h.captured2 = r.captured2, h.length = r.length;
    h.reverse = r.reverse, h.max_iterations = r.max_iterations;
    put_attrs(out, h);
    put_body(out, r.body);
    if (r.kind != detail::RegionKind::Scan)
        put_body(out, r.body2);
    out += '\n';
}

// ---- the lexer ---------------------------------------------------------------------------------

struct Token {
    enum class Kind : uint8_t { End, Word, Value, String, Punct };
    Kind kind = Kind::End;
    std::string text; // Word: the word; Value: the name after '%'; String: the unescaped bytes
    char punct = 0;
    int line = 1, col = 1;
};

bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '+';
}

std::string show(const Token& t) {
    switch (t.kind) {
    case Token::Kind::End: return "the end of the text";
    case Token::Kind::Word: return "'" + t.text.substr(0, 40) + "'";
    case Token::Kind::Value: return "'%" + t.text.substr(0, 40) + "'";
    case Token::Kind::String: return "a string";
    case Token::Kind::Punct: return std::string("'") + t.punct + "'";
    }
    return "?";
}

/// What a variable line may say besides its name and type.
struct VariableFlags {
    bool trainable = true;
    SJ_FIELDS(trainable);
};

class Parser {
public:
    Parser(std::string_view text, const ParseOptions& o) : s_(text), opt_(o) { advance(); }

    std::vector<NodePtr> program() {
        while (is_word("region"))
            region_statement();
        std::vector<NodePtr> roots = lines();
        if (tok_.kind != Token::Kind::End)
            fail(tok_, "expected the end of the text after the return line, got " + show(tok_));
        return roots;
    }

private:
    /// "%k = ..." lines up to and including the return line; the returned values.
    std::vector<NodePtr> lines() {
        while (!(tok_.kind == Token::Kind::Word && tok_.text == "return")) {
            if (tok_.kind == Token::Kind::End)
                fail(tok_, "expected a line '%name = op ...' or 'return'");
            if (is_word("region"))
                fail(tok_, "a region block goes before every value line, outside bodies");
            statement();
        }
        advance();
        std::vector<NodePtr> roots;
        if (tok_.kind == Token::Kind::Value) {
            roots.push_back(use(tok_));
            advance();
            while (is_punct(',')) {
                advance();
                roots.push_back(value_ref());
            }
        }
        return roots;
    }

    // -- regions (Note [Regions as text]) --
    /// "{ lines }": a body of its own value names; its placeholders are its parameters.
    detail::Body body(const char* what) {
        expect('{', (std::string("to open the ") + what).c_str());
        detail::Body b;
        auto outer = std::move(values_);
        values_.clear();
        std::vector<NodePtr>* outer_params = params_;
        params_ = &b.params;
        struct Restore {
            Parser& p;
            decltype(values_)& outer;
            std::vector<NodePtr>* params;
            ~Restore() {
                p.values_ = std::move(outer);
                p.params_ = params;
            }
        } restore{*this, outer, outer_params};
        b.results = lines();
        expect('}', (std::string("to close the ") + what).c_str());
        return b;
    }

    void region_statement() {
        advance();
        expect('@', "before the region's number");
        Token num_tok = tok_;
        const int64_t id = int_value("the region's number");
        if (id != int64_t(regions_.size()))
            fail(num_tok, "regions are numbered in order: expected @" +
                              std::to_string(regions_.size()) + ", got @" + std::to_string(id));
        expect('=', "after the region's number");
        Token kind_tok = tok_;
        const std::string kind = word("scan, while_loop or cond");
        auto r = std::make_shared<detail::Region>();
        if (kind == "scan") {
            r->kind = detail::RegionKind::Scan;
        } else if (kind == "while_loop") {
            r->kind = detail::RegionKind::While;
        } else if (kind == "cond") {
            r->kind = detail::RegionKind::Cond;
        } else {
            fail(kind_tok, "expected scan, while_loop or cond, got '" + kind.substr(0, 40) + "'");
        }
        r->name = string_literal("the region's name");
        Token attrs_tok = tok_;
        const RegionHeader h = maybe_attrs<RegionHeader>("region");
        constexpr int64_t kMaxCount = 1 << 16;
        for (int64_t v : {h.carries, h.sequences, h.outputs, h.captured, h.captured2})
            if (v < 0 || v > kMaxCount)
                fail(attrs_tok, "a region count must be in [0, " + std::to_string(kMaxCount) +
                                    "], got " + std::to_string(v));
        if (h.length < -1 || h.max_iterations < -1)
            fail(attrs_tok, "length and max_iterations are -1 (none) or >= 0");
        const bool scan = r->kind == detail::RegionKind::Scan;
        if (!scan && (h.sequences || h.length != -1 || h.reverse))
            fail(attrs_tok, kind + " has no sequences, length or reverse");
        if (r->kind != detail::RegionKind::While && h.max_iterations != -1)
            fail(attrs_tok, kind + " has no max_iterations");
        if (scan && h.captured2)
            fail(attrs_tok, "scan has one body: no captured2");
        if (r->kind == detail::RegionKind::While && h.outputs)
            fail(attrs_tok, "while_loop has no outputs besides its carries");
        r->carries = int(h.carries), r->sequences = int(h.sequences), r->outputs = int(h.outputs);
        r->captured = int(h.captured), r->captured2 = int(h.captured2), r->length = h.length;
        r->reverse = h.reverse, r->max_iterations = h.max_iterations;
        const char* first = r->kind == detail::RegionKind::Cond ? "true branch" : "body";
        const char* second = r->kind == detail::RegionKind::While ? "condition" : "false branch";
        Token b1 = tok_;
        r->body = body(first);
        Token b2 = tok_;
        if (!scan)
            r->body2 = body(second);
        // the blocks against the counts (the type rules index by them)
        auto check = [&](const Token& t, const detail::Body& b, const char* what, int64_t params,
                         int64_t results) {
            if (int64_t(b.params.size()) != params || int64_t(b.results.size()) != results)
                fail(t, std::string("the ") + what + " of " + kind + " @" + std::to_string(id) +
                            " has " + std::to_string(b.params.size()) + " parameters and " +
                            std::to_string(b.results.size()) + " results; its counts say " +
                            std::to_string(params) + " and " + std::to_string(results));
        };
        switch (r->kind) {
        case detail::RegionKind::Scan:
            check(b1, r->body, first, h.carries + h.sequences + h.captured, h.carries + h.outputs);
            break;
        case detail::RegionKind::While:
            check(b1, r->body, first, h.carries + h.captured, h.carries);
            check(b2, r->body2, second, h.carries + h.captured2, 1);
            break;
        case detail::RegionKind::Cond:
            check(b1, r->body, first, h.carries + h.captured, h.outputs);
            check(b2, r->body2, second, h.carries + h.captured2, h.outputs);
            break;
        }
        regions_.push_back(std::move(r));
    }

    // -- lexing --
    char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
    void bump() {
        if (s_[pos_] == '\n') {
            ++line_;
            col_ = 1;
        } else {
            ++col_;
        }
        ++pos_;
    }
    void skip_space() {
        for (;;) {
            if (pos_ >= s_.size()) return;
            char c = s_[pos_];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                bump();
            } else if (c == '#' || (c == '/' && peek(1) == '/')) {
                while (pos_ < s_.size() && s_[pos_] != '\n') bump();
            } else {
                return;
            }
        }
    }
    void advance() {
        skip_space();
        tok_ = Token{};
        tok_.line = line_;
        tok_.col = col_;
        if (pos_ >= s_.size()) return;
        char c = s_[pos_];
        if (c == '%') {
            bump();
            tok_.kind = Token::Kind::Value;
            while (pos_ < s_.size() && word_char(s_[pos_])) {
                tok_.text += s_[pos_];
                bump();
            }
            if (tok_.text.empty()) fail(tok_, "expected a value name after '%'");
        } else if (c == '"') {
            tok_.kind = Token::Kind::String;
            string_body();
        } else if (word_char(c)) {
            tok_.kind = Token::Kind::Word;
            while (pos_ < s_.size() && word_char(s_[pos_])) {
                tok_.text += s_[pos_];
                bump();
            }
        } else if (std::strchr("=(){}[],:@", c)) {
            tok_.kind = Token::Kind::Punct;
            tok_.punct = c;
            bump();
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "0x%02x", unsigned(static_cast<unsigned char>(c)));
            fail(tok_, std::string("unexpected character ") +
                           (c > 0x20 && c < 0x7f ? std::string("'") + c + "'" : std::string(buf)));
        }
    }
    void string_body() {
        bump(); // the opening quote
        for (;;) {
            if (pos_ >= s_.size() || s_[pos_] == '\n') fail(tok_, "unterminated string");
            char c = s_[pos_];
            bump();
            if (c == '"') return;
            if (c != '\\') {
                tok_.text += c;
                continue;
            }
            char e = peek();
            if (e == '"' || e == '\\') {
                tok_.text += e;
                bump();
            } else if (e == 'n') {
                tok_.text += '\n';
                bump();
            } else if (e == 't') {
                tok_.text += '\t';
                bump();
            } else if (e == 'x' && std::isxdigit(static_cast<unsigned char>(peek(1))) &&
                       std::isxdigit(static_cast<unsigned char>(peek(2)))) {
                char hex[3] = {peek(1), peek(2), 0};
                tok_.text += static_cast<char>(std::strtol(hex, nullptr, 16));
                bump();
                bump();
                bump();
            } else {
                fail(tok_, "unknown escape in string (expected \\\", \\\\, \\n, \\t or \\xHH)");
            }
        }
    }

    // -- errors --
    [[noreturn]] void fail(const Token& at, const std::string& msg) const {
        std::string where = opt_.source.empty() ? "line " : opt_.source + ":";
        throw ParseError(where + std::to_string(at.line) + ":" + std::to_string(at.col) + ": " +
                         msg);
    }

    // -- small grammar pieces --
    bool is_punct(char c) const { return tok_.kind == Token::Kind::Punct && tok_.punct == c; }
    bool is_word(const char* w) const { return tok_.kind == Token::Kind::Word && tok_.text == w; }
    void expect(char c, const char* what) {
        if (!is_punct(c))
            fail(tok_, std::string("expected '") + c + "' " + what + ", got " + show(tok_));
        advance();
    }
    std::string word(const char* what) {
        if (tok_.kind != Token::Kind::Word)
            fail(tok_, std::string("expected ") + what + ", got " + show(tok_));
        std::string w = tok_.text;
        advance();
        return w;
    }
    std::string string_literal(const char* what) {
        if (tok_.kind != Token::Kind::String)
            fail(tok_, std::string("expected ") + what + " (a quoted string), got " + show(tok_));
        std::string v = tok_.text;
        advance();
        return v;
    }
    NodePtr use(const Token& t) {
        auto it = values_.find(t.text);
        if (it == values_.end()) fail(t, "use of undefined value %" + t.text.substr(0, 40));
        return it->second;
    }
    NodePtr value_ref() {
        if (tok_.kind != Token::Kind::Value)
            fail(tok_, "expected a value (%name), got " + show(tok_));
        NodePtr n = use(tok_);
        advance();
        return n;
    }

    template <class I> I integer(const Token& at, const std::string& w, const char* what) {
        I v{};
        auto r = std::from_chars(w.data(), w.data() + w.size(), v);
        if (r.ec == std::errc::result_out_of_range)
            fail(at, std::string(what) + " '" + w.substr(0, 40) + "' is out of range");
        if (r.ec != std::errc() || r.ptr != w.data() + w.size())
            fail(at,
                 std::string("expected ") + what + " (an integer), got '" + w.substr(0, 40) + "'");
        return v;
    }
    int64_t int_value(const char* what) {
        Token at = tok_;
        return integer<int64_t>(at, word(what), what);
    }

    /// A word, joined with a NaN's "(0x<bits>)" when it is "nan" followed by one.
    std::string number_word(const char* what) {
        std::string w = word(what);
        if (w == "nan" && is_punct('(')) {
            advance();
            w += "(" + word("the bits of a NaN (0x...)") + ")";
            expect(')', "after the bits of a NaN");
        }
        return w;
    }

    /// A float: a decimal or exponent form, inf, -inf, nan or nan(0x<bits>).
    template <class F> F to_float(const Token& at, const std::string& w, const char* what) {
        if (w == "inf" || w == "+inf") return std::numeric_limits<F>::infinity();
        if (w == "-inf") return -std::numeric_limits<F>::infinity();
        if (w == "nan") return std::numeric_limits<F>::quiet_NaN();
        if (w.rfind("nan(", 0) == 0) {
            std::string b = w.substr(4, w.size() - 5);
            using U = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
            U bits{};
            auto r = b.size() > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X')
                         ? std::from_chars(b.data() + 2, b.data() + b.size(), bits, 16)
                         : std::from_chars_result{b.data(), std::errc::invalid_argument};
            if (r.ec != std::errc() || r.ptr != b.data() + b.size())
                fail(at, "expected the bits of a " + std::to_string(sizeof(F) * 8) +
                             "-bit NaN as 0x<hex>, got '" + b.substr(0, 40) + "'");
            F v;
            std::memcpy(&v, &bits, sizeof v);
            if (!std::isnan(v)) fail(at, b.substr(0, 40) + " are not the bits of a NaN");
            return v;
        }
        F v{};
        const char* b = w.data();
        const char* e = w.data() + w.size();
        if (b != e && *b == '+') ++b;
        auto r = std::from_chars(b, e, v, std::chars_format::general);
        if (r.ec == std::errc::result_out_of_range)
            fail(at, std::string(what) + " '" + w.substr(0, 40) + "' is out of range");
        if (r.ec != std::errc() || r.ptr != e || std::isnan(v) || std::isinf(v))
            fail(at, std::string("expected ") + what + " (a number, inf or nan), got '" +
                         w.substr(0, 40) + "'");
        return v;
    }

    std::vector<int64_t> int_list(const char* what) {
        expect('[', (std::string("to open ") + what).c_str());
        std::vector<int64_t> v;
        if (!is_punct(']')) {
            v.push_back(int_value(what));
            while (is_punct(',')) {
                advance();
                v.push_back(int_value(what));
            }
        }
        expect(']', (std::string("to close ") + what).c_str());
        return v;
    }

    DType dtype() {
        Token at = tok_;
        std::string w = word("a dtype");
        for (int i = 0; i < kNumDTypes; ++i)
            if (w == dtype_name(DType(i))) return DType(i);
        fail(at, "unknown dtype '" + w.substr(0, 40) +
                     "' (expected bool, u8, i32, i64, u32, f32 or f64)");
    }

    /// dtype[dims]: f32[-1, 10]
    TensorType type() {
        TensorType t;
        t.dtype = dtype();
        Token at = tok_;
        t.shape = int_list("a dim");
        for (int64_t d : t.shape)
            if (d < -1) fail(at, "a dim must be >= 0 or -1 (any size), got " + std::to_string(d));
        return t;
    }

    // -- attribute fields, by the field's type --
    bool to_bool(const Token& at, const std::string& w) {
        if (w != "true" && w != "false")
            fail(at, "expected true or false, got '" + w.substr(0, 40) + "'");
        return w == "true";
    }
    void field(bool& v) {
        Token at = tok_;
        v = to_bool(at, word("true or false"));
    }
    void field(int64_t& v) { v = int_value("an integer"); }
    void field(uint64_t& v) {
        Token at = tok_;
        v = integer<uint64_t>(at, word("an unsigned integer"), "an unsigned integer");
    }
    void field(double& v) {
        Token at = tok_;
        v = to_float<double>(at, number_word("a number"), "a number");
    }
    void field(DType& v) { v = dtype(); }
    void field(std::vector<int64_t>& v) { v = int_list("an integer"); }
    void field(std::string& v) { v = string_literal("a string"); }
    void field(PoolKind& v) {
        Token at = tok_;
        std::string w = word("max or avg");
        if (w != "max" && w != "avg")
            fail(at, "expected max or avg, got '" + w.substr(0, 40) + "'");
        v = w == "max" ? PoolKind::Max : PoolKind::Avg;
    }
    void field(std::shared_ptr<const detail::Region>& r) {
        expect('@', "before a region's number");
        Token at = tok_;
        const int64_t id = int_value("a region's number");
        if (id < 0 || id >= int64_t(regions_.size()))
            fail(at,
                 "no region @" + std::to_string(id) + " (regions are defined before the lines)");
        r = regions_[size_t(id)];
    }
    void field(ScatterMode& v) {
        Token at = tok_;
        std::string w = word("set, add, mul, min or max");
        for (ScatterMode m : {ScatterMode::Set, ScatterMode::Add, ScatterMode::Mul,
                              ScatterMode::Min, ScatterMode::Max})
            if (w == scatter_mode_name(m)) {
                v = m;
                return;
            }
        fail(at, "expected set, add, mul, min or max, got '" + w.substr(0, 40) + "'");
    }
    void field(dist::ReduceOp& v) {
        Token at = tok_;
        std::string w = word("sum, mean, max or min");
        for (dist::ReduceOp m :
             {dist::ReduceOp::Sum, dist::ReduceOp::Mean, dist::ReduceOp::Max, dist::ReduceOp::Min})
            if (w == dist::reduce_op_name(m)) {
                v = m;
                return;
            }
        fail(at, "expected sum, mean, max or min, got '" + w.substr(0, 40) + "'");
    }

    /// {name=value, ...} into a default A: fields in any order, each at most once; left-out
    /// fields keep their defaults.
    template <class A> A attrs_body(const char* op) {
        static const std::vector<std::string> kNames = split_field_names(A::kFieldNames);
        A a{};
        std::vector<bool> seen(kNames.size(), false);
        expect('{', "to open the attributes");
        for (bool first = true; !is_punct('}'); first = false) {
            if (!first) expect(',', "between attributes");
            Token at = tok_;
            std::string name = word("an attribute name");
            size_t k = std::find(kNames.begin(), kNames.end(), name) - kNames.begin();
            if (k == kNames.size()) {
                std::string known;
                for (const auto& n : kNames) known += (known.empty() ? "" : ", ") + n;
                fail(at, std::string(op) + " has no attribute '" + name.substr(0, 40) + "' (" +
                             (known.empty() ? "it takes none" : "expected one of " + known) + ")");
            }
            if (seen[k]) fail(at, "attribute '" + name + "' given twice");
            seen[k] = true;
            expect('=', "after the attribute name");
            // tie() gives const references to a's fields; `a` itself is a local we may write
            size_t i = 0;
            std::apply(
                [&](const auto&... f) {
                    ((i++ == k ? field(const_cast<std::decay_t<decltype(f)>&>(f)) : void()), ...);
                },
                a.tie());
        }
        advance();
        return a;
    }

    template <class A> A maybe_attrs(const char* op) {
        if (is_punct('{')) return attrs_body<A>(op);
        return A{};
    }

    Attrs op_attrs(Op op) {
        Attrs a = default_attrs(op);
        std::visit(
            [&](auto& x) {
                using A = std::decay_t<decltype(x)>;
                if constexpr (!kLeafAttrs<A>) x = maybe_attrs<A>(op_name(op));
            },
            a);
        return a;
    }

    // -- constants --
    /// The words of a constant's values (read before the type that gives their dtype).
    struct Literal {
        bool splat = false, list = false;
        std::vector<Token> words;
    };
    Literal literal() {
        Literal l;
        auto element = [&] {
            Token t = tok_;
            t.text = number_word("a value");
            l.words.push_back(std::move(t));
        };
        if (is_word("splat")) {
            advance();
            l.splat = true;
            expect('(', "after splat");
            element();
            expect(')', "after the splat value");
        } else if (is_punct('[')) {
            l.list = true;
            advance();
            if (!is_punct(']')) {
                element();
                while (is_punct(',')) {
                    advance();
                    element();
                }
            }
            expect(']', "to close the values");
        } else {
            element();
        }
        return l;
    }

    /// Reads one value word as dtype t into p[i].
    void element_into(const Token& w, DType t, void* p, int64_t i) {
        const std::string what = std::string("a ") + dtype_name(t) + " value";
        dispatch(t, [&](auto tag) {
            using T = typename decltype(tag)::type;
            T v{};
            if constexpr (decltype(tag)::dtype == DType::Bool)
                v = to_bool(w, w.text) ? 1 : 0;
            else if constexpr (std::is_floating_point_v<T>)
                v = to_float<T>(w, w.text, what.c_str());
            else
                v = integer<T>(w, w.text, what.c_str());
            static_cast<T*>(p)[i] = v;
        });
    }

    Array constant_value(const Literal& l, const TensorType& t, const Token& at) {
        if (!is_static(t.shape)) fail(at, "a constant's type needs known dims, got " + type_str(t));
        int64_t n = numel(t.shape);
        if (l.splat) {
            if (n > opt_.max_elements)
                fail(at, "constant of " + std::to_string(n) + " elements is larger than the " +
                             std::to_string(opt_.max_elements) + " this parse allows");
        } else if (l.list) {
            if (int64_t(l.words.size()) != n)
                fail(at, "constant of type " + type_str(t) + " needs " + std::to_string(n) +
                             " values, got " + std::to_string(l.words.size()));
        } else if (n != 1) {
            fail(at, "a single value for a constant of type " + type_str(t) + " (" +
                         std::to_string(n) + " elements): use [v, ...] or splat(v)");
        }
        Array a(t.dtype, t.shape);
        if (l.splat) {
            element_into(l.words[0], t.dtype, a.raw(), 0);
            const size_t w = static_cast<size_t>(dtype_size(t.dtype));
            auto* p = static_cast<unsigned char*>(a.raw());
            for (int64_t i = 1; i < n; ++i) std::memcpy(p + i * w, p, w);
        } else {
            for (size_t i = 0; i < l.words.size(); ++i)
                element_into(l.words[i], t.dtype, a.raw(), int64_t(i));
        }
        return a;
    }

    // -- variables --
    NodePtr variable(const std::string& name, const TensorType& t, bool trainable,
                     const Token& at) {
        if (name.empty()) fail(at, "a variable needs a name");
        if (!is_static(t.shape)) fail(at, "a variable's type needs known dims, got " + type_str(t));
        if (!live_.has_value()) {
            live_.emplace();
            for (const Variable& v : get_variables()) live_->emplace(v.full_name(), v);
        }
        auto it = live_->find(name);
        if (it != live_->end()) {
            const auto& s = it->second.state();
            TensorType have{s.dtype, s.shape};
            if (!(have == t) || s.trainable != trainable)
                fail(at, "variable \"" + name + "\" exists as " + type_str(have) +
                             (s.trainable ? "" : " (not trainable)") + ", the text says " +
                             type_str(t) + (trainable ? "" : " (not trainable)"));
            return it->second.node();
        }
        if (numel(t.shape) > opt_.max_elements)
            fail(at, "variable of " + std::to_string(numel(t.shape)) +
                         " elements is larger than the " + std::to_string(opt_.max_elements) +
                         " this parse allows");
        Variable v(Array(t.dtype, t.shape), name, trainable);
        if (v.full_name() != name)
            fail(at, "variable \"" + name + "\" would be named \"" + v.full_name() +
                         "\" (a Scope is active)");
        live_->emplace(name, v);
        return v.node();
    }

    // -- one line --
    void statement() {
        if (tok_.kind != Token::Kind::Value)
            fail(tok_, "expected a line '%name = op ...' or 'return', got " + show(tok_));
        Token def = tok_;
        if (values_.count(def.text))
            fail(def, "value %" + def.text.substr(0, 40) + " is defined twice");
        advance();
        expect('=', "after the value name");
        Token op_tok = tok_;
        std::string name = word("an op name");
        auto op_it = ops_by_name().find(name);
        if (op_it == ops_by_name().end()) fail(op_tok, "unknown op '" + name.substr(0, 40) + "'");
        const Op op = op_it->second;
        const OpSignature sig = op_signature(op);

        std::string leaf_name;
        bool trainable = true;
        Literal lit;
        std::vector<NodePtr> inputs;
        Attrs attrs;
        if (op == Op::Placeholder) {
            leaf_name = string_literal("the placeholder's name");
        } else if (op == Op::Variable) {
            leaf_name = string_literal("the variable's name");
            trainable = maybe_attrs<VariableFlags>("variable").trainable;
        } else if (op == Op::Constant) {
            lit = literal();
        } else {
            if (is_punct('(')) {
                advance();
                if (!is_punct(')')) {
                    inputs.push_back(value_ref());
                    while (is_punct(',')) {
                        advance();
                        inputs.push_back(value_ref());
                    }
                }
                expect(')', "to close the operands");
            }
            {
                int n = static_cast<int>(inputs.size());
                if (n < sig.min_inputs || n > sig.max_inputs) {
                    std::string want = sig.min_inputs == sig.max_inputs
                                           ? std::to_string(sig.min_inputs)
                                       : sig.max_inputs == kUnboundedInputs
                                           ? "at least " + std::to_string(sig.min_inputs)
                                           : std::to_string(sig.min_inputs) + " or " +
                                                 std::to_string(sig.max_inputs);
                    fail(op_tok, name + " takes " + want + " operands, got " + std::to_string(n));
                }
            }
            attrs = op_attrs(op);
            if (has_trait(op, kRegion)) { // its operands against its region's counts
                const auto& ra = std::get<RegionAttrs>(attrs);
                if (!ra.region)
                    fail(op_tok, name + " needs its region (region=@k)");
                const detail::Region& r = *ra.region;
                const bool kind_ok = (op == Op::Scan && r.kind == detail::RegionKind::Scan) ||
                                     (op == Op::WhileLoop && r.kind == detail::RegionKind::While) ||
                                     (op == Op::Cond && r.kind == detail::RegionKind::Cond);
                if (!kind_ok)
                    fail(op_tok, name + " of a " + region_kind_name(r.kind) + " region");
                if (ra.output < 0 || ra.output >= r.num_results())
                    fail(op_tok, name + ": result " + std::to_string(ra.output) +
                                     " of a region with " + std::to_string(r.num_results()));
                const size_t want = size_t(r.captured2_begin() +
                                           (r.kind == detail::RegionKind::Scan ? 0 : r.captured2));
                if (inputs.size() != want)
                    fail(op_tok, name + " of region '" + r.name + "' takes " +
                                     std::to_string(want) + " operands, got " +
                                     std::to_string(inputs.size()));
            }
        }
        int64_t layout = 0; // Note [Target layouts]
        if (is_word("layout")) {
            Token at = tok_;
            advance();
            layout = int_value("a layout mask");
            // bits 0..3: the blocked operands; bits 8..15: the block width when it is not 16
            const int64_t width = layout >> detail::kBlockShift;
            const bool valid =
                layout > 0 && (layout & 0xf0) == 0 &&
                (width == 0 || (width != detail::kChannelBlock && detail::valid_block(width)));
            if (!has_trait(op, kWindow) || !valid)
                fail(at, "a layout mask is 1..15 (the blocked operands), plus 2048 for 8-channel "
                         "blocks, on a window op (conv, pool, their backward ops, "
                         "block_channels); " +
                             name + " layout " + std::to_string(layout));
        }
        if (params_ && op == Op::Variable)
            fail(op_tok, "a body reads only its parameters (placeholders) and constants, not a "
                         "variable");
        expect(':', "before the type");
        Token type_tok = tok_;
        TensorType t = type();
        std::optional<std::string> node_name;
        if (is_word("named")) {
            advance();
            node_name = string_literal("the node's name");
        }

        NodePtr n;
        try {
            n = layout ? Node::make_laid_out(op, std::move(attrs), std::move(inputs), layout)
                       : build(op, t, leaf_name, trainable, lit, std::move(inputs),
                               std::move(attrs), op_tok);
        } catch (const ParseError&) {
            throw;
        } catch (const Error& e) {
            fail(op_tok, e.what());
        }
        if (!(n->type() == t))
            fail(type_tok,
                 "the type says " + type_str(t) + ", " + name + " gives " + type_str(n->type()));
        if (node_name) n = with_name(n, *node_name);
        if (params_ && op == Op::Placeholder)
            params_->push_back(n);
        values_.emplace(def.text, std::move(n));
    }

    NodePtr build(Op op, const TensorType& t, const std::string& leaf_name, bool trainable,
                  const Literal& lit, std::vector<NodePtr> inputs, Attrs attrs, const Token& at) {
        if (op == Op::Placeholder) {
            if (leaf_name.empty()) fail(at, "a placeholder needs a name");
            Placeholder p(t.shape, t.dtype, leaf_name);
            p.node()->set_name(leaf_name); // exactly as written, whatever Scope is active
            return p.node();
        }
        if (op == Op::Variable) return variable(leaf_name, t, trainable, at);
        if (op == Op::Constant) return constant(constant_value(lit, t, at)).node();
        return Node::make(op, std::move(attrs), std::move(inputs));
    }

    static const std::unordered_map<std::string, Op>& ops_by_name() {
        static const auto* m = [] {
            auto* r = new std::unordered_map<std::string, Op>;
            for (int i = 0; i < kNumOps; ++i) r->emplace(op_name(Op(i)), Op(i));
            return r;
        }();
        return *m;
    }

    std::string_view s_;
    const ParseOptions& opt_;
    size_t pos_ = 0;
    int line_ = 1, col_ = 1;
    Token tok_;
    std::unordered_map<std::string, NodePtr> values_;
    std::vector<std::shared_ptr<const detail::Region>> regions_; // @0, @1, ...
    std::vector<NodePtr>* params_ = nullptr; // inside a body: its parameters so far
    std::optional<std::unordered_map<std::string, Variable>> live_;
};

} // namespace

std::string print_ir(const std::vector<NodePtr>& roots,
                     std::unordered_map<const Node*, size_t>* numbering) {
    std::vector<const Node*> rs;
    for (const auto& r : roots) {
        SJ_CHECK(r, Error) << "print_ir: undefined root";
        rs.push_back(r.get());
    }
    std::unordered_map<const Node*, size_t> local;
    auto& num = numbering ? *numbering : local;
    std::string out;
    // the regions first (Note [Regions as text])
    std::unordered_map<const Region*, size_t> ids;
    std::vector<const Region*> regions;
    collect_regions(rs, ids, regions);
    struct Restore {
        const std::unordered_map<const Region*, size_t>* prev = t_region_ids;
        ~Restore() { t_region_ids = prev; }
    } restore;
    t_region_ids = &ids;
    for (size_t k = 0; k < regions.size(); ++k)
        put_region(out, k, *regions[k]);
    put_lines(out, roots, num, "");
    return out;
}

std::vector<NodePtr> parse_ir(std::string_view text, const ParseOptions& options) {
    return Parser(text, options).program();
}

} // namespace sj::detail
