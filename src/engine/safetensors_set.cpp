// A model folder's weights: one file, or the shards named by model.safetensors.index.json.
//
// The index is {"metadata": {...}, "weight_map": {"tensor name": "shard file name", ...}}. It is
// checked like a header: strict JSON, weight_map an object of strings, every shard inside the
// folder and present, and every tensor really in the shard the map names. Tensors a shard holds
// but the map does not list are not reachable, as in transformers, which loads by the map.
#include <sstream>

#include "flashport/error.h"
#include "json_strict.h"
#include "safetensors.h"

namespace flashport::engine {
namespace fs = std::filesystem;

namespace {

constexpr const char* INDEX_NAME = "model.safetensors.index.json";
constexpr const char* SINGLE_NAME = "model.safetensors";

// Shard names come from an untrusted file: keep them inside the model folder.
void check_shard_name(const std::string& shard, const std::string& tensor, const std::string& source) {
    const fs::path p(shard);
    FP_CHECK(!shard.empty() && !p.is_absolute(), source, ": weight_map[\"", excerpt(tensor), "\"] = \"", excerpt(shard),
             "\" must be a file name relative to the model folder");
    for (const auto& part : p)
        FP_CHECK(part != "..", source, ": weight_map[\"", excerpt(tensor), "\"] = \"", excerpt(shard),
                 "\" leaves the model folder");
}

}  // namespace

SafetensorsSet SafetensorsSet::open(const fs::path& path) {
    fs::path file = path;
    if (fs::is_directory(path)) {
        if (fs::exists(path / INDEX_NAME))
            file = path / INDEX_NAME;
        else if (fs::exists(path / SINGLE_NAME))
            file = path / SINGLE_NAME;
        else
            fail(path.string(), ": no ", SINGLE_NAME, " or ", INDEX_NAME, " in this folder");
    }
    FP_CHECK(fs::exists(file), file.string(), ": no such file");

    SafetensorsSet set;
    if (file.extension() != ".json") {
        set.files_.emplace_back(file);
        for (const TensorInfo& t : set.files_[0].tensors()) set.where_.emplace(t.name, 0);
        set.source_ = file.string();
        return set;
    }

    const std::string source = file.string();
    const nlohmann::json index = parse_json_strict(read_text_file(file), source);
    FP_CHECK(index.is_object(), source, ": expected a JSON object, got ", json_type_name(index));
    if (index.contains("metadata"))
        FP_CHECK(index["metadata"].is_object() || index["metadata"].is_null(), source,
                 ": metadata must be an object, got ", json_type_name(index["metadata"]));
    FP_CHECK(index.contains("weight_map"), source, ": missing \"weight_map\"");
    const nlohmann::json& map = index["weight_map"];
    FP_CHECK(map.is_object(), source, ": weight_map must be an object, got ", json_type_name(map));
    FP_CHECK(!map.empty(), source, ": weight_map is empty");

    // Open each shard once, when the first tensor (in name order) that lives there is reached.
    std::map<std::string, size_t> shard_index;
    std::vector<std::string> shard_names;
    for (const auto& [tensor, shard_json] : map.items()) {
        FP_CHECK(shard_json.is_string(), source, ": weight_map[\"", excerpt(tensor), "\"] must be a file name, got ",
                 json_type_name(shard_json));
        const std::string shard = shard_json.get<std::string>();
        check_shard_name(shard, tensor, source);
        auto it = shard_index.find(shard);
        if (it == shard_index.end()) {
            const fs::path shard_path = file.parent_path() / shard;
            FP_CHECK(fs::exists(shard_path), source, ": weight_map maps '", tensor, "' to ", shard,
                     ", which does not exist in ", file.parent_path().string());
            set.files_.emplace_back(shard_path);
            it = shard_index.emplace(shard, set.files_.size() - 1).first;
            shard_names.push_back(shard);
        }
        FP_CHECK(set.files_[it->second].contains(tensor), source, ": weight_map maps '", tensor, "' to ", shard,
                 ", but that file does not hold it");
        set.where_.emplace(tensor, it->second);
    }

    std::ostringstream os;
    os << source << " (" << shard_names.size() << " shard" << (shard_names.size() == 1 ? "" : "s") << ": ";
    for (size_t i = 0; i < shard_names.size() && i < 4; ++i) os << (i ? ", " : "") << shard_names[i];
    if (shard_names.size() > 4) os << ", ...";
    os << ")";
    set.source_ = os.str();
    return set;
}

const TensorInfo* SafetensorsSet::find(std::string_view name) const {
    const auto it = where_.find(name);
    return it == where_.end() ? nullptr : files_[it->second].find(name);
}

const SafetensorsFile& SafetensorsSet::file_of(std::string_view name) const {
    const auto it = where_.find(name);
    FP_CHECK(it != where_.end(), "tensor '", name, "' not found in ", source_);
    return files_[it->second];
}

const TensorInfo& SafetensorsSet::info(std::string_view name) const {
    return *file_of(name).find(name);
}
TensorView SafetensorsSet::view(std::string_view name) const {
    return file_of(name).view(name);
}
std::span<const std::byte> SafetensorsSet::bytes(std::string_view name) const {
    return file_of(name).bytes(name);
}
void SafetensorsSet::release(std::string_view name) const {
    file_of(name).release(name);
}

std::vector<std::string> SafetensorsSet::names() const {
    std::vector<std::string> out;
    out.reserve(where_.size());
    for (const auto& [name, _] : where_) out.push_back(name);
    return out;
}

}  // namespace flashport::engine
