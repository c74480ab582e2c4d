#!/usr/bin/env python3
"""bench/paper_scale.py: ddbench scale's routes against the DreamDDP paper's
published sync times (../shared/profiles/gpt2-*), which give the world size.

The paper's profiles have no sizes; GPT-2 small's are known from the module
names (wte 50257 x 768, c_attn 768 x 2304 + 2304, ...). For each module with
parameters, one single-layer profile (its size, no backward) goes through
`ddbench scale --json`, whose ddp time is then that layer's sync time alone.
The intra-node rate is fitted once, from gpt2-8-10gbit (8 GPUs, one node:
every route is the ring within it, so B_intra = 2(8-1)/8 M / t for wte);
gpt2-16-1gbit and gpt2-16-5gbit (16 GPUs) are then predicted as 2 nodes of
8 under each route at 1 and 5 Gbit/s. Prints measured / modeled per module
kind and for the whole model. No network: seconds.
"""
import json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)
shared = os.environ.get("DDTEST_SHARED", os.path.join(top, "..", "shared"))
fixtures = os.path.join(top, "tests", "fixtures")
# The published profiles; the repository carries them in tests/fixtures.
profiles = os.environ.get("PROFILES") or next(
    d for d in (os.path.join(shared, "profiles"), os.path.join(fixtures, "profiles"))
    if os.path.isdir(d) or d.startswith(fixtures))
ddbench = os.environ.get("DDBENCH", os.path.join(os.environ.get("BUILDDIR", top), "tools", "ddbench"))

D, V, CTX = 768, 50257, 1024
SIZES = {"wte": V * D, "wpe": CTX * D, "ln_1": 2 * D, "ln_2": 2 * D, "ln_f": 2 * D,
         "c_attn": D * 3 * D + 3 * D, "attn.c_proj": D * D + D, "c_fc": D * 4 * D + 4 * D,
         "mlp.c_proj": 4 * D * D + D, "lm_head": V * D}


def kind(name):
    for k in SIZES:
        if name.endswith(k):
            return k
    return None


def comm(profile):
    d = os.path.join(profiles, profile)
    f = [x for x in os.listdir(d) if x.startswith("comm")][0]
    return json.load(open(os.path.join(d, f)))


def model(params, gpus, per_node, inter, intra):
    """ddbench scale's sync time of one layer of params f32 under each route."""
    with tempfile.TemporaryDirectory() as t:
        json.dump({"x": 0.0}, open(os.path.join(t, "bp_x.json"), "w"))
        json.dump({"x": params}, open(os.path.join(t, "sizes_x.json"), "w"))
        out = subprocess.run([ddbench, "scale", t, "--gpus", str(gpus), "--per-node",
                              str(per_node), "--inter", str(inter), "--intra", str(intra),
                              "--aggregators", "1", "--json"],
                             check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {route: r[route]["ddp"] for route in ("ring", "hierarchical")}


def main():
    ten = comm("gpt2-8-10gbit")
    intra = 2 * 7 / 8 * SIZES["wte"] * 4 / ten["transformer.wte"]
    print(f"B_intra fitted from gpt2-8-10gbit's wte: {intra / 1e9:.2f} GB/s\n")
    print("| profile | module | paper s | ring s | hierarchical s | paper ÷ hierarchical |")
    print("|---|---|---|---|---|---|")
    for profile, gpus, inter in (("gpt2-8-10gbit", 8, 10e9 / 8), ("gpt2-16-1gbit", 16, 1e9 / 8),
                                 ("gpt2-16-5gbit", 16, 5e9 / 8)):
        c = comm(profile)
        tot = {"paper": 0.0, "ring": 0.0, "hierarchical": 0.0}
        seen = {}
        for name, t in c.items():
            k = kind(name)
            if k is None or t != t:
                continue
            m = seen.get(k) or model(SIZES[k], gpus, 8, inter, intra)
            seen[k] = m
            tot["paper"] += t
            tot["ring"] += m["ring"]
            tot["hierarchical"] += m["hierarchical"]
            if k in ("wte", "c_attn", "c_fc", "mlp.c_proj") and (".h.0." in name or "." not in name[12:]):
                print(f"| {profile} | {name} | {t:.4f} | {m['ring']:.4f} | {m['hierarchical']:.4f} |"
                      f" {t / m['hierarchical']:.2f} |")
        print(f"| {profile} | whole model | {tot['paper']:.3f} | {tot['ring']:.3f} |"
              f" {tot['hierarchical']:.3f} | {tot['paper'] / tot['hierarchical']:.2f} |")


if __name__ == "__main__":
    main()
