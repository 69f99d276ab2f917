#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Outputs that never destroy a user's files (no LibTorch).
//
// - StagingDir: a command that writes several files (layer models, a graph model with its
//   reports, a bundle) writes them into a temporary sibling and renames it into place only when
//   everything succeeded, so a failed or diverged run never leaves half an output or replaces a
//   good one; an existing output is replaced only when it is recognisably one of ours.
// - check_output_is_not_input: a command never writes over one of its own inputs.
// - Temporary paths are removed on failure and on SIGINT / SIGTERM.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace scaledl {

/// Removes `p` and, if it is a directory, everything under it (symbolic links themselves, never
/// what they point to); returns how many entries it removed, 0 when `p` does not exist. What
/// std::filesystem::remove_all does, with the C library's nftw and remove alone: PyTorch 2.11's
/// libtorch.so exports its own copy of std::filesystem, and binaries linked to it resolved
/// remove_all there, where removing a non-empty directory crashed (SIGSEGV, a null call) on the
/// GPU machine (docs/bench.md, "The GPU build"). scripts/format.sh --check refuses remove_all
/// anywhere else. The first form sets `ec` on failure, the second throws Error naming the path.
std::uintmax_t remove_tree(const std::filesystem::path& p, std::error_code& ec) noexcept;
std::uintmax_t remove_tree(const std::filesystem::path& p);

/// The files (paths relative to the directory, '/'-separated) that an existing output directory
/// of one kind owns, read from what it holds (its manifest). Throws Error, with the reason as its
/// message, when the directory is not recognisably such an output.
using OwnedFiles = std::function<std::set<std::string>(const std::string& dir)>;

/// The files of `dir` (relative, '/'-separated, sorted) that are not in `owned`: anything that is
/// neither an owned regular file nor a directory on the way to one (a symlink, a FIFO, a file the
/// output never wrote). Empty when `dir` holds only what `owned` names.
std::vector<std::string> foreign_entries(const std::string& dir, const std::set<std::string>& owned);

class StagingDir {
 public:
  /// Stages `out`: checks that `out` is absent, empty, or an output of the kind `kind` names
  /// whose every file `owned` claims (so replacing it cannot delete a user's files); then creates
  /// the temporary sibling `out.tmp-<pid>`, which is removed on failure and on SIGINT/SIGTERM.
  /// Throws Error naming `flag`=`out` and the first foreign file otherwise.
  StagingDir(const std::string& out, const OwnedFiles& owned, const std::string& kind,
             const std::string& flag = "--out");
  /// Removes the temporary directory unless commit() ran.
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  /// Where to write: the temporary directory.
  const std::string& path() const { return tmp_; }
  /// Moves the temporary directory to `out` (an existing `out` is renamed aside
  /// first and removed only after the new one is in place).
  void commit();

 private:
  std::string out_, tmp_;
  bool committed_ = false;
};

/// Owned files of a directory whose `manifest` (a JSON file in it) has "format": `format` and
/// lists its files: `list(manifest_json)` returns them (relative paths); the manifest itself is
/// owned too. The reader of layer-model and bundle directories.
OwnedFiles owned_by_manifest(const std::string& manifest, const std::string& format,
                             std::function<std::set<std::string>(const nlohmann::json& manifest)> list);

/// Refuses (Error naming both flags and paths) an output `out` (option `out_flag`) that is the
/// same file as one of `inputs` ({flag, path}): the same path, a symlink to it or a hard link.
/// An output that does not exist yet is never an input.
void check_output_is_not_input(const std::string& out, const std::string& out_flag,
                               const std::vector<std::pair<std::string, std::string>>& inputs);

/// What is at `p` (symbolic links followed), for a message about a file that is not a regular
/// one: "missing", "a regular file", "a directory", "a FIFO", "a socket", "a device".
std::string file_kind(const std::string& p);

/// Why `rel` is no path inside the folder `root` ("" when it is one): empty, absolute, with a
/// control character or a `..` component, or resolving (symbolic links followed) outside `root`
/// (`what` names the folder in that message: "the bundle"). A model file outside a bundle would
/// escape its checksums.
std::string path_outside(const std::string& root, const std::string& rel, const std::string& what);

/// Registers `path` (a file or directory) to be removed if the process is stopped by SIGINT or
/// SIGTERM before unregister_temp_path(path); installs the handlers on first use.
void register_temp_path(const std::string& path);
void unregister_temp_path(const std::string& path);

}  // namespace scaledl
