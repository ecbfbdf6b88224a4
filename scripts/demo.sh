#!/usr/bin/env bash
# The main job on the bundled sample slide: build, print the slide's info, write a region PNG,
# read every tile of level 0 through the pipeline and print the throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
cargo build --release --locked -q
bin=target/release/slidestream
slide=assets/CMU-1-Small-Region.svs
mkdir -p out
"$bin" info "$slide"
"$bin" region "$slide" --location 1000,1000 --level 0 --size 512,512 --output out/region.png
echo "wrote out/region.png (512x512 RGBA from level-0 location 1000,1000)"
"$bin" associated "$slide" thumbnail --output out/thumbnail.png
echo "wrote out/thumbnail.png"
"$bin" tiles "$slide" --level 0
