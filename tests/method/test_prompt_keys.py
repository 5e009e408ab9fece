import warnings

import numpy as np
import pytest
from datasets import Dataset

from lze_trl import LZEWarning
from lze_trl.method.prompt_keys import PromptKeys, content_key, has_prompt_column


def test_map_style_ids_are_row_indices_and_identical_rows_share_the_first_row():
    ids = PromptKeys(Dataset.from_dict({"prompt": ["a", "b", "a", "c", "b"], "level": [0, 1, 0, 3, 4]}))
    assert ids.dataset_keys.tolist() == [0, 1, 0, 3, 4]  # "b" at levels 1 and 4 are two prompts, "a" at level 0 one
    assert ids.of([{"prompt": "c", "level": 3}, {"prompt": "a", "level": 0}]).tolist() == [3, 0]
    # a row the dataset does not hold gets its content hash
    assert ids.of([{"prompt": "a", "level": 9}]).tolist() == [content_key({"prompt": "a", "level": 9})]


def test_the_same_prompt_text_for_different_tasks_keys_different_states():
    # An environment-style dataset: one template prompt, the task in a column the reward reads (the case).
    ids = PromptKeys(Dataset.from_dict({"prompt": ["Solve the task."] * 64, "k": list(range(64))}))
    assert len(set(ids.dataset_keys.tolist())) == 64


def test_only_the_columns_trl_hands_around_define_identity():
    # remove_unused_columns=True: TRL passes `prompt` (and images) only, so the other columns cannot tell rows apart.
    data = Dataset.from_dict({"prompt": ["a", "a", "b"], "k": [1, 2, 3]})
    ids = PromptKeys(data, columns=["prompt", "image", "images"])
    assert ids.dataset_keys.tolist() == [0, 0, 2]
    assert ids.of([{"prompt": "b"}]).tolist() == [2]


def test_iterable_ids_are_content_hashes_of_the_whole_row():
    ids = PromptKeys(None)
    assert ids.dataset_keys is None and ids.fingerprint is None
    chat = [{"role": "user", "content": "hi"}]
    keys = ids.of([{"prompt": "1+1="}, {"prompt": chat}, {"prompt": "1+1=", "answer": "2"}]).tolist()
    assert keys[0] == content_key({"prompt": "1+1="}) and keys[0] != keys[2] and len(set(keys)) == 3
    assert content_key({"prompt": chat}) == content_key({"prompt": [{"content": "hi", "role": "user"}]})  # key order
    assert content_key({"prompt": "1+1="}) != content_key({"prompt": "1+2="}) and keys[0] >= 0
    # types are part of the encoding: "1" and 1 differ, a list is not its elements concatenated
    assert content_key({"x": "1"}) != content_key({"x": 1})
    assert content_key({"x": ["ab", "c"]}) != content_key({"x": ["a", "bc"]})


def test_images_are_identified_by_their_pixels():
    from PIL import Image

    red, blue = Image.new("RGB", (4, 4), (255, 0, 0)), Image.new("RGB", (4, 4), (0, 0, 255))
    same_red = Image.new("RGB", (4, 4), (255, 0, 0))
    question = [{"role": "user", "content": "What colour?"}]
    assert content_key({"prompt": question, "image": red}) == content_key({"prompt": question, "image": same_red})
    assert content_key({"prompt": question, "image": red}) != content_key({"prompt": question, "image": blue})
    assert content_key({"x": np.arange(3)}) != content_key({"x": np.arange(3).astype(np.float32)})
    with pytest.raises(TypeError, match="cannot be hashed into a prompt key"):
        content_key({"x": object()})


def test_rows_without_a_prompt_are_identified_by_their_content():
    ids = PromptKeys(Dataset.from_dict({"environment": ["a", "b", "a"], "seed": [1, 2, 1]}))
    assert ids.dataset_keys.tolist() == [0, 1, 0]
    assert ids.of([{"seed": 2, "environment": "b"}]).tolist() == [1]


def test_identical_rows_under_an_environment_factory_warn_once():
    data = Dataset.from_dict({"prompt": ["Play."] * 8})
    with pytest.warns(LZEWarning, match="identical examples share one pass-rate history"):
        PromptKeys(data, environments=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PromptKeys(data)  # without an environment the rows are the same task: nothing to say
        PromptKeys(Dataset.from_dict({"prompt": ["Play."] * 8, "seed": list(range(8))}), environments=True)


def test_fingerprint_covers_the_rows_in_order():
    a = PromptKeys(Dataset.from_dict({"prompt": ["1+1=", "2+2="]})).fingerprint
    b = PromptKeys(Dataset.from_dict({"prompt": ["1+1=", "2+2="], "x": [1, 2]})).fingerprint
    c = PromptKeys(Dataset.from_dict({"prompt": ["2+2=", "1+1="]})).fingerprint
    assert a["size"] == b["size"] == 2
    assert len({a["hash"], b["hash"], c["hash"]}) == 3
    env = PromptKeys(Dataset.from_dict({"environment": ["a", "b"]})).fingerprint
    assert env["size"] == 2 and env["hash"] != a["hash"]


def test_has_prompt_column_peeks_iterables():
    assert has_prompt_column(Dataset.from_dict({"prompt": ["x"]}).to_iterable_dataset())
    assert not has_prompt_column(Dataset.from_dict({"question": ["x"]}))
