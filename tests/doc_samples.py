#!/usr/bin/python3
"""Checks every sample of README.md and docs/*.md against what the programs print.

Every fenced block that is not source code (```cpp, ```cmake) is one of:
  - a file of the tree: `<!-- file: PATH -->` on the line before it; the block equals PATH;
  - a program's output byte for byte: `<!-- output: NAME -->` (the examples of docs/extending.md,
    whose build runs and compares them: NAME must be one of its checks);
  - a sample: `<!-- sample: NAME -->`; SAMPLES[NAME] says how to run it, and what it prints must
    match the block (below);
  - the output of the source block before it, marked `<!-- run: NAME -->`: that block is compiled
    (RUNS[NAME] says around what) and run, and what it prints must match;
  - listed in LISTED, with why it is not run: commands that take minutes or more (benchmarks,
    builds, long trainings) or need a GPU or a cluster, and text with no command (error messages
    that tests check, a layout, a benchmark's table). Every other command block is a sample.
A block that is none of these fails the check, so that a new sample cannot go unchecked.
Samples run as the page writes them, in WORK (what they write goes there): `localize` maps the
page's build folders to BUILD and its scripts to ROOT's, and a sample's `replace` maps what must
change on this machine (a host name, a folder outside WORK).

Matching: line by line, each line's words in order (the spacing of columns is free). A line `...`
in the block stands for any lines. Dates are masked, and so is what a sample's `mask` regexes
match (timings and other numbers that change from run to run) and its table `columns`.

  doc_samples.py ROOT BUILD WORK [--only NAME] [--coverage]   (BUILD: a build with the examples; WORK: scratch)
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

DATE = r"\d{4}-\d\d-\d\d( \d\d:\d\d)?"
SOURCE = ("cpp", "cmake")  # the languages of source blocks; a block of another language fails the check


def timings(*units):
    return [r"-?\d+(\.\d+)?(e[-+]?\d+)? ?" + re.escape(u) for u in units]


# name: how to run the sample and what to mask.
#   cmd: "inline" (the block starts with the command: its first line and the lines that continue it
#        with a trailing backslash; the rest is the output), "previous" (the fenced block before
#        this one holds the command, one per line), "block" (the block is commands whose output
#        the page does not show: they must succeed, and `expect`, a regex or a list of them, must
#        each match a line they print), or a list of shell commands of the test's own, where
#        {CMD1}, {CMD2}, ... are the block's commands ({CMD} the first; cmd_from: "inline" or
#        "block", the kind of block they come from), and {BUILD} and {WORK} the folders
#   stream: "out" (stdout) or "all" (stdout and stderr)
#   mask: regexes whose matches are masked in both; columns: table columns masked (by header name)
#   needs: paths under BUILD the sample runs, needs_tools: programs, needs_root (the sample is skipped,
#          saying so, without them); replace: text of the commands replaced ({WORK}, {ROOT}), and back
#          in the output
#   head: compare only the first lines of the block and the output
#   setup: what the page says to do first, run before the commands (what it prints is not compared):
#          shell commands ({WORK}, {ROOT}, {BUILD}) run in WORK, or dict(page, first, skip): the
#          commands of that page's block whose first line is `first`, but those matching the regex
#          `skip`, run as the page runs them, from the root of the clone (localized as the sample's)
#   cwd: the folder under WORK the commands run in (else WORK); script: run the commands as one
#        bash script (for commands sent to the background with `&`: a failing command or `wait`
#        fails it, and what is still running in the background when it ends is ended)
#   timeout: seconds for each command (120); env: environment variables set for them ({WORK})
QUICKSTART_INSTALL = dict(page="README.md", first="sudo apt-get install -y cmake g++ libeigen3-dev      # as root: without sudo",
                          skip=r"^sudo apt-get ")  # (the packages are there: the build needs them)
QUICKSTART_PREFIX = {"build/release": "{WORK}/release", "$HOME/.local": "{WORK}/prefix"}
SAMPLES = {
    "overlap-auto": dict(cmd="previous", columns=["round_ms", "kc_ms", "comm_ms", "wait_ms", "model_ms", "ratio",
                                                  "waited_s", "wall_s", "speedup"],
                         mask=[r"latency [\d.]+ us", r"m = [\d.]+ ms", r"c = [\d.]+ ms"],
                         needs=["examples/least_squares/least_squares"]),
    "overlap-1000": dict(cmd="previous", columns=["round_ms", "kc_ms", "comm_ms", "wait_ms", "model_ms", "ratio",
                                                  "waited_s", "wall_s", "speedup"],
                         mask=[r"m = [\d.]+ ms", r"c = [\d.]+ ms"], needs=["examples/least_squares/least_squares"]),
    "overlap-10000": dict(cmd="previous", columns=["round_ms", "kc_ms", "comm_ms", "wait_ms", "model_ms", "ratio",
                                                   "waited_s", "wall_s", "speedup"],
                          mask=[r"m = [\d.]+ ms", r"c = [\d.]+ ms"], needs=["examples/least_squares/least_squares"]),
    # the demo runs for minutes: its header, from a short run with the demo's settings
    "demo-table": dict(cmd=["{BUILD}/examples/fashion_mnist/fashion_mnist --workers 4 --bandwidth 1 --latency 50 --period auto"
                            " --max-period 32 --epochs 0.02 --algo cocod --brief --no-progress"],
                       head=2, mask=[r"m = [\d.]+ ms", r"c = [\d.]+ ms"],
                       needs=["examples/fashion_mnist/fashion_mnist"]),
    # (--period auto: the periods, so the models' bits, depend on the measured times)
    "logreg": dict(cmd="inline", columns=["k", "test_accuracy", "wall_s", "ms/round", "ms/step", "waited", "speedup"],
                   mask=[r"m = [\d.]+ ms", r"c = [\d.]+ ms", r"[0-9a-f]{16}$"], needs=["examples/fashion_mnist/fashion_mnist"]),
    "slowdown": dict(cmd="inline", columns=["k", "test_accuracy", "wall_s", "ms/round", "ms/step", "waited", "speedup"],
                     mask=[r"(?<=\(prop\)) .*", r"m = [\d.]+ ms", r"c = [\d.]+ ms", r"[0-9a-f]{16}$"],
                     needs=["examples/fashion_mnist/fashion_mnist"]),
    # the first rows of the CSV that the run api-callbacks wrote (in WORK)
    "api-csv": dict(cmd=["head -4 rounds.csv"], mask=[r"(,[^,]*){4}(?=,\d+,\d+$)"]),  # the four times
    "resume": dict(cmd=["{CMD}", "echo '# the same command with --resume:'", "{CMD} --resume"],
                   cmd_from="inline", replace={"/tmp/ck": "{WORK}/ck"}, needs=["examples/least_squares/least_squares"]),
    # the README's quick start: its install recipe's cmake lines (into a scratch prefix), the two
    # files in an empty folder, then the block, which must print what the page says
    "quickstart": dict(cmd="block", expect=[r"^y = 2\.0000 x \+ 1\.0000 after 320 steps \(expected y = 2 x \+ 1\)$",
                                            r"^model digest: a8e2a972c75e586a$"],
                       setup=["rm -rf release prefix quickstart && mkdir quickstart && "
                              "cp {ROOT}/examples/quickstart/CMakeLists.txt {ROOT}/examples/quickstart/main.cpp quickstart/",
                              QUICKSTART_INSTALL], cwd="quickstart", replace=QUICKSTART_PREFIX, timeout=300),
    "quickstart-mpi": dict(cmd="block", expect=r"^consensus 3\.500000 over 2 ranks \(expected 3\.500000\)$",
                           setup=["rm -rf release prefix quickstart-mpi && mkdir quickstart-mpi && "
                                  "cp {ROOT}/examples/quickstart/mpi/CMakeLists.txt {ROOT}/examples/quickstart/mpi/main.cpp quickstart-mpi/",
                                  QUICKSTART_INSTALL], cwd="quickstart-mpi", replace=QUICKSTART_PREFIX, timeout=300,
                           needs_tools=["mpicxx", "mpiexec"]),
    # the times of the table above it, from the copy of the demo's curve
    "demo-tta": dict(cmd="block", expect=[r"^CoCoD-SGD 9\.0[0-4]", r"^Local-SGD 10\.(7[5-9]|8[0-4])", r"^S-SGD (19\.9[5-9]|20\.0[0-4])",
                                          r"^Pipe-SGD 23\.(0[5-9]|1[0-4])"],
                     replace={"results/demo/curve.csv": "{ROOT}/docs/figures/demo-curve.csv"}),
    # the counts the page quotes, and the test passes
    "torch-sgd-step": dict(cmd="block", expect=[r"torch::optim::SGD vs update::Sgd: 5[4-7]\d of 585 updated parameters bitwise "
                                                r"equal, the others within %d ulp$" % u for u in (1, 2)] + [r"^\[doctest\] Status: SUCCESS!$"],
                           stream="all", needs=["tests/test_torch"]),
    # the trace it writes (in WORK): one process per algorithm, two tracks per worker
    "trace": dict(cmd=["rm -f trace.json", "{CMD1}", "python3 -c \"import json; e = json.load(open('trace.json'))['traceEvents']; "
                       "print('processes:', *[x['args']['name'] for x in e if x['name'] == 'process_name']); "
                       "print('tracks: ' + ', '.join(sorted({x['args']['name'] for x in e if x['name'] == 'thread_name'})))\""],
                  cmd_from="block", expect=[r"^processes: CoCoD-SGD Local-SGD$",
                                            r"^tracks: %s$" % ", ".join("worker %d, worker %d network" % (i, i) for i in range(4))],
                  needs=["examples/fashion_mnist/fashion_mnist"]),
    # three processes on loopback: rank 0 serves the store, and the others find it there
    "gloo-processes": dict(cmd=["{CMD1}", "{CMD2}", "{CMD3}", "wait"], cmd_from="block", script=True,
                           expect=[r"^model digest %s: [0-9a-f]{16}$" % a for a in ("CoCoD-SGD", "S-SGD", "Local-SGD", "Pipe-SGD")],
                           replace={"node0:": "127.0.0.1:"}, needs=["examples/least_squares/least_squares"]),
    # ./app: an MPI program, the README's (examples/quickstart/mpi)
    "mpi-launch": dict(cmd="block", expect=r"^consensus 4\.500000 over 4 ranks \(expected 4\.500000\)$",
                       setup=["mpicxx -std=c++20 -O2 -I{ROOT}/include -I/usr/include/eigen3 {ROOT}/examples/quickstart/mpi/main.cpp"
                              " -o app -pthread -lboost_mpi -lboost_serialization"], needs_tools=["mpicxx", "mpiexec"]),
    "mpi-examples": dict(cmd="block", expect=[r"^model digest %s: [0-9a-f]{16}$" % a for a in ("CoCoD-SGD", "S-SGD", "Local-SGD", "Pipe-SGD")],
                         needs_tools=["mpiexec"], needs=["examples/least_squares/least_squares",
                                                         "examples/logistic_regression/logistic_regression"]),
    "shaped-link": dict(cmd="block", expect=[r"^model digest %s: [0-9a-f]{16}$" % a for a in ("CoCoD-SGD", "S-SGD", "Local-SGD", "Pipe-SGD")],
                        needs_root=True, needs_tools=["ip", "tc", "mpiexec"], needs=["examples/least_squares/least_squares"]),
    # the coordinator on loopback and the three workers its --min-workers waits for (one of them
    # writes the curve and prints the result), then the coordinator stopped
    "elastic-run": dict(cmd=["{CMD1}", "c=$!", "{CMD2} &", "a=$!", "{CMD2} &", "b=$!", "{CMD2}", "wait $a", "wait $b",
                             "test -s curve.csv", "kill $c"],
                        cmd_from="block", script=True, setup=["rm -rf elastic && mkdir elastic"], cwd="elastic",
                        expect=[r"^test_accuracy 0\.(8[6-9]|9)", r"^model digest CoCoD-SGD: [0-9a-f]{16}$", r"^epoch 1: the run finished$"],
                        replace={"node0:": "127.0.0.1:"}, timeout=240,
                        needs=["examples/fashion_mnist/fashion_mnist", "tools/cocod-coordinator"]),
    # the token made, the coordinator on loopback with it, one worker with it (a short run)
    "elastic-token": dict(cmd=["{CMD1}", "{CMD2}", "c=$!", "{CMD3}", "kill $c"],
                          cmd_from="block", script=True, setup=["rm -rf token && mkdir token"], cwd="token",
                          expect=[r"^model digest CoCoD-SGD: [0-9a-f]{16}$", r"^epoch 1: the run finished$"],
                          replace={"10.0.0.1": "127.0.0.1", "--epochs 12": "--epochs 0.2"}, timeout=120,
                          needs=["examples/fashion_mnist/fashion_mnist", "tools/cocod-coordinator"]),
    # (its checkpoints go to the temporary folder: WORK)
    "reliability-bench": dict(cmd="block", expect=[r"^# soak: OK$", r"^# reliability: OK$"], env={"TMPDIR": "{WORK}"},
                              needs=["benchmarks/reliability"]),
    # the simulator on the model's measurements: the three commands of `benchmarks/run simulate`
    # before it, into WORK/sim (no tta runs: it skips the validation)
    "simulate": dict(cmd="block", expect=[r"^# validation skipped: no tta_", r"^# prediction, mlp: ", r"^# prediction, cnn: ",
                                          r"^# groups, cnn: 4 nodes x 8 GPUs"],
                     setup=["rm -rf sim && mkdir sim",
                            "{BUILD}/benchmarks/kernels --mib 1 --repeats 101 --csv sim/kernels_model.csv >/dev/null",
                            "{BUILD}/examples/fashion_mnist/fashion_mnist --workers 1 --algo ssgd --epochs 0.05 --no-progress"
                            " >sim/simulate_model_mlp.txt",
                            "{BUILD}/examples/torch_fashion_mnist/torch_fashion_mnist --model cnn --workers 1 --algo ssgd --epochs 0.05"
                            " --no-progress >sim/simulate_model_cnn.txt"],
                     replace={"results/sim": "{WORK}/sim"}, needs_tools=["/usr/bin/python3"],
                     needs=["benchmarks/kernels", "examples/fashion_mnist/fashion_mnist",
                            "examples/torch_fashion_mnist/torch_fashion_mnist"]),
    # configuring the CUDA build (nvcc is there; building and running it is the GPU check's)
    "cuda-configure": dict(cmd="block", expect=r"^-- Build files have been written to: .*/cuda$",
                           setup=["rm -rf cuda"], replace={"-S .": "-S {ROOT}", "build/cuda": "{WORK}/cuda"}, timeout=300,
                           needs_tools=["/usr/local/cuda/bin/nvcc"]),
}

# name: a source block compiled into a program and run; its output is the block after it.
#   frame: the program around the block ({code}); uses: blocks marked `<!-- code: NAME -->` put
#   before it; mpi: run under mpiexec with that many ranks; rc: its exit status
RUNS = {
    "api-all-to-all": dict(),
    "api-local": dict(),
    "api-threads": dict(),
    "api-link": dict(mask=timings(" s, x[0]")),
    "api-callbacks": dict(uses=["api-printer"], mask=timings("ms/round") + [r"waited \d+%"]),
    "api-events": dict(mask=[r"[\d.]+ MB", r"in [\d.]+ s"]),
    "api-diloco-recipe": dict(),
    "guide-adamw": dict(),  # another update, named in the type
    # the model and trainer of the ProgressBar example (api-callbacks), as the page says
    "api-early-stop": dict(before="cocod::comm::Threads::run(2, [](cocod::comm::Threads comm) {\n"
                                  "  const std::size_t n = 256;\n"
                                  "  auto model = cocod::make_model(std::vector<double>{0.0}, n,\n"
                                  "    [&](std::span<const std::size_t> batch, std::span<const double> x, std::span<double> g) {\n"
                                  "      double loss = 0; g[0] = 0;\n"
                                  "      for (auto i : batch) { double r = x[0] - (3.0 + 0.01 * (i % 7)); loss += r * r / 2; g[0] += r; }\n"
                                  "      g[0] /= batch.size(); return loss / batch.size(); });\n"
                                  "  cocod::CoCoDSGD<decltype(model), cocod::comm::Threads> opt{comm, {.learning_rate = 0.1, .period = 4, .batch_size = 16}};\n",
                           after="});\n"),
    "guide-pack-maps": dict(program=True),
    # (rank 0's lines reach the pipe before MPI_Abort ends it: line-buffered, as on a terminal)
    "api-mpi": dict(program=True, prefix="static const int line_buffered = [] { return std::setvbuf(stdout, nullptr, _IOLBF, 0); }();\n",
                    mpi=2, rc=None, stream="all"),
}

# (page, first line of the block): why that block is not run. Every block a user would paste that
# runs in under a minute here is a sample; these are the others (benchmarks, builds of minutes, a
# GPU or a cluster), and text with no command (error messages, a layout, a host file, tables).
BUILDS_BENCH = ("benchmarks/run: it builds build/bench (every benchmark and example: minutes of compilation), then "
                "minutes of timed runs")
TABLE = "a benchmark's table: one dated run's timings, printed by the command above it"
ERROR = "an error message with no command: %s checks its words"
LISTED = {
    ("README.md", "sudo apt-get install -y cmake g++ libeigen3-dev      # as root: without sudo"):
        "the install recipe: the samples quickstart and quickstart-mpi run its cmake lines first (into a scratch prefix); "
        "its apt-get line installs system packages as root",
    ("docs/benchmarks.md", "benchmarks/run            # everything; it installs what is missing and builds build/bench"):
        "every benchmark: builds build/bench, then about two hours of timed runs (the race against PyTorch, hours more)",
    ("docs/benchmarks.md", "benchmarks/run kernels          # build/bench/benchmarks/kernels [--mib 64] [--repeats 15]"): BUILDS_BENCH,
    ("docs/benchmarks.md", "# cocod kernels against a STREAM triad, float, 64 MiB per array, 15 repeats (medians), 2 cores, 2026-12-03"):
        TABLE,
    ("docs/benchmarks.md", "benchmarks/run allreduce        # mpiexec -n N build/bench/benchmarks/allreduce [--min-bytes] [--max-bytes]"):
        BUILDS_BENCH,
    ("docs/benchmarks.md", "# all-reduce of float sums: raw MPI_Allreduce vs cocod::comm::Mpi (rank-ordered) and cocod with MPI's own "
                           "all-reduce; 2 ranks; medians over repeats; 2026-12-01"): TABLE,
    ("docs/benchmarks.md", "scripts/shaped-link -- mpiexec --allow-run-as-root --mca btl tcp,self --mca btl_tcp_if_include lo -n N \\"):
        "a benchmark over the shaped link, N its rank count (2, then 4): minutes of timed all-reduces up to 16 MiB at 1 Gbit/s",
    ("docs/benchmarks.md", "# ranks     size B   raw_time us  cocod_time us  native_time us  cocod/raw  native/raw"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run overlap          # benchmarks/overlap.sh [threads|mpi|all]"): BUILDS_BENCH,
    ("docs/benchmarks.md", "# overlap: measured round time against the round-time model (docs/algorithm.md); 2026-12-02, 2 cores"): TABLE,
    ("docs/benchmarks.md", "# overlap: measured round time against the round-time model (docs/algorithm.md); 2026-12-01, 2 cores"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run tta              # benchmarks/time_to_accuracy.sh [threads|mpi|all]; TARGET=0.88"):
        BUILDS_BENCH,
    ("docs/benchmarks.md", "# time to 0.88 test accuracy, Fashion-MNIST MLP, demo settings; 2026-12-02, 2 cores"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run peers            # benchmarks/peers/run.sh: 5.1, then 5.2; installs python3-torch (Debian, 1.13)"):
        "the race against PyTorch: hours of timed runs (and it installs python3-torch)",
    ("docs/benchmarks.md", "BUILD=build/bench benchmarks/peers/race.sh accuracy results/benchmarks   # one part (or several, or all)"):
        "a part of the race against PyTorch: hours of timed runs, then its tables from the saved runs",
    ("docs/benchmarks.md", "# race on identical compute (mlp): cocod (MPI, C++ libtorch) vs PyTorch (gloo, Python), target 0.86"): TABLE,
    ("docs/benchmarks.md", "## 1gbit (mlp)"): TABLE,
    ("docs/benchmarks.md", "## outer-lr: delayed DiLoCo's outer lr (Nesterov 0.9), final accuracy and worst gap in points"): TABLE,
    ("docs/benchmarks.md", "## 100mbit (mlp)"): TABLE,
    ("docs/benchmarks.md", "## 10mbit (mlp)"): TABLE,
    ("docs/benchmarks.md", "# race on identical compute (cnn): cocod (MPI, C++ libtorch) vs PyTorch (gloo, Python), target 0.88"): TABLE,
    ("docs/benchmarks.md", "PARTS=eigen BUILD=build/bench benchmarks/peers/run.sh results/benchmarks   # 5.2 alone"):
        "a benchmark: minutes of timed runs of cocod and PyTorch (it installs python3-torch)",
    ("docs/benchmarks.md", "# cocod vs PyTorch: 4 workers, Fashion-MNIST MLP, tbf 1 Gbit/s loopback; 2026-12-03, 2 cores"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run simulate         # after tta: kernels --mib 1, a one-worker run of each model, then "
                           "benchmarks/simulate.py"):
        BUILDS_BENCH + "; its tables read the tta benchmark's runs (the sample simulate runs the simulator on this machine's "
        "measurements)",
    ("docs/benchmarks.md", "# validation: the round-time model's wall time against the measured one (target: every run within 15%)"):
        TABLE,
    ("docs/benchmarks.md", "# prediction, cnn: speedup per epoch over S-SGD; c = 20.252 ms per step (one worker alone), 320844 bytes, "
                           "e = 0.075 ms, alpha = 50 us, k <= 8"): TABLE,
    ("docs/benchmarks.md", "# prediction, mlp: speedup per epoch over S-SGD; c = 2.864 ms per step (one worker alone), 940620 bytes, "
                           "e = 0.221 ms, alpha = 50 us, k <= 8"): TABLE,
    ("docs/benchmarks.md", "# groups, cnn: 4 nodes x 8 GPUs, one NIC per node; c = 21.969 ms, 320844 bytes; inside a node 150 GB/s, "
                           "5 us (the per-step all-reduce m_in = 0.074 ms)"):
        "the simulator's table from the measurements of 2026-12-03 (the sample simulate, before it, prints it from this "
        "machine's)",
    ("docs/benchmarks.md", "benchmarks/run memory           # build/bench/benchmarks/memory [--mib 64]"): BUILDS_BENCH,
    ("docs/benchmarks.md", "# peak resident memory beyond the model, per worker, in model sizes; model 64 MiB of float; 2026-12-01"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run family                                      # or: BUILD=build/bench benchmarks/family.sh all "
                           "OUT_DIR"): "the family benchmark: 53 minutes of timed runs, then its table from the saved runs",
    ("docs/benchmarks.md", "# The CoCoD family, Fashion-MNIST MLP, 4 workers; time to 0.88 test accuracy"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run depth                       # or: BUILD=build/bench benchmarks/overlap_depth.sh all OUT_DIR"):
        BUILDS_BENCH,
    ("docs/benchmarks.md", "# overlap depth, Fashion-MNIST MLP, 4 workers, 12 epochs; 2026-12-02, 2 cores"): TABLE,
    ("docs/benchmarks.md", "benchmarks/run groups           # BUILD=build/bench benchmarks/groups.sh all results/groups (8 minutes here)"):
        "the groups benchmark: 8 minutes of timed runs, then its table from the saved runs",
    ("docs/benchmarks.md", "# groups: 4 ranks as 4 flat workers or as 2 groups of 2 on the same throttled link; time to test accuracy 0.86"):
        TABLE,
    ("docs/benchmarks.md", "benchmarks/run lm               # BUILD=build/bench benchmarks/lm.sh all results/lm (about 21 minutes here)"):
        "the language model's benchmark: 21 minutes of training, then its table from the saved runs",
    ("docs/cuda.md", "scripts/gpu-deps            # where apt works: Eigen and doctest into .deps/ (git-ignored)"):
        "the GPU check: needs a GPU (it builds every CUDA test, benchmark and example for sm_90 and runs them); "
        "gpu-deps downloads packages with apt",
    ("docs/elastic.md", "scripts/shaped-link -- mpiexec --allow-run-as-root --oversubscribe --mca btl tcp,self --mca "
                        "btl_tcp_if_include lo \\"):
        "a benchmark over the shaped link, N its rank count (2, then 4): minutes of timed all-reduces up to 64 MiB at 1 Gbit/s",
    ("docs/elastic.md", "# the kill campaign: 6 runs of each kind, 4 least_squares workers on loopback; 2026-12-06, 2 cores"):
        "a benchmark's table: one dated run's timings, printed by the command above it (benchmarks/elastic.sh kills; "
        "elastic.kills runs one run of each kind)",
    ("docs/elastic.md", "# goodput = the method's undisturbed wall time / its wall time with kills (the same passes over the data);"):
        TABLE + " (benchmarks/elastic.sh goodput: 20 trainings of about 1.5 minutes each, with kills)",
    ("docs/elastic.md", "# algorithm  variant             wall_s  ms/round   x mpi"):
        TABLE + " (benchmarks/elastic.sh cost: 3 runs of each variant over the shaped link)",
    ("docs/elastic.md", "# elastic demo: Fashion-MNIST MLP, CoCoD-SGD k = 8, 12 epochs, 4 workers as processes on 2 cores; 2026-12-04"):
        "a benchmark's report (benchmarks/elastic.sh demo: two trainings, one with a kill and a replacement; example.elastic "
        "checks the kill and the replacement)",
    ("docs/fashion-mnist.md", "git clone <cocod> && cd cocod && scripts/demo"):
        "the demo from a fresh clone (<cocod>: the repository's address): 2 min 41 s with its build; demo-table runs its "
        "first lines",
    ("docs/fashion-mnist.md", "== one exchange here costs 2.0 local steps; the fastest to accuracy against PyTorch on every link"):
        "the demo's closing line, with no command: scripts.demo_recommendation prints it and compares",
    ("docs/guide.md", "cmake --preset dev && cmake --build build/dev -j2 && ctest --test-dir build/dev -j2"):
        "builds the whole tree and runs every test: tens of minutes",
    ("docs/language-model.md", "scripts/demo --model lm                    # about 7 minutes here; add --bandwidth 0.01 for 10 Mbit/s"):
        "the demo: about 7 minutes of training",
    ("docs/language-model.md", "BUILD=build/bench benchmarks/lm.sh all results/lm      # about 21 minutes here (benchmarks/run lm builds "
                               "and runs it)"): "the benchmark: about 21 minutes of training, then its table from the saved runs",
    ("docs/language-model.md", "# The language model (byte-level transformer, fortunes), 4 workers, AdamW inside; time to validation "
                               "loss 2.6"): TABLE,
    ("docs/mpi.md", "cocod::comm::Mpi: workers called mismatched collectives (rank 0: all_reduce of 11 doubles; ranks 1, 2: "
                    "all_reduce of 12 doubles)"): "error messages with no command: test_mpi raises them and checks their words",
    ("docs/mpi.md", "cocod: rank 0 failed: cocod::comm::Mpi: rank 1 returned while rank 0 calls all_reduce of 16 doubles (the "
                    "workers called different sequences of collectives)"): ERROR % "test_mpi_abort",
    ("docs/mpi.md", "cocod: rank 0 failed: cocod::comm::Mpi: no progress from rank 2 for 2 s: rank 0 waits in all_reduce of 1000 "
                    "doubles, which it has not begun (...)"):
        "error messages with no command: test_mpi_stall checks their words",
    ("docs/mpi.md", "cmake -S . -B build/mpich -DCMAKE_BUILD_TYPE=Release -DCOCOD_BUILD_TESTS=OFF -DCOCOD_MPI_BOOST=OFF \\"):
        "builds an example against MPICH: 3 minutes of compilation here (mpich.suite builds and runs the MPI tests under MPICH)",
    ("docs/mpi.md", "cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Release -DCOCOD_BUILD_TESTS=OFF"):
        "builds two examples: minutes of compilation (least_squares alone took 4 minutes here); the sample mpi-examples runs them",
    ("docs/mpi.md", "# hosts"): "a host file's contents: a cluster's machines",
    ("docs/mpi.md", "mpiexec --hostfile hosts -n 8 --map-by ppr:4:node --bind-to core ./app"):
        "needs a cluster: the machines of the host file",
    ("docs/mpi.md", "benchmarks/mpi_progress.sh 5"):
        "a benchmark with its table: 60 timed runs over the shaped link (minutes), dated",
    ("docs/overlap.md", "cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Release -DCOCOD_BUILD_TESTS=OFF"):
        "builds the example: minutes of compilation (4 minutes here); the overlap samples run it",
    ("docs/reliability.md", "checkpoints/round-000000000050/worker-0.ckpt   one file per worker"):
        "a layout, with no command: test_checkpoint writes it",
    ("docs/reliability.md", "cocod: a NaN or an infinity in round 2 (step 12): rank 1 had a non-finite loss at step 9,"):
        ERROR % "test_non_finite",
    ("docs/torch.md", "cocod::torch::ModuleModel: parameter 'bias2' is Double; every parameter must be Float (convert"):
        ERROR % "test_torch",
    ("docs/torch.md", "scripts/demo --model cnn                  # 4 workers, 1 Gbit/s link, every algorithm, 12 epochs"):
        "the demo and the example's runs: 12 epochs of every algorithm each, minutes to an hour of training",
    ("docs/torch.md", "build/test/examples/torch_fashion_mnist/torch_fashion_mnist --model cnn --algo all --workers 4 --no-progress"):
        "the runs of the table after them: an hour of training",
}

MARKER = re.compile(r"^<!-- (file|output|sample|run|code): (\S+) -->$")


class Block:
    def __init__(self, page, line, lang, text, marker):
        self.page, self.line, self.lang, self.text, self.marker = page, line, lang, text, marker

    def where(self):
        return "%s:%d" % (self.page, self.line)


def blocks_of(root, page):
    lines = open(os.path.join(root, page)).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            m = MARKER.match(lines[i - 1]) if i > 0 else None
            out.append(Block(page, i + 1, lines[i][3:].strip(), lines[i + 1:j], (m.group(1), m.group(2)) if m else None))
            i = j + 1
        else:
            i += 1
    return out


def mask_line(line, masks):
    line = re.sub(DATE, "<date>", line)
    for m in masks:
        line = re.sub(m, "<m>", line)
    return line.split()


def mask_columns(lines, columns):
    """Masks the named columns of tables: a header line starting with '#' that names them, and the
    rows after it (lines starting with two spaces), whose last words are the header's columns."""
    out, header = [], None
    for line in lines:
        words = line.split()
        if line.startswith("#") and columns and any(c in words for c in columns):
            header = words[1:]
        elif header and line.startswith("  ") and len(words) >= len(header):
            n = len(header)
            for c in columns:
                if c in header and header.index(c) > 0:  # (the first column names the row)
                    words[len(words) - (n - header.index(c))] = "<m>"
            line = " ".join(words)
        elif not line.startswith("#"):
            header = None
        out.append(line)
    return out


