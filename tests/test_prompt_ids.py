from datasets import Dataset

from lze_trl.prompt_ids import PROMPT_ID_COLUMN, content_hash, has_prompt_column, with_prompt_ids


def test_map_style_gets_row_index_even_after_reshuffle():
    ds = with_prompt_ids(Dataset.from_dict({"prompt": ["a", "b", "c"]}))
    assert ds[PROMPT_ID_COLUMN] == [0, 1, 2]
    shuffled = ds.shuffle(seed=0)
    assert with_prompt_ids(shuffled)[PROMPT_ID_COLUMN] == [0, 1, 2]


def test_iterable_gets_stable_content_hash():
    prompts = ["1+1=", [{"role": "user", "content": "hi"}]]
    ds = Dataset.from_dict({"prompt": prompts[:1]}).to_iterable_dataset()
    (row,) = list(with_prompt_ids(ds))
    assert row[PROMPT_ID_COLUMN] == content_hash("1+1=") >= 0
    assert content_hash(prompts[1]) == content_hash([{"content": "hi", "role": "user"}])  # key order irrelevant
    assert content_hash("1+1=") != content_hash("1+2=")


def test_has_prompt_column_peeks_iterables():
    assert has_prompt_column(Dataset.from_dict({"prompt": ["x"]}).to_iterable_dataset())
    assert not has_prompt_column(Dataset.from_dict({"question": ["x"]}))
