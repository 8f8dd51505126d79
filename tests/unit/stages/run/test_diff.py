import copy

import pytest

from tunelab.core.param_groups import diff_specs, group_of
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.stages.run.diff import (
    OneChangeError,
    ParentError,
    check_one_change,
    diff_runs,
    diff_warnings,
    format_diff,
    resolve_parent,
)

RAW = {
    "hypothesis": {"behaviour": "topics", "metric": "macro_f1", "min_effect": 0.01},
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
    "data": {"sources": [{"type": "jsonl", "path": "docs.jsonl"}]},
    "model": {"path": "m", "max_length": 32},
    "method": {"type": "lora", "r": 4, "target_modules": ["query", "value"]},
    "training": {"lr": 5e-3, "global_batch": 8, "microbatch": 4, "budget": {"steps": 4}},
}


def spec(**changes) -> dict:
    """The resolved spec dict with dotted keys changed, e.g. spec(**{"training.lr": 1e-3})."""
    raw = copy.deepcopy(RAW)
    for dotted, value in changes.items():
        node = raw
        *path, last = dotted.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return validate_spec(raw).to_dict()


def test_one_group_changed_is_allowed():
    diff = diff_specs(spec(), spec(**{"training.lr": 1e-3, "training.weight_decay": 0.1}))
    assert diff == {
        "optimizer": [
            {"key": "training.lr", "parent": 5e-3, "child": 1e-3},
            {"key": "training.weight_decay", "parent": 0.0, "child": 0.1},
        ]
    }
    check_one_change(diff, None)


def test_nothing_changed_is_a_repeat_and_allowed():
    diff = diff_specs(spec(), spec())
    assert diff == {}
    check_one_change(diff, None)
    assert format_diff(diff) == "no change (a repeat)"


def test_two_groups_are_refused_without_a_reason_and_named():
    diff = diff_specs(spec(), spec(**{"training.lr": 1e-3, "method.r": 8}))
    assert list(diff) == ["method", "optimizer"]
    with pytest.raises(OneChangeError) as err:
        check_one_change(diff, None, parent="r002-probe")
    message = str(err.value)
    assert "2 parameter groups against r002-probe" in message
    assert "method: method.r 4 -> 8" in message
    assert "optimizer: training.lr 0.005 -> 0.001" in message
    assert '--reason "..."' in message
    with pytest.raises(OneChangeError):
        check_one_change(diff, "   ")  # a blank reason is no reason
    check_one_change(diff, "rank and lr are tuned together in the paper we follow")


def test_nested_keys_are_dotted_and_grouped():
    diff = diff_specs(
        spec(),
        spec(**{"training.budget": {"steps": 8}, "data.split": {"seed": 3}}),
    )
    assert diff["budget"] == [{"key": "training.budget.steps", "parent": 4, "child": 8}]
    assert diff["data"] == [{"key": "data.split.seed", "parent": 0, "child": 3}]


def test_lists_are_compared_whole():
    diff = diff_specs(spec(), spec(**{"method.target_modules": ["query", "key", "value"]}))
    assert diff == {
        "method": [
            {
                "key": "method.target_modules",
                "parent": ["query", "value"],
                "child": ["query", "key", "value"],
            }
        ]
    }
    rails = [{"metric": "f1", "scope": "every_class", "max_drop": 0.0}]
    (change,) = diff_specs(spec(), spec(guardrails=rails))["plan"]
    assert change["key"] == "guardrails" and change["child"][0]["max_drop"] == 0.0


def test_changes_to_several_parts_of_a_model_are_several_changes():
    """GQA, experts, a width and the evaluation window passed as one change (`model`)."""
    from tunelab.stages.run.diff import OneChangeError, check_one_change

    before = {"model": {"arch": {"num_key_value_heads": 8, "moe": {"num_experts": 0}}}}
    after = {"model": {"arch": {"num_key_value_heads": 2, "moe": {"num_experts": 4}}}}
    diff = diff_specs(before, after)
    assert list(diff) == ["attention", "experts"]
    with pytest.raises(OneChangeError, match="changes 2 parameter groups"):
        check_one_change(diff, None)


