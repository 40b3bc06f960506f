"""Experiments written as dataclass configs and run by one generic runner: models come from a
registry of factories, extra behaviour from hooks registered by decorators and named in the
config (``hooks=("ema",)``), recording from a ``RecordSpec`` in the config."""

from __future__ import annotations

import collections
import gc
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import timm  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from _harness import Harness, main  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

DEV = torch.device("cuda")


@dataclass(frozen=True)
class RecordSpec:
    stacks: str = "python"
    context: str | None = "all"
    max_entries: int = 200_000
    start_step: int = 0                 # history is turned on just before this step
    stop_after: int | None = None       # dump (and stop recording) right after this step


@dataclass(frozen=True)
class Experiment:
    model: str
    data: str = "tokens"                # tokens | seq2seq | images | labelled
    model_kwargs: dict = field(default_factory=dict)
    batch: int = 8
    seq: int = 64
    vocab: int = 4000
    image: int = 64
    steps: int = 12
    lr: float = 1e-3
    optimizer: str = "adamw"
    amp: str | None = None              # None | bf16 | fp16
    grad_ckpt: bool = False
    workers: int = 0
    gc_every: int | None = None
    hooks: tuple[str, ...] = ()
    record: RecordSpec = field(default_factory=RecordSpec)


@dataclass
class RunState:
    exp: Experiment
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    step: int = 0
    state: dict = field(default_factory=dict)


MODELS: dict[str, Callable] = {}
HOOKS: dict[str, dict[str, Callable]] = collections.defaultdict(dict)


def register_model(name):
    def deco(fn):
        MODELS[name] = fn
        return fn
    return deco


def hook(event, name=None):
    def deco(fn):
        HOOKS[event][name or fn.__name__] = fn
        return fn
    return deco


def fire(run, event, **kw):
    for name in run.exp.hooks:
        fn = HOOKS[event].get(name)
        if fn is not None:
            fn(run, **kw)


# ----------------------------------------------------------------------------- data


class Synthetic(Dataset):
    def __init__(self, exp):
        self.exp = exp

    def __len__(self):
        return self.exp.batch * (self.exp.steps + 2)

    def __getitem__(self, i):
        e, g = self.exp, torch.Generator().manual_seed(i)
        if e.data == "images":
            return {"x": torch.randn(3, e.image, e.image, generator=g), "y": torch.randint(0, 100, (), generator=g)}
        ids = torch.randint(4, e.vocab, (e.seq,), generator=g)
        if e.data == "seq2seq":
            return {"input_ids": ids, "labels": torch.randint(4, e.vocab, (e.seq // 2,), generator=g)}
        if e.data == "labelled":
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                    "labels": torch.randint(0, 4, (), generator=g)}
        return {"input_ids": ids, "labels": ids.clone()}


# ----------------------------------------------------------------------------- models


@register_model("t5")
def t5(exp):
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=exp.vocab, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))


@register_model("opt")
def opt(exp):
    return transformers.OPTForCausalLM(transformers.OPTConfig(
        vocab_size=exp.vocab, hidden_size=128, num_hidden_layers=2, ffn_dim=256, num_attention_heads=4,
        max_position_embeddings=256, word_embed_proj_dim=128, pad_token_id=1, bos_token_id=2, eos_token_id=2))


@register_model("qwen2")
def qwen2(exp):
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=exp.vocab, hidden_size=192, intermediate_size=384, num_hidden_layers=3, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=512, bos_token_id=1, eos_token_id=2))


@register_model("distilbert")
def distilbert(exp):
    return transformers.DistilBertForSequenceClassification(transformers.DistilBertConfig(
        vocab_size=exp.vocab, dim=128, n_layers=2, n_heads=4, hidden_dim=256, num_labels=4, pad_token_id=0))


@register_model("timm")
def timm_model(exp):
    return timm.create_model(exp.model_kwargs["arch"], pretrained=False, num_classes=100)


def forward(run, batch):
    if run.exp.data == "images":
        logits = run.model(batch["x"])
        return logits, F.cross_entropy(logits, batch["y"])
    out = run.model(**batch)
    return out, out.loss


# ----------------------------------------------------------------------------- hooks


@hook("after_forward")
def archive_logits(run, out, loss, batch):
    run.state.setdefault("logit_archive", []).append(out.logits.detach())


@hook("after_backward")
def grad_norms(run):
    grads = [p.grad for p in run.model.parameters() if p.grad is not None]
    run.state.setdefault("grad_norm_log", []).append(torch._foreach_norm(grads))


