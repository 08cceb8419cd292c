// philox_bits on the cpu target: the reference kernel's bits, drawn many blocks at a time over
// the thread team (Note [Philox draws on the team] in Random.cpp).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <vector>

namespace sj::cpu {

/// Fills `out` (u32, the node's concrete shape, allocated by the caller) with philox_bits' bits
/// for this call's counter: bit for bit what the reference kernel draws, in the plain or the
/// channel-blocked order the node's layout names. A library kernel (LibraryKernels.h): `in`,
/// the counter's slot and a `like` operand, is not read.
void philox_bits(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);

/// The words of the 16 blocks q[g] .. q[g] + 15 for g < 4 in draw order (out[64 g + 4 l + w]:
/// word w of block q[g] + l), as philox_bits computes them on this CPU, or one block at a time
/// as it does on CPUs without AVX-512 (`one_at_a_time`): for tests against
/// ref::philox4x32_10.
void philox_blocks(const uint64_t q[4], const uint32_t key[2], uint64_t counter, uint32_t out[256],
                   bool one_at_a_time = false);

} // namespace sj::cpu