def test_groups_follow_the_spec():
    assert group_of("model.dtype") == "precision"
    assert group_of("training.precision") == "precision"
    for lever in ("threads", "compile", "group_by_length", "packing"):
        assert group_of(f"training.{lever}") == "speed"
    assert group_of("model.attention") == "speed"
    assert group_of("model.max_length") == "length"
    assert group_of("model.path") == group_of("model.arch.hidden_size") == "model"
    # a scratch ablation's parts, each one change (they had all been `model`)
    assert group_of("model.arch.num_key_value_heads") == "attention"
    assert group_of("model.arch.rope.nope_layers") == "positions"
    assert group_of("model.arch.moe.num_experts") == group_of("model.arch.moe.top_k") == "experts"
    assert group_of("model.bpe.vocab_size") == group_of("model.tokenizer") == "tokenizer"
    assert group_of("training.microbatch") == "batch"
    assert group_of("training.warmup_steps") == "schedule"
    assert group_of("training.max_grad_norm") == "optimizer"
    assert group_of("training.seed") == "seed"
    assert group_of("hypothesis.min_effect") == "plan"
    assert group_of("compass.why") == "plan"
    assert group_of("task.labels") == "task"
    assert group_of("evaluation.batch_size") == "evaluation"
    assert group_of("training.something_new") == "training"  # unknown: counted, not hidden
    # measuring validation as it trains moves no weight: not a change (keeping its best does)
    assert group_of("training.validate_every") == group_of("training.overfit_patience")
    assert group_of("training.validate_every") == "runtime"
    assert group_of("training.keep") == "training" and group_of("training.decay_fraction") == (
        "schedule"
    )


def test_a_method_switch_is_one_group():
    diff = diff_specs(spec(), spec(method={"type": "full"}))
    assert list(diff) == ["method"]
    assert {c["key"] for c in diff["method"]} >= {"method.type", "method.r"}


def test_a_new_data_version_is_a_data_change():
    parent = {"id": "r002-probe", "spec": spec(), "data_version": "v1"}
    diff = diff_runs(parent, spec(), "v2")
    assert diff == {"data": [{"key": "data_version", "parent": "v1", "child": "v2"}]}
    check_one_change(diff, None)
    assert any("data version changed" in w for w in diff_warnings(diff))
    # the same validation content on both versions: the runs still pair, no warning
    assert diff_warnings(diff, same_validation=True) == []
    both = diff_runs(parent, spec(**{"training.lr": 1e-3}), "v2")
    with pytest.raises(OneChangeError, match="data: data_version 'v1' -> 'v2'"):
        check_one_change(both, None)
    assert diff_runs(parent, spec(), "v1") == {}


def test_an_evaluation_change_is_a_group_and_loudly_flagged():
    diff = diff_specs(spec(), spec(**{"evaluation.batch_size": 8}))
    assert list(diff) == ["evaluation"]
    (warning,) = diff_warnings(diff)
    assert "evaluation protocol changed" in warning and "evaluation.batch_size 32 -> 8" in warning
    with pytest.raises(OneChangeError, match="evaluation"):
        check_one_change(
            diff_specs(spec(), spec(**{"evaluation.batch_size": 8, "method.r": 2})), None
        )
    (warning,) = diff_warnings(diff_specs(spec(), spec(**{"model.max_length": 64})))
    assert "model.max_length 32 -> 64" in warning


def test_rental_is_recorded_but_not_counted():
    diff = diff_specs(spec(), spec(rental={"days": 30}, **{"training.lr": 1e-3}))
    assert set(diff) == {"optimizer", "runtime"}
    check_one_change(diff, None)


def test_a_new_seed_beside_another_change_is_two_changes():
    """A seed's luck mixed into an lr change is what the rule exists to refuse."""
    diff = diff_specs(spec(), spec(**{"training.seed": 7, "training.lr": 1e-3}))
    assert set(diff) == {"seed", "optimizer"}
    with pytest.raises(OneChangeError, match="2 parameter groups"):
        check_one_change(diff, None)
    check_one_change(diff_specs(spec(), spec(**{"training.seed": 7})), None)  # a seed alone


def test_a_parent_stored_before_a_field_existed_reads_its_default():
    parent = spec()
    del parent["training"]["warmup_steps"]
    del parent["evaluation"]
    assert diff_specs(parent, spec()) == {}


