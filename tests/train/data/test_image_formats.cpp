// The image readers on files written here (IDX plain and gzip, CIFAR-100, TinyImageNet folders
// with JPEGs from stb_image_write) with every format error they must name, and the datasets in
// memory (MemoryImageDataset, SubsetDataset, split_holdout, channel_stats).
#include <doctest/doctest.h>

#include "tests/train/data/image_helpers.h"

using namespace qkv;
using namespace qkv::data;
using namespace qkv::test;

TEST_CASE("idx: plain and gzip files written here, and every header and size error") {
  TempDir d;
  const std::vector<uint8_t> images = idx_file(0x803, {3, 2, 2}, iota_bytes(12, 10));
  const std::vector<uint8_t> labels = idx_file(0x801, {3}, {1, 2, 9});
  write_file(d.path / "plain" / "train-images-idx3-ubyte", images);
  write_file(d.path / "plain" / "train-labels-idx1-ubyte", labels);
  fs::create_directories(d.path / "gz");
  write_gzip(d.path / "gz" / "t10k-images-idx3-ubyte.gz", images);
  write_gzip(d.path / "gz" / "t10k-labels-idx1-ubyte.gz", labels);
  for (const auto& [dir, split] : {std::pair{"plain", Split::train}, std::pair{"gz", Split::test}}) {
    CAPTURE(dir);
    const auto data = load_idx_dataset((d.path / dir).string(), split, "tiny");
    CHECK(data->size() == 3);
    CHECK((data->height() == 2 && data->width() == 2 && data->channels() == 1));
    CHECK(pixels_of(*data, 1) == std::vector<uint8_t>{14, 15, 16, 17});
    CHECK(data->label(2) == 9);
  }

  auto load_with = [&](const std::vector<uint8_t>& img, const std::vector<uint8_t>& lab) {
    TempDir t;
    write_file(t.path / "train-images-idx3-ubyte", img);
    write_file(t.path / "train-labels-idx1-ubyte", lab);
    return io_error([&] { load_idx_dataset(t.path.string(), Split::train, "bad"); });
  };
  check_contains(load_with(idx_file(0x804, {3, 2, 2}, iota_bytes(12)), labels),
                 {"train-images-idx3-ubyte", "bad magic 0x00000804", "expected 0x00000803"});
  check_contains(load_with(images, idx_file(0x803, {3}, {1, 2, 3})),
                 {"train-labels-idx1-ubyte", "bad magic 0x00000803", "expected 0x00000801"});
  check_contains(load_with(idx_file(0x803, {3, 2, 2}, iota_bytes(11)), labels),
                 {"train-images-idx3-ubyte", "truncated", "12 bytes of IDX data", "only 11"});
  check_contains(load_with(std::vector<uint8_t>(images.begin(), images.begin() + 6), labels),
                 {"train-images-idx3-ubyte", "truncated header", "expected at least 8 bytes, got 6"});
  check_contains(load_with(idx_file(0x803, {3, 2, 2}, iota_bytes(13)), labels),
                 {"train-images-idx3-ubyte", "expected 28 bytes, got 29"});
  check_contains(load_with(images, idx_file(0x801, {2}, {1, 2})), {"3 images", "2 labels", "train-labels-idx1-ubyte"});
  // A count the file cannot hold is refused before anything that large is allocated.
  check_contains(load_with(images, idx_file(0x801, {0xFFFFFFFFu}, {1, 2, 3})),
                 {"train-labels-idx1-ubyte", "truncated", "4294967295 bytes", "only 3"});
  check_contains(load_with(images, idx_file(0x801, {3}, {1, 10, 2})),
                 {"train-labels-idx1-ubyte", "label 10 of example 1", "expected 0..9"});

  TempDir empty_dir;
  check_contains(io_error([&] { load_idx_dataset(empty_dir.path.string(), Split::test, "none"); }),
                 {"t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz", "looked for"});

  TempDir corrupt;  // a gzip header followed by bytes that are not a deflate stream
  std::vector<uint8_t> gz{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  for (int i = 0; i < 64; ++i) gz.push_back(uint8_t(0xff - i));
  write_file(corrupt.path / "train-images-idx3-ubyte.gz", gz);
  write_file(corrupt.path / "train-labels-idx1-ubyte", labels);
  check_contains(io_error([&] { load_idx_dataset(corrupt.path.string(), Split::train, "corrupt"); }),
                 {"train-images-idx3-ubyte.gz"});
}

TEST_CASE("cifar: CIFAR-100 file written here: coarse and fine labels, HWC pixels, bad label, truncation") {
  TempDir d;
  const std::vector<std::pair<uint8_t, uint8_t>> labels{{1, 11}, {19, 99}, {0, 0}};
  auto pixel = [](int64_t r, int64_t c, int64_t p) { return uint8_t(r * 50 + c * 16 + p % 13); };
  auto records = [&](const std::vector<std::pair<uint8_t, uint8_t>>& ls) {
    std::vector<uint8_t> bytes;
    for (size_t r = 0; r < ls.size(); ++r) {
      bytes.push_back(ls[r].first);
      bytes.push_back(ls[r].second);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t p = 0; p < 1024; ++p) bytes.push_back(pixel(int64_t(r), c, p));
    }
    return bytes;
  };
  write_file(d.path / "train.bin", records(labels));
  const auto fine = load_cifar100(d.path.string(), Split::train);
  const auto coarse = load_cifar100(d.path.string(), Split::train, true);
  CHECK(fine->classes() == 100);
  CHECK(coarse->classes() == 20);
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(fine->label(i) == labels[size_t(i)].second);
    CHECK(coarse->label(i) == labels[size_t(i)].first);
  }
  const std::vector<uint8_t> px = pixels_of(*fine, 1);
  int64_t mismatches = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 1024; ++p) mismatches += px[size_t(p * 3 + c)] != pixel(1, c, p);
  CHECK(mismatches == 0);

  write_file(d.path / "test.bin", records({{1, 11}, {3, 100}}));
  check_contains(io_error([&] { load_cifar100(d.path.string(), Split::test); }),
                 {"test.bin", "record 1 has label 100, expected 0..99"});
  write_file(d.path / "test.bin", records({{20, 5}}));
  check_contains(io_error([&] { load_cifar100(d.path.string(), Split::test, true); }),
                 {"test.bin", "record 0 has label 20, expected 0..19"});
  const std::vector<uint8_t> whole = records(labels);
  const std::vector<uint8_t> cut(whole.begin(), whole.end() - 100);  // (not resize: GCC 12 -O1 ASan warns)
  write_file(d.path / "test.bin", cut);
  check_contains(io_error([&] { load_cifar100(d.path.string(), Split::test); }),
                 {"test.bin", "truncated", "expected 9222 bytes", "got 9122"});

  TempDir empty_dir;
  check_contains(io_error([&] { load_cifar100(empty_dir.path.string(), Split::train); }),
                 {"missing file", "train.bin"});
  check_contains(io_error([&] { load_cifar10(empty_dir.path.string(), Split::train); }),
                 {"data_batch_1.bin", "data_batch_5.bin"});
  check_contains(io_error([&] { load_cifar10(empty_dir.path.string(), Split::test); }), {"test_batch.bin"});
  std::vector<uint8_t> ten(3073, 7);
  ten[0] = 10;
  write_file(empty_dir.path / "data_batch_3.bin", ten);
  check_contains(io_error([&] { captured_stdout([&] { load_cifar10(empty_dir.path.string(), Split::train); }); }),
                 {"data_batch_3.bin", "record 0 has label 10, expected 0..9"});
}

