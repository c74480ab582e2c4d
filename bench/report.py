#!/usr/bin/env python3
"""bench/report.py: Markdown tables (and gnuplot data) from the benchmark
scripts' JSON-lines results. Medians over rounds; ratios first, the
absolute times beside them. Reads only; stdlib only.

usage: report.py coll|train|sync|plan|frontend|accuracy|drift_cost|ttl|startup|scale RESULTS.jsonl
       report.py train-dat RESULTS.jsonl      (gnuplot: time per iteration)
       report.py ttl-dat RESULTS.jsonl        (gnuplot: val loss against time)
       report.py timeline-dat TRACE.json H    (gnuplot: one window's syncs)
"""
import json, re, statistics, sys


def load(path):
    meta, rows = {}, []
    for line in open(path):
        if line.strip():
            d = json.loads(line)
            if "meta" in d:
                meta = d["meta"]
            else:
                rows.append(d)
    return meta, rows


def rate_bytes(rate):
    """'1gbit' -> bytes per second."""
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", rate.lower())
    if m is None:
        return None  # unshaped (RATE=none): no line rate to model
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8


def median_by(rows, key, value):
    groups = {}
    for r in rows:
        if r.get(value) is not None:
            groups.setdefault(key(r), []).append(r[value])
    return {k: (statistics.median(v), len(v)) for k, v in groups.items()}


def machine(meta):
    return (f"Machine: {meta.get('cores')} cores, netcluster {meta.get('hosts')} hosts at "
            f"{meta.get('rate')} (tbf-shaped veth), {meta.get('date')}; medians of "
            f"{meta.get('rounds')} interleaved rounds.")


def fmt(x, spec=".3f"):
    return "n/a" if x is None else format(x, spec)


def coll(path):
    meta, rows = load(path)
    def name(r):
        if r.get("anchor"):
            return r["anchor"]
        n = r.get("streams")
        return "dreamddp " + r["backend"] + (f", {n} stream{'s' if n > 1 else ''}" if n else "")
    t = median_by(rows, name, "time_s")
    M, n = rows[0]["bytes"], rows[0]["world"]
    shaped = meta.get("rate") not in (None, "none")
    ring = 2 * (n - 1) / n * M / rate_bytes(meta["rate"]) if shaped else None
    torch = t.get("torch-gloo", (None, 0))[0]
    print(f"Allreduce of {M / 1e6:.0f} MB among {n} hosts. {machine(meta)}\n")
    print("| run | × PyTorch gloo | × ring limit | time (s) | algbw (MB/s) | runs |")
    print("|---|---|---|---|---|---|")
    if ring:
        print(f"| ring limit 2(n-1)/n·M/B | {fmt(ring / torch if torch else None)} | 1.000 | {ring:.3f} | {M / ring / 1e6:.0f} | |")
    for k in sorted(t, key=lambda k: (k != "torch-gloo", k)):
        v, c = t[k]
        print(f"| {k} | {fmt(v / torch if torch else None)} | {fmt(v / ring if ring else None)} | {v:.3f} | {M / v / 1e6:.0f} | {c} |")


def run_name(r):
    """A run's name: the anchor, or the strategy with its codec (ddp/fp16)."""
    if r.get("anchor"):
        return r["anchor"]
    c = r.get("compression")
    name = r["strategy"] + ("/" + c if c not in (None, "none", "default") else "")
    if r.get("aggregators") and not r.get("train"):
        name += f" @{r['aggregators']} aggregators"
    if r.get("deadline") == "backward" and "+next" in r["strategy"]:
        name += " (no forward marks)"
    if r.get("next_launch") == "backward" and "+next" in r["strategy"]:
        name += " (launched after backward)"
    if r.get("step_work"):
        name += " (step work)"
    if r.get("layer_split") == "no":
        name += " (whole layers)"
    if r.get("fill_bubbles") == "yes":
        name += " (bubbles filled)"
    if r.get("fill_bubbles") == "no":
        name += " (no bubble filling)"
    if r.get("streams_asked"):
        name += f" ({r['streams_asked']} stream{'s' if r['streams_asked'] != 1 else ''})"
    if r.get("check_finite") == "no":
        name += " (no finite check)"
    if r.get("deterministic") == "yes":
        name += " (deterministic)"
    if r.get("elastic") == "yes":
        name += f" (elastic, commit every {r.get('commit_every', 4)})"
    return name


