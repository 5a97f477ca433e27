// --arch ncf's defaults for the flags not given, and its --dataset words in the flag check.
#include <gtest/gtest.h>

#include "tests/error_text.h"
#include "train/config_check.h"
#include "train/ncf_trainer.h"

namespace st::test {
namespace {

TEST(NcfFlags, DefaultsFillTheFlagsNotGiven) {
  TrainConfig c;
  c.arch = "ncf";
  c.batch_size = 64;
  const FlagRow& batch = flag_of(&TrainConfig::batch_size);
  const auto given = [&](const FlagRow& row) { return &row == &batch; };
  apply_ncf_defaults(c, given);
  apply_optimizer_defaults(c, given);
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_EQ(c.dataset, "synthetic-ncf");
  EXPECT_EQ(c.optimizer, "adam");
  EXPECT_EQ(c.lr, 0.001f);
  EXPECT_EQ(c.weight_decay, 0.0f);  // Adam's, from the optimiser's defaults
  EXPECT_EQ(c.schedule, "constant");
  EXPECT_NO_THROW(check_config(c));
}

TEST(NcfFlags, DatasetMustBeAnNcfOne) {
  TrainConfig c;
  c.arch = "ncf";
  c.dataset = "movielens";
  EXPECT_NO_THROW(check_config(c));
  c.dataset = "cifar10";
  const std::string e = error_of([&] { check_config(c); });
  EXPECT_NE(e.find("unknown --dataset 'cifar10' for --arch ncf; valid: synthetic-ncf, movielens"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace st::test
