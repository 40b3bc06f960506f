"""Functional training loops built from generators: a data generator, a step function, a loop
that pulls from both. Leaks, look-alikes and library frees with no cycles."""

from __future__ import annotations

import gc
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, main  # noqa: E402


def seed_all(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def take(n, gen):
    for _, item in zip(range(n), gen):
        yield item


def classification_batches(shape, classes, gen=None):
    while True:
        yield (torch.randn(*shape, device="cuda", generator=gen),
               torch.randint(0, classes, (shape[0],), device="cuda", generator=gen))


def sgd_update(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)
                p.grad = None


# ----------------------------------------------------------------------------- leaks


def env_transitions(obs_dim, batch):
    """A fake vectorised environment: (obs, next_obs, reward) batches on the GPU."""
    obs = torch.randn(batch, obs_dim, device="cuda")
    while True:
        nxt = obs + 0.1 * torch.randn_like(obs)
        reward = torch.randn(batch, device="cuda")
        yield obs, nxt, reward
        obs = nxt


def replay_buffer_unbounded_leak(name):
    seed_all()
    h = Harness(name)
    obs_dim, actions = 512, 16
    q = torch.nn.Sequential(torch.nn.Linear(obs_dim, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, actions)).cuda()
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    buffer: list[tuple] = []                      # meant to be a ring of 10k transitions; never capped

    def act(obs):
        with torch.no_grad():
            return q(obs).argmax(1)

    def learn(sample_size=256):
        idx = random.sample(range(len(buffer)), min(4, len(buffer)))
        obs = torch.cat([buffer[i][0] for i in idx])[:sample_size]
        nxt = torch.cat([buffer[i][2] for i in idx])[:sample_size]
        a = torch.cat([buffer[i][1] for i in idx])[:sample_size]
        r = torch.cat([buffer[i][3] for i in idx])[:sample_size]
        with torch.no_grad():
            target = r + 0.99 * q(nxt).max(1).values
        pred = q(obs).gather(1, a[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(pred, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    h.record(stacks="python", context="all")
    for obs, nxt, reward in take(25, env_transitions(obs_dim, 256)):
        with h.step():
            a = act(obs)
            buffer.append((obs, a, nxt, reward))
            learn()
    h.finish(leak=True, leak_what="buffer.append((obs, action, next_obs, reward)): every transition batch "
             "(two 256 x 512 float tensors and more) stays on the GPU in an uncapped list",
             workload="""A DQN-style loop: a generator yields GPU transition batches (256 x 512
             observations), a Q MLP acts, each batch is appended to a Python list used as a replay
             buffer with no capacity, and a minibatch sampled from it trains the MLP with Adam; 25
             steps.""")


def gru_stats_kib_leak(name):
    seed_all()
    h = Harness(name)
    gru = torch.nn.GRU(64, 128, num_layers=2, batch_first=True).cuda()
    head = torch.nn.Linear(128, 8).cuda()
    params = list(gru.parameters()) + list(head.parameters())
    histograms = []                               # for a plot after training

    def step_fn(x, y):
        out, _ = gru(x)
        loss = F.cross_entropy(head(out[:, -1]), y)
        loss.backward()
        histograms.append(torch.histc(out.detach(), bins=768, min=-1, max=1))   # 3 KiB on the GPU
        sgd_update(params, 0.05)
        return loss.item()

    h.record(stacks="python", context="all", max_entries=1500)
    for x, y in take(40, classification_batches((16, 32, 64), 8)):
        with h.step():
            step_fn(x, y)
    h.finish(leak=True, leak_what="histograms.append(torch.histc(...)): a 768-bin histogram (3 KiB) of "
             "the GRU outputs per step, kept on the GPU for a plot",
             workload="""A 2-layer GRU (64 -> 128) classifier trained by a step function with plain
             SGD on batches from a generator, 40 steps; each step appends a 768-bin histogram of the
             outputs (3 KiB, on the GPU) to a list. Recorded into a ring buffer of 1,500 entries,
             cut mid-run.""")


# ----------------------------------------------------------------------------- look-alikes


def swin_temp_feature_lists(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, num_classes=10).cuda()
    aux = torch.nn.ModuleList(torch.nn.Linear(c, 10) for c in (96, 192, 384, 768)).cuda()
    opt = torch.optim.AdamW(list(model.parameters()) + list(aux.parameters()), lr=1e-4)

    def deep_supervision_step(x, y):
        stages = []                               # per-step temporaries, dropped at return
        z = model.patch_embed(x)
        for layer in model.layers:
            z = layer(z)
            stages.append(z)
        logits = [head(s.mean((1, 2))) for head, s in zip(aux, stages)]
        losses = [F.cross_entropy(lg, y) for lg in logits]
        loss = sum(losses) / len(losses)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    h.record(stacks="python", context="all")
    for x, y in take(8, classification_batches((4, 3, 224, 224), 10)):
        with h.step():
            deep_supervision_step(x, y)
    h.finish(leak=False, workload="""timm swin_tiny (random init) trained with deep supervision: a
             step function runs the stages one by one, appends each stage's output to a local list,
             puts a linear head on each and averages the losses; the lists (stage outputs, logits,
             losses) are local and dropped when the function returns. AdamW, 8 steps of 4 images
             at 224 x 224.""")


_WORKSPACE: dict[tuple, dict] = {}


def workspace(batch, seq, width):
    """Positional table and mask for a shape, built the first time the shape is seen."""
    key = (batch, seq, width)
    if key not in _WORKSPACE:
        pos = torch.arange(seq, device="cuda")[:, None] / (10000 ** (torch.arange(0, width, 2, device="cuda") / width))
        table = torch.zeros(seq, width, device="cuda")
        table[:, 0::2], table[:, 1::2] = torch.sin(pos), torch.cos(pos)
        _WORKSPACE[key] = {"pos": table.expand(batch, seq, width).contiguous(),
                           "mask": torch.triu(torch.full((seq, seq), float("-inf"), device="cuda"), 1)}
    return _WORKSPACE[key]


def shape_keyed_workspace_three_shapes(name):
    seed_all()
    h = Harness(name)
    width = 256
    layer = torch.nn.TransformerEncoderLayer(width, 4, 512, batch_first=True, dropout=0.0)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).cuda()
    head = torch.nn.Linear(width, 1000).cuda()
    emb = torch.nn.Embedding(1000, width).cuda()
    opt = torch.optim.Adam([*enc.parameters(), *head.parameters(), *emb.parameters()], lr=1e-4)
    shapes = [(8, 64), (8, 128), (16, 96)]

    def batches():
        for i in range(24):
            b, t = shapes[i % len(shapes)]
            yield torch.randint(0, 1000, (b, t), device="cuda")

    h.record(stacks="python", context="all")
    for ids in batches():
        with h.step():
            ws = workspace(ids.shape[0], ids.shape[1], width)
            z = enc(emb(ids) + ws["pos"], mask=ws["mask"], is_causal=True)
            loss = F.cross_entropy(head(z[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A 2-layer causal nn.TransformerEncoder language model (width
             256) trained with Adam for 24 steps on batches of three shapes in turn; a module-level
             dict caches a positional table and a causal mask per shape, built the first time each
             shape is seen: it fills in the first three steps and then stays the same size.""")


def lstm_pack_padded_frees(name):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    seed_all()
    h = Harness(name)
    lstm = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True).cuda()
    head = torch.nn.Linear(256, 5).cuda()
    opt = torch.optim.Adam([*lstm.parameters(), *head.parameters()], lr=1e-3)

    def varlen_batches(n, batch=32, max_len=64):
        g = torch.Generator().manual_seed(1)
        for _ in range(n):
            lengths = torch.randint(8, max_len + 1, (batch,), generator=g)
            x = torch.randn(batch, int(lengths.max()), 128, device="cuda")
            y = torch.randint(0, 5, (batch,), device="cuda")
            yield x, lengths, y

    h.record(stacks="all", context="all")
    for x, lengths, y in varlen_batches(8):
        with h.step():
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = lstm(packed)
            padded, _ = pad_packed_sequence(out, batch_first=True)
            last = padded[torch.arange(x.shape[0], device="cuda"), (lengths - 1).cuda()]
            loss = F.cross_entropy(head(last), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A 2-layer LSTM (128 -> 256) classifier over variable-length
             sequences (8 to 64 steps, batch 32): pack_padded_sequence (enforce_sorted=False), the
             LSTM, pad_packed_sequence, the last valid step into a linear head; Adam, 8 steps. The
             packing, sorting and cuDNN workspaces are allocated and freed inside torch. Python and
             C++ stacks.""")


def helper_many_dels_step(name):
    seed_all()
    h = Harness(name)
    assert gc.isenabled()
    w1 = torch.randn(2048, 2048, device="cuda") / math.sqrt(2048)
    w2 = torch.randn(2048, 2048, device="cuda") / math.sqrt(2048)
    running = torch.zeros(2048, device="cuda")

    def whiten_and_score(x):
        a = x @ w1
        b = F.gelu(a)
        del a
        c = b @ w2
        del b
        centered = c - c.mean(0, keepdim=True)
        del c
        cov = centered.T @ centered / centered.shape[0]
        scaled = centered / (cov.diagonal().sqrt() + 1e-5)
        del centered, cov
        probs = scaled.softmax(1)
        del scaled
        score = probs.max(1).values.mean()
        running.mul_(0.9).add_(probs.mean(0), alpha=0.1)
        del probs
        return score.item()

    def stream(n):
        for _ in range(n):
            yield torch.randn(4096, 2048, device="cuda")

    h.record(stacks="python", context="alloc")
    with torch.no_grad():
        for x in stream(16):
            with h.step("inference"):
                whiten_and_score(x)
    h.finish(leak=False, workload="""A scoring helper called once per step under no_grad on a 4096 x
             2048 batch from a generator: two matmuls, GELU, centring, a covariance, scaling and a
             softmax, with a `del` after each big intermediate (32 MiB each) as soon as it is used;
             only a 2048-float running mean persists. 16 steps; the collector stays enabled and there
             are no cycles. Recorded with context='alloc'.""")


PROGRAMS = {f.__name__: f for f in (replay_buffer_unbounded_leak, gru_stats_kib_leak, swin_temp_feature_lists,
                                     shape_keyed_workspace_three_shapes, lstm_pack_padded_frees,
                                     helper_many_dels_step)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
