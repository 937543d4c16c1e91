// The tensors a Qwen2/Qwen3 checkpoint must hold, named as transformers saves them, the check that a
// loaded safetensors set has them all with the right shapes before any is used, and where each goes
// for the forward pass (WeightPlacer, model_weights.h).
#include "engine/model_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <sstream>

#include "flashport/checked.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "model_config.h"

namespace flashport::engine {
namespace {

std::string dims(int64_t a, const char* a_name) {
    return std::to_string(a) + " (" + a_name + ")";
}

std::string shape_str(const std::vector<int64_t>& shape) {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << "]";
    return os.str();
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const QwenConfig& c) {
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
    const std::string h = dims(hidden, "hidden_size");
    const std::string qs =
        "num_attention_heads " + std::to_string(c.num_attention_heads) + " x head_dim " + std::to_string(c.head_dim);
    const std::string kvs =
        "num_key_value_heads " + std::to_string(c.num_key_value_heads) + " x head_dim " + std::to_string(c.head_dim);
    const std::string in = dims(inter, "intermediate_size");

    std::vector<ExpectedTensor> out;
    out.push_back({"model.embed_tokens.weight", {c.vocab_size, hidden}, dims(c.vocab_size, "vocab_size") + ", " + h});
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        out.push_back({p + "input_layernorm.weight", {hidden}, h});
        out.push_back({p + "self_attn.q_proj.weight", {q, hidden}, qs + ", " + h});
        out.push_back({p + "self_attn.k_proj.weight", {kv, hidden}, kvs + ", " + h});
        out.push_back({p + "self_attn.v_proj.weight", {kv, hidden}, kvs + ", " + h});
        if (c.qkv_bias) {
            out.push_back({p + "self_attn.q_proj.bias", {q}, qs});
            out.push_back({p + "self_attn.k_proj.bias", {kv}, kvs});
            out.push_back({p + "self_attn.v_proj.bias", {kv}, kvs});
        }
        if (c.qk_norm) {
            out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, dims(c.head_dim, "head_dim")});
            out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, dims(c.head_dim, "head_dim")});
        }
        out.push_back({p + "self_attn.o_proj.weight", {hidden, q}, h + ", " + qs});
        if (c.o_bias) out.push_back({p + "self_attn.o_proj.bias", {hidden}, h});
        out.push_back({p + "post_attention_layernorm.weight", {hidden}, h});
        out.push_back({p + "mlp.gate_proj.weight", {inter, hidden}, in + ", " + h});
        out.push_back({p + "mlp.up_proj.weight", {inter, hidden}, in + ", " + h});
        out.push_back({p + "mlp.down_proj.weight", {hidden, inter}, h + ", " + in});
    }
    out.push_back({"model.norm.weight", {hidden}, h});
    if (!c.tie_word_embeddings)
        out.push_back({"lm_head.weight",
                       {c.vocab_size, hidden},
                       dims(c.vocab_size, "vocab_size") + ", " + h + "; tie_word_embeddings is false"});
    return out;
}

void check_weights(const QwenConfig& c, const SafetensorsSet& weights) {
    for (const ExpectedTensor& e : expected_tensors(c)) {
        const TensorInfo* t = weights.find(e.name);
        FP_CHECK(t, "tensor '", e.name, "' is missing from ", weights.source(), " (", c.model_type, " with ",
                 c.num_hidden_layers, " layers needs it, shape ", shape_str(e.shape), ")");
        FP_CHECK(t->shape == e.shape, "tensor '", e.name, "' has shape ", t->shape_str(), " in ", weights.source(),
                 ", but ", c.source, " implies ", shape_str(e.shape), ": ", e.why);
        FP_CHECK(engine_dtype(t->dtype), "tensor '", e.name, "' in ", weights.source(), " has dtype ",
                 st_dtype_name(t->dtype), "; the engine loads F32, F16 and BF16 weights");
    }
}

int64_t placed_weight_bytes(const QwenConfig& config, const SafetensorsSet& weights, Device device,
                            DType compute_dtype) {
    int64_t total = 0;
    for (const ExpectedTensor& e : expected_tensors(config)) {
        const TensorInfo& t = weights.info(e.name);
        const std::optional<DType> stored = engine_dtype(t.dtype);
        FP_CHECK(stored, "tensor '", e.name, "' in ", weights.source(), " has dtype ", st_dtype_name(t.dtype),
                 "; the engine loads F32, F16 and BF16 weights");
        const DType placed = device.is_cpu() ? *stored : compute_dtype;
        total = checked_add(total, checked_mul(t.numel, int64_t(dtype_size(placed)), "the bytes of ", e.name),
                            "the bytes of the weights");
    }
    return total;
}

