#!/usr/bin/env python3
"""The PyTorch peer of the device check: greedy decoding of a llama-shaped
model with random bf16 weights, written as a plain torch loop (no
transformers), at 1, 8, 32 and 64 sequences, plus the HBM bandwidth a large
device-to-device copy reaches. Writes a JSON report.

The model has the shape of the Go benchmark (gpu/cuda/bench_test.go): dim
2048, hidden 5632, 22 layers, 32 heads, 4 kv heads, vocab 32000. Each step
runs the whole model for every sequence: embedding, per layer RMSNorm, q/k/v
projections, RoPE, a static KV cache, grouped-query attention, the output
projection, SwiGLU, then the final norm, the classifier and argmax. Two
timings: eager, and the same step captured once in a CUDA graph and replayed
(launch overhead removed), which is the stronger peer.

    python3 peer.py --out report.json [--seqs 1,8,32,64] [--steps 32]

Runs on the CPU too (--device cpu --tiny), to check the script itself.
"""

import argparse
import json
import math
import sys
import time

import torch


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--seqs", default="1,8,32,64")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--tiny", action="store_true", help="a small shape, to test the script")
    return p.parse_args()


class Model:
    def __init__(self, cfg, device, dtype):
        self.cfg, self.device, self.dtype = cfg, device, dtype
        g = torch.Generator(device="cpu").manual_seed(1)
        d, h, kv = cfg["dim"], cfg["hidden"], cfg["kv_heads"] * cfg["head_dim"]

        def w(rows, cols, scale):
            t = torch.randn(rows, cols, generator=g, dtype=torch.float32) * scale
            return t.to(device=device, dtype=dtype)

        def norm(n):
            return (1 + 0.1 * torch.randn(n, generator=g)).to(device=device, dtype=dtype)

        s = 1 / math.sqrt(d)
        self.embed = w(cfg["vocab"], d, 1.0)
        self.layers = []
        for _ in range(cfg["layers"]):
            self.layers.append(dict(
                attn_norm=norm(d), ffn_norm=norm(d),
                wqkv=torch.cat([w(d, d, s), w(kv, d, s), w(kv, d, s)]),  # fused q, k, v
                wo=w(d, d, s),
                w13=torch.cat([w(h, d, s), w(h, d, s)]),  # fused gate, up
                w2=w(d, h, 1 / math.sqrt(h)),
            ))
        self.out_norm = norm(d)
        self.output = w(cfg["vocab"], d, s)
        hd = cfg["head_dim"]
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        pos = torch.arange(cfg["context"], dtype=torch.float64)
        ang = torch.outer(pos, inv)
        self.cos = ang.cos().to(device=device, dtype=torch.float32)
        self.sin = ang.sin().to(device=device, dtype=torch.float32)

    def weight_bytes(self):
        n = self.output.numel()
        for l in self.layers:
            n += l["wqkv"].numel() + l["wo"].numel() + l["w13"].numel() + l["w2"].numel()
        return n * self.output.element_size()


def rms(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    # x: [b, heads, t, hd], adjacent pairs rotated (llama.cpp NORM layout)
    xf = x.float().unflatten(-1, (-1, 2))
    x0, x1 = xf[..., 0], xf[..., 1]
    c, s = cos[:, None], sin[:, None]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)


