"""AOEB's embedded default tasks, built offline from real local material.

One builder per capability, each a pure function returning a `RetrievalTask` with a "train"
split (for the contrastive fine-tune), a "dev" split (where choices are made: the fine-tune's
checkpoint) and a "test" split (evaluated once, for the report), split by a group key so
that no source item (module, command family, bridge entity, user history, picture) is in
two splits:

- code.py: CPython standard-library functions, queried by their docstrings (CodeSearchNet);
- tool.py: the CLI commands of the installed dvc / mlflow / ray, queried by task (ToolRet);
- reasoning.py: two-hop questions over fact sheets of the Wikidata slice (MuSiQue, FRAMES);
- memory.py: multi-session user histories from the same facts (LongMemEval, LoCoMo);
- multimodal.py: captions of locally rendered charts and spectrograms (text → image).
"""
