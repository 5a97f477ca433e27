// The sparsetrain command line: `train`, `eval`, `sparsifiers`, `models`, `tasks`, `pack`. Parsing
// and printing only; the work (and each kind of training's defaults) is in train/. Every error
// becomes one line on stderr and exit code 1 (2 for bad flags).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <type_traits>

#include "comm/launch_agreement.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/word_list.h"
#include "data/packed.h"
#include "data/registry.h"
#include "models/registry.h"
#include "models/summary.h"
#include "sparsify/registry.h"
#include "train/checkpoint.h"
#include "train/checkpoint_schedule.h"
#include "train/config_check.h"
#include "train/flags.h"
#include "train/lm_trainer.h"
#include "train/ncf_trainer.h"
#include "train/presets.h"
#include "train/tasks.h"
#include "train/trainer.h"

namespace {

// --sp key=value pairs into the sparsifier's parameters (a later key wins).
void set_sp_pairs(st::TrainConfig& c, const std::vector<std::string>& pairs) {
  for (const std::string& kv : pairs) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == kv.size())
      throw CLI::ValidationError(st::flag_label(st::flag_of(st::SpPairsField{})),
                                 "expected key=value, got '" + kv + "'");
    c.sparsifier_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}

// What every number a flag takes must look like before CLI11 converts it: CLI11 reads an
// empty value (an unset shell variable) as 0, "-1" for an unsigned field as 2^64 - 1, and
// "nan" or "inf" as themselves; each is refused in one line naming the flag.
CLI::Validator number_text(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        if (text.empty()) return "empty value (an unset variable?); give a number";
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (!std::isfinite(v)) return "'" + text + "' is not a finite number";
        if (is_unsigned && text.find('-') != std::string::npos)
          return "'" + text + "' is negative; give a whole number >= 0";
        return "";
      },
      "");
}

// A count: a whole number in [lo, hi] (after number_text has refused words and empties).
// The upper bound keeps a typo from building a model that cannot fit in memory.
CLI::Validator whole_number_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end == text.c_str() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
          return "give a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                 ", got '" + text + "'";
        return "";
      },
      "");
}

// An architecture of the registry, by name.
CLI::Validator arch_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::vector<std::string> names = st::model_names();
        if (std::find(names.begin(), names.end(), text) != names.end()) return "";
        return "unknown architecture '" + text + "'; valid: " + st::word_list(names);
      },
      "ARCH");
}

// A flag of the table (train/flags.h) on `app`, bound to its field in `c`.
CLI::Option* add_flag_row(CLI::App* app, const st::FlagRow& row, st::TrainConfig& c) {
  CLI::Option* opt = nullptr;
  auto bind = [&](auto& field) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, st::BetasField>) {
      opt = app->add_option_function<std::vector<double>>(
                   row.names,
                   [&c](const std::vector<double>& b) {
                     c.beta1 = b.at(0);
                     c.beta2 = b.at(1);
                   },
                   row.help)
                ->expected(2)
                ->check(number_text(false));
    } else if constexpr (std::is_same_v<T, st::SpPairsField>) {
      opt = app->add_option_function<std::vector<std::string>>(
          row.names, [&c](const std::vector<std::string>& pairs) { set_sp_pairs(c, pairs); },
          row.help);
    } else if constexpr (std::is_same_v<T, bool>) {
      opt = row.inverted ? app->add_flag_callback(
                               row.names, [&field] { field = false; }, row.help)
                         : app->add_flag(row.names, field, row.help);
    } else {
      opt = app->add_option(row.names, field, row.help);
      if (row.show_default) opt->capture_default_str();
      if constexpr (std::is_arithmetic_v<T>) opt->check(number_text(std::is_unsigned_v<T>));
    }
  };
  st::visit_field(row.field, c, bind);
  return opt;
}

// Every flag of the table on `train`, or those `eval` takes too; the options in table
// order (null where a flag is not registered).
std::vector<CLI::Option*> add_flags(CLI::App* app, st::TrainConfig& c, bool eval) {
  std::vector<CLI::Option*> options;
  for (const st::FlagRow& row : st::train_flags())
    options.push_back(!eval || row.eval_too ? add_flag_row(app, row, c) : nullptr);
  return options;
}

