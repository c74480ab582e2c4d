#!/usr/bin/env python3
"""bench/gen_profile.py KIND DIR [N]: writes a generated layer profile (the
format of ../shared/profiles: bp_*.json, sizes_*.json, and comm_*.json
where some modules are frozen) for the planner's and the runtime's scale
figures. Seeded: the same arguments give the same files.

  random DIR N  N layers, backward 0.1 to 2 ms, 1K to 4M parameters each
  tiny DIR N    N layers of 64 parameters, 20 us of backward each
  lora DIR      1,291 modules shaped like a LoRA fine-tune of a 56-block
                model: per block 9 frozen base modules (attention q, k, v,
                o, the MLP's gate, up and down, two norms) and LoRA A and B
                adapters (rank 8, width 4096) on the 7 projections, plus
                the embedding, the final norm and the head (frozen): 1,291
                modules, 784 of them synced (a comm file lists them, their
                times at 1 Gbit/s among 4 workers)
"""
import json, os, random, sys


def write(d, name, bp, sizes, comm=None):
    os.makedirs(d, exist_ok=True)
    json.dump(bp, open(os.path.join(d, f"bp_{name}.json"), "w"))
    json.dump(sizes, open(os.path.join(d, f"sizes_{name}.json"), "w"))
    if comm is not None:
        json.dump(comm, open(os.path.join(d, f"comm_{name}.json"), "w"))


def main():
    kind, d = sys.argv[1], sys.argv[2]
    rnd = random.Random(36)
    if kind in ("random", "tiny"):
        n = int(sys.argv[3])
        bp, sizes = {}, {}
        for i in range(n):
            name = f"l{i}"
            if kind == "random":
                bp[name] = rnd.uniform(1e-4, 2e-3)
                sizes[name] = rnd.randint(1024, 4 << 20)
            else:
                bp[name] = 20e-6
                sizes[name] = 64
        write(d, f"{kind}{n}", bp, sizes)
        return
    if kind != "lora":
        sys.exit(__doc__)
    bp, sizes, comm = {}, {}, {}
    ring = 125e6 * 4 / (2 * 3)  # bytes averaged per second, 4 workers at 1 Gbit/s
    def module(name, params, ms, synced):
        bp[name] = ms / 1e3
        if synced:
            sizes[name] = params
            comm[name] = 50e-6 + params * 4 / ring
    module("embed", 32000 * 4096, 2.0, False)
    for b in range(56):
        for m, params, ms in (("q", 4096 * 4096, 0.9), ("k", 4096 * 4096, 0.9),
                              ("v", 4096 * 4096, 0.9), ("o", 4096 * 4096, 0.9),
                              ("gate", 4096 * 11008, 2.2), ("up", 4096 * 11008, 2.2),
                              ("down", 11008 * 4096, 2.2), ("norm1", 4096, 0.05),
                              ("norm2", 4096, 0.05)):
            module(f"b{b}.{m}", params, ms, False)
            if not m.startswith("norm"):
                module(f"b{b}.{m}.lora_A", 8 * 4096, 0.04, True)
                module(f"b{b}.{m}.lora_B", 4096 * 8, 0.04, True)
    module("norm", 4096, 0.05, False)
    module("head", 4096 * 32000, 2.0, False)
    assert len(bp) == 1291 and len(comm) == 784, (len(bp), len(comm))
    write(d, "lora", bp, sizes, comm)


if __name__ == "__main__":
    main()
