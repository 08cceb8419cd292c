// Node: interning (hash-consing), type inference at construction, iterative teardown.
#include "../ops/OpDef.h"
#include "Hash.h"
#include "NodeMap.h"

#include <symjax/ir/Node.h>
#include <symjax/Scope.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace sj {

std::string type_str(const TensorType& t) {
    return std::string(dtype_name(t.dtype)) + shape_str(t.shape);
}

namespace {
std::atomic<uint64_t> g_next_id{1};
std::atomic<size_t> g_live{0};
} // namespace

/// The interned nodes by structural hash (several nodes may share one): open addressing with
/// linear probing over (hash, node) slots, so that a lookup reads one run of one array (Note
/// [Flat node tables] in NodeMap.h: every pass rebuilds nodes, and each rebuild looks its key up
/// among every live node). An erased entry leaves a tombstone, which an insertion may reuse;
/// growing rehashes without them.
class InternTable {
public:
    /// The first live node of hash h that match(node) accepts, or null.
    template <class Match> const Node* find(uint64_t h, Match&& match) const {
        const size_t mask = slots_.size() - 1;
        for (size_t i = start(h);; i = (i + 1) & mask) {
            const Slot& s = slots_[i];
            if (!s.node)
                return nullptr;
            if (s.node != tombstone() && s.hash == h && match(s.node))
                return s.node;
        }
    }
    void insert(uint64_t h, const Node* n) {
        if (2 * (used_ + 1) > slots_.size())
            rehash();
        const size_t mask = slots_.size() - 1;
        size_t i = start(h);
        while (slots_[i].node && slots_[i].node != tombstone())
            i = (i + 1) & mask;
        if (!slots_[i].node)
            ++used_;
        slots_[i] = {h, n};
        ++live_;
    }
    void erase(uint64_t h, const Node* n) {
        const size_t mask = slots_.size() - 1;
        for (size_t i = start(h); slots_[i].node; i = (i + 1) & mask)
            if (slots_[i].node == n) {
                slots_[i].node = tombstone();
                --live_;
                return;
            }
    }
    template <class F> void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.node && s.node != tombstone())
                f(s.node);
    }
    size_t size() const { return live_; }

private:
    struct Slot {
        uint64_t hash = 0;
        const Node* node = nullptr; // null: never used; tombstone(): erased
    };
    static const Node* tombstone() { return reinterpret_cast<const Node*>(uintptr_t(1)); }
    /// The structural hash ends in mix64 (Hasher::add): its low bits pick the slot as they are.
    size_t start(uint64_t h) const { return size_t(h) & (slots_.size() - 1); }
    /// At most a quarter full after it, tombstones dropped.
    void rehash() {
        size_t capacity = 1024;
        while (capacity < 4 * (live_ + 1))
            capacity *= 2;
        std::vector<Slot> old(capacity);
        old.swap(slots_);
        used_ = live_ = 0;
        for (const Slot& s : old)
            if (s.node && s.node != tombstone())
                insert(s.hash, s.node);
    }

    std::vector<Slot> slots_ = std::vector<Slot>(1024);
    size_t used_ = 0; // live entries and tombstones
    size_t live_ = 0;
};

/// The global intern table. Entries are raw pointers keyed by structural hash; a node erases
/// itself in its destructor. A lookup that finds a node whose last owner is just going away
/// (weak_from_this() expired) treats it as absent.
struct NodeInterner {
    std::mutex mu;
    InternTable table;

    static NodeInterner& get() {
        static auto* t = new NodeInterner; // never destroyed: nodes may outlive static teardown
        return *t;
    }
};