def train_medians(rows):
    key = run_name
    return median_by(rows, key, "mean_iter_s"), median_by(rows, key, "modeled_iter_s")


def train(path):
    meta, rows = load(path)
    t, model = train_medians(rows)
    none = t.get("none", (None,))[0]
    comp = t.get("torch-compute", (None,))[0]
    tl = t.get("torch-localsgd:4", (None,))[0]
    tddp = t.get("torch-ddp", (None,))[0]
    tfp16 = t.get("torch-ddp-fp16", (None,))[0]
    torch_exposed = tl - comp if tl and comp else None
    print(f"Train simulator, gpt2-blocks at scale 0.25. {machine(meta)}")
    print("Exposed communication = time per iteration minus the compute-only run of the same"
          " code (ours: strategy none, or none with --step-work for the runs with it;"
          " PyTorch: torch_sim.py compute). Step work: train-sim --step-work, a training"
          " loop's own memory work (zero_grad, gradient accumulation, SGD step), as"
          " torch_sim.py's loop does; the modeled time does not count it.\n")
    fp16_col = tfp16 is not None
    print("| run | exposed ÷ PyTorch Local SGD's | s/iter ÷ PyTorch DDP |"
          + (" s/iter ÷ PyTorch ddp-fp16 |" if fp16_col else "")
          + " measured ÷ modeled | s/iter | modeled s/iter | exposed s/iter | runs |")
    print("|---|---|---|---|---|---|---|---|" + ("---|" if fp16_col else ""))
    order = ["torch-compute", "torch-ddp", "torch-localsgd:4", "none", "ddp", "localsgd:4",
             "plsgd:4", "dreamddp:4", "adaptive"]
    for k in sorted(t, key=lambda k: order.index(k) if k in order else 99):
        v, c = t[k]
        base = comp if k.startswith("torch-") else none
        if k.startswith("frontend-"):
            base = t.get("frontend-compute", (None,))[0]
        if k.endswith(" (step work)"):
            base = t.get("none (step work)", (None,))[0]
        exposed = v - base if base is not None else None
        m = model.get(k, (None,))[0]
        print(f"| {k} | {fmt(exposed / torch_exposed if exposed is not None and torch_exposed else None)}"
              f" | {fmt(v / tddp if tddp else None)}"
              + (f" | {fmt(v / tfp16)}" if fp16_col else "")
              + f" | {fmt(v / m if m else None)} | {v:.3f}"
              f" | {fmt(m)} | {fmt(exposed)} | {c} |")


