#pragma once
// cocod version, kept in step with project(VERSION) in CMakeLists.txt.
#define COCOD_VERSION_MAJOR 0
#define COCOD_VERSION_MINOR 1
#define COCOD_VERSION_PATCH 0
/// "MAJOR.MINOR.PATCH".
#define COCOD_VERSION_STRING "0.1.0"

namespace cocod {
inline constexpr int version_major = COCOD_VERSION_MAJOR;
inline constexpr int version_minor = COCOD_VERSION_MINOR;
inline constexpr int version_patch = COCOD_VERSION_PATCH;
inline constexpr const char* version_string = COCOD_VERSION_STRING;
}  // namespace cocod
