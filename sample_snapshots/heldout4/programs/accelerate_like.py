"""An Accelerator-like wrapper: one object owns the model, the optimizer, the grad scaler and
the data loader, and the loop only calls ``prepare``, ``accumulate``, ``backward``, ``step`` and
``log``. Two leaks, three look-alikes and one reference cycle, all behind that facade."""

from __future__ import annotations

import collections
import contextlib
import copy
import gc
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, main  # noqa: E402

VOCAB = 4096


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int, vocab: int = VOCAB) -> None:
        self.n, self.seq, self.vocab = n, seq, vocab

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, self.vocab, (self.seq,), generator=g)


class _DeviceLoader:
    def __init__(self, loader, device) -> None:
        self.loader, self.device = loader, device

    def __iter__(self):
        for batch in self.loader:
            yield batch.to(self.device, non_blocking=True)

    def __len__(self) -> int:
        return len(self.loader)


class _PreparedOptimizer:
    def __init__(self, opt, acc: MiniAccelerator) -> None:
        self.optimizer, self.acc = opt, acc

    def step(self) -> None:
        if not self.acc.sync_gradients:
            return
        if self.acc.scaler is not None:
            self.acc.scaler.step(self.optimizer)
            self.acc.scaler.update()
        else:
            self.optimizer.step()
        self.acc.optimizer_steps += 1

    def zero_grad(self) -> None:
        if self.acc.sync_gradients:
            self.optimizer.zero_grad(set_to_none=True)


class MiniAccelerator:
    def __init__(self, mixed_precision: str = "no", gradient_accumulation_steps: int = 1) -> None:
        self.device = torch.device("cuda")
        self.mixed_precision = mixed_precision
        self.accum = gradient_accumulation_steps
        self.scaler = torch.amp.GradScaler("cuda") if mixed_precision == "fp16" else None
        self.sync_gradients = True
        self.optimizer_steps = 0
        self._micro = 0
        self.trackers: dict[str, list] = collections.defaultdict(list)
        self._opts: list[_PreparedOptimizer] = []

    def prepare(self, *objs):
        out = []
        for o in objs:
            if isinstance(o, torch.nn.Module):
                out.append(o.to(self.device).train())
            elif isinstance(o, torch.optim.Optimizer):
                self._opts.append(_PreparedOptimizer(o, self))
                out.append(self._opts[-1])
            elif isinstance(o, torch.utils.data.DataLoader):
                out.append(_DeviceLoader(o, self.device))
            else:
                out.append(o)
        return out if len(out) > 1 else out[0]

    def autocast(self):
        if self.mixed_precision == "no":
            return contextlib.nullcontext()
        dtype = torch.float16 if self.mixed_precision == "fp16" else torch.bfloat16
        return torch.autocast("cuda", dtype=dtype)

    @contextlib.contextmanager
    def accumulate(self, model):
        self._micro += 1
        self.sync_gradients = self._micro % self.accum == 0
        with self.autocast():
            yield

    def backward(self, loss) -> None:
        loss = loss / self.accum
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def clip_grad_norm_(self, params, max_norm: float):
        if not self.sync_gradients:
            return None
        if self.scaler is not None:
            for o in self._opts:
                self.scaler.unscale_(o.optimizer)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def gather_for_metrics(self, t):
        return t                                   # one process: nothing to gather

    def log(self, values: dict, step: int) -> None:
        for k, v in values.items():
            self.trackers[k].append((step, v))

    def free_memory(self) -> None:
        gc.collect()
        torch.cuda.empty_cache()


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=8192, n_positions=256,
                                      bos_token_id=0, eos_token_id=0))


# ----------------------------------------------------------------------------- leaks


def gpt2_fp16_accum_gathered_logits(name):
    h = Harness(name)
    acc = MiniAccelerator("fp16", gradient_accumulation_steps=2)
    model = tiny_gpt2()
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters(), lr=3e-4))
    all_logits = []
    h.record(stacks="python", context="all")
    for _step in range(16):
        with h.step():
            ids = torch.randint(0, 8192, (8, 128), device="cuda")
            with acc.accumulate(model):
                out = model(input_ids=ids, labels=ids)
                acc.backward(out.loss)
                acc.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
            all_logits.append(acc.gather_for_metrics(out.logits))   # for a perplexity at the end
            del out
    with torch.no_grad():
        ppl = float(torch.cat([x.float().logsumexp(-1).mean().view(1) for x in all_logits]).mean())
    h.finish(leak=True, leak_what="all_logits.append(acc.gather_for_metrics(out.logits)): every "
             "micro-batch's 8 x 128 x 8192 logits are kept on the GPU for a metric at the end",
             workload="""A tiny GPT-2 (2 layers, width 128, vocabulary 8192) behind an
             Accelerator-like wrapper with fp16 autocast, GradScaler, gradient accumulation of 2
             and clipping; 16 micro-batches of 8 x 128 tokens. The loop keeps every micro-batch's
             logits (not detached; backward already freed the graph's saved tensors) in a list to
             compute a perplexity after training.""", final_metric=ppl)


