// Encoding and decoding of float32 partitions under a CompressionSpec. A worker encodes its push; the
// server decodes each push into a dense sum and encodes the sum for the pull; workers decode the pull.
// Nothing decoded is trusted: a payload of the wrong size or with an index out of range is an error.
//
// Wire layouts (little-endian, see cc/common/wire.h):
//   onebit:  float scale, then ceil(n / 8) bytes of sign bits (bit i of byte i / 8 set: element i < 0);
//            element i decodes to -scale or +scale. The scale is the mean magnitude (the L1 norm / n).
//   topk:    k records of {uint32 index, float value}, indices ascending.
//   randomk: k float values at the k ascending indices drawn from the partition's seed (RandomIndices).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc/common/status.h"
#include "cc/compress/compression_spec.h"

namespace bps {

// The largest partition a codec encodes (top-k indices are 32-bit).
constexpr uint64_t kMaxCodecElements = UINT32_MAX;

// How many elements top-k and random-k send of `n`: at least one of a non-empty partition.
uint64_t KeptElements(const CompressionSpec& spec, uint64_t n);
// The encoded size of a partition of `n` float32 elements.
size_t EncodedBytes(const CompressionSpec& spec, uint64_t n);

// Every peer draws the same random-k indices for a partition and round: `seed` mixes both.
uint64_t PartitionSeed(uint64_t key, uint32_t round);
// k distinct ascending indices in [0, n), the same for the same arguments on every machine.
std::vector<uint32_t> RandomIndices(uint64_t seed, uint64_t n, uint64_t k);

// Encodes `values[0, n)` into `wire` (EncodedBytes(spec, n) bytes). With `feedback`, `values` is left holding
// what the encoding dropped (values - Decode(wire)): the error feedback to add to the next round.
void Encode(const CompressionSpec& spec, float* values, uint64_t n, uint64_t seed, char* wire, bool feedback);
// Whether `wire` (`bytes` long) is a well-formed encoding of `n` elements; DecodeAdd checks it too, but may have
// added part of it by the time it finds a fault.
Status CheckEncoded(const CompressionSpec& spec, const char* wire, size_t bytes, uint64_t n);
// Adds the decoding of `wire` (`bytes` long) to `sum[0, n)`.
Status DecodeAdd(const CompressionSpec& spec, const char* wire, size_t bytes, uint64_t n, uint64_t seed, float* sum);
// Writes the decoding of `wire` to `out[0, n)`.
Status Decode(const CompressionSpec& spec, const char* wire, size_t bytes, uint64_t n, uint64_t seed, float* out);

}  // namespace bps
