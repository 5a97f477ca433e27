// The --dataset registry: a reader registered from outside the tree is opened like the
// built-in ones, gets no standard transform, and bad rows are refused.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "core/error.h"
#include "data/registry.h"
#include "data/synthetic.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

TEST(DatasetRegistry, RegisteredReaderIsOpenedByName) {
  const size_t before = dataset_names().size();
  DatasetSpec seen;
  register_dataset(
      {"registry_test_data", "four generated 1x4x4 images (a test row)",
       [&seen](const DatasetSpec& s) -> std::shared_ptr<Dataset> {
         seen = s;
         return std::make_shared<SyntheticDataset>(4, Shape{1, 4, 4}, 2, s.seed, Transform(), 0);
       }});
  ASSERT_EQ(dataset_names().size(), before + 1);
  EXPECT_EQ(dataset_names().back(), "registry_test_data");
  EXPECT_EQ(datasets().back().description, "four generated 1x4x4 images (a test row)");
  auto ds =
      open_dataset({.name = "registry_test_data", .dir = "/nowhere", .train = false, .seed = 9});
  EXPECT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->example_shape(), (Shape{1, 4, 4}));
  EXPECT_EQ(seen.dir, "/nowhere");  // the reader gets the whole spec
  EXPECT_FALSE(seen.train);
  EXPECT_EQ(seen.seed, 9u);
  // The reader decides its own preprocessing: no standard transform for it.
  const Transform t = standard_transform("registry_test_data", true, true, 32);
  EXPECT_EQ(t.geometry(), Transform::Geometry::kNone);
  EXPECT_EQ(t.describe(), Transform().describe());
  // The built-in rows still open as before.
  auto synth = open_dataset({.name = "synthetic", .train = false, .shape = {3, 8, 8}, .size = 5});
  EXPECT_EQ(synth->size(), 5);

  const auto reader = [](const DatasetSpec&) -> std::shared_ptr<Dataset> { return nullptr; };
  EXPECT_NE(error_of([&] {
              register_dataset({"cifar10", "again", reader});
            }).find("'cifar10'): a dataset of that name exists"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              register_dataset({"", "nameless", reader});
            }).find("needs a name"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              register_dataset({"no_reader", "", nullptr});
            }).find("no reader"),
            std::string::npos);
  EXPECT_EQ(dataset_names().size(), before + 1);
}

}  // namespace
}  // namespace st::test