// Note [Node pool]
// Every pass rebuilds nodes and drops the ones it replaced, so a compile of 10^5 nodes makes
// and frees hundreds of thousands of node blocks, of one size, between the vectors, strings and
// tables of other sizes that the passes allocate. From glibc's malloc such blocks come
// interleaved with those others, and each free may merge chunks (unlink, consolidation): a walk
// over the graph then touches more cache lines and pages per node as the graph grows (with
// jemalloc preloaded, a shared recurrence's compile cost the same per node at 10^3 and 3x10^4
// steps; with glibc 1.35x more: docs/performance.md, "The work per node is flat; a pool for the
// nodes"). The blocks (node and counts, Note [Node memory]) come from a pool instead:
// slabs of one block size, carved in order and reused newest-freed first, so the nodes of a
// graph sit side by side whatever else the passes allocate. A slab is never returned to the
// system; its blocks are reused by the next graph (a freed 10^5-node graph keeps its ~35 MB, 344
// bytes a block, for the next one, as glibc's fragmented heap would). AddressSanitizer builds use
// operator new, so that every use of a freed node is still reported; ThreadSanitizer sees the
// pool's mutex order a block's last use on one thread before its reuse on another
// (`Scale.ThreadsMakeAndDropNodesTogether` runs under it).
namespace {
#if defined(__has_feature) // clang says so here, gcc with __SANITIZE_ADDRESS__
#if __has_feature(address_sanitizer)
#define SJ_NODE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(SJ_NODE_ASAN)
constexpr bool kPoolNodes = false;
#else
constexpr bool kPoolNodes = true;
#endif

class BlockPool {
public:
    BlockPool(size_t size, size_t align)
        : size_((std::max(size, sizeof(void*)) + align - 1) / align * align), align_(align) {}
    void* allocate() {
        std::lock_guard<std::mutex> lock(mu_);
        if (free_) {
            void* p = free_;
            free_ = *static_cast<void**>(p);
            return p;
        }
        if (next_ + size_ > end_) {
            next_ = static_cast<char*>(::operator new(kSlabBytes, std::align_val_t(align_)));
            end_ = next_ + kSlabBytes;
        }
        void* p = next_;
        next_ += size_;
        return p;
    }
    void deallocate(void* p) {
        std::lock_guard<std::mutex> lock(mu_);
        *static_cast<void**>(p) = free_;
        free_ = p;
    }

private:
    static constexpr size_t kSlabBytes = size_t(1) << 18;
    std::mutex mu_;
    const size_t size_, align_;
    void* free_ = nullptr; // the freed blocks, newest first, linked through their first word
    char* next_ = nullptr; // the current slab's first unused block
    char* end_ = nullptr;
};

/// The allocator of a node's block (std::allocate_shared rebinds it to the block's type).
template <class T> struct NodeBlockAllocator {
    using value_type = T;
    NodeBlockAllocator() = default;
    template <class U> NodeBlockAllocator(const NodeBlockAllocator<U>&) {}
    static BlockPool& pool() {
        static auto* p = new BlockPool(sizeof(T), alignof(T)); // never destroyed, as the interner
        return *p;
    }
    T* allocate(size_t n) {
        if (!kPoolNodes || n != 1)
            return static_cast<T*>(::operator new(n * sizeof(T)));
        return static_cast<T*>(pool().allocate());
    }
    void deallocate(T* p, size_t n) {
        if (!kPoolNodes || n != 1)
            return ::operator delete(p);
        pool().deallocate(p);
    }
    template <class U> bool operator==(const NodeBlockAllocator<U>&) const { return true; }
};
} // namespace

Node::Node(Key, Op op, Attrs attrs, std::vector<NodePtr> inputs, TensorType type, uint64_t hash)
    : op_(op), id_(g_next_id++), inputs_(std::move(inputs)), attrs_(std::move(attrs)),
      type_(std::move(type)), hash_(hash), scope_(Scope::current()) {
    for (size_t i = 0; i < kNearInputs && i < inputs_.size(); ++i)
        near_[i] = inputs_[i].get();
    ++g_live;
}

// Note [Node memory]
// A node, its reference counts and its weak self-reference live in one block (make_shared), and
// the fields every walk reads (op, inputs) come first, next to the counts: a walk over a graph
// that no longer fits the caches (a compile of 10^5 nodes) reads a node's first cache line and
// its input vector, and copying a NodePtr touches the same line. Before, `new Node` plus a
// separate control block made one more allocation per node and one more line per handle copy.
// The id (the key of the passes' tables, Note [Flat node tables]) and the first inputs'
// addresses (input_ptr) sit in that first line too: a walk of a chain then misses once per node,
// on the node, instead of also on the id four lines further and on the input vector's block.
// A weak_ptr to a dead node keeps the whole block (not only the counts) until it is dropped:
// nothing keeps one for long (nn's state updates live on their node, Note [Node attachments]).

