#!/usr/bin/env python3
"""Summarise a device check run (run.sh) into one JSON document on stdout:
per test pass/fail/skip, the decode numbers of the Go backend and the
PyTorch peer side by side, and bytes per token against measured bandwidth.

    python3 report.py OUTDIR > OUTDIR/report.json
"""

import json
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


def tests(path):
    out = {"passed": [], "failed": [], "skipped": []}
    try:
        text = open(path).read()
    except OSError as e:
        return {"error": str(e)}
    for m in re.finditer(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", text, re.M):
        out[{"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}[m.group(1)]].append(m.group(2))
    rc = re.findall(r"^rc=(\d+)", text, re.M)
    out["rc"] = int(rc[-1]) if rc else None
    # The logit comparison lines of TestModelsMatchCPU.
    out["model_logits"] = re.findall(r"cuda_test\.go:\d+: ((?:llama|qwen2) \S+: logits differ.*)", text)
    return out


def main():
    d = sys.argv[1]
    go = load(os.path.join(d, "bench-go.json"))
    torch = load(os.path.join(d, "bench-torch.json"))
    bw = torch.get("copy_gb_per_s") or go.get("add_kernel_gb_per_s")
    rep = {
        "tests": tests(os.path.join(d, "tests.txt")),
        "hbm_gb_per_s": {"torch_copy": torch.get("copy_gb_per_s"), "go_add_kernel": go.get("add_kernel_gb_per_s")},
        "decode": [],
        "go": go,
        "torch": torch,
    }
    peer = {r["seqs"]: r for r in torch.get("runs", [])}
    for m in go.get("models", []):
        for r in m.get("runs", []):
            p = peer.get(r["seqs"], {})
            row = {
                "type": m["type"],
                "seqs": r["seqs"],
                "go_tokens_per_s": round(r["tokens_per_s"], 1),
                "go_step_ms": r["step_ms"],
                "go_gb_per_s": round(r["gb_per_s"], 1),
                "torch_bf16_eager_tokens_per_s": p.get("eager_tokens_per_s"),
                "torch_bf16_graph_tokens_per_s": p.get("graph_tokens_per_s"),
            }
            if bw:
                row["go_share_of_bandwidth"] = round(r["gb_per_s"] / bw, 3)
            rep["decode"].append(row)
    json.dump(rep, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
