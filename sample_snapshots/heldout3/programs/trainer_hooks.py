"""A tiny Trainer class with hooks (on_step_end, on_after_step...), the way small research
codebases write their own instead of using a framework. Leaks, look-alikes and a cycle."""

from __future__ import annotations

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


class Hook:
    """Every hook method is optional."""


class Trainer:
    def __init__(self, h: Harness, model, opt, loss_fn, hooks=(), accumulate: int = 1) -> None:
        self.h, self.model, self.opt, self.loss_fn = h, model, opt, loss_fn
        self.hooks = list(hooks)
        self.accumulate = accumulate
        self.global_step = 0
        self.log: list[dict] = []

    def fire(self, event: str, **kw) -> None:
        for hook in self.hooks:
            fn = getattr(hook, event, None)
            if fn is not None:
                fn(self, **kw)

    def fit(self, batches) -> None:
        self.model.train()
        it = iter(batches)
        while True:
            micro = [b for _, b in zip(range(self.accumulate), it)]
            if not micro:
                break
            with self.h.step("train"):
                total = 0.0
                for batch in micro:
                    loss, out = self.loss_fn(self.model, batch)
                    (loss / self.accumulate).backward()
                    self.fire("on_after_backward", loss=loss, out=out, batch=batch)
                    total += loss.item() / self.accumulate
                    del loss, out
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
                self.fire("on_step_end", loss=total)
                self.log.append({"step": self.global_step, "loss": total})
            self.global_step += 1
            self.fire("on_after_step")


# ----------------------------------------------------------------------------- leaks