// Note [Node attachments]
// nn's batch norm hands the compiler its running-statistics updates through the layer's output:
// attach_state_updates(y, {mean <- ..., var <- ...}) and, when a function is built from y,
// state_updates(y) (Note [State updates] in include/symjax/nn/Module.h). Those update graphs are
// not inputs of y, so something must keep them while y lives, and only while it does. A table keyed
// by y's address kept them strongly and y weakly, and dropped an entry only when it pruned: a
// network that was built and dropped stayed in memory (its statistics, the layers before them,
// their variables' values) until the table had doubled, up to 64 entries later. So the node keeps
// them: attach() stores a value under a tag in a process-wide map keyed by the node, the node marks
// itself (a flag in its first word's padding, so nodes do not grow), and its destructor takes its
// values out of the map and drops them after the map's lock is released (dropping them can free
// other attached nodes, whose destructors take the lock). Nodes are interned, so two equal
// expressions share their attachments, as they shared the table's entry.
namespace {
struct Attachments {
    std::mutex mu;
    std::unordered_map<const Node*, std::vector<std::pair<const void*, std::shared_ptr<void>>>> map;
    static Attachments& get() {
        static auto* a = new Attachments; // never destroyed: nodes die in static destructors
        return *a;
    }
};
} // namespace

void Node::attach(const void* tag, std::shared_ptr<void> data) const {
    std::shared_ptr<void> old; // dropped outside the lock
    auto& a = Attachments::get();
    {
        std::lock_guard<std::mutex> lock(a.mu);
        auto& slots = a.map[this];
        auto it =
            std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.first == tag; });
        if (it == slots.end()) {
            slots.emplace_back(tag, std::move(data));
        } else {
            old = std::move(it->second);
            it->second = std::move(data);
        }
        attached_.store(true, std::memory_order_release);
    }
}

std::shared_ptr<void> Node::attachment(const void* tag) const {
    if (!attached_.load(std::memory_order_acquire))
        return nullptr;
    auto& a = Attachments::get();
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.map.find(this);
    if (it == a.map.end())
        return nullptr;
    for (const auto& [t, d] : it->second)
        if (t == tag)
            return d;
    return nullptr;
}

// Note [Iterative teardown]
// Dropping the last handle to a 100k-node chain would recurse 100k destructors deep. Instead,
// a destructor hands inputs it owns alone to a thread-local stack, and only the outermost
// destructor on the thread drains that stack.
Node::~Node() {
    {
        auto& in = NodeInterner::get();
        std::lock_guard<std::mutex> lock(in.mu);
        in.table.erase(hash_, this);
    }
    --g_live;
    if (attached_.load(std::memory_order_acquire)) { // (Note [Node attachments])
        std::vector<std::pair<const void*, std::shared_ptr<void>>> dropped;
        auto& a = Attachments::get();
        {
            std::lock_guard<std::mutex> lock(a.mu);
            if (auto it = a.map.find(this); it != a.map.end()) {
                dropped = std::move(it->second);
                a.map.erase(it);
            }
        }
    }
    thread_local std::vector<NodePtr> pending;
    thread_local bool draining = false;
    for (auto& p : inputs_)
        if (p.use_count() == 1)
            pending.push_back(std::move(p));
    inputs_.clear();
    if (draining)
        return;
    draining = true;
    while (!pending.empty()) {
        NodePtr p = std::move(pending.back());
        pending.pop_back();
        p.reset();
    }
    draining = false;
}

// Note [Names and interning]
// Nodes are hash-consed, so two equal expressions built in different places are one node. A
// name given with Tensor::named therefore cannot live on the shared node: naming `a` "h" would
// rename every equal expression, and a second named() would swap the first one's name. Instead
// the name is part of the interning key: make() only finds unnamed nodes, make_named() only
// nodes with that name, so `(x * y).named("h")` is a twin of `x * y` that carries "h". Leaves
// (placeholders, variables, user constants) have an identity of their own and are renamed in
// place. The twin costs nothing unless the program also uses the unnamed expression, which the
// compiler then computes from the same inputs once per twin.
NodePtr Node::make(Op op, Attrs attrs, std::vector<NodePtr> inputs) {
    return intern(op, std::move(attrs), std::move(inputs), {});
}

NodePtr Node::make_named(Op op, Attrs attrs, std::vector<NodePtr> inputs, std::string name) {
    return intern(op, std::move(attrs), std::move(inputs), std::move(name));
}

