# The sampler and stop conditions (engine/sampler.{h,cpp}), added to the `flashport` library. Included
# from src/CMakeLists.txt; its own file so src/engine/CMakeLists.txt stays with the engine's owner.
target_sources(flashport PRIVATE engine/sampler.cpp)
