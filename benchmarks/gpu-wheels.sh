#!/usr/bin/env bash
# From the checkout root, on a machine with the package index: fetch into .whl/ the pinned
# wheels of benchmarks/gpu-wheels.txt that the offline GPU node lacks, then print
# the line to run first in every job there (benchmarks/README.md, "Offline GPU node").
#   PYTHON_VERSION  the node's Python (default 3.12)
#   WHEEL_DIR       where the wheels go (default .whl, ignored by git)
set -euo pipefail
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
WHEEL_DIR=${WHEEL_DIR:-.whl}
grep -q '^name = "interp-init"' pyproject.toml 2>/dev/null || { echo "run from the interp-init checkout root" >&2; exit 2; }
mapfile -t WHEELS < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' benchmarks/gpu-wheels.txt)
mkdir -p "$WHEEL_DIR"
for spec in "${WHEELS[@]}"; do  # two versions of one package would stop the install
    stem=${spec%%==*}; stem=${stem//-/_}
    for f in "$WHEEL_DIR/$stem"-*.whl; do
        [[ ! -e $f || $f == "$WHEEL_DIR/$stem-${spec#*==}"-* ]] || { echo "removing stale $f" >&2; rm -f -- "$f"; }
    done
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d "$WHEEL_DIR" "${WHEELS[@]}"
[ "$(ls "$WHEEL_DIR"/*.whl | wc -l)" = "${#WHEELS[@]}" ] || echo "warning: $WHEEL_DIR holds other wheels too; the install line takes them all" >&2
du -ch "$WHEEL_DIR"/*.whl | tail -n 1 >&2
case $WHEEL_DIR in /*) SITE=$WHEEL_DIR/site ;; *) SITE=\$PWD/$WHEEL_DIR/site ;; esac
echo "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $WHEEL_DIR/site $WHEEL_DIR/*.whl && export PYTHONPATH=$SITE:\$PWD"
echo "then: python3 benchmarks/gpu_campaign.py next --budget-seconds 540 --out /tmp/campaign-runs --profile --archive \$OUT/campaign.tar.gz (docs/campaign.md); python3 -m training.cli ... (= interp-init)" >&2
