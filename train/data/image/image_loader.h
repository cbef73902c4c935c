// Batches of images for training and evaluation: shuffling by seed, resizing (bilinear),
// augmentation (random crop with zero padding, horizontal flip), per-channel normalization and
// padding to a larger size, with decoding on worker threads that stay `prefetch` batches ahead
// of the training step. Every random choice comes from the Philox stream (seed, epoch,
// position), so a batch is the same whatever the thread count.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "train/data/image/image_dataset.h"
#include "train/data/shard.h"

namespace qkv::data {

struct LoaderOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
  int workers = 2;               // decoding / augmentation threads (0: on the caller's thread)
  int prefetch = 4;              // batches prepared ahead
  std::vector<float> mean, std;  // per channel, on pixel values scaled to [0, 1]; empty: none
  int crop_padding = 0;          // random crop of the (resized) size after zero padding; 0: off
  bool horizontal_flip = false;  // flip with probability 1/2
  int64_t image_size = 0;        // first resized (resize_bilinear) to image_size x image_size; 0: off
  // The batches' height and width: the image in the top-left corner, the rest 0 (in normalized
  // values); 0: the image's own. Not below the (resized) image.
  int64_t pad_height = 0, pad_width = 0;
  Shard shard;  // data-parallel: this rank's rows of every batch (shard.h)
};

struct ImageBatch {
  Tensor images;  // [B, C, H, W] float32, normalized (H, W: the loader's height() and width())
  Tensor labels;  // [B] int64
};

class ImageLoader {
 public:
  ImageLoader(std::shared_ptr<const ImageDataset> data, LoaderOptions options);
  ~ImageLoader();
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  int64_t batches_per_epoch() const;
  int64_t height() const;  // of the batches' images, after resizing and padding
  int64_t width() const;
  // Starts epoch `epoch` (0-based): its order, and its augmentation draws.
  void start_epoch(int64_t epoch);
  // The next batch of the epoch, or false at its end. Blocks while workers are behind.
  bool next(ImageBatch& batch);
  // Seconds next() spent waiting for workers since construction (data-loading stall time).
  double wait_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Channel statistics of a dataset (mean and std of pixel/255 per channel, as stored), over at most
// `max_examples` examples spread across it.
std::pair<std::vector<float>, std::vector<float>> channel_stats(const ImageDataset& data, int64_t max_examples = 10000);

}  // namespace qkv::data
