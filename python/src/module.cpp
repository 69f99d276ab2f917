// scaledl._core: the native half of the `scaledl` Python module (issue #43, docs/python.md).
// A loaded bundle, and predictions, sweeps and layer graphs through the library's predict API
// (scaledl/predict/predict_api.hpp), in the order and with the checks of `scaledl predict`
// (tools/cmd_predict.cpp). The options arrive as the CLI's own tokens ("--batch=8") and are
// parsed by CLI11 with the CLI's flags, so values are checked, converted and refused with the
// same one-line messages. python/scaledl/__init__.py turns keyword arguments into those tokens.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"     // tools/: refuse_integer_overflow
#include "model_args.hpp"     // tools/: the model and settings flags of inspect, predict, scale
#include "pipeline_args.hpp"  // tools/: --pipeline, --workers, --vcpus, --input
#include "predict_args.hpp"   // tools/: the request flags of predict
#include "scaledl/core/error.hpp"
#include "scaledl/core/message.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/predict_api.hpp"

namespace py = pybind11;

namespace {

// ---- errors: scaledl.Error with the CLI's one line ---------------------------------------------

/// Raised as scaledl.Error (a ValueError); the message is what `scaledl` prints after
/// "scaledl: error: ".
struct PyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using scaledl::first_line;
using scaledl::one_line;  // tools/main.cpp's one line

/// Runs `f`, turning every failure into the message tools/main.cpp prints for it.
template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const CLI::ParseError& e) {
    std::string what = first_line(e.what());
    if (what.empty()) what = e.get_name();
    throw PyError(one_line(what) + " (see --help)");
  } catch (const scaledl::Error& e) {
    throw PyError(one_line(e.what()));
  } catch (const std::bad_alloc&) {
    throw;  // MemoryError
  } catch (const PyError&) {
    throw;
  } catch (const std::exception& e) {
    throw PyError(one_line(first_line(e.what())));
  }
}

// ---- options: the flags of `scaledl predict` ----------------------------------------------------

struct PredictOptions {
  scaledl::cli::ModelArgs args;
  scaledl::PredictRequest req;
  scaledl::cli::PipelineArgs input;
};

/// The flags of tools/cmd_predict.cpp but --json and --timing (a result always has both): the CLI's
/// own ModelArgs, PipelineArgs and add_request_options (python/tests/test_cli_parity.py checks
/// that `scaledl predict --help` names no flag this lacks).
void add_predict_options(CLI::App& app, PredictOptions& o) {
  o.args.add_to(app, /*model_required=*/false);
  o.input.add_to(app);
  scaledl::cli::add_request_options(app, o.req);
}

/// Parses `tokens` (in order, as after `scaledl predict` on a command line) with `app`'s checks.
void parse_tokens(CLI::App& app, const std::vector<std::string>& tokens) {
  std::vector<std::string> reversed(tokens.rbegin(), tokens.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
    throw;
  } catch (const std::exception& e) {  // a flag's own conversion (CLI11 lets std::invalid_argument through)
    throw PyError("a flag's value could not be read: " + one_line(first_line(e.what())) + " (see --help)");
  }
}

/// The same, adding the CLI's integer-range checks first.
void parse_into(CLI::App& app, const std::vector<std::string>& tokens) {
  scaledl::cli::refuse_integer_overflow(app);
  parse_tokens(app, tokens);
}

/// `scaledl predict`'s parser, one per thread and built once: building CLI11's options and checks
/// took about a tenth of a warm prediction. Before each parse its options' variables are set back
/// to what they held when the parser was built and its parse state is cleared.
struct PredictParser {
  PredictOptions o, defaults;
  CLI::App app{"predict"};
  PredictParser() {
    add_predict_options(app, o);
    scaledl::cli::refuse_integer_overflow(app);
    defaults = o;
  }
};

std::unique_ptr<PredictOptions> parse_predict(const std::vector<std::string>& tokens) {
  thread_local PredictParser p;
  p.o = p.defaults;
  p.app.clear();
  parse_tokens(p.app, tokens);
  auto o = std::make_unique<PredictOptions>(p.o);
  o->req.args = o->args;
  return o;
}

std::vector<std::string> predict_flags() {
  PredictOptions o;
  CLI::App app{"predict"};
  add_predict_options(app, o);
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& n : opt->get_lnames()) out.push_back("--" + n);
  return out;
}

// ---- JSON to Python ------------------------------------------------------------------------------

