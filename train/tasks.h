// The tasks of the sparsification papers' tables (MiCRO, ExDyna, SIDCo) as rows: model,
// dataset, the papers' hyper-parameters and the `sparsetrain train` command that runs each
// one. `sparsetrain tasks [--json]` prints them; scripts/reproduce.sh --task NAME runs one.
// Whether a row can run here is asked, never assumed: the architecture of the registry
// (models/registry.h; a model still to come is listed and marked missing) and the
// dataset's files in their folder (data_folder below).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace st {

struct PaperTask {
  std::string name = {};     // e.g. "micro_resnet18_cifar10"
  std::string paper = {};    // "MiCRO", "ExDyna", "SIDCo", or "stand-in"
  std::string arch = {};     // the --arch value ("lstm" for the language models)
  std::string preset = {};   // --preset of the language models (train/presets.h), "" = none
  std::string dataset = {};  // the --dataset value
  int ranks = 1;             // workers in the paper's runs (the command's -np)
  int64_t batch = 0;         // per rank
  double lr = 0;             // at `ranks` workers
  int64_t epochs = 0;
  double density = 0;                   // fraction of the gradient each exchange keeps
  std::string sparsifier = {};          // the --sparsifier value of the paper's own method
  std::vector<std::string> flags = {};  // the other train flags (schedule, momentum, ...)
  std::string source = {};              // where the values come from
};

// Every row, in the papers' table order.
const std::vector<PaperTask>& paper_tasks();
// Throws st::Error "unknown task 'x'; valid: ..." for an unknown name.
const PaperTask& paper_task(const std::string& name);

// Where a dataset's files are looked for: $SPARSETRAIN_DATA/<folder> (default root
// /data), except Fashion-MNIST, which Debian's dataset-fashion-mnist package installs in
// /usr/share/datasets/fashion-mnist.
std::string data_folder(const std::string& dataset);
// Whether the files the dataset's reader needs first are in data_folder(dataset).
bool data_present(const std::string& dataset);
// What to put in the folder, e.g. "the CIFAR-10 binary version (data_batch_1..5.bin,
// test_batch.bin)".
std::string data_hint(const std::string& dataset);
// Whether the row's architecture is in this build's registry (or is the language model).
bool arch_available(const PaperTask& task);

// The flags after `sparsetrain train` that run the row (one rank's view; no --out).
std::vector<std::string> task_train_args(const PaperTask& task);
// The whole command line: mpirun ... -np <ranks> build/apps/sparsetrain train ... --out
// runs/tasks/<name>.
std::string task_command(const PaperTask& task);

// `sparsetrain tasks`: an aligned table, then each row's command.
std::string tasks_listing();
// `sparsetrain tasks --json`: one JSON object per row and line.
std::string tasks_json();

}  // namespace st
