"""Data and training as chained generators: every stage is a generator or an itertools
combinator, and the loop only pulls one item through the whole chain per step. Two leaks, two
look-alikes, one reference cycle and one look-alike whose frees are all plain drops."""

from __future__ import annotations

import collections
import gc
import itertools
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, main  # noqa: E402

CUDA = torch.device("cuda")


def images(batch, size, classes=10):
    while True:
        yield torch.randn(batch, 3, size, size), torch.randint(0, classes, (batch,))


def tokens(batch, seq, vocab):
    while True:
        yield torch.randint(0, vocab, (batch, seq))


def to_gpu(stream):
    for item in stream:
        yield tuple(t.to(CUDA, non_blocking=True) for t in item) if isinstance(item, tuple) else item.to(CUDA)


def train(stream, model, opt, loss_fn):
    for batch in stream:
        loss = loss_fn(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        yield loss.item()


def drive(h, it, steps, kind="train"):
    out = []
    for _ in range(steps):
        with h.step(kind):
            out.append(next(it))
    return out


def classify(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=4096, n_positions=256,
                                      bos_token_id=0, eos_token_id=0)).to(CUDA)


# ----------------------------------------------------------------------------- leaks


def resnet_tee_branch_for_audit(name):
    import timm

    h = Harness(name)
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).to(CUDA)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = to_gpu(images(32, 64))
    for_training, for_audit = itertools.tee(batches)       # the audit branch is read "later"
    h.record(stacks="python", context="all")
    losses = drive(h, train(for_training, model, opt, classify), 20)
    h.finish(leak=True, leak_what="itertools.tee(batches): the audit branch is never advanced, so tee "
             "buffers every GPU batch (32 x 3 x 64 x 64 floats, 1.5 MiB) the training branch has read",
             workload="""timm resnet18 (random init), SGD with momentum, 20 steps of 32 images at 64
             px pulled through a generator chain: a synthetic source, a to-GPU stage, then
             itertools.tee into a training branch and an audit branch that nothing reads during
             the run, so tee's internal buffer keeps every batch already on the GPU.""",
             mean_loss=sum(losses) / len(losses))


def gpt2_accumulate_cat_pooled(name):
    h = Harness(name)
    model = tiny_gpt2()
    proj = torch.randn(128, 32, device=CUDA) / 128 ** 0.5     # a fixed random projection for drift checks
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def steps(stream):
        for ids in stream:
            out = model(input_ids=ids, labels=ids, output_hidden_states=True)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            feat = out.hidden_states[-1].detach() @ proj       # 16 x 128 x 32 floats, 256 KiB
            del out
            yield feat

    features = steps(to_gpu(tokens(16, 128, 4096)))
    running = itertools.accumulate(features, lambda acc, x: torch.cat([acc, x]))
    h.record(stacks="python", context="all", max_entries=1500)
    for _ in range(30):
        with h.step():
            latest = next(running)                         # the old total is freed, the new one is kept
    h.finish(leak=True, leak_what="itertools.accumulate(features, torch.cat): the running concatenation "
             "of every step's projected hidden states grows by 256 KiB a step and is kept",
             workload="""A tiny GPT-2 (2 layers, width 128) trained with AdamW for 30 steps of 16 x
             128 tokens inside a generator that yields each step's last hidden states projected
             to 32 dimensions; itertools.accumulate concatenates them with torch.cat into a
             running total that the loop keeps (each new total replaces the last). Ring buffer of
             1500 entries, so the trace starts mid-run.""",
             rows=int(latest.shape[0]))


# ----------------------------------------------------------------------------- look-alikes


