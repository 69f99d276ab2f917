// A program outside ScaleDL's tree that uses the installed library: the iteration time of a model
// config on a device, from a bundle (what `scaledl predict MODEL --bundle B --device-spec D` prints
// as T_iter). Built against an installed prefix by README.md and test/install/.
#include <cstdio>
#include <exception>

#include <scaledl/predict/bundle.hpp>
#include <scaledl/predict/predict_api.hpp>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BUNDLE_DIR MODEL.json DEVICE_SPEC.json\n", argv[0]);
    return 2;
  }
  try {
    scaledl::PredictRequest req;  // the defaults of `scaledl predict`: batch 8, seq 128, fp32, train
    req.bundle = argv[1];
    req.args.model = argv[2];
    req.device_spec = argv[3];
    req.check_inputs();
    req.check_ranges();
    const scaledl::DeviceRecord dev = scaledl::resolve_device(req);
    const scaledl::Bundle bundle = scaledl::load_predict_bundle(req, dev);
    const scaledl::SinglePrediction r = scaledl::predict_single(req, bundle, dev);
    std::printf("%s, batch %lld, seq %lld on %s\nT_iter %.3f ms\n", r.model.name.c_str(),
                static_cast<long long>(r.settings.batch), static_cast<long long>(r.settings.seq_len),
                dev.name.c_str(), r.p.t_iter_ms);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaledl: error: %s\n", e.what());
    return 1;
  }
}
