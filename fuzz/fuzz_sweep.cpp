// The rows of many configurations (predict/sweep.cpp) as `scaledl predict` reads them: the first
// byte picks the form, the rest is its text.
//   0: --sweep arguments, one per line -> sweep_space, and the variants it makes (first, last,
//      and a few between: the index space is never walked whole);
//   1: a --csv file -> csv_variants_text; 2: an --anchor file (measured_ms required).
// Invariants: the space's size is the product of its lists (at most 10,000,000); every variant
// carries one value per list, taken from it; a CSV variant has a model and only known keys, and
// an anchor has one measured time (> 0, finite) per variant.
#include <algorithm>
#include <cmath>

#include "fuzz_util.hpp"
#include "scaledl/predict/sweep.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int form = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (form == 0) {
    fuzz::guarded([&] {
      std::vector<std::string> sweeps;
      for (size_t a = 0; a <= text.size();) {
        size_t b = text.find('\n', a);
        if (b == std::string::npos) b = text.size();
        sweeps.push_back(text.substr(a, b - a));
        a = b + 1;
      }
      const SweepSpace sp = sweep_space("model.json", sweeps);
      const size_t n = sp.size();
      if (n < 1 || n > 10'000'000) fuzz::bug("sweep_space: size out of range");
      for (size_t i : {size_t{0}, n / 3, n / 2, n - 1}) {
        const Variant v = sp.at(i);
        if (v.kv.size() != sp.axes.size()) fuzz::bug("SweepSpace::at: one value per list");
        for (size_t k = 0; k < v.kv.size(); ++k) {
          const auto& vals = sp.axes[k].second;
          if (v.kv[k].first != sp.axes[k].first ||
              std::find(vals.begin(), vals.end(), v.kv[k].second) == vals.end())
            fuzz::bug("SweepSpace::at: a value not in its list");
        }
      }
    });
    return 0;
  }
  const std::string path = fuzz::write_file("rows.csv", text);
  fuzz::guarded([&] {
    std::vector<double> ms;
    const auto vars = csv_variants(path, form == 1 ? "--csv" : "--anchor", "", form == 2 ? &ms : nullptr);
    if (form == 2 && ms.size() != vars.size()) fuzz::bug("csv_variants: one measured time per variant");
    for (double t : ms)
      if (!(t > 0) || !std::isfinite(t)) fuzz::bug("csv_variants: a measured time not > 0");
    for (const auto& v : vars) {
      if (v.model.empty()) fuzz::bug("csv_variants: a variant without a model");
      for (const auto& [k, val] : v.kv) check_sweep_key(k, "fuzz");
    }
  });
  return 0;
}
