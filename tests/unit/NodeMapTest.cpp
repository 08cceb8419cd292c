// detail::NodeMap, the per-walk table of the graph passes (Note [Flat node tables] in
// src/core/NodeMap.h): every entry found again, values that never move, nodes whose ids are far
// apart, and a walk's order of the entries it reports.
#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include "core/NodeMap.h"

#include <map>
#include <set>
#include <vector>

using namespace sj;

namespace {

/// n nodes of a chain x + 1 + 1 ...; between two kept nodes `gap` nodes are made and dropped,
/// so that the kept nodes' ids are gap + 1 apart.
std::vector<Tensor> chain(int n, int gap) {
    Placeholder x({3}, f32, "x");
    std::vector<Tensor> out{x};
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < gap; ++j)
            (void)(out.back() * float(1000 + j)); // made and dropped
        out.push_back(out.back() + 1.0);
    }
    return out;
}

/// The nodes reachable from root, with std::set and no memo.
std::set<const Node*> reachable(const Node* root) {
    std::set<const Node*> reach;
    std::vector<const Node*> todo{root};
    while (!todo.empty()) {
        const Node* n = todo.back();
        todo.pop_back();
        if (reach.insert(n).second)
            for (const auto& in : n->inputs())
                todo.push_back(in.get());
    }
    return reach;
}

void check_map(const std::vector<Tensor>& nodes) {
    detail::NodeMap<int> m;
    std::vector<int*> first;
    for (size_t i = 0; i < nodes.size(); ++i) {
        auto [v, inserted] = m.insert(nodes[i].node().get(), int(i));
        ASSERT_TRUE(inserted) << i;
        first.push_back(v);
    }
    EXPECT_EQ(m.size(), nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
        const int* v = m.find(nodes[i].node().get());
        ASSERT_TRUE(v) << i;
        EXPECT_EQ(*v, int(i));
        EXPECT_EQ(v, first[i]) << "a value moved as the table grew";
        EXPECT_FALSE(m.insert(nodes[i].node().get(), -1).second);
        EXPECT_EQ(*v, int(i)) << "a second insert must not overwrite";
    }
    std::map<const Node*, int> seen;
    m.for_each([&](const Node* k, int& v) { seen[k] = v; });
    ASSERT_EQ(seen.size(), nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
        EXPECT_EQ(seen[nodes[i].node().get()], int(i));
}

} // namespace

TEST(NodeMap, FindsEveryNodeOfADenseChain) {
    check_map(chain(5000, 0));
}

TEST(NodeMap, FindsNodesWithScatteredIds) {
    // ids 1..200 apart: most pages hold one entry
    check_map(chain(300, 199));
}

TEST(NodeMap, AbsentNodesAndNull) {
    std::vector<Tensor> a = chain(100, 0), b = chain(100, 0);
    detail::NodeMap<int> m(10);
    for (const Tensor& t : a)
        m[t.node().get()] = 7;
    for (const Tensor& t : b)
        EXPECT_FALSE(m.contains(t.node().get()));
    EXPECT_EQ(m.find(nullptr), nullptr);
    EXPECT_EQ(m.count(a[3].node().get()), 1u);
    EXPECT_EQ(m.count(b[3].node().get()), 0u);
    // operator[] default-constructs, then keeps what was written
    detail::NodeMap<std::vector<int>> lists;
    lists[a[5].node().get()].push_back(1);
    lists[a[5].node().get()].push_back(2);
    EXPECT_EQ(*lists.find(a[5].node().get()), (std::vector<int>{1, 2}));
    EXPECT_EQ(lists.size(), 1u);
}

TEST(NodeMap, TopologicalOrderPutsInputsFirst) {
    // topo_order's visited set is a NodeMap: every node once, after its inputs
    std::vector<Tensor> c = chain(2000, 3);
    Tensor y = c.back() * c[1000] + c[10];
    std::vector<const Node*> order = topo_order({y.node().get()});
    detail::NodeMap<size_t> pos;
    for (size_t i = 0; i < order.size(); ++i)
        ASSERT_TRUE(pos.insert(order[i], i).second) << "visited twice";
    for (size_t i = 0; i < order.size(); ++i)
        for (const auto& in : order[i]->inputs())
            EXPECT_LT(*pos.find(in.get()), i);
    EXPECT_EQ(order.size(), reachable(y.node().get()).size()) << "every node reachable";
    EXPECT_GT(order.size(), 2000u);
}

// Note [Order memo]: the same roots twice give the same order, and graphs made and freed one
// after another, each of another size (their nodes reuse the freed ones' addresses), each get
// their own order: a memo keyed by address could hand a new root the freed graph's order
TEST(NodeMap, TopologicalOrderMemoFollowsTheRoots) {
    for (int round = 0; round < 60; ++round) {
        std::vector<Tensor> c = chain(20 + (round * 37) % 200, 0);
        const Node* root = c.back().node().get();
        Tensor y = c.front() * 2.0; // other roots
        std::vector<const Node*> order = topo_order({root});
        std::set<const Node*> reach = reachable(root);
        ASSERT_EQ(order.size(), reach.size()) << "round " << round;
        ASSERT_EQ(order.back(), root);
        for (const Node* n : order)
            ASSERT_TRUE(reach.count(n)) << "round " << round << ": a node of another graph";
        EXPECT_EQ(topo_order({root}), order) << "the same roots again";
        EXPECT_NE(topo_order({y.node().get()}), order);
    }
}