def write(store: Store, name: str, kind: str, status: str = "completed", version: str = "v1"):
    run_id, _ = store.new_run(name)
    record = {"id": run_id, "kind": kind, "status": status, "data_version": version, "spec": {}}
    store.write_record(run_id, record)
    return run_id


def test_the_default_parent_is_the_newest_completed_baseline_on_the_version(tmp_path):
    store = Store(tmp_path)
    assert resolve_parent(store, "v1", None) is None
    write(store, "majority", "baseline")
    probe = write(store, "probe", "baseline")
    write(store, "probe", "baseline", version="v0")
    write(store, "probe", "baseline", status="failed")
    write(store, "lora", "variant")
    assert resolve_parent(store, "v1", None)["id"] == probe


def test_a_named_parent_must_exist_and_be_completed(tmp_path):
    store = Store(tmp_path)
    lora = write(store, "lora", "variant")
    broken = write(store, "crash", "variant", status="failed")
    assert resolve_parent(store, "v1", lora)["id"] == lora
    with pytest.raises(ParentError, match="failed, not completed"):
        resolve_parent(store, "v1", broken)
    with pytest.raises(ParentError, match="no run 'r999'"):
        resolve_parent(store, "v1", "r999")


def test_a_width_that_follows_the_changed_setting_is_named():
    """`experts_per_token` 1 -> 4 also took each expert from 256 to 64 wide (and the total
    parameters with it); the diff named experts_per_token alone."""
    from tunelab.stages.run.diff import derived_changes

    def spec(**moe):
        arch = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256}
        return {"model": {"arch": arch | {"moe": {"num_experts": 4, **moe}}}}

    before, after = spec(experts_per_token=1), spec(experts_per_token=4)
    diff = diff_specs(before, after)
    (said,) = derived_changes(before, after, diff)
    assert said.startswith("expert size 256 -> 64: `model.arch.moe.expert_size` is not set")
    # set on both sides, it does not follow: nothing to name
    before, after = (
        spec(experts_per_token=1, expert_size=64),
        spec(experts_per_token=4, expert_size=64),
    )
    assert derived_changes(before, after, diff_specs(before, after)) == []
    # heads: the key/value heads follow them where unset, and the head width moves
    mha = {"model": {"arch": {"hidden_size": 64, "num_attention_heads": 4}}}
    eight = {"model": {"arch": {"hidden_size": 64, "num_attention_heads": 8}}}
    said = derived_changes(mha, eight, diff_specs(mha, eight))
    assert [s.split(":")[0] for s in said] == ["kv heads 4 -> 8", "head dim 16 -> 8"]
    assert derived_changes({"model": {"path": "m"}}, {"model": {"path": "n"}}, {}) == []


def test_a_base_is_diffed_by_its_weights_not_by_its_path():
    """The same weights moved to another folder had counted as a change of the model (a run
    with one more change refused); other weights at the same path read "the same spec"."""
    parent = {"spec": spec(), "data_version": "v1", "base_model": {"weights_sha256": "a" * 64}}
    moved = diff_runs(
        parent, spec(**{"model.path": "elsewhere"}), "v1", {"weights_sha256": "a" * 64}
    )
    assert "model" not in moved and moved["runtime"][0]["same_base"]
    both = spec(**{"model.path": "elsewhere", "training.lr": 1e-3})
    check_one_change(diff_runs(parent, both, "v1", {"weights_sha256": "a" * 64}), None)
    changed = diff_runs(parent, spec(), "v1", {"weights_sha256": "b" * 64})
    assert changed == {
        "model": [{"key": "base weights sha256", "parent": "a" * 16, "child": "b" * 16}]
    }
    assert diff_runs(parent, spec(), "v1") == {}  # no identity given: the spec alone
    # the same weights, another config.json: a change of the model too (it read "the same")
    hashed = parent | {"base_model": {"weights_sha256": "a" * 64, "files": {"config.json": "c"}}}
    edited = {"weights_sha256": "a" * 64, "files": {"config.json": "d"}}
    assert diff_runs(hashed, spec(), "v1", edited)["model"][0]["child"] == ["config.json"]
