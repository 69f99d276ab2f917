#!/usr/bin/env bash
# One-off: (re)generates the committed input-pipeline data of `scaledl bench
# pipeline` (issue #15) under datasets/pipeline/ from Debian packages already on
# the machine. Nothing is downloaded. CI never runs this (the outputs are
# committed); it is here so the set can be regenerated and checked.
#
#   datasets/pipeline/make_pipeline_data.sh [--tokenizer-only] [--scaledl build/tools/scaledl]
#
# Needs: bible-kjv (`apt-get install bible-kjv`; its text is bible-kjv-text),
# python3-skimage and python3-pil (Debian's /usr/bin/python3), and a built
# scaledl for the tokenizer (`scaledl train tokenizer`, SentencePiece's C++ trainer).
#
# Outputs (provenance and licences in datasets/pipeline/README.md):
#   kjv-genesis-leviticus.txt  King James Version, Genesis-Leviticus, one verse a line
#   kjv-bpe4k.model            SentencePiece BPE model, vocabulary 4000, trained on it
#   images/*.jpg               24 JPEGs (quality 90) from public-domain / CC0 photos
set -euo pipefail
cd "$(dirname "$0")/../.."

SCALEDL=build/tools/scaledl
TOKENIZER_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tokenizer-only) TOKENIZER_ONLY=1 ;;
    --scaledl) SCALEDL="$2"; shift ;;
    *) echo "make_pipeline_data.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

OUT=datasets/pipeline
mkdir -p "$OUT/images"

if [ "$TOKENIZER_ONLY" -eq 0 ]; then
  command -v bible >/dev/null || { echo "needs the bible program: apt-get install bible-kjv" >&2; exit 1; }
  # -f: one verse a line, "Ge1:1 In the beginning ..." (the reference stays: it is text too).
  bible -f gen1:1-gen50:26 exo1:1-exo40:38 lev1:1-lev27:34 > "$OUT/kjv-genesis-leviticus.txt"

  rm -f "$OUT"/images/*.jpg
  /usr/bin/python3 - "$OUT/images" <<'PY'
# Public-domain and CC0 photos shipped with scikit-image (licences: the docstrings
# of skimage/data/_fetchers.py, quoted in datasets/pipeline/README.md). Each
# colour photo gives three JPEGs (the whole frame with its long side at 448 and
# 352 px, and a centred square crop at 256 px); each grey one a 384 px RGB JPEG.
import sys, os
import numpy as np
from PIL import Image
from skimage import data

out = sys.argv[1]
colour = {  # name: loader
    "astronaut": data.astronaut, "rocket": data.rocket, "hubble": data.hubble_deep_field,
    "coffee": data.coffee, "chelsea": data.chelsea, "retina": data.retina,
}
grey = {"camera": data.camera, "clock": data.clock, "brick": data.brick,
        "grass": data.grass, "gravel": data.gravel, "cell": data.cell}

def save(img, name):
    img.save(os.path.join(out, name + ".jpg"), "JPEG", quality=90)

def long_side(img, n):
    w, h = img.size
    s = n / max(w, h)
    return img.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BICUBIC)

for name, f in colour.items():
    img = Image.fromarray(np.asarray(f())).convert("RGB")
    save(long_side(img, 448), f"{name}-448")
    save(long_side(img, 352), f"{name}-352")
    w, h = img.size
    s = min(w, h)
    sq = img.crop(((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s))
    save(sq.resize((256, 256), Image.BICUBIC), f"{name}-crop256")
for name, f in grey.items():
    a = np.asarray(f())
    if a.dtype != np.uint8:
        a = (a.astype(np.float64) / a.max() * 255).astype(np.uint8)
    save(long_side(Image.fromarray(a).convert("RGB"), 384), f"{name}-384")
PY
fi

"$SCALEDL" train tokenizer --corpus "$OUT/kjv-genesis-leviticus.txt" --vocab 4000 --type bpe \
  --out "$OUT/kjv-bpe4k"
ls -l "$OUT" "$OUT/images"
du -sh "$OUT"