// The result as one JSON line on stdout, from rank 0 only.
void print_result(const st::LmResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  if (r.steps == 0) {  // evaluation of a checkpoint
    std::printf("{\"test_loss\":%.4f,\"test_ppl\":%.2f}\n", r.test_loss, r.test_ppl);
    return;
  }
  // A split never evaluated (a run stopped before its evaluation) is left out, not shown as 0.
  std::printf("{\"steps\":%ld,\"seconds\":%.1f,\"step_ms\":%.2f", static_cast<long>(r.steps),
              r.seconds, r.mean_step_ms);
  if (r.valid_evaluated)
    std::printf(",\"valid_loss\":%.4f,\"valid_ppl\":%.2f", r.valid_loss, r.valid_ppl);
  if (r.test_evaluated)
    std::printf(",\"test_loss\":%.4f,\"test_ppl\":%.2f", r.test_loss, r.test_ppl);
  std::printf("}\n");
}

void print_result(const st::NcfResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  std::printf("{");
  if (r.steps > 0)  // else the evaluation of a checkpoint
    std::printf("\"steps\":%ld,\"seconds\":%.1f,\"step_ms\":%.2f%s", static_cast<long>(r.steps),
                r.seconds, r.mean_step_ms, r.evaluated ? "," : "");
  if (r.evaluated)
    std::printf("\"test_loss\":%.4f,\"hr10\":%.4f,\"ndcg10\":%.4f", r.test_loss, r.hr10, r.ndcg10);
  std::printf("}\n");
}

void print_result(const st::TrainResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  std::printf("{\"steps\":%ld,\"seconds\":%.1f,\"step_ms\":%.2f", static_cast<long>(r.steps),
              r.seconds, r.mean_step_ms);
  if (r.last_eval.examples > 0)
    std::printf(",\"test_loss\":%.4f,\"test_acc\":%.2f", r.last_eval.loss, r.last_eval.accuracy);
  std::printf("}\n");
}

void print_result(const st::EvalResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  std::printf("{\"examples\":%ld,\"test_loss\":%.4f,\"test_acc\":%.2f}\n",
              static_cast<long>(r.examples), r.loss, r.accuracy);
}

// The subcommands and what their flags fill in.
struct Cli {
  CLI::App app{"sparsetrain: data-parallel training with gradient sparsification"};
  CLI::App* train = nullptr;
  st::TrainConfig tc;
  std::vector<CLI::Option*> train_options;  // in flag-table order
  CLI::App* list = nullptr;
  bool list_json = false;
  CLI::App* eval = nullptr;
  st::TrainConfig ec;
  std::vector<CLI::Option*> eval_options;
  std::string checkpoint;
  CLI::App* models = nullptr;
  bool models_json = false;
  int64_t models_classes = 10, models_channels = 3;
  std::string models_summary;
  CLI::App* tasks = nullptr;
  bool tasks_json = false;
  CLI::App* pack = nullptr;
  st::PackOptions po;
  std::string pack_in, pack_out;
};

bool given(const std::vector<CLI::Option*>& options, const st::FlagRow& row) {
  const CLI::Option* opt = options.at(static_cast<size_t>(&row - st::train_flags().data()));
  return opt != nullptr && opt->count() > 0;
}

