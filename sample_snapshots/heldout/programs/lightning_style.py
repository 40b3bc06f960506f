"""A LightningModule-shaped program: the model says what a step is, a small Trainer runs
epochs, validation and callbacks. Four ways of keeping (or not keeping) step outputs."""

from __future__ import annotations

import sys

import torch
from _harness import Harness, main
from torch import nn


class LitGPT(nn.Module):
    def __init__(self, keep_train_outputs: bool = False, keep_val_on_gpu: bool = True) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(n_layer=3, n_embd=384, n_head=6, vocab_size=8192, n_positions=256,
                         bos_token_id=0, eos_token_id=0)
        self.net = GPT2LMHeadModel(cfg)
        self.keep_train_outputs = keep_train_outputs
        self.keep_val_on_gpu = keep_val_on_gpu
        self.training_step_outputs: list = []
        self.validation_step_outputs: list = []

    def training_step(self, batch):
        out = self.net(input_ids=batch, labels=batch)
        if self.keep_train_outputs:
            self.training_step_outputs.append({"loss": out.loss, "logits": out.logits})
        return out.loss

    def validation_step(self, batch):
        logits = self.net(input_ids=batch).logits
        preds = logits.argmax(-1)
        self.validation_step_outputs.append(preds if self.keep_val_on_gpu else preds.cpu())

    def on_validation_epoch_end(self):
        acc = torch.cat([p.flatten().float() for p in self.validation_step_outputs]).mean()
        self.validation_step_outputs.clear()
        return float(acc)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4, weight_decay=0.01)


class Trainer:
    def __init__(self, h: Harness, max_steps: int, val_every: int, accumulate: int = 1, callbacks=()) -> None:
        self.h, self.max_steps, self.val_every, self.accumulate = h, max_steps, val_every, accumulate
        self.callbacks = list(callbacks)
        self.global_step = 0

    def _batches(self, n, batch=8, seq=128):
        g = torch.Generator().manual_seed(self.global_step)
        for _ in range(n):
            yield torch.randint(0, 8192, (batch, seq), generator=g).to(self.h.dev, non_blocking=True)

    def fit(self, module: LitGPT) -> None:
        module.to(self.h.dev)
        opt = module.configure_optimizers()
        while self.global_step < self.max_steps:
            with self.h.step("train"):
                module.train()
                for micro in self._batches(self.accumulate):
                    loss = module.training_step(micro) / self.accumulate
                    loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                self.global_step += 1
                for cb in self.callbacks:
                    cb.on_train_batch_end(self, module, loss)
            if self.global_step % self.val_every == 0:
                with self.h.step("eval"):
                    module.eval()
                    with torch.no_grad():
                        for batch in self._batches(3, batch=16):
                            module.validation_step(batch)
                    module.on_validation_epoch_end()


class LossLogger:
    """Logs the loss as a Python float (no GPU memory kept)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_batch_end(self, trainer, module, loss) -> None:
        self.values.append(loss.item())


def lit_gpt2_clean(name: str) -> None:
    h = Harness(name)
    h.record(stacks="python", context="all")
    Trainer(h, max_steps=6, val_every=3, callbacks=[LossLogger()]).fit(LitGPT())
    h.finish(leak=False, workload="""A LightningModule-shaped GPT-2 (3 layers, width 384, from its
        transformers config) run by a small Trainer: 6 AdamW steps of batch 8 x 128 tokens, a
        validation epoch (3 batches under no_grad, predictions kept on the GPU until the epoch
        ends, then cleared) after steps 3 and 6, a callback logging the loss as a float. Optimizer
        state appears at the first step; nothing grows after.""")


def lit_gpt2_leak_outputs(name: str) -> None:
    h = Harness(name)
    h.record(stacks="python", context="all")
    Trainer(h, max_steps=8, val_every=100).fit(LitGPT(keep_train_outputs=True))
    h.finish(leak=True, leak_what="training_step appends {'loss', 'logits'} (with their autograd "
             "graphs' outputs) to self.training_step_outputs, which nothing clears",
             workload="""The same LightningModule-shaped GPT-2, 8 AdamW steps, but training_step
             keeps its loss and logits in self.training_step_outputs for an epoch-end hook that
             never runs: every step's logits (8 x 128 x 8192 floats) stay on the GPU.""")


def lit_val_outputs_freed(name: str) -> None:
    h = Harness(name)
    h.record(stacks="python", context="alloc")
    Trainer(h, max_steps=6, val_every=1).fit(LitGPT())
    h.finish(leak=False, workload="""LightningModule-shaped GPT-2, 6 AdamW steps with a validation
        epoch after every step: validation predictions pile up on the GPU during each epoch and
        are cleared in on_validation_epoch_end, so memory rises and falls with each epoch
        (recorded with context='alloc': frees carry no stack of their own).""")


def lit_gpt2_accumulate(name: str) -> None:
    h = Harness(name)
    h.record(stacks="all", context="all", max_entries=60_000)
    Trainer(h, max_steps=3, val_every=100, accumulate=4).fit(LitGPT())
    h.finish(leak=False, workload="""LightningModule-shaped GPT-2 with accumulate_grad_batches=4: 3
        optimizer steps of 4 micro-batches each (gradients accumulate in .grad between them),
        recorded with Python and C++ stacks.""")


PROGRAMS = {f.__name__: f for f in (lit_gpt2_clean, lit_gpt2_leak_outputs, lit_val_outputs_freed,
                                     lit_gpt2_accumulate)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