def matches(shown, printed, masks, columns, head=None):
    """None when the printed lines match the shown ones, else what differs."""
    shown, printed = mask_columns(shown, columns), mask_columns(printed, columns)
    if head:
        shown, printed = shown[:head], printed[:head]
    i = j = 0
    while i < len(shown):
        if shown[i].strip() == "...":
            if i + 1 == len(shown):
                return None
            want = mask_line(shown[i + 1], masks)
            while j < len(printed) and mask_line(printed[j], masks) != want:
                j += 1
            if j == len(printed):
                return "no line like %r after the '...'" % shown[i + 1]
            i += 1
            continue
        if j >= len(printed):
            return "the output ends before the shown line %r" % shown[i]
        if mask_line(shown[i], masks) != mask_line(printed[j], masks):
            return "shown:   %r\n    printed: %r" % (shown[i], printed[j])
        i += 1
        j += 1
    if j < len(printed):
        return "the output goes on after the shown lines: %r" % printed[j]
    return None


def command_lines(text):
    """The commands of a block: each line, joined with those it continues (a trailing backslash)."""
    cmds, cur = [], ""
    for line in text:
        cur += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            cmds.append(cur.strip())
            cur = ""
    return cmds


# the programs a page names without a path (installed, or on the PATH), under BUILD
PROGRAMS = {"least_squares": "examples/least_squares/least_squares", "fashion_mnist": "examples/fashion_mnist/fashion_mnist",
            "cocod-coordinator": "tools/cocod-coordinator"}


