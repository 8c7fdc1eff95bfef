// The translation unit the precompiled header is built from (sim/CMakeLists.txt).
