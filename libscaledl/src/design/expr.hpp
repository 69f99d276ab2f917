#pragma once
// A small expression language for space constraints and derived values:
//   numbers, 'strings', names (parameters, derived values; dots allowed),
//   + - * / % (integer remainder), comparisons == != < <= > >=, && || !,
//   parentheses and the functions min(a,b), max(a,b), log2(x), sqrt(x), floor(x), ceil(x).
// Compiled once to a tree, evaluated per candidate; names resolve to slots.
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace scaledl::design_detail {

struct Value {
  bool is_str = false;
  bool valid = false;  ///< false: the name is inactive for this candidate
  double num = 0;
  std::string str;
};

struct Node;

class Expr {
 public:
  /// Parses `text`; `slot_of(name)` returns a slot index or -1 (unknown name =>
  /// Error naming `ctx`, the name and the known names in `known`).
  Expr(const std::string& text, const std::string& ctx, const std::function<int(const std::string&)>& slot_of,
       const std::string& known);
  Expr();  ///< empty placeholder (memory constraints); never evaluated
  ~Expr();
  Expr(Expr&&) noexcept;
  Expr& operator=(Expr&&) noexcept;
  /// Evaluates with slot values; result.valid is false when an inactive slot was used.
  Value eval(const std::vector<Value>& slots) const;
  const std::string& text() const { return text_; }
  /// Slots the expression reads.
  const std::vector<int>& slots() const { return used_; }

 private:
  std::string text_;
  std::unique_ptr<Node> root_;
  std::vector<int> used_;
};

}  // namespace scaledl::design_detail
