// Device specs and records (io/device.cpp): `scaledl probe --spec` /
// `predict --device-spec` files, in our own format or NeuSight's device_configs.
#include "fuzz_util.hpp"
#include "scaledl/device.hpp"
#include "scaledl/json_util.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("device.json", data, size);
  fuzz::guarded([&] {
    const DeviceRecord d = load_device_spec(path);
    (void)d.features();
    (void)d.key();
    // Invariant: the record as the store keeps it (to_json) reads back.
    const json stored = d.to_json();
    if (!fuzz::guarded([&] { (void)DeviceRecord::from_json(parse_json_text(stored.dump(), "stored"), "stored"); }))
      fuzz::bug("DeviceRecord::from_json(load_device_spec(x).to_json()) threw: " + stored.dump().substr(0, 2000));
  });
  return 0;
}
