#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Plots through gnuplot (Debian's gnuplot-nox): the caller writes the data and
// the plot commands, this writes the script and runs it; a missing or failing
// gnuplot is one clear Error. Used by the evaluation report and `comm fit --plot`.
#include <string>
#include <vector>

namespace scaledl {

/// A gnuplot string literal: double quotes, inner quotes and backslashes escaped.
std::string gp_quote(const std::string& s);

/// `lc rgb '#..'` of series i: distinct colours for up to 10 series (gnuplot's
/// default cycle has 8), then repeating.
std::string gp_colour(int i);

/// Writes DIR/STEM.<ext>.gp ("set terminal ..; set output DIR/STEM.<ext>" + body)
/// and runs gnuplot on it, once per format of `formats` ("png": pngcairo, "svg"),
/// 960x720. The script is removed after a successful run unless keep_script.
/// Throws naming the script and its log when gnuplot is missing or fails.
void run_gnuplot(const std::string& dir, const std::string& stem, const std::string& body,
                 const std::vector<std::string>& formats = {"png", "svg"}, bool keep_script = false);

}  // namespace scaledl
