// NodeMap: a flat hash map keyed by node pointers, for the per-walk tables of graph passes.
#pragma once

#include "Hash.h"

#include <symjax/ir/Node.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace sj::detail {

// Note [Flat node tables]
// Every pass walks the graph with a table keyed by node: visited sets, old -> new node maps.
// std::unordered_map allocates one heap cell per entry and reaches a value through a bucket
// and a list cell; on a graph of 10^5 nodes that was a third of compile time in malloc, free
// and their consolidation, and two or three cache misses per lookup once the graph outgrew the
// caches (docs/performance.md, "Compile time against graph size"). NodeMap keeps keys and
// values in two arrays with linear probing: no allocation per entry, one probe sequence in one
// array per lookup. Entries are never erased (a walk's table only grows); the key nullptr marks
// an empty slot, so it is not a valid key.
template <class V> class NodeMap {
public:
    explicit NodeMap(size_t expected = 0) { rehash(capacity_for(expected)); }

    /// The value of k, or null.
    V* find(const Node* k) {
        size_t i = slot(k);
        return keys_[i] == k ? &vals_[i] : nullptr;
    }
    const V* find(const Node* k) const { return const_cast<NodeMap*>(this)->find(k); }
    bool contains(const Node* k) const { return find(k) != nullptr; }
    size_t count(const Node* k) const { return contains(k) ? 1 : 0; }

    /// Inserts (k, v) when k is absent; returns the value held for k and whether it was inserted.
    std::pair<V*, bool> insert(const Node* k, V v = V{}) {
        size_t i = slot(k);
        if (keys_[i] == k)
            return {&vals_[i], false};
        if (2 * (size_ + 1) > keys_.size()) { // at most half full: short probe sequences
            rehash(keys_.size() * 2);
            i = slot(k);
        }
        keys_[i] = k;
        vals_[i] = std::move(v);
        ++size_;
        return {&vals_[i], true};
    }
    /// The value of k, default-constructed first when absent.
    V& operator[](const Node* k) { return *insert(k, V{}).first; }

    size_t size() const { return size_; }

    /// f(key, value&) for every entry, in slot order (which depends on addresses: nothing that
    /// must be reproducible may depend on it).
    template <class F> void for_each(F&& f) {
        for (size_t i = 0; i < keys_.size(); ++i)
            if (keys_[i])
                f(keys_[i], vals_[i]);
    }

private:
    static size_t capacity_for(size_t n) {
        size_t c = 16;
        while (c < 2 * n)
            c *= 2;
        return c;
    }
    /// The slot of k, or the empty slot where it would go.
    size_t slot(const Node* k) const {
        const size_t mask = keys_.size() - 1; // addresses share their low and high bits: mixed
        size_t i = size_t(mix64(reinterpret_cast<uintptr_t>(k))) & mask;
        while (keys_[i] && keys_[i] != k)
            i = (i + 1) & mask;
        return i;
    }
    void rehash(size_t capacity) {
        std::vector<const Node*> keys(capacity, nullptr);
        std::vector<V> vals(capacity);
        keys.swap(keys_);
        vals.swap(vals_);
        for (size_t i = 0; i < keys.size(); ++i)
            if (keys[i]) {
                size_t j = slot(keys[i]);
                keys_[j] = keys[i];
                vals_[j] = std::move(vals[i]);
            }
    }

    std::vector<const Node*> keys_;
    std::vector<V> vals_;
    size_t size_ = 0;
};

} // namespace sj::detail
