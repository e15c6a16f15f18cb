"""The core LLM service on a tiny Llama: batched and single generation agree, sampling is
seeded, continuation log-probabilities are the model's, chat uses the template, and bad
model specs are one line (without creating an MLflow database)."""

import pytest
import torch

from tasks.core.causal_lm import load_causal_lm
from tasks.core.errors import UserError
from tasks.core.llm import open_llm
from tasks.core.llm_local import LocalLLM
from tasks.core.llm_params import GenerationParams, LLMParams, LocalBackendParams
from tests.unit.tiny_llm import save_tiny_checkpoint, tiny_llama, tiny_tokenizer

PROMPTS = ["All human beings are", "One of the special magic numbers", "Return the"]


@pytest.fixture(scope="module")
def llm():
    tokenizer = tiny_tokenizer()
    return LocalLLM(tiny_llama(len(tokenizer)), tokenizer, batch_size=3)


def test_batched_generation_equals_one_prompt_at_a_time(llm):
    batched = llm.complete(PROMPTS, max_new_tokens=8)
    single = [llm.complete([p], max_new_tokens=8)[0] for p in PROMPTS]
    assert batched == single and any(batched)


def test_sampling_is_seeded_and_greedy_is_the_default(llm):
    first = llm.complete(PROMPTS, max_new_tokens=10, temperature=1.5, seed=7)
    assert first == llm.complete(PROMPTS, max_new_tokens=10, temperature=1.5, seed=7)
    assert first != llm.complete(PROMPTS, max_new_tokens=10, temperature=1.5, seed=8)
    assert llm.complete(PROMPTS, 6) == llm.complete(PROMPTS, 6, temperature=0)


def test_continuation_logprobs_are_the_models_token_logprobs(llm):
    prompt, continuation = "All human beings", " are born free"
    got = llm.continuation_logprobs([prompt, "Return"], [continuation, " the list"])
    head = llm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    tail = llm.tokenizer(continuation, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = llm.model(input_ids=torch.tensor([head + tail])).logits[0]
    expected = torch.log_softmax(logits, -1)[len(head) - 1 : -1].gather(
        1, torch.tensor(tail).unsqueeze(1)
    )
    assert len(got[0]) == len(tail)
    torch.testing.assert_close(torch.tensor(got[0]), expected[:, 0], rtol=1e-4, atol=1e-4)
    assert all(v <= 0 for v in got[1])


def test_chat_goes_through_the_chat_template(llm):
    prompt = llm.chat_prompt([{"role": "user", "content": "Hello"}])
    assert prompt.startswith("<|im_start|>user\nHello<|im_end|>")
    assert prompt.endswith("<|im_start|>assistant\n")
    assert llm.chat([[{"role": "user", "content": "Hello"}]], 5) == [
        llm.complete([prompt], 5, special=False)[0]
    ]


def test_open_llm_loads_a_checkpoint_folder_and_the_openai_backend_needs_its_key(
    tmp_path, monkeypatch
):
    save_tiny_checkpoint(tmp_path / "ckpt")
    params = LLMParams(
        local=LocalBackendParams(model="ckpt", threads=1),
        generation=GenerationParams(max_new_tokens=4),
    )
    local = open_llm(params, tmp_path)
    assert isinstance(local, LocalLLM) and isinstance(local.ask("Hello"), str)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match=r"\$OPENAI_API_KEY is unset"):
        open_llm(params.model_copy(update={"backend": "openai"}), tmp_path)


def test_bad_model_specs_are_one_line_and_create_no_database(tmp_path):
    with pytest.raises(UserError, match="no such model folder"):
        load_causal_lm(str(tmp_path / "missing"))
    (tmp_path / "config.json").write_text(
        '{"model_type": "bert", "architectures": ["BertForMaskedLM"]}'
    )
    with pytest.raises(UserError, match="is not a causal LM"):
        load_causal_lm(str(tmp_path))
    store = tmp_path / "mlruns" / "mlflow.db"
    with pytest.raises(UserError, match="there is no MLflow store"):
        load_causal_lm("models:/paperline-llm@candidate", tracking_uri=f"sqlite:///{store}")
    assert not store.exists()