/// nlohmann JSON as Python objects; a non-finite number is None, as in the CLI's JSON (null).
py::object to_py(const nlohmann::json& j) {
  using T = nlohmann::json::value_t;
  switch (j.type()) {
    case T::null:
      return py::none();
    case T::boolean:
      return py::bool_(j.get<bool>());
    case T::number_integer:
      return py::int_(j.get<int64_t>());
    case T::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case T::number_float: {
      const double v = j.get<double>();
      return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none());
    }
    case T::string:
      return py::str(j.get_ref<const std::string&>());
    case T::array: {
      py::list l(j.size());
      size_t i = 0;
      for (const auto& e : j) l[i++] = to_py(e);
      return std::move(l);
    }
    case T::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = to_py(it.value());
      return std::move(d);
    }
    default:
      return py::none();
  }
}

// ---- results -------------------------------------------------------------------------------------

/// One prediction: its JSON (what `--json` prints), warnings, and its text report on demand.
struct Result {
  nlohmann::json json;
  std::vector<std::string> warnings;
  std::shared_ptr<const scaledl::Bundle> bundle;
  std::variant<std::monostate, scaledl::SinglePrediction, scaledl::ParallelSingle> pred;

  std::string report() const {
    std::ostringstream out;
    if (const auto* s = std::get_if<scaledl::SinglePrediction>(&pred))
      s->write_report(out, *bundle);
    else if (const auto* p = std::get_if<scaledl::ParallelSingle>(&pred))
      p->write_report(out);
    return out.str();
  }
};

struct Rows {
  std::vector<nlohmann::json> rows;
  std::vector<std::string> warnings;
  size_t total = 0;
};

// ---- the bundle ----------------------------------------------------------------------------------

/// A loaded bundle with the options that shaped it (load_predict_bundle: --bundle, --layers, --graph,
/// --comm, --anchor, --host-node-us, --calibrate and the device it calibrates).
class NativeBundle {
 public:
  NativeBundle(const std::vector<std::string>& tokens, bool memo) : memo_(memo) {
    guarded([&] {
      base_ = parse_predict(tokens);
      const scaledl::PredictRequest& req = base_->req;
      req.check_ranges();
      std::optional<scaledl::DeviceRecord> dev;
      if (!req.calibrate.empty()) dev = scaledl::default_device(req);
      bundle_ = std::make_shared<const scaledl::Bundle>(scaledl::load_predict_bundle(req, dev));
      concurrent_ = memo_ && bundle_->layers.concurrent_predict();
      return 0;
    });
  }

  /// One configuration: `scaledl predict MODEL ... --json` (on --gpus N with the parallel flags).
  Result predict(const std::vector<std::string>& tokens) {
    return guarded([&] {
      const std::unique_ptr<PredictOptions> o = request(tokens);
      const scaledl::PredictRequest& req = o->req;
      SCALEDL_CHECK(!req.many(),
                    "predict(): one configuration; Bundle.sweep() predicts many (--sweep, --csv)");
      Guard lock(*this);
      const std::optional<scaledl::DeviceRecord> dflt = scaledl::default_device(req);
      Result r;
      r.bundle = bundle_;
      if (std::string w = scaledl::stale_rates_warning(*bundle_, dflt); !w.empty())
        r.warnings.push_back(std::move(w));
      if (req.par_given) {  // tools/cmd_predict.cpp run_parallel
        req.check_parallel();
        scaledl::ParallelSingle p = scaledl::predict_parallel_single(req, *bundle_, *dflt);
        const auto input = o->input.apply(p.r.t_iter_ms, p.model, p.settings,
                                          static_cast<double>(p.settings.batch) * p.r.plan.dp / p.par.nodes);
        if (input) {
          input->add_to(p.input);
          p.input_text = input->text();
        }
        r.json = p.to_json();
        r.pred = std::move(p);
      } else {  // run_single
        scaledl::SinglePrediction s = scaledl::predict_single(req, *bundle_, *dflt);
        const auto input = o->input.apply(s.p, s.model, s.settings,
                                          static_cast<double>(s.settings.batch * s.settings.num_devices));
        if (input) {
          input->add_to(s.input);
          s.input_text = input->text();
        }
        r.json = s.to_json(*bundle_);
        r.pred = std::move(s);
      }
      return r;
    });
  }

  /// Many configurations: `scaledl predict ... --sweep K=V,... | --csv FILE --json`, every row.
  Rows sweep(const std::vector<std::string>& tokens) {
    return guarded([&] {
      const std::unique_ptr<PredictOptions> o = request(tokens);
      const scaledl::PredictRequest& req = o->req;
      SCALEDL_CHECK(req.many(), "sweep(): give a list of values (a --sweep) or csv= (a --csv)");
      Guard lock(*this);
      const std::optional<scaledl::DeviceRecord> dflt = scaledl::default_device(req);
      if (req.par_given) req.check_parallel();  // the CLI's message: one configuration at a time
      Rows out;
      if (std::string w = scaledl::stale_rates_warning(*bundle_, dflt); !w.empty())
        out.warnings.push_back(std::move(w));
      const scaledl::SweepStats st =
          scaledl::predict_sweep(req, *bundle_, dflt, [&](const std::vector<scaledl::PredictRow>& rows) {
            for (const scaledl::PredictRow& row : rows) out.rows.push_back(row.to_json());
          });
      out.total = st.total;
      return out;
    });
  }

