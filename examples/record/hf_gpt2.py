"""A small GPT-2 trained by Hugging Face's Trainer, recorded by honestscale's callback (no download: the model is
built from a config, the text is this Python's own standard library, as bytes).

torchrun --nproc-per-node 2 hf_gpt2.py OUTPUT_DIR [REPORT_TO]   (the Trainer's trainer_state.json lands in
OUTPUT_DIR; REPORT_TO, default none, is the Trainer's report_to: tensorboard writes OUTPUT_DIR/runs/..., mlflow logs
to $MLFLOW_TRACKING_URI)
"""

import os
import sys
import sysconfig
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from honestscale.record.hf import HonestscaleCallback

SEQ = 64
files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]
text = b"".join(p.read_bytes() for p in files)
rows = [torch.tensor(list(text[i : i + SEQ])) for i in range(0, len(text) - SEQ, SEQ)][:384]
data = {"train": rows[:256], "validation": rows[256:320], "test": rows[320:]}


class Bytes(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, rows: list[torch.Tensor]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=SEQ, n_embd=64, n_layer=2, n_head=2))
report_to = sys.argv[2] if len(sys.argv) > 2 else "none"
args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=8, per_device_eval_batch_size=16,
                         num_train_epochs=2, learning_rate=1e-3, eval_strategy="epoch", logging_steps=1,
                         save_strategy="no", report_to=report_to, use_cpu=True, seed=0, disable_tqdm=True)  # fmt: skip
callback = HonestscaleCallback(campaign="hf-gpt2", dataset="cpython-stdlib-bytes", test=True, data_source="in_memory",
                               sequence_length=SEQ)  # fmt: skip
trainer = Trainer(model=model, args=args, train_dataset=Bytes(data["train"]), eval_dataset=Bytes(data["validation"]),
                  callbacks=[callback])  # fmt: skip
trainer.train()
trainer.save_state()  # trainer_state.json: the Trainer's own log of steps and evaluations
trainer.evaluate(Bytes(data["test"]), metric_key_prefix="test")  # once, at the end: the callback ends the run
if torch.distributed.is_initialized():
    torch.distributed.barrier()  # every rank has recorded its run
    os._exit(0)  # gloo's threads can abort the interpreter's teardown (SIGABRT): leave them to the OS