def localize(cmd, args, spec):
    """A page's command as this check runs it: the sample's `replace` first, then build/test/ (and
    build/demo/, ...) as BUILD, a program named without a path as BUILD's, scripts/ and benchmarks/
    as ROOT's (the commands run in WORK), and Open MPI's root flags added to mpiexec as root."""
    for a, b in spec.get("replace", {}).items():
        cmd = cmd.replace(a, b.format(WORK=args.work, ROOT=args.root))
    cmd = re.sub(r"(?<![\w/])build/(test|demo|dev|bench)/", args.build + "/", cmd)
    cmd = re.sub(r"^(%s)(?![\w-])" % "|".join(map(re.escape, PROGRAMS)),
                 lambda m: os.path.join(args.build, PROGRAMS[m.group(1)]), cmd)
    cmd = re.sub(r"(?<![\w/.-])(scripts|benchmarks)/", args.root + r"/\1/", cmd)
    if cmd.startswith("mpiexec ") and os.geteuid() == 0:
        flags = [f for f in ("--allow-run-as-root", "--oversubscribe") if f not in cmd.split(" #")[0].split()]
        cmd = " ".join(["mpiexec"] + flags) + cmd[len("mpiexec"):]
    return cmd


def run_shell(cmds, args, stream, timeout=120, cwd=None, env=None):
    """Runs each command in bash (in cwd, else WORK); (the lines printed, None) or (None, what failed).
    A command still running after `timeout` seconds is ended with everything it started."""
    out = []
    for c in cmds:
        p = subprocess.Popen(["bash", "-c", c], cwd=cwd or args.work, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if stream == "all" else subprocess.DEVNULL,
                             text=True, start_new_session=True, env=env)
        try:
            stdout, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            stdout, _ = p.communicate()
            return None, "`%s` ran for more than %d s:\n%s" % (c, timeout, stdout[-2000:])
        finally:
            try:  # (what it left running in the background)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if p.returncode != 0:
            return None, "`%s` exited with %d:\n%s" % (c, p.returncode, stdout[-2000:])
        out += stdout.rstrip("\n").split("\n") if stdout else []
    return out, None


