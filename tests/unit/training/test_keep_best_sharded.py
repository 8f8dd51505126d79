"""`training.keep: best` under FSDP2: the kept step's weights are the ones restored, the root's
(embeddings, head, final norm) included. FSDP2 leaves the root's parameters gathered after a
forward, and a copy written into them then was thrown away: a run kept step 100 by its record
and saved step 150's head. One process on gloo shows it (a mesh of one rank shards the same
way), in a child process so the process group stays out of the test session."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    from tunelab.training.sharding import full_trainable, shard
    from tunelab.training.validate import Validation

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0,
                            world_size=1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
    shard(model, torch.device("cpu"), 1, "fp32")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.randint(0, 100, (2, 8))
    kept = Validation(examples=[], every=1, keep="best")

    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            model(input_ids=ids)  # a validation forward: the root stays gathered after it

    step()
    kept.record(model, 1, loss=0.5, train_loss=1.0)  # the best
    best = {k: v.clone() for k, v in full_trainable(model).items()}  # not views of the model
    step()
    kept.record(model, 2, loss=0.9, train_loss=0.8)
    moved = {k: v.clone() for k, v in full_trainable(model).items()}
    assert any(not torch.equal(best[k], moved[k]) for k in best)
    kept.restore(model, 2)
    after = full_trainable(model)
    wrong = sorted(k for k in best if not torch.equal(best[k], after[k]))
    print("wrong:", wrong)
    sys.exit(1 if wrong else 0)
    """
)


def test_keep_best_restores_every_tensor_of_a_sharded_model(tiny_llama):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_llama), str(port)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