@hook("step_end", name="ema")
def ema_update(run, out, loss):
    shadow = run.state.get("ema")
    if shadow is None:
        run.state["ema"] = [p.detach().clone() for p in run.model.parameters()]
        return
    torch._foreach_lerp_(shadow, [p.detach() for p in run.model.parameters()], 0.01)


@hook("after_forward", name="recent_batches")
def keep_recent(run, out, loss, batch):
    recent = run.state.setdefault("recent", collections.deque(maxlen=5))
    recent.append((batch["x"], out.detach().softmax(-1)))     # for a dump if the loss diverges


class ProbeLog:
    def __init__(self, step):
        self.step, self.records = step, []


class ProbeRecord:
    def __init__(self, log, hidden):
        self.log, self.hidden = log, hidden
        log.records.append(self)


@hook("setup", name="probe")
def probe_setup(run):
    box = run.state.setdefault("probe_box", {})
    layer = run.model.distilbert.transformer.layer[1]
    layer.register_forward_hook(
        lambda mod, inp, out: box.__setitem__("hidden", (out[0] if isinstance(out, tuple) else out).detach()))


@hook("step_end", name="probe")
def probe_step(run, out, loss):
    log = ProbeLog(run.step)
    ProbeRecord(log, run.state["probe_box"].pop("hidden"))
    ProbeRecord(log, out.logits.detach())
    run.state["last_probe"] = log                    # the previous step's log is dropped here


@hook("setup", name="act_stats")
def stats_setup(run):
    sink = run.state["act_stats"] = []
    for blk in list(run.model.blocks)[1::2]:
        blk.register_forward_hook(lambda mod, inp, out: sink.append(_moments(out)))


def _moments(t):
    f = t.detach().float()
    m = torch.stack([f.mean(), f.std(), f.abs().amax()])
    del f
    return m


@hook("after_backward", name="act_stats")
def grad_histogram(run):
    flat = torch.cat([p.grad.flatten() for p in run.model.parameters() if p.grad is not None])
    hist = torch.histc(flat.float(), bins=64)
    run.state["grad_hist"] = hist.cpu().tolist()
    del flat, hist


@hook("step_end", name="act_stats")
def stats_flush(run, out, loss):
    stats = torch.stack(run.state["act_stats"]).tolist()       # to Python floats, every step
    run.state["act_stats"].clear()
    run.state["last_report"] = {"acts": stats, "grad_hist": run.state.pop("grad_hist"), "loss": loss.detach().item()}


# ----------------------------------------------------------------------------- the runner


