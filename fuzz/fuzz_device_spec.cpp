// Device specs and records (io/device.cpp): `scaledl probe --spec` /
// `predict --device-spec` files, in our own format or NeuSight's device_configs.
#include "fuzz_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("device.json", data, size);
  // The compute capability parser on the first bytes as text ("8.9", or anything else: 0).
  (void)compute_capability_of(std::string(reinterpret_cast<const char*>(data), size < 16 ? size : 16));
  fuzz::guarded([&] {
    const DeviceRecord d = load_device_spec(path);
    (void)d.features();
    (void)d.key();
    (void)d.compute_capability();  // extra.compute_capability, any JSON kind
    // Invariant: the record as the store keeps it (to_json) reads back.
    const json stored = d.to_json();
    if (!fuzz::guarded(
            [&] { (void)DeviceRecord::from_json(parse_json_text(stored.dump(), "stored"), "stored"); }))
      fuzz::bug("DeviceRecord::from_json(load_device_spec(x).to_json()) threw: " +
                stored.dump().substr(0, 2000));
  });
  return 0;
}
