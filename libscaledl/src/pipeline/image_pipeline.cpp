// Image input pipeline (pipeline.hpp): TurboJPEG decode, then torchvision's
// RandomResizedCrop + RandomHorizontalFlip + Normalize as one hand-written pass.
//
// Why hand-written and not LibTorch tensor ops: the stage stays free of LibTorch
// (like io and design); a per-image op on a [3, 224, 224] tensor pays ATen's
// dispatch and may start its intra-op thread pool, which would blur the
// per-worker-thread measurement; and one fused pass (bilinear taps, mirror, scale
// and shift) is what tuned loaders (DALI, FFCV) do. torchvision on PIL does the
// same arithmetic in PIL's C loops.
#include <turbojpeg.h>  // Debian libturbojpeg0-dev

#include <algorithm>
#include <cmath>

#include "scaledl/core/error.hpp"
#include "scaledl/pipeline/pipeline.hpp"

namespace scaledl {

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {
  SCALEDL_CHECK(handle_ != nullptr, "TurboJPEG: cannot create a decompressor: {}", tjGetErrorStr2(nullptr));
}

JpegDecoder::~JpegDecoder() {
  if (handle_) tjDestroy(static_cast<tjhandle>(handle_));
}

bool JpegDecoder::decode(const uint8_t* data, size_t size, RgbImage& out, std::string* why) {
  auto h = static_cast<tjhandle>(handle_);
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  if (size == 0 || size > (1ul << 31)) {
    if (why) *why = size == 0 ? "empty file" : "larger than 2 GiB";
    return false;
  }
  if (tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &w, &ht, &subsamp, &colorspace) != 0) {
    if (why) *why = tjGetErrorStr2(h);
    return false;
  }
  if (w < 1 || ht < 1 || static_cast<int64_t>(w) * ht > (int64_t{1} << 28)) {  // 268 Mpixel
    if (why) *why = fmt::format("implausible size {} x {}", w, ht);
    return false;
  }
  out.width = w;
  out.height = ht;
  out.pixels.resize(static_cast<size_t>(w) * ht * 3);
  // TJFLAG_STOPONWARNING: a truncated file ("Premature end of JPEG file") is a
  // failure, not a half-grey image.
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), out.pixels.data(), w, 0, ht, TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0) {
    if (why) *why = tjGetErrorStr2(h);
    return false;
  }
  return true;
}

CropBox random_resized_crop_box(int width, int height, std::mt19937_64& rng, double scale_lo, double scale_hi,
                                double ratio_lo, double ratio_hi) {
  SCALEDL_CHECK(width >= 1 && height >= 1, "random_resized_crop_box: empty image {} x {}", width, height);
  const double area = static_cast<double>(width) * height;
  std::uniform_real_distribution<double> u_scale(scale_lo, scale_hi);
  std::uniform_real_distribution<double> u_logr(std::log(ratio_lo), std::log(ratio_hi));
  for (int attempt = 0; attempt < 10; ++attempt) {  // torchvision RandomResizedCrop.get_params
    const double target = area * u_scale(rng);
    const double ratio = std::exp(u_logr(rng));
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int x = std::uniform_int_distribution<int>(0, width - w)(rng);
      const int y = std::uniform_int_distribution<int>(0, height - h)(rng);
      return {x, y, w, h};
    }
  }
  // Fallback: centre crop of the whole image at the nearest allowed ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio_lo) {
    h = static_cast<int>(std::lround(w / ratio_lo));
  } else if (in_ratio > ratio_hi) {
    w = static_cast<int>(std::lround(h * ratio_hi));
  }
  w = std::clamp(w, 1, width);
  h = std::clamp(h, 1, height);
  return {(width - w) / 2, (height - h) / 2, w, h};
}

void resize_flip_normalise(const RgbImage& img, const CropBox& box, int size, bool flip, float* out) {
  SCALEDL_CHECK(size >= 1, "image size {} must be >= 1", size);
  SCALEDL_CHECK(box.w >= 1 && box.h >= 1 && box.x >= 0 && box.y >= 0 && box.x + box.w <= img.width &&
                    box.y + box.h <= img.height,
                "crop box {}x{}+{}+{} is outside the {} x {} image", box.w, box.h, box.x, box.y, img.width,
                img.height);
  // Source coordinate of an output pixel centre (align_corners = False), clamped to the crop.
  struct Tap {
    int i0, i1;
    float w1;
  };
  auto taps = [&](int n_out, int start, int n_in) {
    std::vector<Tap> t(static_cast<size_t>(n_out));
    const double scale = static_cast<double>(n_in) / n_out;
    for (int d = 0; d < n_out; ++d) {
      double s = (d + 0.5) * scale - 0.5;
      s = std::clamp(s, 0.0, static_cast<double>(n_in - 1));
      const int i0 = static_cast<int>(s);
      const int i1 = std::min(i0 + 1, n_in - 1);
      t[static_cast<size_t>(d)] = {start + i0, start + i1, static_cast<float>(s - i0)};
    }
    return t;
  };
  const std::vector<Tap> tx = taps(size, box.x, box.w), ty = taps(size, box.y, box.h);
  float mul[3], add[3];  // (v / 255 - mean) / std = v * mul + add
  for (int c = 0; c < 3; ++c) {
    mul[c] = 1.0f / (255.0f * kImageNetStd[c]);
    add[c] = -kImageNetMean[c] / kImageNetStd[c];
  }
  const size_t plane = static_cast<size_t>(size) * size;
  const size_t stride = static_cast<size_t>(img.width) * 3;
  const uint8_t* px = img.pixels.data();
  for (int dy = 0; dy < size; ++dy) {
    const Tap& ry = ty[static_cast<size_t>(dy)];
    const uint8_t* r0 = px + static_cast<size_t>(ry.i0) * stride;
    const uint8_t* r1 = px + static_cast<size_t>(ry.i1) * stride;
    const float wy = ry.w1;
    float* o0 = out + static_cast<size_t>(dy) * size;
    for (int dx = 0; dx < size; ++dx) {
      const Tap& rx = tx[static_cast<size_t>(flip ? size - 1 - dx : dx)];
      const size_t a = static_cast<size_t>(rx.i0) * 3, b = static_cast<size_t>(rx.i1) * 3;
      const float wx = rx.w1;
      for (int c = 0; c < 3; ++c) {
        const float top = r0[a + c] + wx * (static_cast<float>(r0[b + c]) - r0[a + c]);
        const float bot = r1[a + c] + wx * (static_cast<float>(r1[b + c]) - r1[a + c]);
        const float v = top + wy * (bot - top);
        o0[c * plane + dx] = v * mul[c] + add[c];
      }
    }
  }
}

}  // namespace scaledl