void add_subcommands(Cli& cli) {
  // A usage error is one line, as every other error (subcommands inherit this).
  cli.app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("sparsetrain: error: ") + e.what() + "\n";
  });
  cli.app.require_subcommand(1);
  // Version, commit and the backends built in (core/build_info.h), and how this process's
  // OpenMP threads wait (core/parallel.h), which step times depend on.
  std::string version = st::build_info_text();
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(name) + "=" + (v != nullptr ? v : "(unset)");
  };
  version += "openmp: " + env("OMP_WAIT_POLICY") + " " + env("GOMP_SPINCOUNT");
  cli.app.set_version_flag("--version", version,
                           "print the version, commit, backends and OpenMP wait, then exit");
  cli.train = cli.app.add_subcommand("train", "train a model");
  cli.train_options = add_flags(cli.train, cli.tc, false);

  cli.list = cli.app.add_subcommand("sparsifiers", "list the gradient sparsifiers");
  cli.list->add_flag("--json", cli.list_json, "as JSON: name, summary, paper, pattern, --sp keys");

  cli.models = cli.app.add_subcommand(
      "models",
      "list the architectures with their trainable parameter counts (the language model, "
      "--arch lstm, once per --preset at its paper's vocabulary: its size follows the "
      "corpus)");
  CLI::App* models = cli.models;
  CLI::Option* models_json =
      models->add_flag("--json", cli.models_json,
                       "one JSON object per line: name, params, image_size, classes, channels, "
                       "description");
  models
      ->add_option("--classes", cli.models_classes,
                   "output classes the models are built for (1 to 100000)")
      ->capture_default_str()
      ->check(number_text(false))
      ->check(whole_number_in(1, 100000));
  models->add_option("--channels", cli.models_channels, "input image channels (1 to 1024)")
      ->capture_default_str()
      ->check(number_text(false))
      ->check(whole_number_in(1, 1024));
  models
      ->add_option("--summary", cli.models_summary,
                   "print ARCH's layers that own parameters, their counts and the total instead")
      ->check(arch_name())
      ->excludes(models_json);

  cli.tasks = cli.app.add_subcommand(
      "tasks",
      "list the sparsification papers' tasks (MiCRO, ExDyna, SIDCo): model, dataset, their "
      "hyper-parameters, whether the model and the data are here, and the command that runs "
      "each (scripts/reproduce.sh --task NAME)");
  cli.tasks->add_flag("--json", cli.tasks_json,
                      "one JSON object per line: name, paper, arch, arch_available, preset, "
                      "dataset, data_dir, data_present, data_hint, ranks, batch, lr, epochs, "
                      "density, sparsifier, train_args, command, source");

  cli.ec.arch.clear();
  cli.eval = cli.app.add_subcommand("eval", "evaluate a checkpoint on the test split");
  cli.eval_options = add_flags(cli.eval, cli.ec, true);
  cli.eval->add_option("checkpoint", cli.checkpoint, "checkpoint file (.safetensors)")->required();

  cli.pack = cli.app.add_subcommand("pack", "pre-decode ImageNet for --dataset imagenet-packed");
  CLI::App* pack = cli.pack;
  pack->add_option("--data-dir", cli.pack_in, "ImageNet root (train/, val/)")->required();
  pack->add_option("--out,-o", cli.pack_out, "folder for train.stpack, val.stpack")->required();
  pack->add_option("--pack-size", cli.po.side, "stored shorter side")->capture_default_str();
  pack->add_option("--workers", cli.po.threads, "decoding threads")->capture_default_str();
  pack->add_flag("--overwrite", cli.po.overwrite,
                 "replace train.stpack / val.stpack already in --out (without it, an error)");
}

// `sparsetrain train`; returns the exit code.
int run_train(Cli& cli, std::unique_ptr<st::Communicator>& comm) {
  st::TrainConfig& tc = cli.tc;
  // A preset's flags where the command line gives none, then the language model's
  // defaults; an optimizer's own defaults override them.
  const st::FlagGiven flag_given =
      st::apply_preset(tc, [&](const st::FlagRow& row) { return given(cli.train_options, row); });
  st::check_lm_only_flags(tc, flag_given);
  if (tc.arch == "lstm") st::apply_lm_defaults(tc, flag_given);
  if (tc.arch == "ncf") st::apply_ncf_defaults(tc, flag_given);
  st::apply_optimizer_defaults(tc, flag_given);
  // Under mpirun every rank agrees on what decides the collectives before any runs.
  std::unique_ptr<st::MpiCommunicator> bootstrap = st::agree_on_launch(
      tc.comm, tc.device,
      st::launch_facts("train", tc.check_flags, tc.device, tc.comm, "--resume", tc.resume));
  if (tc.check_flags) {
    st::check_config(tc);
    if (!bootstrap || bootstrap->rank() == 0) std::puts("sparsetrain: flags ok");
    return 0;
  }
  // From here a stop signal waits for the loop's first step (start-up can take seconds).
  st::StopSignals stop_signals;
  comm = st::make_communicator(tc.comm, tc.device, std::move(bootstrap));
  if (!tc.resume.empty()) st::check_checkpoint_file(tc.resume);
  int interrupted_by = 0;
  if (tc.arch == "lstm") {
    const st::LmResult r = st::train_lm(tc, *comm);
    print_result(r, *comm);
    interrupted_by = r.interrupted_by;
  } else if (tc.arch == "ncf") {
    const st::NcfResult r = st::train_ncf(tc, *comm);
    print_result(r, *comm);
    interrupted_by = r.interrupted_by;
  } else {
    const st::TrainResult r = st::train(tc, *comm);
    print_result(r, *comm);
    interrupted_by = r.interrupted_by;
  }
  return interrupted_by ? 128 + interrupted_by : 0;
}

