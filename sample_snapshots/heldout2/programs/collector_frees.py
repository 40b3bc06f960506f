"""Reference cycles that hold CUDA tensors, so that only Python's garbage collector frees them:
self-references, finalizers, a module and a closure, a stored exception's traceback, a graph
of dicts collected by hand, a dataclass tree."""

from __future__ import annotations

import gc
import os
import random
import sys
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))
from _harness import Harness, main  # noqa: E402


def _seed(seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def sample_records(step, n=1500):
    """Per-sample metadata of the kind a data pipeline logs: many small containers, which is what
    makes the automatic collector run."""
    return [{"step": step, "row": i, "flags": [i % 3, i % 5]} for i in range(n)]


class Batch:
    """A batch that keeps a reference to itself (self.owner), as some dispatch code does."""

    def __init__(self, x, y):
        self.x, self.y = x, y
        self.owner = self


def gru_selfref_batches_auto_gc(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    gru = nn.GRU(128, 256, batch_first=True).cuda()
    head = nn.Linear(256, 10).cuda()
    opt = torch.optim.SGD([*gru.parameters(), *head.parameters()], lr=0.01)
    log = []
    for step in range(16):
        with h.step():
            batch = Batch(torch.randn(64, 256, 128, device="cuda"), torch.randint(0, 10, (64,), device="cuda"))
            out, _ = gru(batch.x)
            F.cross_entropy(head(out[:, -1]), batch.y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del batch, out                      # the Batch is garbage now, but only the collector can free it
            log.append(len(sample_records(step)))
    h.finish(leak=False, workload="""A GRU (hidden 256) classifier, SGD, 16 steps; each batch (64 x
        256 x 128 floats, 8 MiB) is wrapped in an object that refers to itself (self.owner = self),
        so dropping it leaves a reference cycle. No gc.collect() anywhere: the automatic collector,
        set off by the per-sample metadata records each step builds, frees the batches in bursts
        inside later steps.""")


class Shard:
    """Half of a split activation, linked to its peer; __del__ counts closed shards."""

    closed = 0

    def __init__(self, t):
        self.t = t
        self.peer = None

    def __del__(self):
        Shard.closed += 1


def finalizer_pairs_cycle(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="alloc")
    net = nn.Sequential(nn.Conv1d(64, 256, 5, padding=2), nn.GELU(), nn.Conv1d(256, 64, 5, padding=2)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for step in range(14):
        with h.step():
            x = torch.randn(32, 64, 2048, device="cuda")
            out = net(x)
            out.square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            left, right = out.detach().clone().chunk(2, dim=0)
            a, b = Shard(left), Shard(right)
            a.peer, b.peer = b, a               # a cycle of objects that define __del__
            del a, b, left, right, out
            sample_records(step, 1200)
    h.finish(leak=False, closed_shards=Shard.closed, workload="""A 1-D convolutional net, Adam, 14
        steps of 32 x 64 x 2048; each step's output is cloned and split into two Shard objects
        that point at each other and define __del__ (collectable since PEP 442). The pair is
        dropped at once, but the cycle keeps its 16 MiB until the automatic collector (set off by
        metadata records) runs the finalizers and frees the tensors.""")


class ProbeHead(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.out = nn.Linear(width, classes)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def make_probe(width, classes):
    """A probe that remembers its last input and output through a hook; the hook's closure refers
    to the probe (its own cell, one per probe), and the probe holds the hook."""
    probe = ProbeHead(width, classes).cuda()

    def remember(module, args, output):
        probe.last_input = args[0]
        probe.last_output = output

    probe.register_forward_hook(remember)
    return probe


def probe_hook_closure_cycle(name):
    h = Harness(name)
    _seed()
    h.record(stacks="all", context="all", max_entries=60_000)
    backbone = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048)).cuda().eval()
    scores = []
    for step in range(12):
        with h.step():
            probe = make_probe(2048, 10)
            popt = torch.optim.SGD(probe.parameters(), lr=0.1)
            with torch.no_grad():
                feats = backbone(torch.randn(1024, 512, device="cuda"))
            F.cross_entropy(probe(feats), torch.randint(0, 10, (1024,), device="cuda")).backward()
            popt.step()
            scores.append(probe.last_output.argmax(-1).float().mean().item())
            del probe, popt, feats
            sample_records(step, 1300)
    h.finish(leak=False, workload="""A sweep of linear probes on a frozen MLP backbone: each step
        builds a fresh probe module (2048 -> 2048 -> 10) and registers a forward hook whose
        closure refers back to the probe and stores its input and output on it, trains it one
        SGD step on 1024 features and drops it. The module <-> hook closure cycle keeps the
        probe's weights, gradients and the stored 8 MiB features until the automatic collector
        runs. Python and C++ stacks.""")


class OutputChecker:
    """Checks logits and remembers the last problem it found."""

    def __init__(self):
        self.last_error = None

    def check(self, logits):
        probs = logits.float().softmax(-1)
        try:
            if bool(probs.amax() < 1.0):
                raise FloatingPointError("no confident prediction in batch")
        except FloatingPointError as e:
            self.last_error = e                 # e -> traceback -> this frame -> self: a cycle
        return probs.amax(-1).mean().item()


def bert_checker_traceback_cycle(name):
    from transformers import BertConfig, BertForMaskedLM

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    cfg = BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024,
                     vocab_size=4096, max_position_embeddings=256)
    model = BertForMaskedLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    confidence = []
    for step in range(12):
        with h.step():
            ids = torch.randint(0, 4096, (8, 128), device="cuda")
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            checker = OutputChecker()
            confidence.append(checker.check(out.logits.detach()))
            del checker, out
            sample_records(step, 1300)
    h.finish(leak=False, workload="""BERT for masked LM (2 layers, hidden 256) from its config,
        AdamW, 12 steps of 8 x 128 tokens. Each step a fresh checker object inspects the logits;
        when it finds no confident prediction (always, for an untrained model) it stores the
        exception on itself, and the exception's traceback holds the check() frame, whose locals
        are the checker and the logits and probabilities (16 MiB each). The checker is dropped
        each step, and the automatic collector frees these cycles later.""")


def resnet_feature_graph_collect_every4(name):
    import timm

    h = Harness(name)
    _seed()
    h.record(stacks="python", context=None)
    model = timm.create_model("resnet10t", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(12):
        with h.step():
            x = torch.randn(32, 3, 160, 160, device="cuda")
            y = torch.randint(0, 10, (32,), device="cuda")
            f = model.maxpool(model.act1(model.bn1(model.conv1(x))))
            graph = {"step": step, "nodes": []}
            for i, stage in enumerate((model.layer1, model.layer2, model.layer3, model.layer4)):
                f = stage(f)
                graph["nodes"].append({"stage": i, "feature": f.detach(), "graph": graph})   # node -> graph: a cycle
            F.cross_entropy(model.forward_head(f), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del graph, f
            if step % 4 == 3:
                gc.collect()
    h.finish(leak=False, workload="""timm resnet10t, SGD with momentum, 12 steps of 32 images at 160
        px, run stage by stage; each stage's output is recorded in a dict node that points back
        to the dict of the step's feature graph (node -> graph -> node list), a reference cycle
        holding the step's stage activations after backward. The loop calls gc.collect() every
        4th step (the automatic collector stays on). Recorded with context=None.""")


@dataclass
class StepRecord:
    step: int
    layers: list = field(default_factory=list)


@dataclass
class LayerRecord:
    index: int
    hidden: torch.Tensor
    parent: StepRecord | None = None


def gpt2_dataclass_tree_cycle(name):
    from transformers import GPT2Config, GPT2LMHeadModel

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=8192, n_positions=512, bos_token_id=0,
                     eos_token_id=0)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    norms = []
    for step in range(14):
        with h.step():
            ids = torch.randint(0, 8192, (16, 256), device="cuda")
            out = model(input_ids=ids, labels=ids, output_hidden_states=True, use_cache=False)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            record = StepRecord(step)
            for i, hs in enumerate(out.hidden_states):
                record.layers.append(LayerRecord(i, hs.detach(), parent=record))   # child -> parent
            norms.append(record.layers[-1].hidden.norm().item())
            del record, out
            sample_records(step, 1300)
    h.finish(leak=False, workload="""GPT-2 (4 layers, width 256) from its config, AdamW, 14 steps of
        16 x 256 tokens with output_hidden_states: each step's hidden states (5 x 4 MiB) are put
        in a dataclass tree, a StepRecord holding LayerRecords that point back to it (parent <->
        child cycles). The record is dropped each step; the automatic collector frees it.""")


PROGRAMS = {f.__name__: f for f in (gru_selfref_batches_auto_gc, finalizer_pairs_cycle, probe_hook_closure_cycle,
                                     bert_checker_traceback_cycle, resnet_feature_graph_collect_every4,
                                     gpt2_dataclass_tree_cycle)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
