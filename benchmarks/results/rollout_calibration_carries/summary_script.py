"""Per-method mean ± sample std over seeds from bench train folders' demo_results.json (plus filter metrics)."""
import json, sys, glob
import numpy as np

folders = sys.argv[1:]
runs = [json.load(open(f"{f}/seed_{f[-1]}/demo_results.json")) if glob.glob(f"{f}/seed_{f[-1]}/demo_results.json")
        else json.load(open(glob.glob(f"{f}/seed_*/demo_results.json")[0])) for f in folders]
methods = list(runs[0]["methods"])
rows = {}
for m in methods:
    vals = {}
    for r in runs:
        x = r["methods"][m]; s = x["summary"]; steps = x["steps"]
        base = r["methods"][methods[0]]["summary"]
        v = {
            "dead share, run": s["dead_share"], "dead share, last quarter": s["dead_share_last_quarter"],
            "utilisation": s["utilisation"],
            "test acc final": s["final_test_accuracy"], "OOD acc final": s["final_ood_accuracy"],
            "train acc final": s["final_train_accuracy"],
            "rollout tokens": s["rollout_tokens"], "total FLOPs": s["total_flops"],
            "rollout tokens to grpo final test / grpo": (s["reach_test_rollout_tokens"] / base["rollout_tokens"]) if s.get("reach_test_rollout_tokens") is not None else np.nan,
            "FLOPs to grpo final test / grpo": (s["reach_test_flops"] / base["total_flops"]) if s.get("reach_test_flops") is not None else np.nan,
            "CPU s (train)": s["train_cpu_seconds"], "CPU / grpo": s["train_cpu_seconds"] / base["train_cpu_seconds"],
        }
        br = [e["lze/rollout_filter/brier"] for e in steps if "lze/rollout_filter/brier" in e]
        v["Brier (mean over steps)"] = float(np.mean(br)) if br else np.nan
        first_epoch = r["config"]["n_train"] / r["config"]["prompts_per_step"] if "config" in r else 32
        after = [e["lze/rollout_filter/brier"] for e in steps if "lze/rollout_filter/brier" in e and e["step"] > first_epoch]
        v["Brier after epoch 0"] = float(np.mean(after)) if after else np.nan
        pa = [e["lze/rollout_filter/predicted_dead_frac"] for e in steps if "lze/rollout_filter/predicted_dead_frac" in e and e["step"] > first_epoch]
        oa = [e["lze/rollout_filter/observed_dead_frac"] for e in steps if "lze/rollout_filter/observed_dead_frac" in e and e["step"] > first_epoch]
        v["predicted dead share after epoch 0"] = float(np.mean(pa)) if pa else np.nan
        v["observed dead share after epoch 0"] = float(np.mean(oa)) if oa else np.nan
        late = [e["lze/rollout_filter/brier"] for e in steps if "lze/rollout_filter/brier" in e and e["step"] > 0.75 * steps[-1]["step"]]
        v["Brier, last quarter"] = float(np.mean(late)) if late else np.nan
        pd_ = [e["lze/rollout_filter/predicted_dead_frac"] for e in steps if "lze/rollout_filter/predicted_dead_frac" in e]
        v["predicted dead share (mean over steps)"] = float(np.mean(pd_)) if pd_ else np.nan
        od = [e["lze/rollout_filter/observed_dead_frac"] for e in steps if "lze/rollout_filter/observed_dead_frac" in e]
        v["observed dead share (mean over steps)"] = float(np.mean(od)) if od else np.nan
        aud = [(e["lze/rollout_filter/audited_total"], e["lze/rollout_filter/audited_alive_total"]) for e in steps if "lze/rollout_filter/audited_total" in e]
        if aud:
            a, al = aud[-1]
            v["audited skips"] = a; v["audited alive"] = al; v["wrong-skip rate"] = al / a if a else np.nan
        sk = [e["lze/rollout_filter/epoch_skipped"] for e in steps if "lze/rollout_filter/epoch_skipped" in e]
        for k, val in v.items():
            vals.setdefault(k, []).append(val)
    rows[m] = vals
keys = list(rows[methods[0]].keys()) + [k for k in rows[methods[-1]] if k not in rows[methods[0]]]
keys = list(dict.fromkeys(keys + [k for m in methods for k in rows[m]]))
def fmt(a):
    a = np.asarray([x for x in a if x is not None], dtype=float)
    ok = a[~np.isnan(a)]
    if len(ok) == 0: return "n/a"
    mean, std = ok.mean(), (ok.std(ddof=1) if len(ok) > 1 else 0.0)
    tag = f" [{len(ok)}/{len(a)}]" if len(ok) < len(a) else ""
    if abs(mean) >= 1e4: return f"{mean:.3g} ± {std:.2g}{tag}"
    return f"{mean:.4f} ± {std:.4f}{tag}"
print("| metric | " + " | ".join(f"`{m}`" for m in methods) + " |")
print("|---|" + "---|" * len(methods))
for k in keys:
    print(f"| {k} | " + " | ".join(fmt(rows[m].get(k, [np.nan])) for m in methods) + " |")
print("\nper seed wrong skips (alive/audited):", {m: list(zip(rows[m].get("audited alive", []), rows[m].get("audited skips", []))) for m in methods})
