// Recursive-descent parser and tree evaluator for space expressions (expr.hpp).
#include "design/expr.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "scaledl/core/error.hpp"

namespace scaledl::design_detail {

struct Node {
  enum Op { Num, Str, Var, Neg, Not, Add, Sub, Mul, Div, Mod, Eq, Ne, Lt, Le, Gt, Ge, And, Or, Call } op;
  double num = 0;
  std::string str;  // string literal or function name
  int slot = -1;
  int depth = 1;  // height of the subtree (a leaf is 1)
  std::vector<std::unique_ptr<Node>> kids;
};

namespace {

// Parsing, evaluating and freeing a tree all recurse: bound both the parser's
// recursion (parentheses, function arguments, unary - and !) and the height of
// the tree (long chains such as 1+1+1+...), so that hostile text gives an Error
// instead of a stack overflow. Real constraints nest a handful of levels.
constexpr int kMaxNesting = 64;
constexpr int kMaxTreeDepth = 256;

class Parser {
 public:
  Parser(const std::string& s, const std::string& ctx, const std::function<int(const std::string&)>& slot_of,
         const std::string& known, std::vector<int>& used)
      : s_(s), ctx_(ctx), slot_of_(slot_of), known_(known), used_(used) {}

  std::unique_ptr<Node> parse() {
    auto n = parse_or();
    skip();
    if (i_ != s_.size()) err("unexpected '" + s_.substr(i_, 8) + "'");
    return n;
  }

 private:
  [[noreturn]] void err(const std::string& what) {
    fail("{}=\"{}\": {} at character {}", ctx_, shown(), what, i_ + 1);
  }
  /// The expression for messages, cut at 80 characters.
  std::string shown() const { return s_.size() <= 80 ? s_ : s_.substr(0, 77) + "..."; }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(const char* tok) {
    skip();
    size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(i_, n, tok) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }
  /// Sets n->depth from its children; Error when the tree gets too deep.
  std::unique_ptr<Node> sized(std::unique_ptr<Node> n) {
    for (auto& k : n->kids) n->depth = std::max(n->depth, k->depth + 1);
    if (n->depth > kMaxTreeDepth)
      err("expression is nested deeper than " + std::to_string(kMaxTreeDepth) + " operations");
    return n;
  }
  std::unique_ptr<Node> bin(Node::Op op, std::unique_ptr<Node> a, std::unique_ptr<Node> b) {
    auto n = std::make_unique<Node>();
    n->op = op;
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return sized(std::move(n));
  }
  /// Counts the parser's recursion depth (RAII).
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.nest_ > kMaxNesting)
        p_.err("parentheses, function calls and unary operators nested deeper than " +
               std::to_string(kMaxNesting));
    }
    ~Nest() { --p_.nest_; }
    Parser& p_;
  };
  std::unique_ptr<Node> parse_or() {
    auto a = parse_and();
    while (eat("||")) a = bin(Node::Or, std::move(a), parse_and());
    return a;
  }
  std::unique_ptr<Node> parse_and() {
    auto a = parse_cmp();
    while (eat("&&")) a = bin(Node::And, std::move(a), parse_cmp());
    return a;
  }
  std::unique_ptr<Node> parse_cmp() {
    auto a = parse_add();
    static const std::pair<const char*, Node::Op> ops[] = {{"==", Node::Eq}, {"!=", Node::Ne},
                                                           {"<=", Node::Le}, {">=", Node::Ge},
                                                           {"<", Node::Lt},  {">", Node::Gt}};
    for (auto& [tok, op] : ops)
      if (eat(tok)) return bin(op, std::move(a), parse_add());
    return a;
  }
  std::unique_ptr<Node> parse_add() {
    auto a = parse_mul();
    for (;;) {
      if (eat("+"))
        a = bin(Node::Add, std::move(a), parse_mul());
      else if (eat("-"))
        a = bin(Node::Sub, std::move(a), parse_mul());
      else
        return a;
    }
  }
  std::unique_ptr<Node> parse_mul() {
    auto a = parse_unary();
    for (;;) {
      if (eat("*"))
        a = bin(Node::Mul, std::move(a), parse_unary());
      else if (eat("/"))
        a = bin(Node::Div, std::move(a), parse_unary());
      else if (eat("%"))
        a = bin(Node::Mod, std::move(a), parse_unary());
      else
        return a;
    }
  }
  std::unique_ptr<Node> parse_unary() {
    Nest nest(*this);
    skip();
    if (i_ < s_.size() && s_[i_] == '!' && s_.compare(i_, 2, "!=") != 0) {
      ++i_;
      auto n = std::make_unique<Node>();
      n->op = Node::Not;
      n->kids.push_back(parse_unary());
      return sized(std::move(n));
    }
    if (eat("-")) {
      auto n = std::make_unique<Node>();
      n->op = Node::Neg;
      n->kids.push_back(parse_unary());
      return sized(std::move(n));
    }
    return parse_primary();
  }
  std::unique_ptr<Node> parse_primary() {
    skip();
    if (i_ >= s_.size()) err("expression ends early");
    char c = s_[i_];
    auto n = std::make_unique<Node>();
    if (c == '(') {
      ++i_;
      n = parse_or();
      if (!eat(")")) err("missing ')'");
      return n;
    }
    if (c == '\'') {
      size_t e = s_.find('\'', i_ + 1);
      if (e == std::string::npos) err("unterminated string");
      n->op = Node::Str;
      n->str = s_.substr(i_ + 1, e - i_ - 1);
      i_ = e + 1;
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      try {
        n->num = std::stod(s_.substr(i_), &used);
      } catch (...) {
        err("bad number");
      }
      n->op = Node::Num;
      i_ += used;
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i_;
      while (i_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.'))
        ++i_;
      std::string name = s_.substr(b, i_ - b);
      if (eat("(")) {
        static const char* fns[] = {"min", "max", "log2", "sqrt", "floor", "ceil"};
        bool ok = false;
        for (const char* f : fns) ok |= name == f;
        if (!ok) err("unknown function '" + name + "' (known: min, max, log2, sqrt, floor, ceil)");
        n->op = Node::Call;
        n->str = name;
        if (!eat(")")) {
          do n->kids.push_back(parse_or());
          while (eat(","));
          if (!eat(")")) err("missing ')' after arguments of " + name);
        }
        size_t want = (name == "min" || name == "max") ? 2 : 1;
        if (n->kids.size() != want) err(name + " takes " + std::to_string(want) + " argument(s)");
        return sized(std::move(n));
      }
      int slot = slot_of_(name);
      if (slot < 0) fail("{}=\"{}\": unknown name '{}' (known: {})", ctx_, shown(), name, known_);
      n->op = Node::Var;
      n->slot = slot;
      used_.push_back(slot);
      return n;
    }
    err(std::string("unexpected '") + c + "'");
  }

  const std::string& s_;
  const std::string& ctx_;
  const std::function<int(const std::string&)>& slot_of_;
  const std::string& known_;
  std::vector<int>& used_;
  size_t i_ = 0;
  int nest_ = 0;
};

