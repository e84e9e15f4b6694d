"""Each case's opset (bot.cases.opsets): drawn from the seed alone over the campaign's range,
half at its top, a mutant at its parent's; the range set by the config and the sides' probe."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import pytest

from backends.reference import model_opset
from bot.cases.making import ALONE_EVERY, ONE_SIDE_EVERY, alone_side
from bot.cases.opsets import OpsetPlan, campaign_range, draw_opset
from bot.cases.source import CaseSource
from bot.config import load_config
from bot.sides.opset_probe import ceiling_for
from generator.api import DEFAULT_OPSET, OLDEST_GENERATED, GenConfig, generate
from generator.dtypes import DType
from generator.emit import NEWEST_OPSET
from reducers.candidate import tensor_types


def test_half_the_seeds_draw_the_top_and_the_rest_spread_below_it() -> None:
    drawn = Counter(draw_opset(seed, 17, 26) for seed in range(4000))
    assert set(drawn) == set(range(17, 27))
    assert 0.46 < drawn[26] / 4000 < 0.54
    below = [drawn[o] for o in range(17, 26)]
    assert max(below) < 1.5 * min(below), drawn


def test_the_draw_is_the_seeds_alone() -> None:
    first = [draw_opset(seed, 17, 21) for seed in range(200)]
    again = [draw_opset(seed, 17, 21) for seed in range(200)]
    assert first == again
    assert {draw_opset(seed, 19, 19) for seed in range(50)} == {19}


def test_a_mutant_grows_at_its_parents_opset_and_a_fresh_seed_at_its_draw() -> None:
    plan = OpsetPlan(17, 26)
    parent = generate(5, GenConfig(nodes=3, opset=19, values="none")).genome
    assert parent is not None and parent.opset == 19
    assert plan.opset_of(123, parent) == 19
    assert plan.opset_of(123) == draw_opset(123, 17, 26)
    assert OpsetPlan(20, 26).opset_of(123, parent) == draw_opset(123, 20, 26), "outside the range: drawn"


def test_a_case_draws_from_the_support_of_its_own_opset() -> None:
    both = {17: {"Relu": {DType.float32}}, 18: {"Mish": {DType.float32}}}
    plan = OpsetPlan(17, 18, both)
    seeds = {draw_opset(s, 17, 18): s for s in range(40)}
    for opset, seed in seeds.items():
        cfg, support = plan.case_config(GenConfig(nodes=2), seed)
        assert cfg.opset == opset and support == both[opset]
    assert plan.any_opset() == {"Relu": {DType.float32}, "Mish": {DType.float32}}
    assert OpsetPlan(17, 18).case_config(GenConfig(), 3)[1] is None, "no probe: everything"


def test_a_share_of_one_sides_seeds_draws_its_pairs_alone_where_it_has_them() -> None:
    """A pair head dropped at one opset (ArgMin at 12, say) is drawn alone, at that opset,
    by one seed in ONE_SIDE_EVERY * ALONE_EVERY; the other seeds draw as before, and a seed
    that draws alone never grows a mutant."""
    both = {o: {"Relu": {DType.float32}} for o in (11, 12, 13)}
    base_all = {12: {"Relu": {DType.float32}, "ArgMin": {DType.float32}}}
    dropped = {12: {"ArgMin": {DType.float32}}}
    plan = OpsetPlan(11, 13, both, None, base_all, None, dropped)
    drawn = {seed: plan.case_config(GenConfig(nodes=2), seed) for seed in range(400)}
    alone = [seed for seed, (cfg, support) in drawn.items() if support == dropped[12]]
    assert alone and all(drawn[s][0].opset == 12 for s in alone)
    assert alone == [s for s in range(400) if alone_side(s) == "base"]
    assert len(alone) == 400 // (ONE_SIDE_EVERY * ALONE_EVERY)
    rest = [s for s in range(400) if s not in alone]
    assert all(drawn[s][0].opset == draw_opset(s, 11, 13) for s in rest)
    assert all(drawn[s][1] is not dropped[12] for s in rest)
    assert OpsetPlan(11, 13, both).alone(alone[0]) is None, "the sides run the same: nothing alone"
    source = CaseSource(GenConfig(nodes=2), 0)
    source.opsets = plan
    source.add_parent(source.next(lambda: True) or pytest.fail("no case"), "test")
    assert all(source.plan_mutant(s) is None for s in alone)
    assert any(source.plan_mutant(s) is not None for s in rest), "the others still grow mutants"


def test_a_seed_that_draws_wide_pairs_alone_starts_from_a_wide_type() -> None:
    """onnxruntime 1.18.0 runs bfloat16 IsNaN and IsInf, and nothing else that 1.17.3 does
    not. A case starts from bfloat16 only on the `wide_types` share of the seeds, so every
    seed that drew those pairs alone grew nothing and was dropped (195 cases of one 5-minute
    campaign). Those seeds are now of the wide share, and each grows a bfloat16 IsNaN or
    IsInf; a seed drawing a classic type alone, and every other seed, keeps its config."""
    both = {o: {"Relu": {DType.float32}} for o in (19, 20)}
    added = {20: {"IsNaN": {DType.bfloat16}, "IsInf": {DType.bfloat16}}}
    head_all = {20: {**both[20], **added[20]}}
    plan = OpsetPlan(19, 20, both, head_all, None, added, None)
    alone = [s for s in range(200) if alone_side(s) == "head"]
    for seed in alone:
        cfg, support = plan.case_config(GenConfig(nodes=3), seed)
        assert support == added[20] and cfg.wide_types == 1.0
        case = generate(seed, cfg, support=support)
        onnx.shape_inference.infer_shapes(case.model, strict_mode=True)
        types = tensor_types(case.model)
        grown = [n for n in case.model.graph.node if n.op_type in support]
        assert grown and {types[n.input[0]].tensor_type.elem_type for n in grown} == {onnx.TensorProto.BFLOAT16}, seed
    rest = [s for s in range(200) if s not in alone]
    assert all(plan.case_config(GenConfig(nodes=3), s)[0].wide_types == GenConfig().wide_types for s in rest)
    classic = OpsetPlan(19, 20, both, head_all, None, {20: {"IsNaN": {DType.float16}}}, None)
    assert classic.case_config(GenConfig(nodes=3), alone[0])[0].wide_types == GenConfig().wide_types
    narrow = GenConfig(nodes=3, wide_types=0.0)
    assert plan.case_config(narrow, alone[0])[0].wide_types == 0.0, "a config that never draws them still never does"


def test_the_range_ends_at_the_lowest_side_and_a_pin_is_kept() -> None:
    """A probed campaign starts at the oldest opset the generator writes (converters of an
    op's version 11 or 12 run only there), unless the config names its `opset_min`."""
    default = GenConfig()
    assert default.opset is None and default.written_opset == DEFAULT_OPSET
    assert campaign_range(default, [20, 26]) == (OLDEST_GENERATED, 20)
    assert campaign_range(default, [26]) == (OLDEST_GENERATED, NEWEST_OPSET)
    assert campaign_range(GenConfig(opset_max=22), [26, 26]) == (OLDEST_GENERATED, 22)
    assert campaign_range(GenConfig(opset_min=DEFAULT_OPSET), [20, 26]) == (DEFAULT_OPSET, 20)
    assert campaign_range(GenConfig(opset_min=19), [26]) == (19, NEWEST_OPSET)
    assert campaign_range(GenConfig(opset_min=19), [16, 26]) == (16, 16), "a side that loads less lowers it"
    pinned = GenConfig(opset=19)
    assert pinned.written_opset == 19 and campaign_range(pinned, [17, 26]) == (19, 19)
    assert campaign_range(default, [None, 26]) == (DEFAULT_OPSET, DEFAULT_OPSET), "a side that loaded nothing"
    assert campaign_range(default, None) == (DEFAULT_OPSET, DEFAULT_OPSET), "no probe: opset_min"
    assert campaign_range(GenConfig(opset_max=21), None) == (DEFAULT_OPSET, 21)


def test_the_config_file_pins_or_bounds_the_opsets(tmp_path: Path) -> None:
    path = tmp_path / "fuzzbot.yml"
    path.write_text("generator:\n  opset: 18\n")
    assert load_config(path, {}).generator.opset == 18
    path.write_text("generator:\n  opset_min: 18\n  opset_max: 20\n")
    gen = load_config(path, {}).generator
    assert gen.opset is None and (gen.opset_min, gen.opset_max, gen.written_opset) == (18, 20, 18)
    with pytest.raises(ValueError, match="opset_max 18 is below opset_min 20"):
        GenConfig(opset_min=20, opset_max=18)


def test_an_adapters_declared_highest_opset_bounds_the_question() -> None:
    assert ceiling_for([7, 21]) == 21
    assert ceiling_for([7, 99]) == NEWEST_OPSET
    assert ceiling_for(None) == ceiling_for([]) == NEWEST_OPSET


@pytest.mark.parametrize("processes", [0, 1])
def test_each_case_imports_its_seeds_opset_in_this_process_or_a_generation_process(processes: int) -> None:
    source = CaseSource(GenConfig(nodes=3), first_seed=40)
    source.opsets = OpsetPlan(17, NEWEST_OPSET)
    source.processes = processes
    opsets = {}
    for _ in range(8):
        case = source.next(lambda: True)
        assert case is not None
        opsets[case.seed] = model_opset(case.model)
    source.close()
    assert opsets == {seed: draw_opset(seed, 17, NEWEST_OPSET) for seed in opsets}
    assert sum(source.coverage.opsets.values()) == source.coverage.models >= 8
