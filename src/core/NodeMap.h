// NodeMap: a map keyed by node, for the per-walk tables of graph passes.
#pragma once

#include "Hash.h"

#include <symjax/Error.h>

#include <symjax/ir/Node.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace sj::detail {

// Note [Flat node tables]
// Every pass walks the graph with a table keyed by node: visited sets, old -> new node maps.
// std::unordered_map allocates one heap cell per entry and reaches a value through a bucket
// and a list cell; on a graph of 10^5 nodes that was a third of compile time in malloc, free
// and their consolidation (docs/performance.md, "Compile time against graph size"). A flat
// hash table keyed by address (the next version) removed the allocations but not the misses:
// a hashed slot is a random place in a table that outgrows the caches with the graph, so every
// lookup of a large compile missed, and the cost per node grew with the graph.
//
// NodeMap is keyed by the node's id instead, which grows in creation order, and walks visit
// nodes close to that order (a topological order of a graph built forwards, and the rewritten
// nodes, which are numbered in the order the walk makes them). The ids are split into pages of
// kPage consecutive ids; a page holds its keys and values in place, and pages are found through
// a small open-addressed table of page numbers with the last page remembered. A walk over a
// chain touches its pages in order: one miss per kPage nodes instead of one or two per node.
// Entries are never erased (a walk's table only grows); values never move, so a pointer
// returned by find or insert stays valid. Ids scattered over a wide range (nodes of many
// unrelated graphs) cost up to a page per entry: more memory, the same lookups.
template <class V> class NodeMap {
public:
    explicit NodeMap(size_t expected = 0) {
        size_t c = 16;
        while (c < 2 * (expected / kPage + 1))
            c *= 2;
        slots_.assign(c, Slot{});
    }

    /// The value of k, or null.
    V* find(const Node* k) {
        if (!k)
            return nullptr;
        Page* p = page(k->id() >> kPageBits, false);
        if (!p)
            return nullptr;
        const size_t i = k->id() & (kPage - 1);
        return p->keys[i] == k ? &p->vals[i] : nullptr;
    }
    const V* find(const Node* k) const { return const_cast<NodeMap*>(this)->find(k); }
    bool contains(const Node* k) const { return find(k) != nullptr; }
    size_t count(const Node* k) const { return contains(k) ? 1 : 0; }

    /// Inserts (k, v) when k is absent; returns the value held for k and whether it was inserted.
    std::pair<V*, bool> insert(const Node* k, V v = V{}) {
        Page* p = page(k->id() >> kPageBits, true);
        const size_t i = k->id() & (kPage - 1);
        if (p->keys[i] == k)
            return {&p->vals[i], false};
        p->keys[i] = k;
        p->vals[i] = std::move(v);
        ++size_;
        return {&p->vals[i], true};
    }
    /// The value of k, default-constructed first when absent.
    V& operator[](const Node* k) { return *insert(k, V{}).first; }
    /// The value of k, which must be present.
    const V& at(const Node* k) const {
        const V* v = find(k);
        SJ_ASSERT(v) << "node table: no entry for " << k->describe(1);
        return *v;
    }

    NodeMap(NodeMap&&) noexcept = default;
    NodeMap& operator=(NodeMap&&) noexcept = default;
    NodeMap(const NodeMap& o) : slots_(o.slots_.size()), size_(o.size_) {
        for (const Slot& s : o.slots_)
            if (s.page) {
                pages_.push_back(std::make_unique<Page>(*s.page));
                put(s.number, pages_.back().get());
            }
    }
    NodeMap& operator=(const NodeMap& o) {
        if (this != &o)
            *this = NodeMap(o);
        return *this;
    }

    size_t size() const { return size_; }

    /// f(key, value&) for every entry, in page order (which depends on the pages' first use:
    /// nothing that must be reproducible may depend on it).
    template <class F> void for_each(F&& f) {
        for (const auto& p : pages_)
            for (size_t i = 0; i < kPage; ++i)
                if (p->keys[i])
                    f(p->keys[i], p->vals[i]);
    }

private:
    static constexpr int kPageBits = 6;
    static constexpr size_t kPage = size_t(1) << kPageBits;
    struct Page {
        const Node* keys[kPage] = {};
        V vals[kPage];
    };
    struct Slot {
        uint64_t number = ~uint64_t(0); // no page has this number: ids are < 2^63
        Page* page = nullptr;
    };

    /// The page of ids number * kPage .. (number + 1) * kPage - 1; made when `make`.
    Page* page(uint64_t number, bool make) {
        if (number == last_number_)
            return last_;
        const size_t mask = slots_.size() - 1;
        size_t i = size_t(mix64(number)) & mask;
        while (slots_[i].page && slots_[i].number != number)
            i = (i + 1) & mask;
        if (!slots_[i].page) {
            if (!make)
                return nullptr;
            if (2 * (pages_.size() + 1) > slots_.size()) { // at most half full
                grow();
                return page(number, make);
            }
            pages_.push_back(std::make_unique<Page>());
            slots_[i] = {number, pages_.back().get()};
        }
        last_number_ = number;
        last_ = slots_[i].page;
        return last_;
    }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        for (const Slot& s : old)
            if (s.page)
                put(s.number, s.page);
    }
    /// Files a page under its number (absent from the table, which has room).
    void put(uint64_t number, Page* p) {
        const size_t mask = slots_.size() - 1;
        size_t i = size_t(mix64(number)) & mask;
        while (slots_[i].page)
            i = (i + 1) & mask;
        slots_[i] = {number, p};
    }

    std::vector<std::unique_ptr<Page>> pages_;
    std::vector<Slot> slots_;
    uint64_t last_number_ = ~uint64_t(0);
    Page* last_ = nullptr;
    size_t size_ = 0;
};

} // namespace sj::detail
