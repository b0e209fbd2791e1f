#!/usr/bin/env python3
"""Trains a small Llama (llama2.c's architecture) on text and writes a llama2.c checkpoint.

Why: the quality goals of the quantized KV cache (issue 15 item 4) need a *trained* model whose
heads are at least one 32-value block wide; the trained model among the assets (stories260K) has
heads of 8. This makes one in minutes on a CPU from the assets' TinyStories text and the
stories260K tokenizer, so `ferry ppl --kl-divergence-base` can measure each KV type on it.
docs/benchmarks.md gives the command and the figures. Not used by the tests.

Needs Debian's python3-torch and python3-sentencepiece (apt; no PyPI).

  python3 tools/train_tiny_llama.py --text ../shared/assets/eval-text/tinystories-valid-800.txt \
      --tokenizer ../shared/assets/tok512.model --out tiny-hd64.bin --heldout tiny-heldout.txt
"""
import argparse
import math
import struct
import time

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, seq_len, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), freqs)  # [seq, head_dim / 2]
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    # llama2.c's rotation: adjacent pairs (2i, 2i + 1). x: [batch, seq, heads, head_dim]
    xr, xi = x.float().reshape(*x.shape[:-1], -1, 2).unbind(-1)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack([xr * cos - xi * sin, xr * sin + xi * cos], dim=-1).flatten(3)


class Block(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, hidden):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.attention_norm(x)
        q = apply_rope(self.wq(h).view(b, s, self.n_heads, self.head_dim), cos, sin)
        k = apply_rope(self.wk(h).view(b, s, self.n_kv_heads, self.head_dim), cos, sin)
        v = self.wv(h).view(b, s, self.n_kv_heads, self.head_dim)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
        o = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, -1)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab, dim, n_layers, n_heads, n_kv_heads, hidden, seq_len):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, n_heads, n_kv_heads, hidden) for _ in range(n_layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.output.weight = self.tok_embeddings.weight  # shared classifier
        cos, sin = rope_tables(dim // n_heads, seq_len)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        s = ids.shape[1]
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, self.cos[:s], self.sin[:s])
        return self.output(self.norm(x))


def write_llama2c(model, args, vocab, path):
    """llama2.c's legacy layout (export.py legacy_export): header, then f32 tensors in order."""
    def put(f, t):
        f.write(t.detach().float().contiguous().numpy().tobytes())

    with open(path, "wb") as f:
        f.write(struct.pack("iiiiiii", args.dim, args.hidden, args.layers, args.heads, args.kv_heads, vocab,
                            args.seq_len))
        put(f, model.tok_embeddings.weight)
        for name in ("attention_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"):
            for layer in model.layers:
                put(f, getattr(layer, name).weight)
        put(f, model.norm.weight)
        put(f, model.cos)
        put(f, model.sin)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", required=True)
    ap.add_argument("--tokenizer", required=True, help="sentencepiece .model (e.g. tok512.model)")
    ap.add_argument("--out", required=True, help="llama2.c .bin to write")
    ap.add_argument("--heldout", required=True, help="writes the last --heldout-share of the text here")
    ap.add_argument("--heldout-share", type=float, default=0.15)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    lines = open(args.text, encoding="utf-8").read().split("\n")
    cut = int(len(lines) * (1 - args.heldout_share))
    with open(args.heldout, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[cut:]))
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    ids = []
    for line in lines[:cut]:
        ids += [sp.bos_id()] + sp.encode(line)
    data = torch.tensor(ids, dtype=torch.long)
    vocab = sp.get_piece_size()
    print(f"{len(ids)} training tokens, vocab {vocab}", flush=True)

    model = Llama(vocab, args.dim, args.layers, args.heads, args.kv_heads, args.hidden, args.seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    start, step, budget = time.time(), 0, args.minutes * 60
    while time.time() - start < budget:
        frac = (time.time() - start) / budget
        lr = args.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        at = torch.randint(0, len(data) - args.seq_len - 1, (args.batch,))
        x = torch.stack([data[i:i + args.seq_len] for i in at])
        y = torch.stack([data[i + 1:i + 1 + args.seq_len] for i in at])
        loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            print(f"step {step} {time.time() - start:.0f}s lr {lr:.2e} loss {loss.item():.3f}", flush=True)
        step += 1
    write_llama2c(model, args, vocab, args.out)
    print(f"wrote {args.out} after {step} steps", flush=True)


if __name__ == "__main__":
    main()