def as_script(cmds):
    """Commands as one bash script: a failing command or `wait` ends it, and what it started in the
    background and left running is ended with it."""
    return "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(cmds) + "\n"


def block_commands(args, page, first, skip=None):
    """The commands of the block of `page` whose first line is `first`, but those matching `skip`."""
    block = next((b for b in blocks_of(args.root, page) if b.text and b.text[0] == first), None)
    if block is None:
        return None
    return [c for c in command_lines(block.text) if not (skip and re.search(skip, c))]


def check_sample(name, block, prev, args):
    spec = SAMPLES[name]
    missing = [n for n in spec.get("needs", []) if not os.path.exists(os.path.join(args.build, n))]
    if missing:
        return "skipped", "%s is not built" % missing[0]
    tools = [t for t in spec.get("needs_tools", []) if not shutil.which(t)]
    if tools:
        return "skipped", "%s is not installed" % tools[0]
    if spec.get("needs_root") and os.geteuid() != 0:
        return "skipped", "it needs root"
    cwd = spec.get("cwd") and os.path.join(args.work, spec["cwd"])
    env = dict(os.environ, **{k: v.format(WORK=args.work) for k, v in spec.get("env", {}).items()})
    for step in spec.get("setup", []):
        if isinstance(step, str):
            setup, where = [step.format(WORK=args.work, ROOT=args.root, BUILD=args.build)], args.work
        else:  # another block's commands, run from the root of the clone
            setup, where = block_commands(args, step["page"], step["first"], step.get("skip")), args.root
            if setup is None:
                return "failed", "setup: %s has no block that starts with %r" % (step["page"], step["first"])
            setup = [localize(c, args, spec) for c in setup]
        _, err = run_shell(setup, args, "all", spec.get("timeout", 120), where, env)
        if err:
            return "failed", "setup: " + err
    shown, cmds = block.text, []
    if spec["cmd"] == "block" or spec.get("cmd_from") == "block":
        cmds = command_lines(block.text)
        shown = None
    elif spec["cmd"] == "inline" or spec.get("cmd_from") == "inline":
        end = next((i for i, line in enumerate(block.text) if not line.endswith("\\")), len(block.text) - 1) + 1
        cmds = command_lines(block.text[:end])
        shown = block.text[end:]
    elif spec["cmd"] == "previous":
        if prev is None or prev.lang:
            return "failed", "no command block before it"
        cmds = command_lines(prev.text)
    if isinstance(spec["cmd"], list):
        cmds, own = [localize(c, args, spec) for c in cmds], spec["cmd"]
        for i, c in reversed(list(enumerate(cmds))):  # ({CMD10} before {CMD1})
            own = [o.replace("{CMD%d}" % (i + 1), c) for o in own]
        cmds = [o.replace("{CMD}", cmds[0] if cmds else "").replace("{BUILD}", args.build)
                 .replace("{WORK}", args.work) for o in own]
    else:
        cmds = [localize(c, args, spec) for c in cmds]
    if spec.get("script"):
        cmds = [as_script(cmds)]
    printed, err = run_shell(cmds, args, spec.get("stream", "out"), spec.get("timeout", 120), cwd, env)
    if err:
        return "failed", err
    for a, b in spec.get("replace", {}).items():  # the paths as the page shows them
        printed = [line.replace(b.format(WORK=args.work, ROOT=args.root), a) for line in printed]
    if shown is None:
        expect = [spec["expect"]] if isinstance(spec["expect"], str) else spec["expect"]
        missing = [e for e in expect if not any(re.search(e, line) for line in printed)]
        return ("ok", "%d command(s) ran" % len(cmds)) if not missing else ("failed", "no line matches %r:\n%s" % (
            missing[0], "\n".join(printed[-20:])))
    diff = matches(shown, printed, spec.get("mask", []), spec.get("columns", []), spec.get("head"))
    return ("failed", diff) if diff else ("ok", "%d command(s)" % len(cmds))


