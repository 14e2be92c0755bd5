"""The explorer's exported numbers are the package's attention weights, rounded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from attnlab import examples
from hooks import explorer_data as explorer  # hooks/explorer_data.py: site code, not the package

DECIMALS, TEMPERATURES = explorer.DECIMALS, explorer.TEMPERATURES
explorer_data = explorer.explorer_data
explorer_sentences = explorer.explorer_sentences
explorer_weights = explorer.explorer_weights


def _softmax_reference(
    queries: torch.Tensor, keys: torch.Tensor, scale: float, causal: bool
) -> torch.Tensor:
    """PyTorch's own softmax and triu mask, independent of attnlab's functional core."""
    scores = (queries.double() @ keys.double().transpose(0, 1)) * scale
    if causal:
        hidden = torch.ones_like(scores, dtype=torch.bool).triu(diagonal=1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=-1)


def test_data_lists_three_sentences_with_every_setting() -> None:
    """Three sentences; 2 scalings x 2 maskings x 5 temperatures of T x T rows each."""
    data = explorer_data()
    assert data["decimals"] == DECIMALS == 4
    assert data["temperatures"] == [0.25, 0.5, 1.0, 2.0, 4.0] == list(TEMPERATURES)
    assert [s["text"] for s in data["sentences"]] == [
        "Your journey starts with one step",
        "Dream big and work for it",
        "Life is short, eat dessert first",
    ]
    assert [s["d_k"] for s in data["sentences"]] == [3, 3, 24]
    for sentence in data["sentences"]:
        T = len(sentence["words"])
        assert set(sentence["weights"]) == {"scaled", "unscaled"}
        for by_mask in sentence["weights"].values():
            assert set(by_mask) == {"causal", "full"}
            for matrices in by_mask.values():
                assert len(matrices) == len(TEMPERATURES)
                for matrix in matrices:
                    assert len(matrix) == T and all(len(row) == T for row in matrix)
                    for row in matrix:
                        assert sum(row) == pytest.approx(1.0, abs=T * 0.5e-4 + 1e-9)
                        assert all(round(value, DECIMALS) == value for value in row)


@pytest.mark.parametrize("scaled", [True, False], ids=["scaled", "unscaled"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_every_matrix_matches_an_independent_softmax(scaled: bool, causal: bool) -> None:
    """Each exported matrix is softmax(q k^T * scale / tau), masked, to 4 decimals."""
    data = explorer_data()
    masking = "causal" if causal else "full"
    scaling = "scaled" if scaled else "unscaled"
    for sentence, exported in zip(explorer_sentences(), data["sentences"], strict=True):
        d_k = sentence.keys.shape[-1]
        for t, tau in enumerate(TEMPERATURES):
            scale = (1 / math.sqrt(d_k) if scaled else 1.0) / tau
            expected = _softmax_reference(sentence.queries, sentence.keys, scale, causal)
            got = torch.tensor(exported["weights"][scaling][masking][t], dtype=torch.float64)
            assert torch.allclose(got, expected, atol=0.5e-4 + 1e-6), (sentence.id, tau)
            if causal:
                assert torch.all(got.triu(diagonal=1) == 0)


def test_walkthrough_and_tutorial_numbers() -> None:
    """The rows the chapters and the tutorials print appear unchanged."""
    sentences = explorer_data()["sentences"]
    journey = sentences[0]["weights"]["unscaled"]["full"][2]
    assert journey[1] == [0.1385, 0.2379, 0.2333, 0.124, 0.1082, 0.1581]
    life = sentences[2]["weights"]["scaled"]["full"][2]
    assert life[1] == [0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458]


def test_life_is_short_projection_follows_the_tutorial_seed() -> None:
    """W_query, W_key are torch.rand(24, 16) in that order after seed 123; RNG untouched."""
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    life = explorer_sentences()[2]
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(123)
    W_query = torch.rand(24, 16)
    W_key = torch.rand(24, 16)
    inputs = examples.life_is_short().inputs
    assert torch.equal(life.queries, inputs @ W_query.transpose(0, 1))
    assert torch.equal(life.keys, inputs @ W_key.transpose(0, 1))
    assert life.words == ("Life", "is", "short", "eat", "dessert", "first")


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("inf"), float("nan")])
def test_explorer_weights_rejects_a_bad_temperature(temperature: float) -> None:
    inputs = examples.your_journey().inputs
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        explorer_weights(inputs, inputs, scaled=True, causal=False, temperature=temperature)


def test_built_site_ships_the_same_data(built_site: Path) -> None:
    """The build hook wrote explorer_data() to assets/explorer-data.json."""
    shipped = json.loads((built_site / "assets" / "explorer-data.json").read_text("utf-8"))
    assert shipped == json.loads(json.dumps(explorer_data()))
    page = (built_site / "explorer.html").read_text("utf-8")
    assert 'id="explorer-data-link"' in page
    assert 'id="attention-explorer"' in page


def test_recall_data_comes_from_the_trained_and_untrained_models() -> None:
    """Every question's weights are the models' own, and the trained model answers right."""
    from attnlab import recall

    RECALL_SEQUENCES, recall_data = explorer.RECALL_SEQUENCES, explorer.recall_data

    data = recall_data()
    untrained, trained, _ = recall.trained_recall_model()
    batch = recall.held_out_batch(RECALL_SEQUENCES)
    assert len(data["sequences"]) == RECALL_SEQUENCES
    for i, sequence in enumerate(data["sequences"]):
        real = int(batch.present[i].sum())
        assert len(sequence["keys"]) == len(sequence["values"]) == real
        for q, question in enumerate(sequence["questions"]):
            one = recall.RecallBatch(
                batch.keys[i : i + 1],
                batch.values[i : i + 1],
                batch.present[i : i + 1],
                batch.keys[i, q : q + 1],
                batch.values[i, q : q + 1],
                torch.tensor([q]),
            )
            with torch.no_grad():
                for name, model in (("before", untrained), ("after", trained)):
                    weights = model(one)[1][0, :real]
                    assert question[name] == pytest.approx(weights.tolist(), abs=1e-4)
            assert question["target"] == sequence["values"][q]
            assert question["answer_after"] == question["target"]
            assert question["after"][q] > 0.9


def test_explorer_page_inlines_its_data(built_site: Path) -> None:
    """The page carries its data, so it works opened from disk, where fetch is blocked."""
    page = (built_site / "explorer.html").read_text("utf-8")
    start = page.index('<script type="application/json" id="explorer-data">')
    inline = page[start:].split(">", 1)[1].split("</script>", 1)[0]
    assert json.loads(inline.replace("<\\/", "</")) == json.loads(json.dumps(explorer_data()))
    assert 'id="recall-explorer"' in page


# --- the real model (SmolLM2) ------------------------------------------------------------


@pytest.fixture(scope="module")
def llm() -> dict:  # type: ignore[type-arg]
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    return explorer.llm_data()


def test_llm_data_has_every_layer_and_head_of_a_few_short_prompts(llm: dict) -> None:  # type: ignore[type-arg]
    """30 layers x 9 heads per prompt; causal rows of i + 1 thousandths summing to ~1000."""
    LLM_DECIMALS, LLM_PROMPTS = explorer.LLM_DECIMALS, explorer.LLM_PROMPTS

    assert (llm["layers"], llm["heads"], llm["decimals"], llm["scale"]) == (30, 9, 3, 1000)
    assert LLM_DECIMALS == 3
    assert (
        [p["id"] for p in llm["prompts"]]
        == [i for i, _ in LLM_PROMPTS]
        == ["france", "repeat", "store"]
    )
    for prompt in llm["prompts"]:
        T = len(prompt["tokens"])
        assert 4 <= T <= 24
        assert len(prompt["weights"]) == 30
        for layer in prompt["weights"]:
            assert len(layer) == 9
            for matrix in layer:
                assert [len(row) for row in matrix] == list(range(1, T + 1))
                for row in matrix:
                    assert all(isinstance(v, int) and 0 <= v <= 1000 for v in row)
                    assert abs(sum(row) - 1000) <= 0.5 * len(row) + 1
    france = llm["prompts"][0]
    assert "".join(france["tokens"]) == france["text"]


def test_llm_data_is_the_models_own_weights_rounded(llm: dict) -> None:  # type: ignore[type-arg]
    """Every stored row equals attention_maps(model, ids) to within half a thousandth."""
    from attnlab.llama import load_smollm2
    from attnlab.llama.interpret import attention_maps, repeated_random_tokens

    model, tokenizer = load_smollm2()
    for prompt in llm["prompts"]:
        if prompt["id"] == "repeat":
            ids = repeated_random_tokens(10, seed=0)[0]
        else:
            ids = torch.tensor(tokenizer.encode(prompt["text"]))
        assert [tokenizer.decode([int(i)]) for i in ids] == prompt["tokens"]
        maps = attention_maps(model, ids)[0].double()  # (30, 9, T, T)
        T = ids.shape[0]
        stored = torch.zeros(30, 9, T, T, dtype=torch.float64)
        for n, layer in enumerate(prompt["weights"]):
            for h, matrix in enumerate(layer):
                for i, row in enumerate(matrix):
                    stored[n, h, i, : i + 1] = torch.tensor(row, dtype=torch.float64) / 1000
        assert torch.allclose(stored, maps, atol=0.5e-3 + 1e-6), prompt["id"]


def test_llm_repeat_prompt_shows_the_induction_head(llm: dict) -> None:  # type: ignore[type-arg]
    """On the repeated tokens, layer 18 head 6 looks from copy 2 at the token after copy 1's."""
    repeat = llm["prompts"][1]
    tokens = repeat["tokens"]
    assert tokens[0] == "<|endoftext|>" and tokens[1:11] == tokens[11:]
    matrix = repeat["weights"][18][6]
    on_target = [matrix[p][p - 9] / 1000 for p in range(11, 21)]
    assert sum(on_target) / len(on_target) > 0.5
