"""FSDP2's gathered state loads back into an unsharded copy of a model whose input embeddings
and output head are one tensor (tied: SmolLM2, the pretrain template's scratch model). The
gathered state names the tensor under both names, and `named_parameters` only once: every
FSDP run of such a model trained to its end, then failed with `KeyError: 'lm_head.weight'`,
keeping nothing. One process on gloo shards the same way, in a child process so the process
group stays out of the test session."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    from transformers import LlamaConfig, LlamaForCausalLM

    from tunelab.training.sharding import full_trainable, load_trainable, shard

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0,
                            world_size=1)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    shard(model, torch.device("cpu"), 1, "fp32")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.randint(0, 64, (2, 8))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    gathered = full_trainable(model)
    assert "lm_head.weight" in gathered, sorted(gathered)
    torch.manual_seed(1)
    fresh = LlamaForCausalLM(config)
    load_trainable(fresh, gathered)
    assert fresh.lm_head.weight is fresh.model.embed_tokens.weight  # still one tensor
    wrong = sorted(n for n, p in fresh.state_dict().items() if not torch.equal(p, gathered[n]))
    print("wrong:", wrong)
    sys.exit(1 if wrong else 0)
    """
)


def test_a_tied_model_s_gathered_state_loads_into_an_unsharded_copy():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(port)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