def run_experiment(h: Harness, exp: Experiment) -> RunState:
    torch.manual_seed(0)
    model = MODELS[exp.model](exp).to(DEV).train()
    if exp.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if exp.optimizer == "sgd":
        opt_ = torch.optim.SGD(model.parameters(), lr=exp.lr, momentum=0.9)
    else:
        opt_ = torch.optim.AdamW(model.parameters(), lr=exp.lr)
    scaler = torch.amp.GradScaler("cuda", enabled=exp.amp == "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(exp.amp)
    loader = DataLoader(Synthetic(exp), batch_size=exp.batch, num_workers=exp.workers,
                        pin_memory=exp.workers > 0, persistent_workers=False)
    run = RunState(exp, model, opt_)
    fire(run, "setup")
    rec = exp.record
    for step, cpu_batch in enumerate(loader):
        if step == exp.steps:
            break
        run.step = step
        if step == rec.start_step:
            h.record(stacks=rec.stacks, context=rec.context, max_entries=rec.max_entries)
        with h.step("train"):
            batch = {k: v.to(DEV, non_blocking=True) for k, v in cpu_batch.items()}
            with torch.autocast("cuda", dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
                out, loss = forward(run, batch)
            fire(run, "after_forward", out=out, loss=loss, batch=batch)
            scaler.scale(loss).backward()
            fire(run, "after_backward")
            scaler.step(opt_)
            scaler.update()
            opt_.zero_grad(set_to_none=True)
            fire(run, "step_end", out=out, loss=loss)
            del out, loss, batch
        if exp.gc_every and (step + 1) % exp.gc_every == 0:
            gc.collect()
        if rec.stop_after == step:
            h.dump()
            h.stop_recording()
    h.dump()
    return run


# ----------------------------------------------------------------------------- the experiments


def t5_seq2seq_logit_archive(name):
    h = Harness(name)
    exp = Experiment(model="t5", data="seq2seq", vocab=2048, batch=8, seq=64, steps=16, amp="bf16",
                     hooks=("archive_logits",))
    run_experiment(h, exp)
    h.finish(leak=True, leak_what="bf16 decoder logits of every step (8 x 32 x 2048, 1 MiB), appended by a hook",
             workload="""T5 (2+2 layers, d_model 128, vocab 2,048) trained 16 steps under bf16 autocast with
             AdamW by the generic runner; an after_forward hook archives out.logits.detach() of every
             step in the run state and nothing ever reads or trims the archive.""")


def opt_clm_grad_norm_log(name):
    h = Harness(name)
    exp = Experiment(model="opt", data="tokens", vocab=4000, batch=8, seq=64, steps=40, lr=5e-4,
                     hooks=("grad_norms",), record=RecordSpec(max_entries=3000))
    run_experiment(h, exp)
    h.finish(leak=True, leak_what="per-parameter gradient norms (36 zero-dim GPU tensors a step) appended to a log",
             workload="""OPT causal LM (2 layers, 128 wide) trained 40 steps with AdamW; an
             after_backward hook computes torch._foreach_norm of all 36 gradients and appends the
             list of 0-d CUDA tensors to a log each step (a few hundred bytes each, 18 KiB a step).
             Ring buffer of 3,000 entries: the trace starts in a late step.""")


def qwen2_ckpt_bf16_ema_one_step(name):
    h = Harness(name)
    exp = Experiment(model="qwen2", data="tokens", vocab=4000, batch=4, seq=128, steps=10, amp="bf16",
                     grad_ckpt=True, hooks=("ema",), record=RecordSpec(start_step=5, stop_after=5))
    run_experiment(h, exp)
    h.finish(leak=False, workload="""Qwen2 (3 layers, 192 wide, GQA 6/2) trained 10 steps with gradient
             checkpointing (non-reentrant), bf16 autocast and AdamW; an EMA hook copies the weights
             once at the first step and lerps into the copy afterwards, so memory grows at step 1
             (AdamW state, EMA) and stays flat. History is on for step 5 only: turned on just before
             it, dumped and turned off right after it; the run goes on to step 9.""")


def regnet_loader_recent_batches(name):
    h = Harness(name)
    exp = Experiment(model="timm", model_kwargs={"arch": "regnetx_002"}, data="images", image=64, batch=32,
                     steps=16, lr=0.05, optimizer="sgd", workers=2, hooks=("recent_batches",),
                     record=RecordSpec(context="state"))
    run_experiment(h, exp)
    h.finish(leak=False, workload="""timm regnetx_002 trained 16 steps with SGD + momentum on 64 px
             images from a DataLoader with 2 workers and pinned memory; a hook keeps the last 5
             input batches and their softmax outputs on the GPU in a deque(maxlen=5) (1.5 MiB a
             batch), so memory grows for 5 steps and then stays flat. Recorded with
             context='state'.""")


def distilbert_cls_probe_records(name):
    h = Harness(name)
    exp = Experiment(model="distilbert", data="labelled", vocab=4000, batch=16, seq=128, steps=16,
                     gc_every=4, hooks=("probe",), record=RecordSpec(context=None))
    run_experiment(h, exp)
    h.finish(leak=False, workload="""DistilBERT classifier (2 layers, 128 wide) trained 16 steps with
             AdamW; a forward hook captures layer 1's hidden state (16 x 128 x 128, 1 MiB) and a
             step_end hook files it with the logits as ProbeRecords in a ProbeLog; each record points
             back to its log, so every replaced log is a reference cycle holding GPU tensors until the
             runner's gc.collect() every 4 steps. History without stacks (context None).""")


def mobilenetv3_fp16_activation_stats(name):
    h = Harness(name)
    exp = Experiment(model="timm", model_kwargs={"arch": "mobilenetv3_small_050"}, data="images", image=96,
                     batch=48, steps=14, lr=0.02, optimizer="sgd", amp="fp16", hooks=("act_stats",),
                     record=RecordSpec(start_step=9))
    run_experiment(h, exp)
    h.finish(leak=False, workload="""timm mobilenetv3_small_050 trained 14 steps on 96 px images under
             fp16 autocast with GradScaler and SGD; forward hooks on every other block take float
             copies of the activations for mean/std/max and free them, an after_backward hook
             concatenates all gradients for a histogram and deletes the temporaries, a step_end hook
             moves the figures to Python. No cycles, no growth after step 1. History is turned on only before
             step 9, for the last 5 steps.""")


PROGRAMS = {f.__name__: f for f in (t5_seq2seq_logit_archive, opt_clm_grad_norm_log, qwen2_ckpt_bf16_ema_one_step,
                                    regnet_loader_recent_batches, distilbert_cls_probe_records,
                                    mobilenetv3_fp16_activation_stats)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
