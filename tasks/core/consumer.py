"""The registry consumer's contract: every registered model answers its natural input.

`mlflow.pyfunc.load_model("models:/<name>@<alias>").predict(natural input)` returns the
natural output (named columns, text, one vector per text), and MLflow records what that
means: the signature inferred from a real input example through the model's own
`predict`, and the example stored beside it. `log_pyfunc_model` logs an area's
`mlflow.pyfunc.PythonModel` wrapper that way (card beside it); `require_contract` is what
`training.publish` checks before it registers anything, so a model without a signature or
an input example never reaches the registry.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tasks.core.errors import UserError
from tasks.core.tracking import MODEL_CARD_FILE, ModelCard

PACKAGES = ("torch", "transformers", "tokenizers", "pandas")


def pinned(packages: Sequence[str]) -> list[str]:
    """`pkg==<running version>` (MLflow's inference would reload the model in a subprocess)."""
    return [f"{p}=={version(p).split('+')[0]}" for p in packages]


def log_pyfunc_model(
    python_model: Any,
    name: str,
    card: ModelCard,
    input_example: Any,
    *,
    artifacts: Mapping[str, Path | str] | None = None,
    params: Mapping[str, Any] | None = None,
    packages: Sequence[str] = PACKAGES,
    optional: Sequence[str] = (),
) -> Any:
    """Log `python_model` (a PythonModel whose `load_context` reads `artifacts`) as `name`
    in the active run with its signature inferred from `input_example` and what its
    `predict` returns for it (with `params`, which become the signature's defaults;
    `optional`: input columns a caller may leave out), the example stored, the card beside
    it; MLflow's ModelInfo."""
    import mlflow
    from mlflow.models import infer_signature
    from mlflow.pyfunc import PythonModelContext

    local = {key: str(path) for key, path in (artifacts or {}).items()}
    probe = copy.deepcopy(python_model)  # loaded here, so the logged one is pickled unloaded
    context = PythonModelContext(artifacts=local, model_config={})
    probe.load_context(context)
    output = probe.predict(context, input_example, params=dict(params) if params else None)
    signature = infer_signature(input_example, output, params=dict(params) if params else None)
    if optional:
        signature = with_optional_inputs(signature, set(optional))
    info = mlflow.pyfunc.log_model(
        name=name,
        python_model=python_model,
        artifacts=local or None,
        input_example=(input_example, dict(params)) if params else input_example,
        signature=signature,
        pip_requirements=pinned(packages),
    )
    mlflow.log_text(card.to_markdown(), f"{name}/{MODEL_CARD_FILE}")
    return info


def with_optional_inputs(signature: Any, optional: set[str]) -> Any:
    """The signature with the named input columns marked not required."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, Schema

    columns = [
        ColSpec(spec.type, spec.name, required=spec.name not in optional)
        for spec in signature.inputs.inputs
    ]
    return ModelSignature(Schema(columns), signature.outputs, signature.params)


def require_contract(model_uri: str) -> Any:
    """The model's info, or a UserError when it was logged without a signature or an input
    example (log it with `log_pyfunc_model`, or give the flavour both)."""
    import mlflow

    info = mlflow.models.get_model_info(model_uri)
    missing = [
        what
        for what, value in (
            ("signature", info.signature),
            ("input example", info.saved_input_example_info),
        )
        if value is None
    ]
    if missing:
        raise UserError(
            f"{model_uri}: logged without {' and '.join(missing)}; a registry consumer could "
            "not call it (log it with tasks.core.consumer.log_pyfunc_model)"
        )
    return info
