#!/usr/bin/python3
"""What users would pick instead: the Fashion-MNIST MLP of examples/fashion_mnist with PyTorch's
DistributedDataParallel (S-SGD), PostLocalSGDOptimizer + PeriodicModelAverager (Local-SGD) or
DiLoCo as torchft and OpenDiLoCo run it, gloo backend, one process per worker, one thread each,
as cocod's in-process or MPI workers.

DiLoCo (--algo diloco): every worker keeps the outer model z (the same on every worker) and an
outer optimizer, torch.optim.SGD(lr 0.7, momentum 0.9, nesterov), beside the inner SGD (the same
momentum as the other algorithms, its state never reset). Every k steps each worker's
pseudo-gradient z - x is all-reduced (float32, or float16 with --pseudo-gradient fp16 as
OpenDiLoCo does) and averaged, the outer optimizer steps z with it, and every worker continues
from z. A last partial round is averaged exactly, with no outer step (as cocod's Local-SGD with
an outer optimizer finishes).

The same as the cocod example: 784-256-128-10 with ReLU, softmax cross-entropy. It uses the same
He-uniform initial weights from cocod::Rng(seed) in Eigen's column-major order, the same
standardized inputs and the same IID shards. Each worker draws the same batches: cocod's
BatchSampler with the same shuffles. The optimizer is the same too: lr with cosine decay over the
run, momentum 0.9, batch 64 per worker. Every half epoch (--curve-every) rank 0's parameters are
copied and evaluated after the run, off the clock; under PostLocalSGD and DiLoCo at the first
round end after it, where every worker holds the same model, so that each point is the
consensus. The last point is the final model. The run also reports the seconds it spent communicating (DDP: the step time beyond the
compute measured before the run; PostLocalSGD: the averaging steps' optimizer step beyond the
median other one; DiLoCo: its outer steps) and their share f of the run's time.

  torch_mlp.py --algo ddp|postlocal|diloco --workers N [--period K] [--epochs E] [--curve FILE]
               [--model eigen-mlp|mlp|cnn --init FILE] [--name NAME] [--bucket-cap-mb MB]
               [--outer-lr 0.7 --outer-momentum 0.9 --pseudo-gradient fp32|fp16]
With --model mlp or cnn it trains the libtorch example's networks (examples/torch_fashion_mnist)
from the weights `torch_fashion_mnist --model NAME --save-init FILE` wrote, so that both sides
start alike and compute alike (the same Debian build of torch, one thread per worker).
Run it inside scripts/shaped-link to put gloo on the tbf-shaped loopback.
"""
import argparse
import gzip
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MASK = (1 << 64) - 1


class Rng:
    """cocod::Rng: xoshiro256** seeded through splitmix64; below() is Lemire's method."""

    def __init__(self, seed):
        self.s = []
        x = seed & MASK
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK

    def next(self):
        s = self.s
        result = (self.rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def below(self, bound):
        m = self.next() * bound
        low = m & MASK
        if low < bound:
            threshold = ((1 << 64) - bound) % bound
            while low < threshold:
                m = self.next() * bound
                low = m & MASK
        return m >> 64

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53


class BatchSampler:
    """cocod::BatchSampler: a fresh permutation per pass, batches taken in order across passes."""

    def __init__(self, samples, seed, rank):
        self.rng = Rng(seed ^ ((0x5851F42D4C957F2D * (rank + 1)) & MASK))
        self.order = list(range(samples))
        self.shuffle()
        self.position = 0

    def shuffle(self):
        o = self.order
        for i in range(len(o), 1, -1):
            j = self.rng.below(i)
            o[i - 1], o[j] = o[j], o[i - 1]

    def next(self, size):
        batch = []
        for _ in range(size):
            if self.position == len(self.order):
                self.shuffle()
                self.position = 0
            batch.append(self.order[self.position])
            self.position += 1
        return batch


def load_idx(images, labels):
    with gzip.open(images) as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051, images + ": bad magic"
        x = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)
    with gzip.open(labels) as f:
        magic, m = struct.unpack(">II", f.read(8))
        assert magic == 2049 and m == n, labels + ": bad magic or count"
        y = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)
    return x, y


