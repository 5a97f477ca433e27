#include "train/tasks.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/number_text.h"
#include "core/word_list.h"
#include "data/registry.h"
#include "models/registry.h"
#include "train/presets.h"

namespace st {

namespace {

namespace fs = std::filesystem;

// MiCRO's and ExDyna's CIFAR recipe (kljp/micro and kljp/exdyna, cnn-lstm/run.py and
// train.py, identical in both): batch 32 per worker on 16 workers, learning rate 0.1 x
// (32 / 128) x 16 = 0.4 reached by a 5-epoch linear warm-up, divided by 10 at epochs 150
// and 250 of 200, Nesterov momentum 0.9, weight decay 1e-4 and none on BatchNorm;
// run.sh's comp_ratio 0.001.
PaperTask kljp_cifar(const std::string& paper, const std::string& sparsifier,
                     const std::string& arch, const std::string& dataset) {
  const std::string repo = paper == "MiCRO" ? "kljp/micro" : "kljp/exdyna";
  return {.name = (paper == "MiCRO" ? "micro_" : "exdyna_") + arch + "_" + dataset,
          .paper = paper,
          .arch = arch,
          .dataset = dataset,
          .ranks = 16,
          .batch = 32,
          .lr = 0.4,
          .epochs = 200,
          .density = 0.001,
          .sparsifier = sparsifier,
          .flags = {"--schedule", "multistep:150,250:0.1", "--warmup-epochs", "5", "--momentum",
                    "0.9", "--nesterov", "--wd", "0.0001", "--no-wd-bn"},
          .source = repo + " cnn-lstm/run.py, train.py, run.sh"};
}

// SIDCo's CIFAR-10 recipe (ahmedcs/SIDCo): exp_configs/{resnet20,vgg16}.conf give lr 0.1,
// batch 512 per worker, 140 epochs; dl_trainer.py warms up over 5 epochs, divides by 10
// at epochs 80 and 120 (and 150, after the end), momentum 0.9 without Nesterov, weight
// decay 1e-4 on all but 1-d parameters; run8.sh: 8 workers, density 0.001.
PaperTask sidco_cifar10(const std::string& arch) {
  return {.name = "sidco_" + arch + "_cifar10",
          .paper = "SIDCo",
          .arch = arch,
          .dataset = "cifar10",
          .ranks = 8,
          .batch = 512,
          .lr = 0.1,
          .epochs = 140,
          .density = 0.001,
          .sparsifier = "sidco-e",
          .flags = {"--schedule", "multistep:80,120:0.1", "--warmup-epochs", "5", "--momentum",
                    "0.9", "--wd", "0.0001", "--no-wd-bn"},
          .source = "ahmedcs/SIDCo exp_configs/" + arch + ".conf, dl_trainer.py, run8.sh"};
}

// A language model's row: batch, rate and epochs are its preset's.
PaperTask lm_task(const std::string& name, const std::string& paper, const std::string& preset_name,
                  int ranks, const std::string& sparsifier, const std::string& source) {
  PaperTask t{.name = name,
              .paper = paper,
              .arch = "lstm",
              .preset = preset_name,
              .ranks = ranks,
              .density = 0.001,
              .sparsifier = sparsifier,
              .source = source};
  for (const auto& [flag, value] : preset(preset_name).flags) {
    if (flag == "--dataset") t.dataset = value;
    if (flag == "--batch-size") t.batch = std::stoll(value);
    if (flag == "--lr") t.lr = std::stod(value);
    if (flag == "--epochs") t.epochs = std::stoll(value);
  }
  return t;
}

std::vector<PaperTask> make_tasks() {
  std::vector<PaperTask> rows;
  const std::vector<std::pair<std::string, std::string>> kljp_cnns = {
      {"resnet18_cifar", "cifar10"}, {"resnet152_cifar", "cifar10"}, {"vgg19", "cifar10"},
      {"googlenet", "cifar10"},      {"senet18", "cifar10"},         {"resnet18_cifar", "cifar100"},
      {"googlenet", "cifar100"},     {"se_resnet18", "cifar100"}};
  for (const auto& [arch, dataset] : kljp_cnns)
    rows.push_back(kljp_cifar("MiCRO", "micro", arch, dataset));
  rows.push_back(lm_task("micro_lstm_wikitext2", "MiCRO", "micro_wikitext2", 16, "micro",
                         "kljp/micro cnn-lstm/run.py task wikitext2 (train/presets.cpp)"));
  // NCF on MovieLens-20M (kljp/micro ncf/ncf.py defaults, run.sh): 2^20 examples per
  // step over 4 workers, Adam with lr 0.0045 and betas 0.25, 0.5, 30 epochs.
  rows.push_back({.name = "micro_ncf_movielens20m",
                  .paper = "MiCRO",
                  .arch = "ncf",
                  .dataset = "movielens",
                  .ranks = 4,
                  .batch = 262144,
                  .lr = 0.0045,
                  .epochs = 30,
                  .density = 0.001,
                  .sparsifier = "micro",
                  .flags = {"--optimizer", "adam", "--betas", "0.25", "0.5", "--wd", "0"},
                  .source = "kljp/micro ncf/ncf.py, ncf/run.sh"});
  for (const auto& [arch, dataset] : kljp_cnns)
    rows.push_back(kljp_cifar("ExDyna", "exdyna", arch, dataset));
  rows.push_back(kljp_cifar("ExDyna", "exdyna", "inception_v4", "cifar100"));
  rows.push_back(sidco_cifar10("resnet20"));
  rows.push_back(sidco_cifar10("vgg16"));
  // SIDCo's ImageNet recipe: exp_configs/resnet50.conf (lr 0.2, batch 160, 90 epochs),
  // dl_trainer.py (momentum 0.875, weight decay 2 x 3.0517578125e-05 off 1-d parameters,
  // /10 at epochs 30, 60 and 80, 5 warm-up epochs).
  rows.push_back({.name = "sidco_resnet50_imagenet",
                  .paper = "SIDCo",
                  .arch = "resnet50",
                  .dataset = "imagenet",
                  .ranks = 8,
                  .batch = 160,
                  .lr = 0.2,
                  .epochs = 90,
                  .density = 0.001,
                  .sparsifier = "sidco-e",
                  .flags = {"--schedule", "multistep:30,60,80:0.1", "--warmup-epochs", "5",
                            "--momentum", "0.875", "--wd", "6.103515625e-05", "--no-wd-bn"},
                  .source = "ahmedcs/SIDCo exp_configs/resnet50.conf, dl_trainer.py, run8.sh"});
  rows.push_back(
      lm_task("sidco_lstm_ptb", "SIDCo", "sidco_ptb", 8, "sidco-e",
              "ahmedcs/SIDCo exp_configs/lstm.conf, models/lstm.py (train/presets.cpp)"));
  // The data this machine has: MiCRO's CIFAR recipe at 2 ranks (lr scaled as its
  // run.py does, 0.1 x 32 / 128 x 2) on ResNet-20 and Fashion-MNIST.
  PaperTask standin = kljp_cifar("MiCRO", "micro", "resnet20", "fashion-mnist");
  standin.name = "standin_micro_resnet20_fmnist";
  standin.paper = "stand-in";
  standin.ranks = 2;
  standin.lr = 0.05;
  rows.push_back(standin);
  return rows;
}

struct DataFiles {
  const char* dataset;
  const char* folder;               // under the data root
  std::vector<std::string> any_of;  // the reader's first file, as any of these paths
  const char* hint;
};

const std::vector<DataFiles>& data_files() {
  static const std::vector<DataFiles> table = {
      {"fashion-mnist",
       "fashion-mnist",
       {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte"},
       "Fashion-MNIST's IDX files (apt-get install dataset-fashion-mnist)"},
      {"mnist",
       "mnist",
       {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte"},
       "MNIST's IDX files"},
      {"cifar10",
       "cifar10",
       {"data_batch_1.bin", "cifar-10-batches-bin/data_batch_1.bin"},
       "the CIFAR-10 binary version (data_batch_1..5.bin, test_batch.bin)"},
      {"cifar100",
       "cifar100",
       {"train.bin", "cifar-100-binary/train.bin"},
       "the CIFAR-100 binary version (train.bin, test.bin)"},
      {"imagenet",
       "imagenet",
       {"train", "val"},
       "ImageNet's train/ and val/ class folders of JPEGs"},
      {"wikitext2",
       "wikitext-2",
       {"wiki.train.tokens", "train.txt"},
       "WikiText-2 (wiki.{train,valid,test}.tokens)"},
      {"ptb", "ptb", {"ptb.train.txt", "train.txt"}, "Penn Treebank (ptb.{train,valid,test}.txt)"},
      {"movielens", "ml-20m", {"ratings.csv"}, "MovieLens-20M (ratings.csv)"},
  };
  return table;
}

const DataFiles& files_of(const std::string& dataset) {
  for (const DataFiles& d : data_files())
    if (dataset == d.dataset) return d;
  ST_THROW("no data folder is known for dataset '", dataset, "'");
}

std::string data_root() {
  const char* root = std::getenv("SPARSETRAIN_DATA");
  return root != nullptr && *root != '\0' ? root : "/data";
}

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace

const std::vector<PaperTask>& paper_tasks() {
  static const std::vector<PaperTask> table = make_tasks();
  return table;
}

const PaperTask& paper_task(const std::string& name) {
  std::vector<std::string> names;
  for (const PaperTask& t : paper_tasks()) {
    if (t.name == name) return t;
    names.push_back(t.name);
  }
  ST_THROW("unknown task '", name, "'; valid: ", word_list(names));
}

std::string data_folder(const std::string& dataset) {
  const DataFiles& d = files_of(dataset);
  const fs::path under_root = fs::path(data_root()) / d.folder;
  // Debian's package, unless the data root holds its own copy.
  if (dataset == "fashion-mnist" && !fs::exists(under_root)) return kDebianFashionMnistDir;
  return under_root.string();
}

bool data_present(const std::string& dataset) {
  const DataFiles& d = files_of(dataset);
  const fs::path folder = data_folder(dataset);
  std::error_code ec;
  if (dataset == "imagenet")  // both splits' folders
    return fs::is_directory(folder / "train", ec) && fs::is_directory(folder / "val", ec);
  return std::any_of(d.any_of.begin(), d.any_of.end(),
                     [&](const std::string& f) { return fs::is_regular_file(folder / f, ec); });
}

std::string data_hint(const std::string& dataset) {
  return files_of(dataset).hint;
}

bool arch_available(const PaperTask& task) {
  if (task.arch == "lstm") return true;
  const std::vector<std::string> names = model_names();
  return std::find(names.begin(), names.end(), task.arch) != names.end();
}

std::vector<std::string> task_train_args(const PaperTask& t) {
  std::vector<std::string> args = {"--arch", t.arch};
  if (!t.preset.empty()) {
    args.insert(args.end(), {"--preset", t.preset});  // its dataset, batch, rate and epochs
  } else {
    args.insert(args.end(), {"--dataset", t.dataset, "-b", std::to_string(t.batch), "--lr",
                             number_text(t.lr), "--epochs", std::to_string(t.epochs)});
  }
  args.insert(args.end(), {"--data-dir", data_folder(t.dataset), "--sparsifier", t.sparsifier,
                           "--density", number_text(t.density)});
  args.insert(args.end(), t.flags.begin(), t.flags.end());
  // One compute thread per rank: the papers' ranks outnumber most machines' cores.
  args.insert(args.end(), {"--threads", "1"});
  return args;
}

std::string task_command(const PaperTask& t) {
  std::string cmd = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(t.ranks) +
                    " build/apps/sparsetrain train";
  for (const std::string& a : task_train_args(t)) cmd += " " + a;
  return cmd + " --out runs/tasks/" + t.name;
}

std::string tasks_listing() {
  struct Cells {
    std::vector<std::string> v;
  };
  std::vector<Cells> table = {
      {{"task", "paper", "arch", "dataset", "data", "P", "batch", "lr", "epochs", "d"}}};
  for (const PaperTask& t : paper_tasks()) {
    const std::string arch = (t.preset.empty() ? t.arch : t.arch + "+" + t.preset) +
                             (arch_available(t) ? "" : " (missing)");
    table.push_back(
        {{t.name, t.paper, arch, t.dataset, data_present(t.dataset) ? "here" : "missing",
          std::to_string(t.ranks), std::to_string(t.batch), number_text(t.lr),
          std::to_string(t.epochs), number_text(t.density)}});
  }
  std::vector<size_t> widths(table.front().v.size(), 0);
  for (const Cells& row : table)
    for (size_t i = 0; i < row.v.size(); ++i) widths[i] = std::max(widths[i], row.v[i].size());
  std::string out =
      "The papers' tasks: P ranks, batch per rank, lr at P ranks, density d; "
      "arch (missing): not in this build; data under $SPARSETRAIN_DATA (default /data)\n";
  for (const Cells& row : table) {
    std::string line;
    for (size_t i = 0; i < row.v.size(); ++i)
      line += (i ? "  " : "") + (i + 1 < row.v.size() ? padded(row.v[i], widths[i]) : row.v[i]);
    out += line + "\n";
  }
  out += "\nCommands (scripts/reproduce.sh --task NAME runs one):\n";
  for (const PaperTask& t : paper_tasks()) out += t.name + ": " + task_command(t) + "\n";
  return out;
}

std::string tasks_json() {
  std::string out;
  for (const PaperTask& t : paper_tasks()) {
    const nlohmann::ordered_json row = {{"name", t.name},
                                        {"paper", t.paper},
                                        {"arch", t.arch},
                                        {"arch_available", arch_available(t)},
                                        {"preset", t.preset},
                                        {"dataset", t.dataset},
                                        {"data_dir", data_folder(t.dataset)},
                                        {"data_present", data_present(t.dataset)},
                                        {"data_hint", data_hint(t.dataset)},
                                        {"ranks", t.ranks},
                                        {"batch", t.batch},
                                        {"lr", t.lr},
                                        {"epochs", t.epochs},
                                        {"density", t.density},
                                        {"sparsifier", t.sparsifier},
                                        {"train_args", task_train_args(t)},
                                        {"command", task_command(t)},
                                        {"source", t.source}};
    out += row.dump() + "\n";
  }
  return out;
}

}  // namespace st