def frontend(path):
    """bench/torch_frontend.sh: the PyTorch front end against ddbench
    train-sim (same strategy, same round) and PyTorch's Local SGD."""
    meta, rows = load(path)
    t, _ = train_medians(rows)
    med = lambda k: t.get(k, (None,))[0]  # noqa: E731
    tl, comp, fcomp = med("torch-localsgd:4"), med("torch-compute"), med("frontend-compute")
    torch_exposed = tl - comp if tl and comp else None
    print(f"The PyTorch front end on gpt2-blocks at scale 0.25. {machine(meta)}")
    print("Exposed = s/iter minus the compute-only run of the same code (front end:"
          " torch_frontend.py compute; PyTorch: torch_sim.py compute).\n")
    none, none_sw = med("none"), med("none (step work)")
    step_work = fcomp - none if fcomp is not None and none is not None else None
    print("PyTorch's own step work (autograd, gradient accumulation, zero_grad and the"
          " optimizer step over the model's bytes, 4 ranks sharing the cores) is in every"
          " front-end run: front-end compute minus train-sim none ="
          f" {fmt(step_work)} s/iter here. `train-sim --step-work` does the same memory"
          " work in C (zero the gradients, accumulate each layer's before it is marked"
          " ready, an SGD step with lr 0 after dd_step_end), on one thread where PyTorch"
          " splits its passes over its intra-op threads: the binding's cost lies between"
          f" front end ÷ train-sim and front end ÷ that. Its none: {fmt(none_sw)} s/iter.\n")
    waits = median_by(rows, run_name, "mean_wait_s")
    waits.update(median_by([r for r in rows if not r.get("anchor")], run_name, "wait_s"))
    wait = lambda k: waits.get(k, (None,))[0]  # noqa: E731
    print("Wait = the library's own exposed wait, dd_step_end's wait_s per iteration."
          " Exposed minus wait is the rest of the iteration (backward with its hooks,"
          " gradient accumulation, the optimizer) taking longer beside the syncs than"
          " in the compute-only run.\n")
    print("| strategy | front end s/iter | train-sim s/iter | front end ÷ train-sim |"
          " train-sim --step-work s/iter | front end ÷ train-sim --step-work |"
          " exposed s/iter | exposed ÷ PyTorch Local SGD's |"
          " train-sim --step-work exposed ÷ PyTorch Local SGD's |"
          " wait s/iter | train-sim wait s/iter | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratio = lambda a, b: a / b if a is not None and b else None  # noqa: E731
    for k in sorted(k for k in t if k.startswith("frontend-") and k != "frontend-compute"):
        s_name = k[len("frontend-"):]
        v, c = t[k]
        sim, sim_sw = med(s_name), med(s_name + " (step work)")
        exposed = v - fcomp if fcomp is not None else None
        sw_exposed = sim_sw - none_sw if sim_sw is not None and none_sw is not None else None
        print(f"| {s_name} | {v:.3f} | {fmt(sim)} | {fmt(ratio(v, sim))}"
              f" | {fmt(sim_sw)} | {fmt(ratio(v, sim_sw))}"
              f" | {fmt(exposed)} | {fmt(ratio(exposed, torch_exposed))}"
              f" | {fmt(ratio(sw_exposed, torch_exposed))}"
              f" | {fmt(wait(k))} | {fmt(wait(s_name))} | {c} |")


def accuracy(path):
    """bench/accuracy.sh: mean and spread of held-out accuracy over seeds."""
    meta, rows = load(path)
    groups = {}
    for r in rows:
        key = (r["data"], r["steps"], r["strategy"], r["aggregators"], r["compression"])
        groups.setdefault(key, []).append(r)
    print(f"train_mlp, {rows[0]['workers'] if rows else '?'} workers, loopback;"
          f" {meta.get('date', '?')}. Spread = standard deviation over the seeds"
          " (min–max beside it).\n")
    print("| data | steps | strategy | aggregators | codec | accuracy (mean ± sd) | min–max |"
          " Δ vs ddp | Δ vs uncompressed | wire MB per worker | seeds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(groups, key=lambda k: (k[0], k[1])):
        data, steps, strat, aggs, codec = key
        acc = [r["accuracy"] for r in groups[key]]
        wire = statistics.mean(r.get("wire_bytes", r["synced_bytes"]) for r in groups[key]) / 1e6
        base = groups.get((data, steps, "ddp", 0, codec)) or groups.get((data, steps, "ddp", 0, "none"))
        delta = statistics.mean(acc) - statistics.mean(r["accuracy"] for r in base) if base else None
        sd = statistics.stdev(acc) if len(acc) > 1 else 0.0
        dense = groups.get((data, steps, strat, aggs, "none")) if codec != "none" else None
        vs_dense = (statistics.mean(acc) - statistics.mean(r["accuracy"] for r in dense)
                    if dense else None)
        print(f"| {data} | {steps} | {strat} | {aggs} | {codec} | {statistics.mean(acc):.4f} ± {sd:.4f}"
              f" | {min(acc):.4f}–{max(acc):.4f} | {fmt(delta, '+.4f')} | {fmt(vs_dense, '+.4f')}"
              f" | {wire:.1f} | {len(acc)} |")


def drift_cost(path):
    """bench/drift_cost.sh: train-sim with the divergence monitor on and off,
    per round and strategy."""
    meta, rows = load(path)
    print(f"Train simulator, gpt2-blocks at scale 0.25, DREAMDDP_DRIFT=yes against no. {machine(meta)}\n")
    print("| strategy | s/iter on | s/iter off | on ÷ off (median of the rounds' ratios) | per round | runs |")
    print("|---|---|---|---|---|---|")
    for s_name in sorted({r["strategy"] for r in rows}):
        by = {}
        for r in rows:
            if r["strategy"] == s_name:
                by.setdefault(r["round"], {})[r["drift"]] = r["mean_iter_s"]
        pairs = [(v["yes"], v["no"]) for _, v in sorted(by.items()) if "yes" in v and "no" in v]
        if not pairs:
            continue
        on = statistics.median(p[0] for p in pairs)
        off = statistics.median(p[1] for p in pairs)
        each = ", ".join(f"{a / b:.3f}" for a, b in pairs)
        ratio = statistics.median(a / b for a, b in pairs)
        print(f"| {s_name} | {on:.3f} | {off:.3f} | {ratio:.3f} | {each} | {len(pairs)} |")


def sync(path):
    meta, rows = load(path)
    syncs = [r for r in rows if not r.get("train")]
    trains = [r for r in rows if r.get("train")]

    def key(r):
        if r.get("anchor") == "torch-gloo":
            return "torch-gloo"
        return (r.get("anchor") or "dreamddp", r["workers"], r["aggregators"],
                r.get("streams", 0) if not r.get("anchor") else 0)

    t = median_by(syncs, key, "time_s")
    route = {key(r): r.get("route") for r in syncs if not r.get("anchor")}
    M = syncs[0]["bytes"]
    B = rate_bytes(meta["rate"])
    torch = t.get("torch-gloo", (None,))[0]
    print(f"Sync of {M / 1e6:.0f} MB by 4 workers. {machine(meta)}")
    print("Model: BytePS's optimum 2n(n-1)M/((n²+kn-2k)B): the ring limit at k=0, push/pull M/B at k=n."
          " TCP floor: bench/tcpfloor.c, the slowest rank moving the same bytes over bare TCP"
          " connections, all at once, with no summation.\n")
    print("| workers + aggregators | route | streams | × PyTorch gloo (4 hosts) | × model | × TCP floor"
          " | time (s) | model (s) | TCP floor (s) | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    if torch:
        print(f"| PyTorch gloo allreduce, 4 hosts | ring | | 1.000 | | | {torch:.3f} | | | {t['torch-gloo'][1]} |")
    for k in sorted(x for x in t if x != "torch-gloo" and x[0] == "dreamddp"):
        _, n, a, nst = k
        v, c = t[k]
        model = 2 * n * (n - 1) * M / ((n * n + a * n - 2 * a) * B) if B else None
        floor = t.get(("tcp-floor", n, a, 0), (None,))[0]
        print(f"| {n} + {a} | {route[k]} | {nst or ''} | {fmt(v / torch if torch else None)}"
              f" | {fmt(v / model if model else None)} |"
              f" {fmt(v / floor if floor else None)} | {v:.3f} | {fmt(model)} | {fmt(floor)} | {c} |")
    if not trains:
        return
    tt = median_by(trains, lambda r: (r["strategy"], r["aggregators"]), "mean_iter_s")
    tm = median_by(trains, lambda r: (r["strategy"], r["aggregators"]), "modeled_iter_s")
    none = tt.get(("none", 0), (None,))[0]
    print("\nTrain simulator, gpt2-blocks at scale 0.25, 4 workers, in the same sessions."
          " Exposed = s/iter minus strategy none's (no aggregators).\n")
    print("| strategy | aggregators | exposed ÷ without aggregators' | measured ÷ modeled | s/iter"
          " | modeled s/iter | exposed s/iter | runs |")
    print("|---|---|---|---|---|---|---|---|")
    base = tt.get(("dreamddp:4", 0), (None,))[0]
    base_exposed = base - none if base is not None and none is not None else None
    for k in sorted(tt):
        v, c = tt[k]
        m = tm.get(k, (None,))[0]
        exposed = v - none if none is not None else None
        print(f"| {k[0]} | {k[1]} | {fmt(exposed / base_exposed if exposed is not None and base_exposed else None)}"
              f" | {fmt(v / m if m else None)} | {v:.3f} | {fmt(m)} | {fmt(exposed)} | {c} |")


def plan(path):
    _, rows = load(path)
    print("Modeled seconds per iteration under ../shared/anchors/schedsim.py (one FIFO channel).\n")
    print("| profile | H | ours ÷ paper's schedule | ours ÷ FLSGD | ours ÷ uniform PLSGD | FLSGD |"
          " uniform PLSGD | paper's DreamDDP | ours | ddbench's own model of ours |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ours, art = r["candidate"], r.get("artifact_dreamddp")
        print(f"| {r['profile']} | {r['H']} | {fmt(ours / art if art else None)} | {ours / r['flsgd']:.3f} |"
              f" {ours / r['plsgd_uniform']:.3f} | {r['flsgd']:.4f} | {r['plsgd_uniform']:.4f} |"
              f" {fmt(art, '.4f')} | {ours:.4f} | {r['ddbench_modeled']['dreamddp']:.4f} |")


def train_dat(path):
    """One line per run: label, median s/iter, compute part, exposed part."""
    _, rows = load(path)
    t, _ = train_medians(rows)
    none, comp = t.get("none", (0,))[0], t.get("torch-compute", (0,))[0]
    for k in ["torch-compute", "torch-ddp", "torch-localsgd:4", "none", "ddp", "localsgd:4",
              "plsgd:4", "dreamddp:4", "adaptive"]:
        if k in t:
            base = comp if k.startswith("torch-") else none
            if k.startswith("frontend-"):
                base = t.get("frontend-compute", (None,))[0]
            label = k.replace("torch-", "PyTorch ")
            print(f'"{label}" {t[k][0]:.4f} {min(base, t[k][0]):.4f} {max(0, t[k][0] - base):.4f}')


def timeline_dat(path, H):
    """The last whole window of a trace: backward marks and syncs, in seconds
    from the window's start, one row per layer (backward order). A merged
    trace (ddbench timeline merge, one pid per rank on one clock) gives each
    rank its own block of rows, all on the lowest rank's window."""
    ev = [e for e in json.load(open(path)) if e.get("ph") in ("i", "X")]
    ranks = sorted({e["pid"] for e in ev})
    marks = [e for e in ev if e["cat"] == "backward" and e["pid"] == ranks[0]]
    layers = []
    for e in marks:
        name = e["name"].split(" ", 1)[1]
        if name in layers:
            break
        layers.append(name)
    L = len(layers)
    steps = len(marks) // L
    last = (steps // H) * H - H  # first step of the last whole window
    if last < 0:
        sys.exit("timeline-dat: no whole window in the trace")
    t0 = marks[last * L]["ts"]
    # The step's forward is not marked: its start is taken as the previous
    # step's last mark, which includes dd_step_end and the optimizer.
    if last > 0:
        t0 = marks[last * L - 1]["ts"]

    def row(rank, name):
        block = ranks.index(rank) * (L + 1)
        return block + (layers.index(name) if name in layers else 0)

    print("# backward marks: x (s) layer-row step")
    seen = {r: 0 for r in ranks}
    for e in ev:
        if e["cat"] != "backward":
            continue
        # Every step marks each layer once (older traces carry no step).
        step = seen[e["pid"]] // L
        seen[e["pid"]] += 1
        if last <= step < last + H:
            name = e["name"].split(" ", 1)[1]
            print(f"{(e['ts'] - t0) / 1e6:.5f} {row(e['pid'], name)} {step}")
    print("\n\n# syncs: x_start (s) row duration (s) step label")
    for e in ev:
        step = e["args"]["step"] if e["cat"] == "sync" else -1
        if last <= step < last + H:
            name = e["name"].split(" ", 1)[1].rstrip("+")
            print(f"{(e['ts'] - t0) / 1e6:.5f} {row(e['pid'], name)} {e['dur'] / 1e6:.5f} {step} \"{name}\"")
    print("\n\n# layer names: row name")
    for r in ranks:
        for i, n in enumerate(layers):
            label = f"rank {r}: {n}" if len(ranks) > 1 else n
            print(f'{row(r, n)} "{label}"')


def ttl_runs(rows):
    """{round: {run: (evals sorted by iter, done row)}} from time_to_loss.jsonl."""
    out = {}
    for r in rows:
        run = out.setdefault(r["round"], {}).setdefault(r["run"], ([], {}))
        if r.get("event") == "done":
            run[1].update(r)
        elif "val_loss" in r:
            run[0].append(r)
    for runs in out.values():
        for evals, _ in runs.values():
            evals.sort(key=lambda e: e["iter"])
    return out


def time_to(evals, target):
    """Training time at which val_loss first reaches target, interpolated
    between the two evaluations around the crossing; None if never."""
    prev = None
    for e in evals:
        if e["val_loss"] <= target:
            if prev is None or prev["val_loss"] == e["val_loss"]:
                return e["time_s"]
            f = (prev["val_loss"] - target) / (prev["val_loss"] - e["val_loss"])
            return prev["time_s"] + f * (e["time_s"] - prev["time_s"])
        prev = e
    return None


def val_at(evals, key, x):
    """val_loss at key (time_s or iter) = x, interpolated; None past the run."""
    for a, b in zip(evals, evals[1:]):
        if a[key] <= x <= b[key]:
            f = (x - a[key]) / (b[key] - a[key]) if b[key] > a[key] else 1.0
            return a["val_loss"] + f * (b["val_loss"] - a["val_loss"])
    return None


def ttl(path):
    """bench/time_to_loss.sh: time to PyTorch DDP's loss after N iterations,
    loss after a wall-clock budget and after N iterations' samples."""
    meta, rows = load(path)
    n_iter, budget = meta["target_iters"], meta["budget_s"]
    per = {}  # run -> list of per-round dicts
    targets = []
    for rnd, runs in sorted(ttl_runs(rows).items()):
        ddp, lsgd = runs.get("torch-ddp"), runs.get("torch-localsgd:4")
        if ddp is None:
            continue
        target = val_at(ddp[0], "iter", n_iter)
        if target is None:
            continue
        targets.append(target)
        t_ddp = time_to(ddp[0], target)
        t_lsgd = time_to(lsgd[0], target) if lsgd else None
        v_ddp = target
        s_ddp = ddp[1].get("s_per_iter")
        for name, (evals, done) in runs.items():
            t = time_to(evals, target)
            v = val_at(evals, "iter", n_iter)
            d = per.setdefault(name, [])
            d.append({
                "t": t,
                "vs_ddp": t_ddp / t if t and t_ddp else None,
                "vs_lsgd": t_lsgd / t if t and t_lsgd else None,
                "v_n": v,
                "v_n_ratio": v / v_ddp if v is not None else None,
                "v_budget": val_at(evals, "time_s", budget),
                "s_iter": done.get("s_per_iter"),
                "s_iter_ratio": (done["s_per_iter"] / s_ddp
                                 if done.get("s_per_iter") and s_ddp else None),
            })
    order = ["torch-ddp", "torch-localsgd:4", "ddp", "localsgd:4", "dreamddp:4",
             "dreamddp:4+next", "dreamddp:4+next/fp16", "dreamddp:4+next/fp16@2"]
    names = [k for k in order if k in per] + sorted(k for k in per if k not in order)
    print(f"examples/torch_gpt.py, {meta.get('model', '')}. {machine(meta)}")
    print(f"Target: the validation loss PyTorch DDP reaches after {n_iter} iterations"
          f" ({fmt(statistics.median(targets) if targets else None)}, median over rounds)."
          " Time = training time (evaluations excluded). Speed-up = their time to the"
          " target ÷ this run's, per round, then the median.\n")
    print("| run | speed-up over PyTorch DDP | speed-up over PostLocalSGD H=4 |"
          f" val loss after {n_iter} iterations' samples ÷ DDP's | val loss after"
          f" {budget:g} s | time to target (s) | s/iter | s/iter ÷ PyTorch DDP |"
          " rounds reached |")
    print("|---|---|---|---|---|---|---|---|---|")

    def med(lst, k):
        v = [x[k] for x in lst if x[k] is not None]
        return statistics.median(v) if v else None
    for k in names:
        d = per[k]
        reached = sum(1 for x in d if x["t"] is not None)
        print(f"| {k} | {fmt(med(d, 'vs_ddp'), '.2f')} | {fmt(med(d, 'vs_lsgd'), '.2f')}"
              f" | {fmt(med(d, 'v_n_ratio'), '.4f')} | {fmt(med(d, 'v_budget'), '.4f')}"
              f" | {fmt(med(d, 't'), '.1f')} | {fmt(med(d, 's_iter'))}"
              f" | {fmt(med(d, 's_iter_ratio'))} | {reached} of {len(d)} |")


def ttl_dat(path):
    """gnuplot: validation loss against training time, one block per run,
    from the last round."""
    _, rows = load(path)
    runs = ttl_runs(rows)
    last = runs[max(runs)]
    for name, (evals, _) in sorted(last.items()):
        print(f'"{name}"')
        for e in evals:
            print(f"{e['time_s']:.3f} {e['val_loss']:.5f}")
        print("\n")


def startup(path):
    meta, rows = load(path)
    dd = median_by([r for r in rows if r["system"] == "dreamddp"], lambda r: r["ranks"], "first_step_s")
    pt = median_by([r for r in rows if r["system"] == "torch"], lambda r: r["ranks"], "first_step_s")
    fds = median_by([r for r in rows if r["system"] == "dreamddp"], lambda r: r["ranks"], "store_rank_fds")
    rss = median_by([r for r in rows if r["system"] == "dreamddp"], lambda r: r["ranks"], "store_rank_rss_kb")
    print(f"Launch to every rank ready on loopback, {meta.get('cores')} cores, {meta.get('date')}; "
          f"medians of {meta.get('rounds')} interleaved rounds.\n")
    print("| ranks | dreamddp s | PyTorch s | dreamddp ÷ PyTorch | rank 0 fds | rank 0 RSS MB |")
    print("|---|---|---|---|---|---|")
    for n in sorted(set(dd) | set(pt)):
        a = dd.get(n, (None, 0))[0]
        b = pt.get(n, (None, 0))[0]
        f = fds.get(n, (None, 0))[0]
        m = rss.get(n, (None, 0))[0]
        print(f"| {n} | {fmt(a, '.2f')} | {fmt(b, '.2f')} | "
              f"{fmt(a / b if a and b else None, '.2f')} | {fmt(f, '.0f')} | "
              f"{fmt(m / 1024 if m else None, '.1f')} |")


def scale(path):
    """bench/scale.sh: per world size, ours against PyTorch's."""
    meta, rows = load(path)
    def name(r):
        if r.get("op"):
            return f"coll {r['op']} {r['bytes']} B"
        return run_name(r)
    by_n = {}
    for r in rows:
        by_n.setdefault(r["workers"], []).append(r)
    print(f"Train simulator, gpt2-blocks at scale {rows[0]['scale'] if rows else '?'}."
          f" Machine: {meta.get('cores')} cores, netcluster at {meta.get('rate')} (tbf-shaped veth),"
          f" {meta.get('date')}; medians of {meta.get('rounds')} interleaved rounds."
          " Exposed = s/iter minus the compute-only run of the same code (ours: none;"
          " PyTorch: torch_sim.py compute). TCP floor: bench/tcpfloor.c moving the bytes"
          " of the model's sync with bare TCP, against 2n(n-1)M/((n²+kn-2k)B) (k = 0:"
          " a ring's 2(n-1)/n·M/B).\n")
    print("| workers | run | s/iter | exposed s/iter | exposed ÷ PyTorch Local SGD's |"
          " s/iter ÷ PyTorch DDP | runs |")
    print("|---|---|---|---|---|---|---|")
    rate = rate_bytes(meta.get("rate", ""))
    notes = []
    for n in sorted(by_n):
        t = median_by([r for r in by_n[n] if "mean_iter_s" in r and not r.get("model")],
                      name, "mean_iter_s")
        comp = t.get("torch-compute", (None,))[0]
        none = t.get("none", (None,))[0]
        tl = t.get("torch-localsgd:4", (None,))[0]
        tddp = t.get("torch-ddp", (None,))[0]
        texp = tl - comp if tl and comp else None
        order = ["torch-compute", "torch-ddp", "torch-localsgd:4", "none", "ddp", "dreamddp:4"]
        for k in sorted(t, key=lambda k: (order.index(k) if k in order else 99, k)):
            v, c = t[k]
            base = comp if k.startswith("torch-") else none
            exp = v - base if base is not None else None
            print(f"| {n} | {k} | {v:.3f} | {fmt(exp)} | "
                  f"{fmt(exp / texp if exp is not None and texp and not k.startswith('torch-compute') and k != 'none' else None)} | "
                  f"{fmt(v / tddp if tddp else None)} | {c} |")
        fl = median_by([r for r in by_n[n] if r.get("anchor") == "tcp-floor"],
                       lambda r: (r.get("aggregators", 0), r.get("paced", False), r["bytes"]), "time_s")
        for (k, paced, b), (ft, _) in sorted(fl.items()):
            if not rate:
                break
            share = 1.0 if k >= n else 2 * n * (n - 1) / (n * n + k * n - 2 * k)
            lim = share * b / rate
            what = (f"{n} + {k} aggregators, their pushes and answers"
                    f" {'paced as the library paces them' if paced else 'all at once'}"
                    if k else "a ring's bytes")
            notes.append(f"{n} workers: TCP floor ({what}) {ft:.3f} s for {b / 1e6:.1f} MB,"
                         f" limit {lim:.3f} s (floor ÷ limit {ft / lim:.2f})")
        for mrow in [r for r in by_n[n] if r.get("model")]:
            k = mrow["measured_aggregators"]
            route = mrow["aggregators" if k else "ring"]
            for strat in ("ddp", "dreamddp:4"):
                key = strat + (f" @{k} aggregators" if k else "")
                if key in t:
                    notes.append(f"{n} workers: {key}: measured {t[key][0]:.3f} s/iter,"
                                 f" ddbench scale {route[strat]:.3f} (measured ÷ modeled"
                                 f" {t[key][0] / route[strat]:.2f})")
        al = median_by([r for r in by_n[n] if r.get("route") == "aggregate"],
                       lambda r: (r["aggregators"], r["bytes"]), "time_s")
        for (k, b), (v, c) in sorted(al.items()):
            if b == 4096:
                notes.append(f"{n} workers: a 4 KB sync through {k} aggregators (the"
                             f" model's --agg-latency): {v * 1e3:.2f} ms")
            else:
                notes.append(f"{n} workers: one sync of {b / 1e6:.1f} MB through {k}"
                             f" aggregators (ddbench sync): {v:.3f} s")
        cs = median_by([r for r in by_n[n] if r.get("op")], name, "time_s")
        for k, (v, c) in sorted(cs.items()):
            notes.append(f"{n} workers: {k}: {v * 1e3:.2f} ms")
    print()
    for line in notes:
        print("- " + line)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    fns = {"coll": coll, "train": train, "sync": sync, "plan": plan, "train-dat": train_dat,
           "frontend": frontend, "accuracy": accuracy, "drift_cost": drift_cost,
           "ttl": ttl, "ttl-dat": ttl_dat, "startup": startup,
           "scale": scale}
    if cmd in fns and len(sys.argv) == 3:
        fns[cmd](sys.argv[2])
    elif cmd == "timeline-dat" and len(sys.argv) == 4:
        timeline_dat(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
