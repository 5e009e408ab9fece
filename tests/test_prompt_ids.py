from datasets import Dataset

from lze_trl.prompt_ids import PromptIds, content_hash, has_prompt_column


def test_map_style_ids_are_row_indices_and_repeated_prompts_share_the_first_row():
    ids = PromptIds(Dataset.from_dict({"prompt": ["a", "b", "a", "c", "b"], "level": [0, 1, 2, 3, 4]}))
    assert ids.row_ids.tolist() == [0, 1, 0, 3, 1]
    rows = [{"prompt": "c", "level": 3}, {"prompt": "a", "level": 9}]  # other columns do not matter
    assert ids.of_rows(rows).tolist() == [3, 0]
    # a prompt the dataset does not hold gets its content hash
    assert ids.of_rows([{"prompt": "zz"}]).tolist() == [content_hash("zz")]


def test_iterable_ids_are_content_hashes():
    ids = PromptIds(None)
    assert ids.row_ids is None and ids.fingerprint is None
    chat = [{"role": "user", "content": "hi"}]
    assert ids.of_rows([{"prompt": "1+1="}, {"prompt": chat}]).tolist() == [content_hash("1+1="), content_hash(chat)]
    assert content_hash(chat) == content_hash([{"content": "hi", "role": "user"}])  # key order irrelevant
    assert content_hash("1+1=") != content_hash("1+2=") and content_hash("1+1=") >= 0


def test_rows_without_a_prompt_are_identified_by_their_content():
    ids = PromptIds(Dataset.from_dict({"environment": ["a", "b", "a"], "seed": [1, 2, 1]}))
    assert ids.row_ids.tolist() == [0, 1, 0]
    assert ids.of_rows([{"seed": 2, "environment": "b"}]).tolist() == [1]


def test_fingerprint_covers_the_prompts_in_order_not_other_columns():
    a = PromptIds(Dataset.from_dict({"prompt": ["1+1=", "2+2="]})).fingerprint
    b = PromptIds(Dataset.from_dict({"prompt": ["1+1=", "2+2="], "x": [1, 2]})).fingerprint
    c = PromptIds(Dataset.from_dict({"prompt": ["2+2=", "1+1="]})).fingerprint
    assert a == b and a["size"] == 2
    assert a["hash"] != c["hash"]
    env = PromptIds(Dataset.from_dict({"environment": ["a", "b"]})).fingerprint
    assert env["size"] == 2 and env["hash"] != a["hash"]


def test_has_prompt_column_peeks_iterables():
    assert has_prompt_column(Dataset.from_dict({"prompt": ["x"]}).to_iterable_dataset())
    assert not has_prompt_column(Dataset.from_dict({"question": ["x"]}))