def bert_mlm_tracker_per_token_loss(name):
    from transformers import BertConfig, BertForMaskedLM

    h = Harness(name)
    acc = MiniAccelerator("bf16")
    model = BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=256, max_position_embeddings=256))
    loader = torch.utils.data.DataLoader(TokenDataset(16 * 40, 128), batch_size=16, num_workers=2)
    model, opt, loader = acc.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-4), loader)
    h.record(stacks="python", context="alloc")
    batches = iter(loader)
    for step in range(40):
        with h.step():
            ids = next(batches)
            labels = ids.clone()
            masked = ids.masked_fill(torch.rand(ids.shape, device="cuda") < 0.15, 3)
            with acc.accumulate(model):
                logits = model(input_ids=masked).logits
                per_tok = F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1), reduction="none")
                loss = per_tok.mean()
                acc.backward(loss)
                norm = acc.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
            acc.log({"loss": loss.detach(), "grad_norm": norm, "token_loss": per_tok.detach()}, step)
            del logits, per_tok, loss, norm, ids, labels, masked
    del batches
    h.finish(leak=True, leak_what="acc.log({... 'token_loss': per_tok.detach()}): the tracker keeps "
             "every step's loss, grad norm and 16 x 128 per-token losses as GPU tensors (about 9 KiB a step)",
             workload="""A tiny BertForMaskedLM (2 layers, hidden 128) behind an Accelerator-like
             wrapper with bf16 autocast, 40 steps of 16 x 128 tokens from a DataLoader with two
             workers; the wrapper's log() appends each step's loss, gradient norm and per-token
             loss vector, all still on the GPU, to tracker lists that are never flushed.
             Recorded with context='alloc'.""")


# ----------------------------------------------------------------------------- look-alikes


def t5_accum4_lazy_adamw_state(name):
    from transformers import T5Config, T5ForConditionalGeneration

    h = Harness(name)
    acc = MiniAccelerator("bf16", gradient_accumulation_steps=4)
    model = T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=256, num_layers=2,
                                                num_heads=4, decoder_start_token_id=0, pad_token_id=0))
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-4))
    losses = []
    h.record(stacks="python", context="state")
    for _step in range(16):
        with h.step():
            src = torch.randint(1, VOCAB, (16, 96), device="cuda")
            tgt = torch.randint(1, VOCAB, (16, 32), device="cuda")
            with acc.accumulate(model):
                loss = model(input_ids=src, labels=tgt).loss
                acc.backward(loss)
                opt.step()
                opt.zero_grad()
            if acc.sync_gradients:
                losses.append(loss.item())
            del loss, src, tgt
    h.finish(leak=False, workload="""A tiny T5ForConditionalGeneration (2+2 layers, d_model 128)
             behind an Accelerator-like wrapper, bf16 autocast, gradient accumulation of 4: 16
             micro-batches, 4 optimizer steps. Gradients appear at the first micro-batch and
             AdamW's exp_avg/exp_avg_sq at the fourth, then memory at step start is flat; losses
             are logged with .item() on sync steps only. Recorded with context='state'.""",
             optimizer_steps=acc.optimizer_steps)


