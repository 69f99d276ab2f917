#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// What built this binary: the source commit (12 hex digits, "-dirty" when the
// work tree had uncommitted changes to tracked files, "unknown" outside git)
// and the project version, baked in at configure time (cmake/ScaleDLBuildInfo.cmake).
namespace scaledl {
const char* build_commit();
const char* build_version();
}  // namespace scaledl
