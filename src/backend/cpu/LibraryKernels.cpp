// The table of the cpu backend's library kernels (LibraryKernels.h).
#include "LibraryKernels.h"

#include "Indexing.h"
#include "Linalg.h"
#include "Movement.h"
#include "Random.h"
#include "Sort.h"

namespace sj::cpu {

namespace {

struct Entry {
    Op op;
    LibraryKernel kernel;
    const char* kind;
};

// a table, not a switch: most ops have no library kernel, and a new op needs no entry here
constexpr Entry kKernels[] = {
    {Op::Cholesky, cholesky, "lapack"},
    {Op::TriangularSolve, triangular_solve, "lapack"},
    {Op::PhiloxBits, philox_bits, "random"},
    {Op::Sort, sort, "sort"},
    {Op::Gather, gather, "index"},
    {Op::ScatterAdd, scatter, "index"},
    {Op::Scatter, scatter, "index"},
    {Op::Cumsum, cumsum, "scan"},
    {Op::Pad, pad, "rows"},
    {Op::Concat, concat, "rows"},
    {Op::ArgMax, arg_reduce, "scan"},
    {Op::ArgMin, arg_reduce, "scan"},
    {Op::OneHot, one_hot, "rows"},
    {Op::DynamicSlice, dynamic_slice, "rows"},
    {Op::DynamicUpdateSlice, dynamic_update_slice, "rows"},
};

const Entry* entry(Op op) {
    for (const Entry& e : kKernels)
        if (e.op == op)
            return &e;
    return nullptr;
}

} // namespace

LibraryKernel library_kernel(Op op) {
    const Entry* e = entry(op);
    return e ? e->kernel : nullptr;
}

const char* library_kind(Op op) {
    if (op == Op::CheckIndex) // (checked on the team, no kernel: check_index_values)
        return "index";
    const Entry* e = entry(op);
    return e ? e->kind : nullptr;
}

} // namespace sj::cpu