def side_stream_prefetch(stream, depth, copy_stream):
    window = collections.deque()
    for x, y in stream:
        with torch.cuda.stream(copy_stream):
            item = (x.to(CUDA, non_blocking=True), y.to(CUDA, non_blocking=True))
            done = torch.cuda.Event()
            done.record(copy_stream)
        window.append((item, done))
        if len(window) < depth:
            continue
        (gx, gy), ready = window.popleft()
        torch.cuda.current_stream().wait_event(ready)
        gx.record_stream(torch.cuda.current_stream())
        gy.record_stream(torch.cuda.current_stream())
        yield gx, gy


def mobilenet_side_stream_prefetch(name):
    import timm

    h = Harness(name)
    model = timm.create_model("mobilenetv3_small_100", pretrained=False, num_classes=10).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(64 * 24, 3, 96, 96), torch.randint(0, 10, (64 * 24,)))
    loader = torch.utils.data.DataLoader(data, batch_size=64, num_workers=2, pin_memory=True)
    pipeline = train(side_stream_prefetch(iter(loader), 3, torch.cuda.Stream()), model, opt, classify)
    h.record(stacks="python", context="all")
    losses = drive(h, pipeline, 20)
    h.finish(leak=False, workload="""timm mobilenetv3_small_100 (random init), AdamW, 20 steps of
             64 images at 96 px from a DataLoader (2 workers, pinned memory) fed through a
             prefetch generator that copies batches to the GPU on a side CUDA stream and keeps
             up to 3 in flight in a deque: the window fills in the first steps, AdamW state
             appears at the first step, then memory at step start is flat.""",
             mean_loss=sum(losses) / len(losses))


def length_buckets(lengths, pool, batch, vocab):
    """Draw `pool` sequences, sort them by length, cut into batches, shuffle the batches."""
    rng = random.Random(3)
    while True:
        chunk = sorted(itertools.islice(lengths, pool))
        groups = [chunk[i:i + batch] for i in range(0, pool, batch)]
        rng.shuffle(groups)
        for g in groups:
            seq = max(g)
            ids = torch.randint(5, vocab, (len(g), seq))
            mask = torch.arange(seq)[None, :] < torch.tensor(g)[:, None]
            yield ids.masked_fill(~mask, 0), mask.long(), torch.randint(0, 2, (len(g),))


def bert_length_bucketed_stream(name):
    from transformers import BertConfig, BertForSequenceClassification

    h = Harness(name)
    model = BertForSequenceClassification(BertConfig(vocab_size=8192, hidden_size=128, num_hidden_layers=2,
                                                     num_attention_heads=4, intermediate_size=512,
                                                     max_position_embeddings=512, num_labels=2)).to(CUDA)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    rng = random.Random(0)
    lengths = (int(rng.lognormvariate(4.8, 0.6)) % 480 + 16 for _ in itertools.count())

    def loss_fn(m, batch):
        ids, mask, y = batch
        return m(input_ids=ids, attention_mask=mask, labels=y).loss

    stream = to_gpu(length_buckets(lengths, pool=256, batch=32, vocab=8192))
    h.record(stacks="python", context="alloc")
    losses = drive(h, train(stream, model, opt, loss_fn), 24)
    h.finish(leak=False, workload="""A tiny BertForSequenceClassification (2 layers, hidden 128),
             Adam, 24 steps of 32 sequences whose lengths (16 to 495 tokens) come from a
             log-normal generator; a bucketing stage sorts pools of 256 by length and yields
             shuffled batches, so each step has its own padded length and the activations'
             sizes jump around (the cache's reserved memory moves); nothing is kept but floats.
             Recorded with context='alloc'.""", mean_loss=sum(losses) / len(losses))


# ----------------------------------------------------------------------------- a cycle


class NoiseStage:
    """Embedding-noise augmentation as a generator method; the suspended generator holds self."""

    def __init__(self, embeds: torch.Tensor, scale: float) -> None:
        self.scale = scale
        self.it = self._run(embeds)

    def _run(self, embeds):
        noise = torch.randn_like(embeds) * self.scale
        while True:
            yield embeds + noise


