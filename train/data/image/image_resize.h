// Bilinear resizing of HWC uint8 images, bit for bit as PIL's Image.resize(..., BILINEAR) (what
// torchvision's Resize does to a PIL image): pixel centres at half-pixel positions
// (align_corners=False), taps past the border dropped and the rest renormalised (the same as
// clamping to the edge), a horizontal pass rounded to uint8 and then a vertical pass, each in
// PIL's 22-bit fixed point, rounded to nearest.
//
// Shrinking an axis antialiases as PIL does: the triangle filter is widened by the scale factor
// (in/out), so every source pixel under an output pixel contributes; torch's interpolate with
// antialias=False would differ there. Growing an axis (32 -> 224) is plain bilinear interpolation.
#pragma once
#include <cstdint>

namespace qkv::data {

// src: h x w x channels, dst: out_h x out_w x channels (row-major, channels last, must not
// overlap src). Equal sizes copy. Throws ValueError for a non-positive size or a null pointer.
void resize_bilinear(const uint8_t* src, int64_t h, int64_t w, int64_t channels, int64_t out_h, int64_t out_w,
                     uint8_t* dst);

}  // namespace qkv::data
