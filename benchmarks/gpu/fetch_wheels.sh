#!/usr/bin/env bash
# Downloads into .whl/ (ignored by git) the wheels that a lent GPU machine lacks for benchmarks/gpu/run.py, at the
# versions installed in .venv, and prints their total size. The machine has no package index; its image already holds
# torch, transformers, accelerate, peft, tokenizers, pandas, pyarrow, numpy, fsspec, xxhash, pyyaml, tqdm, jinja2,
# psutil, huggingface_hub (its list: /work/.library/device/KINDS.md where that exists). Missing, and carried:
#   trl            the trainer lze_trl extends
#   datasets       imported by trl and lze_trl
#   dill           a requirement of datasets
#   multiprocess   a requirement of datasets (one wheel per Python version: the machine's is 3.12)
# Nothing it already has is carried: another version of one of its packages could break it.
#
#   bash benchmarks/gpu/fetch_wheels.sh               # .whl/, for the machine's Python 3.12
#   DEST=/tmp/w PYVER=3.11 bash benchmarks/gpu/fetch_wheels.sh   # elsewhere, for another Python (a local check)
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${DEST:-.whl}
PYVER=${PYVER:-3.12}
VENV_PY=${VENV_PY:-.venv/bin/python}
PACKAGES="trl datasets dill multiprocess"

test -x "$VENV_PY" || { echo "no $VENV_PY: run 'make install' first (the wheels follow its versions)" >&2; exit 1; }
# shellcheck disable=SC2086
PINS=$("$VENV_PY" -c 'import sys; from importlib.metadata import version; print(" ".join(f"{p}=={version(p)}" for p in sys.argv[1:]))' $PACKAGES)
echo "pins: $PINS"
rm -rf "$DEST"
mkdir -p "$DEST"
# shellcheck disable=SC2086
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" $PINS
count=$(find "$DEST" -type f -name '*.whl' | wc -l)
if [ "$count" -ne "$(echo $PACKAGES | wc -w)" ]; then
    echo "expected one wheel per package ($PACKAGES), found $count in $DEST" >&2
    exit 1
fi
ls -l "$DEST"
echo "total: $(du -ch "$DEST"/*.whl | tail -1 | cut -f1) in $count wheels ($DEST)"