def shard(n, rank, workers, seed):
    """examples/fashion_mnist/models.hpp: shard() (IID)."""
    order = list(range(n))
    rng = Rng(seed)
    for i in range(n, 1, -1):
        j = rng.below(i)
        order[i - 1], order[j] = order[j], order[i - 1]
    per = n // workers
    return order[per * rank: per * (rank + 1)]


def network(seed):
    sizes = [784, 256, 128, 10]
    layers = []
    rng = Rng(seed)
    for l in range(3):
        lin = torch.nn.Linear(sizes[l], sizes[l + 1])
        a = math.sqrt(6.0 / sizes[l])
        # cocod fills W (out x in) in Eigen's column-major order
        w = np.array([(rng.uniform() * 2 - 1) * a for _ in range(sizes[l] * sizes[l + 1])], dtype=np.float32)
        lin.weight.data = torch.from_numpy(w.reshape(sizes[l], sizes[l + 1]).T.copy())
        lin.bias.data.zero_()
        layers += [lin, torch.nn.ReLU()] if l < 2 else [lin]
    return torch.nn.Sequential(*layers)


def torch_network(name, init):
    """examples/torch_fashion_mnist/nets.hpp's networks, starting from the parameters that
    `torch_fashion_mnist --model NAME --save-init FILE` wrote (float32, in parameter order)."""
    nn = torch.nn
    if name == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5), nn.ReLU(),
                            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    flat = np.fromfile(init, dtype=np.float32)
    count = sum(p.numel() for p in net.parameters())
    if flat.size != count:
        sys.exit("torch_mlp.py: --init %s holds %d floats, the %s has %d parameters" % (init, flat.size, name, count))
    offset = 0
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(flat[offset:offset + p.numel()].copy()).view_as(p))
            offset += p.numel()
    return net


