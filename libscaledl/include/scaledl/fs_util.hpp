#pragma once
// All-or-nothing output directories: a command that writes several files
// (layer models, a graph model with its reports, a bundle) writes them into a
// temporary sibling and renames it into place only when everything succeeded,
// so a failed or diverged run never leaves half an output or replaces a good one.
#include <string>
#include <vector>

namespace scaledl {

class StagingDir {
 public:
  /// Stages `out`: checks that `out` is absent, empty, or an output of the kind
  /// `kind` names (it holds one of `marker_files`, e.g. "manifest.json"), so that
  /// replacing it cannot delete a user's unrelated files; then creates the
  /// temporary sibling `out.tmp-<pid>`. Throws Error naming `flag`=`out` otherwise.
  StagingDir(const std::string& out, const std::vector<std::string>& marker_files, const std::string& kind,
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

}  // namespace scaledl
