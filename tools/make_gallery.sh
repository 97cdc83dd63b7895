#!/usr/bin/env bash
# Makes docs/gallery/contact_sheet.png (and looks.png, acescg.png): the real HDR frames of tests/data
# (their origins and licences in tests/data/README.md), through every tone
# operator at default parameters, and the depth-of-field pages (the street render focused near, middle
# and far, and a bokeh close-up). Runs on any Vulkan device (lavapipe: about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build tools/gallery tools/dof_gallery >/dev/null
frames=(tests/data/pmndrs_park.exr tests/data/blender_city.exr tests/data/psychtoolbox_Desk.exr
        tests/data/blender_street_960x540_singlelayer.exr)
mkdir -p docs/gallery
build/tools/gallery docs/gallery/contact_sheet.png "${frames[@]}"
build/tools/gallery --looks docs/gallery/looks.png "${frames[@]}"
build/tools/gallery --acescg docs/gallery/acescg.png tests/data/blender_city.exr tests/data/psychtoolbox_Desk.exr \
  tests/data/blender_street_960x540_singlelayer.exr
build/tools/dof_gallery docs/gallery tests/data/blender_street_960x540_singlelayer.exr
