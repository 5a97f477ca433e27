// The papers' task table (train/tasks.*): every table row of MiCRO, ExDyna and SIDCo is
// there with its paper's values, an architecture not in this build is marked missing (not
// dropped), data is looked for under $SPARSETRAIN_DATA, and each command is the row's flags.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "models/registry.h"
#include "tests/error_text.h"
#include "train/tasks.h"

namespace st::test {
namespace {

// Sets SPARSETRAIN_DATA for the test's scope.
class DataRoot {
 public:
  explicit DataRoot(const std::string& root) { setenv("SPARSETRAIN_DATA", root.c_str(), 1); }
  ~DataRoot() { unsetenv("SPARSETRAIN_DATA"); }
};

TEST(PaperTasks, EveryTableRowOfThePapers) {
  std::vector<std::string> names;
  for (const PaperTask& t : paper_tasks()) names.push_back(t.name);
  for (const char* want :
       {"micro_resnet18_cifar_cifar10", "micro_resnet152_cifar_cifar10", "micro_vgg19_cifar10",
        "micro_googlenet_cifar10", "micro_senet18_cifar10", "micro_resnet18_cifar_cifar100",
        "micro_googlenet_cifar100", "micro_se_resnet18_cifar100", "micro_lstm_wikitext2",
        "micro_ncf_movielens20m", "exdyna_inception_v4_cifar100", "exdyna_senet18_cifar10",
        "sidco_resnet20_cifar10", "sidco_vgg16_cifar10", "sidco_resnet50_imagenet",
        "sidco_lstm_ptb"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(names.size(), 24u);  // 10 of MiCRO, 9 of ExDyna, 4 of SIDCo, the stand-in
}

TEST(PaperTasks, ThePapersValues) {
  const PaperTask& micro = paper_task("micro_resnet18_cifar_cifar10");
  EXPECT_EQ(micro.ranks, 16);
  EXPECT_EQ(micro.batch, 32);
  EXPECT_DOUBLE_EQ(micro.lr, 0.1 * 32 / 128 * 16);
  EXPECT_EQ(micro.epochs, 200);
  EXPECT_DOUBLE_EQ(micro.density, 0.001);
  const PaperTask& lm = paper_task("micro_lstm_wikitext2");  // from its preset
  EXPECT_EQ(lm.dataset, "wikitext2");
  EXPECT_EQ(lm.batch, 32);
  EXPECT_DOUBLE_EQ(lm.lr, 20);
  EXPECT_EQ(lm.epochs, 90);
  const PaperTask& ptb = paper_task("sidco_lstm_ptb");
  EXPECT_EQ(ptb.batch, 20);
  EXPECT_DOUBLE_EQ(ptb.lr, 22);
  EXPECT_EQ(ptb.sparsifier, "sidco-e");
  const std::string e = error_of([] { paper_task("micro_resnet18"); });
  EXPECT_NE(e.find("unknown task 'micro_resnet18'; valid: micro_resnet18_cifar_cifar10"),
            std::string::npos)
      << e;
}

TEST(PaperTasks, AnArchitectureIsMarkedByTheRegistry) {
  const std::vector<std::string> archs = model_names();
  for (const PaperTask& t : paper_tasks()) {
    const bool registered = std::find(archs.begin(), archs.end(), t.arch) != archs.end();
    EXPECT_EQ(arch_available(t), registered || t.arch == "lstm") << t.name;
  }
  EXPECT_TRUE(arch_available(paper_task("sidco_resnet20_cifar10")));
}

TEST(PaperTasks, DataIsLookedForUnderTheDataRoot) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("tasks_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "cifar10" / "cifar-10-batches-bin");
  const DataRoot scope(root.string());
  EXPECT_EQ(data_folder("cifar10"), (root / "cifar10").string());
  EXPECT_FALSE(data_present("cifar10"));
  std::ofstream(root / "cifar10" / "cifar-10-batches-bin" / "data_batch_1.bin") << "x";
  EXPECT_TRUE(data_present("cifar10"));
  EXPECT_FALSE(data_present("cifar100"));
  EXPECT_EQ(data_folder("wikitext2"), (root / "wikitext-2").string());
  EXPECT_NE(data_hint("cifar10").find("data_batch_1..5.bin"), std::string::npos);
  // Fashion-MNIST falls back to Debian's package when the root has no copy.
  EXPECT_EQ(data_folder("fashion-mnist"), "/usr/share/datasets/fashion-mnist");
  std::filesystem::remove_all(root);
}

TEST(PaperTasks, CommandsCarryTheRowsFlags) {
  const PaperTask& t = paper_task("sidco_resnet20_cifar10");
  const std::string cmd = task_command(t);
  EXPECT_EQ(cmd.rfind("mpirun --allow-run-as-root --oversubscribe -np 8 build/apps/sparsetrain "
                      "train --arch resnet20 --dataset cifar10 -b 512 --lr 0.1 --epochs 140 ",
                      0),
            0u)
      << cmd;
  EXPECT_NE(cmd.find("--sparsifier sidco-e --density 0.001"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--out runs/tasks/sidco_resnet20_cifar10"), std::string::npos) << cmd;
  const std::vector<std::string> lm = task_train_args(paper_task("micro_lstm_wikitext2"));
  EXPECT_NE(std::find(lm.begin(), lm.end(), "micro_wikitext2"), lm.end());
}

TEST(PaperTasks, JsonIsOneObjectPerRow) {
  std::istringstream lines(tasks_json());
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const nlohmann::json row = nlohmann::json::parse(line);
    EXPECT_EQ(row["name"], paper_tasks()[n].name);
    EXPECT_TRUE(row["arch_available"].is_boolean());
    EXPECT_TRUE(row["data_present"].is_boolean());
    EXPECT_TRUE(row["train_args"].is_array());
  }
  EXPECT_EQ(n, paper_tasks().size());
}

}  // namespace
}  // namespace st::test