Value num(double x) {
  Value v;
  v.valid = true;
  v.num = x;
  return v;
}

Value eval_node(const Node& n, const std::vector<Value>& slots, const std::string& text) {
  switch (n.op) {
    case Node::Num:
      return num(n.num);
    case Node::Str: {
      Value v;
      v.valid = v.is_str = true;
      v.str = n.str;
      return v;
    }
    case Node::Var:
      return slots[n.slot];
    default:
      break;
  }
  std::vector<Value> a;
  for (auto& k : n.kids) {
    a.push_back(eval_node(*k, slots, text));
    if (!a.back().valid) return a.back();
  }
  auto need_num = [&](const Value& v) {
    SCALEDL_CHECK(!v.is_str, "expression \"{}\": '{}' is a string where a number is needed", text, v.str);
    return v.num;
  };
  switch (n.op) {
    case Node::Neg:
      return num(-need_num(a[0]));
    case Node::Not:
      return num(need_num(a[0]) == 0 ? 1 : 0);
    case Node::Add:
      return num(need_num(a[0]) + need_num(a[1]));
    case Node::Sub:
      return num(need_num(a[0]) - need_num(a[1]));
    case Node::Mul:
      return num(need_num(a[0]) * need_num(a[1]));
    case Node::Div:
      return num(need_num(a[0]) / need_num(a[1]));
    case Node::Mod: {
      double d = need_num(a[1]);
      return num(d == 0 ? NAN : std::fmod(need_num(a[0]), d));
    }
    case Node::Eq:
    case Node::Ne: {
      bool eq = a[0].is_str || a[1].is_str ? (a[0].is_str == a[1].is_str && a[0].str == a[1].str)
                                           : a[0].num == a[1].num;
      return num((n.op == Node::Eq) == eq ? 1 : 0);
    }
    case Node::Lt:
      return num(need_num(a[0]) < need_num(a[1]));
    case Node::Le:
      return num(need_num(a[0]) <= need_num(a[1]));
    case Node::Gt:
      return num(need_num(a[0]) > need_num(a[1]));
    case Node::Ge:
      return num(need_num(a[0]) >= need_num(a[1]));
    case Node::And:
      return num(need_num(a[0]) != 0 && need_num(a[1]) != 0);
    case Node::Or:
      return num(need_num(a[0]) != 0 || need_num(a[1]) != 0);
    case Node::Call: {
      double x = need_num(a[0]);
      if (n.str == "min") return num(std::min(x, need_num(a[1])));
      if (n.str == "max") return num(std::max(x, need_num(a[1])));
      if (n.str == "log2") return num(std::log2(x));
      if (n.str == "sqrt") return num(std::sqrt(x));
      if (n.str == "floor") return num(std::floor(x));
      return num(std::ceil(x));
    }
    default:
      return num(NAN);
  }
}

}  // namespace

Expr::Expr(const std::string& text, const std::string& ctx,
           const std::function<int(const std::string&)>& slot_of, const std::string& known)
    : text_(text) {
  Parser p(text_, ctx, slot_of, known, used_);
  root_ = p.parse();
}
Expr::Expr() = default;
Expr::~Expr() = default;
Expr::Expr(Expr&&) noexcept = default;
Expr& Expr::operator=(Expr&&) noexcept = default;

Value Expr::eval(const std::vector<Value>& slots) const {
  return eval_node(*root_, slots, text_);
}

}  // namespace scaledl::design_detail