// Note [Target layouts]
// A target may run an op on operands in a layout of its own: the cpu target's convolutions and
// pools read and write channel-blocked tensors (Note [Channel-blocked layout] in
// src/ops/ChannelBlocking.h). That is not part of what the op computes, so it is not an
// attribute (the public attribute structs hold semantics only): it is the node's layout mask,
// 0 in every graph a user builds, set by the target's layout pass with make_laid_out. The mask
// joins the node's interning key, its type rule sees it (InferCtx::layout: a blocked operand
// or result has the blocked shape), every rebuild of the node keeps it (Node::rebuild: rewrites,
// clones, renames), and the text IR prints it as `layout N` after the attributes.
NodePtr Node::make_laid_out(Op op, Attrs attrs, std::vector<NodePtr> inputs, int64_t layout,
                            std::string name) {
    return intern(op, std::move(attrs), std::move(inputs), std::move(name), layout);
}

NodePtr Node::rebuild(const Node& n, std::vector<NodePtr> inputs) {
    SJ_ASSERT(!has_trait(n.op(), kLeaf)) << "rebuild of a leaf (" << n.describe() << ")";
    return intern(n.op(), n.attrs(), std::move(inputs), n.name_, n.layout_);
}

void Node::set_name(std::string n) const {
    SJ_ASSERT(has_trait(op_, kLeaf)) << "set_name on " << op_name(op_)
                                     << ", which is shared: use with_name()";
    name_ = std::move(n);
}

NodePtr with_name(const NodePtr& n, const std::string& name) {
    SJ_ASSERT(n) << "with_name on a null node"; // Tensor::named reports an undefined Tensor
    if (n->name() == name) return n;
    if (has_trait(n->op(), kLeaf)) {
        n->set_name(name);
        return n;
    }
    if (n->layout() != 0)
        return Node::make_laid_out(n->op(), n->attrs(), n->inputs(), n->layout(), name);
    return Node::make_named(n->op(), n->attrs(), n->inputs(), name);
}

NodePtr Node::intern(Op op, Attrs attrs, std::vector<NodePtr> inputs, std::string name,
                     int64_t layout) {
    const detail::OpDef& def = detail::op_def(op);
    if (def.arity >= 0) {
        SJ_ASSERT(static_cast<int>(inputs.size()) == def.arity)
            << def.name << " takes " << def.arity << " inputs, got " << inputs.size();
    }
    std::vector<TensorType> types;
    types.reserve(inputs.size());
    for (const auto& i : inputs) {
        SJ_CHECK(i, Error) << def.name << ": input is an undefined (default-constructed) Tensor";
        types.push_back(i->type());
    }
    detail::InferCtx ctx{op, attrs, types, &inputs, false, layout};
    TensorType type = def.infer(ctx);
    try { // every value a graph can compute has a size that fits in int64 (Shape.h)
        byte_size(type.shape, dtype_size(type.dtype));
    } catch (const ShapeError& e) {
        throw ShapeError(ctx.where() + ": result " + dtype_name(type.dtype) + ": " + e.what());
    }

    detail::Hasher h;
    h.add(static_cast<uint64_t>(op));
    h.add(attrs_hash(attrs));
    for (const auto& i : inputs) h.add(reinterpret_cast<uintptr_t>(i.get()));
    // a leaf's name is not part of its key: leaves are renamed in place (Note [Names and interning])
    SJ_ASSERT(name.empty() || !has_trait(op, kLeaf)) << "make_named on a leaf";
    if (!name.empty()) h.add(std::hash<std::string>{}(name));
    if (layout != 0)
        h.add(static_cast<uint64_t>(layout));
    uint64_t hash = h.h;

    auto& in = NodeInterner::get();
    std::lock_guard<std::mutex> lock(in.mu);
    NodePtr alive;
    in.table.find(hash, [&](const Node* c) {
        if (c->op_ != op || c->inputs_.size() != inputs.size())
            return false;
        bool same = true;
        for (size_t k = 0; k < inputs.size() && same; ++k)
            same = c->inputs_[k] == inputs[k];
        if (!same || (!has_trait(op, kLeaf) && c->name_ != name) || c->layout_ != layout ||
            !attrs_equal(c->attrs_, attrs))
            return false;
        alive = c->weak_from_this().lock();
        return alive != nullptr;
    });
    if (alive)
        return alive;
    // one block for the node and its reference counts (Note [Node memory]), from the pool
    // (Note [Node pool])
    auto made = std::allocate_shared<Node>(NodeBlockAllocator<Node>{}, Key{}, op, std::move(attrs),
                                           std::move(inputs), std::move(type), hash);
    made->layout_ = layout;
    made->name_ = std::move(name);
    in.table.insert(hash, made.get());
    return made;
}