namespace {

// A 64x64 (or side x side) JPEG with `comp` channels whose values vary over the image.
void write_jpeg(const fs::path& path, int comp, int side = 64) {
  fs::create_directories(path.parent_path());
  std::vector<uint8_t> px(size_t(side * side * comp));
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x)
      for (int c = 0; c < comp; ++c) px[size_t((y * side + x) * comp + c)] = uint8_t(x * 3 + y * 2 + c * 60);
  REQUIRE(stbi_write_jpg(path.c_str(), side, side, comp, px.data(), 95) != 0);
}

}  // namespace

TEST_CASE("tinyimagenet: folders written here: grayscale JPEG, image size, malformed annotations") {
  TempDir d;
  const fs::path& root = d.path;
  write_text(root / "wnids.txt", "n001\nn002\n\n");
  write_jpeg(root / "train/n001/images/n001_0.JPEG", 3);
  write_jpeg(root / "train/n001/images/n001_1.JPEG", 1);
  write_jpeg(root / "train/n002/images/n002_0.JPEG", 3);
  write_jpeg(root / "val/images/val_0.JPEG", 1);
  write_jpeg(root / "val/images/val_1.JPEG", 3);
  const std::string annotations = "val_0.JPEG\tn002\t0\t0\t63\t63\nval_1.JPEG\tn001\t1\t2\t30\t40\n";
  write_text(root / "val/val_annotations.txt", annotations);

  const auto train = load_tinyimagenet(root.string(), Split::train);
  CHECK(train->size() == 3);
  CHECK(train->classes() == 2);
  CHECK((train->label(0) == 0 && train->label(1) == 0 && train->label(2) == 1));
  CHECK_FALSE(is_gray(pixels_of(*train, 0)));
  // stb_image_write stores a 1-channel image as a 3-component JPEG with neutral chroma; the
  // real single-component (mode L) JPEGs are checked on the TinyImageNet sample above.
  check_promoted(*train, 1, root / "train/n001/images/n001_1.JPEG");

  const auto val = load_tinyimagenet(root.string(), Split::test);
  CHECK(val->size() == 2);
  CHECK((val->label(0) == 1 && val->label(1) == 0));
  CHECK(is_gray(pixels_of(*val, 0)));

  // An image of the wrong size, and a file that is not a JPEG: errors on read, naming the file,
  // also when read on a loader's worker.
  write_jpeg(root / "train/n002/images/n002_1.JPEG", 3, 32);
  write_text(root / "train/n002/images/n002_2.JPEG", "not a jpeg");
  const auto broken = load_tinyimagenet(root.string(), Split::train);
  REQUIRE(broken->size() == 5);
  std::vector<uint8_t> buf(64 * 64 * 3);
  check_contains(io_error([&] { broken->read(3, buf.data()); }), {"n002_1.JPEG", "32x32, expected 64x64"});
  check_contains(io_error([&] { broken->read(4, buf.data()); }), {"n002_2.JPEG", "cannot decode"});
  LoaderOptions o;
  o.batch_size = 1, o.shuffle = false, o.workers = 2;
  ImageLoader loader(broken, o);
  ImageBatch b;
  for (int k = 0; k < 3; ++k) REQUIRE(loader.next(b));
  check_contains(io_error([&] { loader.next(b); }), {"n002_1.JPEG"});

  write_text(root / "val/val_annotations.txt", annotations + "val_1.JPEG\tn001\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
                 {"val_annotations.txt:3", "expected 6 tab-separated fields"});
  write_text(root / "val/val_annotations.txt", "val_0.JPEG\tn002\t0\t0\t63\t63\nval_1.JPEG\tn999\t1\t2\t30\t40\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
                 {"val_annotations.txt:2", "n999", "not in wnids.txt"});
  write_text(root / "val/val_annotations.txt", "val_7.JPEG\tn002\t0\t0\t63\t63\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
                 {"val_annotations.txt:1", "missing image", "val_7.JPEG"});
  // Names that would reach outside the dataset's folders.
  write_text(root / "val/val_annotations.txt", "../../train/n001/images/a.JPEG\tn002\t0\t0\t63\t63\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::test); }),
                 {"val_annotations.txt:1", "not a plain file name"});
  write_text(root / "wnids.txt", "n001\n../n002\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::train); }),
                 {"wnids.txt:2", "a plain folder name", "../n002"});
  write_text(root / "wnids.txt", "n001\nn002\nn003\n");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::train); }),
                 {"missing folder", "train/n003/images"});
  fs::remove(root / "wnids.txt");
  check_contains(io_error([&] { load_tinyimagenet(root.string(), Split::train); }), {"missing file", "wnids.txt"});
}

