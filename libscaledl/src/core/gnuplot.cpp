// gnuplot runner shared by the plots of the library (gnuplot.hpp).
#include "scaledl/core/gnuplot.hpp"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace fs = std::filesystem;

namespace scaledl {

std::string gp_quote(const std::string& s) {
  std::string o;
  for (char ch : s) o += (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
  return "\"" + o + "\"";
}

std::string gp_colour(int i) {
  static const char* c[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return fmt::format("lc rgb '{}'", c[((i % 10) + 10) % 10]);
}

void run_gnuplot(const std::string& dir_, const std::string& stem, const std::string& body,
                 const std::vector<std::string>& formats, bool keep_script) {
  const fs::path dir(dir_);
  for (const auto& ext : formats) {
    std::string term;
    if (ext == "png")
      term = "pngcairo noenhanced size 960,720 font 'Sans,11'";
    else if (ext == "svg")
      term = "svg noenhanced size 960,720 font 'Sans,11'";
    else
      fail("plot format {} is not png or svg", ext);
    const fs::path gp = dir / (stem + "." + ext + ".gp");
    const fs::path log = dir / (stem + ".gnuplot.log");
    write_text_file_atomic(gp.string(), fmt::format("set terminal {}\nset output {}\n{}", term,
                                                    gp_quote((dir / (stem + "." + ext)).string()), body));
    const std::string cmd = fmt::format("gnuplot {} 2>{}", gp_quote(gp.string()), gp_quote(log.string()));
    const int rc = std::system(cmd.c_str());
    SCALEDL_CHECK(rc == 0, "gnuplot failed on {} (exit {}; see {}; is gnuplot-nox installed?)", gp.string(),
                  rc, log.string());
    if (!keep_script) fs::remove(gp);
    fs::remove(log);
  }
}

}  // namespace scaledl