// `sparsetrain eval`.
void run_eval(Cli& cli, std::unique_ptr<st::Communicator>& comm) {
  st::TrainConfig& ec = cli.ec;
  st::check_flag_ranges(ec);  // the flag table's ranges, as train's check_config
  std::unique_ptr<st::MpiCommunicator> bootstrap = st::agree_on_launch(
      ec.comm, ec.device,
      st::launch_facts("eval", false, ec.device, ec.comm, "the checkpoint", cli.checkpoint));
  comm = st::make_communicator(ec.comm, ec.device, std::move(bootstrap));
  st::check_checkpoint_file(cli.checkpoint);
  if (st::is_lm_checkpoint(cli.checkpoint)) {
    if (!given(cli.eval_options, st::flag_of(&st::TrainConfig::dataset)))
      ec.dataset.clear();  // the checkpoint's corpus
    print_result(st::evaluate_lm_checkpoint(ec, cli.checkpoint, *comm), *comm);
  } else if (st::is_ncf_checkpoint(cli.checkpoint)) {
    print_result(st::evaluate_ncf_checkpoint(ec, cli.checkpoint, *comm), *comm);
  } else {
    print_result(st::evaluate_checkpoint(ec, cli.checkpoint, *comm), *comm);
  }
}

// The parsed subcommand; returns the exit code.
int run(Cli& cli, std::unique_ptr<st::Communicator>& comm) {
  if (*cli.list) {
    std::fputs((cli.list_json ? st::sparsifiers_json() : st::sparsifiers_listing()).c_str(),
               stdout);
    return 0;
  }
  if (*cli.models) {
    if (!cli.models_summary.empty()) {
      std::fputs(
          st::arch_summary(cli.models_summary, cli.models_classes, cli.models_channels).c_str(),
          stdout);
      return 0;
    }
    std::vector<st::ArchCount> rows = st::count_archs(cli.models_classes, cli.models_channels);
    for (st::ArchCount& row : st::preset_counts()) rows.push_back(std::move(row));
    std::fputs((cli.models_json ? st::models_json(rows) : st::models_listing(rows)).c_str(),
               stdout);
    return 0;
  }
  if (*cli.tasks) {
    std::fputs((cli.tasks_json ? st::tasks_json() : st::tasks_listing()).c_str(), stdout);
    return 0;
  }
  if (*cli.pack) {
    std::fputs(st::pack_imagenet(cli.pack_in, cli.pack_out, cli.po).c_str(), stdout);
    return 0;
  }
  if (*cli.train) return run_train(cli, comm);
  run_eval(cli, comm);
  return 0;
}

// A listing or a version sent to a full disk or a closed descriptor is lost: a script
// that reads it must see a failure, not exit 0 (as coreutils' close_stdout does).
int with_output_written(int rc) {
  std::cout.flush();
  const bool lost = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!lost) return rc;
  std::fprintf(stderr, "sparsetrain: error: cannot write to standard output: %s\n",
               std::strerror(errno));
  return rc == 0 ? 1 : rc;
}

}  // namespace

int main(int argc, char** argv) {
  st::set_mpi_env_defaults();  // before MPI_Init reads them (comm/mpi_env.h)
  // Idle OpenMP threads sleep after a short spin: the data-loading threads share the
  // cores with them (core/parallel.h).
  st::set_openmp_env_defaults(argv);
  Cli cli;
  add_subcommands(cli);
  try {
    cli.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2 (CLI11's own codes vary).
    return with_output_written(cli.app.exit(e) == 0 ? 0 : 2);
  }
  // The communicator outlives the try block: on an error the handler aborts the MPI job
  // before anything waits on a collective that the failed rank will never join.
  std::unique_ptr<st::Communicator> comm;
  try {
    return with_output_written(run(cli, comm));
  } catch (const st::EveryRankError& e) {
    // Every rank raised it at the same point: each says so and ends normally.
    std::fprintf(stderr, "sparsetrain: error on rank %d of %d: %s\n", e.rank(), e.size(), e.what());
    return 1;
  } catch (const std::exception& e) {
    // Under mpirun, name the rank and take the whole job down: the other ranks would
    // otherwise wait forever in their next collective.
    if (comm && comm->size() > 1) {
      std::fprintf(stderr, "sparsetrain: error on rank %d of %d: %s\n", comm->rank(), comm->size(),
                   e.what());
      std::fflush(stderr);
      st::MpiCommunicator::abort_job(1);
    }
    std::fprintf(stderr, "sparsetrain: error: %s\n", e.what());
    return 1;
  }
}
