#include "data/jpeg_decode.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <memory>

#include "core/error.h"
#include "data/image_decode.h"

namespace st {
namespace {

struct ErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorMgr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Corrupt-data warnings arrive with level -1. Running out of data is fatal: libjpeg would
// fill the rest with gray, and PIL refuses such files too. Other warnings (extraneous
// bytes before a marker, which a few ImageNet files have) are ignored, as PIL does.
void emit_message(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) error_exit(c);
}

// Everything one decode touches lives here, outside the frames that call setjmp, so a
// longjmp out of libjpeg skips no C++ destructor and leaves no value indeterminate.
struct Decoder {
  jpeg_decompress_struct cinfo{};
  ErrorMgr err{};
  bool created = false;
  std::vector<uint8_t> pixels;                // RGB rows of the decoded window
  int x0 = 0, y0 = 0, width = 0, height = 0;  // the window, in scaled-image pixels

  Decoder() = default;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  ~Decoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// Each function below that calls libjpeg sets its own jump target and returns false on
// a libjpeg error (the reason is in d.err.message); check() turns that into st::Error.
bool read_header(Decoder& d, const std::vector<uint8_t>& bytes) {
  d.cinfo.err = jpeg_std_error(&d.err.pub);
  d.err.pub.error_exit = error_exit;
  d.err.pub.emit_message = emit_message;
  if (setjmp(d.err.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  jpeg_mem_src(&d.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d.cinfo, TRUE);
  return true;
}

// PIL's cmyk2rgb, in place (4 bytes per pixel in, 3 out). Adobe files store CMYK inverted.
void cmyk_to_rgb(uint8_t* px, size_t n, bool inverted) {
  auto muldiv255 = [](int a, int b) {
    int t = a * b + 128;
    return static_cast<uint8_t>(((t >> 8) + t) >> 8);
  };
  for (size_t i = 0; i < n; ++i) {
    int v[4];
    for (int j = 0; j < 4; ++j) v[j] = inverted ? 255 - px[4 * i + j] : px[4 * i + j];
    const int nk = 255 - v[3];
    for (int j = 0; j < 3; ++j) px[3 * i + j] = static_cast<uint8_t>(nk - muldiv255(v[j], nk));
  }
}

// Decodes at scale_num / 8 the rows [y0, y1) and at least the columns [x0, x1) of the
// scaled image (clipped to it; jpeg_crop_scanline widens the columns to whole iMCUs).
bool read_window(Decoder& d, int scale_num, double x0, double y0, double x1, double y1) {
  if (setjmp(d.err.jump)) return false;
  jpeg_decompress_struct& c = d.cinfo;
  const bool cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  c.scale_num = static_cast<unsigned>(scale_num);
  c.scale_denom = 8;
  jpeg_start_decompress(&c);
  const double w = c.output_width, h = c.output_height;
  JDIMENSION cx = static_cast<JDIMENSION>(std::clamp(std::floor(x0), 0.0, w - 1));
  JDIMENSION cw = static_cast<JDIMENSION>(std::clamp(std::ceil(x1), cx + 1.0, w)) - cx;
  const int ry0 = static_cast<int>(std::clamp(std::floor(y0), 0.0, h - 1));
  const int ry1 = static_cast<int>(std::clamp(std::ceil(y1), ry0 + 1.0, h));
  if (cw < c.output_width) jpeg_crop_scanline(&c, &cx, &cw);
  d.x0 = static_cast<int>(cx);
  d.width = static_cast<int>(cw);
  d.y0 = ry0;
  d.height = ry1 - ry0;
  const size_t stride = static_cast<size_t>(cw) * static_cast<size_t>(c.output_components);
  d.pixels.resize(stride * static_cast<size_t>(d.height));
  if (ry0 > 0) jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(ry0));
  while (c.output_scanline < static_cast<JDIMENSION>(ry1)) {
    JSAMPROW rows[16];
    const int n = std::min<int>(16, ry1 - static_cast<int>(c.output_scanline));
    for (int i = 0; i < n; ++i)
      rows[i] = d.pixels.data() + (c.output_scanline - static_cast<JDIMENSION>(ry0) + i) * stride;
    if (jpeg_read_scanlines(&c, rows, static_cast<JDIMENSION>(n)) == 0)
      ERREXIT(&c, JERR_BAD_BUFFER_MODE);  // cannot happen with a memory source
  }
  jpeg_abort_decompress(&c);  // rows below the window are never decoded
  if (cmyk) {
    const size_t n = static_cast<size_t>(d.width) * static_cast<size_t>(d.height);
    cmyk_to_rgb(d.pixels.data(), n, c.saw_Adobe_marker);
    d.pixels.resize(n * 3);
  }
  return true;
}

void check(bool ok, const Decoder& d, const std::filesystem::path& path) {
  if (!ok) ST_THROW(path.string(), ": cannot decode image (", d.err.message, ")");
}

void open(Decoder& d, const std::vector<uint8_t>& bytes, const std::filesystem::path& path) {
  ST_CHECK(!bytes.empty(), path.string(), ": empty file");
  check(read_header(d, bytes), d, path);
  // The size from the header first: a few hostile bytes must not cost gigabytes.
  const int64_t w = d.cinfo.image_width, h = d.cinfo.image_height;
  ST_CHECK(w * h <= kMaxImagePixels, path.string(), ": image of ", w, " x ", h,
           " pixels exceeds the limit of ", kMaxImagePixels);
}

RawImage take_pixels(Decoder& d) {
  auto px = std::make_shared<std::vector<uint8_t>>(std::move(d.pixels));
  RawImage r;
  r.view = ImageView::hwc(px->data(), 3, d.height, d.width);
  r.owner = std::move(px);
  return r;
}

}  // namespace

bool is_jpeg(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

JpegSize jpeg_size(const std::vector<uint8_t>& bytes, const std::filesystem::path& path) {
  Decoder d;
  open(d, bytes, path);
  return {static_cast<int>(d.cinfo.image_width), static_cast<int>(d.cinfo.image_height)};
}

RawImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::filesystem::path& path) {
  Decoder d;
  open(d, bytes, path);
  const double w = d.cinfo.image_width, h = d.cinfo.image_height;
  check(read_window(d, 8, 0, 0, w, h), d, path);
  return take_pixels(d);
}

int jpeg_scale_num(double box_w, double box_h, int size, int min_num) {
  int m = 1;
  while (m < min_num) m *= 2;
  while (m < 8 && (box_w * m / 8 < size || box_h * m / 8 < size)) m *= 2;
  return std::min(m, 8);
}

JpegPart decode_jpeg_part(const std::vector<uint8_t>& bytes, const std::filesystem::path& path,
                          const Box& box, int size, int min_scale_num) {
  Decoder d;
  open(d, bytes, path);
  JpegPart part;
  part.scale_num = jpeg_scale_num(box.w, box.h, size, min_scale_num);
  const double s = part.scale_num / 8.0;
  const Box b{box.x * s, box.y * s, box.w * s, box.h * s};
  // The resampling filter reaches up to (box / size) pixels beyond the box; two more
  // keep chroma upsampling's edge handling at the window border out of the result.
  const double margin = std::ceil(std::max({b.w / size, b.h / size, 1.0})) + 2;
  check(read_window(d, part.scale_num, b.x - margin, b.y - margin, b.x + b.w + margin,
                    b.y + b.h + margin),
        d, path);
  part.box = {b.x - d.x0, b.y - d.y0, b.w, b.h};
  part.image = take_pixels(d);
  return part;
}

}  // namespace st
