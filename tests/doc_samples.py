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
  - listed in LISTED: commands or settings with no output to compare, or a sample this check
    skips, with the reason.
A block that is none of these fails the check, so that a new sample cannot go unchecked.

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
import subprocess
import sys

DATE = r"\d{4}-\d\d-\d\d( \d\d:\d\d)?"
SOURCE = ("cpp", "cmake")  # the languages of source blocks; a block of another language fails the check


def timings(*units):
    return [r"-?\d+(\.\d+)?(e[-+]?\d+)? ?" + re.escape(u) for u in units]


# name: how to run the sample and what to mask.
#   cmd: "inline" (the block starts with the command: its first line and the lines that continue it
#        with a trailing backslash; the rest is the output), "previous" (the fenced block before
#        this one holds the command, one per line), "block" (the block is commands whose output
#        the page does not show: they must succeed, and `expect` must match what they print), or
#        a list of shell commands of the test's own
#   stream: "out" (stdout) or "all" (stdout and stderr)
#   mask: regexes whose matches are masked in both; columns: table columns masked (by header name)
#   needs: paths under BUILD the sample runs, needs_tools: programs (the sample is skipped, saying so,
#          without them); replace: text of the commands replaced ({WORK}, {ROOT}), and back in the output
#   head: compare only the first lines of the block and the output
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
    # MPICH's recipe, run as written (into WORK): it must build and train, printing the digest
    "mpich-recipe": dict(cmd="block", expect=r"model digest CoCoD-SGD: [0-9a-f]{16}", timeout=600,
                         replace={"-S .": "-S {ROOT}", "build/mpich": "{WORK}/mpich"},
                         needs_tools=["mpicxx.mpich", "mpiexec.mpich"]),
    # the first rows of the CSV that the run api-callbacks wrote (in WORK)
    "api-csv": dict(cmd=["head -4 rounds.csv"], mask=[r"(,[^,]*){4}(?=,\d+,\d+$)"]),  # the four times
    "resume": dict(cmd=["{CMD}", "echo '# the same command with --resume:'", "{CMD} --resume"],
                   cmd_from="inline", replace={"/tmp/ck": "{WORK}/ck"}, needs=["examples/least_squares/least_squares"]),
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

