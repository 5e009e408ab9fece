import warnings

import numpy as np
import pytest
from datasets import Dataset

from lze_trl import LZEWarning
from lze_trl.prompt_ids import PromptIds, has_prompt_column, row_key


def test_map_style_ids_are_row_indices_and_identical_rows_share_the_first_row():
    ids = PromptIds(Dataset.from_dict({"prompt": ["a", "b", "a", "c", "b"], "level": [0, 1, 0, 3, 4]}))
    assert ids.row_ids.tolist() == [0, 1, 0, 3, 4]  # "b" at levels 1 and 4 are two prompts, "a" at level 0 one
    assert ids.of_rows([{"prompt": "c", "level": 3}, {"prompt": "a", "level": 0}]).tolist() == [3, 0]
    # a row the dataset does not hold gets its content hash
    assert ids.of_rows([{"prompt": "a", "level": 9}]).tolist() == [row_key({"prompt": "a", "level": 9})]


def test_the_same_prompt_text_for_different_tasks_keys_different_states():
    # An environment-style dataset: one template prompt, the task in a column the reward reads (the case).
    ids = PromptIds(Dataset.from_dict({"prompt": ["Solve the task."] * 64, "k": list(range(64))}))
    assert len(set(ids.row_ids.tolist())) == 64


def test_only_the_columns_trl_hands_around_define_identity():
    # remove_unused_columns=True: TRL passes `prompt` (and images) only, so the other columns cannot tell rows apart.
    data = Dataset.from_dict({"prompt": ["a", "a", "b"], "k": [1, 2, 3]})
    ids = PromptIds(data, columns=["prompt", "image", "images"])
    assert ids.row_ids.tolist() == [0, 0, 2]
    assert ids.of_rows([{"prompt": "b"}]).tolist() == [2]


def test_iterable_ids_are_content_hashes_of_the_whole_row():
    ids = PromptIds(None)
    assert ids.row_ids is None and ids.fingerprint is None
    chat = [{"role": "user", "content": "hi"}]
    keys = ids.of_rows([{"prompt": "1+1="}, {"prompt": chat}, {"prompt": "1+1=", "answer": "2"}]).tolist()
    assert keys[0] == row_key({"prompt": "1+1="}) and keys[0] != keys[2] and len(set(keys)) == 3
    assert row_key({"prompt": chat}) == row_key({"prompt": [{"content": "hi", "role": "user"}]})  # key order
    assert row_key({"prompt": "1+1="}) != row_key({"prompt": "1+2="}) and keys[0] >= 0
    # types are part of the encoding: "1" and 1 differ, a list is not its elements concatenated
    assert row_key({"x": "1"}) != row_key({"x": 1})
    assert row_key({"x": ["ab", "c"]}) != row_key({"x": ["a", "bc"]})


def test_images_are_identified_by_their_pixels():
    from PIL import Image

    red, blue = Image.new("RGB", (4, 4), (255, 0, 0)), Image.new("RGB", (4, 4), (0, 0, 255))
    same_red = Image.new("RGB", (4, 4), (255, 0, 0))
    question = [{"role": "user", "content": "What colour?"}]
    assert row_key({"prompt": question, "image": red}) == row_key({"prompt": question, "image": same_red})
    assert row_key({"prompt": question, "image": red}) != row_key({"prompt": question, "image": blue})
    assert row_key({"x": np.arange(3)}) != row_key({"x": np.arange(3).astype(np.float32)})
    with pytest.raises(TypeError, match="cannot be hashed into a prompt id"):
        row_key({"x": object()})


def test_rows_without_a_prompt_are_identified_by_their_content():
    ids = PromptIds(Dataset.from_dict({"environment": ["a", "b", "a"], "seed": [1, 2, 1]}))
    assert ids.row_ids.tolist() == [0, 1, 0]
    assert ids.of_rows([{"seed": 2, "environment": "b"}]).tolist() == [1]


def test_identical_rows_under_an_environment_factory_warn_once():
    data = Dataset.from_dict({"prompt": ["Play."] * 8})
    with pytest.warns(LZEWarning, match="identical rows share one pass-rate history"):
        PromptIds(data, environments=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PromptIds(data)  # without an environment the rows are the same task: nothing to say
        PromptIds(Dataset.from_dict({"prompt": ["Play."] * 8, "seed": list(range(8))}), environments=True)


def test_fingerprint_covers_the_rows_in_order():
    a = PromptIds(Dataset.from_dict({"prompt": ["1+1=", "2+2="]})).fingerprint
    b = PromptIds(Dataset.from_dict({"prompt": ["1+1=", "2+2="], "x": [1, 2]})).fingerprint
    c = PromptIds(Dataset.from_dict({"prompt": ["2+2=", "1+1="]})).fingerprint
    assert a["size"] == b["size"] == 2
    assert len({a["hash"], b["hash"], c["hash"]}) == 3
    env = PromptIds(Dataset.from_dict({"environment": ["a", "b"]})).fingerprint
    assert env["size"] == 2 and env["hash"] != a["hash"]


def test_has_prompt_column_peeks_iterables():
    assert has_prompt_column(Dataset.from_dict({"prompt": ["x"]}).to_iterable_dataset())
    assert not has_prompt_column(Dataset.from_dict({"question": ["x"]}))