std::string Node::describe(int depth) const {
    if (!name_.empty())
        return name_;
    if (op_ == Op::Constant) {
        const Array& v = attr<ConstantAttrs>().value;
        if (v.size() == 1)
            return v.str();
        return "constant" + v.type_str();
    }
    std::ostringstream os;
    os << op_name(op_);
    if (depth <= 0)
        return os.str() + "(...)";
    os << "(";
    for (size_t i = 0; i < inputs_.size(); ++i)
        os << (i ? ", " : "") << inputs_[i]->describe(depth - 1);
    os << ")";
    return os.str();
}

size_t live_node_count() {
    return g_live.load();
}

std::vector<NodePtr> live_nodes() {
    std::vector<NodePtr> out;
    {
        auto& in = NodeInterner::get();
        std::lock_guard<std::mutex> lock(in.mu);
        out.reserve(in.table.size());
        in.table.for_each([&](const Node* n) {
            if (NodePtr alive = n->weak_from_this().lock())
                out.push_back(std::move(alive));
        });
    }
    // outside the lock: a node whose last owner is here dies in this vector's destructor
    std::sort(out.begin(), out.end(),
              [](const NodePtr& a, const NodePtr& b) { return a->id() < b->id(); });
    return out;
}

bool splat_value(const Node& n, double* value) {
    const Node* c = &n;
    while (c->is(Op::Broadcast))
        c = c->input(0).get(); // a second input only gives the shape
    if (!c->is(Op::Constant))
        return false;
    const Array& a = c->attr<ConstantAttrs>().value;
    if (a.size() == 0)
        return false;
    double v = a.at(0);
    for (int64_t i = 1; i < a.size(); ++i)
        if (!(a.at(i) == v))
            return false;
    *value = v;
    return true;
}

// Note [Order memo]
// A pass that changes nothing hands the next pass the same roots: a function's compile walks
// one final graph about nine times (loop merging, each round of the rewrite driver, constant
// merging, fusion, the plan). Nodes never change after construction and ids are never reused,
// so the same root ids give the same order while the caller holds them; each thread keeps its
// last walk and returns a copy for the same ids. Keyed by id, not address: a freed graph's
// addresses come back for the next one. The copy costs 8 bytes per node; the walk it saves
// misses the cache on every node once the graph outgrows it (docs/performance.md, "Tables by
// id"). The memo holds no node alive, and a thread keeps at most its last order.
namespace {
struct OrderMemo {
    std::vector<uint64_t> roots; // ids; 0 for a null root
    std::vector<const Node*> order;
};
thread_local OrderMemo t_order_memo;
} // namespace

std::vector<const Node*> topo_order(const std::vector<const Node*>& roots) {
    std::vector<uint64_t> key;
    key.reserve(roots.size());
    for (const Node* r : roots)
        key.push_back(r ? r->id() : 0);
    OrderMemo& memo = t_order_memo;
    if (!key.empty() && key == memo.roots)
        return memo.order;
    std::vector<const Node*> order;
    detail::NodeMap<uint8_t> done; // Note [Flat node tables]
    std::vector<std::pair<const Node*, size_t>> stack;
    for (const Node* r : roots) {
        if (!r || done.contains(r))
            continue;
        stack.emplace_back(r, 0);
        while (!stack.empty()) {
            auto& [n, next] = stack.back();
            if (next < n->num_inputs()) {
                const Node* c = n->input_ptr(next++);
                if (!done.contains(c))
                    stack.emplace_back(c, 0);
                continue;
            }
            if (done.insert(n, 1).second)
                order.push_back(n);
            stack.pop_back();
        }
    }
    memo.roots = std::move(key);
    memo.order = order;
    return order;
}

} // namespace sj
