// Where a model's weights live for the forward pass (model.h, LayerWeights), each held once:
//   - on the CPU every weight is copied into tracked (anonymous, huge-page eligible) memory in its
//     stored dtype; a stack (q, k, v and their biases; gate, up) becomes one buffer, rows after rows,
//     in the parts' dtype (fp32 when they differ, which is exact for each). With `map_singles`
//     (ModelOptions::map_weights) a weight the forward reads alone stays a view of the file mapping;
//   - on a GPU every weight is copied once, in the compute dtype (rounded when stored in another).
// A copied weight's pages then leave the mapping's resident memory (SafetensorsSet::release), so
// no weight is resident twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "flashport/memory.h"
#include "flashport/tensor.h"

namespace flashport::engine {

// The bytes WeightPlacer takes for every weight `config` implies, from the headers alone (nothing is
// read or copied): the stored dtypes on the CPU (copied or mapped, the same bytes), `compute_dtype` on
// a GPU. A CPU stack whose parts differ in dtype is held in fp32, so it takes more than this; released
// checkpoints store one dtype. `flashport doctor --model` sizes a model with it before loading one.
int64_t placed_weight_bytes(const QwenConfig& config, const SafetensorsSet& weights, Device device,
                            DType compute_dtype);

class WeightPlacer {
public:
    // `owned` receives the copies' buffers, which the returned views point into. arena_bytes > 0 (GPUs:
    // placed_weight_bytes plus WEIGHT_ALIGN a weight) places every copy in one buffer of that size,
    // each at a WEIGHT_ALIGN boundary: the driver rounds each allocation up to its 2 MiB pages, which
    // over Qwen2.5-7B's 339 weights came to ~0.1 GB that the driver counts and the tracked allocator
    // does not. 0: a buffer per weight (the CPU's, each advised into huge pages).
    WeightPlacer(const SafetensorsSet& files, Device device, DType compute_dtype, std::vector<Buffer>& owned,
                 bool map_singles = false, size_t arena_bytes = 0);
    static constexpr size_t WEIGHT_ALIGN = 256;  // what cuBLASLt's widest alignment class asks

    TensorView single(const std::string& name);
    // The named weights' rows one after the other: [Σ rows, in] for weights [rows, in], [Σ n] for
    // biases [n]. Their inner shapes must agree.
    TensorView stacked(std::initializer_list<std::string> names);

    // Bytes the placed weights take: views of the mapping (not counted by the tracked allocator) and
    // copies (counted).
    size_t bytes() const { return bytes_; }
    size_t mapped_bytes() const { return mapped_bytes_; }  // the views of the mapping among them

private:
    const SafetensorsSet& files_;
    Device device_;
    DType compute_dtype_;
    std::vector<Buffer>& owned_;
    bool map_singles_;
    char* arena_ = nullptr;  // the next free byte of the one GPU buffer, and its bytes left
    size_t arena_left_ = 0;
    size_t bytes_ = 0, mapped_bytes_ = 0;
};

}  // namespace flashport::engine