// ---- datasets in memory ---------------------------------------------------------------------

TEST_CASE("image dataset: MemoryImageDataset, SubsetDataset and split_holdout") {
  const auto data = make_dataset(
      50, 2, 2, 1, 50, [](int64_t i, int64_t, int64_t, int64_t) { return i + 1; }, [](int64_t i) { return i; });
  std::vector<uint8_t> buf(4);
  CHECK_THROWS_AS(data->read(50, buf.data()), IndexError);
  CHECK_THROWS_AS(data->label(-1), IndexError);
  CHECK_THROWS_AS(MemoryImageDataset("x", zeros({2, 1, 1, 1}, DType::u8), from_vector<int64_t>({0, 3}), 3), ValueError);
  CHECK_THROWS_AS(MemoryImageDataset("x", zeros({2, 1, 1, 1}), from_vector<int64_t>({0, 1}), 3), DTypeError);

  const auto [train, val] = split_holdout(data, 10, 7);
  CHECK(train->size() == 40);
  CHECK(val->size() == 10);
  std::set<int64_t> seen;
  for (const auto& part : {train, val})
    for (int64_t i = 0; i < part->size(); ++i) {
      seen.insert(part->label(i));
      part->read(i, buf.data());
      CHECK(buf[0] == part->label(i) + 1);  // pixels follow their label through the index map
    }
  CHECK(seen.size() == 50);
  std::vector<int64_t> val_labels, again_labels, other_labels;
  const auto again = split_holdout(data, 10, 7).second, other = split_holdout(data, 10, 8).second;
  for (int64_t i = 0; i < 10; ++i) {
    val_labels.push_back(val->label(i));
    again_labels.push_back(again->label(i));
    other_labels.push_back(other->label(i));
  }
  CHECK(val_labels == again_labels);
  CHECK(val_labels != other_labels);
  CHECK(val_labels != std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK_THROWS_AS(split_holdout(data, 51, 0), ValueError);
  CHECK_THROWS_AS(SubsetDataset(data, {3, 50}, "bad"), IndexError);
  CHECK_THROWS_AS(val->label(10), IndexError);
}

TEST_CASE("image dataset: channel_stats of a known dataset") {
  // Channel 0 alternates 0 and 255 across pixels (mean 1/2, std 1/2); channel 1 is 51 (0.2, 0).
  const auto data = make_dataset(
      6, 2, 2, 2, 1, [](int64_t, int64_t y, int64_t x, int64_t c) { return c == 1 ? 51 : ((x + y) % 2) * 255; },
      [](int64_t) { return 0; });
  const auto [mean, sd] = channel_stats(*data, 3);
  CHECK(mean[0] == doctest::Approx(0.5));
  CHECK(sd[0] == doctest::Approx(0.5));
  CHECK(mean[1] == doctest::Approx(0.2));
  CHECK(sd[1] == doctest::Approx(0.0));
}
