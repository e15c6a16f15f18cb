"""The formal-language tasks, as in DeltaStack's code (data_dir/fl_tasks), seeded.

Every example is (inputs, targets, mask) of one length T; the target at t labels the output
at t and the mask says which positions are scored. Id 0 pads, and is the dummy input on
answer positions. Single-answer tasks score the last position; string tasks feed the prompt,
then dummies, and score every answer position. `length` is the task's own size parameter
(the string's length, the expression's characters…), drawn per example.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

Example = tuple[list[int], list[int], list[bool]]


def _last(inputs: list[int], label: int) -> Example:
    return inputs, [0] * (len(inputs) - 1) + [label], [False] * (len(inputs) - 1) + [True]


def _completion(prompt: list[int], answer: list[int]) -> Example:
    inputs = prompt + [0] * len(answer)
    targets = [0] * len(prompt) + answer
    return inputs, targets, [False] * len(prompt) + [True] * len(answer)


def parity(rng: np.random.Generator, length: int) -> Example:  # a=1, b=2
    symbols = rng.integers(1, 3, length).tolist()
    return _last(symbols, 1 if symbols.count(2) % 2 == 0 else 2)


def even_pairs(rng: np.random.Generator, length: int) -> Example:
    symbols = rng.integers(1, 3, length).tolist()
    return _last(symbols, 1 if symbols[0] == symbols[-1] else 2)


def cycle_nav(rng: np.random.Generator, length: int) -> Example:  # stay=1, +1=2, −1=3
    moves = rng.integers(1, 4, length).tolist()
    return _last(moves, 4 + (moves.count(2) - moves.count(3)) % 5)


def mod_arith_no_brack(rng: np.random.Generator, length: int) -> Example:
    """d op d op … d =, evaluated left to right mod 5; + − * = are 1–4, digits 5–9."""
    size = length + length % 2
    digits = rng.integers(0, 5, size // 2).tolist()
    operators = rng.integers(1, 4, size // 2 - 1).tolist()
    value, inputs = digits[0], [digits[0] + 5]
    for operator, digit in zip(operators, digits[1:], strict=True):
        value = {1: value + digit, 2: value - digit, 3: value * digit}[operator]
        inputs += [operator, digit + 5]
    return _last(inputs + [4], 5 + value % 5)


def _bracketed(rng: np.random.Generator, length: int) -> tuple[list[int], int]:
    """An expression of exactly `length` symbols and its value mod 5 (digits 1–5,
    + − * 6–8, ( ) 9–10)."""
    if length <= 4:
        digit = int(rng.integers(0, 5))
        forms = {
            1: ([digit + 1], digit),
            2: ([7, digit + 1], -digit),
            3: ([9, digit + 1, 10], digit),
            4: ([9, 7, digit + 1, 10], -digit),
        }
        symbols, value = forms[length]
        return symbols, value % 5
    left_length = int(rng.integers(1, length - 3))
    left, left_value = _bracketed(rng, left_length)
    right, right_value = _bracketed(rng, length - left_length - 3)
    operator = int(rng.integers(6, 9))
    value = {6: left_value + right_value, 7: left_value - right_value, 8: left_value * right_value}[
        operator
    ]
    return [9, *left, operator, *right, 10], value % 5


def mod_arith_w_brack(rng: np.random.Generator, length: int) -> Example:
    symbols, value = _bracketed(rng, length)
    return _last(symbols + [12], value + 1)


def reverse_string(rng: np.random.Generator, length: int) -> Example:  # A=1, B=2, SEP=3
    symbols = rng.integers(1, 3, length).tolist()
    return _completion(symbols + [3], symbols[::-1])


def duplicate_string(rng: np.random.Generator, length: int) -> Example:
    symbols = rng.integers(1, 3, length).tolist()
    return _completion(symbols + [3], symbols)


def dyck(rng: np.random.Generator, length: int) -> Example:
    """A valid Dyck-2 prefix of `length` brackets, SEP, then the closing suffix to predict.
    SEP=1, ( ) [ ] = 2 3 4 5; pushing and popping run in phases that flip with p = 0.15."""
    stack: list[int] = []
    prefix, popping = [], False
    for _ in range(length):
        if not stack:
            popping = False
        elif rng.random() > 0.85:
            popping = not popping
        if popping and stack:
            prefix.append(stack.pop() + 1)
        else:
            opener = 2 if rng.random() < 0.5 else 4
            stack.append(opener)
            prefix.append(opener)
    return _completion(prefix + [1], [opener + 1 for opener in reversed(stack)])


def stack_manipulation(rng: np.random.Generator, length: int) -> Example:
    """An initial stack (bottom → top), actions (POP=5, PUSH1=3, PUSH2=4), ACT=7, then the
    final stack top → bottom (values 1, 2; EMPTY=6). POP on an empty stack does nothing."""
    length = max(length, 2)
    initial = rng.integers(1, 3, int(rng.integers(1, length))).tolist()
    stack, actions = list(initial), []
    for action in rng.integers(0, 3, length - len(initial)).tolist():
        actions.append(5 if action == 0 else action + 2)
        if action:
            stack.append(action)
        elif stack:
            stack.pop()
    return _completion(initial + actions + [7], stack[::-1] or [6])


@dataclass(frozen=True)
class Language:
    name: str
    vocab_size: int
    sample: Callable[[np.random.Generator, int], Example]


LANGUAGES = {
    language.name: language
    for language in (
        Language("parity", 3, parity),
        Language("even_pairs", 3, even_pairs),
        Language("cycle_nav", 9, cycle_nav),
        Language("mod_arith_no_brack", 10, mod_arith_no_brack),
        Language("mod_arith_w_brack", 13, mod_arith_w_brack),
        Language("reverse_string", 4, reverse_string),
        Language("duplicate_string", 4, duplicate_string),
        Language("dyck", 6, dyck),
        Language("stack_manipulation", 8, stack_manipulation),
    )
}


def examples(
    language: Language, rng: np.random.Generator, size: int, min_length: int, max_length: int
) -> list[Example]:
    """`size` examples with lengths uniform in [min_length, max_length]."""
    return [
        language.sample(rng, int(rng.integers(min_length, max_length + 1))) for _ in range(size)
    ]


def collate(rows: list[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Examples as right-padded (inputs, targets, mask) tensors."""
    width = max(len(inputs) for inputs, _, _ in rows)
    inputs = torch.zeros(len(rows), width, dtype=torch.long)
    targets = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for row, (x, y, m) in enumerate(rows):
        inputs[row, : len(x)] = torch.tensor(x)
        targets[row, : len(y)] = torch.tensor(y)
        mask[row, : len(m)] = torch.tensor(m)
    return inputs, targets, mask


def batch(
    language: Language, rng: np.random.Generator, size: int, min_length: int, max_length: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`size` examples with lengths uniform in [min_length, max_length], right-padded."""
    return collate(examples(language, rng, size, min_length, max_length))
