// Where a model's weights live for the forward pass (model.h, LayerWeights), each held once:
//   - on the CPU a weight the forward reads alone stays a view of the file mapping, in its stored
//     dtype (no copy); a stack (q, k, v and their biases; gate, up) is copied into one tracked
//     buffer, rows after rows, in the parts' dtype (fp32 when they differ, which is exact for each);
//   - on a GPU every weight is copied once, in the compute dtype (rounded when stored in another).
// A copied weight's pages then leave the mapping's resident memory (SafetensorsSet::release), so
// no weight is resident twice.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "flashport/memory.h"
#include "flashport/tensor.h"

namespace flashport::engine {

class WeightPlacer {
public:
    // `owned` receives the copies' buffers, which the returned views point into.
    WeightPlacer(const SafetensorsSet& files, Device device, DType compute_dtype, std::vector<Buffer>& owned);

    TensorView single(const std::string& name);
    // The named weights' rows one after the other: [Σ rows, in] for weights [rows, in], [Σ n] for
    // biases [n]. Their inner shapes must agree.
    TensorView stacked(std::initializer_list<std::string> names);

    // Bytes the placed weights take: views of the mapping (not counted by the tracked allocator) and
    // copies (counted).
    size_t bytes() const { return bytes_; }

private:
    const SafetensorsSet& files_;
    Device device_;
    DType compute_dtype_;
    std::vector<Buffer>& owned_;
    size_t bytes_ = 0;
};

}  // namespace flashport::engine
