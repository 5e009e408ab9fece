"""How benchmarks/results/sweep_carries/table.md was derived from the runs logs and selection logs (BENCHMARKS.md section 2)."""
import re, glob, json, numpy as np
from collections import defaultdict
pat = re.compile(r"^\s*(\S+):\s+\d+%\S*\s*\|[^|]*\|\s*(\d+)/120 \[[^\]]*?, test=([\d.]+), ood=([\d.]+), train=([\d.]+), kept=([\d.]+)\]")
data = defaultdict(dict)  # name -> seed -> {step: (test, ood, train, kept)}
for f in sorted(glob.glob("/work/wt12/outputs/s12_*_seed*.log")):
    seed = int(f[-5])
    text = open(f).read().replace("\n", "\r")
    for chunk in text.split("\r"):
        m = pat.match(chunk)
        if m:
            name, step = m.group(1), int(m.group(2))
            data[name].setdefault(seed, {})[step] = tuple(float(x) for x in m.groups()[2:])
json.dump({n: {s: v for s, v in d.items()} for n, d in data.items()}, open("/tmp/p12/parsed.json", "w"))
for name, d in data.items():
    for seed, steps in sorted(d.items()):
        last = max(steps)
        print(name, seed, "last step", last, steps[last])

# ---- the table
def curve(steps):
    pts = [(0,)+START]
    for s in range(20, 121, 20):
        if s in steps: pts.append((s,)+steps[s][:3])
    return pts
def first_reach(pts, idx, target, w=3):
    for i in range(len(pts)):
        tail = pts[max(0,i-w+1):i+1]
        if np.mean([t[idx] for t in tail]) >= target - 1e-9:
            return pts[i][0]
    return None
sel = {}
for f in glob.glob("/work/wt12/outputs/s12_*_seed*/seed_*/runs/*/lze_selection_log.parquet"):
    parts = f.split("/"); seed = int(parts[-4].split("_")[1]); name = parts[-2]
    log = pd.read_parquet(f); p = log["pass_rate"].to_numpy(float); p = p[np.isfinite(p)]
    sel[(name.replace("_selection_ratio", ":selection_ratio"), seed)] = (float(np.mean((p <= 0) | (p >= 1))), float(log.groupby("generation")["selected"].mean().mean()))
def pm(v, d=3):
    v=[x for x in v if x is not None]
    if not v: return "n/a"
    return f"{np.mean(v):.{d}f} ± {np.std(v, ddof=1) if len(v)>1 else 0:.{d}f}"
base = {s: curve(st) for s, st in data["grpo"].items()}
rows = []
print("| run | seeds | in-domain test acc, final (start 0.733) | last 3 evals | OOD acc, final (start 0.050) | OOD gain | train-prompt acc (start 0.742) | groups kept | dead groups | steps (= rollouts / grpo's) to grpo's final in-domain acc | to grpo's final OOD acc |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, d in data.items():
    done = {s: st for s, st in d.items() if 120 in st}
    if name == "uniform": continue  # started in the main folders after dapo, not finished
    if not done: continue
    seeds = sorted(done)
    fin = [done[s][120] for s in seeds]
    late = [np.mean([c[1] for c in curve(done[s])[-3:]]) for s in seeds]
    reach_t, reach_o = [], []
    for s in seeds:
        b = base[s]; c = curve(done[s])
        tt = np.mean([x[1] for x in b[-3:]]); to = np.mean([x[2] for x in b[-3:]])
        rt = first_reach(c, 1, tt); ro = first_reach(c, 2, to)
        reach_t.append(None if rt is None else rt/120); reach_o.append(None if ro is None else ro/120)
    def reach(v):
        got=[x for x in v if x is not None]
        return (pm(got,2)+"x" if got else "not reached") + ("" if len(got)==len(v) else f" ({len(got)}/{len(v)} seeds)")
    dead = [sel.get((name, s), (None,None))[0] for s in seeds]
    kept = [sel.get((name, s), (None,None))[1] for s in seeds]
    print(f"| `{name}` | {seeds} | {pm([f[0] for f in fin])} | {pm(late)} | {pm([f[1] for f in fin])} | {pm([f[1]-0.05 for f in fin])} | {pm([f[2] for f in fin])} | {pm(kept,2)} | {pm(dead,2)} | {reach(reach_t)} | {reach(reach_o)} |")