def compute_per_step(model, X, Y, args, rank):
    """One local step's compute, as cocod's examples measure it before their runs: 40 steps of
    SGD on a copy of the model, every worker at once, no communication."""
    import copy
    local = copy.deepcopy(model)
    opt = torch.optim.SGD(local.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    sampler = BatchSampler(len(Y), args.seed, rank)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(40):
        idx = torch.tensor(sampler.next(args.batch))
        opt.zero_grad(set_to_none=True)
        loss_fn(local(X[idx]), Y[idx]).backward()
        opt.step()
    return (time.perf_counter() - start) / 40


def allreduce_time(model, dtype=torch.float32, repeats=3):
    """One all-reduce of the model's size on this process group, as the runs below make them
    (gloo, one flat tensor of DTYPE): the median of REPEATS after a warm-up, every worker at once."""
    flat = torch.zeros(sum(p.numel() for p in model.parameters()), dtype=dtype)
    dist.all_reduce(flat)
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(flat)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


class DiLoCo:
    """DiLoCo's outer loop as torchft's and OpenDiLoCo's users run it: the outer model z and its
    optimizer (SGD with Nesterov momentum), the pseudo-gradient z - x all-reduced in DTYPE and
    averaged, the outer step, and every worker continuing from z. The inner optimizer's state is
    kept."""

    def __init__(self, model, args, dtype):
        self.model = model
        self.workers = args.workers
        self.dtype = dtype
        self.z = [p.detach().clone() for p in model.parameters()]
        for z in self.z:
            z.grad = torch.zeros_like(z)
        self.opt = torch.optim.SGD(self.z, lr=args.outer_lr, momentum=args.outer_momentum,
                                   nesterov=args.outer_momentum > 0)
        self.flat = torch.zeros(sum(z.numel() for z in self.z), dtype=dtype)

    @torch.no_grad()
    def outer_step(self):
        offset = 0
        for z, p in zip(self.z, self.model.parameters()):  # one all-reduce of the whole pseudo-gradient
            self.flat[offset:offset + z.numel()].copy_((z - p).view(-1))
            offset += z.numel()
        dist.all_reduce(self.flat)
        offset = 0
        for z in self.z:
            z.grad.copy_(self.flat[offset:offset + z.numel()].view_as(z).to(z.dtype) / self.workers)
            offset += z.numel()
        self.opt.step()
        for z, p in zip(self.z, self.model.parameters()):
            p.copy_(z)


def worker(rank, args, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    d = args.data
    x, y = load_idx(d + "/train-images-idx3-ubyte.gz", d + "/train-labels-idx1-ubyte.gz")
    tx, ty = load_idx(d + "/t10k-images-idx3-ubyte.gz", d + "/t10k-labels-idx1-ubyte.gz")
    v = x.astype(np.float64) / 255.0
    mean, dev = v.mean(), v.std()
    mine = shard(len(y), rank, args.workers, args.seed)
    X = torch.from_numpy(((x[mine] / 255.0 - mean) / dev).astype(np.float32))
    Y = torch.from_numpy(y[mine])
    TX = torch.from_numpy(((tx / 255.0 - mean) / dev).astype(np.float32))
    TY = torch.from_numpy(ty)
    if args.model == "cnn":
        X, TX = X.view(-1, 1, 28, 28), TX.view(-1, 1, 28, 28)

    model = network(args.seed) if args.model == "eigen-mlp" else torch_network(args.model, args.init)
    step_s = compute_per_step(model, X, Y, args, rank)
    fp16 = args.algo == "diloco" and args.pseudo_gradient == "fp16"
    reduce_s = allreduce_time(model, torch.float16 if fp16 else torch.float32)
    if rank == 0:
        print("# PyTorch (%s): one local step c = %.3f ms (40 steps, every worker at once, %d thread); "
              "one all-reduce of the model m = %.3f ms (gloo, %s, median of 3)" % (
                  args.model, 1e3 * step_s, torch.get_num_threads(), 1e3 * reduce_s, "float16" if fp16 else "float32"))
    steps_per_epoch = len(mine) * args.workers / (args.batch * args.workers)
    total = math.ceil(args.epochs * steps_per_epoch)
    if args.algo == "ddp":
        # DDP caps its first bucket (the last gradients of the backward pass) at 1 MiB apart from
        # bucket_cap_mb; a smaller --bucket-cap-mb caps that one too
        dist._DEFAULT_FIRST_BUCKET_BYTES = min(dist._DEFAULT_FIRST_BUCKET_BYTES, int(args.bucket_cap_mb * 2 ** 20))
        net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    elif args.algo == "postlocal":
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        from torch.distributed.optim import PostLocalSGDOptimizer
        # Local SGD from the first step: no gradient all-reduce (no DDP wrapper; the post-local
        # SGD DDP hook's subgroups need CUDA), the models averaged every k steps (warmup 0).
        net = model
        opt = PostLocalSGDOptimizer(optim=torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9),
                                    averager=PeriodicModelAverager(period=args.period, warmup_steps=0))
    else:
        net = model
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
        diloco = DiLoCo(model, args, torch.float16 if fp16 else torch.float32)
    sched = torch.optim.lr_scheduler.LambdaLR(opt.optim if args.algo == "postlocal" else opt,
                                              lambda t: (1 + math.cos(math.pi * t / total)) / 2 if t < total else 0.0)
    sampler = BatchSampler(len(mine), args.seed, rank)
    loss_fn = torch.nn.CrossEntropyLoss()
    snapshots = []
    every = max(1, round(steps_per_epoch * args.curve_every))
    # A curve point is the consensus: every step under DDP; under PostLocalSGD the first step at
    # or after each `every` at which the averager averaged. PeriodicModelAverager (warmup 0)
    # averages after loop steps 0, k, 2k, ... (its own count starts at 0 and averages when it is
    # a multiple of the period), so there every worker holds the same model. DiLoCo's outer step
    # follows loop steps k - 1, 2k - 1, ...
    next_point = every
    step_times = []  # PostLocalSGD: each optimizer step's seconds, and whether it averaged
    comm_s = 0.0  # seconds spent communicating: DiLoCo's outer steps, the final consensus
    dist.barrier()
    start = time.perf_counter()
    for step in range(total):
        idx = torch.tensor(sampler.next(args.batch))
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(X[idx]), Y[idx])
        loss.backward()
        t0 = time.perf_counter()
        opt.step()
        if args.algo == "postlocal":
            step_times.append((time.perf_counter() - t0, step % args.period == 0))
        sched.step()
        if args.algo == "diloco" and (step + 1) % args.period == 0:
            t0 = time.perf_counter()
            diloco.outer_step()
            comm_s += time.perf_counter() - t0
        if args.algo == "ddp":
            averaged = True
        elif args.algo == "postlocal":
            averaged = step % args.period == 0
        else:
            averaged = (step + 1) % args.period == 0
        if step + 1 >= next_point and averaged and step + 1 < total:
            next_point += every * ((step + 1 - next_point) // every + 1)
            if rank == 0:
                snapshots.append((time.perf_counter() - start, (step + 1) / steps_per_epoch,
                                  [p.detach().clone() for p in model.parameters()]))
    if args.algo == "ddp" and rank == 0:  # how DDP split the gradients into all-reduces
        data = net._get_ddp_logging_data()  # the buckets as rebuilt after the first step
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes", "?")
        print("# PyTorch DDP: buckets of %s bytes, in the order they are all-reduced (--bucket-cap-mb %g)" % (
            sizes, args.bucket_cap_mb))
    # the consensus at the end, as cocod's finish() (DiLoCo: only after a partial round)
    if args.algo == "postlocal" or args.algo == "diloco" and total % args.period != 0:
        t0 = time.perf_counter()
        for p in model.parameters():
            dist.all_reduce(p.data)
            p.data /= args.workers
        comm_s += time.perf_counter() - t0
    dist.barrier()
    wall = time.perf_counter() - start
    if args.algo == "ddp":  # the step beyond its compute measured before the run
        comm_s = max(0.0, wall - total * step_s)
    elif args.algo == "postlocal":  # the averaging steps' optimizer step beyond the median other one
        plain = sorted(t for t, averaging in step_times if not averaging)
        usual = plain[len(plain) // 2] if plain else 0.0
        comm_s += sum(max(0.0, t - usual) for t, averaging in step_times if averaging)
    if rank == 0:
        final = [p.detach().clone() for p in model.parameters()]
        snapshots.append((wall, total / steps_per_epoch, final))
        name = args.name or {"ddp": "PyTorch DDP", "postlocal": "PyTorch PostLocalSGD", "diloco": "PyTorch DiLoCo"}[args.algo]
        rows = []
        with torch.no_grad():
            for t, epoch, params in snapshots:
                for p, s in zip(model.parameters(), params):
                    p.copy_(s)
                acc = (model(TX).argmax(1) == TY).float().mean().item()
                rows.append("%s,equal,%.6f,%.6f,%.4f" % (name, epoch, t, acc))
        with open(args.curve, "a") as f:
            f.write("\n".join(rows) + "\n")
        print("%s: %.2f epochs in %.2f s (%.2f ms/step), final test accuracy %s; communicating %.2f s (f = %.3f)" % (
            name, total / steps_per_epoch, wall, 1e3 * wall / total, rows[-1].rsplit(",", 1)[1], comm_s,
            comm_s / wall))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", choices=["ddp", "postlocal", "diloco"], required=True)
    p.add_argument("--model", choices=["eigen-mlp", "mlp", "cnn"], default="eigen-mlp",
                   help="eigen-mlp: the Eigen example's MLP and initial weights; mlp, cnn: the libtorch "
                        "example's networks, from --init")
    p.add_argument("--init", help="the initial weights of --model mlp|cnn: torch_fashion_mnist --save-init FILE")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--period", type=int, default=3, help="Local-SGD's k (cocod's --period auto picks it; pass the same)")
    p.add_argument("--epochs", type=float, default=12)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--curve", default="torch_curve.csv")
    p.add_argument("--curve-every", type=float, default=0.5)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DDP's bucket size in MB (its default: 25, and at most 1 MiB in the first bucket)")
    p.add_argument("--name", help="the run's name in --curve (default: PyTorch DDP, PostLocalSGD or DiLoCo)")
    p.add_argument("--outer-lr", type=float, default=0.7, help="DiLoCo's outer learning rate")
    p.add_argument("--outer-momentum", type=float, default=0.9, help="DiLoCo's outer Nesterov momentum (0: plain SGD)")
    p.add_argument("--pseudo-gradient", choices=["fp32", "fp16"], default="fp32",
                   help="DiLoCo: the precision its pseudo-gradients are all-reduced in (OpenDiLoCo: fp16)")
    args = p.parse_args()
    if args.model != "eigen-mlp" and not args.init:
        p.error("--model %s needs --init FILE (torch_fashion_mnist --model %s --save-init FILE)" % (args.model, args.model))
    if not os.path.exists(args.curve):
        with open(args.curve, "w") as f:
            f.write("algorithm,sampling,epoch,wall_s,test_accuracy\n")
    mp.spawn(worker, args=(args, args.port), nprocs=args.workers, join=True)


if __name__ == "__main__":
    main()