HEADERS = ("#include <chrono>\n#include <cstdio>\n#include <span>\n#include <stdexcept>\n#include <string>\n#include <vector>\n"
           "#include <cocod.hpp>\n#include <cocod/callbacks/progress_bar.hpp>\n#include <cocod/checkpoint.hpp>\n")


def compile_program(name, source, args, mpi=False):
    """Compiles `source` into WORK/name; None, or what the compiler said."""
    cpp, exe = os.path.join(args.work, name + ".cpp"), os.path.join(args.work, name)
    open(cpp, "w").write(source)
    cmd = [args.cxx, "-std=c++20", "-O1", "-I", os.path.join(args.root, "include"), "-I/usr/include/eigen3", cpp, "-o", exe,
           "-pthread"]
    if mpi:
        cmd = ["mpicxx"] + cmd[1:] + ["-lboost_mpi", "-lboost_serialization"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return None if p.returncode == 0 else "does not compile (%s):\n%s" % (cpp, p.stdout[-3000:])


def build_runs(runs, args):
    """Every marked source block, compiled: the statement blocks into one program whose first
    argument names the block to run (one compilation), the complete programs each on its own.
    Returns {name: (command, error)}."""
    built, bodies, dispatch = {}, "", ""
    for name, (block, code_blocks) in sorted(runs.items()):
        spec = RUNS[name]
        if spec.get("program"):
            if spec.get("mpi") and not (shutil.which("mpicxx") and shutil.which("mpiexec")):
                built[name] = (None, "skipped: no MPI (mpicxx, mpiexec)")
                continue
            exe = os.path.join(args.work, name)
            err = compile_program(name, HEADERS + spec.get("prefix", "") + "\n".join(block.text) + "\n", args, spec.get("mpi"))
            run = [exe] if not spec.get("mpi") else (
                ["mpiexec"] + (["--allow-run-as-root", "--oversubscribe"] if os.geteuid() == 0 else []) + ["-n", str(spec["mpi"]), exe])
            built[name] = (run, err)
            continue
        ident = "run_" + re.sub(r"\W", "_", name)
        uses = "\n".join("\n".join(code_blocks[u].text) for u in spec.get("uses", []))
        bodies += "namespace %s {\n%s\nvoid run() {\n%s%s\n%s}\n}  // namespace %s\n" % (
            ident, uses, spec.get("before", ""), "\n".join(block.text), spec.get("after", ""), ident)
        dispatch += '  if (which == "%s") %s::run();\n' % (name, ident)
    if dispatch:
        source = HEADERS + bodies + "int main(int argc, char** argv) {\n  const std::string which = argc > 1 ? argv[1] : \"\";\n" + \
            dispatch + "}\n"
        err = compile_program("doc_snippets", source, args)
        for name in runs:
            if not RUNS[name].get("program"):
                built[name] = ([os.path.join(args.work, "doc_snippets"), name], err)
    return built


def check_run(name, output, built, args):
    spec = RUNS[name]
    if output is None or output.lang:
        return "failed", "no output block after it"
    run, err = built[name]
    if err:
        return ("skipped", err[len("skipped: "):]) if err.startswith("skipped: ") else ("failed", err)
    p = subprocess.run(run, cwd=args.work, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT if spec.get("stream") == "all" else subprocess.DEVNULL, text=True, timeout=120)
    if spec.get("rc", 0) is not None and p.returncode != spec.get("rc", 0):
        return "failed", "exited with %d:\n%s" % (p.returncode, p.stdout[-2000:])
    printed = p.stdout.rstrip("\n").split("\n")
    diff = matches(output.text, sorted_mpi(printed) if spec.get("mpi") else printed, spec.get("mask", []), [])
    return ("failed", diff) if diff else ("ok", "compiled and ran")


def sorted_mpi(lines):
    """MPI ranks print in any order: the rank lines sorted, the rest after them as printed, without
    the lines of Open MPI's runtime about itself (an "ORTE_ERROR_LOG" when it cannot show its
    abort report, which happens on a loaded machine)."""
    lines = [l for l in lines if "ORTE_ERROR_LOG" not in l]
    ranks = sorted(l for l in lines if l.startswith("rank "))
    return ranks + [l for l in lines if not l.startswith("rank ")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("build")
    p.add_argument("work")
    p.add_argument("--only")
    p.add_argument("--coverage", action="store_true", help="only check that every block is known; run nothing")
    p.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    args = p.parse_args()
    args.root, args.build, args.work = (os.path.abspath(x) for x in (args.root, args.build, args.work))
    os.makedirs(args.work, exist_ok=True)
    pages = ["README.md"] + sorted(os.path.relpath(f, args.root) for f in glob.glob(os.path.join(args.root, "docs/*.md")))
    extending = open(os.path.join(args.root, "examples/extending/CMakeLists.txt")).read()
    failed, counts = 0, {"ok": 0, "skipped": 0, "listed": 0, "failed": 0}
    seen_samples, seen_runs, seen_listed = set(), set(), set()
    runs = {}  # every marked source block, compiled once before the checks
    for page in pages:
        blocks = blocks_of(args.root, page)
        code_blocks = {b.marker[1]: b for b in blocks if b.marker and b.marker[0] == "code"}
        for b in blocks:
            if b.marker and b.marker[0] == "run" and b.marker[1] in RUNS and (not args.only or b.marker[1] == args.only):
                runs[b.marker[1]] = (b, code_blocks)
    for stale in ("rounds.csv",):  # what a run writes and a later sample reads: never an earlier run's
        if os.path.exists(os.path.join(args.work, stale)):
            os.remove(os.path.join(args.work, stale))
    took = {}  # seconds each sample (and the build of the runs) took, the slowest printed at the end
    start = time.monotonic()
    built = {} if args.coverage else build_runs(runs, args)
    took["(the runs' programs, compiled)"] = time.monotonic() - start

    def report(block, state, what):
        nonlocal failed
        counts[state] += 1
        if state == "failed":
            failed += 1
        if state != "ok" or args.only:
            print("%-8s %s %s" % (state, block.where(), what))

    for page in pages:
        blocks = blocks_of(args.root, page)
        for i, b in enumerate(blocks):
            prev = blocks[i - 1] if i > 0 else None
            kind, name = b.marker or (None, None)
            if args.only and name != args.only:
                continue
            if kind == "file":
                path = os.path.join(args.root, name)
                same = os.path.exists(path) and open(path).read() == "\n".join(b.text) + "\n"
                report(b, "ok" if same else "failed", "shows %s" % name if same else "does not show %s as it is" % name)
            elif kind == "output":  # (examples/extending/CMakeLists.txt checks extending_<example>)
                example = name[len("extending_"):] if name.startswith("extending_") else None
                known = example is not None and re.search(r"foreach\(example IN ITEMS [^)]*\b%s\b" % re.escape(example), extending)
                report(b, "ok" if known else "failed", "checked by examples/extending" if known else
                       "`<!-- output: %s -->`: no example of that name in examples/extending/CMakeLists.txt" % name)
            elif kind == "sample":
                seen_samples.add(name)
                if name not in SAMPLES:
                    report(b, "failed", "sample %s: not in tests/doc_samples.py's SAMPLES" % name)
                    continue
                start = time.monotonic()
                state, what = ("ok", "not run") if args.coverage else check_sample(name, b, prev, args)
                took[name] = time.monotonic() - start
                report(b, state, "%s: %s" % (name, what))
            elif kind == "run":
                seen_runs.add(name)
                if name not in RUNS:
                    report(b, "failed", "run %s: not in tests/doc_samples.py's RUNS" % name)
                    continue
                start = time.monotonic()
                state, what = ("ok", "not run") if args.coverage else check_run(
                    name, blocks[i + 1] if i + 1 < len(blocks) else None, built, args)
                took[name] = time.monotonic() - start
                report(b, state, "%s: %s" % (name, what))
            elif kind == "code" or b.lang in SOURCE:
                continue
            elif b.lang:
                report(b, "failed", "a block in %r: write samples and commands as plain fenced blocks, source as %s" % (
                    b.lang, " or ".join(SOURCE)))
            elif prev and prev.marker and prev.marker[0] == "run":
                continue  # the output of the run before it
            elif (i + 1 < len(blocks) and blocks[i + 1].marker and blocks[i + 1].marker[0] == "sample" and
                  SAMPLES.get(blocks[i + 1].marker[1], {}).get("cmd") == "previous"):
                continue  # the command of the sample after it
            elif args.only:
                continue
            else:
                key = (page, b.text[0] if b.text else "")
                listed = LISTED.get(key) or LISTED.get((page, "*"))
                if listed:
                    counts["listed"] += 1
                    seen_listed.add(key if key in LISTED else (page, "*"))
                else:
                    report(b, "failed", "a block this check does not know (%r): mark it as a sample, or list it in"
                           " tests/doc_samples.py's LISTED with why it is not run" % (b.text[0] if b.text else ""))
    if not args.only:
        for name in sorted(set(SAMPLES) - seen_samples) + sorted(set(RUNS) - seen_runs):
            print("failed   %s: in tests/doc_samples.py but no page marks it" % name)
            failed += 1
        for page, first in sorted(set(LISTED) - seen_listed):
            print("failed   %s: LISTED names a block that is not there any more: %r" % (page, first[:70]))
            failed += 1
    print("# doc samples: %d matched, %d skipped, %d listed as not run, %d failed" % (
        counts["ok"], counts["skipped"], counts["listed"], failed))
    if not args.coverage:
        print("# the slowest: " + ", ".join("%s %.0f s" % (n, t) for n, t in sorted(took.items(), key=lambda x: -x[1])[:8]))
    if not args.only:
        print("# listed as not run:")
        for (page, first), why in sorted(LISTED.items()):
            print("#   %s: %s: %s" % (page, first[:60], why))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