def vit_ema_shadow_grad_norm_window(name):
    import timm

    h = Harness(name)
    acc = MiniAccelerator("bf16")
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=128)
    model, opt = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    ema = None
    recent_norms = collections.deque(maxlen=5)     # a smoothed norm for the log line
    h.record(stacks="python", context="all", max_entries=15_000)
    for _step in range(24):
        with h.step():
            x = torch.randn(32, 3, 128, 128, device="cuda")
            y = torch.randint(0, 10, (32,), device="cuda")
            with acc.accumulate(model):
                loss = F.cross_entropy(model(x), y)
                acc.backward(loss)
                recent_norms.append(acc.clip_grad_norm_(model.parameters(), 2.0))
                opt.step()
                opt.zero_grad()
            if ema is None:
                ema = copy.deepcopy(model).eval().requires_grad_(False)
            with torch.no_grad():
                for pe, pm in zip(ema.parameters(), model.parameters()):
                    pe.lerp_(pm, 0.01)
            smoothed = torch.stack(list(recent_norms)).mean()
            del loss, x, y, smoothed
    h.finish(leak=False, workload="""timm vit_tiny_patch16_224 at 128 px (random init) behind an
             Accelerator-like wrapper with bf16 autocast, SGD with momentum, 24 steps of 32
             images. An EMA copy of the model is made after the first step, momentum buffers
             appear at the first step, and the last five gradient norms (GPU scalars) sit in a
             deque(maxlen=5): growth stops after a few steps. Ring buffer of 15000 entries, so the
             trace starts mid-run (the last few steps).""")


def opt_eval_every4_gathered_then_freed(name):
    from transformers import OPTConfig, OPTForCausalLM

    h = Harness(name)
    acc = MiniAccelerator("no")
    model = OPTForCausalLM(OPTConfig(vocab_size=VOCAB, hidden_size=128, ffn_dim=256, num_hidden_layers=2,
                                     num_attention_heads=4, max_position_embeddings=256, word_embed_proj_dim=128))
    model, opt = acc.prepare(model, torch.optim.Adam(model.parameters(), lr=1e-4))
    val = [torch.randint(0, VOCAB, (8, 128), device="cuda") for _ in range(3)]
    scores = []
    h.record(stacks="all", context="all")
    for step in range(16):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 128), device="cuda")
            with acc.accumulate(model):
                loss = model(input_ids=ids, labels=ids).loss
                acc.backward(loss)
                opt.step()
                opt.zero_grad()
            del loss, ids
        if step % 4 == 3:
            with h.step("eval"):
                model.eval()
                gathered = []
                with torch.no_grad():
                    for v in val:
                        gathered.append(acc.gather_for_metrics(model(input_ids=v).logits))
                logits = torch.cat(gathered)
                targets = torch.cat(val)
                scores.append(float((logits[:, :-1].argmax(-1) == targets[:, 1:]).float().mean()))
                del gathered, logits, targets
                model.train()
    h.finish(leak=False, workload="""A tiny OPTForCausalLM (2 layers, hidden 128) behind an
             Accelerator-like wrapper, Adam, 16 training steps of 8 x 128 tokens; every 4th step
             an evaluation gathers the logits of 3 held-out batches (48 MiB), concatenates them,
             scores next-token accuracy to a float and drops everything. Python and C++ stacks.""",
             eval_scores=scores)


# ----------------------------------------------------------------------------- a cycle


class StepRecord:
    """What the wrapper remembers of the last backward, for a debugging summary on demand."""

    def __init__(self, acc, logits: torch.Tensor, loss: float) -> None:
        self.acc, self.logits, self.loss = acc, logits, loss
        self.summary = lambda: {"loss": self.loss, "max_logit": float(self.logits.max())}


def llama_step_records_free_memory(name):
    from transformers import LlamaConfig, LlamaForCausalLM

    h = Harness(name)
    acc = MiniAccelerator("no")
    model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=256))
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-4))
    h.record(stacks="python", context="all")
    for step in range(20):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 256), device="cuda")
            with acc.accumulate(model):
                out = model(input_ids=ids, labels=ids)
                acc.backward(out.loss)
                opt.step()
                opt.zero_grad()
            acc.last_record = StepRecord(acc, out.logits.detach(), out.loss.item())   # replaces the last one
            del out, ids
            if step % 5 == 4:
                acc.free_memory()
    h.finish(leak=False, workload="""A tiny Llama (2 layers, hidden 128, GQA 4/2 heads) behind an
             Accelerator-like wrapper, AdamW, 20 steps of 8 x 256 tokens. After each backward the
             wrapper keeps a StepRecord of the step's detached logits (32 MiB) whose summary
             lambda refers back to the record: each replaced record is cyclic garbage, freed when
             the wrapper's free_memory() runs gc.collect() and empty_cache() every 5th step.""")


PROGRAMS = {f.__name__: f for f in (gpt2_fp16_accum_gathered_logits, bert_mlm_tracker_per_token_loss,
                                     t5_accum4_lazy_adamw_state, vit_ema_shadow_grad_norm_window,
                                     opt_eval_every4_gathered_then_freed, llama_step_records_free_memory)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