def distilbert_stage_generator_selfref(name):
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    h = Harness(name)
    model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=4096, dim=256, hidden_dim=512, n_layers=2, n_heads=4,
                                                   max_position_embeddings=256)).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    embed = model.get_input_embeddings()

    def augmented(stream):
        for ids in stream:
            with torch.no_grad():
                base = embed(ids)                          # 32 x 256 x 256 floats, 8 MiB
            stage = NoiseStage(base, 0.1)
            emb = next(stage.it)
            del stage, base                                # dropped half-way through its generator
            yield ids, emb

    def steps(stream):
        for ids, emb in stream:
            loss = model(inputs_embeds=emb, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            yield ids, loss.item()

    def token_report(stream):
        for ids, loss in stream:
            rows = [{"pos": p, "tok": t, "ctx": [p - 1, p + 1]}           # a per-step table
                    for p, t in enumerate(ids[0].tolist() * 12)]
            yield loss, len(rows)

    pipeline = token_report(steps(augmented(to_gpu(tokens(32, 256, 4096)))))
    h.record(stacks="python", context="all")
    out = drive(h, pipeline, 16)
    h.finish(leak=False, workload="""A tiny DistilBertForMaskedLM (2 layers, dim 256), AdamW, 16
             steps of 32 x 256 tokens through a generator chain; an augmentation stage builds a
             NoiseStage per batch whose generator method holds the stage itself, the batch's
             embeddings and a noise tensor (8 MiB each) in its suspended frame (stage -> generator
             -> frame -> stage), takes one item and drops it: cyclic garbage each step, freed by
             Python's automatic collector (a reporting stage builds about 3000 small dicts a
             step).""", report_rows=out[-1][1])


# ----------------------------------------------------------------------------- no cycle


def convnext_map_chain_closed_gens(name):
    import timm

    h = Harness(name)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mean = torch.tensor([0.485, 0.456, 0.406], device=CUDA).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=CUDA).view(1, 3, 1, 1)

    def normalize(b):
        x, y = b
        return (x - mean) / std, y

    def random_crop(b):
        x, y = b
        i, j = random.randrange(0, 33), random.randrange(0, 33)
        return x[:, :, i:i + 128, j:j + 128].contiguous(), y

    def mixup(b):
        x, y = b
        perm = torch.randperm(x.shape[0], device=CUDA)
        lam = random.uniform(0.6, 1.0)
        return lam * x + (1 - lam) * x[perm], y, y[perm], lam

    def mixed_loss(m, b):
        x, y, y2, lam = b
        logits = m(x)
        return lam * F.cross_entropy(logits, y) + (1 - lam) * F.cross_entropy(logits, y2)

    def housekeeping(stream, every):
        for i, loss in enumerate(stream):
            if i % every == every - 1:
                gc.collect()                               # a habit: finds nothing that holds CUDA memory
            yield loss

    random.seed(0)
    source = to_gpu(images(48, 160))
    stages = map(mixup, map(random_crop, map(normalize, source)))
    pipeline = housekeeping(train(stages, model, opt, mixed_loss), 4)
    h.record(stacks="python", context="all")
    losses = drive(h, pipeline, 12)
    pipeline.close()
    source.close()
    h.finish(leak=False, workload="""timm convnext_atto (random init), AdamW, 12 steps of 48 images
             (160 px, cropped to 128) through map() stages that each make a new tensor and drop
             the last (normalize, random crop, mixup), every intermediate freed by refcount; a
             housekeeping stage calls gc.collect() every 4th step, which finds no CUDA memory to
             free (no cycles); the generators are closed at the end.""",
             mean_loss=sum(losses) / len(losses))


PROGRAMS = {f.__name__: f for f in (resnet_tee_branch_for_audit, gpt2_accumulate_cat_pooled,
                                     mobilenet_side_stream_prefetch, bert_length_bucketed_stream,
                                     distilbert_stage_generator_selfref, convnext_map_chain_closed_gens)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
