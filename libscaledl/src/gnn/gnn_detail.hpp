#pragma once
// Internals shared by the graph-model sources gnn_config.cpp and gnn_train.cpp (not a
// public header).
#include <initializer_list>
#include <string>

namespace scaledl::gnn_detail {

/// Error "KEY=V is not one of: A, B" unless `v` is one of `ok`.
void check_choice(const std::string& v, std::initializer_list<const char*> ok, const std::string& key);

}  // namespace scaledl::gnn_detail