# (page, first line of the block): "commands" (nothing printed to compare: commands, settings, a
# layout) or why the sample is not run here.
LONG = "a benchmark's table: minutes to hours of timed runs, dated, with the command above it"
LISTED = {
    ("README.md", "sudo apt-get install -y cmake g++ libeigen3-dev      # as root: without sudo"): "commands",
    ("README.md", 'cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$HOME/.local"'):
        "commands (the quick start; package.quickstart and package.quickstart_mpi build and run it, checking what it prints)",
    ("docs/benchmarks.md", "*"): LONG,
    ("docs/cuda.md", "*"): "commands (a build and a GPU script; no GPU here)",
    ("docs/elastic.md", "*"): "commands (processes on loopback with a coordinator; example.elastic runs them and checks what they "
                              "print), and measured tables (benchmarks/elastic.sh and the allreduce benchmark print them: one "
                              "run's numbers, each with its command)",
    ("docs/language-model.md", "*"): "commands (the demo and the benchmark: minutes of training) and " + LONG,
    ("docs/fashion-mnist.md", "git clone <cocod> && cd cocod && scripts/demo"): "commands",
    ("docs/fashion-mnist.md", "awk -F, 'NR>1 && $5>=0.88 && !($1 in t) {t[$1]=$4} END {for (k in t) print k, t[k]}' results/demo/curve.csv"):
        "commands (reads the demo's curve)",
    ("docs/fashion-mnist.md", "== one exchange here costs 2.0 local steps; the fastest to accuracy against PyTorch on every link"):
        "the demo's closing line: scripts.demo_recommendation prints it and compares",
    ("docs/fashion-mnist.md", "build/demo/examples/fashion_mnist/fashion_mnist --algo cocod,local --workers 4 --epochs 0.2 --trace trace.json --no-progress"):
        "commands (writes a trace file)",
    ("docs/mpi.md", "cocod::comm::Mpi: workers called mismatched collectives (rank 0: all_reduce of 11 doubles; ranks 1, 2: all_reduce of 12 doubles)"):
        "error messages without a command: test_mpi raises them and checks their words",
    ("docs/mpi.md", "cocod: rank 0 failed: cocod::comm::Mpi: rank 1 returned while rank 0 calls all_reduce of 16 doubles (the workers called different sequences of collectives)"):
        "an error message without a command: test_mpi_abort checks its words",
    ("docs/mpi.md", "cocod: rank 0 failed: cocod::comm::Mpi: no progress from rank 2 for 2 s: rank 0 waits in all_reduce of 1000 doubles, which it has not begun (...)"):
        "error messages without a command: test_mpi_stall checks their words",
    ("docs/guide.md", "cmake --preset dev && cmake --build build/dev -j2 && ctest --test-dir build/dev -j2"): "commands",
    ("docs/mpi.md", "mpiexec -n 4 ./app                                   # one worker per process"): "commands",
    ("docs/mpi.md", "cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Release -DCOCOD_BUILD_TESTS=OFF"): "commands",
    ("docs/mpi.md", "# hosts"): "commands (a host file)",
    ("docs/mpi.md", "mpiexec --hostfile hosts -n 8 --map-by ppr:4:node --bind-to core ./app"): "commands (a cluster)",
    ("docs/mpi.md", "benchmarks/mpi_progress.sh 5"): LONG,
    ("docs/mpi.md", "scripts/shaped-link [--rate 1gbit] [--burst 256kb] [--queue 100ms] -- COMMAND..."): "commands",
    ("docs/overlap.md", "cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Release -DCOCOD_BUILD_TESTS=OFF"): "commands",
    ("docs/reliability.md", "checkpoints/round-000000000050/worker-0.ckpt   one file per worker"): "a layout (test_checkpoint writes it)",
    ("docs/reliability.md", "cocod: a NaN or an infinity in round 2 (step 12): rank 1 had a non-finite loss at step 9,"):
        "an error message without a command: test_non_finite checks its words",
    ("docs/reliability.md", "build/test/benchmarks/reliability --parameters 1048576 --rounds 20 --soak-rounds 100000"):
        "commands (a benchmark: minutes)",
    ("docs/torch.md", "cocod::torch::ModuleModel: parameter 'bias2' is Double; every parameter must be Float (convert"):
        "an error message without a command: test_torch checks its words",
    ("docs/torch.md", "build/test/tests/test_torch -tc='a step*' -s"): "commands (test_torch runs it)",
    ("docs/torch.md", "scripts/demo --model cnn                  # 4 workers, 1 Gbit/s link, every algorithm, 12 epochs"): "commands",
    ("docs/torch.md", "build/test/examples/torch_fashion_mnist/torch_fashion_mnist --model cnn --algo all --workers 4 --no-progress"):
        "commands (their accuracies, in the table after them, take an hour of runs)",
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


def localize(cmd, args, spec):
    cmd = re.sub(r"(?<![\w/])build/(test|demo|dev|bench)/", args.build + "/", cmd)
    cmd = re.sub(r"^least_squares\b", args.build + "/examples/least_squares/least_squares", cmd)
    for a, b in spec.get("replace", {}).items():
        cmd = cmd.replace(a, b.format(WORK=args.work, ROOT=args.root))
    if cmd.startswith("mpiexec ") and os.geteuid() == 0:
        cmd = "mpiexec --allow-run-as-root --oversubscribe " + cmd[len("mpiexec "):]
    return cmd


def run_shell(cmds, args, stream, timeout=120):
    out = []
    for c in cmds:
        p = subprocess.run(["bash", "-c", c], cwd=args.work, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT if stream == "all" else subprocess.DEVNULL,
                           text=True, timeout=timeout)
        if p.returncode != 0:
            return None, "`%s` exited with %d:\n%s" % (c, p.returncode, p.stdout[-2000:])
        out += p.stdout.rstrip("\n").split("\n") if p.stdout else []
    return out, None


def check_sample(name, block, prev, args):
    spec = SAMPLES[name]
    missing = [n for n in spec.get("needs", []) if not os.path.exists(os.path.join(args.build, n))]
    if missing:
        return "skipped", "%s is not built" % missing[0]
    tools = [t for t in spec.get("needs_tools", []) if not shutil.which(t)]
    if tools:
        return "skipped", "%s is not installed" % tools[0]
    shown, cmds = block.text, []
    if spec["cmd"] == "block":
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
        base = cmds[0] if cmds else ""
        cmds = [c.replace("{CMD}", base).replace("{BUILD}", args.build) for c in spec["cmd"]]
    cmds = [localize(c, args, spec) for c in cmds]
    printed, err = run_shell(cmds, args, spec.get("stream", "out"), spec.get("timeout", 120))
    if err:
        return "failed", err
    for a, b in spec.get("replace", {}).items():  # the paths as the page shows them
        printed = [line.replace(b.format(WORK=args.work, ROOT=args.root), a) for line in printed]
    if shown is None:
        found = any(re.search(spec["expect"], line) for line in printed)
        return ("ok", "%d command(s) ran" % len(cmds)) if found else ("failed", "no line matches %r:\n%s" % (
            spec["expect"], "\n".join(printed[-20:])))
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
    built = {} if args.coverage else build_runs(runs, args)

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
                state, what = ("ok", "not run") if args.coverage else check_sample(name, b, prev, args)
                report(b, state, "%s: %s" % (name, what))
            elif kind == "run":
                seen_runs.add(name)
                if name not in RUNS:
                    report(b, "failed", "run %s: not in tests/doc_samples.py's RUNS" % name)
                    continue
                state, what = ("ok", "not run") if args.coverage else check_run(
                    name, blocks[i + 1] if i + 1 < len(blocks) else None, built, args)
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
    if not args.only:
        print("# listed as not run:")
        for (page, first), why in sorted(LISTED.items()):
            print("#   %s: %s: %s" % (page, first[:60], why))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