  bool concurrent() const { return concurrent_; }
  bool memo() const { return memo_; }
  const nlohmann::json& manifest() const { return bundle_->manifest; }

 private:
  /// Holds the bundle's lock while it predicts, unless every layer model predicts through compiled
  /// trees (LayerPredictor::concurrent_predict): then predictions run at once on several threads.
  /// Without the memo, empties the bounds' memo first (under the lock): each prediction is then
  /// computed as a lone `scaledl predict` computes it, bit for bit.
  struct Guard {
    explicit Guard(NativeBundle& b) : lock(b.mu_, std::defer_lock) {
      if (!b.concurrent_) lock.lock();
      if (!b.memo_) {
        std::lock_guard<std::mutex> m(b.bundle_->bounds_memo->mu);
        b.bundle_->bounds_memo->values.clear();
      }
    }
    std::unique_lock<std::mutex> lock;
  };

  /// The call's options over the bundle's: what load_predict_bundle read is the bundle's, always;
  /// the checks of `scaledl predict` before it loads the bundle, in its order.
  std::unique_ptr<PredictOptions> request(const std::vector<std::string>& tokens) const {
    std::unique_ptr<PredictOptions> o = parse_predict(tokens);
    scaledl::PredictRequest& req = o->req;
    const scaledl::PredictRequest& b = base_->req;
    req.bundle = b.bundle;
    req.layers = b.layers;
    req.graph = b.graph;
    req.comm = b.comm;
    req.anchor = b.anchor;
    req.host_node_us = b.host_node_us;
    req.calibrate = b.calibrate;
    req.check_inputs();
    SCALEDL_CHECK(!req.many() || !o->input.given(),
                  "--pipeline/--workers/--vcpus/--input: one configuration at a time");
    o->input.check();
    req.check_ranges();
    return o;
  }

  std::unique_ptr<PredictOptions> base_;
  std::shared_ptr<const scaledl::Bundle> bundle_;
  bool memo_ = true;  ///< keep Bundle::bounds_memo across predictions (false: as a lone CLI run)
  bool concurrent_ = false;
  std::mutex mu_;
};

/// `scaledl inspect MODEL --json`: the layer graph of one iteration.
nlohmann::json inspect(const std::vector<std::string>& tokens) {
  return guarded([&] {
    scaledl::cli::ModelArgs args;
    CLI::App app{"inspect"};
    args.add_to(app);
    parse_into(app, tokens);
    auto [m, s] = args.load();
    return scaledl::build_layer_graph(m, s).to_json();
  });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "scaledl's native part: use the `scaledl` package (docs/python.md)";
  py::register_exception<PyError>(m, "Error", PyExc_ValueError);

  py::class_<Result, std::shared_ptr<Result>>(m, "Result")
      .def("to_dict", [](const Result& r) { return to_py(r.json); })
      .def_readonly("warnings", &Result::warnings)
      .def("report", [](const Result& r) {
        std::string text;
        {
          py::gil_scoped_release nogil;
          text = guarded([&] { return r.report(); });
        }
        return text;
      });

  py::class_<NativeBundle, std::shared_ptr<NativeBundle>>(m, "Bundle")
      .def(py::init<const std::vector<std::string>&, bool>(), py::arg("tokens"), py::arg("memo") = true,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "predict",
          [](NativeBundle& b, const std::vector<std::string>& tokens) {
            std::shared_ptr<Result> r;
            {
              py::gil_scoped_release nogil;
              r = std::make_shared<Result>(b.predict(tokens));
            }
            return r;
          },
          py::arg("tokens"))
      .def(
          "sweep",
          [](NativeBundle& b, const std::vector<std::string>& tokens) {
            Rows rows;
            {
              py::gil_scoped_release nogil;
              rows = b.sweep(tokens);
            }
            py::list out(rows.rows.size());
            for (size_t i = 0; i < rows.rows.size(); ++i) out[i] = to_py(rows.rows[i]);
            return py::make_tuple(out, rows.warnings);
          },
          py::arg("tokens"))
      .def_property_readonly("concurrent", &NativeBundle::concurrent)
      .def_property_readonly("memo", &NativeBundle::memo)
      .def_property_readonly("manifest", [](const NativeBundle& b) { return to_py(b.manifest()); });

  m.def(
      "inspect",
      [](const std::vector<std::string>& tokens) {
        nlohmann::json j;
        {
          py::gil_scoped_release nogil;
          j = inspect(tokens);
        }
        return to_py(j);
      },
      py::arg("tokens"));
  m.def("predict_flags", &predict_flags, "the long flags predict() and sweep() parse, as the CLI names them");
}