namespace {

// src (a contiguous CPU view) to dst on `device` in `dtype`, converted element by element when
// stored in another.
void copy_as(void* dst, Device device, DType dtype, const TensorView& src) {
    const size_t n = size_t(src.numel()), esize = dtype_size(dtype), src_esize = dtype_size(src.dtype);
    if (src.dtype == dtype) {
        copy_bytes(dst, device, src.data, Device::cpu(), n * esize);
        return;
    }
    std::vector<unsigned char> staged(device.is_cpu() ? 0 : n * esize);
    auto* out = device.is_cpu() ? static_cast<unsigned char*>(dst) : staged.data();
    const auto* in = static_cast<const unsigned char*>(src.data);
    for (size_t i = 0; i < n; ++i)
        store_from_float(out + i * esize, dtype, load_as_float(in + i * src_esize, src.dtype));
    if (!device.is_cpu()) copy_bytes(dst, device, staged.data(), Device::cpu(), n * esize);
}

// Asks for transparent huge pages over the buffer's whole 2 MiB pages (where THP is in `madvise`
// mode; `always` gives them anyway): the decode GEMVs stream every weight once per token, and with
// 4 KiB pages each page is a TLB miss. A refusal changes nothing but speed.
void advise_huge_pages(void* data, size_t bytes) {
#if defined(__linux__)
    constexpr uintptr_t HUGE = uintptr_t(2) << 20;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + HUGE - 1) / HUGE * HUGE;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / HUGE * HUGE;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
    (void)data, (void)bytes;
#endif
}

}  // namespace

WeightPlacer::WeightPlacer(const SafetensorsSet& files, Device device, DType compute_dtype, std::vector<Buffer>& owned,
                           bool map_singles, size_t arena_bytes)
    : files_(files), device_(device), compute_dtype_(compute_dtype), owned_(owned), map_singles_(map_singles) {
    if (arena_bytes == 0) return;
    owned_.push_back(Buffer(arena_bytes, device_));
    arena_ = static_cast<char*>(owned_.back().data());
    arena_left_ = arena_bytes;
}

TensorView WeightPlacer::single(const std::string& name) {
    if (!device_.is_cpu() || !map_singles_) return stacked({name});
    const TensorView w = files_.view(name);
    bytes_ += size_t(w.numel()) * dtype_size(w.dtype);
    mapped_bytes_ += size_t(w.numel()) * dtype_size(w.dtype);
    return w;
}

TensorView WeightPlacer::stacked(std::initializer_list<std::string> names) {
    std::vector<TensorView> parts;
    for (const std::string& name : names) parts.push_back(files_.view(name));
    TensorView all = parts.front();  // safetensors views are contiguous: only the row count changes
    all.shape[0] = 0;
    all.dtype = device_.is_cpu() ? parts.front().dtype : compute_dtype_;
    int64_t numel = 0;
    for (const TensorView& p : parts) {
        FP_CHECK(p.ndim == all.ndim && std::equal(p.shape.begin() + 1, p.shape.end(), parts.front().shape.begin() + 1),
                 "internal: stacking weights of shapes ", parts.front().describe(), " and ", p.describe());
        all.shape[0] += p.dim(0);
        numel += p.numel();
        if (device_.is_cpu() && p.dtype != all.dtype) all.dtype = DType::F32;
    }
    const size_t esize = dtype_size(all.dtype), bytes = size_t(numel) * esize;
    char* dst = nullptr;
    if (arena_) {
        const size_t take = (bytes + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        FP_CHECK(take <= arena_left_, "internal: the weights' buffer is ", arena_left_, " bytes short of ",
                 names.begin()[0], " (", take, " bytes)");
        dst = arena_;
        arena_ += take;
        arena_left_ -= take;
    } else {
        // Made here rather than by emplace_back, so FLASHPORT_MEMTRACE logs this line as the call site (not
        // the standard library's construct_at).
        owned_.push_back(Buffer(bytes, device_));
        dst = static_cast<char*>(owned_.back().data());
        if (device_.is_cpu()) advise_huge_pages(dst, bytes);
    }
    all.data = dst;
    auto name = names.begin();
    for (const TensorView& p : parts) {
        copy_as(dst, device_, all.dtype, p);
        files_.release(*name++);
        dst += size_t(p.numel()) * esize;
    }
    all.device = device_;
    bytes_ += bytes;
    return all;
}

}  // namespace flashport::engine