def bert_attn_maps_for_viz_leak(name):
    from transformers import BertConfig, BertForSequenceClassification

    seed_all()
    h = Harness(name)
    cfg = BertConfig(vocab_size=4000, hidden_size=256, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=512, max_position_embeddings=256, num_labels=4)
    cfg._attn_implementation = "eager"
    model = BertForSequenceClassification(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss_fn(m, batch):
        ids, labels = batch
        out = m(input_ids=ids, labels=labels, output_attentions=True)
        return out.loss, out

    class AttentionViz(Hook):
        def __init__(self) -> None:
            self.maps = []

        def on_after_backward(self, trainer, loss, out, batch):
            self.maps.append(out.attentions)     # a tuple of maps per layer, still requiring grad

    viz = AttentionViz()
    batches = [(torch.randint(0, 4000, (8, 128), device="cuda"), torch.randint(0, 4, (8,), device="cuda"))
               for _ in range(12)]
    h.record(stacks="python", context="all")
    Trainer(h, model, opt, loss_fn, hooks=[viz]).fit(batches)
    h.finish(leak=True, leak_what="AttentionViz.maps: every step's attention probabilities (3 layers of "
             "8 x 4 x 128 x 128), kept with their autograd history for a visualisation that is drawn later",
             workload="""BERT (3 layers, width 256, eager attention) from its config, sequence
             classification, AdamW, 12 steps through a small Trainer class with hooks; an
             on_after_backward hook appends out.attentions (3 maps, 2 MiB each, requires_grad) to a
             list for visualisation and nothing clears it.""")


def prompt_params_group_growth_leak(name):
    seed_all()
    h = Harness(name)
    d = 512
    layer = torch.nn.TransformerEncoderLayer(d, 8, 1024, batch_first=True, dropout=0.0)
    model = torch.nn.ModuleDict({"enc": torch.nn.TransformerEncoder(layer, 2), "head": torch.nn.Linear(d, 10)}).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    prompts: list[torch.nn.Parameter] = []

    def loss_fn(m, batch):
        x, y = batch
        if prompts:
            p = torch.cat(list(prompts), 0).unsqueeze(0).expand(x.shape[0], -1, -1)
            x = torch.cat([p, x], 1)
        z = m["enc"](x)
        return F.cross_entropy(m["head"](z.mean(1)), y), None

    class GrowPrompt(Hook):
        def on_step_end(self, trainer, loss):
            p = torch.nn.Parameter(torch.randn(32, d, device="cuda") * 0.02)
            prompts.append(p)
            trainer.opt.add_param_group({"params": [p], "lr": 1e-3})

    batches = [(torch.randn(16, 64, d, device="cuda"), torch.randint(0, 10, (16,), device="cuda"))
               for _ in range(15)]
    h.record(stacks="python", context="alloc")
    Trainer(h, model, opt, loss_fn, hooks=[GrowPrompt()]).fit(batches)
    h.finish(leak=True, leak_what="a new 32 x 512 prompt Parameter added to the optimizer as a new param "
             "group after every step: the parameters and their Adam moments accumulate",
             workload="""A 2-layer nn.TransformerEncoder (width 512) with a linear head, Adam, 15 steps
             of a small Trainer; an on_step_end hook creates a fresh 32-token prompt Parameter on the
             GPU each step and calls opt.add_param_group for it, so parameters, Adam state and the
             prompt tokens prepended to the input keep growing.""")


# ----------------------------------------------------------------------------- look-alikes


def roberta_accum4_optimizer_steps(name):
    from transformers import RobertaConfig, RobertaForMaskedLM

    seed_all()
    h = Harness(name)
    cfg = RobertaConfig(vocab_size=5000, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=512, max_position_embeddings=130)
    model = RobertaForMaskedLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss_fn(m, batch):
        ids = batch
        labels = ids.clone()
        labels[torch.rand(ids.shape, device=ids.device) > 0.15] = -100
        out = m(input_ids=ids, labels=labels)
        return out.loss, None

    batches = [torch.randint(3, 5000, (8, 64), device="cuda") for _ in range(32)]
    h.record(stacks="python", context="all", max_entries=3000)
    Trainer(h, model, opt, loss_fn, accumulate=4).fit(batches)
    h.finish(leak=False, workload="""RoBERTa (2 layers, width 256) masked-LM from its config, AdamW,
             gradient accumulation over 4 micro-batches per optimizer step (loss / 4, backward each),
             8 optimizer steps, one step each; gradients are set to None after every optimizer step.
             Recorded into a ring buffer of 3,000 entries, cut mid-run.""")


def effnet_ema_made_once(name):
    import timm
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    seed_all()
    h = Harness(name)
    model = timm.create_model("efficientnet_b0", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def loss_fn(m, batch):
        x, y = batch
        return F.cross_entropy(m(x), y), None

    class EMA(Hook):
        def __init__(self, start: int) -> None:
            self.start, self.ema = start, None

        def on_after_step(self, trainer):
            if trainer.global_step == self.start:
                self.ema = AveragedModel(trainer.model, multi_avg_fn=get_ema_multi_avg_fn(0.99))
            elif self.ema is not None:
                self.ema.update_parameters(trainer.model)

    batches = [(torch.randn(8, 3, 96, 96, device="cuda"), torch.randint(0, 10, (8,), device="cuda"))
               for _ in range(10)]
    h.record(stacks="python", context="all")
    Trainer(h, model, opt, loss_fn, hooks=[EMA(start=3)]).fit(batches)
    h.finish(leak=False, workload="""timm efficientnet_b0 (random init, 10 classes), SGD with momentum,
             10 steps of 8 images at 96 x 96 through a small Trainer; an EMA copy of the weights
             (torch.optim.swa_utils.AveragedModel with an EMA average) is made once after step 3 and
             updated in place after every later step: memory rises once (momentum buffers, the EMA
             copy) and then stays flat.""")


def densenet_eval_every5_freed(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("densenet121", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss_fn(m, batch):
        x, y = batch
        return F.cross_entropy(m(x), y), None

    val = [(torch.randn(16, 3, 64, 64, device="cuda"), torch.randint(0, 10, (16,), device="cuda"))
           for _ in range(3)]

    class Evaluate(Hook):
        def __init__(self) -> None:
            self.scores: list[float] = []

        def on_after_step(self, trainer):
            if trainer.global_step % 5:
                return
            with trainer.h.step("eval"), torch.no_grad():
                trainer.model.eval()
                outputs = [trainer.model(x) for x, _ in val]
                labels = torch.cat([y for _, y in val])
                acc = (torch.cat(outputs).argmax(1) == labels).float().mean().item()
                self.scores.append(acc)
                del outputs, labels
                trainer.model.train()

    batches = [(torch.randn(16, 3, 64, 64, device="cuda"), torch.randint(0, 10, (16,), device="cuda"))
               for _ in range(20)]
    h.record(stacks="python", context="state")
    Trainer(h, model, opt, loss_fn, hooks=[Evaluate()]).fit(batches)
    h.finish(leak=False, workload="""timm densenet121 (random init, 10 classes), AdamW, 20 training
             steps of 16 images at 64 x 64; after every 5th step a hook evaluates 3 held-back batches
             under no_grad (an 'eval' step), keeps only the accuracy as a float and deletes the
             outputs. Recorded with context='state'.""")


# ----------------------------------------------------------------------------- a cycle


class ActivationMonitor:
    """Holds a step's activations for a report; stores its own bound method as the report
    callback, so the instance refers to itself (instance -> bound method -> instance)."""

    def __init__(self, feats: torch.Tensor) -> None:
        self.feats = feats
        self.heat = F.interpolate(feats.mean(1, keepdim=True), size=(128, 128), mode="bilinear")
        self.report = self.summarize

    def summarize(self) -> float:
        return float(self.heat.mean())


def bound_method_callback_cycle(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def loss_fn(m, batch):
        x, y = batch
        feats = m.forward_features(x)
        out = m.forward_head(feats)
        return F.cross_entropy(out, y), feats

    class Monitor(Hook):
        def __init__(self) -> None:
            self.values: list[float] = []

        def on_after_backward(self, trainer, loss, out, batch):
            mon = ActivationMonitor(out.detach())
            self.values.append(mon.report())
            # per-step bookkeeping, as a logger would keep it
            trainer.log.append({"records": [{"k": i, "v": [i]} for i in range(2500)]})
            trainer.log[-1] = {"records": len(trainer.log[-1]["records"])}

    batches = [(torch.randn(32, 3, 128, 128, device="cuda"), torch.randint(0, 10, (32,), device="cuda"))
               for _ in range(15)]
    h.record(stacks="python", context=None)
    Trainer(h, model, opt, loss_fn, hooks=[Monitor()]).fit(batches)
    h.finish(leak=False, workload="""timm resnet18 (random init), SGD, 15 steps of 32 images at 128 x
             128 through a small Trainer; a hook wraps each step's features in an ActivationMonitor
             that keeps them and a 2 MiB upsampled heat map and stores its own bound method
             (self.report = self.summarize): a reference cycle per step, freed only when Python's
             automatic collector runs (the hook's logging makes thousands of small objects per
             step). Recorded with context=None.""")


PROGRAMS = {f.__name__: f for f in (bert_attn_maps_for_viz_leak, prompt_params_group_growth_leak,
                                     roberta_accum4_optimizer_steps, effnet_ema_made_once,
                                     densenet_eval_every5_freed, bound_method_callback_cycle)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