class Decoder:
    """Static buffers for decoding b sequences of up to maxlen positions."""

    def __init__(self, m, b, maxlen):
        c = m.cfg
        self.m, self.b, self.maxlen = m, b, maxlen
        shape = (c["layers"], b, c["kv_heads"], maxlen, c["head_dim"])
        self.k = torch.zeros(shape, device=m.device, dtype=m.dtype)
        self.v = torch.zeros(shape, device=m.device, dtype=m.dtype)
        self.tok = torch.zeros(b, 1, dtype=torch.long, device=m.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=m.device)
        self.out = torch.zeros(b, dtype=torch.long, device=m.device)
        self.ar = torch.arange(maxlen, device=m.device)
        self.sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")

    def attend(self, q, k, v, mask):
        c = self.m.cfg
        group = c["heads"] // c["kv_heads"]
        if self.sdpa:
            try:
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            except TypeError:  # torch before 2.5: no enable_gqa
                pass
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(c["head_dim"])
        s = s.masked_fill(~mask, float("-inf"))
        return (s.softmax(-1) @ v.float()).to(q.dtype)

    def step(self):
        """One decode step for every sequence at position self.pos, from
        self.tok; writes the greedy tokens to self.out and self.tok. Only
        device tensors are touched, so the step can be captured."""
        m, c, b = self.m, self.m.cfg, self.b
        hd, nh, nkv = c["head_dim"], c["heads"], c["kv_heads"]
        x = m.embed[self.tok]  # [b, 1, d]
        cos, sin = m.cos[self.pos], m.sin[self.pos]
        mask = (self.ar <= self.pos)[None, None, None, :]  # [1,1,1,maxlen]
        for i, l in enumerate(m.layers):
            h = rms(x, l["attn_norm"])
            qkv = h @ l["wqkv"].t()
            q, k, v = qkv.split([nh * hd, nkv * hd, nkv * hd], -1)
            q = rope(q.view(b, 1, nh, hd).transpose(1, 2), cos, sin)
            k = rope(k.view(b, 1, nkv, hd).transpose(1, 2), cos, sin)
            v = v.view(b, 1, nkv, hd).transpose(1, 2)
            self.k[i].index_copy_(2, self.pos, k)
            self.v[i].index_copy_(2, self.pos, v)
            a = self.attend(q, self.k[i], self.v[i], mask)
            x = x + a.transpose(1, 2).reshape(b, 1, nh * hd) @ l["wo"].t()
            h = rms(x, l["ffn_norm"])
            g, u = (h @ l["w13"].t()).chunk(2, -1)
            x = x + (torch.nn.functional.silu(g) * u) @ l["w2"].t()
        logits = rms(x, m.out_norm) @ m.output.t()
        self.out.copy_(logits[:, -1].argmax(-1))
        self.tok.copy_(self.out[:, None])
        self.pos.add_(1)


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def timed(dev, fn, n):
    sync(dev)
    t = time.perf_counter()
    for _ in range(n):
        fn()
    sync(dev)
    return time.perf_counter() - t


def bandwidth(dev):
    if dev != "cuda":
        return None
    n = 1 << 30  # 1 Gi elements of bf16: 2 GiB read, 2 GiB written
    x = torch.empty(n, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    y.copy_(x)
    s = timed(dev, lambda: y.copy_(x), 10)
    del x, y
    return 10 * 2 * n * 2 / s / 1e9


def main():
    a = parse()
    dev = a.device
    dtype = torch.bfloat16
    if a.tiny:
        cfg = dict(dim=256, hidden=512, layers=2, heads=4, kv_heads=2, vocab=300)
    else:
        cfg = dict(dim=2048, hidden=5632, layers=22, heads=32, kv_heads=4, vocab=32000)
    cfg["head_dim"] = cfg["dim"] // cfg["heads"]
    cfg["context"] = 2048
    rep = dict(torch=torch.__version__, shape=cfg, dtype="bf16", runs=[])
    if dev == "cuda":
        rep["device"] = torch.cuda.get_device_name(0)
        rep["copy_gb_per_s"] = bandwidth(dev)
    t = time.perf_counter()
    m = Model(cfg, dev, dtype)
    sync(dev)
    rep["init_s"] = time.perf_counter() - t
    rep["weight_bytes"] = m.weight_bytes()
    with torch.inference_mode():
        for b in [int(s) for s in a.seqs.split(",")]:
            maxlen = a.prompt + 2 * a.steps + 16
            d = Decoder(m, b, maxlen)
            # The prompt's KV rows are random: only the decode steps are timed.
            d.k.normal_()
            d.v.normal_()
            d.pos.fill_(a.prompt)
            for _ in range(3):
                d.step()
            eager = timed(dev, d.step, a.steps)
            run = dict(seqs=b, steps=a.steps, context=a.prompt + 3,
                       eager_step_ms=eager / a.steps * 1e3, eager_tokens_per_s=b * a.steps / eager)
            if dev == "cuda":
                try:
                    d.pos.fill_(a.prompt)
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        for _ in range(2):
                            d.step()
                    torch.cuda.current_stream().wait_stream(s)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        d.step()
                    d.pos.fill_(a.prompt)
                    graph.replay()
                    g = timed(dev, graph.replay, a.steps)
                    run.update(graph_step_ms=g / a.steps * 1e3, graph_tokens_per_s=b * a.steps / g,
                               graph_gb_per_s=m.weight_bytes() / (g / a.steps) / 1e9)
                except Exception as e:  # report, keep the eager numbers
                    run["graph_error"] = repr(e)
            print(json.dumps(run), flush=True)
            rep["runs"].append(run)
            del d
    with open(a.out, "w") as f:
        json.dump(rep, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
